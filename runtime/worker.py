"""The sandbox worker process: runs agent scripts in QuickJS, one run at a time.

Why a process: the engine holds the GIL while JS runs and one slow native operation can
outlast its interrupt check by seconds, so the host must be able to kill the sandbox at the
deadline (docs/DESIGN.md, "Where the sandbox runs"). The worker owns no MCP session: every
tool call goes to the host as a message and the worker awaits the reply.

Lifetime: started by `runtime/sandbox.WorkerPool`, it imports the engine, says `ready` and
waits. Each `run` gets a fresh engine realm (spec §1.4: nothing survives from one run to the
next inside JS); the host reuses a worker only after a run that ended cleanly, and kills it
after any timeout, limit, cancellation or crash.

Pipe protocol: runtime/protocol.py (message kinds, framing, limits; the host side is
runtime/sandbox.py). `check` parses `code` as the agent module without running anything (between
runs only) and answers `checked` with `[]` or the `SYNTAX_ERROR` diagnostic that a run of the
same code would report. Nothing else may write to the protocol stream: fd 1 is redirected to
stderr at start-up. A reply framed by `protocol.encode_reply` is handed to JS as the raw text of
its JSON value, never decoded in Python.

This module must stay cheap to import: no `mcp`, no generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
import traceback
from importlib import resources
from typing import Any

from codemode_gen.runtime import protocol
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.engine import (
    Engine,
    EngineError,
    EnginePendingLimit,
    EngineTimeout,
    new_engine,
    preload,
    release_memory,
)
from codemode_gen.runtime.limits import MAX_NAME_CHARS, Limits

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
        self._replies: dict[int, asyncio.Future[str]] = {}
        self._ids = itertools.count(1)
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
        if msg.get("op") == protocol.REPLY:
            self._resolve(msg.get("id"), msg.get("reply"))
        else:
            self._inbox.put_nowait(msg)

    def _resolve(self, call_id: Any, reply: Any) -> None:
        fut = self._replies.pop(call_id, None) if isinstance(call_id, int) else None
        if fut is not None and not fut.done():
            fut.set_result(reply if isinstance(reply, str) else json.dumps(reply))

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
                    done = {"result": None, "diagnostics": [resp.sandbox_error("internal error in the sandbox worker")]}
                self.send({"op": protocol.DONE, **done})
                self.free_spent()
                # Most runs share the host's limits: have the next realm ready with the same ones.
                await self.prepare_next(limits)

    # ---- one run ------------------------------------------------------------------------------
    async def check(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        """The syntax diagnostics `run` would give `msg["code"]` ([] when it parses).

        Parses on the warm realm (parsing registers nothing, so the realm stays fresh for the
        next run), building one only when none is waiting."""
        code = resp.utf8_safe(str(msg.get("code") or ""))
        try:
            if self._warm is None:
                await self.prepare_next(Limits())
            if self._warm is None:
                return []  # no engine to parse with: the run will report the setup failure
            self._warm.engine.check_syntax(code)
        except EngineError as exc:
            return [resp.syntax_error(exc.message, exc.stack)]
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
        code = resp.utf8_safe(str(msg.get("code") or ""))
        modules = self._take_modules(msg)
        if modules is None:
            return {"result": None, "diagnostics": [resp.sandbox_error("the sandbox worker lost a server module")]}

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
            realm.begin(t0, limits)
            engine = realm.engine
            try:
                engine.check_syntax(code)
            except EngineError as exc:
                return {"result": None, "diagnostics": [resp.syntax_error(exc.message, exc.stack)]}
            for name, source in modules.items():
                engine.add_module(name, source)  # evaluated only if the agent imports it
            engine.add_module(resp.AGENT_MODULE, code)
            run_config = {"agentModule": resp.AGENT_MODULE}
            script = f"globalThis.__codemode_start__({json.dumps(json.dumps(run_config))})"
            remaining = budget_s - (time.monotonic() - t0)
            known = {**modules, MODULE_ERRORS: self.errors_js, MODULE_HOST: self.host_js}
            return self._outcome(engine, code, known, limits, await self._evaluate(engine, script, remaining))
        finally:
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
                source = resp.utf8_safe(sent[digest])
            if source is None:
                self._held = {}
                return None
            held[str(digest)] = source
            name = resp.utf8_safe(str(name))
            if name not in (resp.AGENT_MODULE, MODULE_ERRORS, MODULE_HOST):
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
            return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
        return {"result": None, "diagnostics": [resp.sandbox_error(f"the sandbox could not be set up: {message}")]}

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
            return {"result": None, "diagnostics": [resp.start_limit(limits.timeoutMs)]}
        if kind == "timeout":
            return {"result": None, "diagnostics": [resp.timeout_limit(limits.timeoutMs)]}
        if kind == "pending_limit":
            return {
                "result": None,
                "diagnostics": [
                    resp.sandbox_limit(
                        "maxConcurrentCalls", limits.maxConcurrentCalls, "too many host calls were pending at once"
                    )
                ],
            }
        if kind == "engine_error":
            message = str(ev["message"])
            if "out of memory" in message or engine.heap_exhausted():
                return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
            if "never settled" in message:
                return {"result": None, "diagnostics": [resp.unsettled_promise()]}
            return {"result": None, "diagnostics": [resp.sandbox_error(f"the sandbox failed: {ev['name']}: {message}")]}

        report = ev["report"]
        status = report.get("status")
        # Failed tool calls nobody awaited: warnings beside whatever else the run reports.
        unawaited = resp.unawaited_calls(report.get("unawaited"), modules)
        if status == "ok":
            reason = report.get("resultError")
            if reason is not None:
                return {"result": None, "diagnostics": [resp.result_not_serializable(str(reason)), *unawaited]}
            result, problems = resp.result_from_text(report.get("result"))  # size and depth bounded
            return {"result": result, "diagnostics": [*problems, *unawaited]}
        error = report.get("error") or {}
        message = str(error.get("message") or "")
        text = str(error.get("text") or "")
        if status == "setup_error":
            if "out of memory" in message or "out of memory" in text or engine.heap_exhausted():
                return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
            return {"result": None, "diagnostics": [resp.sandbox_error("the sandbox could not be set up: " + (text or message))]}
        missing = resp.module_not_found(message) if error.get("isError") else None
        if missing is not None:
            return {"result": None, "diagnostics": [resp.import_failure(missing, code, modules), *unawaited]}
        no_export = resp.export_not_found(message) if error.get("isError") else None
        if no_export is not None:
            return {"result": None, "diagnostics": [resp.export_failure(*no_export, code, modules), *unawaited]}
        oom_text = error.get("isError") and "out of memory" in message
        no_info = not error.get("isError") and text in ("null", "undefined", "")
        if oom_text or (no_info and engine.heap_exhausted()):
            return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
        return {"result": None, "diagnostics": [resp.uncaught_exception(error, modules), *unawaited]}


def _realm_key(limits: Limits) -> tuple[int, int]:
    """What a realm is built for: the engine's heap and pending-call limits are fixed at birth."""
    return (limits.maxMemoryBytes, limits.maxConcurrentCalls)


class _RunState:
    """What the bound host functions of one realm act on during its (single) run."""

    def __init__(self, t0: float, max_log_bytes: int) -> None:
        self.t0 = t0
        self.logs = resp.LogCollector(max_log_bytes)
        self.truncation_sent = False
        #: Host-call replies and the alarm waiter still pending (a settled one leaves at once:
        #: a reply's text is not kept for the rest of the run).
        self.futures: set[asyncio.Future[Any]] = set()
        self.alarm_handle: asyncio.TimerHandle | None = None
        self.alarm_waiter: asyncio.Future[bool] | None = None
        self.alarm_fired = False


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
            e.bind_function("__codemode_alarm__", self.wait_alarm)
            e.bind_function("__codemode_tick__", self.tick)
            e.bind_function("__codemode_now__", self.now_ms)
            e.bind_object(
                "__codemode_config__",
                {"maxPendingTimers": MAX_PENDING_TIMERS, "maxLogDepth": resp.MAX_LOG_DEPTH,
                 "maxTrackedFailures": MAX_TRACKED_FAILURES, "maxReportedFailures": resp.MAX_UNAWAITED_REPORTED,
                 "maxNameChars": MAX_NAME_CHARS, "maxReportTextChars": resp.MAX_DIAGNOSTIC_CHARS},
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

    def begin(self, t0: float, limits: Limits) -> None:
        self.state = _RunState(t0, limits.maxLogBytes)

    def end(self) -> None:
        """Drop what the run left pending: the alarm, the reply futures (a late reply finds no
        future and is discarded), their entries in the worker's reply table."""
        st = self.state
        if st.alarm_handle is not None:
            st.alarm_handle.cancel()
            st.alarm_handle = None
        st.alarm_waiter = None
        pending, st.futures = st.futures, set()
        for fut in pending:
            fut.cancel()
        replies = self.worker._replies
        for call_id in [k for k, f in replies.items() if f in pending]:
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
    def now_ms(self) -> float:
        return (time.monotonic() - self.state.t0) * 1000.0

    def log(self, level: Any, text: Any) -> bool:
        st = self.state
        try:
            message = json.loads(text) if isinstance(text, str) else str(text)
            if not isinstance(message, str):
                message = str(message)
        except ValueError:
            message = "[Unserializable Object]"
        entry = st.logs.add(str(level), message, int(self.now_ms()))
        if entry is not None:
            self.worker.send({"op": protocol.LOG, **entry})
        if st.logs.truncated and not st.truncation_sent:
            st.truncation_sent = True
            self.worker.send({"op": protocol.LOGS_TRUNCATED})
        return not st.logs.truncated

    def host_call(self, text: Any) -> asyncio.Future[str]:
        """Send the request now and give JS the reply future itself (a Promise to JS): no
        coroutine, no task, so the reply settles the promise one event-loop turn sooner."""
        call_id = next(self.worker._ids)
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.worker._replies[call_id] = fut
        self._track(fut)
        # Over MAX_INPUT_BYTES or MAX_JSON_DEPTH: the host gets the call without its input.
        self.worker.send_call(call_id, resp.screen_call_request(text) if isinstance(text, str) else text)
        return fut

    def _fire(self) -> None:
        st = self.state
        st.alarm_handle = None
        if st.alarm_waiter is not None and not st.alarm_waiter.done():
            st.alarm_waiter.set_result(True)
            st.alarm_waiter = None
        else:
            st.alarm_fired = True

    def arm(self, due: Any) -> None:
        """Set (due >= 0, in ms on the run clock) or clear (due < 0) the single timer alarm."""
        st = self.state
        if st.alarm_handle is not None:
            st.alarm_handle.cancel()
            st.alarm_handle = None
        st.alarm_fired = False
        if not isinstance(due, int | float) or due < 0:
            if st.alarm_waiter is not None and not st.alarm_waiter.done():
                st.alarm_waiter.set_result(False)
            st.alarm_waiter = None
            return
        delay = max(0.0, (float(due) - self.now_ms()) / 1000.0)
        st.alarm_handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def wait_alarm(self) -> asyncio.Future[bool]:
        """The waiter future itself (no coroutine whose frame would keep this realm alive
        after the run): True when the alarm fired, False when it was cleared."""
        st = self.state
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if st.alarm_fired:
            st.alarm_fired = False
            waiter.set_result(True)
            return waiter
        st.alarm_waiter = waiter
        self._track(waiter)
        return waiter

    @staticmethod
    async def tick() -> None:
        await asyncio.sleep(0)


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
