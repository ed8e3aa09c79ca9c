"""runtime/sandbox/run_state.py: the run clock a resumed run replays before it goes live, and the
journal it writes down (docs/DESIGN.md, "Deterministic runs")."""

from __future__ import annotations

import time
from typing import Any

import pytest

from codemode_gen.runtime.sandbox import run_state
from codemode_gen.runtime.sandbox.run_state import RunClock


def test_a_resumed_clock_returns_the_journal_first_then_live_time_never_less() -> None:
    # Malformed runs (not [int, count > 0]) in a replay are dropped, not replayed.
    replay: list[Any] = [[5, 2], "x", [6, 0], [True, 1], [7, 1]]
    clock = RunClock(int(time.time() * 1000), replay, journal=True)
    assert clock.replaying
    assert [clock.read() for _ in range(3)] == [5, 5, 7]
    assert not clock.replaying
    live = clock.read()
    assert live >= 7  # the run started just now: live time is less, the clock does not go back
    expected = [[5, 2], [7, 2]] if live == 7 else [[5, 2], [7, 1], [live, 1]]
    assert clock.runs == expected


def test_peek_reads_without_writing_down() -> None:
    clock = RunClock(int(time.time() * 1000), [[3, 1]], journal=True)
    assert clock.peek() == 0  # still replaying: the last value read (none yet)
    assert clock.read() == 3
    clock.peek()
    assert clock.runs == [[3, 1]]


def test_past_max_journal_clock_runs_the_journal_overflows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_state, "MAX_JOURNAL_CLOCK_RUNS", 2)
    clock = RunClock(int(time.time() * 1000), [[1, 1], [2, 1], [3, 1]], journal=True)
    assert [clock.read() for _ in range(3)] == [1, 2, 3]
    assert clock.overflow and clock.runs == [[1, 1], [2, 1]]


def test_a_clock_without_journal_writes_nothing() -> None:
    clock = RunClock(int(time.time() * 1000), None, journal=False)
    clock.read()
    assert clock.runs is None and not clock.overflow
