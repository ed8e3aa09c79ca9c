"""Spec §5.3.2: turn a raw CallToolResult into the JSON value a binding returns.

This is the single implementation: the runtime's bridge calls it on live results and the
generator calls it on recorded ones, so an inferred output type always describes exactly what
a script receives.

Boxed results (a scalar or list a server wraps in `{"result": …}`) are recognised here too
(`read_box`, below), and unboxed after the §5.3.2 rules when a server has `unbox = true`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from codemode_gen import payload

UnwrapMode = Literal["spec", "json"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def parse_json_text(text: str) -> tuple[bool, Any]:
    """(True, value) when `text` is strict JSON (no NaN/Infinity, which JSON.parse rejects).

    Text nested too deeply for the parser (a JSON depth bomb) counts as "not JSON" and stays
    a string rather than crashing the caller.
    """
    try:
        # In bounded pieces for a long text: the runtime parses results off its event loop,
        # where one long C call would still hold the GIL (codemode_gen.payload).
        return True, payload.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError, as is ours
        return False, None


def unwrap_result(result: dict[str, Any], mode: UnwrapMode = "spec") -> Any:
    """Apply §5.3.2 rules 1-4 in order.

    Rule 1 treats `"structuredContent": null` as absent: MCP defines structuredContent as an
    object, and SDKs serialise "not provided" as null or omit it.

    mode "json" is a documented, opt-in deviation (codemode.toml `[servers.<id>] unwrap =
    "json"`): a rule-2 text that is valid JSON is returned parsed; any other text stays a string.
    """
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    if len(blocks) == 1:
        block = blocks[0]
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            text: str = block["text"]
            if mode == "json":
                ok, value = parse_json_text(text)
                if ok:
                    return value
            return text
    # Rule 3 (any image/audio block) and rule 4 (everything else) both return the full result
    # object; binary payloads are already base64 strings on the wire and are left untouched.
    return result


# --------------------------------------------------------------------------- boxed results
#
# MCP structured content must be an object, so servers box a scalar or list return value in a
# one-field object and say so in the declared outputSchema:
#
# - OpenMCP/Dedalus: `"x-dedalus-box": {"field": "result"}` next to `properties.result`;
# - the standalone `fastmcp` package (2.10+): `"x-fastmcp-wrap-result": true`, field `result`
#   (3.2+ also marks each result with `_meta: {"fastmcp": {"wrap_result": true}}`);
# - FastMCP of the `mcp` SDK (1.10+; `MCPServer` in 2.x): no marker at all. Its wrapper is a
#   pydantic model `<function>Output` with the one required field `result`, so the schema is
#   exactly `{"type": "object", "properties": {"result": …}, "required": ["result"],
#   "title": "<function>Output"}` (plus `$defs`): that shape is the marker.
#
# The box is recognised from the declared schema only (never guessed from samples). Spec
# behaviour returns the box as it is (§5.3.2 rule 1); `unbox = true` (codemode.toml) returns
# the field's value instead, a documented deviation applied after the §5.3.2 rules.

BoxMarker = Literal["x-dedalus-box", "x-fastmcp-wrap-result", "mcp-sdk"]
# The field FastMCP (both flavours) boxes a value under.
FASTMCP_FIELD = "result"
# Keywords the mcp SDK's `<function>Output` wrapper schema has; any other means a real model.
_SDK_WRAPPER_KEYS = frozenset({"type", "properties", "required", "title", "$defs"})
# A boxed field name is server text that ends up in doc tags and messages: bounded.
MAX_BOX_FIELD_CHARS = 64


@dataclass(frozen=True)
class Box:
    """A recognised box: the declared outputSchema says the value lives in `field`."""

    field: str
    marker: BoxMarker


def read_box(schema: Any) -> tuple[Box | None, str | None]:
    """(the box a declared outputSchema marks, a warning when a marker is present but unusable)."""
    if not isinstance(schema, Mapping):
        return None, None
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    if "x-dedalus-box" in schema:
        marker = schema["x-dedalus-box"]
        field = marker.get("field") if isinstance(marker, Mapping) else None
        if not isinstance(field, str) or not field or len(field) > MAX_BOX_FIELD_CHARS:
            return None, 'x-dedalus-box ignored: expected {"field": "<property name>"}'
        if field not in props:
            return None, "x-dedalus-box ignored: its field is not a property of the outputSchema"
        return Box(field, "x-dedalus-box"), None
    if "x-fastmcp-wrap-result" in schema:
        if schema["x-fastmcp-wrap-result"] is not True:
            return None, None  # `false` (or anything else) says "not wrapped"
        if FASTMCP_FIELD not in props:
            return None, "x-fastmcp-wrap-result ignored: the outputSchema has no `result` property"
        return Box(FASTMCP_FIELD, "x-fastmcp-wrap-result"), None
    title = schema.get("title")
    if (
        schema.get("type") == "object"
        and set(props) == {FASTMCP_FIELD}
        and schema.get("required") == [FASTMCP_FIELD]
        and isinstance(title, str)
        and len(title) > len("Output")
        and title.endswith("Output")
        and set(schema) <= _SDK_WRAPPER_KEYS
    ):
        return Box(FASTMCP_FIELD, "mcp-sdk"), None
    return None, None


def find_box(schema: Any) -> Box | None:
    return read_box(schema)[0]


def inner_schema(schema: Mapping[str, Any], box: Box) -> dict[str, Any]:
    """The schema of the boxed value: `properties[field]`, made a root of its own.

    The root's `$defs`/`definitions` and `$schema` come along, so `#/$defs/…` references and
    the dialect still resolve (the inner schema's own definitions win on a name clash)."""
    props = schema.get("properties")
    raw = props.get(box.field) if isinstance(props, Mapping) else None
    if raw is True or raw is None:
        inner: dict[str, Any] = {}
    elif raw is False:
        inner = {"not": {}}
    else:
        inner = dict(raw) if isinstance(raw, Mapping) else {}
    for key in ("$defs", "definitions"):
        outer = schema.get(key)
        if isinstance(outer, Mapping):
            own = inner.get(key)
            inner[key] = {**outer, **(own if isinstance(own, Mapping) else {})}
    if "$schema" in schema and "$schema" not in inner:
        inner["$schema"] = schema["$schema"]
    return inner


def unbox_value(value: Any, box: Box) -> tuple[bool, Any]:
    """(True, inner value) when `value` is an object holding the boxed field, else (False, value)."""
    if isinstance(value, dict) and box.field in value:
        return True, value[box.field]
    return False, value
