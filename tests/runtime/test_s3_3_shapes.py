"""The §3.3 shapes (`Response`, `Diagnostic`, `TraceEntry`, `ToolSummary`, `LogEntry`) and the
host's `HostReply` are TypedDicts that mypy checks where they are built as literals; these tests
hold the dicts built at run time (spread, merged, from keyword arguments) to the same keys, and
serve's advertised outputSchema to `Response`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, get_origin, get_type_hints

from codemode_gen.limit_bounds import MIN_RESPONSE_CHARS
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import response as R
from codemode_gen.runtime import script_errors
from codemode_gen.runtime.frontends.serve import OUTPUT_SCHEMA
from codemode_gen.runtime.host.call_replies import error_reply, server_not_found
from codemode_gen.runtime.host.tooltrace import CallLog
from codemode_gen.runtime.logs import LogEntry, finish_logs
from codemode_gen.runtime.sandbox.protocol import HostReply


def declared(shape: Any) -> tuple[frozenset[str], frozenset[str]]:
    """(required keys, all keys) of a TypedDict. Read from its resolved hints: its module's
    postponed annotations leave `__optional_keys__` empty before Python 3.14."""
    hints = get_type_hints(shape, include_extras=True)
    optional = {key for key, hint in hints.items() if get_origin(hint) is NotRequired}
    return frozenset(hints.keys() - optional), frozenset(hints)


def assert_shape(value: Mapping[str, Any], shape: Any) -> None:
    required, allowed = declared(shape)
    assert required <= value.keys() <= allowed, (shape.__name__, sorted(value))


def assert_all(values: Iterable[Mapping[str, Any]], shape: Any) -> None:
    for value in values:
        assert_shape(value, shape)


def test_serve_output_schema_is_the_response_shape() -> None:
    required, allowed = declared(R.Response)
    assert set(OUTPUT_SCHEMA["properties"]) == allowed
    assert set(OUTPUT_SCHEMA["required"]) == required


def test_a_built_response_carries_only_declared_keys_in_every_part() -> None:
    log = CallLog()
    log.record("notes", "get_note", 3, None, approval="allowed")
    log.record(
        "notes", "delete_note", 0, "ToolCallError: APPROVAL_DENIED (declined)", approval="denied"
    )
    logs = finish_logs([{"level": "log", "message": "x" * 500, "timeMs": 1}], True, 100, 2)
    response = R.build_response(
        logs,
        {"big": "y" * 5000},
        [diag.diagnostic(diag.DiagnosticCode.STALE_OUT, "stale", severity="warning")],
        log.trace,
        tool_summary=log.counts.summary(),
        max_chars=MIN_RESPONSE_CHARS,
    )
    assert list(response) == ["logs", "result", "diagnostics", "toolTrace", "toolSummary"]
    assert_shape(response, R.Response)
    assert_all(response["logs"], LogEntry)
    assert_all(response["diagnostics"], diag.Diagnostic)
    assert [d["code"] for d in response["diagnostics"]] == ["STALE_OUT", "RESPONSE_TRUNCATED"]
    assert_all(response.get("toolTrace", []), R.TraceEntry)
    assert_shape(response.get("toolSummary", {}), R.ToolSummary)
    started = R.not_started(
        diag.diagnostic(diag.DiagnosticCode.INVALID_REQUEST, "no code", path="/code")
    )
    assert_shape(started, R.Response)


def test_every_diagnostic_constructor_makes_a_declared_diagnostic() -> None:
    made = [
        diag.diagnostic(
            diag.DiagnosticCode.HOST_ERROR,
            "m",
            severity="warning",
            hint="h",
            path="1:2",
            error_class="E",
        ),
        diag.diagnostic(diag.ts_code(2322), "m"),
        diag.timeout_limit(100),
        diag.start_limit(100),
        diag.prepare_limit(100, 150),
        diag.worker_limit(100, 2),
        diag.memory_limit(1 << 20),
        diag.result_not_serializable("BigInt"),
        diag.result_too_large(10, 5),
        diag.unsettled_promise(),
        diag.sandbox_error("crashed"),
        diag.waiting_for_connect(diag.timeout_limit(100), ["notes"]),
        script_errors.syntax_error("unexpected token", "at check:1:5"),
        script_errors.import_failure(
            "@codemode/servers/note",
            "import '@codemode/servers/note';",
            ["@codemode/servers/notes"],
        ),
        script_errors.export_failure(
            "get_notes",
            "@codemode/servers/notes",
            "import { get_notes } from '@codemode/servers/notes';",
            {"@codemode/servers/notes": "export function get_note() {}"},
        ),
        script_errors.uncaught_exception(
            {
                "isError": True,
                "name": "TypeError",
                "message": "x is undefined",
                "stack": "    at f (agent.js:3:4)",
                "errorClass": "ToolCallError",
                "hint": "catch it",
            },
            [],
        ),
        *script_errors.unawaited_calls(
            {
                "calls": [
                    {
                        "serverId": "notes",
                        "toolName": "get_note",
                        "name": "ToolCallError",
                        "message": "nope",
                        "stack": "    at agent.js:2:1",
                    }
                ],
                "untracked": 2,
            },
            [],
        ),
    ]
    assert_all(made, diag.Diagnostic)
    # Every optional field is reachable: the shape declares nothing no constructor makes (but
    # `file`, which `check` adds to a skill's diagnostics).
    _, allowed = declared(diag.Diagnostic)
    assert set().union(*made) == allowed - {"file"}
    assert all(isinstance(v, str) for d in made for v in d.values())


def test_host_replies_are_declared_and_a_failure_names_its_error_class() -> None:
    replies: list[HostReply] = [
        error_reply("ToolCallError", "m", "h", serverId="notes", toolName="get_note", code=None),
        server_not_found("note", None, ["notes"]),
        {"ok": True, "value": [1, 2]},
    ]
    assert_all(replies, HostReply)
    for reply in replies:
        if not reply["ok"]:
            error = reply.get("error") or {}
            assert {"errorClass", "message", "hint"} <= error.keys()
            assert "code" not in error  # None fields are left out
