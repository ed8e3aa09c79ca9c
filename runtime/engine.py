"""The JavaScript engine behind the sandbox, behind one small interface.

This is the only module that imports `jsbox` (QuickJS-ng via rquickjs). The worker only needs
what an executor needs (Cloudflare's "executor" shape): register ES modules by name, bind
host functions, evaluate one script that may await host calls, with a deadline and heap and
stack limits, and report failures as plain data. Swapping QuickJS for another engine means
writing another `Engine` here; nothing else in the runtime names the binding.
"""

from __future__ import annotations

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
