"""generator/record_outcome.py: how `record` judges samples and keeps a server's account (no servers)."""

from __future__ import annotations

from typing import Any

from codemode_gen.config import Sample
from codemode_gen.generator.record_outcome import (
    MAX_LISTED_MISMATCHES,
    Planned,
    ServerOutcome,
    call_failed,
    plan_samples,
    redact_outcome,
    result_failure,
    summary,
)
from codemode_gen.generator.redact import Redactor

SEARCH = {
    "name": "search",
    "inputSchema": {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {"hits": {"type": "integer"}},
        "required": ["hits"],
    },
}


def _result(structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": "boom" if is_error else "ok"}]}
    if is_error:
        result["isError"] = True
    else:
        result["structuredContent"] = structured
    return result


def test_plan_samples_sends_only_listed_tools_with_inputs_their_schema_accepts() -> None:
    outcome = ServerOutcome("s")
    samples = [
        Sample("s", "search", {"query": "milk"}),
        Sample("s", "nope", {}),
        Sample("s", "search", {"query": 1}),
        Sample("s", "search", {"query": 1}, expect="error"),
        Sample("s", "search", {"query": float("nan")}),
    ]
    planned = plan_samples(samples, {"search": SEARCH}, outcome)
    assert [(p.tool, p.input) for p in planned] == [
        ("search", {"query": "milk"}),
        ("search", {"query": 1}),
    ]
    assert planned[1].sample is samples[3]  # sent anyway: the sample expects the error
    failed = outcome.failed_samples
    assert len(failed) == 3
    assert "the server lists no such tool" in failed[0]
    assert "input rejected by the tool's inputSchema (not sent)" in failed[1]
    assert "not valid JSON" in failed[2]
    assert any('expect = "error"' in note for note in outcome.notes)


def test_result_failure_follows_the_samples_expectation() -> None:
    asked = Planned("search", {"query": "x"}, Sample("s", "search", {"query": "x"}))
    wants_error = Planned(
        "search", {"query": "x"}, Sample("s", "search", {"query": "x"}, expect="error")
    )
    wants_drift = Planned(
        "search", {"query": "x"}, Sample("s", "search", {"query": "x"}, expect="drift")
    )
    good, bad, error = _result({"hits": 2}), _result({"hits": "two"}), _result(None, is_error=True)

    def failure(
        call: Planned, result: dict[str, Any], record: dict[str, Any] | None = None
    ) -> str | None:
        return result_failure(
            SEARCH, call, result, record or {"result": result}, "spec", ServerOutcome("s")
        )

    assert failure(asked, good) is None
    assert failure(asked, error) == "the tool answered with an error (isError): boom"
    assert failure(wants_error, error) is None
    assert (failure(asked, bad) or "").startswith(
        "the result does not match the tool's declared outputSchema"
    )
    assert failure(wants_drift, bad) is None
    assert (
        failure(asked, bad, {"result": bad, "truncated": {"originalBytes": 9}}) is None
    )  # a cut result has no shape


def test_result_failure_notes_an_expectation_that_did_not_happen() -> None:
    outcome = ServerOutcome("s")
    call = Planned("search", {"query": "x"}, Sample("s", "search", {"query": "x"}, expect="drift"))
    good = _result({"hits": 2})
    assert result_failure(SEARCH, call, good, {"result": good}, "spec", outcome) is None
    assert outcome.notes and 'expect = "drift", but the result matches' in outcome.notes[0]


def test_a_failed_probe_is_a_warning_and_a_failed_sample_fails_the_run() -> None:
    outcome = ServerOutcome("s")
    call_failed(outcome, Planned("search", {}, None), "timed out")
    assert outcome.ok and "an automatic probe: not recorded" in outcome.warnings[0]
    call_failed(
        outcome,
        Planned("search", {}, Sample("s", "search", {}, where="samples.json: [0]")),
        "timed out",
    )
    assert not outcome.ok
    assert outcome.failed_samples == ["search {}: timed out (sample from samples.json: [0])"]


def test_mismatches_are_listed_up_to_the_bound() -> None:
    outcome = ServerOutcome("s")
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6)}}
    tool = {"name": "t", "inputSchema": schema}
    plan_samples([Sample("s", "t", {f"p{i}": i for i in range(6)})], {"t": tool}, outcome)
    line = outcome.failed_samples[0]
    assert line.count("expected string, got integer") == MAX_LISTED_MISMATCHES
    assert line.endswith(f"(and {6 - MAX_LISTED_MISMATCHES} more)")


def test_every_line_of_the_account_is_redacted() -> None:
    outcome = ServerOutcome("s", error="token sekrit-value-123 refused")
    outcome.notes.append("saw sekrit-value-123")
    outcome.failed_samples.append("echo sekrit-value-123")
    outcome.warnings.append("probe sekrit-value-123")
    redact_outcome(outcome, Redactor({"API_TOKEN": "sekrit-value-123"}))
    lines = [outcome.error or "", *outcome.notes, *outcome.failed_samples, *outcome.warnings]
    assert all("sekrit-value-123" not in line for line in lines)
    assert all("<redacted:" in line for line in lines)


def test_summary_counts_with_plurals() -> None:
    outcome = ServerOutcome("s", tools=1, calls=2, failed_samples=["a"], warnings=["w", "x"])
    assert summary(outcome) == "recorded 1 tool, 2 calls, 1 sample failed, 2 warnings"
