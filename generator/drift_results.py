"""Result drift: repeated samples validated against the output type `generate` committed.

One stage of `record --check` (drift.py). The result is unwrapped as the runtime unwraps it
(spec §5.3.2) and validated against the declared outputSchema, else the schema inferred from the
recorded samples (`infer_output`), first reduced to what the TypeScript type says
(`shape_schema`: value constraints and integer vs number dropped, open objects stay open).
Validation errors become (pointer, expected, got) lines in kinds rather than values, a map's
keys written ANY_KEY, grouped per tool; a mismatch the recorded result already had is not new.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError, ValidationError

from codemode_gen import safe_jsonschema
from codemode_gen.generator.drift_findings import MAX_VALUE_CHARS, Finding, Repeated, short_json
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.infer import infer_output
from codemode_gen.generator.output_schema import MAX_DRIFT_PER_TOOL
from codemode_gen.generator.untrusted import shown
from codemode_gen.generator.unwrap import UnwrapMode, parse_json_text, unwrap_result
from codemode_gen.jsonio import json_type, pointer_token

__all__ = [
    "ANY_KEY",
    "MAX_SCHEMA_DEPTH",
    "MAX_SHAPE_LINES",
    "VALUE_KEYWORDS",
    "compare_results",
    "shape_schema",
]

# Result shape changes listed per tool (grouped by path and kind first: the same change in
# every sample is one line).
MAX_SHAPE_LINES = MAX_DRIFT_PER_TOOL
# Bounds the walk of a (server-provided) schema in `shape_schema`; deeper parts accept anything,
# which can hide drift there but never invents it.
MAX_SCHEMA_DEPTH = 64


# Keywords a TypeScript type does not express: dropped before a result's shape is validated,
# so a value change (a bigger number, another string) is never reported as drift. `oneOf`
# becomes `anyOf` (a TypeScript union does not say "exactly one"); `integer` becomes `number`
# (one TypeScript type).
VALUE_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "not",
        "if",
        "then",
        "else",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    }
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "prefixItems")
_SCHEMA_VALUES = (
    "additionalProperties",
    "unevaluatedProperties",
    "additionalItems",
    "unevaluatedItems",
)


def _widen(types: Any) -> Any:
    if types == "integer":
        return "number"
    if isinstance(types, list):
        return list(dict.fromkeys(_widen(t) for t in types))
    return types


def shape_schema(schema: Any, depth: int = 0) -> Any:
    """`schema` reduced to what its TypeScript type says (see VALUE_KEYWORDS); a copy."""
    if not isinstance(schema, dict):
        return schema  # true / false / junk jsonschema reports itself
    if depth > MAX_SCHEMA_DEPTH:
        return {}
    out: dict[str, Any] = {}
    branches: list[Any] | None = None
    for key, value in schema.items():
        if key in VALUE_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: shape_schema(sub, depth + 1) for name, sub in value.items()}
        elif (key in _SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [shape_schema(sub, depth + 1) for sub in value]
        elif key == "oneOf" and isinstance(value, list):
            branches = [shape_schema(sub, depth + 1) for sub in value]
        elif key in _SCHEMA_VALUES or key == "items":
            out[key] = shape_schema(value, depth + 1)
        elif key == "type":
            out[key] = _widen(value)
        else:
            out[key] = value
    if branches is not None:
        if "anyOf" in out:
            out["allOf"] = [*out.get("allOf", []), {"anyOf": branches}]
        else:
            out["anyOf"] = branches
    return out


def _kind(value: Any) -> str:
    return json_type(value, integer=False) or type(value).__name__


def _join(ptr: str, key: str) -> str:
    return f"{ptr}/{pointer_token(key)}"


# Stands for any key of a map (an object typed by `additionalProperties`) in a reported pointer:
# a changed value shape is one finding for the map, not one per key.
ANY_KEY = "*"
# Schema keywords whose next step in a validation error's path is one step into the value.
_KEY_STEPS = frozenset({"properties", "patternProperties"})
_MAP_STEPS = frozenset({"additionalProperties", "unevaluatedProperties"})
_ITEM_STEPS = frozenset({"items", "additionalItems", "unevaluatedItems"})


def _pointer(error: ValidationError) -> str:
    """The instance path of `error`, with every step a map's `additionalProperties` took as
    ANY_KEY: the schema path says which steps those were."""
    instance = [str(part) for part in error.absolute_path]
    schema_path = list(error.absolute_schema_path)
    out: list[str] = []
    i = 0
    while i < len(schema_path) and len(out) < len(instance):
        step = schema_path[i]
        if step in _KEY_STEPS or step == "prefixItems":
            out.append(pointer_token(instance[len(out)]))
            i += 2  # the property name, pattern or tuple index that follows
            continue
        if step in _MAP_STEPS:
            out.append(ANY_KEY)
        elif step in _ITEM_STEPS:
            out.append(pointer_token(instance[len(out)]))
            if i + 1 < len(schema_path) and isinstance(schema_path[i + 1], int):
                i += 1  # draft-4 tuple `items`: the index follows
        i += 1
    out += [pointer_token(part) for part in instance[len(out) :]]
    return "".join(f"/{part}" for part in out)


def _types_text(types: Any) -> str:
    names = [str(t) for t in types] if isinstance(types, list) else [str(types)]
    return " or ".join(names)


def _expected_of(schema: Any) -> str:
    """What a property's schema wants, for "expected X, got nothing" lines."""
    if isinstance(schema, dict):
        if "type" in schema:
            return _types_text(schema["type"])
        if "const" in schema:
            return short_json(schema["const"])
    return "a value"


def _literal_or_kind(error: ValidationError) -> str | None:
    """What a union member wanted *at this very value* when that is why it failed."""
    if error.validator == "type":
        return _types_text(error.validator_value)
    if error.validator == "const":
        return short_json(error.validator_value)
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return " or ".join(short_json(v) for v in error.validator_value[:5]) + (
            " or …" if len(error.validator_value) > 5 else ""
        )
    return None


Problem = tuple[str, str, str]  # (JSON pointer, expected, got)


def _problems(error: ValidationError, depth: int = 0) -> list[Problem]:
    """One validation error as (pointer, expected, got) lines, kinds rather than values.

    A failed union (`anyOf`) is explained by the member whose kind matches the value (its
    deeper errors), else as "expected <the members' kinds>, got <kind>"."""
    ptr = _pointer(error)
    value = error.instance
    keyword = error.validator
    if keyword in ("type", "const", "enum"):
        expected = _literal_or_kind(error) or str(keyword)
        got = _kind(value) if keyword == "type" else short_json(value)
        return [(ptr, expected, got)]
    if (
        keyword == "required"
        and isinstance(value, dict)
        and isinstance(error.validator_value, list)
    ):
        props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        props = props if isinstance(props, dict) else {}
        return [
            (_join(ptr, key), _expected_of(props.get(key)), "nothing (missing)")
            for key in error.validator_value
            if isinstance(key, str) and key not in value
        ]
    if keyword in ("additionalProperties", "unevaluatedProperties") and isinstance(value, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        patterns = schema.get("patternProperties", {})
        patterns = patterns if isinstance(patterns, dict) else {}
        extra = [
            key
            for key in value
            if key not in known
            and not any(safe_jsonschema.search(p, key) is True for p in patterns)
        ]
        if keyword == "additionalProperties" and extra:
            return [
                (_join(ptr, key), "no such property (closed object)", _kind(value[key]))
                for key in extra
            ]
        return [(ptr, "no other properties (closed object)", "an object with other properties")]
    if keyword in ("anyOf", "oneOf") and isinstance(error.validator_value, list):
        members: dict[int, list[ValidationError]] = {}
        for sub in error.context or ():
            if sub.relative_schema_path:
                members.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        here = list(error.absolute_path)
        wanted: list[str] = []
        for index in range(len(error.validator_value)):
            errors = members.get(index, [])
            at_value = [e for e in errors if list(e.absolute_path) == here and _literal_or_kind(e)]
            if errors and not at_value and depth < MAX_SCHEMA_DEPTH:
                return [p for e in errors for p in _problems(e, depth + 1)]  # the matching kind
            wanted.extend(text for e in at_value if (text := _literal_or_kind(e)))
        expected = " or ".join(dict.fromkeys(wanted)) or "a member of the union"
        return [(ptr, expected, _kind(value))]
    if keyword is None or error.schema is False:
        return [(ptr, "nothing (the type allows no value here)", _kind(value))]
    return [(ptr, f"{keyword} {short_json(error.validator_value)}", _kind(value))]


@dataclass(frozen=True)
class _Committed:
    """The output type `generate` builds for a tool from the fixtures, ready to validate."""

    validator: Any
    json_text: bool  # the binding returns a string holding JSON; the schema is of that JSON


def _committed_type(
    tool: Mapping[str, Any] | None, calls: Sequence[dict[str, Any]], mode: UnwrapMode
) -> _Committed | str | None:
    """The tool's committed output type, a note saying why it cannot be used, or None (no type:
    nothing to compare)."""
    declared = tool.get("outputSchema") if tool is not None else None
    json_text = False
    if isinstance(declared, dict):
        schema: dict[str, Any] | None = declared
        what = "declared outputSchema"
    else:
        inference = infer_output(calls, mode)
        schema = inference.json_schema if inference.json_text else inference.schema
        json_text = inference.json_text
        what = "inferred output schema"
    if schema is None:
        return None
    dialect = schema.get("$schema")
    probe = schema if isinstance(dialect, str) else {}  # a non-string $schema means "default"
    cls = safe_jsonschema.validator_for(probe, default=jsonschema.Draft202012Validator)
    shaped = shape_schema(schema)
    try:
        safe_jsonschema.check_schema(cls, shaped)
    except SchemaError as exc:
        return f"its {what} is not a valid JSON Schema ({exc.message[:120]}); results not compared"
    # An empty registry: a `$ref` to a URL stays unresolved (a note) instead of a fetch.
    return _Committed(cls(shaped, registry=referencing.Registry()), json_text)


def _value_problems(committed: _Committed, value: Any) -> list[Problem]:
    if committed.json_text:
        if not isinstance(value, str):
            return [("", "a string holding JSON", _kind(value))]
        ok, parsed = parse_json_text(value)
        if not ok or not isinstance(parsed, dict | list):
            return [("", "a string holding a JSON object or array", "a string without one")]
        return [
            (f"{ptr or '/'} (in the JSON text)", exp, got)
            for ptr, exp, got in _value_problems(
                _Committed(committed.validator, json_text=False), parsed
            )
        ]
    with safe_jsonschema.regex_session():
        errors = sorted(
            committed.validator.iter_errors(value),
            key=lambda e: ([str(p) for p in e.absolute_path], str(e.validator)),
        )
    return [problem for error in errors for problem in _problems(error)]


def _recorded_problems(
    committed: _Committed, calls: Sequence[dict[str, Any]], line: int, mode: UnwrapMode
) -> list[Problem]:
    """How the recorded result of sample `line` already differed from the committed type.

    A declared outputSchema the server did not honour when it was recorded (`generate` reports
    that as drift of its own) is not a change of the server since; only new problems are.
    """
    if not 1 <= line <= len(calls) or not isinstance(calls[line - 1].get("result"), dict):
        return []
    return _value_problems(committed, unwrap_result(calls[line - 1]["result"], mode))


def _samples_text(lines: Sequence[int]) -> str:
    return f"sample {lines[0]}" if len(lines) == 1 else "samples " + ", ".join(map(str, lines))


def _tool_error_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return shown(block["text"], MAX_VALUE_CHARS)
    return "(no text)"


def compare_results(
    fixture_set: FixtureSet, repeated: Iterable[Repeated], mode: UnwrapMode = "spec"
) -> tuple[list[Finding], list[str], list[str], int]:
    """(findings, could-not-check lines, notes, results compared) for the repeated samples."""
    findings: list[Finding] = []
    unchecked: list[str] = []
    notes: list[str] = []
    compared = 0
    tools = {t["name"]: t for t in fixture_set.tools}
    by_tool: dict[str, list[Repeated]] = {}
    for item in repeated:
        by_tool.setdefault(item.sample.tool, []).append(item)
    for name in sorted(by_tool):
        label = shown(name)
        recorded = fixture_set.calls.get(name, [])
        committed = _committed_type(tools.get(name), recorded, mode)
        if isinstance(committed, str):
            notes.append(f"{label}: {committed}")
        groups: dict[Problem, list[int]] = {}
        for item in sorted(by_tool[name], key=lambda r: r.sample.line):
            sample = f"sample {item.sample.line}"
            if item.failed is not None:
                unchecked.append(f"{label} {sample}: {item.failed}")
            elif item.unrecordable is not None:
                findings.append(
                    Finding(name, "result-unrecordable", f"{sample}: {item.unrecordable}")
                )
            elif item.skipped is not None:
                notes.append(f"{label} {sample}: not compared: {item.skipped}")
            elif item.result is not None and item.result.get("isError") is True:
                unchecked.append(
                    f"{label} {sample}: answered with a tool error (isError): {_tool_error_text(item.result)}"
                )
            elif item.result is not None and isinstance(committed, _Committed):
                try:
                    problems = _value_problems(committed, unwrap_result(dict(item.result), mode))
                    if problems:  # only what the recording did not already show is a change
                        known = set(_recorded_problems(committed, recorded, item.sample.line, mode))
                        problems = [p for p in problems if p not in known]
                except Exception as exc:  # a $ref jsonschema cannot resolve, recursion too deep
                    detail = (str(exc).splitlines() or [type(exc).__name__])[0]
                    notes.append(
                        f"{label}: results not compared: {shown(detail, MAX_VALUE_CHARS * 2)}"
                    )
                    committed = None
                    continue
                compared += 1
                for problem in dict.fromkeys(problems):
                    groups.setdefault(problem, []).append(item.sample.line)
        ordered = sorted(groups.items())
        for (ptr, expected, got), lines in ordered[:MAX_SHAPE_LINES]:
            findings.append(
                Finding(
                    name,
                    "result-shape",
                    f"result shape changed at {shown(ptr or '/')}: expected {shown(expected)},"
                    f" got {shown(got)} ({_samples_text(lines)})",
                )
            )
        if len(ordered) > MAX_SHAPE_LINES:
            findings.append(
                Finding(
                    name,
                    "result-shape",
                    f"... and {len(ordered) - MAX_SHAPE_LINES} more result shape changes",
                )
            )
    return findings, unchecked, notes, compared
