"""The host side of one sandbox run: relays the worker's messages, answers its host calls, and
ends the run at the deadline or at a limit.

Why its own module: this is the dialogue of one run with one worker (spec §3.3's response, §7.4's
cancellation of in-flight calls, §10's limits), apart from the pool that lends the worker
(pool.py) and from the process plumbing (worker_process.py). `Sandbox.run` (pool.py) fixes the
deadline and the watchdog instant and hands them to `Run.execute`. A resumable run's hooks
(`RunHooks`, runtime/host/resume.py) act on it through `RunHandle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any, Protocol

from codemode_gen import payload
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime import logs as run_logs
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.limits import Limits, RunStopped, SandboxLimitExceeded
from codemode_gen.runtime.sandbox import outcome, protocol
from codemode_gen.runtime.sandbox.protocol import HostCall
from codemode_gen.runtime.sandbox.worker_process import WorkerCrashed, WorkerProcess

log = logging.getLogger(__name__)


class RunHandle(Protocol):
    """What `RunHooks` may do to the run in progress."""

    def pause(self) -> None:
        """Ask the worker to hold events; it answers `paused` once JS waits (`on_message`)."""

    def resume(self) -> None:
        """Let a paused worker go on."""

    def stop(self, diagnostics: list[diag.Diagnostic]) -> None:
        """End the run now (the worker is killed): the response carries `diagnostics`."""


class RunHooks(Protocol):
    """What a resumable run adds to `Sandbox.run` (runtime/host/resume.py)."""

    def run_fields(self) -> dict[str, Any]:
        """Fields added to the run message: journal, replay, seed, clockBase (protocol.py)."""

    def started(self, handle: RunHandle) -> None:
        """The run message was sent: `handle` acts on the run until it ends."""

    def on_message(self, message: dict[str, Any]) -> None:
        """A `paused` or `diverged` message from the worker."""


class Run:
    """The host side of one run: relays messages, answers host calls, enforces the deadline."""

    def __init__(
        self,
        worker: WorkerProcess,
        host_call: HostCall,
        limits: Limits,
        hooks: RunHooks | None = None,
    ) -> None:
        self.worker = worker
        self.host_call = host_call
        self.limits = limits
        self.hooks = hooks
        self.stopped: list[diag.Diagnostic] | None = None  # `stop`'s diagnostics
        # The worker truncates logs itself; the host enforces the limit again so that even a
        # compromised worker process cannot flood the response.
        self.logs = run_logs.LogCollector(limits.maxLogBytes)
        self.calls: set[asyncio.Task[None]] = set()
        self.limit_exc: SandboxLimitExceeded | None = None
        self.deadline: asyncio.Timeout | None = None
        self.clean = False
        self.t0 = 0.0

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.t0) * 1000)

    def respond(self, result: Any, diagnostics: list[diag.Diagnostic]) -> resp.Response:
        logs = run_logs.finish_logs(
            self.logs.entries, self.logs.truncated, self.limits.maxLogBytes, self.elapsed_ms()
        )
        return resp.build_response(logs, result, diagnostics)

    async def respond_async(self, result: Any, diagnostics: list[diag.Diagnostic]) -> resp.Response:
        """`respond` for a result of any size (outcome.compose's: UTF-8-safe already)."""
        logs = run_logs.finish_logs(
            self.logs.entries, self.logs.truncated, self.limits.maxLogBytes, self.elapsed_ms()
        )
        return await resp.build_response_async(logs, result, diagnostics, result_checked=True)

    async def execute(
        self, code: str, modules: dict[str, str], deadline: float, kill_at: float
    ) -> resp.Response:
        loop = asyncio.get_running_loop()
        self.t0 = time.monotonic()
        # The worker's interrupt timeout is the time left until the caller's deadline; the
        # limits it reports stay the caller's own.
        budget_ms = max(0, int((deadline - self.t0) * 1000))
        kill_at_loop = loop.time() + (kill_at - self.t0)
        # Each module's text crosses the pipe once per worker: a run names the modules by digest
        # and carries only the sources the worker does not hold (protocol.py).
        table, sources = protocol.module_table(modules, self.worker.held)
        extra = self.hooks.run_fields() if self.hooks is not None else {}
        try:
            self.worker.send(
                {
                    **extra,
                    "op": protocol.RUN,
                    "code": code,
                    "modules": table,
                    "sources": sources,
                    "limits": self.limits.to_json(),
                    "budgetMs": budget_ms,
                }
            )
            self.worker.held = set(table.values())
            await self.worker.drain()
        except (ConnectionError, BrokenPipeError):
            return self.respond(
                None, [diag.sandbox_error("the sandbox worker exited before the run started")]
            )
        if self.hooks is not None:
            self.hooks.started(self)

        # One coroutine reads the worker's messages in order. The watchdog and a limit hit by a
        # host call interrupt it through one asyncio.Timeout (a limit reschedules it to now),
        # so a message costs a single await: no task and no asyncio.wait per message.
        try:
            async with asyncio.timeout_at(kill_at_loop) as watchdog:
                self.deadline = watchdog
                try:
                    while True:
                        try:
                            msg = await self.worker.recv()
                        except (WorkerCrashed, ValueError) as exc:
                            self.worker.kill()
                            return self.respond(
                                None, [diag.sandbox_error(f"the sandbox worker failed: {exc}")]
                            )
                        if msg.get("op") == protocol.DONE:
                            # Within the watchdog too: checking a large result takes time.
                            return await self._finish(msg, code, modules)
                        self._handle(loop, msg)
                finally:
                    self.deadline = None
        except TimeoutError:
            self.worker.kill()
            self.clean = False
            if self.stopped is not None:
                return self.respond(None, self.stopped)
            hit = self.limit_exc
            if hit is not None:
                return self.respond(None, [diag.sandbox_limit(hit.limit, hit.value, hit.message)])
            # the watchdog: the worker missed its own deadline
            return self.respond(None, [diag.timeout_limit(self.limits.timeoutMs)])
        except asyncio.CancelledError:
            self.worker.kill()
            raise

    def _handle(self, loop: asyncio.AbstractEventLoop, msg: dict[str, Any]) -> None:
        """Act on one worker message of a run in progress."""
        op = msg.get("op")
        if op == protocol.CALL:
            task = loop.create_task(self._answer(msg.get("id"), msg.get("request")))
            self.calls.add(task)
            task.add_done_callback(self.calls.discard)
        elif op == protocol.LOG:
            time_ms = msg.get("timeMs")
            self.logs.add(
                str(msg.get("level")),
                str(msg.get("message")),
                time_ms if isinstance(time_ms, int) and time_ms >= 0 else self.elapsed_ms(),
            )
        elif op == protocol.LOGS_TRUNCATED:
            self.logs.truncated = True
        elif op in (protocol.PAUSED, protocol.DIVERGED) and self.hooks is not None:
            self.hooks.on_message(msg)

    async def _finish(
        self, msg: dict[str, Any], code: str, modules: dict[str, str]
    ) -> resp.Response:
        """The response to the run's `done` (what the worker says happened, raw: outcome.py)."""
        try:
            text = outcome.result_text(msg)
            if text is not None and len(text) > protocol.LARGE_MESSAGE_BYTES:
                # Sizing, depth-checking and parsing a large result is O(text): off the loop.
                answer = await payload.offload(outcome.compose, msg, code, modules, self.limits)
            else:
                answer = outcome.compose(msg, code, modules, self.limits)
        except Exception as exc:
            if not isinstance(exc, outcome.MalformedOutcome):  # a bug of ours: keep the trace
                log.debug("composing the run's outcome failed", exc_info=True)
            log.error("the sandbox worker's answer: %s", jsonsafe.clip(f"{exc}", 500))
            self.worker.kill()
            return self.respond(
                None, [diag.sandbox_error("the sandbox worker sent a malformed response")]
            )
        result, diagnostics = answer
        # A SANDBOX_ERROR says the worker itself is in doubt: the run ends, the worker goes.
        self.clean = not any(
            d.get("code") == diag.DiagnosticCode.SANDBOX_ERROR for d in diagnostics
        )
        return await self.respond_async(result, diagnostics)

    def _limit(self, exc: SandboxLimitExceeded) -> None:
        """A host call hit a limit: end the run now (the reader loop sees an expired deadline)."""
        if self.limit_exc is not None or self.stopped is not None or self.deadline is None:
            return
        self.limit_exc = exc
        with contextlib.suppress(RuntimeError):  # the loop is already leaving its deadline
            self.deadline.reschedule(asyncio.get_running_loop().time())

    # ---- RunHandle (hooks) ----------------------------------------------------------------
    def pause(self) -> None:
        self._send({"op": protocol.PAUSE})

    def resume(self) -> None:
        self._send({"op": protocol.RESUME})

    def stop(self, diagnostics: list[diag.Diagnostic]) -> None:
        if self.limit_exc is not None or self.stopped is not None or self.deadline is None:
            return
        self.stopped = diagnostics
        with contextlib.suppress(RuntimeError):
            self.deadline.reschedule(asyncio.get_running_loop().time())

    def _send(self, message: dict[str, Any]) -> None:
        if self.worker.alive():
            with contextlib.suppress(ConnectionError, BrokenPipeError, RuntimeError):
                self.worker.send(message)

    async def _answer(self, call_id: Any, request_value: Any) -> None:
        request: Any = {}
        try:
            # The worker embeds the request as a JSON value (older form: JSON text).
            if isinstance(request_value, str):
                request_value = json.loads(request_value)
            request = request_value if isinstance(request_value, dict) else {}
            reply = await self.host_call(request)
            error = (
                reply.get("error") if isinstance(reply, dict) and reply.get("ok") is False else None
            )
            if isinstance(error, dict) and error.get("errorClass") == "SandboxLimitError":
                raise SandboxLimitExceeded(
                    str(error.get("limit") or "limit"),
                    error.get("value"),
                    str(error.get("message") or "limit exceeded"),
                )
            # A large result is encoded off the event loop, in bounded pieces (payload.dumps).
            if payload.is_large(reply):
                reply_text = await payload.offload(payload.dumps, reply)
            else:
                reply_text = json.dumps(reply, ensure_ascii=True, separators=(",", ":"))
        except SandboxLimitExceeded as exc:
            self._limit(exc)
            return
        except RunStopped as exc:
            self.stop(exc.diagnostics)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A bug in the host's call path: the script gets a generic ToolCallError; the
            # exception text (paths, internals) stays on the host: one line, no traceback on a
            # terminal (the traceback is logged at debug level).
            log.error("host_call failed: %s", jsonsafe.clip(f"{type(exc).__name__}: {exc}", 500))
            log.debug("host_call failed", exc_info=True)
            server = (
                jsonsafe.safe_name(request.get("serverId")) if isinstance(request, dict) else None
            )
            tool = (
                jsonsafe.safe_name(request.get("toolName")) if isinstance(request, dict) else None
            )
            reply = {
                "ok": False,
                "error": {
                    "errorClass": "ToolCallError",
                    "message": f"the host failed while calling {server}/{tool}",
                    "hint": "retry once; if it fails again, use another tool or report the problem",
                    "serverId": server,
                    "toolName": tool,
                },
            }
            reply_text = json.dumps(reply, ensure_ascii=True, separators=(",", ":"))
        if not self.worker.alive():
            return
        with contextlib.suppress(ConnectionError, BrokenPipeError, RuntimeError):
            self.worker.send_reply(call_id, reply_text)
            await self.worker.drain()

    async def cancel_calls(self) -> None:
        tasks = list(self.calls)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
