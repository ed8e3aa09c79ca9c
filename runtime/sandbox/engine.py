"""The JavaScript engine behind the sandbox, behind one small interface.

This is the only module that imports `jsbox` (QuickJS-ng via rquickjs). The worker only needs
what an executor needs (Cloudflare's "executor" shape): register ES modules by name, bind
host functions, evaluate one script that may await host calls, with a deadline and heap and
stack limits, and report failures as plain data. Swapping QuickJS for another engine means
writing another `Engine` here; nothing else in the runtime names the binding.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import types
from collections.abc import Callable
from typing import Any, Protocol, cast

#: Native stack the engine may use for JS recursion. Bounds deep recursion; jsbox refuses
#: more than 4 MiB because guest recursion could then overflow the real thread stack.
STACK_BYTES = 1024 * 1024
#: The most jsbox allows (see STACK_BYTES): the TypeScript compiler recurses once per level of
#: nesting of the script it checks, and stops with "stack overflow" where node would go on.
MAX_STACK_BYTES = 4 * 1024 * 1024
#: Size of the allocation used to tell "out of memory" from other failures that the engine
#: reports without a message. Kept small so a run close to (but under) its limit is not
#: misreported; a fraction of the heap limit for small limits.
HEAP_PROBE_BYTES = 1024 * 1024
#: Free heap the C allocator may keep after a run before `release_memory` trims it: what a small
#: run frees (under 1 MB) stays for the next realm. Trimming it cost ~0.1 ms and the next realm
#: then faulted the same pages back in, ~0.4 ms of CPU per run in all, for ~0.4 MB less RSS; a run
#: that filled a large heap still gives it back.
RELEASE_THRESHOLD_BYTES = 2 * 1024 * 1024
#: Host calls `run` may settle one after another without giving the event loop a turn: a call
#: whose answer is already there (a queued reply, the end-of-run tick) reaches JS at once, which
#: saves one to two loop turns per event. After this many the loop gets its turn anyway, so a
#: script whose every await is answered at once cannot keep the worker from reading its pipe.
MAX_SETTLED_IN_A_ROW = 64


class EngineError(Exception):
    """A JS error that escaped evaluation (SyntaxError from `check_syntax` included)."""

    def __init__(self, name: str, message: str, stack: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message
        self.stack = stack


class EngineTimeout(Exception):
    """The deadline passed and the interpreter stopped the script (uncatchable in JS)."""


class EnginePendingLimit(Exception):
    """More host calls were pending than the engine allows (the JS-side queue should prevent it)."""


class EngineClosed(RuntimeError):
    """The engine was used after `close()`."""


class Engine(Protocol):
    """One fresh JS realm: used for exactly one run, then closed."""

    def check_syntax(self, source: str) -> None:
        """Parse `source` as an ES module without running it; raise `EngineError` if invalid."""

    def add_module(self, name: str, source: str) -> None:
        """Make `source` importable as `import ... from "<name>"` (and `import(name)`)."""

    def bind_function(self, name: str, func: Callable[..., Any]) -> None:
        """Expose `func` as global `name`; an `async def` gives JS a Promise."""

    def bind_object(self, name: str, value: Any) -> None:
        """Copy a JSON-shaped Python value into global `name`."""

    async def run(self, script: str, timeout: float) -> Any:
        """Evaluate `script` (a classic script whose completion value may be a promise),
        settling it while awaiting bound async functions on the running loop.

        Raises `EngineError`, `EngineTimeout` or `EnginePendingLimit`.
        """

    def heap_exhausted(self) -> bool:
        """Whether the heap is (nearly) full: probes with a small allocation after a failure
        that came back without a message."""

    def close(self) -> None:
        """Free the realm now: its heap, its modules and every host function bound into it
        (which may refer back to the engine's owner). Idempotent; any later use raises
        `EngineClosed`. Call it when the run ends, however it ended."""


class JsboxEngine:
    """`Engine` on jsbox 0.1.x. A Runtime is bound to the thread that created it.

    A Runtime keeps what `bind_function` gave it in Rust, out of sight of Python's cycle
    collector (its `tp_traverse` visits none of it): a bound method of an object that owns this
    engine makes a cycle `gc` can never free, and with it the whole QuickJS heap (up to the
    memory limit per run). `close()` drops the Runtime, the only reference to it, so the heap
    and the bound callables go at once, whatever refers to the engine.
    """

    def __init__(
        self, *, memory_limit: int, max_pending_calls: int, stack_size: int = STACK_BYTES
    ) -> None:
        import jsbox

        self._jsbox = jsbox
        self._memory_limit = memory_limit
        self._rt: Any = jsbox.Runtime(
            memory_limit=memory_limit,
            max_stack_size=stack_size,
            # Results and log lines are copied out as one string; they can be as big as the heap.
            max_value_bytes=memory_limit,
            max_pending_calls=max_pending_calls,
        )

    def check_syntax(self, source: str) -> None:
        try:
            self._runtime().check_syntax(source, module=True)
        except self._jsbox.JavaScriptError as exc:
            raise _engine_error(exc) from None

    def add_module(self, name: str, source: str) -> None:
        self._runtime().add_static_module(name, source)

    def bind_function(self, name: str, func: Callable[..., Any]) -> None:
        self._runtime().bind_function(name, func)

    def bind_object(self, name: str, value: Any) -> None:
        self._runtime().bind_object(name, value)

    async def run(self, script: str, timeout: float) -> Any:
        timeout = max(timeout, 0.001)
        try:
            return await _eval_async(self._jsbox, self._runtime(), script, timeout)
        except self._jsbox.JsTimeoutError:
            raise EngineTimeout() from None
        except self._jsbox.JavaScriptError as exc:
            raise _engine_error(exc) from None
        except RuntimeError as exc:
            if "pending host calls" in str(exc):
                raise EnginePendingLimit(str(exc)) from None
            raise

    def evaluate(self, script: str) -> Any:
        """Evaluate a classic script synchronously and return its completion value (for a
        long-lived realm that runs trusted code, like the type checker's compiler; agent
        scripts go through `run`). Raises `EngineError`."""
        try:
            return self._runtime().eval(script)
        except self._jsbox.JavaScriptError as exc:
            raise _engine_error(exc) from None

    def heap_exhausted(self) -> bool:
        size = max(min(HEAP_PROBE_BYTES, self._memory_limit // 16), 1024)
        try:
            self._runtime().eval(f"'x'.repeat({size}).length", timeout=1.0)
        except self._jsbox.JavaScriptError:
            return True
        except Exception:
            return False
        return False

    def close(self) -> None:
        # The Runtime's only reference: dropping it frees the QuickJS runtime and context and
        # releases the bound callables and any host-call futures still pending in it.
        self._rt = None

    def _runtime(self) -> Any:
        rt = self._rt
        if rt is None:
            raise EngineClosed("the engine was closed")
        return rt


async def _eval_async(jsbox: Any, rt: Any, script: str, timeout: float) -> Any:
    """jsbox's `Runtime.eval_async` (the same steps, on the same methods of the Runtime), except
    that host calls already answered are settled without waiting for a loop turn
    (MAX_SETTLED_IN_A_ROW): `asyncio.wait` on a finished future still takes two turns, paid at
    the end of every run (its tick) and for every reply already queued when JS asks for one.
    JS sees the same thing either way: the binding runs every pending job before it hands over
    the calls still pending. A jsbox without those methods gets its own `eval_async`."""
    if not all(hasattr(rt, name) for name in ("_begin_async", "_poll", "_settle", "_end_async")):
        return await rt.eval_async(script, timeout=timeout)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    rt._begin_async(script, timeout)  # raises (without touching a running call) if busy
    try:
        in_a_row = 0
        while True:
            done, result = rt._poll()
            if done:
                return result
            pending = {future: call_id for call_id, future in result}
            finished = [future for future in pending if future.done()]
            if finished and in_a_row < MAX_SETTLED_IN_A_ROW and loop.time() < deadline:
                in_a_row += 1
            else:
                in_a_row = 0
                wait = max(deadline - loop.time(), 0)
                done_set, _ = await asyncio.wait(
                    pending, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                if not done_set:
                    raise jsbox.JsTimeoutError("script exceeded its timeout")
                finished = list(done_set)
            for future in finished:
                if future.cancelled():
                    rt._settle(pending[future], False, asyncio.CancelledError())
                elif (exc := future.exception()) is not None:
                    rt._settle(pending[future], False, exc)
                else:
                    rt._settle(pending[future], True, future.result())
    finally:
        rt._end_async()


def _engine_error(exc: Any) -> EngineError:
    name = getattr(exc, "name", None) or "Error"
    message = getattr(exc, "message", None)
    if message is None:
        message = str(exc).split("\n", 1)[0]
    return EngineError(str(name), str(message), str(getattr(exc, "stack", None) or ""))


def release_memory() -> None:
    """Give the heap pages freed by closed engines back to the OS (glibc `malloc_trim`).

    QuickJS allocates with the C library's malloc: after a run that filled a large heap, the
    freed memory stays mapped in the process (reused by the next run, but counted in its RSS)
    until trimmed. A few ms per 100 MB freed; a no-op where `malloc_trim` does not exist. Under
    RELEASE_THRESHOLD_BYTES of free heap (a small run's) it keeps the pages for the next realm."""
    trim = _malloc_trim()
    if trim is None:
        return
    free = _free_heap_bytes()
    if free is not None and free < RELEASE_THRESHOLD_BYTES:
        return
    trim(0)


def _free_heap_bytes() -> int | None:
    """Bytes the C allocator holds free (glibc `mallinfo2().fordblks`, all arenas); None where
    it cannot tell (then `release_memory` always trims)."""
    info = _mallinfo2()
    return None if info is None else int(info().fordblks)


@functools.cache
def _mallinfo2() -> Callable[[], Any] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    class MallInfo2(ctypes.Structure):  # glibc's struct mallinfo2: ten size_t fields
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in [
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            ]
        ]

    try:
        func = ctypes.CDLL(None).mallinfo2  # glibc 2.33 and later
    except (OSError, AttributeError):
        return None
    func.argtypes = []
    func.restype = MallInfo2
    return cast(Callable[[], Any], func)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        func = ctypes.CDLL(None).malloc_trim  # glibc; absent on musl
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_size_t]
    func.restype = ctypes.c_int
    return cast(Callable[[int], int], func)


def preload(*, child_processes: bool = True) -> None:
    """Import the binding now (worker start-up) rather than on the first run.

    `child_processes=False` (the sandbox worker): jsbox imports multiprocessing (pickle,
    sockets: ~0.6 MB of RSS per process) for `run_killable`, a child process per script, which
    is then left out: a stand-in for its module imports it when called. A jsbox that asks that
    module for more than `run_killable` gets the real one."""
    if not child_processes and "jsbox" not in sys.modules:
        stand_in = types.ModuleType("jsbox._killable")
        stand_in.run_killable = _run_killable  # type: ignore[attr-defined]
        sys.modules.setdefault("jsbox._killable", stand_in)
        try:
            import jsbox

            return
        except ImportError:
            sys.modules.pop("jsbox._killable", None)
            sys.modules.pop("jsbox", None)
    import jsbox  # noqa: F401


def _run_killable(*args: Any, **kwargs: Any) -> Any:
    """jsbox's `run_killable`, imported on first use (`preload(child_processes=False)`)."""
    sys.modules.pop("jsbox._killable", None)
    from jsbox._killable import run_killable

    return run_killable(*args, **kwargs)


def new_engine(*, memory_limit: int, max_pending_calls: int) -> Engine:
    """A fresh engine for one run (spec §1.4)."""
    return JsboxEngine(memory_limit=memory_limit, max_pending_calls=max_pending_calls)


def new_compiler_engine(*, memory_limit: int) -> JsboxEngine:
    """A long-lived realm for trusted JavaScript that calls synchronous host functions (the
    TypeScript compiler of runtime/sandbox/typecheck_worker.py): `bind_function`, then `evaluate`."""
    return JsboxEngine(memory_limit=memory_limit, max_pending_calls=1, stack_size=MAX_STACK_BYTES)
