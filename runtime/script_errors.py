"""What went wrong inside the script, told in the script's terms: its syntax errors, uncaught
exceptions, failed imports and unawaited failed calls as §3.3.3 diagnostics, with the line and
column in the agent's module and only the stack frames that point into it or a @codemode module.

Runs in the sandbox worker on what QuickJS reports (the host reuses the stack mapping): no
host-side name or path may leak into a diagnostic, and all the parsing is linear and bounded,
since the stack and the message are the script's own text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from codemode_gen import MODULE_PREFIX
from codemode_gen.runtime.diagnostics import Diagnostic, DiagnosticCode, diagnostic
from codemode_gen.runtime.jsonsafe import clip, safe_name
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS
from codemode_gen.runtime.near_miss import closest_names, listed

#: Name of the agent's script inside the sandbox; stack frames and paths point into it.
AGENT_MODULE = "agent.js"
#: Stack frames kept in an UNCAUGHT_EXCEPTION message; deep recursion would otherwise put
#: thousands of frames into the agent's context.
MAX_STACK_FRAMES = 20
#: Characters of a stack examined for frames. A script can throw anything with a `stack` string
#: of its choosing; reading megabytes of it made an immediate throw outlast the deadline.
MAX_STACK_CHARS = 64 * 1024
#: Longest stack line parsed as a frame; real frames are short, longer lines are skipped.
MAX_FRAME_CHARS = 1000

_MODULE_NOT_FOUND = re.compile(
    r"^(?:could not load module filename|module not found)[:]? '?(?P<name>[^']*)'?$"
)
# QuickJS's link error for `import { x } from "m"` when m has no export x.
_EXPORT_NOT_FOUND = re.compile(
    r"^Could not find export '(?P<name>[^']*)' in module '(?P<module>[^']*)'$"
)
# The names a module exports, in the forms the runtime's own modules use (generated server
# modules, @codemode/discovery, @codemode/errors): declarations and `export { a, b as "c" }`.
_EXPORT_DECL = re.compile(
    r"^export\s+(?:async\s+)?(?:function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)", re.M
)
_EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}", re.M)
#: JavaScript's own error classes: thrown by the engine for a mistake in the script's code, which
#: the fix is to change, never to catch.
PROGRAMMING_ERRORS = frozenset(
    {"TypeError", "ReferenceError", "RangeError", "SyntaxError", "URIError"}
)
#: Unawaited failed calls reported one by one per run; more are summed up in one line.
MAX_UNAWAITED_REPORTED = 5


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


def syntax_error(message: str, stack: str) -> Diagnostic:
    """From `check_syntax`: the stack holds `at check:LINE:COL`."""
    m = re.search(r":(\d+):(\d+)", stack or "")
    path = f"{m.group(1)}:{m.group(2)}" if m else None
    where = f" at {AGENT_MODULE}:{path}" if path else ""
    return diagnostic(
        DiagnosticCode.SYNTAX_ERROR,
        f"SyntaxError: {message}{where}",
        hint="fix the syntax at that line and column; the script runs as an ES module "
        "(import/export and top-level await are allowed)",
        path=path,
    )


def module_not_found(message: str) -> str | None:
    """The missing specifier when `message` is the engine's module-resolution failure."""
    m = _MODULE_NOT_FOUND.match(message.strip())
    return m.group("name") if m else None


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


def import_failure(name: str, code: str, modules: Iterable[str]) -> Diagnostic:
    modules = list(modules)
    servers = sorted(m for m in modules if m.startswith(MODULE_PREFIX))
    others = sorted(
        m
        for m in modules
        if m.startswith("@codemode/") and m not in servers and m != "@codemode/host"
    )
    available = ", ".join(servers) if servers else "none"
    meant = _closest_module(name, servers + others)
    hint = (f"did you mean '{meant}'? " if meant else "") + (
        f"import one of the available server modules ({available}) or "
        f"{', '.join(others) or '@codemode/errors'}; nothing else (files, URLs, npm "
        "packages, node:*) can be imported"
    )
    return diagnostic(
        DiagnosticCode.IMPORT_FAILURE,
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


def export_failure(name: str, module: str, code: str, modules: Mapping[str, str]) -> Diagnostic:
    """IMPORT_FAILURE for `import { name } from module` when the module has no such export:
    the closest export names, and how to import the module when it was a default import."""
    source = modules.get(module)
    exports = module_exports(source) if isinstance(source, str) else []
    shown, where = safe_name(name), safe_name(module)
    if name == "default":
        alias = re.sub(r"\W", "_", module.rsplit("/", 1)[-1]) or "mod"
        return diagnostic(
            DiagnosticCode.IMPORT_FAILURE,
            f"'{where}' has no default export: its functions are named exports",
            hint=f"import the module as a namespace: import * as {alias} from '{where}'",
            path=find_import_name(code, "import", module),
        )
    close = closest_names(name, exports)
    meant = f"did you mean '{close[0]}'? " if close else ""
    fix = (
        f"import {{ {close[0]} }} from '{where}'"
        if close
        else f"import one of them: {listed(exports)}"
    )
    return diagnostic(
        DiagnosticCode.IMPORT_FAILURE,
        f"cannot import '{shown}' from '{where}': the module has no such export"
        + (f" (did you mean '{close[0]}'?)" if close else "")
        + (f"; its exports: {listed(exports)}" if exports else ""),
        hint=f"{meant}{fix}" if close else fix,
        path=find_import_name(code, name, module),
    )


def unawaited_calls(report: Any, modules: Iterable[str]) -> list[Diagnostic]:
    """UNAWAITED_CALL_FAILED warnings from the prelude's report of failed tool calls that the
    script never awaited (`{calls: [{serverId, toolName, name, message, stack}], untracked}`):
    the run went on without knowing. One each, at most MAX_UNAWAITED_REPORTED, then one line."""
    if not isinstance(report, Mapping):
        return []
    raw = report.get("calls")
    calls = (
        [c for c in raw[: MAX_UNAWAITED_REPORTED * 2] if isinstance(c, Mapping)]
        if isinstance(raw, list)
        else []
    )
    untracked = report.get("untracked")
    extra = (untracked if isinstance(untracked, int) else 0) + max(
        0, len(calls) - MAX_UNAWAITED_REPORTED
    )
    out: list[Diagnostic] = []
    for call in calls[:MAX_UNAWAITED_REPORTED]:
        where = f"{safe_name(call.get('serverId'))}.{safe_name(call.get('toolName'))}"
        error = f"{safe_name(call.get('name') or 'Error')}: {clip(str(call.get('message') or ''), MAX_DIAGNOSTIC_CHARS // 2)}"
        stack = str(call.get("stack") or "")
        path = agent_location(stack)
        fn = _export_of_frames(map_stack(stack, modules))
        out.append(
            diagnostic(
                DiagnosticCode.UNAWAITED_CALL_FAILED,
                f"{where} failed and nothing awaited it, so the script went on without its result: {error}",
                severity="warning",
                hint=f"await the call (`await {fn}(...)`, or `await Promise.all([...])` for several) so its "
                "failure reaches the script"
                + (f"; the call is at {AGENT_MODULE}:{path}" if path else ""),
                path=path,
            )
        )
    if extra > 0:
        out.append(
            diagnostic(
                DiagnosticCode.UNAWAITED_CALL_FAILED,
                f"{extra} more tool call(s) failed while nothing awaited them",
                severity="warning",
                hint="await every tool call (or `await Promise.all([...])`) so failures reach the script",
            )
        )
    return out


def _export_of_frames(frames: Sequence[str]) -> str:
    """The generated function a call went through (`at list_notes (@codemode/servers/notes:…)`),
    for the hint's example; `callTool` when the script called the host directly."""
    for frame in frames:
        text = frame.strip()
        if text.startswith("at ") and f"({MODULE_PREFIX}" in text:
            return text[3:].split(" ", 1)[0]
    return "callTool"


def uncaught_exception(error: Mapping[str, Any], modules: Iterable[str]) -> Diagnostic:
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
        DiagnosticCode.UNCAUGHT_EXCEPTION,
        message,
        hint=str(hint),
        path=path,
        error_class=str(error_class) if error_class else None,
    )
