"""The §3.3 response of one run: logs, result and diagnostics (the bridge adds toolTrace).

Used on both sides of the pipe: the worker turns what happened inside QuickJS into log
entries and diagnostics, and the host side adds the diagnostics only it can know (the
watchdog fired, a tool-call limit was hit, the worker died). Everything that leaves here is
plain JSON that can be encoded as UTF-8: lone surrogates (legal in JS strings) become U+FFFD.

Log messages are produced in JS (runtime/js/prelude.js): `String(v)` for primitives, stable
JSON for objects: keys sorted by UTF-16 code units, compact separators, JSON.stringify's rules
for toJSON/undefined/functions, `"[Unserializable Object]"` for cycles, BigInt or nesting
deeper than MAX_LOG_DEPTH. Errors are shown as `{"message", "name", ...own fields}`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Name of the agent's script inside the sandbox; stack frames and paths point into it.
AGENT_MODULE = "agent.js"
LOG_LEVELS = ("debug", "log", "warn", "error")
#: Nesting depth at which a logged object is given up as unserialisable (deep recursion would
#: otherwise hit the JS stack limit inside console.log).
MAX_LOG_DEPTH = 200
#: Stack frames kept in an UNCAUGHT_EXCEPTION message; deep recursion would otherwise put
#: thousands of frames into the agent's context.
MAX_STACK_FRAMES = 20

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

#: Codes after which `result` MUST be null (§3.3.4).
FATAL_CODES = frozenset(
    {SYNTAX_ERROR, UNCAUGHT_EXCEPTION, IMPORT_FAILURE, SANDBOX_LIMIT, UNSETTLED_PROMISE, SANDBOX_ERROR}
)

_FRAME = re.compile(r"^\s*at (?P<fn>.*?) \((?P<loc>.*)\)\s*$|^\s*at (?P<bare>.*?)\s*$")
_LOC = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::(?P<col>\d+))?$")
_MODULE_NOT_FOUND = re.compile(r"^(?:could not load module filename|module not found)[:]? '?(?P<name>[^']*)'?$")


def utf8_safe(text: str) -> str:
    """Replace lone surrogates (which JS strings may hold) with U+FFFD; keep valid pairs."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8_safe_json(value: Any) -> Any:
    """`utf8_safe` applied to every string (keys too) inside a JSON value."""
    if isinstance(value, str):
        return utf8_safe(value)
    if isinstance(value, list):
        return [utf8_safe_json(v) for v in value]
    if isinstance(value, dict):
        return {utf8_safe(k): utf8_safe_json(v) for k, v in value.items()}
    return value


def diagnostic(
    code: str,
    message: str,
    *,
    severity: str = "error",
    hint: str | None = None,
    path: str | None = None,
    error_class: str | None = None,
) -> dict[str, str]:
    """One §3.3.3 diagnostic; optional fields are omitted rather than null."""
    d = {"severity": severity, "code": code, "message": utf8_safe(message)}
    if hint:
        d["hint"] = utf8_safe(hint)
    if path:
        d["path"] = utf8_safe(path)
    if error_class:
        d["errorClass"] = error_class
    return d


# ---- logs -------------------------------------------------------------------------------------


@dataclass
class LogCollector:
    """Log entries up to `max_bytes` of UTF-8 message text (§3.3.1, §9).

    The entry that crosses the limit is cut at a character boundary; everything after it is
    dropped and `finish()` appends the `warn` entry naming the limit.
    """

    max_bytes: int
    entries: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0
    truncated: bool = False

    def add(self, level: str, message: str, time_ms: int) -> dict[str, Any] | None:
        """Record one console call; returns the entry kept (None when dropped)."""
        if self.truncated:
            return None
        if level not in LOG_LEVELS:
            level = "log"
        message = utf8_safe(message)
        data = message.encode("utf-8")
        room = self.max_bytes - self.used
        if len(data) > room:
            self.truncated = True
            if room <= 0:
                return None
            message = data[:room].decode("utf-8", "ignore")
            data = message.encode("utf-8")
        self.used += len(data)
        entry = {"level": level, "message": message, "timeMs": int(time_ms)}
        self.entries.append(entry)
        return entry


def truncation_entry(max_bytes: int, time_ms: int) -> dict[str, Any]:
    return {
        "level": "warn",
        "message": f"logs truncated: maxLogBytes limit of {max_bytes} bytes reached; "
        "later console output was dropped",
        "timeMs": int(time_ms),
    }


def finish_logs(
    entries: Sequence[Mapping[str, Any]], truncated: bool, max_bytes: int, time_ms: int
) -> list[dict[str, Any]]:
    """The final `logs` array: entries plus the truncation warning when anything was dropped."""
    logs = [dict(e) for e in entries]
    if truncated:
        last = logs[-1]["timeMs"] if logs else 0
        logs.append(truncation_entry(max_bytes, max(int(time_ms), int(last))))
    return logs


# ---- stacks and locations ---------------------------------------------------------------------


def map_stack(stack: str, modules: Iterable[str]) -> list[str]:
    """The frames of a QuickJS stack that point into the agent script or a @codemode module.

    Frames of the prelude (an internal script) and anything else unknown are dropped, so no
    host-side name or path leaks into a diagnostic.
    """
    # @codemode/errors frames are the error constructors: noise for the reader.
    known = (set(modules) | {AGENT_MODULE}) - {"@codemode/errors"}
    frames: list[str] = []
    for line in stack.splitlines():
        m = _FRAME.match(line)
        if not m:
            continue
        fn = m.group("fn")
        loc = m.group("loc") if fn is not None else m.group("bare")
        lm = _LOC.match(loc or "")
        if lm is None or lm.group("file") not in known:
            continue
        frames.append(f"    at {fn} ({loc})" if fn is not None else f"    at {loc}")
    return frames[:MAX_STACK_FRAMES]


def agent_location(stack: str) -> str | None:
    """`line:column` of the innermost agent-script frame of a stack, if any."""
    for line in stack.splitlines():
        m = _FRAME.match(line)
        if not m:
            continue
        loc = m.group("loc") if m.group("fn") is not None else m.group("bare")
        lm = _LOC.match(loc or "")
        if lm and lm.group("file") == AGENT_MODULE:
            col = lm.group("col")
            return f"{lm.group('line')}:{col}" if col else lm.group("line")
    return None


def find_specifier(code: str, name: str) -> str | None:
    """`line:column` of the first quoted occurrence of a module specifier in the agent code."""
    for quote in ('"', "'", "`"):
        idx = code.find(f"{quote}{name}{quote}")
        if idx >= 0:
            line = code.count("\n", 0, idx) + 1
            col = idx - (code.rfind("\n", 0, idx) + 1) + 1
            return f"{line}:{col}"
    return None


# ---- diagnostics of the fatal outcomes ------------------------------------------------------


def syntax_error(message: str, stack: str) -> dict[str, str]:
    """From `check_syntax`: the stack holds `at check:LINE:COL`."""
    m = re.search(r":(\d+):(\d+)", stack or "")
    path = f"{m.group(1)}:{m.group(2)}" if m else None
    where = f" at {AGENT_MODULE}:{path}" if path else ""
    return diagnostic(
        SYNTAX_ERROR,
        f"SyntaxError: {message}{where}",
        hint="fix the syntax at that line and column; the script runs as an ES module "
        "(import/export and top-level await are allowed)",
        path=path,
    )


def module_not_found(message: str) -> str | None:
    """The missing specifier when `message` is the engine's module-resolution failure."""
    m = _MODULE_NOT_FOUND.match(message.strip())
    return m.group("name") if m else None


def import_failure(name: str, code: str, modules: Iterable[str]) -> dict[str, str]:
    servers = sorted(m for m in modules if m.startswith("@codemode/servers/"))
    others = sorted(
        m for m in modules if m.startswith("@codemode/") and m not in servers and m != "@codemode/host"
    )
    available = ", ".join(servers) if servers else "none"
    return diagnostic(
        IMPORT_FAILURE,
        f"cannot import {name!r}: no such module in this sandbox",
        hint=f"import one of the available server modules ({available}) or "
        f"{', '.join(others) or '@codemode/errors'}; nothing else (files, URLs, npm "
        "packages, node:*) can be imported",
        path=find_specifier(code, name),
    )


def uncaught_exception(error: Mapping[str, Any], modules: Iterable[str]) -> dict[str, str]:
    """From the prelude's error report ({name, message, stack, text, errorClass, hint})."""
    name = error.get("name") if error.get("isError") else None
    text = (
        f"{name}: {error.get('message') or ''}".rstrip(": ").rstrip()
        if name
        else str(error.get("text") or "undefined")
    )
    stack = str(error.get("stack") or "")
    frames = map_stack(stack, modules)
    message = "Uncaught " + text + ("\n" + "\n".join(frames) if frames else "")
    error_class = error.get("errorClass")
    hint = error.get("hint") if error_class else None
    if not hint:
        hint = "handle this error with try/catch or fix its cause at the reported line"
    return diagnostic(
        UNCAUGHT_EXCEPTION,
        message,
        hint=str(hint),
        path=agent_location(stack),
        error_class=str(error_class) if error_class else None,
    )


def sandbox_limit(limit: str, value: Any, message: str, hint: str | None = None) -> dict[str, str]:
    hints = {
        "timeoutMs": "do less per run (fewer or cheaper steps, no busy loops) or raise limits.timeoutMs",
        "maxMemoryBytes": "keep less data in memory (filter and aggregate early) or raise limits.maxMemoryBytes",
        "maxToolCalls": "make fewer tool calls per run (batch, filter first) or raise limits.maxToolCalls",
        "maxConcurrentCalls": "await tool calls in smaller batches",
    }
    return diagnostic(
        SANDBOX_LIMIT,
        f"{message} (limit {limit} = {value})" if value is not None else message,
        hint=hint or hints.get(limit, "do less work per run"),
        error_class="SandboxLimitError",
    )


def timeout_limit(timeout_ms: int) -> dict[str, str]:
    return sandbox_limit("timeoutMs", timeout_ms, f"the script ran longer than {timeout_ms} ms and was stopped")


def memory_limit(max_bytes: int) -> dict[str, str]:
    return sandbox_limit("maxMemoryBytes", max_bytes, "the script ran out of memory and was stopped")


def result_not_serializable(reason: str) -> dict[str, str]:
    return diagnostic(
        RESULT_NOT_SERIALIZABLE,
        f"globalThis.__codemode_result__ is not JSON-serialisable ({reason}); result is null",
        hint="assign plain JSON data (objects, arrays, strings, numbers, booleans, null) to "
        "globalThis.__codemode_result__",
    )


def unsettled_promise() -> dict[str, str]:
    return diagnostic(
        UNSETTLED_PROMISE,
        "the script awaited a promise that can never settle (no tool call or timer was pending)",
        hint="make sure every awaited promise is resolved or rejected",
    )


def sandbox_error(message: str) -> dict[str, str]:
    return diagnostic(
        SANDBOX_ERROR,
        message,
        hint="run the script again; if it keeps failing, report it to the host's maintainers",
    )


def build_response(
    logs: list[dict[str, Any]], result: Any, diagnostics: list[dict[str, Any]]
) -> dict[str, Any]:
    """`{logs, result, diagnostics}` with result forced to null after a fatal error (§3.3.4)."""
    if any(d.get("code") in FATAL_CODES and d.get("severity") == "error" for d in diagnostics):
        result = None
    return {"logs": logs, "result": utf8_safe_json(result), "diagnostics": diagnostics}
