"""CPU-heavy work on untrusted input, in helper processes: never on the host's event loop.

One asyncio loop serves every client of a host (serve --http answers /healthz, every request
and every run's watchdog there), so a step that holds it for long stops all of them. Two steps
take time that grows faster than their input and hold the GIL throughout, so a thread would not
help:

- erasing TypeScript types (runtime/host/tsinput.py): tree-sitter's parse never releases the GIL
  and slows down on broken input (~15 µs/byte for `a<a<…`), and the eraser's walk is quadratic
  on chains (`x!!!…`: ~60 ms for 512 bytes); a 3.4 MB script took seconds;
- parsing a JSON request of millions of tiny values (`[[],[],…]`: ~1 s for 4 MiB).

A helper is `python -I -m codemode_gen.runtime.host.offload`: a framed request on stdin (a JSON
header line, then `size` raw bytes), the same back on stdout. It does one request at a time;
`Offload` keeps up to `max_helpers` of them, started on demand (or `warm` of them ahead of
need, with `start()`); beyond `warm`, an idle one is stopped after IDLE_HELPER_TTL_S. A request
that outlives its caller's deadline has its helper killed (`TimeoutError`): the host never
waits longer than the caller would.

Only the standard library is imported at module level (the helper imports tsinput and
pydantic_core for the requests that need them).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from codemode_gen.runtime.sandbox.idle import trim_idle

if TYPE_CHECKING:
    from codemode_gen.runtime.diagnostics import Diagnostic
    from codemode_gen.runtime.host.tsinput import Erased

__all__ = [
    "MAX_JSON_VALUES",
    "Envelope",
    "Offload",
    "OffloadFailed",
    "count_json_values",
    "envelope_of",
    "structure_bound",
]

log = logging.getLogger(__name__)

#: How long a helper may take to start (interpreter, then its imports) before it counts as broken.
HELPER_START_TIMEOUT_S = 30.0
#: How long a helper beyond the `warm` ones stays idle before it is stopped: each holds a Python
#: process (~20 MB with tree-sitter loaded) that a burst of large scripts may have started.
IDLE_HELPER_TTL_S = 30.0
#: Bounds a request or reply header line (the payload follows it, counted by `size`).
MAX_HEADER_BYTES = 64 * 1024
#: The JSON values a request to the host may hold (a codemode.run request holds about ten; its
#: script is one string). Bounds what parsing a request costs: millions of tiny values take
#: the SDK's parser about a second, on the event loop.
MAX_JSON_VALUES = 50_000

# What each end says first, so the host knows the helper has imported what it needs.
_READY = b'{"ready": true}\n'


class OffloadFailed(Exception):
    """The helper died, broke the protocol, or its operation raised (a bug, said in the message)."""


# ---------------------------------------------------------------------- JSON requests (both ends)


def structure_bound(body: bytes | bytearray) -> int:
    """An upper bound on the JSON values and object keys in `body` (`count_json_values`), without
    parsing it: every key follows a `{` or `,`, every value but the first a `:`, `,` or `[`
    (counted inside strings too, so a script with many commas gets a high bound, and its exact
    count from a helper). C-speed: ~1 ms per MiB."""
    return body.count(b",") + body.count(b"[") + body.count(b"{") + body.count(b":") + 1


def count_json_values(value: Any, limit: int = MAX_JSON_VALUES) -> int:
    """The values in a parsed JSON document, object keys included, stopping past `limit`."""
    count = 0
    stack = [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


@dataclass(frozen=True)
class Envelope:
    """What serve --http needs to know of a JSON-RPC request before it queues it: its method, id,
    the called tool, that run's `limits` and whether its `code` is a string (how long), and how
    many JSON values the whole body holds."""

    method: str | None = None
    id: Any = None
    tool: str | None = None
    limits: Mapping[str, Any] | None = None
    limits_valid: bool = True
    code_chars: int | None = None
    values: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "id": self.id,
            "tool": self.tool,
            "limits": self.limits,
            "limitsValid": self.limits_valid,
            "codeChars": self.code_chars,
            "values": self.values,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Envelope:
        limits = data.get("limits")
        code_chars = data.get("codeChars")
        values = data.get("values")
        return cls(
            method=data.get("method") if isinstance(data.get("method"), str) else None,
            id=data.get("id"),
            tool=data.get("tool") if isinstance(data.get("tool"), str) else None,
            limits=limits if isinstance(limits, dict) else None,
            limits_valid=data.get("limitsValid") is not False,
            code_chars=code_chars if isinstance(code_chars, int) else None,
            values=values if isinstance(values, int) else 0,
        )


def envelope_of(message: Any) -> Envelope:
    """The `Envelope` of a parsed JSON-RPC message (anything else: an empty one)."""
    values = count_json_values(message)
    if not isinstance(message, dict):
        return Envelope(values=values)
    method = message.get("method")
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    tool = params.get("name")
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    limits = arguments.get("limits")
    code = arguments.get("code")
    # Only a small `limits` object travels (the queue needs its timeoutMs); anything else marks
    # it invalid, and the run answers INVALID_LIMITS without waiting for a worker.
    limits_valid = limits is None or (isinstance(limits, dict) and len(limits) <= 32)
    return Envelope(
        method=method if isinstance(method, str) else None,
        id=request_id,
        tool=tool if isinstance(tool, str) else None,
        limits=dict(limits) if limits_valid and isinstance(limits, dict) else None,
        limits_valid=limits_valid,
        code_chars=len(code) if isinstance(code, str) else None,
        values=values,
    )


# ---------------------------------------------------------------------- the helper process


def _erase_op(payload: bytes) -> tuple[dict[str, Any], bytes]:
    from codemode_gen.runtime.host.tsinput import erase_types

    code = payload.decode("utf-8", "surrogatepass")
    erased = erase_types(code)
    same = erased.code is code
    data = b"" if same else erased.code.encode("utf-8", "surrogatepass")
    return {"same": same, "diagnostics": list(erased.diagnostics)}, data


def _envelope_op(payload: bytes) -> tuple[dict[str, Any], bytes]:
    import pydantic_core

    try:
        message = pydantic_core.from_json(payload)
    except ValueError as exc:
        return {"json": False, "error": str(exc)[:300]}, b""
    return {"json": True, "envelope": envelope_of(message).to_json()}, b""


_OPS = {"erase": _erase_op, "envelope": _envelope_op}


def _die_with_parent() -> None:
    """Linux: SIGKILL this helper when the host dies, even mid-parse (as runtime/sandbox/worker.py does)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(0)


def _read_exactly(stream: Any, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def main() -> None:
    _die_with_parent()
    stdin = sys.stdin.buffer
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    from codemode_gen.runtime.host.tsinput import erase_types

    erase_types("let warm: number = 1;")  # load the grammar and the query before saying ready
    stdout.write(_READY)
    stdout.flush()
    while True:
        line = stdin.readline(MAX_HEADER_BYTES)
        if not line:
            return
        header = json.loads(line)
        payload = _read_exactly(stdin, int(header["size"]))
        try:
            meta, data = _OPS[header["op"]](payload)
            reply = {"ok": True, **meta, "size": len(data)}
        except Exception as exc:  # a bug in an operation: the host says so, the helper goes on
            reply, data = (
                {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500], "size": 0},
                b"",
            )
        stdout.write(json.dumps(reply, ensure_ascii=True).encode("ascii") + b"\n")
        stdout.write(data)
        stdout.flush()


# ---------------------------------------------------------------------- the host side


class _Helper:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.idle_since = 0.0

    @classmethod
    async def start(cls) -> _Helper:
        from codemode_gen.children import python_module_command

        proc = await asyncio.create_subprocess_exec(
            *python_module_command("codemode_gen.runtime.host.offload", isolation="isolated"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=MAX_HEADER_BYTES,
            start_new_session=True,
        )
        helper = cls(proc)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), HELPER_START_TIMEOUT_S)
            if line != _READY:
                raise OffloadFailed(f"the helper did not start (said {line[:80]!r})")
        except BaseException:
            await helper.reap()
            raise
        return helper

    def alive(self) -> bool:
        return self.proc.returncode is None

    async def request(self, op: str, payload: bytes | bytearray) -> tuple[dict[str, Any], bytes]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        header = json.dumps({"op": op, "size": len(payload)}).encode("ascii") + b"\n"
        try:
            self.proc.stdin.write(header)
            self.proc.stdin.write(payload)
            await self.proc.stdin.drain()
            line = await self.proc.stdout.readline()
            if not line:
                raise OffloadFailed(f"the helper exited (code {self.proc.returncode})")
            reply = json.loads(line)
            data = await self.proc.stdout.readexactly(int(reply.get("size", 0)))
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            ValueError,
            asyncio.LimitOverrunError,
        ) as exc:
            raise OffloadFailed(f"the helper broke off: {type(exc).__name__}: {exc}") from None
        if not reply.get("ok"):
            raise OffloadFailed(str(reply.get("error") or "the helper failed"))
        return reply, data

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    async def reap(self) -> None:
        self.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), 5.0)


class Offload:
    """Helper processes for CPU-heavy steps, `max_helpers` at most, requests first come first
    served. Bound to the event loop that first uses it."""

    def __init__(self, max_helpers: int = 1, *, warm: int = 0) -> None:
        self.max_helpers = max(1, max_helpers)
        self.warm = max(0, min(warm, self.max_helpers))
        self._idle: list[_Helper] = []
        self._all: set[_Helper] = set()  # every helper process started and not yet reaped
        self._count = 0  # helpers alive or starting, idle or not
        self._waiters: collections.deque[asyncio.Future[_Helper | None]] = collections.deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._trimmer: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def helpers(self) -> int:
        """Helper processes alive or starting (for tests and the bench)."""
        return self._count

    def start(self) -> None:
        """Start the `warm` helpers in the background (a server answering its client first)."""
        for _ in range(self.warm - self._count):
            self._count += 1
            task = asyncio.get_running_loop().create_task(self._start_idle())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _start_idle(self) -> None:
        try:
            helper = await _Helper.start()
        except (OSError, OffloadFailed, TimeoutError) as exc:
            log.error("cannot start an offload helper: %s", exc)
            self._free_slot()
            return
        self._all.add(helper)
        self._release(helper)

    async def erase(self, code: str, deadline: float | None) -> Erased:
        """`tsinput.erase_types(code)`, in a helper; TimeoutError at `deadline` (monotonic s)."""
        from codemode_gen.runtime.host.tsinput import Erased

        meta, data = await self.request("erase", code.encode("utf-8", "surrogatepass"), deadline)
        diagnostics = tuple(
            cast("Diagnostic", d) for d in meta.get("diagnostics") or () if isinstance(d, dict)
        )
        if meta.get("same"):
            return Erased(code, diagnostics)
        return Erased(data.decode("utf-8", "surrogatepass"), diagnostics)

    async def envelope(self, body: bytes | bytearray, deadline: float | None) -> Envelope | None:
        """The `Envelope` of a JSON request body (None: not JSON), parsed in a helper."""
        meta, _ = await self.request("envelope", body, deadline)
        if not meta.get("json"):
            return None
        return Envelope.from_json(meta.get("envelope") or {})

    async def request(
        self, op: str, payload: bytes | bytearray, deadline: float | None
    ) -> tuple[dict[str, Any], bytes]:
        if self._closed:
            raise OffloadFailed("the offload helpers are shut down")
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        helper: _Helper | None = None
        reusable = False
        try:
            async with asyncio.timeout(timeout):
                helper = await self._acquire()
                reply = await helper.request(op, payload)
            reusable = True
            return reply
        finally:
            if helper is not None:
                if reusable:
                    self._release(helper)
                else:  # timed out, cancelled or broken mid-request: its state is unknown
                    helper.kill()
                    self._spawn(self._reap_and_free(helper))

    async def _acquire(self) -> _Helper:
        while self._idle:
            helper = self._idle.pop()
            if helper.alive():
                return helper
            self._count -= 1
            self._all.discard(helper)
            self._spawn(helper.reap())
        if self._count < self.max_helpers:
            self._count += 1
            return await self._start_in_slot()
        waiter: asyncio.Future[_Helper | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            given = await waiter
        except asyncio.CancelledError:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)
            if waiter.done() and not waiter.cancelled():
                handed = waiter.result()
                if handed is None:
                    self._free_slot()
                else:
                    self._release(handed)
            raise
        return given if given is not None else await self._start_in_slot()

    async def _start_in_slot(self) -> _Helper:
        try:
            helper = await _Helper.start()
        except BaseException:
            self._free_slot()
            raise
        self._all.add(helper)
        return helper

    def _next_waiter(self) -> asyncio.Future[_Helper | None] | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _release(self, helper: _Helper) -> None:
        if self._closed or not helper.alive():
            helper.kill()
            self._spawn(self._reap_and_free(helper))
            return
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result(helper)
            return
        helper.idle_since = time.monotonic()
        self._idle.append(helper)
        if len(self._idle) > self.warm and self._trimmer is None:
            self._trimmer = asyncio.get_running_loop().create_task(self._trim())

    def _free_slot(self) -> None:
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result(None)  # its owner starts a helper in the slot
            return
        self._count -= 1

    async def _reap_and_free(self, helper: _Helper) -> None:
        try:
            await helper.reap()
        finally:
            self._all.discard(helper)
            self._free_slot()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _stop(self, helper: _Helper) -> None:
        """A helper trimmed from the idle list: no longer counted, then stopped."""
        self._count -= 1
        self._all.discard(helper)
        await helper.reap()

    async def _trim(self) -> None:
        """Stop helpers idle beyond `warm` for IDLE_HELPER_TTL_S (the longest idle first)."""
        try:
            await trim_idle(
                self._idle,
                self.warm,
                IDLE_HELPER_TTL_S,
                closed=lambda: self._closed,
                stop=self._stop,
            )
        finally:
            self._trimmer = None

    async def aclose(self) -> None:
        """Stop every helper (requests in flight end with OffloadFailed); idempotent."""
        self._closed = True
        if self._trimmer is not None:
            self._trimmer.cancel()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.cancel()
        self._idle = []
        helpers, self._all = list(self._all), set()
        for helper in helpers:  # idle ones, and any still busy with a request
            await helper.reap()
        self._count = 0
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    main()
