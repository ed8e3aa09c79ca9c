"""Execution limits of one `codemode.run` (spec §3.2.4, §7.4, §11).

Limits arrive from three places (built-in defaults, `codemode.toml`, the agent's request) and
every one of them is untrusted input to the sandbox: a typo must be reported clearly, an
unknown key must be ignored (§3.2.4 MUST), and no request may lift a limit past the hard
ceiling the host can actually honour. Field names are the JSON keys (camelCase) on purpose:
the same names appear in the system prompt, in `codemode.toml` and in responses.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

# Defaults, ceilings and floors of the request keys live in the shared core, where codemode.toml's
# validation reads them too (one source of truth); re-exported here.
from codemode_gen.limit_bounds import (  # noqa: F401
    DEFAULT_MAX_CONCURRENT_CALLS,
    DEFAULT_MAX_LOG_BYTES,
    DEFAULT_MAX_MEMORY_BYTES,
    DEFAULT_MAX_RESPONSE_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
    DEFAULT_TIMEOUT_MS,
    HARD_MAX_CONCURRENT_CALLS,
    HARD_MAX_LOG_BYTES,
    HARD_MAX_MEMORY_BYTES,
    HARD_MAX_RESPONSE_CHARS,
    HARD_MAX_TIMEOUT_MS,
    HARD_MAX_TOOL_CALLS,
    LIMIT_CHOICES,
    LIMIT_FLAGS,
    LIMIT_RANGES,
    MIN_CONCURRENT_CALLS,
    MIN_MEMORY_BYTES,
    MIN_RESPONSE_CHARS,
    MIN_TIMEOUT_MS,
    TRACE_MODES,
    TraceMode,
    coerce_limit,
)

if TYPE_CHECKING:  # diagnostics imports this module's limits
    from codemode_gen.runtime.diagnostics import Diagnostic

# --- fixed caps: not request keys; what crosses the bridge and what a response may hold ----
# (docs/DESIGN.md, "Sandbox"; a script that hits one is told by the message that names it)

#: Nesting depth of a JSON value crossing the sandbox boundary: a tool input, a tool result,
#: the script's result. Bounds depth bombs: Python's recursive json and validators fail near
#: 1,000 levels, the MCP SDK's pydantic near 200-255 (a failed send killed the whole session),
#: and a deeper result could not even be returned by `serve`. Real data is rarely 20 deep.
MAX_JSON_DEPTH = 100
#: UTF-8 bytes of one tool-call request as JSON (server id, tool name, input). Bounds what one
#: call can make the host parse on its event loop, validate and forward to a server.
MAX_INPUT_BYTES = 8 * 1024 * 1024
#: UTF-8 bytes of the script's result as JSON. Bounds the response (and the host's memory)
#: against a result as big as the JS heap (up to HARD_MAX_MEMORY_BYTES); over it the run ends
#: with SANDBOX_LIMIT and result null, logs kept.
MAX_RESULT_BYTES = 16 * 1024 * 1024
#: What one log entry costs in the response besides its message (`{"level":"debug",
#: "message":"","timeMs":1234567}`). Bounds log floods of empty or tiny messages (300,000
#: `console.log()` made 14.8 MB while maxLogBytes counted 0): a run keeps at most
#: max(MIN_LOG_ENTRIES, maxLogBytes // LOG_ENTRY_OVERHEAD_BYTES) entries, so their overhead
#: never exceeds maxLogBytes (or MIN_LOG_ENTRIES entries for tiny limits).
LOG_ENTRY_OVERHEAD_BYTES = 48
#: Entries a run may always log, however small maxLogBytes is (see LOG_ENTRY_OVERHEAD_BYTES).
MIN_LOG_ENTRIES = 1000
#: toolTrace entries kept per run; later calls are counted in a TOOL_TRACE_TRUNCATED
#: diagnostic. Bounds the trace of a run allowed up to HARD_MAX_TOOL_CALLS calls.
MAX_TRACE_ENTRIES = 1000
#: Characters of a script-chosen name (serverId, toolName) kept in toolTrace and in messages.
#: Bounds copies of hostile names (an 8 MB server id × 30 calls made a 151 MB response).
MAX_NAME_CHARS = 200
#: Characters of a toolTrace entry's `error` summary: the error class and the server's own
#: message (an isError result's text, a JSON-RPC error's message), cut with a marker. Bounds
#: server text copied into every failed entry (a server may answer with megabytes).
MAX_TRACE_ERROR_CHARS = 300
#: Characters of one diagnostic's message, hint or path. Bounds script text copied into
#: diagnostics (`throw new Error("x".repeat(5e7))`) and server text (connect failures).
MAX_DIAGNOSTIC_CHARS = 4000


class LimitsError(ValueError):
    """A limits value is not a usable integer; the message names the key and the valid range."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"limits.{key}: {message}")
        self.key = key


class SandboxLimitExceeded(Exception):
    """Raised by a host call (e.g. the bridge on the N+1th tool call) to end the run.

    The sandbox turns it into a `SANDBOX_LIMIT` diagnostic with errorClass
    `SandboxLimitError`, keeping the logs captured so far (§7.4).
    """

    def __init__(self, limit: str, value: int | float | str | None, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.message = message


class RunStopped(Exception):
    """Raised by a host call to end the run at once with these diagnostics (a resumed run that
    no longer does what its journal says: runtime/host/resume.py); like a limit, the worker is killed
    and nothing more is sent."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__(diagnostics[0].get("message") if diagnostics else "run stopped")
        self.diagnostics = diagnostics


@dataclass(frozen=True)
class Limits:
    """Limits of one run; construct with `Limits()` for the documented defaults."""

    timeoutMs: int = DEFAULT_TIMEOUT_MS
    maxMemoryBytes: int = DEFAULT_MAX_MEMORY_BYTES
    maxLogBytes: int = DEFAULT_MAX_LOG_BYTES
    maxToolCalls: int = DEFAULT_MAX_TOOL_CALLS
    maxConcurrentCalls: int = DEFAULT_MAX_CONCURRENT_CALLS
    #: Type-check the script against out/'s declarations before it runs; type errors come back
    #: as warnings and the run goes ahead (runtime/host/typecheck.py). None: the host's default
    #: (`serve --typecheck`, `CodeMode(typecheck=True)`; off otherwise). Not a resource limit,
    #: but a per-run option sent the same way (§3.2.4 lets a host document its own keys).
    typecheck: bool | None = None
    #: Characters of `result` and `logs` the response carries; past it both are cut with
    #: markers and a RESPONSE_TRUNCATED warning (runtime/response.py `fit_response`). None: the
    #: host's default (`serve`: DEFAULT_MAX_RESPONSE_CHARS, `serve --max-response-chars`; the
    #: Python API and `run`: no budget). A host-defined key (§3.2.4).
    maxResponseChars: int | None = None
    #: What `toolTrace` lists (TRACE_MODES; runtime/host/tooltrace.py `shape_trace`). None: the host's
    #: default (`serve`: "errors", `serve --trace`; the Python API and `run`: "full").
    trace: TraceMode | None = None

    def __post_init__(self) -> None:
        optional = {f.name for f in fields(self) if f.default is None}
        for key in LIMIT_RANGES:
            if getattr(self, key) is not None or key not in optional:
                _check(key, getattr(self, key))
        for key in (*LIMIT_FLAGS, *LIMIT_CHOICES):
            _check_flag(key, getattr(self, key))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Limits:
        """Defaults overridden by `data`; unknown keys ignored (§3.2.4), bad values raise
        `LimitsError`.

        Every run reads its limits from JSON (the request, then the worker's copy), and runs
        mostly send the same few: a frozen result is shared instead of validated again."""
        key = _cache_key(data) if cls is Limits else None
        if key is None:
            return merge(cls(), data)
        return _from_key(key)

    def to_json(self) -> dict[str, Any]:
        """The set keys (the host-default ones only when set)."""
        # Field by field: `asdict` deep-copies every value, and a run sends its limits twice.
        return {key: value for key in _FIELD_NAMES if (value := getattr(self, key)) is not None}


_FIELD_NAMES = tuple(f.name for f in fields(Limits))
#: Distinct limit objects whose validated `Limits` are kept (`Limits.from_json`); bounds the
#: cache when every request sends different values.
MAX_CACHED_LIMITS = 64
_KNOWN_KEYS = frozenset((*LIMIT_RANGES, *LIMIT_FLAGS, *LIMIT_CHOICES))
_SCALARS = (int, str, bool, float, type(None))


def _cache_key(data: Mapping[str, Any] | None) -> tuple[tuple[str, type, Any], ...] | None:
    """The known keys of `data` with their values and types (True and 1 are different
    values here); None when `data` is not a mapping of plain scalars (merge reports it)."""
    if data is None:
        return ()
    if not isinstance(data, Mapping):
        return None
    items = []
    for key, value in data.items():
        if key not in _KNOWN_KEYS:
            continue  # ignored (§3.2.4): not part of the key either
        if type(value) not in _SCALARS:
            return None
        items.append((key, type(value), value))
    return tuple(sorted(items, key=lambda item: item[0]))


@functools.lru_cache(maxsize=MAX_CACHED_LIMITS)
def _from_key(key: tuple[tuple[str, type, Any], ...]) -> Limits:
    return merge(Limits(), {name: value for name, _, value in key})


def merge(defaults: Limits, overrides: Mapping[str, Any] | Limits | None) -> Limits:
    """`defaults` with every recognised key of `overrides` applied and validated.

    Unknown keys are ignored without error (§3.2.4); `None` values mean "keep the default".
    """
    if overrides is None:
        return defaults
    if isinstance(overrides, Limits):
        return overrides
    if not isinstance(overrides, Mapping):
        raise LimitsError("*", f"expected an object of limits, got {type(overrides).__name__}")
    changes: dict[str, Any] = {}
    for key in LIMIT_RANGES:
        if key in overrides and overrides[key] is not None:
            changes[key] = _coerce(key, overrides[key])
    for key in (*LIMIT_FLAGS, *LIMIT_CHOICES):
        if key in overrides and overrides[key] is not None:
            changes[key] = _check_flag(key, overrides[key])
    return replace(defaults, **changes)


def _coerce(key: str, value: Any) -> Any:
    try:
        return coerce_limit(key, value)
    except ValueError as exc:
        raise LimitsError(key, str(exc)) from None


def _check_flag(key: str, value: Any) -> Any:
    """A flag or choice: None (the host's default) or a value `coerce_limit` accepts."""
    return _coerce(key, value)


def _check(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitsError(key, f"expected an integer, got {value!r}")
    _coerce(key, value)
