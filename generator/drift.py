"""Drift between the committed fixtures and a live server: what `record --check` reports.

Pure: no I/O. `generator/record_check.py` connects, lists the tools and repeats sample calls;
this module gets the recorded `FixtureSet`, the live tools as `record` would write them (JSON
only, redacted) and the repeated results (redacted and bounded like a recorded line), and
returns findings. The same inputs give the same report: servers, tools and findings are sorted.

What counts as drift (docs/config.md, "record --check"):

- a tool added or removed; a tool's `description`, `title`, `annotations`, `inputSchema` or
  `outputSchema` changed (the fields `generate` reads), compared as canonical JSON (key order
  and `1` vs `1.0` do not matter), reported as JSON pointers with old -> new; the server's
  `instructions` changed (agent context, like descriptions);
- the *shape* of a repeated sample of a read-only tool. The result is unwrapped as the runtime
  unwraps it (spec §5.3.2, the server's unwrap mode) and validated against the output type
  `generate` builds from the fixtures: the declared outputSchema, else the schema inferred from
  the recorded samples by the same inference (`infer_output`). The schema is first reduced to
  what the TypeScript type says (`shape_schema`): kinds, properties, required, closed objects,
  unions, literal `enum`/`const`, maps (`additionalProperties`: inferred for objects whose keys
  are data, generator/infer.py). Value constraints the type does not carry (minimum, pattern,
  format, lengths, not, if/then/else, ...) and integer vs number are dropped, and an open object
  accepts new properties: values change all the time, the committed type still holds. A map's
  keys are values too: only its values' shape is compared, and a finding names any of its keys
  `*` (`/byTag/*: expected number, got string`), once for the map. A
  mismatch the recorded result of the same sample already had is not reported (a server that
  broke its declared schema when it was recorded: `generate` reports that itself).

Not drift but "could not check" (exit 3 when nothing drifted): a repeated call that failed
(JSON-RPC error, timeout, lost connection) or answered with a tool error (`isError`), and a
server that could not be reached. Notes never change the exit status: samples not repeated by
design (a redacted input), results too large to compare, a declared schema that cannot be used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError, ValidationError

from codemode_gen import safe_jsonschema
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.infer import MAX_INFER_SAMPLES, infer_output, unwrapped_samples
from codemode_gen.generator.output_schema import MAX_DRIFT_PER_TOOL
from codemode_gen.generator.probe import REDACTION_MARK
from codemode_gen.generator.untrusted import shown
from codemode_gen.generator.unwrap import UnwrapMode, parse_json_text, unwrap_result
from codemode_gen.jsonio import canonical_json as canonical
from codemode_gen.jsonio import json_type, pointer_token

__all__ = [
    "CheckStatus",
    "Finding",
    "Repeated",
    "Resample",
    "ServerCheck",
    "canonical",
    "check_server",
    "compare_results",
    "compare_server",
    "compare_tools",
    "exit_status",
    "json_diff",
    "plan_resamples",
    "render_report",
    "shape_schema",
]

FindingKind = Literal[
    "not-recorded",
    "instructions",
    "tool-added",
    "tool-removed",
    "description",
    "title",
    "annotations",
    "input-schema",
    "output-schema",
    "result-unrecordable",
    "result-shape",
]
# Order of a tool's findings in the report: what the listing says first, then results.
_KIND_RANK = {kind: rank for rank, kind in enumerate(get_args(FindingKind))}
CheckStatus = Literal["up-to-date", "drift", "incomplete", "unreachable", "not-recorded"]

# The tool fields `generate` reads, in report order, and the finding kind of each.
COMPARED_FIELDS: tuple[tuple[str, FindingKind], ...] = (
    ("description", "description"),
    ("title", "title"),
    ("annotations", "annotations"),
    ("inputSchema", "input-schema"),
    ("outputSchema", "output-schema"),
)
# Differences listed per changed field (one changed schema can differ in hundreds of places);
# the rest are counted in one "... more" line.
MAX_DIFF_LINES = 8
# Server values (old -> new, a result's literal) quoted in one report line are cut to this.
MAX_VALUE_CHARS = 60
# Characters of unchanged text shown before the first difference of a changed description.
TEXT_CONTEXT_CHARS = 20
# Result shape changes listed per tool (grouped by path and kind first: the same change in
# every sample is one line).
MAX_SHAPE_LINES = MAX_DRIFT_PER_TOOL
# Bounds the walk of a (server-provided) schema in `shape_schema`; deeper parts accept anything,
# which can hide drift there but never invents it.
MAX_SCHEMA_DEPTH = 64
# Lines printed per server (a hostile server can list 10,000 new tools); the rest are counted.
MAX_REPORT_LINES_PER_SERVER = 200
# Bounds one line of an unreachable server's reason (it quotes the server's stderr).
MAX_STDERR_LINE_CHARS = 400

# Keywords a TypeScript type does not express: dropped before a result's shape is validated,
# so a value change (a bigger number, another string) is never reported as drift. `oneOf`
# becomes `anyOf` (a TypeScript union does not say "exactly one"); `integer` becomes `number`
# (one TypeScript type).
VALUE_KEYWORDS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format",
    "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains",
    "minProperties", "maxProperties", "propertyNames",
    "dependentRequired", "dependentSchemas", "dependencies",
    "not", "if", "then", "else",
    "contentEncoding", "contentMediaType", "contentSchema",
})
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS = ("allOf", "anyOf", "prefixItems")
_SCHEMA_VALUES = ("additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems")


@dataclass(frozen=True)
class Finding:
    """One drift finding; `tool` None is the server as a whole. `detail` is printable text."""

    tool: str | None
    kind: FindingKind
    detail: str

    def text(self) -> str:
        return self.detail if self.tool is None else f"{shown(self.tool)}: {self.detail}"


@dataclass(frozen=True)
class Resample:
    """A recorded sample to repeat: its tool, its 1-based line in calls/<tool>.jsonl, its input."""

    tool: str
    line: int
    input: Any


@dataclass(frozen=True)
class Repeated:
    """What repeating one sample gave; exactly one field besides `sample` is set.

    `result`: the CallToolResult, redacted as `record` would keep it (compared). `failed`: the
    call failed (could not check). `unrecordable`: the server answered something `record` would
    refuse to keep (drift). `skipped`: not compared by design (a note).
    """

    sample: Resample
    result: Mapping[str, Any] | None = None
    failed: str | None = None
    unrecordable: str | None = None
    skipped: str | None = None


@dataclass
class ServerCheck:
    """The verdict on one server."""

    server_id: str
    findings: list[Finding] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)  # could not check these (exit 3)
    notes: list[str] = field(default_factory=list)
    unreachable: str | None = None  # why it could not be reached (then nothing was compared)
    not_recorded: bool = False
    tools: int = 0
    compared: int = 0  # repeated results whose shape was compared
    log_path: Path | None = None
    live_tools: list[dict[str, Any]] | None = None  # the live tools/list, as record keeps it (skills are checked on it)

    @property
    def status(self) -> CheckStatus:
        if self.not_recorded:
            return "not-recorded"
        if self.findings:
            return "drift"
        if self.unreachable is not None:
            return "unreachable"
        if self.unchecked:
            return "incomplete"
        return "up-to-date"


# --------------------------------------------------------------------------- JSON comparison


_ABSENT = object()


def _short(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return shown(text, MAX_VALUE_CHARS)


def json_diff(old: Any, new: Any, limit: int = MAX_DIFF_LINES) -> list[str]:
    """Where two JSON values differ, as `<pointer>: <old> -> <new>` lines (added/removed keys
    say so), in key order; at most `limit` lines plus one counting the rest."""
    lines: list[str] = []
    count = [0]

    def emit(text: str) -> None:
        count[0] += 1
        if len(lines) < limit:
            lines.append(text)

    def walk(a: Any, b: Any, ptr: str) -> None:
        if canonical(a) == canonical(b):
            return
        where = shown(ptr or "/")
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                sub = f"{ptr}/{pointer_token(key)}"
                if key not in b:
                    emit(f"{shown(sub)}: removed (was {_short(a[key])})")
                elif key not in a:
                    emit(f"{shown(sub)}: added {_short(b[key])}")
                else:
                    walk(a[key], b[key], sub)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for index, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{ptr}/{index}")
        else:
            emit(f"{where}: {_short(a)} -> {_short(b)}")

    walk(old, new, "")
    if count[0] > len(lines):
        lines.append(f"... and {count[0] - len(lines)} more differences")
    return lines


def _text_change(old: Any, new: Any) -> str:
    """`"old" -> "new"`, both cut around their first difference so a long text shows it."""
    if not isinstance(old, str) or not isinstance(new, str):
        return f"{_short(old)} -> {_short(new)}"
    same = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        same += 1
    start = max(0, same - TEXT_CONTEXT_CHARS)

    def part(text: str) -> str:
        piece = text[start : start + MAX_VALUE_CHARS]
        quoted = shown(json.dumps(piece, ensure_ascii=False), MAX_VALUE_CHARS + 10)
        return ("…" if start else "") + quoted + ("…" if start + MAX_VALUE_CHARS < len(text) else "")

    return f"{part(old)} -> {part(new)}"


def compare_server(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[Finding]:
    """Server-level drift: the initialize result's `instructions` (serverInfo's version and
    capabilities change with every upgrade and say nothing about the tools: not compared)."""
    old, new = recorded.get("instructions", _ABSENT), live.get("instructions", _ABSENT)
    if canonical(None if old is _ABSENT else old) == canonical(None if new is _ABSENT else new):
        return []
    return [Finding(None, "instructions", f"instructions changed: {_text_change(old, new)}")]


def compare_tools(recorded: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Tools added, removed, or changed in a field `generate` reads; sorted by tool name."""
    old = {t["name"]: t for t in recorded if isinstance(t.get("name"), str)}
    new = {t["name"]: t for t in live if isinstance(t.get("name"), str)}
    findings: list[Finding] = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            findings.append(Finding(name, "tool-added", "tool added (not in the fixtures)"))
            continue
        if name not in new:
            findings.append(Finding(name, "tool-removed", "tool removed (the server no longer lists it)"))
            continue
        for key, kind in COMPARED_FIELDS:
            a, b = old[name].get(key, _ABSENT), new[name].get(key, _ABSENT)
            if canonical(None if a is _ABSENT else a) == canonical(None if b is _ABSENT else b):
                continue  # absent and null mean the same to `generate`
            if kind in ("description", "title") or a is _ABSENT or b is _ABSENT:
                findings.append(Finding(name, kind, f"{key} changed: {_text_change(a, b)}"))
                continue
            findings.extend(Finding(name, kind, f"{key} changed at {line}") for line in json_diff(a, b))
    return findings


# --------------------------------------------------------------------------- result shapes


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
    out += [pointer_token(part) for part in instance[len(out):]]
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
            return _short(schema["const"])
    return "a value"


def _literal_or_kind(error: ValidationError) -> str | None:
    """What a union member wanted *at this very value* when that is why it failed."""
    if error.validator == "type":
        return _types_text(error.validator_value)
    if error.validator == "const":
        return _short(error.validator_value)
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return " or ".join(_short(v) for v in error.validator_value[:5]) + (
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
        got = _kind(value) if keyword == "type" else _short(value)
        return [(ptr, expected, got)]
    if keyword == "required" and isinstance(value, dict) and isinstance(error.validator_value, list):
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
            key for key in value
            if key not in known and not any(safe_jsonschema.search(p, key) is True for p in patterns)
        ]
        if keyword == "additionalProperties" and extra:
            return [(_join(ptr, key), "no such property (closed object)", _kind(value[key])) for key in extra]
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
    return [(ptr, f"{keyword} {_short(error.validator_value)}", _kind(value))]


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
        return [(f"{ptr or '/'} (in the JSON text)", exp, got) for ptr, exp, got in _value_problems(
            _Committed(committed.validator, json_text=False), parsed
        )]
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
                findings.append(Finding(name, "result-unrecordable", f"{sample}: {item.unrecordable}"))
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
                    notes.append(f"{label}: results not compared: {shown(detail, MAX_VALUE_CHARS * 2)}")
                    committed = None
                    continue
                compared += 1
                for problem in dict.fromkeys(problems):
                    groups.setdefault(problem, []).append(item.sample.line)
        ordered = sorted(groups.items())
        for (ptr, expected, got), lines in ordered[:MAX_SHAPE_LINES]:
            findings.append(Finding(
                name,
                "result-shape",
                f"result shape changed at {shown(ptr or '/')}: expected {shown(expected)},"
                f" got {shown(got)} ({_samples_text(lines)})",
            ))
        if len(ordered) > MAX_SHAPE_LINES:
            findings.append(Finding(name, "result-shape", f"... and {len(ordered) - MAX_SHAPE_LINES} more result shape changes"))
    return findings, unchecked, notes, compared


# --------------------------------------------------------------------------- planning


def _read_only(tool: Mapping[str, Any]) -> bool:
    annotations = tool.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _mentions_redaction(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and REDACTION_MARK in item:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def plan_resamples(
    fixture_set: FixtureSet, live_tools: Sequence[Mapping[str, Any]], *, blocklist: Iterable[str] = ()
) -> tuple[list[Resample], list[str]]:
    """The recorded samples to repeat, and notes on the ones left out on purpose.

    Only tools the live server annotates `readOnlyHint: true` (its word now, not the
    recording's), that are recorded and still listed, and not blocklisted; only the samples
    that define the committed type (not isError, not cut: `unwrapped_samples`), the first
    MAX_INFER_SAMPLES of them as inference takes; never one whose recorded input was redacted.
    """
    live = {t["name"]: t for t in live_tools if isinstance(t.get("name"), str)}
    listed = {t["name"] for t in fixture_set.tools}
    hidden = set(blocklist)
    plan: list[Resample] = []
    notes: list[str] = []
    for name in sorted(fixture_set.calls):
        tool = live.get(name)
        if name not in listed or tool is None or name in hidden or not _read_only(tool):
            continue
        calls = fixture_set.calls[name]
        lines = [sample.line for sample in unwrapped_samples(calls, "spec")]
        if len(lines) > MAX_INFER_SAMPLES:
            notes.append(
                f"{shown(name)}: only the first {MAX_INFER_SAMPLES} of {len(lines)} samples repeated"
            )
            lines = lines[:MAX_INFER_SAMPLES]
        for line in lines:
            args = calls[line - 1].get("input")
            if _mentions_redaction(args):
                notes.append(f"{shown(name)} sample {line}: not repeated: its recorded input was redacted")
                continue
            plan.append(Resample(name, line, args))
    return plan, notes


# --------------------------------------------------------------------------- one server, report


def check_server(
    fixture_set: FixtureSet,
    live_server_json: Mapping[str, Any] | None,
    live_tools: Sequence[Mapping[str, Any]],
    repeated: Iterable[Repeated],
    *,
    mode: UnwrapMode = "spec",
    notes: Iterable[str] = (),
) -> ServerCheck:
    """Everything `record --check` says about one reachable server. `live_server_json` None:
    its initialize result was not usable (not compared)."""
    check = ServerCheck(fixture_set.config_id, tools=len(live_tools), notes=list(notes))
    if live_server_json is not None:
        check.findings += compare_server(fixture_set.server_json, live_server_json)
    check.findings += compare_tools(fixture_set.tools, live_tools)
    findings, unchecked, result_notes, compared = compare_results(fixture_set, repeated, mode)
    check.findings += findings
    check.unchecked += unchecked
    check.notes += result_notes
    check.compared = compared
    check.findings.sort(key=lambda f: (f.tool is not None, f.tool or "", _KIND_RANK[f.kind]))  # stable
    return check


def exit_status(checks: Iterable[ServerCheck]) -> int:
    """1: drift (or a server not recorded yet) anywhere; else 3: something could not be checked
    (unreachable server, failed sample call); else 0."""
    statuses = {c.status for c in checks}
    if statuses & {"drift", "not-recorded"}:
        return 1
    if statuses & {"unreachable", "incomplete"}:
        return 3
    return 0


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _status_line(check: ServerCheck, fixtures_dir: Path) -> str:
    sid = check.server_id
    status = check.status
    if status == "not-recorded":
        return f"{sid}: not recorded yet: no {fixtures_dir / sid}/ (run `codemode-gen record --server {sid}`)"
    if status == "unreachable":
        # the reason may quote the server's stderr: every line printable, never an escape
        reason = "\n".join(shown(line, MAX_STDERR_LINE_CHARS) for line in str(check.unreachable).splitlines())
        return f"{sid}: unreachable: {reason}"
    counts = f"{_n(check.tools, 'tool')}, {_n(check.compared, 'result')} compared"
    if status == "drift":
        return f"{sid}: drift, {_n(len(check.findings), 'finding')} ({counts})"
    if status == "incomplete":
        return f"{sid}: no drift found, but {_n(len(check.unchecked), 'sample')} could not be checked ({counts})"
    return f"{sid}: up to date ({counts})"


def render_report(checks: Iterable[ServerCheck], fixtures_dir: Path) -> list[str]:
    """The per-server report, sorted by server id; findings sorted by tool, then kind."""
    out: list[str] = []
    for check in sorted(checks, key=lambda c: c.server_id):
        out.append(_status_line(check, fixtures_dir))
        body = [f"  {finding.text()}" for finding in check.findings]
        body += [f"  could not check: {line}" for line in check.unchecked]
        if check.status == "unreachable" and check.log_path is not None:
            body.append(f"  (server log: {check.log_path})")
        body += [f"  note: {line}" for line in check.notes]
        if len(body) > MAX_REPORT_LINES_PER_SERVER:
            more = len(body) - MAX_REPORT_LINES_PER_SERVER
            body = [*body[:MAX_REPORT_LINES_PER_SERVER], f"  ... and {more} more lines"]
        out += body
    return out
