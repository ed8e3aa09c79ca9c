"""What a response shows of a run's tool calls (§3.3.2): the run's `CallLog` (trace entries up
to MAX_TRACE_ENTRIES, every call counted per tool in `CallCounts`, the notices of limits enforced
at the boundary), and the `toolTrace` and `toolSummary` listed for a `limits.trace` mode.

The host's part of a response: the sandbox makes no calls of its own. The trace records which
tool ran, how long, and whether it worked, never inputs or outputs (§3.3.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime.host.call_replies import trace_error
from codemode_gen.runtime.limits import MAX_TRACE_ENTRIES
from codemode_gen.runtime.response import ToolSummary, TraceEntry

#: Failed or denied calls listed in toolTrace when trace is "errors" (toolSummary counts them
#: all). Bounds the trace of a loop of failing calls in a response made for a model.
MAX_LISTED_FAILURES = 20
#: Tools named in toolSummary.calls; calls of the others are counted under OTHER_TOOLS. Bounds
#: the summary of a script calling ever new (unknown) tool names.
MAX_SUMMARY_TOOLS = 50
OTHER_TOOLS = "(other tools)"


@dataclass
class CallCounts:
    """Calls of one run per `serverId.toolName` (at most MAX_SUMMARY_TOOLS names) and how many
    failed or were denied: the `toolSummary` of a response whose toolTrace lists only those.
    Counts every call, also those past MAX_TRACE_ENTRIES."""

    calls: dict[str, int] = field(default_factory=dict)
    failed: int = 0

    def add(self, server_id: str, tool_name: str, ok: bool) -> None:
        name = f"{server_id}.{tool_name}"
        if name not in self.calls and len(self.calls) >= MAX_SUMMARY_TOOLS:
            name = OTHER_TOOLS
        self.calls[name] = self.calls.get(name, 0) + 1
        if not ok:
            self.failed += 1

    def summary(self) -> ToolSummary | None:
        """`{"calls": {"notes.get_note": 9}, "failed": 1}`; None when no call was made."""
        if not self.calls:
            return None
        return {"calls": dict(self.calls), "failed": self.failed}


def shape_trace(
    trace: Sequence[TraceEntry], counts: CallCounts | None, mode: str
) -> tuple[list[TraceEntry] | None, ToolSummary | None]:
    """(toolTrace, toolSummary) of a response for a `limits.trace` mode: "full" every entry
    (no summary); "errors" the failed and denied entries (`ok: false`, at most
    MAX_LISTED_FAILURES) and the summary of all calls (None when none was made); "none" neither.
    Entries keep §3.3.2's shape whatever is listed; in "errors" a failed call's `approval` is
    left out when it says only that the call was sent unasked ("allowed"): it failed for
    another reason, which `error` says."""
    if mode == "none":
        return None, None
    if mode == "errors":
        failed = [
            cast(
                TraceEntry, {k: v for k, v in e.items() if not (k == "approval" and v == "allowed")}
            )
            for e in trace
            if not e.get("ok")
        ][:MAX_LISTED_FAILURES]
        return failed, counts.summary() if counts is not None else None
    return [e.copy() for e in trace], None


class CallLog:
    """The calls of one run as its response tells them: their trace entries (past
    MAX_TRACE_ENTRIES only counted), their counts per tool, and the run's notices (BRIDGE_LIMIT
    and UNBOX_MISMATCH diagnostics, one per kind)."""

    def __init__(self) -> None:
        self.trace: list[TraceEntry] = []
        self.trace_dropped = 0  # calls past MAX_TRACE_ENTRIES, counted instead of listed
        self.counts = CallCounts()  # every call by tool, and the failed ones: toolSummary
        self.notices: dict[str, diag.Diagnostic] = {}

    def record(
        self,
        server_id: str,
        tool_name: str,
        duration: int,
        error: str | None,
        *,
        approval: str | None = None,
    ) -> TraceEntry:
        """Count the call and list its trace entry (past MAX_TRACE_ENTRIES only counted); the
        entry either way."""
        self.counts.add(server_id, tool_name, error is None)
        entry: TraceEntry = {
            "serverId": server_id,
            "toolName": tool_name,
            "durationMs": duration,
            "ok": error is None,
        }
        if error is not None:
            entry["error"] = trace_error(error)
        if approval is not None:
            entry["approval"] = approval
        self._list(entry)
        return entry

    def replayed(self, entry: Mapping[str, Any]) -> None:
        """A call answered from a resumed run's journal: the trace entry it made then (a
        TraceEntry when it was journaled, back from its JSON)."""
        self.counts.add(
            str(entry.get("serverId")), str(entry.get("toolName")), entry.get("ok") is True
        )
        self._list(cast(TraceEntry, dict(entry)))

    def _list(self, entry: TraceEntry) -> None:
        if len(self.trace) >= MAX_TRACE_ENTRIES:
            self.trace_dropped += 1
        else:
            self.trace.append(entry)

    def notice(self, kind: str, message: str, hint: str) -> None:
        if kind not in self.notices:
            self.notices[kind] = diag.diagnostic(
                diag.DiagnosticCode.BRIDGE_LIMIT, message, severity="warning", hint=hint
            )

    def diagnostics(self, *, full_trace: bool = True) -> list[diag.Diagnostic]:
        """What the run's response should say about the calls: limits enforced at the boundary
        (once per kind) and, when the response lists every call (`full_trace`), a trace cut at
        MAX_TRACE_ENTRIES."""
        out = list(self.notices.values())
        if self.trace_dropped and full_trace:
            out.append(
                diag.diagnostic(
                    diag.DiagnosticCode.TOOL_TRACE_TRUNCATED,
                    f"toolTrace lists the first {len(self.trace)} tool calls; {self.trace_dropped} later "
                    f"calls are not listed (at most {MAX_TRACE_ENTRIES} entries)",
                    severity="warning",
                    hint="make fewer tool calls per run, or log a summary of them from the script",
                )
            )
        return out
