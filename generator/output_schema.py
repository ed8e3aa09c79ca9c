"""Declared vs observed output: one effective output schema per tool, plus the drift between them.

A declared `outputSchema` wins (under §5.3.2 rule 1 a tool that declares one returns
`structuredContent`, so the declared schema describes the *unwrapped* value). Recorded samples
are still checked against it with `jsonschema`; every mismatch is drift, reported in the
generate report and the manifest, because a server that does not honour its own schema will
break scripts typed against it. Without a declared schema the inferred one is used; with
neither the output is `unknown` and the doc comment says how to get a type.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema
import referencing
from jsonschema.exceptions import SchemaError, ValidationError

from codemode_gen import safe_jsonschema
from codemode_gen.generator.infer import Inference, infer_output, unwrapped_samples
from codemode_gen.generator.unwrap import Box, UnwrapMode, inner_schema, read_box
from codemode_gen.jsonio import json_type, pointer_token

OutputSource = Literal["declared", "inferred", "none"]

# Bounds the report for a server whose every sample violates its schema in many places.
MAX_DRIFT_PER_TOOL = 20
# Server values quoted in a drift line are cut to this many characters (bounds report size;
# the text is untrusted and later sanitised again when it reaches a doc comment).
MAX_DRIFT_VALUE_CHARS = 60


@dataclass(frozen=True)
class OutputModel:
    """Everything the templates and the manifest say about one tool's return value."""

    source: OutputSource
    schema: dict[str, Any] | None  # effective schema of the returned value
    declared: dict[str, Any] | None
    inferred: dict[str, Any] | None
    samples: int
    json_text: bool
    json_schema: dict[str, Any] | None  # JSON inside the string, when json_text
    optional: tuple[str, ...]
    drift: tuple[str, ...]
    warnings: tuple[str, ...]
    box: Box | None = None  # the declared schema boxes the value (x-dedalus-box, FastMCP)
    unboxed: bool = False  # ... and the binding returns the inner value (`unbox = true`)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)
    if len(text) > MAX_DRIFT_VALUE_CHARS:
        text = text[: MAX_DRIFT_VALUE_CHARS - 1] + "…"
    return text


def _pointer(error: ValidationError) -> str:
    parts = [pointer_token(str(p)) for p in error.absolute_path]
    return "/" + "/".join(parts) if parts else "/"


def describe_error(error: ValidationError, sample_line: int | None) -> str:
    """`<pointer>: expected <what>, got <what> (sample N)`, short and free of huge values
    (without `(sample N)` when `sample_line` is None: one value, not a recorded line)."""
    keyword = error.validator
    if keyword == "type":
        expected = (
            " or ".join(error.validator_value)
            if isinstance(error.validator_value, list)
            else str(error.validator_value)
        )
        got = json_type(error.instance) or type(error.instance).__name__
    elif keyword == "required" and isinstance(error.validator_value, list):
        missing = [
            k
            for k in error.validator_value
            if isinstance(error.instance, dict) and k not in error.instance
        ]
        expected = "required properties " + ", ".join(_short(k) for k in missing)
        got = "object without them"
    elif keyword == "additionalProperties" and isinstance(error.instance, dict):
        expected = "no additional properties"
        schema = error.schema if isinstance(error.schema, dict) else {}
        extra = sorted(k for k in error.instance if k not in schema.get("properties", {}))
        got = "properties " + ", ".join(_short(k) for k in extra[:5])
    else:
        expected = f"{keyword} {_short(error.validator_value)}"
        got = _short(error.instance)
    where = f" (sample {sample_line})" if sample_line is not None else ""
    return f"{_pointer(error)}: expected {expected}, got {got}{where}"


def _safe_validator(schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(a validator of `schema`, None) or (None, why the schema cannot be used).

    The draft comes from the schema's `$schema` (default 2020-12). Patterns are evaluated with
    a timeout (safe_jsonschema): a server's catastrophic regex makes its keyword unverifiable
    instead of hanging us. An empty registry: a `$ref` to a URL stays unresolved instead of
    making us fetch whatever address an untrusted server put in its schema."""
    dialect = schema.get("$schema")
    probe = schema if isinstance(dialect, str) else {}  # a non-string $schema means "default"
    cls = safe_jsonschema.validator_for(probe, default=jsonschema.Draft202012Validator)
    try:
        safe_jsonschema.check_schema(cls, schema)
    except SchemaError as exc:
        return None, f"not a valid JSON Schema ({exc.message[:120]})"
    return cls(schema, registry=referencing.Registry()), None


def schema_mismatches(schema: dict[str, Any], value: Any) -> tuple[list[str], str | None]:
    """(how `value` breaks `schema`: `<pointer>: expected …, got …` lines, at most
    MAX_DRIFT_PER_TOOL; why it could not be checked, or None). Used by `record` on a sample's
    input (against inputSchema) and result (against outputSchema) before keeping it."""
    validator, problem = _safe_validator(schema)
    if validator is None:
        return [], problem
    with safe_jsonschema.regex_session():
        try:
            errors = sorted(
                validator.iter_errors(value),
                key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)),
            )
        except Exception as exc:  # a $ref jsonschema cannot resolve, ...
            detail = (str(exc).splitlines() or [type(exc).__name__])[0][: MAX_DRIFT_VALUE_CHARS * 2]
            return [], f"cannot be evaluated: {detail}"
    return [describe_error(error, None) for error in errors[:MAX_DRIFT_PER_TOOL]], None


def check_drift(
    declared: dict[str, Any], samples: Sequence[tuple[int, Any]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Validate (line, value) samples against `declared`; returns (drift lines, warnings).

    The draft comes from the schema's `$schema` (default 2020-12). A schema jsonschema cannot
    compile is a warning, not a crash: the declared type is still emitted as the server wrote it.
    """
    validator, problem = _safe_validator(declared)
    if validator is None:
        return (), (f"declared outputSchema is {problem}; drift not checked",)
    drift: list[str] = []
    unverifiable: dict[str, int] = {}  # description -> first sample line
    total = 0
    with safe_jsonschema.regex_session() as regex_report:
        for line, value in samples:
            seen = len(regex_report.skipped)
            try:
                errors = sorted(
                    validator.iter_errors(value),
                    key=lambda e: (list(map(str, e.absolute_path)), str(e.validator)),
                )
            except Exception as exc:  # a $ref jsonschema cannot resolve, ...
                detail = (str(exc).splitlines() or [type(exc).__name__])[0][
                    : MAX_DRIFT_VALUE_CHARS * 2
                ]
                return tuple(drift), (
                    *_unverifiable_lines(unverifiable),
                    f"drift not checked from sample {line} on: {detail}",
                )
            for skipped in regex_report.skipped[seen:]:
                unverifiable.setdefault(skipped.describe(), line)
            for error in errors:
                total += 1
                if len(drift) < MAX_DRIFT_PER_TOOL:
                    drift.append(describe_error(error, line))
    warnings = _unverifiable_lines(unverifiable)
    if total > len(drift):
        warnings += (f"{total - len(drift)} more drift findings not listed",)
    return tuple(drift), warnings


def _unverifiable_lines(unverifiable: dict[str, int]) -> tuple[str, ...]:
    """One warning per pattern that could not be evaluated (first sample it happened on)."""
    return tuple(
        f"drift not checked: {what} (sample {line})"
        for what, line in list(unverifiable.items())[:MAX_DRIFT_PER_TOOL]
    )


def merge_output(
    tool: dict[str, Any],
    calls: Sequence[dict[str, Any]],
    mode: UnwrapMode = "spec",
    *,
    unbox: bool = False,
    inference: Inference | None = None,
) -> OutputModel:
    """Reconcile a tool's declared outputSchema with what its recorded samples returned.

    A declared schema that boxes the value (`read_box`) is kept as declared, and drift is
    checked against it (the server sends the box); with `unbox` the effective schema is the
    boxed field's, because that is what the binding returns. `inference`: what samples merged
    elsewhere say (a host's in-session learning, `infer.MergedSamples`) instead of `calls`."""
    if inference is None:
        inference = infer_output(calls, mode)
    declared = tool.get("outputSchema")
    if isinstance(declared, dict):
        samples = [(s.line, s.value) for s in unwrapped_samples(calls, mode)]
        drift, warnings = check_drift(declared, samples)
        box, box_warning = read_box(declared)
        if box_warning is not None:
            warnings += (box_warning,)
        return OutputModel(
            source="declared",
            schema=inner_schema(declared, box) if box is not None and unbox else declared,
            declared=declared,
            inferred=inference.schema,
            samples=inference.samples,
            json_text=False,
            json_schema=None,
            optional=(),
            drift=drift,
            warnings=inference.warnings + warnings,
            box=box,
            unboxed=box is not None and unbox,
        )
    warnings = inference.warnings
    if declared is not None:
        warnings += (
            f"outputSchema ignored: expected an object, got {json_type(declared) or type(declared).__name__}",
        )
    if inference.schema is None:
        return OutputModel("none", None, None, None, 0, False, None, (), (), warnings)
    return OutputModel(
        source="inferred",
        schema=inference.schema,
        declared=None,
        inferred=inference.schema,
        samples=inference.samples,
        json_text=inference.json_text,
        json_schema=inference.json_schema,
        optional=inference.optional,
        drift=(),
        warnings=warnings,
    )
