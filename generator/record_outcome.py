"""What `record` says about one server: which calls are good samples, which failed, and why.

The recording loop (generator/record.py) makes the calls; this module judges them and keeps
the account (`ServerOutcome`): a sample is planned only if its tool is listed and its input is
JSON its inputSchema accepts (`plan_samples`); an answered call is a good sample unless it is a
tool error or breaks the declared outputSchema, as the sample's `expect` allows
(`result_failure`); a failed sample fails the run, a failed auto-probe is only a warning
(`call_failed`). Every line of the account quotes server values through `shown` and is
redacted before it is printed (`redact_outcome`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode_gen.config import Sample
from codemode_gen.generator.output_schema import schema_mismatches
from codemode_gen.generator.recorded import input_key
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.untrusted import json_problem, shown
from codemode_gen.generator.unwrap import UnwrapMode, unwrap_result

__all__ = [
    "MAX_LISTED_MISMATCHES",
    "Planned",
    "ServerOutcome",
    "call_failed",
    "call_label",
    "plan_samples",
    "redact_outcome",
    "result_failure",
    "summary",
]

# Bounds the schema mismatches one failed-sample line lists (an input wrong in 50 places).
MAX_LISTED_MISMATCHES = 3


@dataclass
class ServerOutcome:
    """What happened to one server; `error` set means nothing was written for it."""

    server_id: str
    error: str | None = None
    tools: int = 0
    calls: int = 0
    failed_samples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # something was kept only in part or left out (cut results, non-JSON probes or tools)
    warnings: list[str] = field(default_factory=list)
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed_samples


@dataclass(frozen=True)
class Planned:
    """One call `record` makes: a sample the user asked for, or an auto-probe (sample None)."""

    tool: str
    input: Any
    sample: Sample | None


def plan_samples(
    samples: list[Sample], by_name: Mapping[str, dict[str, Any]], outcome: ServerOutcome
) -> list[Planned]:
    """The samples that may be sent. Checked before any call: the tool is listed, the input is
    JSON and the tool's inputSchema accepts it (a rejected input is a failed sample, never sent,
    unless the sample expects an error: then the server's answer to it is what is recorded)."""
    planned: list[Planned] = []
    for sample in samples:
        tool = by_name.get(sample.tool)
        if tool is None:
            _sample_failed(outcome, sample, "the server lists no such tool")
            continue
        problem = json_problem(sample.input)  # a samples file may hold "\ud800" escapes
        if problem is not None:
            _sample_failed(outcome, sample, f"its input is not valid JSON: {problem}")
            continue
        schema = tool.get("inputSchema")
        if isinstance(schema, dict):
            mismatches, unusable = schema_mismatches(schema, sample.input)
            label = call_label(sample.tool, sample.input)
            if unusable is not None:
                outcome.notes.append(
                    f"{label}: input not checked: the tool's inputSchema is {unusable}"
                )
            elif mismatches and sample.expect != "error":
                _sample_failed(
                    outcome,
                    sample,
                    f"input rejected by the tool's inputSchema (not sent): {_listed(mismatches)}",
                )
                continue
            elif mismatches:
                outcome.notes.append(
                    f"{label}: input does not match the tool's inputSchema ({_listed(mismatches)});"
                    ' sent anyway, the sample has expect = "error"'
                )
        planned.append(Planned(sample.tool, sample.input, sample))
    return planned


def result_failure(
    tool: Mapping[str, Any],
    call: Planned,
    result: dict[str, Any],
    record: Mapping[str, Any],
    mode: UnwrapMode,
    outcome: ServerOutcome,
) -> str | None:
    """Why an answered call is not a good sample, or None. A tool error (isError) and a result
    that breaks the tool's declared outputSchema are failures, unless the sample expects them
    (`expect = "error"` / `"drift"`): then it is recorded as such (isError results never define
    an output type; a drifting one is reported by `generate`)."""
    expect = call.sample.expect if call.sample is not None else None
    label = call_label(call.tool, call.input)
    if result.get("isError") is True:
        if expect == "error":
            return None
        return f"the tool answered with an error (isError): {_error_text(result)}"
    if expect == "error":
        outcome.notes.append(
            f'{label}: expect = "error", but the call succeeded; recorded as it is'
        )
    declared = tool.get("outputSchema")
    mismatches: list[str] = []
    if (
        isinstance(declared, dict) and record.get("truncated") is None
    ):  # a cut result has no reliable shape
        found, unusable = schema_mismatches(declared, unwrap_result(result, mode))
        mismatches = found if unusable is None else []  # an unusable schema: generate says so
    if not mismatches:
        if expect == "drift":
            outcome.notes.append(
                f'{label}: expect = "drift", but the result matches the declared outputSchema'
                " (or there is none to check)"
            )
        return None
    if expect == "drift":
        return None
    return f"the result does not match the tool's declared outputSchema: {_listed(mismatches)}"


def _listed(lines: Sequence[str]) -> str:
    return "; ".join(lines[:MAX_LISTED_MISMATCHES]) + (
        f" (and {len(lines) - MAX_LISTED_MISMATCHES} more)"
        if len(lines) > MAX_LISTED_MISMATCHES
        else ""
    )


def _error_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return shown(block["text"])
    return "(no text)"


def call_label(tool: str, args: Any) -> str:
    return f"{shown(tool)} {shown(input_key(args))}"


def _sample_failed(outcome: ServerOutcome, sample: Sample, reason: str) -> None:
    where = f" (sample from {sample.where})" if sample.where else ""
    outcome.failed_samples.append(f"{call_label(sample.tool, sample.input)}: {reason}{where}")


def call_failed(outcome: ServerOutcome, call: Planned, reason: str) -> None:
    """A sample that failed fails the run and is not recorded; an auto-probe (nobody asked for
    it) is best-effort: a warning that says so."""
    if call.sample is not None:
        _sample_failed(outcome, call.sample, reason)
    else:
        outcome.warnings.append(
            f"probe {call_label(call.tool, call.input)}: {reason} (an automatic probe: not recorded,"
            " not a failure of record)"
        )


def redact_outcome(outcome: ServerOutcome, redactor: Redactor) -> None:
    """Redact every line `record` prints about a server: an error message quoting its stderr or
    a tool error echoing a secret must not reach the terminal or a CI log."""
    if not redactor:
        return
    if outcome.error is not None:
        outcome.error = redactor.text(outcome.error)
    for lines in (outcome.failed_samples, outcome.notes, outcome.warnings):
        lines[:] = [redactor.text(line) for line in lines]


def summary(outcome: ServerOutcome) -> str:
    text = f"recorded {outcome.tools} tool{'' if outcome.tools == 1 else 's'}, {outcome.calls} call{'' if outcome.calls == 1 else 's'}"
    if outcome.failed_samples:
        failed = len(outcome.failed_samples)
        text += f", {failed} sample{'' if failed == 1 else 's'} failed"
    if outcome.warnings:
        text += f", {len(outcome.warnings)} warning{'' if len(outcome.warnings) == 1 else 's'}"
    return text
