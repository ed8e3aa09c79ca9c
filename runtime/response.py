"""The §3.3 response of one run: logs, result and diagnostics (the bridge adds toolTrace).

Used on both sides of the pipe: the worker turns what happened inside QuickJS into log
entries and diagnostics, and the host side adds the diagnostics only it can know (the
watchdog fired, a tool-call limit was hit, the worker died, a server is unavailable). Every
diagnostic is made by `diagnostic` and every response by `build_response` (`not_started` for
a run that never started), here. Everything that leaves here is plain JSON that can be encoded
as UTF-8: lone surrogates (legal in JS strings) become U+FFFD.

Log messages are produced in JS (runtime/js/prelude.js): `String(v)` for primitives, stable
JSON for objects: keys sorted by UTF-16 code units, compact separators, JSON.stringify's rules
for toJSON/undefined/functions, `"[Unserializable Object]"` for cycles, BigInt or nesting
deeper than MAX_LOG_DEPTH. Errors are shown as `{"message", "name", ...own fields}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import payload
from codemode_gen.display import safe_text
from codemode_gen.generator.manifest import MODULE_PREFIX
from codemode_gen.jsonio import json_text_depth_exceeds
from codemode_gen.runtime.limits import (
    LOG_ENTRY_OVERHEAD_BYTES,
    MAX_DIAGNOSTIC_CHARS,
    MAX_INPUT_BYTES,
    MAX_JSON_DEPTH,
    MAX_NAME_CHARS,
    MAX_RESULT_BYTES,
    MIN_LOG_ENTRIES,
)

#: Name of the agent's script inside the sandbox; stack frames and paths point into it.
AGENT_MODULE = "agent.js"
LOG_LEVELS = ("debug", "log", "warn", "error")
#: Nesting depth at which a logged object is given up as unserialisable (deep recursion would
#: otherwise hit the JS stack limit inside console.log).
MAX_LOG_DEPTH = 200
#: Stack frames kept in an UNCAUGHT_EXCEPTION message; deep recursion would otherwise put
#: thousands of frames into the agent's context.
MAX_STACK_FRAMES = 20
#: Characters of a stack examined for frames. A script can throw anything with a `stack` string
#: of its choosing; reading megabytes of it made an immediate throw outlast the deadline.
MAX_STACK_CHARS = 64 * 1024
#: Longest stack line parsed as a frame; real frames are short, longer lines are skipped.
MAX_FRAME_CHARS = 1000

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

_MODULE_NOT_FOUND = re.compile(r"^(?:could not load module filename|module not found)[:]? '?(?P<name>[^']*)'?$")


def utf8_safe(text: str) -> str:
    """Replace lone surrogates (which JS strings may hold) with U+FFFD; keep valid pairs."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8_safe_json(value: Any) -> Any:
    """`utf8_safe` applied to every string (keys too) inside a JSON value.

    Iterative (a result may be nested as deep as the engine allows) and, in the usual case of
    no lone surrogate anywhere, a C-speed encode (in bounded pieces: `payload.dumps`) that
    returns `value` itself.
    """
    if isinstance(value, str):
        return utf8_safe(value)
    if not isinstance(value, list | dict):
        return value
    try:
        payload.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError):
        pass
    return copy_json(value, text=utf8_safe)


def copy_json(
    value: Any,
    *,
    text: Callable[[str], str] | None = None,
    order: Callable[[dict[Any, Any]], Iterable[Any]] | None = None,
) -> Any:
    """A copy of a JSON value, made without recursion (any depth is safe): `text` maps every
    string, object keys included; `order` gives each object's keys in the order the copy
    lists them (default: as they are)."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        src, dst, key = stack.pop()
        if isinstance(src, str):
            dst[key] = text(src) if text is not None else src
        elif isinstance(src, list):
            new_list: list[Any] = [None] * len(src)
            dst[key] = new_list
            stack.extend((item, new_list, i) for i, item in enumerate(src))
        elif isinstance(src, dict):
            new_dict: dict[Any, Any] = {}
            dst[key] = new_dict
            for k in order(src) if order is not None else src:
                new_key = text(k) if text is not None and isinstance(k, str) else k
                new_dict[new_key] = None
                stack.append((src[k], new_dict, new_key))
        else:
            dst[key] = src
    return holder[0]


def clip(text: str, max_chars: int) -> str:
    """`text` made UTF-8-safe and cut to `max_chars` characters, saying how much was cut."""
    if len(text) > max_chars:
        text = text[:max_chars] + f"… [{len(text) - max_chars} more characters]"
    return utf8_safe(text)


def safe_name(value: Any, max_chars: int = MAX_NAME_CHARS) -> str:
    """A script-chosen name (serverId, toolName) as it may appear in toolTrace and messages:
    a string, at most `max_chars` characters, no lone surrogates, no control or bidi
    characters (U+FFFD instead), so it can neither break UTF-8 output nor a terminal; nor line
    separators, zero-width, odd spaces or other characters that hide or fake text
    (codemode_gen/display.py)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > max_chars:
        text = text[:max_chars] + "…"
    return safe_text(utf8_safe(text))


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests containers more than `limit` deep (`[]` is 1).

    Level by level, without recursion, so any depth is safe to measure."""
    level = [value] if isinstance(value, list | dict) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend([c for c in children if isinstance(c, list | dict)])
        level = below
    return False


def _utf8_size(text: str, cap: int) -> int:
    """UTF-8 bytes of `text`, exact whenever it could be over `cap` (else a lower bound)."""
    if len(text) * 4 <= cap:  # at most 4 bytes a character: cannot be over
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


# How @codemode/host (runtime/js/host.js) writes every request: these keys, in this order.
_CALL_HEAD = '{"op":"call","serverId":'
_CALL_TOOL = ',"toolName":'
# Bounds the names kept in a refused request (no real server id or tool name comes close).
_MAX_FORWARDED_NAME_CHARS = 4096
_decoder = json.JSONDecoder()


def screen_call_request(text: str) -> str:
    """The call request the worker forwards to the host: `text` itself, or, when its input is
    over MAX_INPUT_BYTES or nested deeper than MAX_JSON_DEPTH, a request without the input that
    says why (`inputRejected`), which the bridge answers with a SchemaValidationError.

    The host never has to parse (recursively, on its event loop) what it would refuse anyway.
    """
    size = _utf8_size(text, MAX_INPUT_BYTES)
    if size > MAX_INPUT_BYTES:
        why: dict[str, Any] = {"reason": "size", "bytes": size}
    elif json_text_depth_exceeds(text, MAX_JSON_DEPTH + 1):  # the request object is one level
        why = {"reason": "depth"}
    else:
        return text
    server_id = tool_name = ""
    if text.startswith(_CALL_HEAD):
        try:
            server_id, end = _decoder.raw_decode(text, len(_CALL_HEAD))
            if text.startswith(_CALL_TOOL, end):
                tool_name = _decoder.raw_decode(text, end + len(_CALL_TOOL))[0]
        except ValueError:
            pass
    request = {
        "op": "call",
        "serverId": str(server_id)[:_MAX_FORWARDED_NAME_CHARS],
        "toolName": str(tool_name)[:_MAX_FORWARDED_NAME_CHARS],
        "inputRejected": why,
    }
    return json.dumps(request, ensure_ascii=True, separators=(",", ":"))


def result_from_text(text: Any) -> tuple[Any, list[dict[str, Any]]]:
    """(result, diagnostics) from the JSON text of `globalThis.__codemode_result__`: null with a
    diagnostic when it is over MAX_RESULT_BYTES or nested deeper than MAX_JSON_DEPTH (checked
    before parsing: a recursive parser must never see such text)."""
    if not isinstance(text, str):
        return None, []
    size = _utf8_size(text, MAX_RESULT_BYTES)
    if size > MAX_RESULT_BYTES:
        return None, [result_too_large(size, MAX_RESULT_BYTES)]
    if json_text_depth_exceeds(text, MAX_JSON_DEPTH):
        return None, [result_not_serializable(f"objects and arrays nested deeper than {MAX_JSON_DEPTH} levels")]
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None, [result_not_serializable("not valid JSON")]
    if "\\ud" in text or "\\uD" in text:  # JSON.stringify escapes lone surrogates only
        value = utf8_safe_json(value)
    return value, []


def diagnostic(
    code: str,
    message: str,
    *,
    severity: str = "error",
    hint: str | None = None,
    path: str | None = None,
    error_class: str | None = None,
) -> dict[str, str]:
    """One §3.3.3 diagnostic; optional fields are omitted rather than null.

    The texts can carry server text (a connect failure) or the script's (an uncaught error's
    message), so each is made UTF-8-safe and cut to MAX_DIAGNOSTIC_CHARS."""
    d = {"severity": severity, "code": code, "message": clip(message, MAX_DIAGNOSTIC_CHARS)}
    if hint:
        d["hint"] = clip(hint, MAX_DIAGNOSTIC_CHARS)
    if path:
        d["path"] = clip(path, MAX_DIAGNOSTIC_CHARS)
    if error_class:
        d["errorClass"] = error_class
    return d


# ---- logs -------------------------------------------------------------------------------------


def max_log_entries(max_bytes: int) -> int:
    """Entries a run may log: their fixed overhead (LOG_ENTRY_OVERHEAD_BYTES each) is bounded
    by maxLogBytes too, with at least MIN_LOG_ENTRIES for tiny limits."""
    return max(MIN_LOG_ENTRIES, max_bytes // LOG_ENTRY_OVERHEAD_BYTES)


@dataclass
class LogCollector:
    """Log entries up to `max_bytes` of UTF-8 message text (§3.3.1, §9), and at most
    `max_log_entries(max_bytes)` entries (empty messages still cost response bytes).

    The entry that crosses the limit is cut at a character boundary; everything after it is
    dropped and `finish()` appends the `warn` entry naming the limit.
    """

    max_bytes: int
    entries: list[dict[str, Any]] = field(default_factory=list)
    used: int = 0
    truncated: bool = False
    max_entries: int = -1

    def __post_init__(self) -> None:
        if self.max_entries < 0:
            self.max_entries = max_log_entries(self.max_bytes)

    def add(self, level: str, message: str, time_ms: int) -> dict[str, Any] | None:
        """Record one console call; returns the entry kept (None when dropped)."""
        if self.truncated:
            return None
        if len(self.entries) >= self.max_entries:
            self.truncated = True
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
        "message": f"logs truncated: maxLogBytes limit of {max_bytes} bytes reached (at most "
        f"{max_log_entries(max_bytes)} entries: each costs {LOG_ENTRY_OVERHEAD_BYTES} bytes besides "
        "its message); later console output was dropped",
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


def _frames(stack: str) -> Iterable[tuple[str | None, str, str, str, str | None]]:
    """(function, location, file, line, column) of each frame line of a stack, in order.

    A frame is `at fn (file:line[:col])` or `at file:line[:col]`. Parsed with string operations
    (linear: the stack is script-controlled text) and only within MAX_STACK_CHARS, lines up to
    MAX_FRAME_CHARS."""
    for raw in stack[:MAX_STACK_CHARS].splitlines():
        if len(raw) > MAX_FRAME_CHARS:
            continue
        line = raw.strip()
        if not line.startswith("at "):
            continue
        body = line[3:]
        fn: str | None = None
        loc = body
        if body.endswith(")"):
            opening = body.find(" (")
            if opening >= 0:
                fn, loc = body[:opening], body[opening + 2 : -1]
        where = _location(loc)
        if where is not None:
            yield (fn, loc, *where)


def _location(loc: str) -> tuple[str, str, str | None] | None:
    """(file, line, column) of `file:line[:col]` (the file as short as the numbers allow)."""
    parts = loc.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdecimal() and parts[2].isdecimal():
        return parts[0], parts[1], parts[2]
    parts = loc.rsplit(":", 1)
    if len(parts) == 2 and parts[1].isdecimal():
        return parts[0], parts[1], None
    return None


def map_stack(stack: str, modules: Iterable[str]) -> list[str]:
    """The frames of a QuickJS stack that point into the agent script or a @codemode module.

    Frames of the prelude (an internal script) and anything else unknown are dropped, so no
    host-side name or path leaks into a diagnostic.
    """
    # @codemode/errors frames are the error constructors: noise for the reader.
    known = (set(modules) | {AGENT_MODULE}) - {"@codemode/errors"}
    frames: list[str] = []
    for fn, loc, file, _line, _col in _frames(stack):
        if file not in known:
            continue
        frames.append(f"    at {fn} ({loc})" if fn is not None else f"    at {loc}")
        if len(frames) >= MAX_STACK_FRAMES:
            break
    return frames


def agent_location(stack: str) -> str | None:
    """`line:column` of the innermost agent-script frame of a stack, if any."""
    for _fn, _loc, file, line, col in _frames(stack):
        if file == AGENT_MODULE:
            return f"{line}:{col}" if col else line
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
    servers = sorted(m for m in modules if m.startswith(MODULE_PREFIX))
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
    # The text is the script's: cut it before the frames are added, so they stay visible.
    text = clip(text, MAX_DIAGNOSTIC_CHARS // 2)
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


def worker_limit(timeout_ms: int, max_workers: int) -> dict[str, str]:
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


def memory_limit(max_bytes: int) -> dict[str, str]:
    return sandbox_limit("maxMemoryBytes", max_bytes, "the script ran out of memory and was stopped")


def result_not_serializable(reason: str) -> dict[str, str]:
    return diagnostic(
        RESULT_NOT_SERIALIZABLE,
        f"globalThis.__codemode_result__ is not JSON-serialisable ({reason}); result is null",
        hint="assign plain JSON data (objects, arrays, strings, numbers, booleans, null) to "
        "globalThis.__codemode_result__",
    )


def result_too_large(size: int, max_bytes: int) -> dict[str, str]:
    """The result's JSON is over the host's fixed MAX_RESULT_BYTES cap: result null (§7.4)."""
    return sandbox_limit(
        "resultBytes",
        max_bytes,
        f"globalThis.__codemode_result__ is {size} bytes of JSON, more than the host returns; result is null",
        hint="return a summary (counts, top-N, ids) instead of the whole data",
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
    logs: list[dict[str, Any]],
    result: Any,
    diagnostics: list[dict[str, Any]],
    tool_trace: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`{logs, result, diagnostics}` with result forced to null after a fatal error (§3.3.4)
    and UTF-8-safe, plus `toolTrace` when given (the host's part: the sandbox has none)."""
    if any(d.get("code") in FATAL_CODES and d.get("severity") == "error" for d in diagnostics):
        result = None
    response = {"logs": logs, "result": utf8_safe_json(result), "diagnostics": diagnostics}
    if tool_trace is not None:
        response["toolTrace"] = tool_trace
    return response


async def build_response_async(
    logs: list[dict[str, Any]],
    result: Any,
    diagnostics: list[dict[str, Any]],
    tool_trace: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`build_response` off the event loop when the result is large (its UTF-8 check encodes
    all of it)."""
    if payload.is_large(result):
        return await payload.offload(build_response, logs, result, diagnostics, tool_trace)
    return build_response(logs, result, diagnostics, tool_trace)


def not_started(*diagnostics: dict[str, Any]) -> dict[str, Any]:
    """The response of a run that never started (a bad request or limits, a configuration
    error, a script that does not parse, a host failure): no logs, result null, no calls;
    never a failed tool call (§3.3.4)."""
    return build_response([], None, list(diagnostics), [])
