"""A type check's answer as §3.3.3 diagnostics: codes, positions, a corrective hint per common
mistake, and the one-line reasons a run was not checked.

Why its own module: the checker (typecheck.py) answers with the compiler's own diagnostics; what
a model or a user reads (`TS<n>` codes, hints that name the fix, a cap on a run's warnings, and
a run's check that never blocks it, spec §3.3.3) is this module's, shared by `check` (the CLI)
and runs (runtime/codemode/typechecks.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Mapping
from typing import Any

from codemode_gen import MODULE_PREFIX
from codemode_gen.runtime.diagnostics import Diagnostic, DiagnosticCode, diagnostic, ts_code
from codemode_gen.runtime.host.tscompiler import INSTALL_HINT, CompilerNotFound
from codemode_gen.runtime.host.tsinstall import InstallFailed
from codemode_gen.runtime.host.typecheck import CheckResult, TypeChecker, TypeScriptDownloading

# Scripts larger than this are not sent to the checker (a run would spend its time parsing).
MAX_SCRIPT_CHARS = 1024 * 1024
# Of the time a run has left when its check starts, the check may use this share: the script
# always keeps the rest, however slow the compiler's first start is.
RUN_SHARE = 0.5
# Type warnings one run reports (then an info line with the count): a response is read by a
# model, and the first errors are the ones to fix.
MAX_RUN_DIAGNOSTICS = 20
# Server modules a "Cannot find module" hint names (then a count): a hint is one line to read.
MAX_HINT_MODULES = 8

#: Codes of the info diagnostics saying a run was not type-checked (no compiler, over its time
#: share, a failure of the checker, a script too large): reported to a run that asked for the
#: check itself (runtime/codemode/typechecks.py).
NOT_CHECKED = frozenset({DiagnosticCode.TYPECHECK_SKIPPED, DiagnosticCode.TYPECHECK_UNAVAILABLE})


_SEVERITY = {"error": "error", "warning": "warning", "suggestion": "info", "message": "info"}
_DID_YOU_MEAN = re.compile(r"Did you mean '([^']+)'\?")
_MISSING = re.compile(r"Property '([^']+)' is missing in type")
_NOT_ASSIGNABLE = re.compile(r"^Type '([^']+)' is not assignable to type '([^']+)'\.")
_EXTRA = re.compile(
    r"Object literal may only specify known properties, and '([^']+)' does not exist"
)
_NO_MODULE = re.compile(r"Cannot find module '([^']+)'")
_NO_NAME = re.compile(r"Cannot find name '([^']+)'")
_ON_STRING = re.compile(r"Property '[^']+' does not exist on type 'string'")
_SANDBOX_MISSING = {
    "fetch": "the sandbox has no network: call a tool of a server instead",
    "XMLHttpRequest": "the sandbox has no network: call a tool of a server instead",
    "require": 'scripts are ES modules: `import * as x from "@codemode/servers/<id>"`',
    "process": "the sandbox has no process object; nothing of the host is reachable",
    "setInterval": "the sandbox has no setInterval: loop with `await new Promise((r) => setTimeout(r, ms))`",
    "window": "the sandbox is not a browser: globalThis holds the standard built-ins only",
    "document": "the sandbox is not a browser: there is no DOM",
}


def hint_for(d: Mapping[str, Any]) -> str | None:
    """A single corrective action for the common type errors of agent scripts, else None."""
    code = d.get("code")
    message = str(d.get("message") or "")
    if code == 4111:  # a property only the open type's index signature allows
        prop = str(d.get("property") or "")
        declared = [str(n) for n in d.get("declared") or []]
        if d.get("suggestion"):
            return f"did you mean `.{d['suggestion']}`? Declared: {', '.join(declared)}"
        if declared == ["result"]:
            return f"the value is boxed: it is in `.result` (e.g. `.result.{prop}`)"
        if declared:
            return (
                f"`{prop}` is not declared on this type (declared: {', '.join(declared)}); "
                f'if the server does send it, read it as `["{prop}"]`'
            )
        return f'this value declares no properties; if the server does send `{prop}`, read it as `["{prop}"]`'
    if code in (2554, 2555) and message.startswith("Expected 1 argument"):
        return "pass what the declaration lists; a tool takes one input object: `tool({ ... })` with its required fields"
    missing = _MISSING.search(message)
    if missing:
        return f"add the required property `{missing[1]}`"
    extra = _EXTRA.search(message)
    if extra and not _DID_YOU_MEAN.search(message):
        return (
            f"remove `{extra[1]}`: the input type does not declare it (read the tool's declaration)"
        )
    suggestion = _DID_YOU_MEAN.search(message)
    if suggestion:
        return f"use `{suggestion[1]}`"
    wrong = _NOT_ASSIGNABLE.search(message)
    if wrong:
        got, wanted = wrong[1], wrong[2]
        if wanted == "number" and (got == "string" or got.startswith('"')):
            return "pass a number: `Number(value)` converts a numeric string"
        if wanted == "string" and (got == "number" or got[:1].isdigit()):
            return "pass a string: `String(value)`"
    module = _NO_MODULE.search(message)
    if module:
        if module[1].startswith(MODULE_PREFIX):
            return (
                'import a configured server (listServers() from "@codemode/discovery" lists them); '
                "a server added since `codemode-gen generate` has no declarations yet"
            )
        return _only_codemode(d)
    if (
        code in (6053, 6231, 2688) and d.get("specifier") is not None
    ):  # `/// <reference path|types>`
        return "remove the `/// <reference>` (types come from imports): " + _only_codemode(d)
    name = _NO_NAME.search(message)
    if name and name[1] in _SANDBOX_MISSING:
        return _SANDBOX_MISSING[name[1]]
    if code in (18047, 18048, 18049, 2531, 2532, 2533):
        return "check the value first (`if (x) …`), or use `?.` and `??`"
    if code == 18046:
        return "narrow it first (`typeof`, `instanceof Error`, `Array.isArray`), or cast a parsed value: `JSON.parse(s) as T`"
    if _ON_STRING.search(message):
        return "this value is a string; a tool that returns a JSON string needs `JSON.parse(result)` first"
    if code in (7006, 7031):
        return "annotate it, e.g. `(note: Note) => …` with a type the server module exports"
    return None


def _only_codemode(d: Mapping[str, Any]) -> str:
    """What a script can import instead: the modules out/ declares (the checker lists them)."""
    declared = [str(m) for m in d.get("modules") or [] if isinstance(m, str)]
    servers = [m for m in declared if m.startswith(MODULE_PREFIX)]
    shown = servers[:MAX_HINT_MODULES] + [m for m in declared if not m.startswith(MODULE_PREFIX)]
    if not shown:
        return f'import a server as "{MODULE_PREFIX}<id>" (listServers() from "@codemode/discovery" lists them)'
    more = (
        f" and {len(servers) - MAX_HINT_MODULES} more servers"
        if len(servers) > MAX_HINT_MODULES
        else ""
    )
    return "import one of " + ", ".join(f'"{m}"' for m in shown) + more


def to_diagnostics(result: CheckResult, *, severity: str | None = None) -> list[Diagnostic]:
    """The checker's diagnostics in the §3.3.3 shape: code `TS<n>`, path `line:column`, a hint
    where the fix is obvious; `severity` overrides the compiler's (runs report warnings)."""
    out = []
    for d in result.diagnostics:
        message = str(d.get("message") or "")
        if d.get("code") == 4111 and d.get("property") and d.get("typeName"):
            # tsc's own text ("must be accessed with ['x']") suggests the wrong fix for a typo
            message = (
                f"Property '{d['property']}' is not declared on type '{d['typeName']}' "
                "(only its index signature allows it)."
            )
        out.append(
            diagnostic(
                ts_code(d.get("code")),
                message,
                severity=severity or _SEVERITY.get(str(d.get("category")), "error"),
                hint=hint_for(d),
                path=f"{d.get('line', 1)}:{d.get('column', 1)}",
            )
        )
    return out


async def run_diagnostics(
    checker: TypeChecker, code: str, *, deadline: float, modules: Collection[str] = ()
) -> list[Diagnostic]:
    """A run's type-check diagnostics: type errors as warnings, or one info line saying why the
    check was skipped. Never raises (but CancelledError): the run goes ahead regardless.

    `modules`: specifiers the run can import although out/ does not declare them (servers built
    in memory): "Cannot find module" about one of them is not reported."""
    if len(code) > MAX_SCRIPT_CHARS:
        return [
            diagnostic(
                DiagnosticCode.TYPECHECK_SKIPPED,
                f"the script is over {MAX_SCRIPT_CHARS} characters; it was not type-checked",
                severity="info",
            )
        ]
    budget = max(0.0, (deadline - time.monotonic()) * RUN_SHARE)
    try:
        result = await checker.check(code, timeout=budget)
    except (CompilerNotFound, InstallFailed) as exc:
        return [
            diagnostic(
                DiagnosticCode.TYPECHECK_UNAVAILABLE,
                f"not type-checked: {exc.message}",
                severity="info",
                hint=(exc.hint or INSTALL_HINT).replace(
                    "pass --tsc PATH", "start serve with --tsc PATH"
                ),
            )
        ]
    except TypeScriptDownloading as exc:
        return [
            diagnostic(
                DiagnosticCode.TYPECHECK_SKIPPED,
                f"not type-checked: {exc} for type checking (once; this run did not wait for it)",
                severity="info",
                hint="nothing to do; runs are checked once it is there (a host with TypeScript installed, "
                "`npm i -g typescript`, or started with --tsc PATH, downloads nothing)",
            )
        ]
    except TimeoutError:
        return [
            diagnostic(
                DiagnosticCode.TYPECHECK_SKIPPED,
                f"not type-checked: the check took longer than {round(budget * 1000)} ms "
                f"(half the time the run had left){'; the compiler is still starting' if checker.starts <= 1 else ''}",
                severity="info",
                hint="the run went ahead unchecked; a later run asking for limits.typecheck is checked once the "
                "compiler is warm",
            )
        ]
    except Exception as exc:  # TypeCheckUnavailable or a bug: never block a valid script
        return [
            diagnostic(
                DiagnosticCode.TYPECHECK_UNAVAILABLE,
                f"not type-checked: {exc}",
                severity="info",
                hint="the run went ahead unchecked; the next run asking for limits.typecheck starts the type "
                "checker again",
            )
        ]
    if modules:
        kept = [d for d in result.diagnostics if not _undeclared_module(d, modules)]
        result = CheckResult(result.lang, kept, result.ms)
    found = to_diagnostics(result, severity="warning")
    if len(found) > MAX_RUN_DIAGNOSTICS:
        more = len(found) - MAX_RUN_DIAGNOSTICS
        found = [
            *found[:MAX_RUN_DIAGNOSTICS],
            diagnostic(
                DiagnosticCode.TYPECHECK_TRUNCATED,
                f"{more} more type error{'s' * (more != 1)} not shown",
                severity="info",
                hint="run `codemode-gen check` on the script to see them all",
            ),
        ]
    return found


def _undeclared_module(d: Mapping[str, Any], modules: Collection[str]) -> bool:
    found = (
        _NO_MODULE.search(str(d.get("message") or "")) if d.get("code") in (2307, 2792) else None
    )
    return found is not None and found[1] in modules
