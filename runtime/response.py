"""The §3.3 response of one run: `{logs, result, diagnostics}`, plus the host's toolTrace and
toolSummary, and nothing else.

Every response is made by `build_response` (`not_started` for a run that never started), here:
result null after a fatal diagnostic (§3.3.4), everything plain JSON that encodes as UTF-8, and
logs and result cut together to limits.maxResponseChars (`fit_response`). Used on both sides of
the pipe: the sandbox pool answers a run the worker could not finish, the host every other.
"""

from __future__ import annotations

import functools
from typing import Any, NotRequired, TypedDict

from codemode_gen import payload
from codemode_gen.runtime import json_cut
from codemode_gen.runtime.diagnostics import FATAL_CODES, Diagnostic, DiagnosticCode, diagnostic
from codemode_gen.runtime.json_cut import cut_json, cut_size, cut_string, json_size, measure
from codemode_gen.runtime.jsonsafe import utf8_safe_json
from codemode_gen.runtime.logs import LogEntry


class TraceEntry(TypedDict):
    """One call in a response's `toolTrace` (§3.3.2): which tool, how long, whether it worked;
    never its input or output."""

    serverId: str
    toolName: str
    durationMs: int
    ok: bool
    #: The error class and what went wrong, on one line (runtime/host/call_replies.py `trace_error`).
    error: NotRequired[str]
    #: What the approval gate decided (allowed, approved, approved-for-session,
    #: approved-for-run, denied); absent for calls refused before the gate.
    approval: NotRequired[str]


class ToolSummary(TypedDict):
    """A response's `toolSummary`: calls per `serverId.toolName`, and how many failed."""

    calls: dict[str, int]
    failed: int


class Response(TypedDict):
    """The §3.3 response of one run, as every front-end returns it (`build_response`): the
    worker's part (logs, result, diagnostics) and the host's (toolTrace, toolSummary)."""

    logs: list[LogEntry]
    #: Plain JSON; null after a fatal diagnostic (§3.3.4).
    result: Any
    diagnostics: list[Diagnostic]
    #: The host's: absent from a response the sandbox pool makes on its own.
    toolTrace: NotRequired[list[TraceEntry]]
    toolSummary: NotRequired[ToolSummary]


#: Share of maxResponseChars that logs keep when the result needs the rest (what either one
#: leaves unused goes to the other).
LOG_SHARE = 0.25


def _log_marker(dropped: int, chars: int, time_ms: int) -> LogEntry:
    return {
        "level": "warn",
        "message": f"…[+{dropped} log entries, {chars} chars: cut to maxResponseChars]",
        "timeMs": int(time_ms),
    }


def cut_logs(
    logs: list[LogEntry], room: int, total: int | None = None
) -> tuple[list[LogEntry], int]:
    """(`logs` within `room` characters of JSON, entries dropped): the first entries that fit
    in half the room, the last ones that fit in the rest, and between them one `warn` entry
    saying how many entries (and characters) were cut; a first entry too large for the room
    keeps its message's longest prefix that fits. The §3.3.1 shape is kept: every element is a
    log entry. Only the entries kept (and one more at each end) are measured; `total`: the
    JSON size of `logs` when the caller has it."""
    total = json_size(logs) if total is None else total
    if total <= room:
        return logs, 0
    last_ms = max((int(e.get("timeMs", 0)) for e in logs), default=0)
    reserve = json_size(_log_marker(len(logs), total, last_ms)) + 1
    avail = room - 2 - reserve
    head: list[LogEntry] = []
    used = 0  # the kept entries' sizes, a comma each
    for entry in logs:
        size = measure(entry, avail // 2 - used) + 1
        if used + size > avail // 2:
            break
        head.append(entry)
        used += size
    tail_start = len(logs)
    while tail_start > len(head):
        size = measure(logs[tail_start - 1], avail - used) + 1
        if used + size > avail:
            break
        tail_start -= 1
        used += size
    kept_chars = used
    first_cut = len(head)
    if not head and tail_start == len(logs) and logs:  # nothing fits whole: cut the first message
        entry = logs[0].copy()
        message = cut_string(
            str(entry.get("message", "")), avail - (json_size({**entry, "message": ""}) - 2)
        )
        if isinstance(message, str):
            entry["message"] = message
            head.append(entry)
            first_cut = 1
            kept_chars += json_size(logs[0]) + 1  # the whole entry's share of `total` is gone too
    dropped = tail_start - first_cut
    out = list(head)
    if dropped:
        chars = (
            total - 2 - (len(logs) - 1) - (kept_chars - (len(logs) - dropped))
        )  # the dropped entries
        out.append(_log_marker(dropped, chars, int(logs[first_cut].get("timeMs", 0))))
    out.extend(logs[tail_start:])
    if json_size(out) > room:  # a room too small for the marker (never at MIN_RESPONSE_CHARS)
        return [], len(logs)
    return out, dropped


def fit_response(
    logs: list[LogEntry], result: Any, max_chars: int, *, result_small: bool = False
) -> tuple[list[LogEntry], Any, Diagnostic | None]:
    """(logs, result, diagnostic) with the JSON of `logs` and `result` together within
    `max_chars` characters (limits.maxResponseChars, at least MIN_RESPONSE_CHARS): unchanged
    with no diagnostic when they fit; else cut (`cut_logs`, `cut_json`: deterministic, always
    valid JSON), the logs keeping up to LOG_SHARE of the budget when the result needs the rest
    (and the result what the logs leave), with one RESPONSE_TRUNCATED warning saying how large
    each was, what is left and what to do. `result_small`: the result holds at most about
    payload.INLINE_NODES values (the caller measured it): it is sized by the C encoder, once.

    Both are measured only up to the budget (a large result is never encoded whole to learn it
    does not fit)."""
    result_size = json_cut.size(result, max_chars, result_small)
    if measure(logs, max_chars) + result_size <= max_chars:
        return logs, result, None
    logs_size = json_size(logs)  # for the message: the whole sizes
    if not result_small:
        result_size = json_size(result)
    logs_room = min(logs_size, max(int(max_chars * LOG_SHARE), max_chars - result_size))
    new_logs, dropped = cut_logs(logs, logs_room, logs_size)
    new_logs_size = json_size(new_logs) if new_logs is not logs else logs_size
    result_room = max_chars - new_logs_size
    new_result = cut_json(result, result_room, small=result_small, known=result_size)
    parts = []
    if new_result is not result:
        parts.append(
            f"result {result_size} → {cut_size(new_result, result_room)} characters of JSON"
        )
    if new_logs is not logs:
        parts.append(
            f"logs {logs_size} → {new_logs_size} ({len(logs) - dropped} of {len(logs)} entries kept)"
        )
    note = diagnostic(
        DiagnosticCode.RESPONSE_TRUNCATED,
        f"the response was cut to maxResponseChars = {max_chars}: "
        + "; ".join(parts)
        + '. Cut strings end in …[+N chars], cut arrays in an element "…[+N items]", cut objects '
        'in a key "…"; a log entry says how many entries were cut',
        severity="warning",
        hint="return less: filter, pick fields and aggregate in the script (counts, top-N, ids), or page "
        "through the data over several runs; limits.maxResponseChars raises the budget",
    )
    return new_logs, new_result, note


def build_response(
    logs: list[LogEntry],
    result: Any,
    diagnostics: list[Diagnostic],
    tool_trace: list[TraceEntry] | None = None,
    *,
    tool_summary: ToolSummary | None = None,
    max_chars: int | None = None,
    result_checked: bool = False,
    result_small: bool = False,
) -> Response:
    """`{logs, result, diagnostics}` with result forced to null after a fatal error (§3.3.4)
    and UTF-8-safe, plus `toolTrace` when given (the host's part: the sandbox has none) and
    `toolSummary` (`shape_trace`). With `max_chars` (limits.maxResponseChars) logs and result
    are cut to it together (`fit_response`). `result_checked`: the result is UTF-8-safe already
    (screen.result_from_text made it, or a response built here holds it), and a large one is
    not walked again (the walk costs ~0.1 s per MB). `result_small`: see `fit_response`."""
    if any(d.get("code") in FATAL_CODES and d.get("severity") == "error" for d in diagnostics):
        result = None
    if not result_checked:
        result = utf8_safe_json(result)
    if max_chars is not None:
        logs, result, note = fit_response(logs, result, max_chars, result_small=result_small)
        if note is not None:
            diagnostics = [*diagnostics, note]
    response: Response = {"logs": logs, "result": result, "diagnostics": diagnostics}
    if tool_trace is not None:
        response["toolTrace"] = tool_trace
    if tool_summary is not None:
        response["toolSummary"] = tool_summary
    return response


async def build_response_async(
    logs: list[LogEntry],
    result: Any,
    diagnostics: list[Diagnostic],
    tool_trace: list[TraceEntry] | None = None,
    *,
    tool_summary: ToolSummary | None = None,
    max_chars: int | None = None,
    result_checked: bool = False,
) -> Response:
    """`build_response` off the event loop when the result or the logs are large (its UTF-8
    check encodes all of the result; a budget measures both and may walk them). A checked
    result without a budget needs neither: not even a walk to tell whether it is large."""
    build = functools.partial(
        build_response,
        logs,
        result,
        diagnostics,
        tool_trace,
        tool_summary=tool_summary,
        max_chars=max_chars,
        result_checked=result_checked,
    )
    heavy = max_chars is not None or not result_checked
    if not heavy:
        return build()
    if payload.is_large(result) or (max_chars is not None and payload.is_large(logs)):
        return await payload.offload(build)
    # Measured just now: a budget sizes it with the C encoder instead of walking it again.
    return build(result_small=True)


def not_started(*diagnostics: Diagnostic) -> Response:
    """The response of a run that never started (a bad request or limits, a configuration
    error, a script that does not parse, a host failure): no logs, result null, no calls;
    never a failed tool call (§3.3.4)."""
    return build_response([], None, list(diagnostics), [])
