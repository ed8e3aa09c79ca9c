"""Doc comments from schema annotations, and which titles are only generated noise.

One stage of the translator (generator/typescript/translator.py). `schema_doc` turns a schema's
`title`, `description`, constraints TypeScript cannot check (`≥ 1`, `format: uri`, `pattern`),
`default`, `examples` and `deprecated` into doc-comment lines, every piece of server text
sanitised (printer.sanitize_doc). Titles that only respell the documented name or the tool's
(`create_noteArguments` for `CreateNoteInput`) are framework output, not information, and are
dropped: the lines are agent context on every request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from codemode_gen.generator.typescript.printer import CONSTRAINTS_LABEL, MAX_DOC_CHARS, sanitize_doc

# Most `examples` quoted in one doc comment.
MAX_EXAMPLES = 3
# Longest JSON rendering of a `default`/example value in a doc comment.
MAX_DOC_VALUE_CHARS = 200
# Constraints TypeScript cannot check, quoted in the doc comment in this order.
_CONSTRAINT_KEYS = (
    "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "contentMediaType", "contentEncoding",
)  # fmt: skip


def _compact_json(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > MAX_DOC_VALUE_CHARS:
        text = text[:MAX_DOC_VALUE_CHARS] + "…"
    return text


_CONSTRAINT_SET = frozenset(_CONSTRAINT_KEYS)
_DOC_KEYS = frozenset(
    {"title", "description", "type", "format", *_CONSTRAINT_KEYS, "readOnly", "writeOnly", "default",
     "examples", "deprecated"}
)  # fmt: skip
_RARE_DOC_KEYS = _DOC_KEYS - {"title", "description", "type"}


# Suffixes that server frameworks append to a function's name to title the models they
# synthesise for it (pydantic/FastMCP `create_noteArguments`, `create_noteOutput`; other SDKs
# `…Input`, `…Params`, `…Result`, …). Longest first, so one suffix is stripped at most.
_GENERATED_TITLE_SUFFIXES = (
    "parameters", "arguments", "response", "request", "output", "params", "result", "input", "args",
)  # fmt: skip
_NOT_ALNUM = re.compile(r"[^0-9a-z]")
# Bounds as symbols (`length ≤200`, not `maxLength: 200`): the same fact in a third of the
# characters, in the .d.ts and in the agent's prompt.
_BOUND_SYMBOLS = {
    "minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
    "minLength": "length ≥", "maxLength": "length ≤", "minItems": "items ≥", "maxItems": "items ≤",
    "minProperties": "keys ≥", "maxProperties": "keys ≤",
}  # fmt: skip
# Shortest function-name stem that a generated title may share with the end of a tool name.
MIN_TITLE_STEM = 3


def _squash(text: str) -> str:
    return _NOT_ALNUM.sub("", text.lower())


def _stem(squashed: str) -> str:
    for suffix in _GENERATED_TITLE_SUFFIXES:
        if squashed.endswith(suffix) and len(squashed) > len(suffix):
            return squashed[: -len(suffix)]
    return squashed


def is_generated_title(title: str, names: Sequence[str]) -> bool:
    """True when `title` only respells one of `names` (a type or tool name), in any casing or
    separators and with or without a generated suffix: it carries no information, so printing
    it would only cost agent context on every request."""
    squashed = _squash(title)
    if not squashed:
        return False
    stem = _stem(squashed)
    for name in names:
        other = _squash(name)
        if squashed == other or stem == _stem(other):
            return True
        # `addArguments` for the tool `git_add`: frameworks title a model after the function,
        # which servers often prefix (git_, browser_) when they name the tool.
        if stem != squashed and len(stem) >= MIN_TITLE_STEM and other.endswith(stem):
            return True
    return False


def schema_doc(node: Any, name: str | None = None, *, derived: Sequence[str] = ()) -> list[str]:
    """Doc-comment lines from a schema's annotations and the constraints TS cannot check.

    `name` is the property or type name the lines document: a title that only repeats it is
    dropped; `derived` are the names of a declaration (its own and the tool's) whose generated
    spellings (`create_noteArguments` for `CreateNoteInput`) are dropped too.
    """
    if not isinstance(node, dict):
        return []
    keys = node.keys()
    if keys.isdisjoint(_DOC_KEYS):
        return []
    lines: list[str] = []
    title = node.get("title")
    if (
        isinstance(title, str)
        and title.strip()
        # generated titles ("Body" for `body`) only cost agent context
        and (name is None or _squash(title) != _squash(name))
        and not (derived and is_generated_title(title, derived))
    ):
        lines.append(sanitize_doc(title))
    description = node.get("description")
    if isinstance(description, str):
        if (
            len(description) <= MAX_DOC_CHARS
            and description.isascii()
            and description.isprintable()
            and "*/" not in description
        ):
            text = description.strip()  # sanitize_doc's own fast path, without the call
            keep = bool(text)
        else:
            keep = bool(description.strip())
            text = sanitize_doc(description) if keep else ""
        if keep and text not in lines:
            lines.append(text)
    types = node.get("type")
    integer = types == "integer" or (
        isinstance(types, list) and "integer" in types and "number" not in types
    )
    if keys.isdisjoint(_RARE_DOC_KEYS):  # most schemas document no more than this
        if integer:
            lines.append(CONSTRAINTS_LABEL + "integer.")
        return lines
    constraints: list[str] = ["integer"] if integer else []
    if isinstance(node.get("format"), str):
        constraints.append(f"format: {node['format']}")
    if not keys.isdisjoint(_CONSTRAINT_SET):
        for key in _CONSTRAINT_KEYS:
            value = node.get(key)
            if key in node and isinstance(value, (int, float, str, bool)):
                shown = str(value) if key == "pattern" else _compact_json(value)
                bound = _BOUND_SYMBOLS.get(key)
                constraints.append(f"{bound}{shown}" if bound else f"{key}: {shown}")
    if constraints:
        lines.append(sanitize_doc(CONSTRAINTS_LABEL + ", ".join(constraints) + "."))
    if node.get("readOnly") is True:
        lines.append("Read-only.")
    if node.get("writeOnly") is True:
        lines.append("Write-only.")
    if "default" in node:
        lines.append(sanitize_doc("@default " + _compact_json(node["default"])))
    examples = node.get("examples")
    if isinstance(examples, list):
        lines.extend(sanitize_doc("@example " + _compact_json(e)) for e in examples[:MAX_EXAMPLES])
    if node.get("deprecated") is True:
        lines.append("@deprecated")
    return lines
