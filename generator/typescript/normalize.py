"""Schema normalisation: one canonical shape for the many spellings JSON Schema allows.

Servers send draft-04 through 2020-12 and OpenAPI-flavoured schemas. Translating every
spelling separately would spread draft quirks over the whole translator, so each schema
node is rewritten (shallowly, when the translator visits it) into one vocabulary:

- `type` is always a list of known type names (`nullable: true` adds `"null"`);
- `const` becomes a one-value `enum` (intersected with an `enum` that is also present);
- a draft-07 `items` array becomes `prefixItems` with `additionalItems` as the rest `items`;
- `dependencies` splits into `dependentRequired` / `dependentSchemas`;
- malformed keyword values are dropped with a warning (dropping a constraint only widens
  the type, so it never rejects valid data).

Nodes are normalised lazily rather than the whole document up front so JSON Pointers into
the original document (used by `$ref`) stay valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from codemode_gen.jsonio import json_type

# Set on a normalised node whose `prefixItems` came from a draft-07 `items` array, so JSON
# Pointers the translator builds still name the keyword present in the document.
PREFIX_ORIGIN = "\x00prefixItems-origin"

TYPE_NAMES = ("null", "boolean", "integer", "number", "string", "array", "object")

Warn = Callable[[str, str, str], None]  # (pointer, keyword, message)


def detect_draft(root: Any) -> int:
    """7 for draft-03/04/06/07, 2019 for 2019-09, else 2020 (2020-12 is the MCP default)."""
    if isinstance(root, dict):
        uri = root.get("$schema")
        if isinstance(uri, str) and any(f"draft-0{n}" in uri for n in (3, 4, 6, 7)):
            return 7
        if isinstance(uri, str) and "2019-09" in uri:
            return 2019
    return 2020


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`, `1` is `1.0`, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_kind(value: Any) -> str | None:
    """The JSON Schema type name of a decoded JSON value (numbers are all "number")."""
    return json_type(value, integer=False)


def normalize(node: dict[str, Any], ptr: str, draft: int, warn: Warn) -> dict[str, Any]:
    """Return a normalised shallow copy of one schema object (never raises)."""
    n = dict(node)

    # type: str | list[str] -> list of known names; unknown names are kept out and reported.
    if "type" in n:
        raw = n["type"]
        names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
        if names is None or not names or not all(isinstance(t, str) for t in names):
            warn(ptr, "type", "malformed `type` ignored")
            del n["type"]
        else:
            bad = [t for t in names if t not in TYPE_NAMES]
            if bad:
                warn(
                    ptr,
                    "type",
                    f"unknown type name(s) {', '.join(map(repr, bad))}; any type allowed",
                )
                del n["type"]
            else:
                n["type"] = list(dict.fromkeys(names))

    # OpenAPI 3.0 `nullable: true` widens the declared type by null.
    if n.get("nullable") is True:
        if "type" in n and "null" not in n["type"]:
            n["type"] = [*n["type"], "null"]
        if "enum" in n and isinstance(n["enum"], list) and not any(v is None for v in n["enum"]):
            n["enum"] = [*n["enum"], None]

    if "enum" in n and not isinstance(n["enum"], list):
        warn(ptr, "enum", "malformed `enum` (not an array) ignored")
        del n["enum"]
    if "const" in n:
        const = n.pop("const")
        if "enum" in n:
            n["enum"] = [v for v in n["enum"] if json_equal(v, const)]
        else:
            n["enum"] = [const]

    # Tuples: draft-07 spelling (`items: [...]` + `additionalItems`) -> 2020-12 spelling.
    items = n.get("items")
    if isinstance(items, list):
        n["prefixItems"] = items
        n[PREFIX_ORIGIN] = "items"
        if "additionalItems" in n:
            n["items"] = n.pop("additionalItems")
        else:
            del n["items"]
    else:
        n.pop("additionalItems", None)  # without an items array it has no effect
        if draft < 2020:
            n.pop("prefixItems", None)  # not a keyword before 2020-12
    for key in ("prefixItems", "allOf", "anyOf", "oneOf"):
        if key in n and not (isinstance(n[key], list) and n[key]):
            warn(ptr, key, f"malformed `{key}` (not a non-empty array) ignored")
            del n[key]

    # draft-07 `dependencies` -> 2019-09 split.
    deps = n.pop("dependencies", None)
    if isinstance(deps, dict):
        req = {k: v for k, v in deps.items() if isinstance(v, list)}
        sch = {k: v for k, v in deps.items() if not isinstance(v, list)}
        if req:
            n.setdefault("dependentRequired", req)
        if sch:
            n.setdefault("dependentSchemas", sch)

    for key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
        if key in n and not isinstance(n[key], dict):
            warn(ptr, key, f"malformed `{key}` (not an object) ignored")
            del n[key]
    if "required" in n:
        req_list = n["required"]
        if isinstance(req_list, list):
            n["required"] = list(dict.fromkeys(r for r in req_list if isinstance(r, str)))
        else:
            del n["required"]  # draft-03 boolean `required` or garbage: no constraint
    for key in ("minItems", "maxItems", "minProperties", "maxProperties"):
        if key in n:
            v = n[key]
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or v < 0
                or not math.isfinite(v)
            ):
                warn(ptr, key, f"malformed `{key}` ignored")
                del n[key]
            else:
                n[key] = math.ceil(v) if key.startswith("min") else math.floor(v)
    return n
