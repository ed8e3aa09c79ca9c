"""What a drift check says: its findings, the samples it repeats, and the verdict on a server.

The stages of `record --check` (drift_listing.py compares the listing, drift_results.py the
repeated results, drift.py plans and renders) and generator/record_check.py, which makes the
calls, exchange these types; they live here, below all of them, so no stage imports another
to name them. `short_json` is how every stage quotes a server value in a finding: compact,
printable, bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codemode_gen.generator.untrusted import shown

__all__ = [
    "ABSENT",
    "MAX_VALUE_CHARS",
    "CheckStatus",
    "Finding",
    "FindingKind",
    "Repeated",
    "Resample",
    "ServerCheck",
    "short_json",
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
CheckStatus = Literal["up-to-date", "drift", "incomplete", "unreachable", "not-recorded"]


# Server values (old -> new, a result's literal) quoted in one report line are cut to this.
MAX_VALUE_CHARS = 60


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
    live_tools: list[dict[str, Any]] | None = (
        None  # the live tools/list, as record keeps it (skills are checked on it)
    )

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


# A field or key that is not there (`(absent)` in a report line), told apart from JSON null.
ABSENT = object()


def short_json(value: Any) -> str:
    """A server value (or ABSENT) as compact JSON for one report line, cut to MAX_VALUE_CHARS."""
    if value is ABSENT:
        return "(absent)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return shown(text, MAX_VALUE_CHARS)
