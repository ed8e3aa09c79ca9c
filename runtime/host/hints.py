"""Hints that name the fix for the commonest mistakes of a failed script (§3.3.3 `hint`).

QuickJS says `TypeError: not a function at agent.js:3:18` where the agent wrote
`notes.map(...)` on a tool result boxed as `{ result: Note[] }`. The host knows more than the
engine: the script's source, which tool each value came from and that tool's output schema
(the run's catalog, out/'s manifest: boxed results, text results and whether their recordings
were JSON, object fields). So after a run fails with UNCAUGHT_EXCEPTION (never on a successful
run: this costs them nothing), `explain` reads the failing line, finds the expression the error
is about, follows it back to the tool call its value came from (`const notes = await
list_notes(); notes.map(...)`: `notes` is bound to a call of notes.list_notes) and rewrites the
diagnostic's message and hint to say what the value was and the expression that works:

| mistake                                  | the hint says                                     |
|------------------------------------------|---------------------------------------------------|
| array method / index on a boxed result   | the value is in `.result`: `notes.result.map(…)`  |
| property of a JSON text result           | `JSON.parse(s).byTag`                             |
| property of a plain text result          | it is text: use the string                        |
| field the result type does not have      | the closest field names: `n.tags`                 |
| array method on an object with one list  | the list is in `.events`                          |
| a Promise used as the value (no await)   | `(await notes.list_notes()).result`               |
| a name the module does not export        | the closest export: `notes.list_notes`            |
| an optional field that was absent        | check it first: `n.done?.x`                       |
| a tool function used without its import  | `import { list_notes } from "@codemode/servers/…"`|
| JSON.parse of text or of an object       | drop JSON.parse / the text is not JSON            |

The analysis is static and cheap: one tree-sitter parse of the script (the TypeScript grammar
runtime/host/tsinput.py uses; types were erased keeping every position, so the engine's line:column
and the parse agree), a table of bindings (imports, declarations with destructuring,
assignments, for-of variables, callback parameters of array methods), and a walk of the
output schema. It is scope-insensitive (the nearest binding before the use wins) and bounded by
the named constants of the modules it is made of: hints_script.py (the script model: parse,
bindings, evaluation), hints_schema.py (reading an output schema) and hints_mistakes.py (the
explanations); this module matches the engine's error and rewrites the diagnostic. It never
fails a run: on any exception the diagnostic stays as the sandbox made it. Nothing here needs Node or a type checker.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.catalog import Catalog
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS

if TYPE_CHECKING:
    from codemode_gen.runtime.host.hints_mistakes import Fix

__all__ = ["explain", "needs_explaining"]

log = logging.getLogger(__name__)

#: Scripts longer than this are not analysed (the diagnostic keeps the engine's text): bounds
#: the parse and the binding table built after a failed run.
MAX_SCRIPT_CHARS = 100_000

_ERROR_LINE = re.compile(r"^Uncaught (?P<name>[A-Za-z]*Error): (?P<message>.*)$")
_READ = re.compile(r"^cannot (?:read|set) property '(?P<prop>[^']*)' of (?P<what>undefined|null)$")
_READ_V8 = re.compile(
    r"^Cannot (?:read|set) properties of (?P<what>undefined|null) \((?:reading|setting) '(?P<prop>[^']*)'\)$"
)
_NOT_FUNCTION = re.compile(r"^(?:.* )?is not a function$|^not a function$")
_NOT_ITERABLE = re.compile(r"not iterable")
_NOT_DEFINED = re.compile(r"^'?(?P<name>[A-Za-z_$][\w$]*)'? is not defined$")


def needs_explaining(diagnostics: Iterable[Mapping[str, Any]]) -> bool:
    """Whether `explain` has anything to look at (a run that did not fail this way: no)."""
    return any(
        d.get("code") == diag.DiagnosticCode.UNCAUGHT_EXCEPTION
        and d.get("severity") == "error"
        and not d.get("errorClass")
        for d in diagnostics
    )


def explain(
    diagnostics: Sequence[diag.Diagnostic], code: str, script: str, catalog: Catalog
) -> list[diag.Diagnostic]:
    """`diagnostics` with an UNCAUGHT_EXCEPTION that one of the known mistakes explains given a
    message and hint that name the fix. `code` is the agent's source, `script` what ran (its
    TypeScript types erased: same positions); `catalog` is the run's."""
    out = list(diagnostics)
    for i, d in enumerate(out):
        if (
            d.get("code") != diag.DiagnosticCode.UNCAUGHT_EXCEPTION
            or d.get("severity") != "error"
            or d.get("errorClass")
        ):
            continue
        try:
            better = _explain(d, code, script, catalog)
        except Exception as exc:  # a hint is a courtesy: the engine's diagnostic stands
            log.debug("no hint for %s: %s: %s", d.get("message", "")[:80], type(exc).__name__, exc)
            better = None
        if better is not None:
            out[i] = better
    return out


def _explain(
    d: diag.Diagnostic, code: str, script: str, catalog: Catalog
) -> diag.Diagnostic | None:
    message = str(d.get("message") or "")
    first, _, frames = message.partition("\n")
    m = _ERROR_LINE.match(first)
    if (
        m is None
        or len(script) > MAX_SCRIPT_CHARS
        or (len(code) != len(script) and not _same_bytes(code, script))
    ):
        return None
    name, text = m.group("name"), m.group("message")
    where = _position(d.get("path"))
    # The script model and its analyses: imported by the first error worth explaining.
    from codemode_gen.runtime.host.hints_mistakes import Analysis

    analysis = Analysis(code, script, catalog)
    fix: Fix | None = None
    read = _READ.match(text) or _READ_V8.match(text)
    if name == "TypeError" and read is not None and read.group("prop").startswith("Symbol."):
        fix = analysis.not_iterable(where)  # `for (… of undefined)`
    elif name == "TypeError" and read is not None:
        fix = analysis.undefined_property(read.group("prop"), read.group("what"), where)
    elif name == "TypeError" and _NOT_FUNCTION.match(text):
        fix = analysis.not_a_function(where)
    elif name == "TypeError" and _NOT_ITERABLE.search(text):
        fix = analysis.not_iterable(where)
    elif name == "ReferenceError" and (ref := _NOT_DEFINED.match(text)) is not None:
        fix = analysis.not_defined(ref.group("name"))
    elif name == "SyntaxError":  # at run time: JSON.parse
        fix = analysis.json_parse(where)
    if fix is None:
        return None
    better = d.copy()
    better["message"] = jsonsafe.clip(
        f"{first} — {fix.why}" + (f"\n{frames}" if frames else ""), MAX_DIAGNOSTIC_CHARS
    )
    better["hint"] = jsonsafe.clip(fix.hint, MAX_DIAGNOSTIC_CHARS)
    return better


def _same_bytes(code: str, script: str) -> bool:
    """Whether the source and what ran have the same UTF-8 length (erasing keeps it)."""
    return len(code.encode("utf-8", "surrogatepass")) == len(
        script.encode("utf-8", "surrogatepass")
    )


def _position(path: Any) -> tuple[int, int] | None:
    """(row, byte column), both from 0, of a diagnostic's `line:column` path."""
    if not isinstance(path, str):
        return None
    line, _, col = path.partition(":")
    if not line.isdecimal():
        return None
    return int(line) - 1, (int(col) - 1 if col.isdecimal() else -1)
