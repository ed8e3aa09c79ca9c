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

import difflib
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
# QuickJS's link error for `import { x } from "m"` when m has no export x.
_EXPORT_NOT_FOUND = re.compile(r"^Could not find export '(?P<name>[^']*)' in module '(?P<module>[^']*)'$")
# The names a module exports, in the forms the runtime's own modules use (generated server
# modules, @codemode/discovery, @codemode/errors): declarations and `export { a, b as "c" }`.
_EXPORT_DECL = re.compile(r"^export\s+(?:async\s+)?(?:function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)", re.M)
_EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}", re.M)
#: Names compared when looking for the one a script meant (a misspelt export, module, field):
#: bounds difflib's work, which is quadratic in a name's length and linear in the candidates.
MAX_NEAR_MISS_CANDIDATES = 2000
#: Names listed in a hint ("its exports: ...", "its fields: ..."), so a server with hundreds of
#: tools does not fill the agent's context.
MAX_LISTED_NAMES = 16
#: JavaScript's own error classes: thrown by the engine for a mistake in the script's code, which
#: the fix is to change, never to catch.
PROGRAMMING_ERRORS = frozenset({"TypeError", "ReferenceError", "RangeError", "SyntaxError", "URIError"})
#: Code of the warning for a tool call that failed while nothing awaited it.
UNAWAITED_CALL_FAILED = "UNAWAITED_CALL_FAILED"
#: Unawaited failed calls reported one by one per run; more are summed up in one line.
MAX_UNAWAITED_REPORTED = 5


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


def _name_key(name: str) -> str:
    """What two spellings of one name share: `listNotes`, `list-notes`, `List_Notes`."""
    return re.sub(r"[\W_]+", "", name).lower()


def closest_names(name: str, candidates: Iterable[str], n: int = 1) -> list[str]:
    """The candidates a script most likely meant by `name` (best first; empty when none is
    close): the same name but for case and separators first, then difflib's close matches."""
    if len(name) > MAX_NAME_CHARS:  # difflib is quadratic in the name's length
        return []
    pool = [c for _, c in zip(range(MAX_NEAR_MISS_CANDIDATES), candidates, strict=False) if c != name]
    key = _name_key(name)
    found = [c for c in pool if key and _name_key(c) == key]
    by_key: dict[str, str] = {}
    for c in pool:
        by_key.setdefault(_name_key(c), c)
    for close in difflib.get_close_matches(key, list(by_key), n=n, cutoff=0.6) if key else []:
        if by_key[close] not in found:
            found.append(by_key[close])
    for close in difflib.get_close_matches(name, pool, n=n, cutoff=0.6):
        if close not in found:
            found.append(close)
    return found[:n]


def listed(names: Iterable[str]) -> str:
    """`a, b, c` of at most MAX_LISTED_NAMES names, saying how many more there are."""
    items = list(names)
    shown = ", ".join(items[:MAX_LISTED_NAMES])
    return shown + (f" and {len(items) - MAX_LISTED_NAMES} more" if len(items) > MAX_LISTED_NAMES else "")


def module_exports(source: str) -> list[str]:
    """The export names of one of the runtime's own modules (see _EXPORT_DECL), sorted; names
    starting with `__` (`__meta__`) are internal and left out."""
    names = set(_EXPORT_DECL.findall(source))
    for group in _EXPORT_LIST.findall(source):
        for part in group.split(","):
            exported = part.split(" as ")[-1].strip().strip("'\"")
            if exported:
                names.add(exported)
    return sorted(n for n in names if not n.startswith("__"))


def _closest_module(name: str, modules: Iterable[str]) -> str | None:
    """The module a misspelt specifier meant: compared whole, and by its last segment (so
    `notes`, `@codemode/notes` and `@codemode/servers/note` all find `@codemode/servers/notes`)."""
    known = [m for m in modules if m != "@codemode/host"]
    close = closest_names(name, known)
    if close:
        return close[0]
    tails = {m.rsplit("/", 1)[-1]: m for m in known}
    tail = name.rsplit("/", 1)[-1]
    if tail in tails:
        return tails[tail]
    close = closest_names(tail, list(tails))
    return tails[close[0]] if close else None


def import_failure(name: str, code: str, modules: Iterable[str]) -> dict[str, str]:
    modules = list(modules)
    servers = sorted(m for m in modules if m.startswith(MODULE_PREFIX))
    others = sorted(
        m for m in modules if m.startswith("@codemode/") and m not in servers and m != "@codemode/host"
    )
    available = ", ".join(servers) if servers else "none"
    meant = _closest_module(name, servers + others)
    hint = (
        f"did you mean '{meant}'? " if meant else ""
    ) + (
        f"import one of the available server modules ({available}) or "
        f"{', '.join(others) or '@codemode/errors'}; nothing else (files, URLs, npm "
        "packages, node:*) can be imported"
    )
    return diagnostic(
        IMPORT_FAILURE,
        f"cannot import {name!r}: no such module in this sandbox"
        + (f" (did you mean '{meant}'?)" if meant else ""),
        hint=hint,
        path=find_specifier(code, name),
    )


def export_not_found(message: str) -> tuple[str, str] | None:
    """(export, module) when `message` is the engine's link error for a missing export."""
    m = _EXPORT_NOT_FOUND.match(message.strip())
    return (m.group("name"), m.group("module")) if m else None


def find_import_name(code: str, name: str, module: str) -> str | None:
    """`line:column` of `name` in the import statement of `module` (else of the specifier)."""
    for quote in ('"', "'"):
        end = code.find(f"{quote}{module}{quote}")
        if end < 0:
            continue
        start = code.rfind("import", 0, end)
        if start >= 0:
            m = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])").search(code, start, end)
            if m is not None:
                line = code.count("\n", 0, m.start()) + 1
                col = m.start() - (code.rfind("\n", 0, m.start()) + 1) + 1
                return f"{line}:{col}"
    return find_specifier(code, module)


def export_failure(name: str, module: str, code: str, modules: Mapping[str, str]) -> dict[str, str]:
    """IMPORT_FAILURE for `import { name } from module` when the module has no such export:
    the closest export names, and how to import the module when it was a default import."""
    source = modules.get(module)
    exports = module_exports(source) if isinstance(source, str) else []
    shown, where = safe_name(name), safe_name(module)
    if name == "default":
        alias = re.sub(r"\W", "_", module.rsplit("/", 1)[-1]) or "mod"
        return diagnostic(
            IMPORT_FAILURE,
            f"'{where}' has no default export: its functions are named exports",
            hint=f"import the module as a namespace: import * as {alias} from '{where}'",
            path=find_import_name(code, "import", module),
        )
    close = closest_names(name, exports)
    meant = f"did you mean '{close[0]}'? " if close else ""
    fix = f"import {{ {close[0]} }} from '{where}'" if close else f"import one of them: {listed(exports)}"
    return diagnostic(
        IMPORT_FAILURE,
        f"cannot import '{shown}' from '{where}': the module has no such export"
        + (f" (did you mean '{close[0]}'?)" if close else "")
        + (f"; its exports: {listed(exports)}" if exports else ""),
        hint=f"{meant}{fix}" if close else fix,
        path=find_import_name(code, name, module),
    )


def unawaited_calls(report: Any, modules: Iterable[str]) -> list[dict[str, str]]:
    """UNAWAITED_CALL_FAILED warnings from the prelude's report of failed tool calls that the
    script never awaited (`{calls: [{serverId, toolName, name, message, stack}], untracked}`):
    the run went on without knowing. One each, at most MAX_UNAWAITED_REPORTED, then one line."""
    if not isinstance(report, Mapping):
        return []
    raw = report.get("calls")
    calls = [c for c in raw[:MAX_UNAWAITED_REPORTED * 2] if isinstance(c, Mapping)] if isinstance(raw, list) else []
    untracked = report.get("untracked")
    extra = (untracked if isinstance(untracked, int) else 0) + max(0, len(calls) - MAX_UNAWAITED_REPORTED)
    out: list[dict[str, str]] = []
    for call in calls[:MAX_UNAWAITED_REPORTED]:
        where = f"{safe_name(call.get('serverId'))}.{safe_name(call.get('toolName'))}"
        error = f"{safe_name(call.get('name') or 'Error')}: {clip(str(call.get('message') or ''), MAX_DIAGNOSTIC_CHARS // 2)}"
        stack = str(call.get("stack") or "")
        path = agent_location(stack)
        fn = _export_of_frames(map_stack(stack, modules))
        out.append(diagnostic(
            UNAWAITED_CALL_FAILED,
            f"{where} failed and nothing awaited it, so the script went on without its result: {error}",
            severity="warning",
            hint=f"await the call (`await {fn}(...)`, or `await Promise.all([...])` for several) so its "
            "failure reaches the script" + (f"; the call is at {AGENT_MODULE}:{path}" if path else ""),
            path=path,
        ))
    if extra > 0:
        out.append(diagnostic(
            UNAWAITED_CALL_FAILED,
            f"{extra} more tool call(s) failed while nothing awaited them",
            severity="warning",
            hint="await every tool call (or `await Promise.all([...])`) so failures reach the script",
        ))
    return out


def _export_of_frames(frames: Sequence[str]) -> str:
    """The generated function a call went through (`at list_notes (@codemode/servers/notes:…)`),
    for the hint's example; `callTool` when the script called the host directly."""
    for frame in frames:
        text = frame.strip()
        if text.startswith("at ") and f"({MODULE_PREFIX}" in text:
            return text[3:].split(" ", 1)[0]
    return "callTool"


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
    path = agent_location(stack)
    if not hint:
        at = f" ({AGENT_MODULE}:{path})" if path else ""
        if name in PROGRAMMING_ERRORS:
            # A mistake in the script's code: the fix is to change it, never to catch it.
            hint = f"fix the script's code at the reported line{at}: this {name} comes from the script, not from a tool"
        else:
            hint = f"the script threw this itself{at}: change what made it throw, or the condition it checks"
    return diagnostic(
        UNCAUGHT_EXCEPTION,
        message,
        hint=str(hint),
        path=path,
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


def hit_limit(diagnostics: Iterable[Mapping[str, Any]], limit: str) -> bool:
    """Whether a run ended on `limit` (a SANDBOX_LIMIT error `sandbox_limit` made for it)."""
    mark = f"(limit {limit} = "
    return any(
        d.get("code") == SANDBOX_LIMIT and d.get("severity") == "error" and mark in str(d.get("message", ""))
        for d in diagnostics
    )


_RAN_LONGER = "the script ran longer than"


def timeout_limit(timeout_ms: int) -> dict[str, str]:
    return sandbox_limit("timeoutMs", timeout_ms, f"{_RAN_LONGER} {timeout_ms} ms and was stopped")


def start_limit(timeout_ms: int) -> dict[str, str]:
    """The run's time ran out before the script started (no worker was ready in time)."""
    return sandbox_limit(
        "timeoutMs", timeout_ms,
        f"the script never started: no sandbox was ready within the run's timeoutMs ({timeout_ms} ms)",
        hint="run it again (sandboxes were starting; later runs find one ready), or raise limits.timeoutMs",
    )


def prepare_limit(timeout_ms: int, spent_ms: int) -> dict[str, str]:
    """The run's time ran out while the host connected its servers, before the script started."""
    return sandbox_limit(
        "timeoutMs", timeout_ms,
        f"the script never started: connecting its servers and preparing the run took {spent_ms} ms, "
        f"more than its timeoutMs ({timeout_ms} ms) and the connect wait not counted in it",
        hint=_CONNECT_AGAIN,
    )


_CONNECT_AGAIN = (
    "run it again: the connection goes on in the background and later runs reuse it (a cold start "
    "is not counted in timeoutMs once connected); if it never connects, check the server and its "
    "connect_timeout in codemode.toml"
)


def waiting_for_connect(d: dict[str, Any], servers: Sequence[str]) -> dict[str, Any]:
    """`d` itself, or, when it is the script's timeout, one saying it was spent waiting for
    `servers` to connect (their connections go on after the run)."""
    if d.get("code") != SANDBOX_LIMIT or not str(d.get("message", "")).startswith(_RAN_LONGER):
        return d
    names = ", ".join(f"'{safe_name(s)}'" for s in servers)
    return {
        **d,
        "message": clip(f"{d['message']} while a call waited for server {names} to connect", MAX_DIAGNOSTIC_CHARS),
        "hint": _CONNECT_AGAIN,
    }


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


# ---- the model-facing response: trace and budget ---------------------------------------------

#: Failed or denied calls listed in toolTrace when trace is "errors" (toolSummary counts them
#: all). Bounds the trace of a loop of failing calls in a response made for a model.
MAX_LISTED_FAILURES = 20
#: Tools named in toolSummary.calls; calls of the others are counted under OTHER_TOOLS. Bounds
#: the summary of a script calling ever new (unknown) tool names.
MAX_SUMMARY_TOOLS = 50
OTHER_TOOLS = "(other tools)"
#: Share of maxResponseChars that logs keep when the result needs the rest (what either one
#: leaves unused goes to the other).
LOG_SHARE = 0.25
#: Code of the warning that says the response was cut to maxResponseChars.
RESPONSE_TRUNCATED = "RESPONSE_TRUNCATED"
#: Nesting followed by `cut_json`; deeper values are replaced by a marker. Results never nest
#: deeper than MAX_JSON_DEPTH (result_from_text): this only bounds the recursion.
MAX_CUT_DEPTH = 2 * MAX_JSON_DEPTH
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


@dataclass
class CallCounts:
    """Calls of one run per `serverId.toolName` (at most MAX_SUMMARY_TOOLS names) and how many
    failed or were denied: the `toolSummary` of a response whose toolTrace lists only those.
    Counts every call, also those past MAX_TRACE_ENTRIES."""

    calls: dict[str, int] = field(default_factory=dict)
    failed: int = 0

    def add(self, server_id: str, tool_name: str, ok: bool) -> None:
        name = f"{server_id}.{tool_name}"
        if name not in self.calls and len(self.calls) >= MAX_SUMMARY_TOOLS:
            name = OTHER_TOOLS
        self.calls[name] = self.calls.get(name, 0) + 1
        if not ok:
            self.failed += 1

    def summary(self) -> dict[str, Any] | None:
        """`{"calls": {"notes.get_note": 9}, "failed": 1}`; None when no call was made."""
        if not self.calls:
            return None
        return {"calls": dict(self.calls), "failed": self.failed}


def shape_trace(
    trace: Sequence[Mapping[str, Any]], counts: CallCounts | None, mode: str
) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
    """(toolTrace, toolSummary) of a response for a `limits.trace` mode: "full" every entry
    (no summary); "errors" the failed and denied entries (`ok: false`, at most
    MAX_LISTED_FAILURES) and the summary of all calls (None when none was made); "none" neither.
    Entries keep §3.3.2's shape whatever is listed; in "errors" a failed call's `approval` is
    left out when it says only that the call was sent unasked ("allowed"): it failed for
    another reason, which `error` says."""
    if mode == "none":
        return None, None
    if mode == "errors":
        failed = [
            {k: v for k, v in e.items() if not (k == "approval" and v == "allowed")}
            for e in trace if not e.get("ok")
        ][:MAX_LISTED_FAILURES]
        return failed, counts.summary() if counts is not None else None
    return [dict(e) for e in trace], None


def json_size(value: Any) -> int:
    """Characters of `value` as compact JSON (non-ASCII kept): what a client shows of it."""
    return len(payload.dumps(value, ensure_ascii=False))


def _key_size(key: Any) -> int:
    """Characters of an object key as JSON (json's own coercion of non-string keys)."""
    if isinstance(key, str):
        return len(_encoder.encode(key))
    return len(_encoder.encode({key: 0})) - 4  # {"k":0}


def measure(value: Any, cap: int) -> int:
    """Characters of `value` as compact JSON when that is at most `cap`; else some number over
    `cap`. The walk stops as soon as it is over, so it visits at most about `cap` values
    (each costs at least one character), however large `value` is: cutting a 16 MB result to a
    budget looks at little more than the budget (strings are measured by the C encoder)."""
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) + 2 > cap - total:  # over already (a lower bound): never encode a long one
                return total + len(item) + 2
            total += len(_encoder.encode(item))
        elif isinstance(item, dict):
            total += 2 + max(0, len(item) - 1) + len(item)  # braces, commas, colons
            for key, child in item.items():
                total += len(key) + 2 if isinstance(key, str) and len(key) + 2 > cap - total else _key_size(key)
                if total > cap:
                    return total
                stack.append(child)
        elif isinstance(item, list):
            total += 2 + max(0, len(item) - 1)
            stack.extend(item)
        else:
            total += len(_encoder.encode(item))
        if total > cap:
            return total
    return total


def _fits(marker: str, room: int) -> Any:
    """`marker` if its JSON fits `room`, else null (4 characters): what stands for a value that
    cannot be cut any further."""
    return marker if len(_encoder.encode(marker)) <= room else None


def cut_string(text: str, room: int) -> Any:
    """`text` cut to a prefix ending in `…[+N chars]` so that its JSON takes at most `room`
    characters (the longest such prefix); a marker or null when not even the marker fits."""
    if len(text) + 2 <= room and len(_encoder.encode(text)) <= room:
        return text
    # The marker is sized for the most characters it could name, so the prefix is found by a
    # bisection over a monotone length (the real marker is never longer).
    marker_chars = len(f"…[+{len(text)} chars]")
    low, high = 0, min(len(text), room)
    while low < high:
        mid = (low + high + 1) // 2
        if len(_encoder.encode(text[:mid])) + marker_chars <= room:
            low = mid
        else:
            high = mid - 1
    cut = text[:low] + f"…[+{len(text) - low} chars]"
    if len(_encoder.encode(cut)) <= room:
        return cut
    return _fits(f"…[{len(text)} chars]", room)


#: Room below which a value is dropped (counted in its container's marker) rather than cut:
#: a cut value that small shows nothing but its own marker.
MIN_CUT_ROOM = 32
#: Least room a large value of an object is cut to while other large values are dropped: an
#: object of many large values (records keyed by id) keeps its first ones (whole, or nearly),
#: not stubs of all of them; one of a few large values gets an equal share of the room.
MIN_SHARE_CHARS = 1000


def cut_json(value: Any, room: int, depth: int = 0) -> Any:
    """`value` cut deterministically so that its compact JSON takes at most `room` characters
    (for any `room` of at least 4; a smaller one gets null), and stays valid JSON:

    - a string keeps its longest prefix that fits, ending in `…[+N chars]`;
    - an array keeps its first items that fit whole, then a last element `"…[+N items]"` (an
      array whose first item does not fit keeps that item, cut);
    - an object keeps whole, in key order, the values that are small (at most an equal share of
      the room, or MIN_SHARE_CHARS) while they fit; the large ones share what is left, each cut
      to its share (as many as get MIN_SHARE_CHARS each, the first ones in key order; at least
      the first); the dropped keys are counted in a last key `"…": "[+N keys]"`;
    - a number, boolean or null that does not fit (tiny rooms only) becomes a marker or null.
    It measures what it keeps and little more (`measure`), never the whole of a large value."""
    if measure(value, room) <= room:
        return value
    if depth >= MAX_CUT_DEPTH:
        return _fits("…[nested too deep]", room)
    if isinstance(value, str):
        return cut_string(value, room)
    if isinstance(value, list):
        return _cut_list(value, room, depth)
    if isinstance(value, dict):
        return _cut_dict(value, room, depth)
    return _fits(f"…[{len(_encoder.encode(value))} chars]", room)


def _cut_list(items: list[Any], room: int, depth: int) -> Any:
    # Room for the closing marker element, sized for the most items it could name.
    reserve = len(_encoder.encode(f"…[+{len(items)} items]")) + 1
    avail = room - 2 - reserve
    kept: list[Any] = []
    used = 0
    for index, item in enumerate(items):
        comma = 1 if kept else 0
        cost = measure(item, avail - used - comma) + comma
        if used + cost <= avail:
            kept.append(item)
            used += cost
            continue
        if not kept:  # not even the first item fits whole: it gets the room, cut
            last = index == len(items) - 1
            share = room - 2 if last else avail
            if share >= MIN_CUT_ROOM or last:
                kept.append(cut_json(item, share, depth + 1))
        break
    dropped = len(items) - len(kept)
    if dropped:
        kept.append(f"…[+{dropped} items]")
    if _size_of(kept) <= room:  # always, for rooms the markers fit in
        return kept
    return _fits(f"…[{len(items)} items]", room)


def _marker_key(keys: Iterable[Any]) -> str:
    """The key of an object's "keys were dropped" marker: `…`, or `…2`, `…3`… if it is taken."""
    taken = {k for k in keys if isinstance(k, str)}
    name, n = "…", 1
    while name in taken:
        n += 1
        name = f"…{n}"
    return name


def _cut_dict(obj: dict[Any, Any], room: int, depth: int) -> Any:
    keys = list(obj)
    marker_key = _marker_key(keys)
    reserve = len(_encoder.encode({marker_key: f"[+{len(keys)} keys]"})) - 2 + 1  # its entry and comma
    avail = room - 2 - reserve
    small_cap = max(avail // max(1, len(keys)), MIN_SHARE_CHARS)
    whole: set[int] = set()
    large: list[int] = []
    used = 0
    for index, key in enumerate(keys):
        if used + 5 > avail:  # not even `"":0,` fits any more
            break
        key_cost = _key_size(key) + 2  # colon and comma
        size = measure(obj[key], min(small_cap, avail - used) - key_cost)
        if size + key_cost > small_cap:
            large.append(index)
        elif used + size + key_cost <= avail:
            whole.add(index)
            used += size + key_cost
    # The large values share what is left: as many as get MIN_SHARE_CHARS each (at least the
    # first one), in key order, each cut to an equal share.
    left = avail - used
    count = min(len(large), max(1, left // MIN_SHARE_CHARS))
    cut: dict[int, Any] = {}
    if large and left // count - _key_size(keys[large[0]]) - 2 >= MIN_CUT_ROOM:
        share = left // count
        for index in large[:count]:
            value_room = share - _key_size(keys[index]) - 2
            if value_room >= MIN_CUT_ROOM:
                cut[index] = cut_json(obj[keys[index]], value_room, depth + 1)
    out: dict[Any, Any] = {}
    for index, key in enumerate(keys):
        if index in whole:
            out[key] = obj[key]
        elif index in cut:
            out[key] = cut[index]
    dropped = len(keys) - len(out)
    if dropped:
        out[marker_key] = f"[+{dropped} keys]"
    if _size_of(out) <= room:  # always, for rooms the markers fit in
        return out
    return _fits(f"…[{len(keys)} keys]", room)


def _size_of(value: Any) -> int:
    return len(payload.dumps(value, ensure_ascii=False))


def _log_marker(dropped: int, chars: int, time_ms: int) -> dict[str, Any]:
    return {"level": "warn", "message": f"…[+{dropped} log entries, {chars} chars: cut to maxResponseChars]",
            "timeMs": int(time_ms)}


def cut_logs(logs: list[dict[str, Any]], room: int, total: int | None = None) -> tuple[list[dict[str, Any]], int]:
    """(`logs` within `room` characters of JSON, entries dropped): the first entries that fit
    in half the room, the last ones that fit in the rest, and between them one `warn` entry
    saying how many entries (and characters) were cut; a first entry too large for the room
    keeps its message's longest prefix that fits. The §3.3.1 shape is kept: every element is a
    log entry. Only the entries kept (and one more at each end) are measured; `total`: the
    JSON size of `logs` when the caller has it."""
    total = json_size(logs) if total is None else total
    if total <= room:
        return logs, 0
    last_ms = max((int(e.get("timeMs", 0)) for e in logs), default=0)
    reserve = _size_of(_log_marker(len(logs), total, last_ms)) + 1
    avail = room - 2 - reserve
    head: list[dict[str, Any]] = []
    used = 0  # the kept entries' sizes, a comma each
    for entry in logs:
        size = measure(entry, avail // 2 - used) + 1
        if used + size > avail // 2:
            break
        head.append(entry)
        used += size
    tail_start = len(logs)
    while tail_start > len(head):
        size = measure(logs[tail_start - 1], avail - used) + 1
        if used + size > avail:
            break
        tail_start -= 1
        used += size
    kept_chars = used
    first_cut = len(head)
    if not head and tail_start == len(logs) and logs:  # nothing fits whole: cut the first message
        entry = dict(logs[0])
        message = cut_string(str(entry.get("message", "")), avail - (_size_of({**entry, "message": ""}) - 2))
        if isinstance(message, str):
            entry["message"] = message
            head.append(entry)
            first_cut = 1
            kept_chars += _size_of(logs[0]) + 1  # the whole entry's share of `total` is gone too
    dropped = tail_start - first_cut
    out = list(head)
    if dropped:
        chars = total - 2 - (len(logs) - 1) - (kept_chars - (len(logs) - dropped))  # the dropped entries
        out.append(_log_marker(dropped, chars, int(logs[first_cut].get("timeMs", 0))))
    out.extend(logs[tail_start:])
    if _size_of(out) > room:  # a room too small for the marker (never at MIN_RESPONSE_CHARS)
        return [], len(logs)
    return out, dropped


def fit_response(
    logs: list[dict[str, Any]], result: Any, max_chars: int
) -> tuple[list[dict[str, Any]], Any, dict[str, str] | None]:
    """(logs, result, diagnostic) with the JSON of `logs` and `result` together within
    `max_chars` characters (limits.maxResponseChars, at least MIN_RESPONSE_CHARS): unchanged
    with no diagnostic when they fit; else cut (`cut_logs`, `cut_json`: deterministic, always
    valid JSON), the logs keeping up to LOG_SHARE of the budget when the result needs the rest
    (and the result what the logs leave), with one RESPONSE_TRUNCATED warning saying how large
    each was, what is left and what to do."""
    if measure(logs, max_chars) + measure(result, max_chars) <= max_chars:
        return logs, result, None
    logs_size, result_size = json_size(logs), json_size(result)  # for the message: the whole sizes
    logs_room = min(logs_size, max(int(max_chars * LOG_SHARE), max_chars - result_size))
    new_logs, dropped = cut_logs(logs, logs_room, logs_size)
    new_logs_size = json_size(new_logs) if new_logs is not logs else logs_size
    new_result = cut_json(result, max_chars - new_logs_size)
    parts = []
    if new_result is not result:
        parts.append(f"result {result_size} → {json_size(new_result)} characters of JSON")
    if new_logs is not logs:
        parts.append(f"logs {logs_size} → {new_logs_size} ({len(logs) - dropped} of {len(logs)} entries kept)")
    note = diagnostic(
        RESPONSE_TRUNCATED,
        f"the response was cut to maxResponseChars = {max_chars}: " + "; ".join(parts)
        + ". Cut strings end in …[+N chars], cut arrays in an element \"…[+N items]\", cut objects "
        "in a key \"…\"; a log entry says how many entries were cut",
        severity="warning",
        hint="return less: filter, pick fields and aggregate in the script (counts, top-N, ids), or page "
        "through the data over several runs; limits.maxResponseChars raises the budget",
    )
    return new_logs, new_result, note


def build_response(
    logs: list[dict[str, Any]],
    result: Any,
    diagnostics: list[dict[str, Any]],
    tool_trace: list[dict[str, Any]] | None = None,
    *,
    tool_summary: dict[str, Any] | None = None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    """`{logs, result, diagnostics}` with result forced to null after a fatal error (§3.3.4)
    and UTF-8-safe, plus `toolTrace` when given (the host's part: the sandbox has none) and
    `toolSummary` (`shape_trace`). With `max_chars` (limits.maxResponseChars) logs and result
    are cut to it together (`fit_response`)."""
    if any(d.get("code") in FATAL_CODES and d.get("severity") == "error" for d in diagnostics):
        result = None
    result = utf8_safe_json(result)
    if max_chars is not None:
        logs, result, note = fit_response(logs, result, max_chars)
        if note is not None:
            diagnostics = [*diagnostics, note]
    response = {"logs": logs, "result": result, "diagnostics": diagnostics}
    if tool_trace is not None:
        response["toolTrace"] = tool_trace
    if tool_summary is not None:
        response["toolSummary"] = tool_summary
    return response


async def build_response_async(
    logs: list[dict[str, Any]],
    result: Any,
    diagnostics: list[dict[str, Any]],
    tool_trace: list[dict[str, Any]] | None = None,
    *,
    tool_summary: dict[str, Any] | None = None,
    max_chars: int | None = None,
) -> dict[str, Any]:
    """`build_response` off the event loop when the result or the logs are large (its UTF-8
    check encodes all of the result; a budget measures both and may walk them)."""
    if payload.is_large(result) or (max_chars is not None and payload.is_large(logs)):
        return await payload.offload(build_response, logs, result, diagnostics, tool_trace,
                                     tool_summary=tool_summary, max_chars=max_chars)
    return build_response(logs, result, diagnostics, tool_trace, tool_summary=tool_summary, max_chars=max_chars)


def not_started(*diagnostics: dict[str, Any]) -> dict[str, Any]:
    """The response of a run that never started (a bad request or limits, a configuration
    error, a script that does not parse, a host failure): no logs, result null, no calls;
    never a failed tool call (§3.3.4)."""
    return build_response([], None, list(diagnostics), [])
