"""The host's handle on one sandbox worker process: start it, wait for `ready`, exchange framed
messages over its pipes, kill and reap it.

Why its own module: the pool (pool.py) decides which worker serves which run and a run (run.py)
decides what to say to it; neither needs to know how the process is started (isolated, in its
own session) or how a broken pipe, an oversized or malformed line turns into `WorkerCrashed`.
The other end of the pipe is runtime/sandbox/worker.py; the messages are protocol.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from codemode_gen.children import python_module_command
from codemode_gen.runtime.sandbox import protocol

#: How long a worker may take to start and import the engine before it counts as broken.
WORKER_START_TIMEOUT_S = 30.0


class WorkerCrashed(Exception):
    """The worker process died or broke the protocol."""


class WorkerProcess:
    """One worker process and its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.runs = 0
        self.ready = False
        #: Digests of the module sources the worker holds (its last run's table, protocol.py).
        self.held: set[str] = set()
        self.idle_since = 0.0  # time.monotonic() when it last went idle

    @classmethod
    async def start(cls) -> WorkerProcess:
        proc = await asyncio.create_subprocess_exec(
            # isolated: no cwd on sys.path, no PYTHON* env; the installed package only
            *python_module_command("codemode_gen.runtime.sandbox.worker", isolation="isolated"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=protocol.MAX_MESSAGE_BYTES,
            start_new_session=True,  # a Ctrl-C in the terminal is the host's to handle
        )
        return cls(proc)

    async def wait_ready(self) -> None:
        if self.ready:
            return
        msg = await asyncio.wait_for(self.recv(), WORKER_START_TIMEOUT_S)
        if msg.get("op") != protocol.READY:
            raise WorkerCrashed(f"unexpected first message from worker: {msg.get('op')!r}")
        self.ready = True

    def alive(self) -> bool:
        return self.proc.returncode is None

    async def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        try:
            line = await self.proc.stdout.readline()
        except (ValueError, asyncio.LimitOverrunError) as exc:
            raise WorkerCrashed(f"oversized message from worker: {exc}") from None
        if not line:
            raise WorkerCrashed(f"worker exited (code {self.proc.returncode})")
        try:
            return await protocol.decode_async(line)
        except protocol.MalformedMessage as exc:  # the worker bounds nesting: a broken worker
            raise WorkerCrashed(f"malformed message from worker{exc.detail}") from None

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(protocol.encode(message))

    def send_reply(self, call_id: Any, body: str) -> None:
        """The reply to a call, `body` being its ASCII JSON text (protocol.encode_reply)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(protocol.encode_reply(call_id, body))

    async def drain(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            await self.proc.stdin.drain()

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def reap(self) -> None:
        self.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 5.0)
