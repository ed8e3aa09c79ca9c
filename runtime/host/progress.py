"""MCP progress for a long run: `notifications/progress` while a codemode.run is under way.

Clients give up on a request after a timeout of their own (5 s by default in the OpenAI Agents
SDK, 60 s in the TypeScript SDK), and several reset it whenever progress arrives. A run can
legitimately last longer (its own `timeoutMs`, slow tools), so when the client asked for progress
(a `progressToken` in the request's `_meta`) the run tells it that it is alive:

- on every tool call that finishes ("3 tool calls done; last notes.get_note");
- a heartbeat when nothing was sent for `HEARTBEAT_S` ("running 4 s; 3 tool calls done");
- an ad-hoc message (`note`), e.g. a run waiting for the user's approval (issue 12).

`progress` is the run's elapsed time in seconds, strictly increasing as the spec requires;
`total` is never sent (a run's length is not known up front, and timeoutMs is only its bound).

One task sends, one notification at a time: calls that finish while one is being sent are
reported together by the next ("12 tool calls done; ..."), so a burst of calls costs a few
notifications, not one each, and the bridge never waits on the client. Sending is a courtesy:
a callback that raises or hangs (the client stopped reading) is logged at debug level and cut
off after `SEND_TIMEOUT_S`, never raised into the run; `stop` ends the task, so nothing is sent
once the run's response is on its way.

The sink is any `async (progress, total, message) -> None`: `serve` passes the MCP session's
`report_progress`; Python API callers pass their own (`CodeMode.run(..., progress=...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

from codemode_gen.runtime.jsonsafe import safe_name

__all__ = ["HEARTBEAT_S", "ProgressCallback", "ProgressReporter"]

log = logging.getLogger(__name__)

#: `async callback(progress, total, message)`: the shape of an MCP progress notification (and of
#: the SDK's `ServerSession.report_progress`).
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]

# Bounds the silence between two progress notifications of a run: clients that reset their
# request timeout on progress need one well within their timeout (5 s is the smallest seen).
HEARTBEAT_S = 1.0
# Bounds one send: a client that stopped reading must not pin the reporter (the next heartbeat
# tries again).
SEND_TIMEOUT_S = 5.0
# Bounds one message; the server and tool names in it are the script's own (sanitised and cut by
# the bridge already).
MAX_MESSAGE_CHARS = 200
# The smallest step between two `progress` values: the spec wants them strictly increasing, and
# two notifications can fall within one clock tick.
PROGRESS_STEP = 0.001
# How often `stop` re-cancels a sender task that swallowed a cancellation (see `stop`).
STOP_POLL_S = 0.05


class ProgressReporter:
    """Progress notifications for one run (or any long wait): `start`, report, `stop`.

    `call_done` and `note` never block and never raise: they record what to say and wake the
    sender task.
    """

    def __init__(
        self,
        send: ProgressCallback,
        *,
        interval: float = HEARTBEAT_S,
        send_timeout: float = SEND_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.send_timeout = send_timeout
        self.calls_done = 0
        self.sent = 0  # notifications delivered (the callback returned)
        self.failed = 0  # notifications whose callback raised or timed out
        self._send = send
        self._clock = clock
        self._started = clock()
        self._last_progress = 0.0
        self._pending: str | None = None  # the next message to send at once (None: heartbeat)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    async def __aenter__(self) -> ProgressReporter:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def start(self) -> None:
        """Start the sender (heartbeats from now on); the elapsed time counts from here."""
        if self._task is None:
            self._started = self._clock()
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop sending (a notification in flight is cut off; one still pending is dropped: the
        response follows)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopped = True
        self._wake.set()
        # On Python 3.11 `asyncio.wait_for` inside the task can swallow one cancel(): cancel
        # until it is done (the flag ends its loop at the next turn in any case).
        while not task.done():
            task.cancel()
            await asyncio.wait(
                [task], timeout=STOP_POLL_S
            )  # raises only if this caller is cancelled

    def call_done(self, server_id: str, tool_name: str) -> None:
        """A tool call finished (whatever its outcome): say so soon."""
        self.calls_done += 1
        self._pending = f"{_calls(self.calls_done)} done; last {server_id}.{tool_name}"
        self._wake.set()

    def note(self, message: str) -> None:
        """Send `message` soon, once (e.g. "waiting for the user's approval of notes.delete_note");
        the heartbeats that follow say how the run is going, as before. Like `call_done`, it
        replaces a message not yet sent (the latest news wins)."""
        self._pending = message
        self._wake.set()

    def heartbeat_message(self) -> str:
        seconds = int(self._clock() - self._started)
        return f"running {seconds} s; {_calls(self.calls_done)} done"

    async def _run(self) -> None:
        last_sent = self._clock()
        while not self._stopped:
            if self._pending is None:
                wait = self.interval - (self._clock() - last_sent)
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(wait):
                            await self._wake.wait()
            if self._stopped:
                return
            self._wake.clear()
            message, self._pending = self._pending, None
            await self._emit(message if message is not None else self.heartbeat_message())
            last_sent = self._clock()

    async def _emit(self, message: str) -> None:
        progress = max(
            round(self._clock() - self._started, 3), round(self._last_progress + PROGRESS_STEP, 3)
        )
        self._last_progress = progress
        try:
            async with asyncio.timeout(self.send_timeout):
                await self._send(progress, None, safe_name(message, MAX_MESSAGE_CHARS))
        except Exception as exc:  # TimeoutError included: the run goes on without it
            self.failed += 1
            log.debug("progress notification not sent: %s: %s", type(exc).__name__, exc)
        else:
            self.sent += 1


def _calls(n: int) -> str:
    return f"{n} tool call{'' if n == 1 else 's'}"
