"""The `[[samples]]` entry `generate` suggests for a tool whose output type is unknown.

A tool that declares no outputSchema and was never called while recording types as
`Promise<unknown>`: the agent must run it, log and read the result before it can use it
("one call is enough", output-type-inference-article.md). One recorded call fixes that, so
`generate` prints the codemode.toml entry that makes `record` make it, with an input built from
the tool's inputSchema (defaults, examples, enums, else a placeholder of the right type) for the
user to fill in. Pure: text in, text out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["sample_entry"]

# A TOML bare key; anything else is written as a quoted key.
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
# Bounds the placeholder built for one input: nested required objects stop here (a schema can
# nest without end through $ref cycles or plain depth), so the entry stays one readable line.
MAX_PLACEHOLDER_DEPTH = 3
# Placeholder of a required string with no default, example or enum: obviously to be replaced.
STRING_PLACEHOLDER = "TODO"


def sample_entry(server: str, tool: str, input_schema: Any, annotations: Any = None) -> str:
    """The TOML lines of one `[[samples]]` table for `server` (the .mcp.json key) and `tool`."""
    lines = ["[[samples]]", f"server = {_toml(server)}", f"tool = {_toml(tool)}"]
    value = _placeholder(input_schema, 0)
    lines.append(f"input = {_toml(value if isinstance(value, dict) else {})}")
    if not (isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True):
        lines[0] += "  # not marked read-only: `record` will really call it"
    return "\n".join(lines)


def _placeholder(schema: Any, depth: int) -> Any:
    """A value for `schema`: its default, first example, first enum value or const, else one of
    its type built from its required properties only."""
    if not isinstance(schema, Mapping):
        return STRING_PLACEHOLDER
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("examples", "enum"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _placeholder(options[0], depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in schema):
        if depth >= MAX_PLACEHOLDER_DEPTH:
            return {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        return {name: _placeholder(properties.get(name), depth + 1) for name in names}
    return {
        "string": STRING_PLACEHOLDER,
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
        "null": STRING_PLACEHOLDER,  # TOML has no null: a string to replace
    }.get(str(kind), STRING_PLACEHOLDER)


def _toml(value: Any) -> str:
    """`value` as a TOML inline value (JSON's string escapes are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value if v is not None) + "]"
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {_toml(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    return _toml(STRING_PLACEHOLDER)


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)
