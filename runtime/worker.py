"""The sandbox worker process: runs agent scripts in QuickJS, one run at a time.

Why a process: the engine holds the GIL while JS runs and one slow native operation can
outlast its interrupt check by seconds, so the host must be able to kill the sandbox at the
deadline (docs/DESIGN.md, "Where the sandbox runs"). The worker owns no MCP session: every
tool call goes to the host as a message and the worker awaits the reply.

Lifetime: started by `runtime/sandbox.WorkerPool`, it imports the engine, says `ready` and
waits. Each `run` gets a fresh engine realm (spec §1.4: nothing survives from one run to the
next inside JS); the host reuses a worker only after a run that ended cleanly, and kills it
after any timeout, limit, cancellation or crash.

Pipe protocol: one JSON object per line. stdin (host → worker): `{"op": "run", "code",
"modules", "limits"}`, `{"op": "reply", "id", "reply": <JSON text>}`. stdout (worker → host):
`{"op": "ready"}`, `{"op": "log", "level", "message", "timeMs"}`, `{"op": "logs_truncated"}`,
`{"op": "call", "id", "request": <JSON text>}`, `{"op": "done", "result", "diagnostics"}`.
Nothing else may write to the protocol stream: fd 1 is redirected to stderr at start-up.

This module must stay cheap to import: no `mcp`, no generator.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import threading
import time
import traceback
from importlib import resources
from typing import Any

from codemode_gen.runtime import response as resp
from codemode_gen.runtime.engine import (
    Engine,
    EngineError,
    EnginePendingLimit,
    EngineTimeout,
    new_engine,
    preload,
)
from codemode_gen.runtime.limits import Limits

#: Timers pending at once in one run; bounds the timer heap a script can build up (its memory
#: is also bounded by the heap limit, this gives a clear error first).
MAX_PENDING_TIMERS = 10_000
#: Host calls the engine may have pending beyond the JS-side tool-call cap: the timer alarm,
#: the end-of-run tick and slack.
EXTRA_PENDING_CALLS = 4

MODULE_ERRORS = "@codemode/errors"
MODULE_HOST = "@codemode/host"


def _js(name: str) -> str:
    return resources.files("codemode_gen.runtime").joinpath("js", name).read_text(encoding="utf-8")


class Worker:
    def __init__(self, out_fd: int) -> None:
        self._out = out_fd
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[dict[str, Any] | None] | None = None
        self._replies: dict[int, asyncio.Future[str]] = {}
        self._ids = itertools.count(1)
        self.prelude = _js("prelude.js")
        self.errors_js = _js("errors.js")
        self.host_js = _js("host.js")

    # ---- pipe ---------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            n = os.write(self._out, view)
            view = view[n:]

    def _reader(self) -> None:
        """Thread: stdin lines → replies resolve futures, runs go to the inbox; EOF ends."""
        assert self._loop is not None and self._inbox is not None
        loop, inbox = self._loop, self._inbox
        for line in sys.stdin.buffer:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            if msg.get("op") == "reply":
                loop.call_soon_threadsafe(self._resolve, msg.get("id"), msg.get("reply"))
            else:
                loop.call_soon_threadsafe(inbox.put_nowait, msg)
        loop.call_soon_threadsafe(inbox.put_nowait, None)

    def _resolve(self, call_id: Any, reply: Any) -> None:
        fut = self._replies.pop(call_id, None) if isinstance(call_id, int) else None
        if fut is not None and not fut.done():
            fut.set_result(reply if isinstance(reply, str) else json.dumps(reply))

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        threading.Thread(target=self._reader, name="codemode-worker-stdin", daemon=True).start()
        self.send({"op": "ready"})
        while True:
            msg = await self._inbox.get()
            if msg is None or msg.get("op") == "exit":
                return
            if msg.get("op") == "run":
                try:
                    done = await self.run(msg)
                except Exception:  # a bug here must not hang the host: report, stay alive
                    traceback.print_exc(file=sys.stderr)
                    done = {"result": None, "diagnostics": [resp.sandbox_error("internal error in the sandbox worker")]}
                self.send({"op": "done", **done})

    # ---- one run ------------------------------------------------------------------------------
    async def run(self, msg: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        limits = Limits.from_json(msg.get("limits") or {})
        code = str(msg.get("code") or "")
        modules: dict[str, str] = {str(k): str(v) for k, v in (msg.get("modules") or {}).items()}
        modules.pop(resp.AGENT_MODULE, None)
        modules[MODULE_ERRORS] = self.errors_js
        modules[MODULE_HOST] = self.host_js
        logs = resp.LogCollector(limits.maxLogBytes)
        truncation_sent = False
        run_futures: list[asyncio.Future[Any]] = []

        def now_ms() -> float:
            return (time.monotonic() - t0) * 1000.0

        def log(level: Any, text: Any) -> bool:
            nonlocal truncation_sent
            try:
                message = json.loads(text) if isinstance(text, str) else str(text)
                if not isinstance(message, str):
                    message = str(message)
            except ValueError:
                message = "[Unserializable Object]"
            entry = logs.add(str(level), message, int(now_ms()))
            if entry is not None:
                self.send({"op": "log", **entry})
            if logs.truncated and not truncation_sent:
                truncation_sent = True
                self.send({"op": "logs_truncated"})
            return not logs.truncated

        async def host_call(text: Any) -> str:
            call_id = next(self._ids)
            fut: asyncio.Future[str] = loop.create_future()
            self._replies[call_id] = fut
            run_futures.append(fut)
            self.send({"op": "call", "id": call_id, "request": str(text)})
            return await fut

        alarm: dict[str, Any] = {"handle": None, "waiter": None, "fired": False}

        def fire() -> None:
            alarm["handle"] = None
            waiter = alarm["waiter"]
            if waiter is not None and not waiter.done():
                waiter.set_result(True)
                alarm["waiter"] = None
            else:
                alarm["fired"] = True

        def arm(due: Any) -> None:
            if alarm["handle"] is not None:
                alarm["handle"].cancel()
                alarm["handle"] = None
            alarm["fired"] = False
            if not isinstance(due, int | float) or due < 0:
                waiter = alarm["waiter"]
                if waiter is not None and not waiter.done():
                    waiter.set_result(False)
                alarm["waiter"] = None
                return
            alarm["handle"] = loop.call_later(max(0.0, (float(due) - now_ms()) / 1000.0), fire)

        async def wait_alarm() -> bool:
            if alarm["fired"]:
                alarm["fired"] = False
                return True
            waiter: asyncio.Future[bool] = loop.create_future()
            alarm["waiter"] = waiter
            run_futures.append(waiter)
            return await waiter

        async def tick() -> None:
            await asyncio.sleep(0)

        engine = new_engine(
            memory_limit=limits.maxMemoryBytes,
            max_pending_calls=limits.maxConcurrentCalls + EXTRA_PENDING_CALLS,
        )
        try:
            try:
                engine.check_syntax(code)
            except EngineError as exc:
                return {"result": None, "diagnostics": [resp.syntax_error(exc.message, exc.stack)]}
            engine.bind_function("__codemode_host__", host_call)
            engine.bind_function("__codemode_log__", log)
            engine.bind_function("__codemode_arm__", arm)
            engine.bind_function("__codemode_alarm__", wait_alarm)
            engine.bind_function("__codemode_tick__", tick)
            engine.bind_function("__codemode_now__", now_ms)
            engine.bind_object(
                "__codemode_config__",
                {
                    "maxConcurrentCalls": limits.maxConcurrentCalls,
                    "maxPendingTimers": MAX_PENDING_TIMERS,
                    "maxLogDepth": resp.MAX_LOG_DEPTH,
                    "modules": sorted(m for m in modules if m not in (MODULE_ERRORS, MODULE_HOST)),
                    "agentModule": resp.AGENT_MODULE,
                },
            )
            for name, source in modules.items():
                engine.add_module(name, source)
            engine.add_module(resp.AGENT_MODULE, code)
            remaining = limits.timeoutMs / 1000.0 - (time.monotonic() - t0)
            return self._outcome(engine, code, modules, limits, await self._evaluate(engine, remaining))
        finally:
            if alarm["handle"] is not None:
                alarm["handle"].cancel()
            for fut in run_futures:
                if not fut.done():
                    fut.cancel()
            for call_id in [k for k, f in self._replies.items() if f in run_futures]:
                self._replies.pop(call_id, None)
            del engine

    async def _evaluate(self, engine: Engine, remaining: float) -> dict[str, Any]:
        if remaining <= 0:
            return {"kind": "timeout"}
        try:
            text = await engine.run(self.prelude, remaining)
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
        if status == "ok":
            reason = report.get("resultError")
            if reason is not None:
                return {"result": None, "diagnostics": [resp.result_not_serializable(str(reason))]}
            text = report.get("result")
            return {"result": json.loads(text) if isinstance(text, str) else None, "diagnostics": []}
        error = report.get("error") or {}
        message = str(error.get("message") or "")
        text = str(error.get("text") or "")
        if status == "setup_error":
            if "out of memory" in message or "out of memory" in text or engine.heap_exhausted():
                return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
            return {"result": None, "diagnostics": [resp.sandbox_error("the sandbox could not be set up: " + (text or message))]}
        missing = resp.module_not_found(message) if error.get("isError") else None
        if missing is not None:
            return {"result": None, "diagnostics": [resp.import_failure(missing, code, modules)]}
        oom_text = error.get("isError") and "out of memory" in message
        no_info = not error.get("isError") and text in ("null", "undefined", "")
        if oom_text or (no_info and engine.heap_exhausted()):
            return {"result": None, "diagnostics": [resp.memory_limit(limits.maxMemoryBytes)]}
        return {"result": None, "diagnostics": [resp.uncaught_exception(error, modules)]}


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
