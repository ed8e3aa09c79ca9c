"""The `logs` of a §3.3 response: console output kept up to maxLogBytes (§3.3.1, §9).

Log messages are produced in JS (runtime/js/prelude.js): `String(v)` for primitives, stable
JSON for objects: keys sorted by UTF-16 code units, compact separators, JSON.stringify's rules
for toJSON/undefined/functions, `"[Unserializable Object]"` for cycles, BigInt or nesting
deeper than MAX_LOG_DEPTH. Errors are shown as `{"message", "name", ...own fields}`. The worker
collects them (`LogCollector`), the pool finishes them (`finish_logs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from codemode_gen.runtime.jsonsafe import utf8_safe
from codemode_gen.runtime.limits import LOG_ENTRY_OVERHEAD_BYTES, MIN_LOG_ENTRIES

LOG_LEVELS = ("debug", "log", "warn", "error")


class LogEntry(TypedDict):
    """One element of a response's `logs` (§3.3.1): made in the worker, finished by the pool,
    cut to maxResponseChars by the response."""

    level: str
    message: str
    timeMs: int


#: Nesting depth at which a logged object is given up as unserialisable (deep recursion would
#: otherwise hit the JS stack limit inside console.log).
MAX_LOG_DEPTH = 200


def max_log_entries(max_bytes: int) -> int:
    """Entries a run may log: their fixed overhead (LOG_ENTRY_OVERHEAD_BYTES each) is bounded
    by maxLogBytes too, with at least MIN_LOG_ENTRIES for tiny limits."""
    return max(MIN_LOG_ENTRIES, max_bytes // LOG_ENTRY_OVERHEAD_BYTES)


@dataclass
class LogCollector:
    """Log entries up to `max_bytes` of UTF-8 message text (§3.3.1, §9), and at most
    `max_log_entries(max_bytes)` entries (empty messages still cost response bytes).

    The entry that crosses the limit is cut at a character boundary; everything after it is
    dropped and `finish()` appends the `warn` entry naming the limit.
    """

    max_bytes: int
    entries: list[LogEntry] = field(default_factory=list)
    used: int = 0
    truncated: bool = False
    max_entries: int = -1

    def __post_init__(self) -> None:
        if self.max_entries < 0:
            self.max_entries = max_log_entries(self.max_bytes)

    def add(self, level: str, message: str, time_ms: int) -> LogEntry | None:
        """Record one console call; returns the entry kept (None when dropped)."""
        if self.truncated:
            return None
        if len(self.entries) >= self.max_entries:
            self.truncated = True
            return None
        if level not in LOG_LEVELS:
            level = "log"
        message = utf8_safe(message)
        data = message.encode("utf-8")
        room = self.max_bytes - self.used
        if len(data) > room:
            self.truncated = True
            if room <= 0:
                return None
            message = data[:room].decode("utf-8", "ignore")
            data = message.encode("utf-8")
        self.used += len(data)
        entry: LogEntry = {"level": level, "message": message, "timeMs": int(time_ms)}
        self.entries.append(entry)
        return entry


def truncation_entry(max_bytes: int, time_ms: int) -> LogEntry:
    return {
        "level": "warn",
        "message": f"logs truncated: maxLogBytes limit of {max_bytes} bytes reached (at most "
        f"{max_log_entries(max_bytes)} entries: each costs {LOG_ENTRY_OVERHEAD_BYTES} bytes besides "
        "its message); later console output was dropped",
        "timeMs": int(time_ms),
    }


def finish_logs(
    entries: Sequence[LogEntry], truncated: bool, max_bytes: int, time_ms: int
) -> list[LogEntry]:
    """The final `logs` array: entries plus the truncation warning when anything was dropped."""
    logs = [e.copy() for e in entries]
    if truncated:
        last = logs[-1]["timeMs"] if logs else 0
        logs.append(truncation_entry(max_bytes, max(int(time_ms), int(last))))
    return logs
