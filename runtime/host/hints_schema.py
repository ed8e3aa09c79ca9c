"""How a tool's result looks, read from its output schema (for the hints of runtime/host/hints.py).

The hints of a failed run (§3.3.3 `hint`) name what a value was: `{ result: Note[] }`, a JSON
text, an optional field. That knowledge is in the tool's output schema from the run's catalog
(out/'s manifest), whose `$ref`s, nullable unions and JSON-text strings (generator/infer.py's
`contentMediaType`) need reading the same way by the script model (hints_script.py) and by the
explanations (hints_mistakes.py); this module is that one reading, bounded by MAX_REF_HOPS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: `$ref`s followed inside one output schema; bounds a schema whose refs loop.
MAX_REF_HOPS = 16
#: Characters of the script's own text quoted in a message or hint (longer ones are cut).
MAX_SNIPPET_CHARS = 80


def resolve(schema: Any, root: Any) -> Mapping[str, Any]:
    """`schema` with local `$ref`s followed and a nullable `anyOf`/`oneOf` (T | null) reduced to
    T; {} when it is not a schema object."""
    for _ in range(MAX_REF_HOPS):
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            schema = target
            continue
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                real = [
                    o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")
                ]
                if len(real) == 1:
                    schema = real[0]
                    break
        else:
            return schema
    return schema if isinstance(schema, Mapping) else {}


def schema_kind(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, list):
        real = [t for t in declared if t != "null"]
        declared = real[0] if len(real) == 1 else None
    if isinstance(declared, str):
        return declared
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def properties(schema: Any) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return dict(props) if isinstance(props, Mapping) else {}


def nullable(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    declared = schema.get("type")
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return True
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and any(
            isinstance(o, Mapping) and o.get("type") == "null" for o in options
        ):
            return True
    return False


def json_text(schema: Mapping[str, Any]) -> bool:
    """A string result whose recordings were JSON (generator/infer.py marks it so)."""
    media = schema.get("contentMediaType")
    return isinstance(media, str) and media.split(";")[0].strip().lower() in (
        "application/json",
        "text/json",
    )


def schema_at(schema: Any, path: Iterable[str | int]) -> Any:
    current = schema
    for step in path:
        resolved = resolve(current, schema)
        current = resolved.get("items") if isinstance(step, int) else properties(resolved).get(step)
    return current


def shape(schema: Any, root: Any, depth: int = 0) -> str:
    """A short TypeScript-like picture of a schema: `{ result: Note[] }`, `string`."""
    resolved = resolve(schema, root)
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    title = resolved.get("title")
    if isinstance(ref, str) and isinstance(title, str) and re.fullmatch(r"[A-Z]\w{0,40}", title):
        return title
    kind = schema_kind(resolved)
    if kind == "array":
        return f"{shape(resolved.get('items'), root, depth + 1)}[]" if depth < 3 else "array"
    if kind == "object":
        props = sorted(properties(resolved))
        if depth >= 2 or not props:
            return "object"
        shown = ", ".join(
            f"{p}: {shape(properties(resolved)[p], root, depth + 1)}" for p in props[:4]
        )
        return "{ " + shown + (", …" if len(props) > 4 else "") + " }"
    return kind or "unknown"


def declared_return(declaration: str | None) -> str | None:
    """`{ result: Note[] }` from `...): Promise<{ result: Note[] }>;` (the generated declaration)."""
    if not declaration:
        return None
    start = declaration.find("): Promise<")
    if start < 0:
        return None
    i, depth = start + len("): Promise<"), 1
    for j in range(i, min(len(declaration), i + 2000)):
        ch = declaration[j]
        if ch == "<":
            depth += 1
        elif ch == ">" and declaration[j - 1] != "=":
            depth -= 1
            if depth == 0:
                text = " ".join(declaration[i:j].split())
                return cut(text)
    return None


def cut(text: str) -> str:
    """`text`, cut to MAX_SNIPPET_CHARS (the script's text or a declaration quoted in a hint)."""
    return text if len(text) <= MAX_SNIPPET_CHARS else text[: MAX_SNIPPET_CHARS - 1] + "…"
