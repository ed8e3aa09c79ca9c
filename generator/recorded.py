"""The calls-file line: how one answered call becomes a recorded line, and how lines merge.

`record`, `record --check` and live recording (`run --record`, `serve --record` through
runtime/host/learn.py) must write the same format with the same redaction and the same bounds,
and must agree on which lines are "the same call" — otherwise re-recording an unchanged server
would change committed fixtures and make `generate --check` stale. This module owns that format:
`recordable_tools` (the tools/list kept), `recorded_call` (one line: redacted, cut, stamped),
`input_key` (a call's identity) and `merge_calls` (old lines stay, a new call replaces its twin,
newest `max_samples` kept).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.untrusted import cap_result, json_bytes, json_problem, shown

__all__ = ["input_key", "merge_calls", "recordable_tools", "recorded_call"]


def input_key(value: Any) -> str:
    """The identity of a call's input: calls with equal keys are one recorded line
    (`merge_calls`, probes, runtime/host/learn.py's in-session samples). Exact JSON, so unlike
    replay's `canonical_json` an input sending 1.0 stays apart from one sending 1 (a server
    may tell them apart). `default=str`: a key never raises on a call's path."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def merge_calls(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], max_samples: int
) -> list[dict[str, Any]]:
    """Old lines stay; a new call replaces an old one with the same input; newest N kept.

    A new call whose result equals the old line's result keeps the old line untouched (its
    recordedAt/durationMs too), so re-recording an unchanged server changes no byte of the
    committed fixtures and does not make `generate --check` stale.
    """
    merged: dict[str, dict[str, Any]] = {}
    for record in old:
        key = input_key(record.get("input"))
        merged.pop(key, None)
        merged[key] = dict(record)
    for record in new:
        key = input_key(record.get("input"))
        previous = merged.get(key)
        if previous is not None and previous.get("result") == record.get("result"):
            continue
        merged.pop(key, None)  # re-inserting moves it to the end: it is the newest
        merged[key] = dict(record)
    records = list(merged.values())
    return records[-max_samples:] if max_samples > 0 else []


def recordable_tools(listed: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the tools `record` keeps of a tools/list, a warning for each one left out).

    A definition that is not JSON (`json_problem`) is left out. Shared with `record --check`
    (generator/record_check.py), so the live list it compares is the one `record` would write.
    """
    tools: list[dict[str, Any]] = []
    warnings: list[str] = []
    for tool in listed:
        problem = json_problem(tool)
        if problem is None:
            tools.append(tool)
        else:
            name = tool.get("name")
            label = shown(name) if isinstance(name, str) else "a tool"
            warnings.append(f"tool {label} left out: its definition is not valid JSON: {problem}")
    return tools, warnings


def recorded_call(
    args: Any, result: Any, duration_ms: int, redactor: Redactor, max_result_bytes: int
) -> tuple[dict[str, Any] | None, str | None]:
    """One calls-file line for a successful call (input and result redacted, the result cut to
    `max_result_bytes`), and a note: why there is no line, or that the result was cut. Shared
    by `record` and live recording (`run --record`, `serve --record`): the same format, the same
    redaction, the same bounds."""
    problem = json_problem(result, text_only=False)  # any JSON value round-trips (fixtures.py)
    if problem is not None:
        return None, f"result is not valid JSON: {problem}"
    kept, cut_from = cap_result(redactor.value(result), max_result_bytes)
    if kept is None:
        return None, (
            f"result of {cut_from:,} bytes cannot be cut below max_result_bytes"
            f" ({max_result_bytes:,}) and keep its shape"
        )
    record: dict[str, Any] = {
        "input": redactor.value(args),
        "result": kept,
        "durationMs": duration_ms,
        "recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if cut_from is None:
        return record, None
    kept_bytes = json_bytes(kept)
    record["truncated"] = {"originalBytes": cut_from, "keptBytes": kept_bytes}
    return record, (
        f"result of {cut_from:,} bytes cut to {kept_bytes:,} (max_result_bytes = {max_result_bytes:,});"
        ' the recorded line is marked "truncated"'
    )
