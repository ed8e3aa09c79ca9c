"""The host's handle on one sandbox worker process: start it, wait for `ready`, exchange framed
messages over its pipes, kill and reap it.

Why its own module: the pool (pool.py) decides which worker serves which run and a run (run.py)
decides what to say to it; neither needs to know how the process is started (isolated, in its
own session) or how a broken pipe, an oversized or malformed line turns into `WorkerCrashed`.
The other end of the pipe is the Python worker, runtime/sandbox/worker.py, or the native one,
runtime/native/ (a C program, the same protocol: runtime/native/INTERFACE.md); the messages are
protocol.py's. `worker_kind()` says which one starts: the native one when it is built, unless
`CODEMODE_SANDBOX_WORKER` says otherwise (`auto`, the default; `native`; `python`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any, Literal

from codemode_gen.children import python_module_command
from codemode_gen.runtime.native import launch
from codemode_gen.runtime.sandbox import protocol

#: How long a worker may take to start and import the engine before it counts as broken.
WORKER_START_TIMEOUT_S = 30.0
#: Which worker the host starts: `auto` (native when built, else Python), `native`, `python`.
WORKER_ENV = "CODEMODE_SANDBOX_WORKER"
WORKER_CHOICES = ("auto", "native", "python")

WorkerKind = Literal["native", "python"]


class WorkerCrashed(Exception):
    """The worker process died or broke the protocol."""


class WorkerUnavailable(WorkerCrashed):
    """The worker `CODEMODE_SANDBOX_WORKER` asks for cannot be started (not built, or an
    unknown choice): the message says what to do."""


def worker_kind() -> WorkerKind:
    """The worker `WorkerProcess.start` starts now (read on every start: the environment and the
    binary may change while a host runs). Raises `WorkerUnavailable`."""
    choice = os.environ.get(WORKER_ENV, "").strip().lower() or "auto"
    if choice not in WORKER_CHOICES:
        raise WorkerUnavailable(
            f"{WORKER_ENV}={os.environ[WORKER_ENV]!r}: expected one of {', '.join(WORKER_CHOICES)}"
        )
    if choice == "python":
        return "python"
    if launch.native_worker_path() is not None:
        return "native"
    if choice == "native":
        raise WorkerUnavailable(
            f"{WORKER_ENV}=native, but the native sandbox worker is not built: "
            f"run `{launch.build_command()}`"
        )
    return "python"


#: How a worker shows in its command line (/proc/<pid>/cmdline): the Python worker's module, or the
#: native worker's binary name (runtime/native/launch.py). Tests and benches find workers by it.
PYTHON_WORKER_MODULE = "codemode_gen.runtime.sandbox.worker"
NATIVE_WORKER_BINARY = launch.BINARY_NAME


def is_worker_cmdline(cmdline: bytes) -> bool:
    """Whether a NUL-separated command line (/proc/<pid>/cmdline) is a sandbox worker's, of
    either kind."""
    argv = cmdline.split(b"\0")
    return PYTHON_WORKER_MODULE.encode() in argv or (
        argv[0].rsplit(b"/", 1)[-1] == NATIVE_WORKER_BINARY.encode()
    )


def worker_command() -> list[str]:
    """The command line of a new worker, of `worker_kind()`."""
    if worker_kind() == "native":
        command = launch.native_command()
        if command is not None:  # else removed since: the Python worker, as `auto` would
            return command
    # isolated: no cwd on sys.path, no PYTHON* env; the installed package only
    return python_module_command(PYTHON_WORKER_MODULE, isolation="isolated")


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
            *worker_command(),
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
