"""One engine realm of the sandbox worker: a fresh, locked-down QuickJS engine used for one run.

Why its own module: the realm is everything JavaScript sees of the outside during a run (spec
§1.4: nothing survives from one run to the next inside JS): the functions bound into the engine
(tool calls, logs, the run clock, the timer alarm, the event pump), the order in which events are
handed over, and pause/replay of a journaled run (runtime/host/resume.py). The worker process
(worker.py) owns the pipe and the run's lifecycle and builds one realm per run; the clock and
journal the realm writes live in run_state.py. The realm sends through its worker, which keeps
the table of calls waiting for a reply (`send_call`, `drop_calls`).
Imported only by the worker process: no `mcp`, no generator.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codemode_gen.runtime import logs as run_logs
from codemode_gen.runtime import screen, script_errors
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS, MAX_NAME_CHARS, Limits
from codemode_gen.runtime.sandbox import protocol
from codemode_gen.runtime.sandbox.engine import EngineError, new_engine
from codemode_gen.runtime.sandbox.protocol import MODULE_ERRORS, MODULE_HOST
from codemode_gen.runtime.sandbox.run_state import (
    ALARM,
    IDLE,
    MAX_JOURNAL_EVENTS,
    RunClock,
    RunState,
)

if TYPE_CHECKING:
    from codemode_gen.runtime.sandbox.worker import Worker

#: Timers pending at once in one run; bounds the timer heap a script can build up (its memory
#: is also bounded by the heap limit, this gives a clear error first).
MAX_PENDING_TIMERS = 10_000
#: Host calls the engine may have pending beyond the JS-side tool-call cap: the timer alarm,
#: the end-of-run tick and slack.
EXTRA_PENDING_CALLS = 4
#: Failed tool calls one run keeps track of, to report those nobody awaited (prelude.js); bounds
#: the prelude's bookkeeping for a script that fires thousands of failing calls (the rest are
#: counted only).
MAX_TRACKED_FAILURES = 100
#: Budget of prelude phase A (lockdown), which runs before any run is known; it takes a few
#: milliseconds, so hitting this means the engine is broken.
PRELUDE_TIMEOUT_S = 10.0


def realm_key(limits: Limits) -> tuple[int, int]:
    """What a realm is built for: the engine's heap and pending-call limits are fixed at birth."""
    return (limits.maxMemoryBytes, limits.maxConcurrentCalls)


def realm_config() -> dict[str, int]:
    """The prelude's constants, bound into every realm as `__codemode_config__` (the native
    worker's realms get the same, runtime/native/launch.py)."""
    return {
        "maxPendingTimers": MAX_PENDING_TIMERS,
        "maxLogDepth": run_logs.MAX_LOG_DEPTH,
        "maxTrackedFailures": MAX_TRACKED_FAILURES,
        "maxReportedFailures": script_errors.MAX_UNAWAITED_REPORTED,
        "maxNameChars": MAX_NAME_CHARS,
        "maxReportTextChars": MAX_DIAGNOSTIC_CHARS,
    }


class Realm:
    """One fresh engine, locked down by prelude phase A, used for exactly one run (§1.4).

    The engine holds this realm's bound methods (a cycle Python's gc cannot see through the
    binding): `close()` must end every realm, used or not, or its whole JS heap stays."""

    def __init__(self, worker: Worker, limits: Limits) -> None:
        self.worker = worker
        self.key = realm_key(limits)
        self.state = RunState(time.monotonic(), limits.maxLogBytes)
        self.engine = new_engine(
            memory_limit=limits.maxMemoryBytes,
            max_pending_calls=limits.maxConcurrentCalls + EXTRA_PENDING_CALLS,
        )
        e = self.engine
        try:
            e.bind_function("__codemode_host__", self.host_call)
            e.bind_function("__codemode_log__", self.log)
            e.bind_function("__codemode_arm__", self.arm)
            e.bind_function("__codemode_next__", self.next_event)
            e.bind_function("__codemode_take__", self.take)
            e.bind_function("__codemode_tick__", self.tick)
            e.bind_function("__codemode_now__", self.now_ms)
            e.bind_object("__codemode_config__", realm_config())
        except BaseException:
            e.close()
            raise

    @classmethod
    async def create(cls, worker: Worker, limits: Limits) -> Realm:
        """A locked-down realm with @codemode/errors and @codemode/host loaded (prelude phases A
        and A2): what every run needs, built before the run is known."""
        realm = cls(worker, limits)
        engine = realm.engine
        url_js = worker.url_js
        try:
            # url.js's text for the prelude, which compiles it only if the run uses URL (a plain
            # function holding a str: no reference back to the realm).
            engine.bind_function("__codemode_url__", lambda: url_js)
            status = await engine.run(worker.prelude, PRELUDE_TIMEOUT_S)
            if status != "locked":
                raise EngineError("Error", f"prelude phase A returned {status!r}", "")
            engine.add_module(MODULE_ERRORS, worker.errors_js)
            engine.add_module(MODULE_HOST, worker.host_js)
            text = await engine.run(
                f"globalThis.__codemode_load__({int(limits.maxConcurrentCalls)})", PRELUDE_TIMEOUT_S
            )
            report = json.loads(text) if isinstance(text, str) else {}
            if not isinstance(report, dict) or report.get("status") != "loaded":
                error = report.get("error") if isinstance(report, dict) else None
                error = error if isinstance(error, dict) else {}
                detail = str(
                    error.get("text")
                    or error.get("message")
                    or f"prelude phase A2 returned {text!r}"
                )
                raise EngineError("Error", detail, str(error.get("stack") or ""))
        except BaseException:
            realm.close()
            raise
        return realm

    def begin(
        self, t0: float, limits: Limits, msg: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Start the run's state from the run message; returns the prelude's run config (Math.random's
        seed, Date's base). `journal`, `replay`, `seed` and `clockBase` come from the host for a run
        that may be resumed (runtime/host/resume.py); a plain run gets a fresh seed and the time now."""
        msg = msg or {}
        base = msg.get("clockBase")
        if not (isinstance(base, int) and not isinstance(base, bool) and base >= 0):
            base = int(time.time() * 1000)
        given = msg.get("replay")
        replay: Mapping[str, Any] = given if isinstance(given, dict) else {}
        clock_runs = replay.get("clock")
        journal = msg.get("journal") is True
        st = self.state = RunState(
            t0,
            limits.maxLogBytes,
            RunClock(base, clock_runs if isinstance(clock_runs, list) else None, journal),
        )
        seed = msg.get("seed")
        if not (
            isinstance(seed, list)
            and len(seed) == 4
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**32 for x in seed)
        ):
            entropy = os.urandom(16)  # one read for the four words
            seed = [int.from_bytes(entropy[i : i + 4], "little") for i in range(0, 16, 4)]
        st.seed = list(seed)
        events = replay.get("events")
        if isinstance(events, list) and all(
            isinstance(e, int) and not isinstance(e, bool) and e >= IDLE for e in events
        ):
            st.replay = list(events)
            st.replay_replies = {e for e in events if e > 0}
        if journal:
            st.events = []
        return {"seed": st.seed, "clockBase": base}

    def end(self) -> None:
        """Drop what the run left pending: the alarm, the pump's wait, the calls still waiting
        for a reply (a late reply finds no entry and is discarded)."""
        st = self.state
        if st.alarm_handle is not None:
            st.alarm_handle.cancel()
            st.alarm_handle = None
        st.waiter = None
        pending, st.futures = st.futures, set()
        for fut in pending:
            fut.cancel()
        st.replies.clear()
        st.queue.clear()
        self.worker.drop_calls(self)

    def close(self) -> None:
        """End the run and free the engine (its heap and the methods bound into it). Idempotent."""
        self.end()
        self.engine.close()

    def _track(self, fut: asyncio.Future[Any]) -> None:
        futures = self.state.futures
        futures.add(fut)
        fut.add_done_callback(futures.discard)

    # ---- the bound host functions ---------------------------------------------------------
    def now_ms(self) -> int:
        return self.state.clock.read()

    def log(self, level: Any, text: Any) -> bool:
        st = self.state
        try:
            message = json.loads(text) if isinstance(text, str) else str(text)
            if not isinstance(message, str):
                message = str(message)
        except ValueError:
            message = "[Unserializable Object]"
        entry = st.logs.add(str(level), message, st.clock.peek())
        if entry is not None:
            self.worker.send({"op": protocol.LOG, **entry})
        if st.logs.truncated and not st.truncation_sent:
            st.truncation_sent = True
            self.worker.send({"op": protocol.LOGS_TRUNCATED})
        return not st.logs.truncated

    def host_call(self, text: Any) -> int:
        """Send the request now; JS gets the call's number, and its reply through the pump."""
        st = self.state
        st.issued += 1
        # Over MAX_INPUT_BYTES or MAX_JSON_DEPTH: the host gets the call without its input.
        self.worker.send_call(
            self, st.issued, screen.screen_call_request(text) if isinstance(text, str) else text
        )
        return st.issued

    def on_reply(self, seq: int, text: str) -> None:
        st = self.state
        st.replies[seq] = text
        if seq not in st.replay_replies:
            st.queue.append(seq)
        self._hand()

    def next_event(self) -> asyncio.Future[int]:
        """The pump's wait for the next event: the future itself (JS sees it settle only after
        every job of its current turn has run, so events are seen one turn at a time)."""
        st = self.state
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        st.waiter = waiter
        st.handed = None
        self._track(waiter)
        self._hand()
        return waiter

    def take(self, event: Any) -> str:
        """JS takes the event it was handed: a reply's text ("" for the alarm and IDLE). This is
        where an event enters the journal, in the order JS saw them."""
        st = self.state
        if not isinstance(event, int) or event != st.handed:
            return ""
        st.handed = None
        if st.events is not None and not st.overflow:
            if len(st.events) < MAX_JOURNAL_EVENTS:
                st.events.append(event)
            else:
                st.overflow = True
        text = ""
        if event > 0:
            st.taken += 1
            text = st.replies.pop(event, "")
        if st.snapshot_due:  # after the turn this event starts, when JS waits again
            st.snapshot_due = False
            asyncio.get_running_loop().call_soon(self._snapshot)
        return text

    def _hand(self) -> None:
        """Give the pump's wait its next event, if there is one and the run is not paused: the
        journal's events first, in their order (a reply once it has come), then live ones."""
        st = self.state
        waiter = st.waiter
        if waiter is None or waiter.done() or st.paused:
            return
        if not st.live:
            event = st.replay[st.replay_pos]
            if event > 0 and event not in st.replies:
                if event > st.issued:  # not made yet: if it is not made in this turn, it never is
                    asyncio.get_running_loop().call_soon(self._check_replay, st.replay_pos)
                return
            st.replay_pos += 1
            st.replay_replies.discard(event)
            if st.live:
                self._go_live()
                if st.pause_when_live:  # snapshot after this last replayed event's turn
                    st.pause_when_live = False
                    st.paused = st.snapshot_due = True
        elif st.queue:
            event = st.queue.popleft()
        else:
            return
        st.handed = event
        st.waiter = None
        waiter.set_result(event)

    def _check_replay(self, position: int) -> None:
        """JS has finished its turn still waiting for a reply the journal says comes next, to a
        call it has not made: the script no longer does what it did (divergence)."""
        st = self.state
        if st.live or st.replay_pos != position or st.waiter is None or st.waiter.done():
            return
        event = st.replay[position]
        if event > st.issued and event not in st.replies:
            self.worker.send(
                {
                    "op": protocol.DIVERGED,
                    "message": (
                        f"the resumed script stopped after {st.issued} tool calls where the earlier round went on "
                        f"to call #{event}"
                    ),
                }
            )
            st.paused = True  # nothing more reaches the script; the host ends the run
            st.replay_pos = len(st.replay)

    def _go_live(self) -> None:
        """The journal is used up: from here the alarm is real."""
        st = self.state
        if st.armed is not None:
            self._schedule(st.armed)

    def _schedule(self, due: float) -> None:
        st = self.state
        delay = max(0.0, (math.ceil(due) - st.clock.live_ms()) / 1000.0)
        st.alarm_handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        st = self.state
        st.alarm_handle = None
        if ALARM not in st.queue:
            st.queue.append(ALARM)
        self._hand()

    def arm(self, due: Any) -> None:
        """Set (due >= 0, in ms on the run clock) or clear (due < 0) the single timer alarm. An
        alarm that went off and was not handed over yet is for the old due time: dropped."""
        st = self.state
        if st.alarm_handle is not None:
            st.alarm_handle.cancel()
            st.alarm_handle = None
        if ALARM in st.queue:
            st.queue.remove(ALARM)
        if not isinstance(due, int | float) or isinstance(due, bool) or due < 0:
            st.armed = None
            waiter = st.waiter
            # The pump waits, and nothing can come any more: wake it to stop (a replayed run
            # has this IDLE in its journal, where it happened).
            if (
                st.live
                and waiter is not None
                and not waiter.done()
                and not st.queue
                and st.issued == st.taken
                and not st.paused
            ):
                st.handed = IDLE
                st.waiter = None
                waiter.set_result(IDLE)
            return
        st.armed = float(due)
        if st.live:
            self._schedule(st.armed)

    # ---- pause (runtime/host/resume.py) ---------------------------------------------------------
    def pause(self) -> None:
        """Stop handing events and send the journal so far (`paused`), once JS waits: right
        away, or after the turn of an event handed and not taken yet."""
        st = self.state
        if not st.live:  # a journal is whole only once the one replayed is: pause after it
            st.pause_when_live = True
            return
        st.paused = True
        if st.handed is not None:
            st.snapshot_due = True
        else:
            self._snapshot()

    def resume(self) -> None:
        st = self.state
        st.paused = st.snapshot_due = st.pause_when_live = False
        self._hand()

    def _snapshot(self) -> None:
        st = self.state
        journal = None
        if st.events is not None:
            journal = {
                "events": list(st.events),
                "clock": [list(r) for r in st.clock.runs or []],
                "seed": st.seed,
                "clockBase": st.clock.base_ms,
                "overflow": st.overflow or st.clock.overflow,
            }
        self.worker.send({"op": protocol.PAUSED, "issued": st.issued, "journal": journal})

    def tick(self) -> asyncio.Future[None]:
        """One host turn (the end-of-run loop): every queued job runs before JS looks again.

        Settled already: the binding drains the job queue before it hands the host a pending
        call, and settles the JS promise only after awaiting the future, which yields to the loop
        (that is the host turn) whether or not the future is done."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut
