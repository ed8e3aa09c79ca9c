"""The SchemaValidationError an input that failed its schema gets (spec §7.2): one precise error.

jsonschema's best error is phrased for a Python reader and may copy a whole value. This module
turns it into what a model acts on: the failing property as a JSON Pointer, what was expected
and what was received (values shown cut to MAX_SHOWN_VALUE_CHARS, lists to MAX_LISTED_ITEMS),
one action to take (a misnamed property, positional arguments where the tool takes an object)
and an example payload (schema_examples.py). It also words the inputs the sandbox refused at
its boundary (too large, too deep). validation.py decides when an input is invalid.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError

from codemode_gen.jsonio import json_type, pointer_token
from codemode_gen.runtime.host.schema_examples import example_for, resolve_ref
from codemode_gen.runtime.jsonsafe import json_depth_exceeds, safe_name
from codemode_gen.runtime.limits import MAX_INPUT_BYTES, MAX_JSON_DEPTH
from codemode_gen.runtime.near_miss import closest_names

# Bounds the length of a value echoed back in an error ("received ..."): a multi-megabyte
# string must not be copied into the agent's context.
MAX_SHOWN_VALUE_CHARS = 60
# Bounds the number of properties shown when an error lists allowed names or enum values.
MAX_LISTED_ITEMS = 8
# Bounds how much of an input property name is kept in an error path (a name can be megabytes).
MAX_PATH_SEGMENT_CHARS = 200


@dataclass
class InputInvalid(Exception):
    """Input failed validation; `payload()` is the SchemaValidationError reply (§7.2)."""

    tool_name: str
    export_name: str
    path: str
    expected: str
    received: str
    hint: str
    example: Any
    detail: str
    # "size" or "depth" when the input was refused at the sandbox boundary, not by its schema
    refused: str | None = None

    def __str__(self) -> str:
        return self.message

    @property
    def message(self) -> str:
        where = self.path or "(root)"
        return (
            f"invalid input for {self.export_name} ({self.tool_name}) at {where}: "
            f"expected {self.expected}, received {self.received}"
        )

    def payload(self) -> dict[str, Any]:
        """The host reply's error object, field names as in @codemode/errors."""
        return {
            "errorClass": "SchemaValidationError",
            "message": self.message,
            "hint": self.hint,
            "toolName": self.tool_name,
            "exportName": self.export_name,
            "path": self.path,
            "expected": self.expected,
            "received": self.received,
            "example": self.example,
        }


def rejected_input(schema: Any, tool_name: str, export_name: str, why: Any) -> InputInvalid:
    """The SchemaValidationError for an input the worker refused to forward (`inputRejected`:
    `{"reason": "size", "bytes"}` or `{"reason": "depth"}`)."""
    reason = why.get("reason") if isinstance(why, Mapping) else None
    if reason == "size":
        size = why.get("bytes")
        return invalid(
            schema,
            tool_name,
            export_name,
            "",
            f"at most {MAX_INPUT_BYTES} bytes of JSON",
            f"{size if isinstance(size, int) else 'more'} bytes",
            "send less per call: split the data over several calls",
            refused="size",
        )
    return too_deep(schema, tool_name, export_name)


def too_deep(schema: Any, tool_name: str, export_name: str) -> InputInvalid:
    return invalid(
        schema,
        tool_name,
        export_name,
        "",
        f"objects and arrays nested at most {MAX_JSON_DEPTH} levels deep",
        f"a value nested deeper than {MAX_JSON_DEPTH} levels",
        f"flatten the input: at most {MAX_JSON_DEPTH} levels of nested objects and arrays",
        refused="depth",
    )


def at_most(value: Any, limit: int) -> bool:
    """Whether `value` holds at most `limit` JSON values (stops counting past it)."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return False
        if isinstance(item, dict):
            if count + len(item) > limit:
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            if count + len(item) > limit:
                return False
            stack.extend(item)
    return True


def _pointer(parts: list[Any]) -> str:
    return "".join("/" + pointer_token(_segment(p)) for p in parts)


def _segment(part: Any) -> str:
    """A path segment as shown: an input's property name is the script's, so it is sanitised
    and cut (the path goes into messages and the trace)."""
    return safe_name(part, MAX_PATH_SEGMENT_CHARS)


def show(value: Any) -> str:
    """At most MAX_SHOWN_VALUE_CHARS of a value's JSON, without serialising all of a big one."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_VALUE_CHARS:
        value = value[:MAX_SHOWN_VALUE_CHARS]
    elif isinstance(value, list | dict) and not at_most(value, MAX_SHOWN_VALUE_CHARS):
        return "[…]" if isinstance(value, list) else "{…}"
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    if len(text) > MAX_SHOWN_VALUE_CHARS:
        text = text[: MAX_SHOWN_VALUE_CHARS - 1] + "…"
    return safe_name(text, MAX_SHOWN_VALUE_CHARS)


def _received(value: Any) -> str:
    kind = json_type(value) or "object"
    if kind in ("object", "array"):
        return kind
    return f"{kind} {show(value)}"


def _list(items: Any) -> str:
    items = (
        list(items)
        if isinstance(items, list | tuple)
        else list(itertools.islice(items, MAX_LISTED_ITEMS + 1))
    )
    shown = ", ".join(show(i) for i in items[:MAX_LISTED_ITEMS])
    return shown + (", …" if len(items) > MAX_LISTED_ITEMS else "")


def expected_root(schema: Any) -> str:
    if isinstance(schema, Mapping) and "type" in schema:
        declared = schema["type"]
        return " or ".join(declared) if isinstance(declared, list) else str(declared)
    return "a value"


def _where(path: str) -> str:
    return f"`input{_js_path(path)}`" if path else "the input"


def _js_path(path: str) -> str:
    out = ""
    for raw in path.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if part.isdigit():
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def raise_from(error: ValidationError, root: Any, tool_name: str, export_name: str) -> None:
    parts = list(error.absolute_path)
    keyword = error.validator
    sub = error.schema if isinstance(error.schema, Mapping) else {}
    value = error.instance
    arg = error.validator_value
    received = _received(value)
    hint: str
    if keyword == "required" and isinstance(arg, list) and arg:
        missing = next((m for m in arg if isinstance(value, Mapping) and m not in value), arg[0])
        parts.append(missing)
        prop = sub.get("properties", {}).get(missing, {}) if isinstance(sub, Mapping) else {}
        if isinstance(prop, Mapping) and isinstance(prop.get("$ref"), str):
            prop = resolve_ref(root, prop["$ref"])
        expected = _describe(prop) if isinstance(prop, Mapping) and prop else "a value"
        received = "undefined"
        path = _pointer(parts)
        hint = f"add the required property {_where(path)} ({expected})" + _misnamed(
            value, sub, missing
        )
    elif keyword == "type" and not parts and _takes_object(arg) and not isinstance(value, Mapping):
        # `get_note(2)`: a positional argument where the tool takes one input object.
        expected = "object"
        path = ""
        hint = f"pass one input object, not positional arguments: {_object_call(root, export_name, value)}"
    elif keyword == "type":
        expected = " or ".join(arg) if isinstance(arg, list) else str(arg)
        path = _pointer(parts)
        hint = f"pass {_where(path)} as {_article(expected)}"
    elif keyword == "additionalProperties" and isinstance(value, Mapping):
        allowed = set(sub.get("properties", {})) if isinstance(sub, Mapping) else set()
        # The first few extra names in order, without sorting all of a huge object.
        extra = heapq.nsmallest(MAX_LISTED_ITEMS + 1, (k for k in value if k not in allowed))
        name = extra[0] if extra else "?"
        parts.append(name)
        path = _pointer(parts)
        expected = f"only the properties {_list(sorted(allowed))}" if allowed else "no properties"
        received = f"unexpected propert{'ies' if len(extra) > 1 else 'y'} {_list(extra)}"
        hint = f"remove {_where(path)}" + (
            f" (allowed: {_list(sorted(allowed))})" if allowed else ""
        )
    elif keyword == "enum":
        expected = f"one of {_list(arg)}"
        path = _pointer(parts)
        hint = f"set {_where(path)} to one of {_list(arg)}"
    elif keyword == "const":
        expected = f"exactly {show(arg)}"
        path = _pointer(parts)
        hint = f"set {_where(path)} to {show(arg)}"
    elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[
            keyword
        ]
        expected = f"a number {op} {arg}"
        path = _pointer(parts)
        hint = f"use a value {op} {arg} for {_where(path)}"
    elif keyword in (
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
    ):
        what = {"Length": "characters", "Items": "items", "Properties": "properties"}[keyword[3:]]
        bound = "at least" if keyword.startswith("min") else "at most"
        expected = f"{bound} {arg} {what}"
        size = len(value) if isinstance(value, str | list | Mapping) else "?"
        received = f"{json_type(value) or 'object'} with {size} {what}"
        path = _pointer(parts)
        hint = f"give {_where(path)} {bound} {arg} {what}"
    elif keyword == "uniqueItems":
        expected = "an array of distinct items"
        received = "an array with a repeated item"
        path = _pointer(parts)
        hint = f"remove the repeated items from {_where(path)}"
    elif keyword == "pattern":
        expected = f"a string matching /{arg}/"
        path = _pointer(parts)
        hint = f"make {_where(path)} match /{arg}/"
    elif keyword == "format":
        expected = f"a string in {arg} format"
        path = _pointer(parts)
        hint = f"write {_where(path)} in {arg} format"
    else:
        expected = _describe(sub) if sub else f"a value satisfying {keyword}"
        path = _pointer(parts)
        hint = f"change {_where(path)} to match the schema ({safe_name(error.message, 120)})"
    raise invalid(
        root,
        tool_name,
        export_name,
        path,
        expected,
        received,
        hint,
        detail=safe_name(error.message, 500),
    )


def _takes_object(declared: Any) -> bool:
    return declared == "object" or (isinstance(declared, list) and "object" in declared)


def _misnamed(value: Any, schema: Any, missing: str) -> str:
    """What to add to a missing-property hint when the input has a property the schema does not
    list: rename it (`noteId` for `id`) when it looks like the missing one, else name it."""
    if not isinstance(value, Mapping) or not isinstance(schema, Mapping):
        return ""
    known = schema.get("properties")
    if not isinstance(known, Mapping):
        return ""
    extra = [
        k
        for _, k in zip(
            range(MAX_LISTED_ITEMS * 4), (k for k in value if k not in known), strict=False
        )
    ]
    low = missing.lower()
    close = [
        k for k in extra if closest_names(k, [missing]) or low in k.lower() or k.lower() in low
    ]
    if not close and len(extra) == 1:
        close = extra  # one property too many and one missing: most likely the same one, misnamed
    if not close:
        return (
            f"; the input's {_list(extra)} {'is' if len(extra) == 1 else 'are'} not among its properties"
            if extra
            else ""
        )
    shown = safe_name(close[0], MAX_SHOWN_VALUE_CHARS)
    return f"; `{shown}` is not one of its properties: rename it to `{missing}`"


def _object_call(root: Any, export_name: str, value: Any) -> str:
    """`get_note({ id: 2 })`: the call with its input as an object, the positional value under
    the one property it fits (the only required one, else the only one), else the example."""
    props = root.get("properties") if isinstance(root, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    listed = root.get("required") if isinstance(root, Mapping) else None
    required: list[Any] = listed if isinstance(listed, list) else []
    names = [n for n in required if isinstance(n, str)] or [n for n in props if isinstance(n, str)]
    fn = safe_name(export_name, MAX_SHOWN_VALUE_CHARS)
    if len(names) == 1:
        key = names[0] if names[0].isidentifier() else json.dumps(names[0])
        return f"{fn}({{ {key}: {show(value)} }})"
    example = example_for(root)
    if isinstance(example, Mapping) and example:
        return f"{fn}({show(example)})"
    return f"{fn}({{ {', '.join(names[:MAX_LISTED_ITEMS])} }})" if names else f"{fn}({{}})"


def _article(expected: str) -> str:
    if " or " in expected:
        return expected
    return ("an " if expected[:1] in "aeiou" else "a ") + expected


def _describe(schema: Mapping[str, Any]) -> str:
    if "const" in schema:
        return f"exactly {show(schema['const'])}"
    if "enum" in schema and isinstance(schema["enum"], list):
        return f"one of {_list(schema['enum'])}"
    declared = schema.get("type")
    if isinstance(declared, list):
        return " or ".join(str(t) for t in declared)
    if isinstance(declared, str):
        return declared
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            kinds = [_describe(s) for s in schema[key] if isinstance(s, Mapping)]
            return " or ".join(k for k in kinds if k) or "a value"
    return "a value"


def invalid(
    root: Any,
    tool_name: str,
    export_name: str,
    path: str,
    expected: str,
    received: str,
    hint: str,
    *,
    detail: str = "",
    refused: str | None = None,
) -> InputInvalid:
    example = example_for(root)
    if json_depth_exceeds(
        example, MAX_JSON_DEPTH
    ):  # the server's `examples` cross the boundary too
        example = None
    return InputInvalid(
        tool_name=tool_name,
        export_name=export_name,
        path=path,
        expected=expected,
        received=received,
        hint=hint[:1].upper() + hint[1:] + ".",
        example=example,
        detail=detail or f"expected {expected}, received {received}",
        refused=refused,
    )
