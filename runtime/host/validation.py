"""Tool input validation before the call (spec §5.3.1, §7.2).

A model that passes the wrong shape learns more from one precise error than from a server's
generic "invalid params": the failing property as a JSON Pointer, what was expected and what
was received, one action to take, and a payload that would have worked. Validating in the host
also keeps malformed calls away from servers that handle them badly.

Validators are compiled once per distinct schema (tool lists are stable across calls and runs),
and a schema that is itself invalid is not enforced: the server stays the judge of its own
input, rather than an agent being blocked by a server's broken schema.

Validation is bounded, because both the input (the script's) and the schema (the server's) are
untrusted: a small input is validated on the event loop; a larger one in a worker thread
(`prepare_arguments_async`) with a time budget that also ends at the run's deadline and when
the run ends. At most MAX_VALIDATION_ERRORS errors are collected for the best match, error
messages never copy a whole value, and `uniqueItems` is linear. When the budget runs out before
any error was found, the input is not enforced (the server judges it), as for a pattern that
cannot be evaluated (codemode_gen.safe_jsonschema).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema._utils import find_additional_properties
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from codemode_gen import safe_jsonschema
from codemode_gen.jsonio import json_type, pointer_token, resolve_pointer
from codemode_gen.runtime.jsonsafe import copy_json, json_depth_exceeds, safe_name
from codemode_gen.runtime.limits import MAX_INPUT_BYTES, MAX_JSON_DEPTH
from codemode_gen.runtime.near_miss import closest_names

__all__ = [
    "MAX_EXAMPLE_DEPTH",
    "InputInvalid",
    "example_for",
    "is_object_schema",
    "prepare_arguments",
    "prepare_arguments_async",
    "rejected_input",
]

# Bounds example synthesis on recursive ($ref cycles) or absurdly nested schemas: without it a
# self-referencing `required` property would recurse forever.
MAX_EXAMPLE_DEPTH = 6
# Bounds how many compiled validators are kept: a server could publish ever-new schemas
# (tools/list_changed in a loop) and grow the cache without end.
MAX_CACHED_VALIDATORS = 512
# Bounds the length of a value echoed back in an error ("received ..."): a multi-megabyte
# string must not be copied into the agent's context.
MAX_SHOWN_VALUE_CHARS = 60
# Bounds the number of properties shown when an error lists allowed names or enum values.
MAX_LISTED_ITEMS = 8
# Bounds the errors collected to pick the best match: an invalid 300k-item array made 300k
# errors (each with a repr of its value), 936 MB and 22 s on the event loop.
MAX_VALIDATION_ERRORS = 16
# Bounds the time one input's validation may take (within the run's deadline, which also ends
# it); past it the errors found so far are reported, or, if none, the server judges the input.
VALIDATION_BUDGET_S = 1.0
# Bounds the time spent looking for a better error once one is found (a valid 200k-item array
# with one `maxItems` error would otherwise be walked to the end of the budget).
MORE_ERRORS_BUDGET_S = 0.05
# Inputs of at most this many JSON values are validated on the event loop (well under a
# millisecond); larger ones in a thread, so a big input never stalls other runs.
INLINE_VALIDATION_NODES = 256
# Threads validating large inputs at once (across runs); more wait their turn within their own
# budget. Bounds the CPU and memory that concurrent validation bombs can take.
VALIDATION_THREADS = 2
# Bounds how much of an input property name is kept in an error path (a name can be megabytes).
MAX_PATH_SEGMENT_CHARS = 200

_UNSET = object()
_validators: dict[str, jsonschema.protocols.Validator | None] = {}


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


def is_object_schema(schema: Any) -> bool:
    """True when the root takes an arguments object: `type: object`, or empty/absent (§5.3.1)."""
    if not isinstance(schema, Mapping):
        return schema is None or schema is True
    declared = schema.get("type")
    if declared is None:
        return True
    if isinstance(declared, list):
        return "object" in declared
    return bool(declared == "object")


def prepare_arguments(
    schema: Any, tool_name: str, export_name: str, value: Any = _UNSET
) -> Any:
    """Return the `arguments` to send, or raise InputInvalid.

    `value` is left out when the binding was called without an argument. Object and empty
    schemas then mean `{}` (§5.3.1: no-arg tools accept `()` and `({})`); a non-object root
    schema takes the value itself, so a missing one is reported as `undefined`.
    """
    if value is _UNSET:
        if is_object_schema(schema):
            value = {}
        else:
            raise _invalid(schema, tool_name, export_name, "", _expected_root(schema), "undefined",
                           f"call {export_name} with one argument ({_expected_root(schema)})")
    validator = _validator(schema)
    if validator is None:
        return value
    # Server patterns run with a timeout and a per-call budget (safe_jsonschema): one that cannot
    # be evaluated is skipped for this value, so the event loop never stalls and the server
    # stays the judge of what its catastrophic pattern accepts.
    errors: list[ValidationError] = []
    with safe_jsonschema.regex_session():
        try:
            for found in validator.iter_errors(value):
                errors.append(found)
                if len(errors) >= MAX_VALIDATION_ERRORS:
                    break
                budget = getattr(_local, "budget", None)
                if budget is not None and len(errors) == 1:
                    budget.until = min(budget.until, time.monotonic() + MORE_ERRORS_BUDGET_S)
        except (_OutOfBudget, RecursionError):
            pass  # judge by the errors found so far; none: the server judges the input
    error = best_match(errors)
    if error is not None:
        _raise_from(error, schema, tool_name, export_name)
    return value


async def prepare_arguments_async(
    schema: Any, tool_name: str, export_name: str, value: Any, *, deadline: float | None = None
) -> Any:
    """`prepare_arguments` for an input given by the script, bounded in time and memory.

    A small input is checked here (depth included); a large one in a validation thread with
    VALIDATION_BUDGET_S, cut short at `deadline` (`time.monotonic()` seconds) and as soon as the
    awaiting task is cancelled (the run ended), so the event loop, other runs and the run's
    deadline never wait for it.
    """
    if _at_most(value, INLINE_VALIDATION_NODES):
        if json_depth_exceeds(value, MAX_JSON_DEPTH):
            raise _too_deep(schema, tool_name, export_name)
        return prepare_arguments(schema, tool_name, export_name, value)
    budget = _Budget(float("inf") if deadline is None else deadline)
    job = _executor().submit(_prepare_in_thread, budget, schema, tool_name, export_name, value)
    try:
        return await asyncio.wrap_future(job)
    finally:
        budget.stopped = True  # cancelled or done: a running check stops at its next step


def rejected_input(schema: Any, tool_name: str, export_name: str, why: Any) -> InputInvalid:
    """The SchemaValidationError for an input the worker refused to forward (`inputRejected`:
    `{"reason": "size", "bytes"}` or `{"reason": "depth"}`)."""
    reason = why.get("reason") if isinstance(why, Mapping) else None
    if reason == "size":
        size = why.get("bytes")
        return _invalid(
            schema, tool_name, export_name, "", f"at most {MAX_INPUT_BYTES} bytes of JSON",
            f"{size if isinstance(size, int) else 'more'} bytes",
            "send less per call: split the data over several calls", refused="size",
        )
    return _too_deep(schema, tool_name, export_name)


def _too_deep(schema: Any, tool_name: str, export_name: str) -> InputInvalid:
    return _invalid(
        schema, tool_name, export_name, "", f"objects and arrays nested at most {MAX_JSON_DEPTH} levels deep",
        f"a value nested deeper than {MAX_JSON_DEPTH} levels",
        f"flatten the input: at most {MAX_JSON_DEPTH} levels of nested objects and arrays", refused="depth",
    )


# --------------------------------------------------------------------------- bounded validation


class _OutOfBudget(Exception):
    """Raised inside a budgeted validation when its time is up or its run has ended."""


class _Budget:
    def __init__(self, until: float) -> None:
        self.until = until
        self.stopped = False

    def check(self) -> None:
        if self.stopped or time.monotonic() > self.until:
            self.stopped = True
            raise _OutOfBudget()


_local = threading.local()  # .budget: the _Budget of the validation running in this thread
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(VALIDATION_THREADS, thread_name_prefix="codemode-validate")
        return _pool


def _prepare_in_thread(budget: _Budget, schema: Any, tool_name: str, export_name: str, value: Any) -> Any:
    if budget.stopped:
        raise _OutOfBudget()  # the run ended while this waited for a thread
    # The budget starts now: time spent queued for a thread is bounded by the run's deadline.
    budget.until = min(budget.until, time.monotonic() + VALIDATION_BUDGET_S)
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise _too_deep(schema, tool_name, export_name)
    _local.budget = budget
    try:
        return prepare_arguments(schema, tool_name, export_name, value)
    finally:
        _local.budget = None


def _at_most(value: Any, limit: int) -> bool:
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


def _budgeted(keyword: Any) -> Any:
    """A keyword function that first checks the thread's budget (absent on the event loop)."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = getattr(_local, "budget", None)
        if budget is not None:
            budget.check()
        return keyword(validator, value, instance, schema)

    return check


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """`uniqueItems` in linear time (jsonschema compares unsortable items pairwise: hours for
    50k objects). Items are compared by their canonical JSON; values JSON Schema calls equal
    but that print differently (1 and 1.0) count as distinct: the server judges those."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        try:
            key = json.dumps(item, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return
        if key in seen:
            yield ValidationError(f"{_show(instance)} has non-unique elements")
            return
        seen.add(key)


def _additional_properties(original: Any) -> Any:
    """`additionalProperties` whose error names the first few extra properties only: jsonschema
    sorts all of them into its message (one C sort of 400,000 names held the GIL, and so the
    event loop, for most of a second). Everything else is jsonschema's own."""

    def check(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if allowed is not False or not validator.is_type(instance, "object"):
            yield from original(validator, allowed, instance, schema)
            return
        extras = heapq.nsmallest(MAX_LISTED_ITEMS + 1, find_additional_properties(instance, schema))
        if not extras:
            return
        names = ", ".join(repr(name) for name in extras[:MAX_LISTED_ITEMS])
        more = ", ..." if len(extras) > MAX_LISTED_ITEMS else ""
        if "patternProperties" in schema:
            yield ValidationError(f"{names}{more} do not match any of the patternProperties")
        else:
            yield ValidationError(f"Additional properties are not allowed ({names}{more} unexpected)")

    return check


_bounded_classes: dict[Any, Any] = {}

# Keywords that look into an instance's children or into other schemas: validated after the
# keywords that judge the instance as a whole (type, required, maxItems, ...), so the few
# errors collected include those cheap, high-up ones before a walk over 300k items.
_DESCENDING = frozenset({
    "items", "prefixItems", "additionalItems", "contains", "properties", "patternProperties",
    "additionalProperties", "unevaluatedItems", "unevaluatedProperties", "dependentSchemas",
    "dependencies", "propertyNames", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "$ref", "$dynamicRef", "$recursiveRef", "uniqueItems",
})


def _cheap_first(schema: Any) -> Any:
    """A copy of `schema` whose objects list the _DESCENDING keywords last (same meaning:
    JSON Schema keywords are unordered; jsonschema checks them in the order given).

    Iterative (`copy_json`): a server's schema can be nested hundreds of levels deep."""
    return copy_json(schema, order=lambda obj: sorted(obj, key=lambda name: name in _DESCENDING))  # stable


def _bounded_class(cls: Any) -> Any:
    """`cls` (already regex-safe) with every keyword budget-checked and `uniqueItems` linear."""
    bounded = _bounded_classes.get(cls)
    if bounded is None:
        keywords = {name: _budgeted(fn) for name, fn in cls.VALIDATORS.items()}
        if "uniqueItems" in keywords:
            keywords["uniqueItems"] = _budgeted(_unique_items)
        if "additionalProperties" in keywords:
            keywords["additionalProperties"] = _budgeted(_additional_properties(cls.VALIDATORS["additionalProperties"]))
        bounded = jsonschema.validators.extend(cls, keywords)
        _bounded_classes[cls] = bounded
    return bounded


def _validator(schema: Any) -> jsonschema.protocols.Validator | None:
    if schema is None or schema == {} or schema is True:
        return None
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    if key in _validators:
        return _validators[key]
    validator: jsonschema.protocols.Validator | None
    try:
        cls = safe_jsonschema.validator_for(schema, default=jsonschema.Draft202012Validator)
        safe_jsonschema.check_schema(cls, schema)
        validator = _bounded_class(cls)(_cheap_first(schema))
    except (SchemaError, TypeError, ValueError, LookupError):
        validator = None
    if len(_validators) >= MAX_CACHED_VALIDATORS:
        _validators.clear()
    _validators[key] = validator
    return validator


# --------------------------------------------------------------------------- error shaping


def _pointer(parts: list[Any]) -> str:
    return "".join("/" + pointer_token(_segment(p)) for p in parts)


def _segment(part: Any) -> str:
    """A path segment as shown: an input's property name is the script's, so it is sanitised
    and cut (the path goes into messages and the trace)."""
    return safe_name(part, MAX_PATH_SEGMENT_CHARS)


def _show(value: Any) -> str:
    """At most MAX_SHOWN_VALUE_CHARS of a value's JSON, without serialising all of a big one."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_VALUE_CHARS:
        value = value[:MAX_SHOWN_VALUE_CHARS]
    elif isinstance(value, list | dict) and not _at_most(value, MAX_SHOWN_VALUE_CHARS):
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
    return f"{kind} {_show(value)}"


def _list(items: Any) -> str:
    items = list(items) if isinstance(items, list | tuple) else list(itertools.islice(items, MAX_LISTED_ITEMS + 1))
    shown = ", ".join(_show(i) for i in items[:MAX_LISTED_ITEMS])
    return shown + (", …" if len(items) > MAX_LISTED_ITEMS else "")


def _expected_root(schema: Any) -> str:
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


def _raise_from(error: ValidationError, root: Any, tool_name: str, export_name: str) -> None:
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
            prop = _resolve(root, prop["$ref"])
        expected = _describe(prop) if isinstance(prop, Mapping) and prop else "a value"
        received = "undefined"
        path = _pointer(parts)
        hint = f"add the required property {_where(path)} ({expected})" + _misnamed(value, sub, missing)
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
        expected = f"exactly {_show(arg)}"
        path = _pointer(parts)
        hint = f"set {_where(path)} to {_show(arg)}"
    elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[keyword]
        expected = f"a number {op} {arg}"
        path = _pointer(parts)
        hint = f"use a value {op} {arg} for {_where(path)}"
    elif keyword in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        what = {"Length": "characters", "Items": "items", "Properties": "properties"}[
            keyword[3:]
        ]
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
    raise _invalid(root, tool_name, export_name, path, expected, received, hint, detail=safe_name(error.message, 500))


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
    extra = [k for _, k in zip(range(MAX_LISTED_ITEMS * 4), (k for k in value if k not in known), strict=False)]
    low = missing.lower()
    close = [k for k in extra if closest_names(k, [missing]) or low in k.lower() or k.lower() in low]
    if not close and len(extra) == 1:
        close = extra  # one property too many and one missing: most likely the same one, misnamed
    if not close:
        return f"; the input's {_list(extra)} {'is' if len(extra) == 1 else 'are'} not among its properties" if extra else ""
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
        return f"{fn}({{ {key}: {_show(value)} }})"
    example = example_for(root)
    if isinstance(example, Mapping) and example:
        return f"{fn}({_show(example)})"
    return f"{fn}({{ {', '.join(names[:MAX_LISTED_ITEMS])} }})" if names else f"{fn}({{}})"


def _article(expected: str) -> str:
    if " or " in expected:
        return expected
    return ("an " if expected[:1] in "aeiou" else "a ") + expected


def _describe(schema: Mapping[str, Any]) -> str:
    if "const" in schema:
        return f"exactly {_show(schema['const'])}"
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


def _invalid(
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
    if json_depth_exceeds(example, MAX_JSON_DEPTH):  # the server's `examples` cross the boundary too
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


# --------------------------------------------------------------------------- examples


def example_for(schema: Any) -> Any:
    """A minimal valid-looking payload: the schema's own `examples`/`default`, else synthesised.

    Synthesis fills only required properties, so the example shows the least an agent must
    send; optional properties are the agent's choice.
    """
    return _example(schema, schema, 0)


def _resolve(root: Any, ref: str) -> Any:
    return resolve_pointer(root, ref[1:], {}) if ref.startswith("#") else {}


def _example(schema: Any, root: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping):
        return {} if schema is None or schema is True else None
    if depth > MAX_EXAMPLE_DEPTH:
        return None
    if "$ref" in schema and isinstance(schema["$ref"], str):
        return _example(_resolve(root, schema["$ref"]), root, depth + 1)
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
            non_null = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
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
        count = count if isinstance(count, int) and 0 < count <= MAX_LISTED_ITEMS else 0
        return [_example(items, root, depth + 1) for _ in range(count)]
    if declared == "string":
        fmt = schema.get("format")
        by_format = {"date": "2026-01-31", "date-time": "2026-01-31T12:00:00Z", "email": "user@example.com",
                     "uri": "https://example.com", "uuid": "00000000-0000-4000-8000-000000000000"}
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
