"""A minimal payload for a tool's input schema: the `example` of a SchemaValidationError (§7.2).

An agent told only "invalid input" guesses again; one shown a payload that would have worked
copies its shape. The schema's own `examples`/`default` come first, else one is synthesised
from the schema (required properties only, `$ref`s followed), bounded by MAX_EXAMPLE_DEPTH
because a server's schema may be recursive. Kept apart from validation_errors.py, which puts
the example into the error, because it is a pure function of the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode_gen.jsonio import resolve_pointer

__all__ = ["MAX_EXAMPLE_DEPTH", "example_for"]

# Bounds example synthesis on recursive ($ref cycles) or absurdly nested schemas: without it a
# self-referencing `required` property would recurse forever.
MAX_EXAMPLE_DEPTH = 6
# Bounds the items synthesised for an array's `minItems` (a larger `minItems` gets an empty
# example array): the example goes into the agent's context.
MAX_EXAMPLE_ITEMS = 8


def example_for(schema: Any) -> Any:
    """A minimal valid-looking payload: the schema's own `examples`/`default`, else synthesised.

    Synthesis fills only required properties, so the example shows the least an agent must
    send; optional properties are the agent's choice.
    """
    return _example(schema, schema, 0)


def resolve_ref(root: Any, ref: str) -> Any:
    """The schema a local `$ref` (`#/$defs/Note`) of `root` names; {} for any other ref."""
    return resolve_pointer(root, ref[1:], {}) if ref.startswith("#") else {}


def _example(schema: Any, root: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping):
        return {} if schema is None or schema is True else None
    if depth > MAX_EXAMPLE_DEPTH:
        return None
    if "$ref" in schema and isinstance(schema["$ref"], str):
        return _example(resolve_ref(root, schema["$ref"]), root, depth + 1)
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            non_null = [
                o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")
            ]
            return _example((non_null or options)[0], root, depth + 1)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            got = _example(part, root, depth + 1)
            if isinstance(got, dict):
                merged.update(got)
        if merged:
            return merged
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((t for t in declared if t != "null"), declared[0] if declared else None)
    if declared is None:
        declared = "object" if "properties" in schema or "required" in schema else None
    if declared == "object":
        props_raw = schema.get("properties")
        props: Mapping[str, Any] = props_raw if isinstance(props_raw, Mapping) else {}
        required_raw = schema.get("required")
        required: list[Any] = required_raw if isinstance(required_raw, list) else []
        return {
            name: _example(props.get(name, {}), root, depth + 1)
            for name in required
            if isinstance(name, str)
        }
    if declared == "array":
        count = schema.get("minItems", 0)
        items = schema.get("items", {})
        if isinstance(schema.get("prefixItems"), list):
            return [_example(s, root, depth + 1) for s in schema["prefixItems"]]
        if isinstance(items, list):
            return [_example(s, root, depth + 1) for s in items]
        count = count if isinstance(count, int) and 0 < count <= MAX_EXAMPLE_ITEMS else 0
        return [_example(items, root, depth + 1) for _ in range(count)]
    if declared == "string":
        fmt = schema.get("format")
        by_format = {
            "date": "2026-01-31",
            "date-time": "2026-01-31T12:00:00Z",
            "email": "user@example.com",
            "uri": "https://example.com",
            "uuid": "00000000-0000-4000-8000-000000000000",
        }
        if fmt in by_format:
            return by_format[fmt]
        min_len = schema.get("minLength", 0)
        return "x" * min_len if isinstance(min_len, int) and 0 < min_len <= 16 else "text"
    if declared in ("integer", "number"):
        for key in ("minimum", "exclusiveMinimum"):
            bound = schema.get(key)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                return bound + (1 if key == "exclusiveMinimum" else 0)
        return 1
    if declared == "boolean":
        return True
    if declared == "null":
        return None
    return None
