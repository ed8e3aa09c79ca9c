"""The state of one sandbox run that outlives a single JS turn: its clock and its journal.

Why its own module: a run's clock values and the events its pump hands over are what make a run
replayable (docs/DESIGN.md, "Deterministic runs"); this module owns that record (what was read,
what was handed, in which order, and its bounds) apart from the engine realm that produces the
events (realm.py) and the pipe that carries them (worker.py). Imported only by the worker
process: no `mcp`, no generator.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from codemode_gen.runtime import logs as run_logs

#: Events (replies, alarms) and clock values a journaled run writes down: bounds the worker's
#: memory for a script that loops on timers or Date.now(); past either the journal is marked
#: `overflow` and the run cannot be resumed (the host then denies its asks, runtime/host/resume.py).
MAX_JOURNAL_EVENTS = 100_000
MAX_JOURNAL_CLOCK_RUNS = 100_000

#: Events a run's pump hands over (`__codemode_next__`): a reply is its call's number (1, 2, ...
#: in the order the script made them), the alarm is ALARM, and IDLE wakes a pump that waits for
#: nothing any more (the last timer was cleared while no call was in flight).
ALARM = 0
IDLE = -1


class RunClock:
    """The run clock JS reads (`__codemode_now__`: whole milliseconds since the run started) and
    its journal: the values returned, as [value, how many reads in a row] runs.

    `base_ms` is the run's start in Unix milliseconds (Date's base). A resumed run first returns
    the values of `replay`, one per read, then live time: the real time elapsed since `base_ms`
    (the wait for an answer between two rounds included, as a timeout counts it), never less
    than a value already returned."""

    def __init__(self, base_ms: int, replay: list[list[int]] | None, journal: bool) -> None:
        self.base_ms = base_ms
        self._mono0 = time.monotonic()
        self._offset = max(0.0, time.time() * 1000.0 - base_ms)
        self.last = 0
        self._replay = [list(r) for r in replay or [] if _is_clock_run(r)]
        self._replay.reverse()  # popped from the end
        self.runs: list[list[int]] | None = [] if journal else None
        self.overflow = False

    @property
    def replaying(self) -> bool:
        return bool(self._replay)

    def live_ms(self) -> float:
        return max(float(self.last), self._offset + (time.monotonic() - self._mono0) * 1000.0)

    def peek(self) -> int:
        """The clock now, without reading it (log entries' timeMs): no journal entry."""
        return self.last if self._replay else int(self.live_ms())

    def read(self) -> int:
        if self._replay:
            run = self._replay[-1]
            value = run[0]
            run[1] -= 1
            if run[1] <= 0:
                self._replay.pop()
        else:
            value = int(self.live_ms())
        self.last = value
        runs = self.runs
        if runs is not None and not self.overflow:
            if runs and runs[-1][0] == value:
                runs[-1][1] += 1
            elif len(runs) < MAX_JOURNAL_CLOCK_RUNS:
                runs.append([value, 1])
            else:
                self.overflow = True
        return value


def _is_clock_run(run: Any) -> bool:
    return (
        isinstance(run, list)
        and len(run) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in run)
        and run[1] > 0
    )


class RunState:
    """What the bound host functions of one realm act on during its (single) run."""

    def __init__(self, t0: float, max_log_bytes: int, clock: RunClock | None = None) -> None:
        self.t0 = t0
        self.logs = run_logs.LogCollector(max_log_bytes)
        self.truncation_sent = False
        self.clock = clock if clock is not None else RunClock(int(time.time() * 1000), None, False)
        self.seed: list[int] = []
        #: The pump's pending wait (JS awaits it) and the end-of-run ticks still pending.
        self.futures: set[asyncio.Future[Any]] = set()
        self.waiter: asyncio.Future[int] | None = None
        self.handed: int | None = None  # the event given to `waiter`, until JS takes it
        self.queue: collections.deque[int] = collections.deque()  # live events not handed yet
        self.replies: dict[int, str] = {}  # replies arrived and not taken, by call number
        self.issued = 0  # calls the script made
        self.taken = 0  # replies it took
        self.alarm_handle: asyncio.TimerHandle | None = None
        self.armed: float | None = None  # the alarm's due time on the run clock
        # The journal (a run started with `journal`): every event taken, in order.
        self.events: list[int] | None = None
        self.overflow = False
        # A resumed run's events, handed over in their order before any live one.
        self.replay: list[int] = []
        self.replay_pos = 0
        self.replay_replies: set[int] = set()  # calls whose reply is still ahead in `replay`
        self.paused = False
        self.snapshot_due = False
        self.pause_when_live = False  # paused while replaying: the journal's events go first

    @property
    def live(self) -> bool:
        return self.replay_pos >= len(self.replay)
