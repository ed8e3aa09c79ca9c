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
from collections.abc import Callable
from typing import Any, Protocol

#: Native stack the engine may use for JS recursion. Bounds deep recursion; jsbox refuses
#: more than 4 MiB because guest recursion could then overflow the real thread stack.
STACK_BYTES = 1024 * 1024
#: Size of the allocation used to tell "out of memory" from other failures that the engine
#: reports without a message. Kept small so a run close to (but under) its limit is not
#: misreported; a fraction of the heap limit for small limits.
HEAP_PROBE_BYTES = 1024 * 1024


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


class Engine(Protocol):
    """One fresh JS realm: used for exactly one run, then dropped."""

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


class JsboxEngine:
    """`Engine` on jsbox 0.1.x. A Runtime is bound to the thread that created it."""

    def __init__(self, *, memory_limit: int, max_pending_calls: int, stack_size: int = STACK_BYTES) -> None:
        import jsbox

        self._jsbox = jsbox
        self._memory_limit = memory_limit
        self._rt = jsbox.Runtime(
            memory_limit=memory_limit,
            max_stack_size=stack_size,
            # Results and log lines are copied out as one string; they can be as big as the heap.
            max_value_bytes=memory_limit,
            max_pending_calls=max_pending_calls,
        )

    def check_syntax(self, source: str) -> None:
        try:
            self._rt.check_syntax(source, module=True)
        except self._jsbox.JavaScriptError as exc:
            raise _engine_error(exc) from None

    def add_module(self, name: str, source: str) -> None:
        self._rt.add_static_module(name, source)

    def bind_function(self, name: str, func: Callable[..., Any]) -> None:
        self._rt.bind_function(name, func)

    def bind_object(self, name: str, value: Any) -> None:
        self._rt.bind_object(name, value)

    async def run(self, script: str, timeout: float) -> Any:
        timeout = max(timeout, 0.001)
        try:
            if _HAS_STEPPING_API and all(hasattr(self._rt, m) for m in _STEPPING_METHODS):
                return await _Drive(self._rt, self._jsbox, timeout).run(script)
            return await self._rt.eval_async(script, timeout=timeout)
        except self._jsbox.JsTimeoutError:
            raise EngineTimeout() from None
        except self._jsbox.JavaScriptError as exc:
            raise _engine_error(exc) from None
        except RuntimeError as exc:
            if "pending host calls" in str(exc):
                raise EnginePendingLimit(str(exc)) from None
            raise

    def heap_exhausted(self) -> bool:
        size = max(min(HEAP_PROBE_BYTES, self._memory_limit // 16), 1024)
        try:
            self._rt.eval(f"'x'.repeat({size}).length", timeout=1.0)
        except self._jsbox.JavaScriptError:
            return True
        except Exception:
            return False
        return False


#: jsbox 0.1.x drives an async evaluation with four Runtime methods that its own `eval_async`
#: wraps; `_Drive` uses them directly (and falls back to `eval_async` when they are absent).
_STEPPING_METHODS = ("_begin_async", "_poll", "_settle", "_end_async")
#: Switch to fall back to jsbox's own `eval_async` (same semantics, one loop turn more per call).
_HAS_STEPPING_API = True


class _Drive:
    """Settles one async evaluation from the host calls' own done-callbacks.

    jsbox's `eval_async` awaits `asyncio.wait` over every pending host call after each step:
    a set, a waiter, a timer and a task wake-up per tool call. Here each pending future gets
    one done-callback that settles the JS promise and runs JS on the spot, so a tool call's
    reply reaches the script one event-loop turn after it arrives. Semantics are those of
    `eval_async`: same deadline (raised as `JsTimeoutError`), a host exception rejects the
    JS promise, a cancelled host future rejects it with `CancelledError`, and `_end_async`
    always runs (it drops the host calls still pending)."""

    def __init__(self, rt: Any, jsbox: Any, timeout: float) -> None:
        self._rt = rt
        self._jsbox = jsbox
        self._timeout = timeout
        self._watched: set[int] = set()
        self._closed = False
        self._outcome: asyncio.Future[Any] | None = None

    async def run(self, script: str) -> Any:
        loop = asyncio.get_running_loop()
        self._outcome = loop.create_future()
        self._rt._begin_async(script, self._timeout)  # raises, untouched, if the Runtime is busy
        timer = loop.call_later(self._timeout, self._expire)
        try:
            self._step()
            return await self._outcome
        finally:
            self._closed = True
            timer.cancel()
            # Host futures still pending keep their done-callbacks (and so this object): drop
            # the Runtime here so it is freed now, on its own thread, not by a later GC pass.
            rt, self._rt = self._rt, None
            rt._end_async()

    def _finish(self, value: Any = None, exc: BaseException | None = None) -> None:
        out = self._outcome
        if out is None or out.done():
            return
        if exc is not None:
            out.set_exception(exc)
        else:
            out.set_result(value)

    def _expire(self) -> None:
        self._finish(exc=self._jsbox.JsTimeoutError("script exceeded its timeout"))

    def _step(self) -> None:
        if self._closed or (self._outcome is not None and self._outcome.done()):
            return
        try:
            done, result = self._rt._poll()
        except BaseException as exc:
            self._finish(exc=exc)
            return
        if done:
            self._finish(result)
            return
        for call_id, fut in result:
            if call_id not in self._watched:
                self._watched.add(call_id)
                fut.add_done_callback(functools.partial(self._settled, call_id))

    def _settled(self, call_id: int, fut: asyncio.Future[Any]) -> None:
        self._watched.discard(call_id)
        if self._closed or (self._outcome is not None and self._outcome.done()):
            return
        try:
            if fut.cancelled():
                self._rt._settle(call_id, False, asyncio.CancelledError())
            elif fut.exception() is not None:
                self._rt._settle(call_id, False, fut.exception())
            else:
                self._rt._settle(call_id, True, fut.result())
        except BaseException as exc:
            self._finish(exc=exc)
            return
        self._step()


def _engine_error(exc: Any) -> EngineError:
    name = getattr(exc, "name", None) or "Error"
    message = getattr(exc, "message", None)
    if message is None:
        message = str(exc).split("\n", 1)[0]
    return EngineError(str(name), str(message), str(getattr(exc, "stack", None) or ""))


def preload() -> None:
    """Import the binding now (worker start-up) rather than on the first run."""
    import jsbox  # noqa: F401


def new_engine(*, memory_limit: int, max_pending_calls: int) -> Engine:
    """A fresh engine for one run (spec §1.4)."""
    return JsboxEngine(memory_limit=memory_limit, max_pending_calls=max_pending_calls)
