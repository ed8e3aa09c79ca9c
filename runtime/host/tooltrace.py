"""What a response shows of a run's tool calls (§3.3.2): every call counted per tool
(`CallCounts`, the `toolSummary`) and the `toolTrace` listed for a `limits.trace` mode.

The host's part of a response: the sandbox makes no calls of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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

    def summary(self) -> dict[str, Any] | None:
        """`{"calls": {"notes.get_note": 9}, "failed": 1}`; None when no call was made."""
        if not self.calls:
            return None
        return {"calls": dict(self.calls), "failed": self.failed}


def shape_trace(
    trace: Sequence[Mapping[str, Any]], counts: CallCounts | None, mode: str
) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
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
            {k: v for k, v in e.items() if not (k == "approval" and v == "allowed")}
            for e in trace if not e.get("ok")
        ][:MAX_LISTED_FAILURES]
        return failed, counts.summary() if counts is not None else None
    return [dict(e) for e in trace], None
