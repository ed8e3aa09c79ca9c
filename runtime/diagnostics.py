"""The §3.3.3 diagnostics contract: every code the runtime emits (`DiagnosticCode`), the one
constructor of a diagnostic (`diagnostic`), and the diagnostics of the run's fatal outcomes
that both sides of the pipe report (a limit hit, an unserialisable result, a promise that never
settles, a sandbox failure).

A contract module: the sandbox worker and the host both import it, so it imports nothing but
the runtime's other contract modules. The texts can carry server text or the script's, so each
is made UTF-8-safe and cut to MAX_DIAGNOSTIC_CHARS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, NewType, NotRequired, TypedDict

from codemode_gen.runtime.jsonsafe import clip, safe_name
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS


class DiagnosticCode(StrEnum):
    """Every `code` a diagnostic of the runtime can carry (§3.3.3), but the compiler's own
    (`TS2322`...: `ts_code`). A new diagnostic gets its code here."""

    # The script's outcome, reported by the sandbox (fatal ones: FATAL_CODES).
    SYNTAX_ERROR = "SYNTAX_ERROR"
    UNCAUGHT_EXCEPTION = "UNCAUGHT_EXCEPTION"
    IMPORT_FAILURE = "IMPORT_FAILURE"
    SANDBOX_LIMIT = "SANDBOX_LIMIT"
    #: The result could not be serialised as JSON (BigInt, cycle, function...).
    RESULT_NOT_SERIALIZABLE = "RESULT_NOT_SERIALIZABLE"
    #: The script awaited something that can never settle (no tool call or timer pending).
    UNSETTLED_PROMISE = "UNSETTLED_PROMISE"
    #: The sandbox itself failed (worker crashed, lockdown failed): a host bug, not the script's.
    SANDBOX_ERROR = "SANDBOX_ERROR"
    #: A tool call failed while nothing awaited it (a warning).
    UNAWAITED_CALL_FAILED = "UNAWAITED_CALL_FAILED"
    #: The response was cut to maxResponseChars (a warning).
    RESPONSE_TRUNCATED = "RESPONSE_TRUNCATED"
    # The run's tool calls (runtime/host/tooltrace.py, upstream.py).
    #: An input or result was refused at the sandbox boundary (size, depth).
    BRIDGE_LIMIT = "BRIDGE_LIMIT"
    #: toolTrace lists only the first MAX_TRACE_ENTRIES calls.
    TOOL_TRACE_TRUNCATED = "TOOL_TRACE_TRUNCATED"
    #: A boxed tool answered without its box: the value went to the script unchanged.
    UNBOX_MISMATCH = "UNBOX_MISMATCH"
    # The run's servers against out/ (runtime/host/reconcile.py) and the host's services.
    CAPABILITY_UNAVAILABLE = "CAPABILITY_UNAVAILABLE"
    MODULE_BUILT_IN_MEMORY = "MODULE_BUILT_IN_MEMORY"
    STALE_OUT = "STALE_OUT"
    CONNECT_TIME = "CONNECT_TIME"
    RECORDING_FAILED = "RECORDING_FAILED"
    RESUME_DIVERGED = "RESUME_DIVERGED"
    # Type checking before a run (runtime/host/typecheck.py).
    TYPECHECK_SKIPPED = "TYPECHECK_SKIPPED"
    TYPECHECK_TRUNCATED = "TYPECHECK_TRUNCATED"
    TYPECHECK_UNAVAILABLE = "TYPECHECK_UNAVAILABLE"
    # A run that never started: its request, the host's configuration, the host itself.
    INVALID_LIMITS = "INVALID_LIMITS"
    INVALID_REQUEST = "INVALID_REQUEST"
    APPROVAL_STATE_REJECTED = "APPROVAL_STATE_REJECTED"
    CONFIG_ERROR = "CONFIG_ERROR"
    HOST_ERROR = "HOST_ERROR"


#: A TypeScript compiler diagnostic's code (`TS` and its number), passed through as tsc gives it.
TsCode = NewType("TsCode", str)


def ts_code(number: object) -> TsCode:
    """The code of the compiler's diagnostic number `number` (`TS2322`)."""
    return TsCode(f"TS{number}")


class Diagnostic(TypedDict):
    """One element of a response's `diagnostics` (§3.3.3), and of `check`'s output: made in the
    sandbox worker or the host (`diagnostic`), carried through the pool, the run path and the
    response to the front-ends. Optional fields are omitted, never null."""

    #: "error", "warning" or "info".
    severity: str
    #: A `DiagnosticCode` value or a compiler's `TsCode` (`TS2322`), as plain text: diagnostics
    #: cross the worker's pipe as JSON, so the enumeration does not survive the trip.
    code: str
    message: str
    #: What to do about it.
    hint: NotRequired[str]
    #: Where in the script: `line:column` (or `line`).
    path: NotRequired[str]
    #: The `@codemode/errors` class of an uncaught error (UNCAUGHT_EXCEPTION, SANDBOX_LIMIT).
    errorClass: NotRequired[str]
    #: The skill file a diagnostic of `check` (without SCRIPT) is about.
    file: NotRequired[str]


#: Codes after which `result` MUST be null (§3.3.4).
FATAL_CODES = frozenset(
    {
        DiagnosticCode.SYNTAX_ERROR,
        DiagnosticCode.UNCAUGHT_EXCEPTION,
        DiagnosticCode.IMPORT_FAILURE,
        DiagnosticCode.SANDBOX_LIMIT,
        DiagnosticCode.UNSETTLED_PROMISE,
        DiagnosticCode.SANDBOX_ERROR,
    }
)


def diagnostic(
    code: DiagnosticCode | TsCode,
    message: str,
    *,
    severity: str = "error",
    hint: str | None = None,
    path: str | None = None,
    error_class: str | None = None,
) -> Diagnostic:
    """One §3.3.3 diagnostic; optional fields are omitted rather than null.

    The texts can carry server text (a connect failure) or the script's (an uncaught error's
    message), so each is made UTF-8-safe and cut to MAX_DIAGNOSTIC_CHARS."""
    d: Diagnostic = {
        "severity": severity,
        "code": str(code),
        "message": clip(message, MAX_DIAGNOSTIC_CHARS),
    }
    if hint:
        d["hint"] = clip(hint, MAX_DIAGNOSTIC_CHARS)
    if path:
        d["path"] = clip(path, MAX_DIAGNOSTIC_CHARS)
    if error_class:
        d["errorClass"] = error_class
    return d


def sandbox_limit(limit: str, value: Any, message: str, hint: str | None = None) -> Diagnostic:
    hints = {
        "timeoutMs": "do less per run (fewer or cheaper steps, no busy loops) or raise limits.timeoutMs",
        "maxMemoryBytes": "keep less data in memory (filter and aggregate early) or raise limits.maxMemoryBytes",
        "maxToolCalls": "make fewer tool calls per run (batch, filter first) or raise limits.maxToolCalls",
        "maxConcurrentCalls": "await tool calls in smaller batches",
    }
    return diagnostic(
        DiagnosticCode.SANDBOX_LIMIT,
        f"{message} (limit {limit} = {value})" if value is not None else message,
        hint=hint or hints.get(limit, "do less work per run"),
        error_class="SandboxLimitError",
    )


def hit_limit(diagnostics: Iterable[Mapping[str, Any]], limit: str) -> bool:
    """Whether a run ended on `limit` (a SANDBOX_LIMIT error `sandbox_limit` made for it)."""
    mark = f"(limit {limit} = "
    return any(
        d.get("code") == DiagnosticCode.SANDBOX_LIMIT
        and d.get("severity") == "error"
        and mark in str(d.get("message", ""))
        for d in diagnostics
    )


_RAN_LONGER = "the script ran longer than"


def timeout_limit(timeout_ms: int) -> Diagnostic:
    return sandbox_limit("timeoutMs", timeout_ms, f"{_RAN_LONGER} {timeout_ms} ms and was stopped")


def start_limit(timeout_ms: int) -> Diagnostic:
    """The run's time ran out before the script started (no worker was ready in time)."""
    return sandbox_limit(
        "timeoutMs",
        timeout_ms,
        f"the script never started: no sandbox was ready within the run's timeoutMs ({timeout_ms} ms)",
        hint="run it again (sandboxes were starting; later runs find one ready), or raise limits.timeoutMs",
    )


def prepare_limit(timeout_ms: int, spent_ms: int) -> Diagnostic:
    """The run's time ran out while the host connected its servers, before the script started."""
    return sandbox_limit(
        "timeoutMs",
        timeout_ms,
        f"the script never started: connecting its servers and preparing the run took {spent_ms} ms, "
        f"more than its timeoutMs ({timeout_ms} ms) and the connect wait not counted in it",
        hint=_CONNECT_AGAIN,
    )


_CONNECT_AGAIN = (
    "run it again: the connection goes on in the background and later runs reuse it (a cold start "
    "is not counted in timeoutMs once connected); if it never connects, check the server and its "
    "connect_timeout in codemode.toml"
)


def waiting_for_connect(d: Diagnostic, servers: Sequence[str]) -> Diagnostic:
    """`d` itself, or, when it is the script's timeout, one saying it was spent waiting for
    `servers` to connect (their connections go on after the run)."""
    if d.get("code") != DiagnosticCode.SANDBOX_LIMIT or not str(d.get("message", "")).startswith(
        _RAN_LONGER
    ):
        return d
    names = ", ".join(f"'{safe_name(s)}'" for s in servers)
    return {
        **d,
        "message": clip(
            f"{d['message']} while a call waited for server {names} to connect",
            MAX_DIAGNOSTIC_CHARS,
        ),
        "hint": _CONNECT_AGAIN,
    }


def worker_limit(timeout_ms: int, max_workers: int) -> Diagnostic:
    """No sandbox worker became free before the run's deadline: the host's cap on scripts
    running at once (not this script) stopped it."""
    return sandbox_limit(
        "timeoutMs",
        timeout_ms,
        f"the script never started: this host runs at most {max_workers} scripts at once and none "
        f"finished within the run's timeoutMs",
        hint="retry shortly, or raise limits.timeoutMs to wait longer; the host's operator can raise "
        "[sandbox] max_workers in codemode.toml (serve --max-workers)",
    )


def memory_limit(max_bytes: int) -> Diagnostic:
    return sandbox_limit(
        "maxMemoryBytes", max_bytes, "the script ran out of memory and was stopped"
    )


def result_not_serializable(reason: str) -> Diagnostic:
    return diagnostic(
        DiagnosticCode.RESULT_NOT_SERIALIZABLE,
        f"globalThis.__codemode_result__ is not JSON-serialisable ({reason}); result is null",
        hint="assign plain JSON data (objects, arrays, strings, numbers, booleans, null) to "
        "globalThis.__codemode_result__",
    )


def result_too_large(size: int, max_bytes: int) -> Diagnostic:
    """The result's JSON is over the host's fixed MAX_RESULT_BYTES cap: result null (§7.4)."""
    return sandbox_limit(
        "resultBytes",
        max_bytes,
        f"globalThis.__codemode_result__ is {size} bytes of JSON, more than the host returns; result is null",
        hint="return a summary (counts, top-N, ids) instead of the whole data",
    )


def unsettled_promise() -> Diagnostic:
    return diagnostic(
        DiagnosticCode.UNSETTLED_PROMISE,
        "the script awaited a promise that can never settle (no tool call or timer was pending)",
        hint="make sure every awaited promise is resolved or rejected",
    )


def sandbox_error(message: str) -> Diagnostic:
    return diagnostic(
        DiagnosticCode.SANDBOX_ERROR,
        message,
        hint="run the script again; if it keeps failing, report it to the host's maintainers",
    )
