"""The host's reading of how a run ended: from the worker's `done` (protocol.py: what happened,
raw) to the run's result and diagnostics, and from `checked` to the SYNTAX_ERROR a run would get.

Why on the host: the diagnostics are what the model reads (spec §3.3, §7): stack frames mapped to
its own lines, the module or export it nearly named, a hint. Composing them needs the run's code
and module texts, which the host holds, and nothing of the engine but two facts the worker sends
(a heap probe, a re-parse). So a worker stays an engine with a pipe (the native worker ported
that much, docs/native-worker.md), and a run's result text is parsed once, here,
instead of parsed and encoded again in the worker first.

A `done` is trusted no more than any line from the worker: a field of the wrong shape is a
`MalformedOutcome` (the run ends with a SANDBOX_ERROR and the worker is replaced), never an
exception in the host.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import screen, script_errors
from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox.protocol import BUNDLED_MODULES, DoneKind, js_source


class MalformedOutcome(ValueError):
    """A `done` or `checked` message the host cannot read."""


Answer = tuple[Any, list[diag.Diagnostic]]


@functools.cache
def _bundled_modules() -> dict[str, str]:
    """The texts of the modules every realm holds (read once):
    stack frames and export near misses may point into them."""
    return {name: js_source(file) for name, file in BUNDLED_MODULES.items()}


def _out_of_memory(limits: Limits) -> Answer:
    return None, [diag.memory_limit(limits.maxMemoryBytes)]


def result_text(msg: Mapping[str, Any]) -> str | None:
    """The result's JSON text a `done` carries, if any: the host checks a large one off the
    event loop."""
    report = msg.get("report")
    text = report.get("result") if isinstance(report, dict) else None
    return text if isinstance(text, str) else None


def checked(msg: Mapping[str, Any]) -> list[diag.Diagnostic]:
    """`[]`, or the SYNTAX_ERROR of a `checked` message."""
    syntax = msg.get("syntax")
    if syntax is None:
        return []
    return [_syntax_error(syntax)]


def _syntax_error(syntax: Any) -> diag.Diagnostic:
    if not isinstance(syntax, dict):
        raise MalformedOutcome("a syntax error that is not an object")
    return script_errors.syntax_error(
        str(syntax.get("message") or ""), str(syntax.get("stack") or "")
    )


def compose(
    msg: Mapping[str, Any], code: str, modules: Mapping[str, str], limits: Limits
) -> Answer:
    """The run's (result, diagnostics) from its `done` message. `code` is the agent module as the
    worker ran it and `modules` the run's other modules (specifier -> text)."""
    kind = msg.get("kind")
    if kind == DoneKind.LATE:
        return None, [diag.start_limit(limits.timeoutMs)]
    if kind == DoneKind.TIMEOUT:
        return None, [diag.timeout_limit(limits.timeoutMs)]
    if kind == DoneKind.PENDING_LIMIT:
        return None, [
            diag.sandbox_limit(
                "maxConcurrentCalls",
                limits.maxConcurrentCalls,
                "too many host calls were pending at once",
            )
        ]
    if kind == DoneKind.LOST_MODULE:
        return None, [diag.sandbox_error("the sandbox worker lost a server module")]
    if kind == DoneKind.INTERNAL:
        return None, [diag.sandbox_error("internal error in the sandbox worker")]
    if kind == DoneKind.SETUP_FAILED:
        message = str(msg.get("message"))
        if "out of memory" in message:
            return _out_of_memory(limits)
        return None, [diag.sandbox_error(f"the sandbox could not be set up: {message}")]
    if kind == DoneKind.ENGINE_ERROR:
        message = str(msg.get("message"))
        if "out of memory" in message or msg.get("heapExhausted") is True:
            return _out_of_memory(limits)
        if "never settled" in message:
            return None, [diag.unsettled_promise()]
        return None, [diag.sandbox_error(f"the sandbox failed: {msg.get('name')}: {message}")]
    if kind != DoneKind.REPORT:
        raise MalformedOutcome(f"an unknown kind of ending: {str(kind)[:40]!r}")
    report = msg.get("report")
    if not isinstance(report, dict):
        raise MalformedOutcome("a report that is not an object")
    return _from_report(report, msg, code, {**modules, **_bundled_modules()}, limits)


def _from_report(
    report: dict[str, Any],
    msg: Mapping[str, Any],
    code: str,
    modules: Mapping[str, str],
    limits: Limits,
) -> Answer:
    status = report.get("status")
    if status == "error" and msg.get("syntax") is not None:
        # The agent module does not parse: the same diagnostic `check` gives.
        return None, [_syntax_error(msg.get("syntax"))]
    # Failed tool calls nobody awaited: warnings beside whatever else the run reports.
    unawaited = script_errors.unawaited_calls(report.get("unawaited"), modules)
    if status == "ok":
        reason = report.get("resultError")
        if reason is not None:
            return None, [diag.result_not_serializable(str(reason)), *unawaited]
        result, problems = screen.result_from_text(report.get("result"))  # size, depth bounded
        return result, [*problems, *unawaited]
    heap_exhausted = msg.get("heapExhausted") is True
    error = report.get("error")
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or "")
    text = str(error.get("text") or "")
    if status == "setup_error":
        if "out of memory" in message or "out of memory" in text or heap_exhausted:
            return _out_of_memory(limits)
        return None, [diag.sandbox_error("the sandbox could not be set up: " + (text or message))]
    missing = script_errors.module_not_found(message) if error.get("isError") else None
    if missing is not None:
        return None, [script_errors.import_failure(missing, code, modules), *unawaited]
    no_export = script_errors.export_not_found(message) if error.get("isError") else None
    if no_export is not None:
        return None, [script_errors.export_failure(*no_export, code, modules), *unawaited]
    if (error.get("isError") and "out of memory" in message) or heap_exhausted:
        return _out_of_memory(limits)
    return None, [script_errors.uncaught_exception(error, modules), *unawaited]
