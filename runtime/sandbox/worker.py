"""The sandbox worker process: runs agent scripts in QuickJS, one run at a time.

Why a process: the engine holds the GIL while JS runs and one slow native operation can
outlast its interrupt check by seconds, so the host must be able to kill the sandbox at the
deadline (docs/DESIGN.md, "Where the sandbox runs"). The worker owns no MCP session: every
tool call goes to the host as a message and the worker awaits the reply.

Lifetime: started by `runtime/sandbox.WorkerPool`, it imports the engine, says `ready` and
waits. Each `run` gets a fresh engine realm (spec §1.4: nothing survives from one run to the
next inside JS); the host reuses a worker only after a run that ended cleanly, and kills it
after any timeout, limit, cancellation or crash.

Pipe protocol: runtime/sandbox/protocol.py (message kinds, framing, limits; the host side is
runtime/sandbox/pool.py).

Everything from outside that a run's JavaScript observes comes through this module, in an order
it can write down and replay (docs/DESIGN.md, "Deterministic runs"): tool-call replies, the
timer alarm and the clock. JS waits for them through one pump (`__codemode_next__`: at most one
event is pending at a time, so each is seen after the previous one's reactions have all run),
reads the run clock (`__codemode_now__`, whole milliseconds; Date and setTimeout use it) and gets
Math.random's seed and Date's base from the run message. A run started with `journal` writes
down the events it hands over and the clock values it returns; `pause` answers with that
journal (`paused`), and a run started with `replay` hands over the journal's events and clock
values first, in the same order, before anything live: the script then makes the same calls
with the same values up to where the journal ends (runtime/host/resume.py: approvals asked through
MCP's input_required). `check` parses `code` as the agent module without running anything (between
runs only) and answers `checked` with `[]` or the `SYNTAX_ERROR` diagnostic that a run of the
same code would report. Nothing else may write to the protocol stream: fd 1 is redirected to
stderr at start-up. A reply framed by `protocol.encode_reply` is handed to JS as the raw text of
its JSON value, never decoded in Python.

This module must stay cheap to import: no `mcp`, no generator.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # The worker process never opens a connection: asyncio's optional `ssl` (OpenSSL, ~4.5 MB
    # of RSS per worker) is refused, and asyncio runs without it. Only when started as the
    # worker: a host importing this module keeps its TLS.
    sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

import asyncio
import collections
import contextlib
import itertools
import json
import math
import os
import time
import traceback
from collections.abc import Mapping
from importlib import resources
from typing import Any

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe, screen, script_errors
from codemode_gen.runtime import logs as run_logs
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS, MAX_NAME_CHARS, Limits
from codemode_gen.runtime.sandbox import protocol
from codemode_gen.runtime.sandbox.engine import (
    Engine,
    EngineError,
    EnginePendingLimit,
    EngineTimeout,
    new_engine,
    preload,
    release_memory,
)

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
#: Events (replies, alarms) and clock values a journaled run writes down: bounds the worker's
#: memory for a script that loops on timers or Date.now(); past either the journal is marked
#: `overflow` and the run cannot be resumed (the host then denies its asks, runtime/host/resume.py).
MAX_JOURNAL_EVENTS = 100_000
MAX_JOURNAL_CLOCK_RUNS = 100_000
#: Budget of prelude phase A (lockdown), which runs before any run is known; it takes a few
#: milliseconds, so hitting this means the engine is broken.
PRELUDE_TIMEOUT_S = 10.0

MODULE_ERRORS = "@codemode/errors"
MODULE_HOST = "@codemode/host"
#: Prelude phase A, run as one script in this order: url.js only leaves the URL polyfill's
#: factory on a temporary global, which prelude.js takes (and deletes) with the host bindings.
PRELUDE_FILES = ("url.js", "prelude.js")


def _js(name: str) -> str:
    return resources.files("codemode_gen.runtime").joinpath("js", name).read_text(encoding="utf-8")


class Worker:
    def __init__(self, out_fd: int, in_fd: int = 0) -> None:
        self._out = out_fd
        self._in = in_fd
        self._buf = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[dict[str, Any] | None] | None = None
        #: Calls waiting for the host's reply, by the call id on the pipe: which realm and which
        #: of its run's calls (1, 2, ... in the order the script made them).
        self._replies: dict[int, tuple[_Realm, int]] = {}
        self._ids = itertools.count(1)
        self._running: _Realm | None = None  # the realm of the run in progress (pause/resume)
        self._warm: _Realm | None = None
        self._spent: _Realm | None = None
        #: Module sources of the last run by digest: the host sends only what is not held here.
        self._held: dict[str, str] = {}
        self.prelude = "\n".join(_js(name) for name in PRELUDE_FILES)
        self.errors_js = _js("errors.js")
        self.host_js = _js("host.js")

    # ---- pipe ---------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        self._write(protocol.encode(message))

    def send_call(self, call_id: int, request_text: Any) -> None:
        """A call message with the JS-made request JSON embedded verbatim (no re-escaping)."""
        self._write(protocol.encode_call(call_id, request_text))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._out, view)
            view = view[n:]

    def _on_readable(self) -> None:
        """stdin is readable: take what is there, handle every complete line.

        Read on the event loop itself (not a reader thread): a reply then resolves its future
        in the same loop iteration that sees it, without a thread hop, a self-pipe wake-up
        and a GIL hand-over on every tool call."""
        assert self._inbox is not None
        try:
            chunk = os.read(self._in, protocol.READ_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            assert self._loop is not None
            self._loop.remove_reader(self._in)
            self._inbox.put_nowait(None)
            return
        buf = self._buf
        start = len(buf)
        buf += chunk
        pos = 0
        while True:
            end = buf.find(b"\n", max(pos, start))
            if end < 0:
                break
            self._handle_line(bytes(buf[pos:end]))
            pos = end + 1
            start = pos
        if pos:
            del buf[:pos]

    def _handle_line(self, line: bytes) -> None:
        assert self._inbox is not None
        framed = protocol.decode_reply(line)
        if framed is not None:
            self._resolve(*framed)
            return
        try:
            msg = protocol.decode(line)
        except ValueError:  # not one JSON object (MalformedMessage included): not for us
            return
        op = msg.get("op")
        if op == protocol.REPLY:
            self._resolve(msg.get("id"), msg.get("reply"))
        elif op in (protocol.PAUSE, protocol.RESUME):
            # Read only while JS waits (the loop runs between its turns): the run's state is whole.
            realm = self._running
            if realm is not None:
                realm.pause() if op == protocol.PAUSE else realm.resume()
        else:
            self._inbox.put_nowait(msg)

    def _resolve(self, call_id: Any, reply: Any) -> None:
        entry = self._replies.pop(call_id, None) if isinstance(call_id, int) else None
        if entry is not None:
            realm, seq = entry
            realm.on_reply(seq, reply if isinstance(reply, str) else json.dumps(reply))

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        os.set_blocking(self._in, False)
        self._loop.add_reader(self._in, self._on_readable)
        await self.prepare_next(Limits())
        self.send({"op": protocol.READY})
        while True:
            msg = await self._inbox.get()
            if msg is None or msg.get("op") == protocol.EXIT:
                return
            if msg.get("op") == protocol.CHECK:
                self.send({"op": protocol.CHECKED, "diagnostics": await self.check(msg)})
            elif msg.get("op") == protocol.RUN:
                limits = Limits()
                try:
                    limits = Limits.from_json(msg.get("limits") or {})
                    done = await self.run(msg)
                except Exception:  # a bug here must not hang the host: report, stay alive
                    traceback.print_exc(file=sys.stderr)
                    done = {"result": None, "diagnostics": [diag.sandbox_error("internal error in the sandbox worker")]}
                self.send({"op": protocol.DONE, **done})
                self.free_spent()
                # Most runs share the host's limits: have the next realm ready with the same ones.
                await self.prepare_next(limits)

    # ---- one run ------------------------------------------------------------------------------
    async def check(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """The syntax diagnostics `run` would give `msg["code"]` ([] when it parses).

        Parses on the warm realm (parsing registers nothing, so the realm stays fresh for the
        next run), building one only when none is waiting."""
        code = jsonsafe.utf8_safe(str(msg.get("code") or ""))
        try:
            if self._warm is None:
                await self.prepare_next(Limits())
            if self._warm is None:
                return []  # no engine to parse with: the run will report the setup failure
            self._warm.engine.check_syntax(code)
        except EngineError as exc:
            return [script_errors.syntax_error(exc.message, exc.stack)]
        except Exception:  # a bug here must not hang the host: the run reports what it finds
            traceback.print_exc(file=sys.stderr)
        return []

    async def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        limits = Limits.from_json(msg.get("limits") or {})
        budget_ms = msg.get("budgetMs")
        budget_s = limits.timeoutMs / 1000.0
        if isinstance(budget_ms, int | float) and not isinstance(budget_ms, bool) and budget_ms >= 0:
            budget_s = min(budget_s, budget_ms / 1000.0)
        # Lone surrogates (legal in JSON escapes) cannot cross into the engine: U+FFFD instead.
        code = jsonsafe.utf8_safe(str(msg.get("code") or ""))
        modules = self._take_modules(msg)
        if modules is None:
            return {"result": None, "diagnostics": [diag.sandbox_error("the sandbox worker lost a server module")]}

        realm, self._warm = self._warm, None
        if realm is None or realm.key != _realm_key(limits):
            if realm is not None:
                realm.close()  # built for other limits: free it now, not after the run
            realm = None
            try:
                realm = await _Realm.create(self, limits)
            except Exception as exc:
                return self._failed_setup(exc, limits)
        try:
            run_config = realm.begin(t0, limits, msg)
            engine = realm.engine
            try:
                engine.check_syntax(code)
            except EngineError as exc:
                return {"result": None, "diagnostics": [script_errors.syntax_error(exc.message, exc.stack)]}
            for name, source in modules.items():
                engine.add_module(name, source)  # evaluated only if the agent imports it
            engine.add_module(script_errors.AGENT_MODULE, code)
            run_config["agentModule"] = script_errors.AGENT_MODULE
            script = f"globalThis.__codemode_start__({json.dumps(json.dumps(run_config))})"
            remaining = budget_s - (time.monotonic() - t0)
            known = {**modules, MODULE_ERRORS: self.errors_js, MODULE_HOST: self.host_js}
            self._running = realm
            return self._outcome(engine, code, known, limits, await self._evaluate(engine, script, remaining))
        finally:
            self._running = None
            realm.end()
            if self._spent is not None:  # never left for long: `serve` frees it after each run
                self._spent.close()
            self._spent = realm  # closed by `free_spent` once the answer is out

    def _take_modules(self, msg: dict[str, Any]) -> dict[str, str] | None:
        """The run's modules (specifier -> source) from its `modules` table (specifier ->
        digest) and the `sources` it carries; None when a digest is neither sent nor held.

        The host sends a module's text only when this worker does not hold it yet
        (protocol.py): the worker keeps the sources of its last run's table, which is what the
        host assumes it holds."""
        table = msg.get("modules")
        sent = msg.get("sources")
        sent = sent if isinstance(sent, dict) else {}
        modules: dict[str, str] = {}
        held: dict[str, str] = {}
        for name, digest in (table.items() if isinstance(table, dict) else ()):
            source = self._held.get(digest) if isinstance(digest, str) else None
            if source is None and isinstance(digest, str) and isinstance(sent.get(digest), str):
                # Lone surrogates (legal in JSON escapes) cannot cross into the engine.
                source = jsonsafe.utf8_safe(sent[digest])
            if source is None:
                self._held = {}
                return None
            held[str(digest)] = source
            name = jsonsafe.utf8_safe(str(name))
            if name not in (script_errors.AGENT_MODULE, MODULE_ERRORS, MODULE_HOST):
                modules[name] = source
        self._held = held
        return modules

    def free_spent(self) -> None:
        """Free the last run's realm and give the memory back to the OS, before anything else
        happens (nothing of a run survives into the next). After `done` is sent: freeing a full
        heap takes a while (~0.35 s for 512 MB)."""
        realm, self._spent = self._spent, None
        if realm is not None:
            realm.close()
        release_memory()

    async def prepare_next(self, limits: Limits) -> None:
        """Build and lock down the realm for the next run while idle (off the request path)."""
        if self._warm is not None and self._warm.key == _realm_key(limits):
            return
        if self._warm is not None:
            self._warm.close()
            self._warm = None
        try:
            self._warm = await _Realm.create(self, limits)
        except Exception:  # the run will build its own realm and report the failure
            self._warm = None

    def _failed_setup(self, exc: Exception, limits: Limits) -> dict[str, Any]:
        message = exc.message if isinstance(exc, EngineError) else type(exc).__name__
        if "out of memory" in message:
            return {"result": None, "diagnostics": [diag.memory_limit(limits.maxMemoryBytes)]}
        return {"result": None, "diagnostics": [diag.sandbox_error(f"the sandbox could not be set up: {message}")]}

    async def _evaluate(self, engine: Engine, script: str, remaining: float) -> dict[str, Any]:
        if remaining <= 0:
            return {"kind": "late"}  # the run's time was gone before the script could start
        try:
            text = await engine.run(script, remaining)
        except EngineTimeout:
            return {"kind": "timeout"}
        except EnginePendingLimit:
            return {"kind": "pending_limit"}
        except EngineError as exc:
            return {"kind": "engine_error", "name": exc.name, "message": exc.message, "stack": exc.stack}
        try:
            report = json.loads(text)
        except (TypeError, ValueError):
            return {"kind": "engine_error", "name": "Error", "message": "no report from the prelude", "stack": ""}
        return {"kind": "report", "report": report}

    def _outcome(
        self, engine: Engine, code: str, modules: dict[str, str], limits: Limits, ev: dict[str, Any]
    ) -> dict[str, Any]:
        kind = ev["kind"]
        if kind == "late":
            return {"result": None, "diagnostics": [diag.start_limit(limits.timeoutMs)]}
        if kind == "timeout":
            return {"result": None, "diagnostics": [diag.timeout_limit(limits.timeoutMs)]}
        if kind == "pending_limit":
            return {
                "result": None,
                "diagnostics": [
                    diag.sandbox_limit(
                        "maxConcurrentCalls", limits.maxConcurrentCalls, "too many host calls were pending at once"
                    )
                ],
            }
        if kind == "engine_error":
            message = str(ev["message"])
            if "out of memory" in message or engine.heap_exhausted():
                return {"result": None, "diagnostics": [diag.memory_limit(limits.maxMemoryBytes)]}
            if "never settled" in message:
                return {"result": None, "diagnostics": [diag.unsettled_promise()]}
            return {"result": None, "diagnostics": [diag.sandbox_error(f"the sandbox failed: {ev['name']}: {message}")]}

        report = ev["report"]
        status = report.get("status")
        # Failed tool calls nobody awaited: warnings beside whatever else the run reports.
        unawaited = script_errors.unawaited_calls(report.get("unawaited"), modules)
        if status == "ok":
            reason = report.get("resultError")
            if reason is not None:
                return {"result": None, "diagnostics": [diag.result_not_serializable(str(reason)), *unawaited]}
            result, problems = screen.result_from_text(report.get("result"))  # size and depth bounded
            return {"result": result, "diagnostics": [*problems, *unawaited]}
        error = report.get("error") or {}
        message = str(error.get("message") or "")
        text = str(error.get("text") or "")
        if status == "setup_error":
            if "out of memory" in message or "out of memory" in text or engine.heap_exhausted():
                return {"result": None, "diagnostics": [diag.memory_limit(limits.maxMemoryBytes)]}
            return {"result": None, "diagnostics": [diag.sandbox_error("the sandbox could not be set up: " + (text or message))]}
        missing = script_errors.module_not_found(message) if error.get("isError") else None
        if missing is not None:
            return {"result": None, "diagnostics": [script_errors.import_failure(missing, code, modules), *unawaited]}
        no_export = script_errors.export_not_found(message) if error.get("isError") else None
        if no_export is not None:
            return {"result": None, "diagnostics": [script_errors.export_failure(*no_export, code, modules), *unawaited]}
        oom_text = error.get("isError") and "out of memory" in message
        no_info = not error.get("isError") and text in ("null", "undefined", "")
        if oom_text or (no_info and engine.heap_exhausted()):
            return {"result": None, "diagnostics": [diag.memory_limit(limits.maxMemoryBytes)]}
        return {"result": None, "diagnostics": [script_errors.uncaught_exception(error, modules), *unawaited]}


def _realm_key(limits: Limits) -> tuple[int, int]:
    """What a realm is built for: the engine's heap and pending-call limits are fixed at birth."""
    return (limits.maxMemoryBytes, limits.maxConcurrentCalls)


#: Events a run's pump hands over (`__codemode_next__`): a reply is its call's number (1, 2, ...
#: in the order the script made them), the alarm is ALARM, and IDLE wakes a pump that waits for
#: nothing any more (the last timer was cleared while no call was in flight).
ALARM = 0
IDLE = -1


class _Clock:
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
    return (isinstance(run, list) and len(run) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in run)
            and run[1] > 0)


class _RunState:
    """What the bound host functions of one realm act on during its (single) run."""

    def __init__(self, t0: float, max_log_bytes: int, clock: _Clock | None = None) -> None:
        self.t0 = t0
        self.logs = run_logs.LogCollector(max_log_bytes)
        self.truncation_sent = False
        self.clock = clock if clock is not None else _Clock(int(time.time() * 1000), None, False)
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


class _Realm:
    """One fresh engine, locked down by prelude phase A, used for exactly one run (§1.4).

    The engine holds this realm's bound methods (a cycle Python's gc cannot see through the
    binding): `close()` must end every realm, used or not, or its whole JS heap stays."""

    def __init__(self, worker: Worker, limits: Limits) -> None:
        self.worker = worker
        self.key = _realm_key(limits)
        self.state = _RunState(time.monotonic(), limits.maxLogBytes)
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
            e.bind_object(
                "__codemode_config__",
                {"maxPendingTimers": MAX_PENDING_TIMERS, "maxLogDepth": run_logs.MAX_LOG_DEPTH,
                 "maxTrackedFailures": MAX_TRACKED_FAILURES, "maxReportedFailures": script_errors.MAX_UNAWAITED_REPORTED,
                 "maxNameChars": MAX_NAME_CHARS, "maxReportTextChars": MAX_DIAGNOSTIC_CHARS},
            )
        except BaseException:
            e.close()
            raise

    @classmethod
    async def create(cls, worker: Worker, limits: Limits) -> _Realm:
        """A locked-down realm with @codemode/errors and @codemode/host loaded (prelude phases A
        and A2): what every run needs, built before the run is known."""
        realm = cls(worker, limits)
        engine = realm.engine
        try:
            status = await engine.run(worker.prelude, PRELUDE_TIMEOUT_S)
            if status != "locked":
                raise EngineError("Error", f"prelude phase A returned {status!r}", "")
            engine.add_module(MODULE_ERRORS, worker.errors_js)
            engine.add_module(MODULE_HOST, worker.host_js)
            text = await engine.run(f"globalThis.__codemode_load__({int(limits.maxConcurrentCalls)})", PRELUDE_TIMEOUT_S)
            report = json.loads(text) if isinstance(text, str) else {}
            if not isinstance(report, dict) or report.get("status") != "loaded":
                error = report.get("error") if isinstance(report, dict) else None
                error = error if isinstance(error, dict) else {}
                detail = str(error.get("text") or error.get("message") or f"prelude phase A2 returned {text!r}")
                raise EngineError("Error", detail, str(error.get("stack") or ""))
        except BaseException:
            realm.close()
            raise
        return realm

    def begin(self, t0: float, limits: Limits, msg: Mapping[str, Any] | None = None) -> dict[str, Any]:
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
        st = self.state = _RunState(t0, limits.maxLogBytes,
                                    _Clock(base, clock_runs if isinstance(clock_runs, list) else None, journal))
        seed = msg.get("seed")
        if not (isinstance(seed, list) and len(seed) == 4
                and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**32 for x in seed)):
            seed = [int.from_bytes(os.urandom(4), "little") for _ in range(4)]
        st.seed = list(seed)
        events = replay.get("events")
        if isinstance(events, list) and all(isinstance(e, int) and not isinstance(e, bool) and e >= IDLE for e in events):
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
        replies = self.worker._replies
        for call_id in [k for k, (realm, _) in replies.items() if realm is self]:
            del replies[call_id]

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
        call_id = next(self.worker._ids)
        self.worker._replies[call_id] = (self, st.issued)
        # Over MAX_INPUT_BYTES or MAX_JSON_DEPTH: the host gets the call without its input.
        self.worker.send_call(call_id, screen.screen_call_request(text) if isinstance(text, str) else text)
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
            self.worker.send({"op": protocol.DIVERGED, "message": (
                f"the resumed script stopped after {st.issued} tool calls where the earlier round went on "
                f"to call #{event}")})
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
            if (st.live and waiter is not None and not waiter.done() and not st.queue
                    and st.issued == st.taken and not st.paused):
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
                "events": list(st.events), "clock": [list(r) for r in st.clock.runs or []],
                "seed": st.seed, "clockBase": st.clock.base_ms,
                "overflow": st.overflow or st.clock.overflow,
            }
        self.worker.send({"op": protocol.PAUSED, "issued": st.issued, "journal": journal})

    def tick(self) -> asyncio.Future[None]:
        """One host turn (the end-of-run loop): every queued job runs before JS looks again."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(_settle, fut)
        self._track(fut)
        return fut


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the host process dies, even if JS holds the GIL."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # parent already gone before prctl took effect
            os._exit(0)


def main() -> None:
    _die_with_parent()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    preload()  # a pooled worker has paid the engine's start-up cost before its first run

    worker = Worker(out_fd)
    asyncio.run(worker.serve())


if __name__ == "__main__":
    main()
