"""runtime/response.py: §3.3 logs (truncation), diagnostics, stack mapping, result rules."""

from __future__ import annotations

import json

from codemode_gen.runtime import response as R


def test_s3_3_1_truncation_cuts_at_limit_and_appends_warn() -> None:
    logs = R.LogCollector(10)
    assert logs.add("log", "12345", 1) is not None
    assert logs.add("warn", "67890abc", 2) == {"level": "warn", "message": "67890", "timeMs": 2}
    assert logs.truncated
    assert logs.add("log", "dropped", 3) is None
    final = R.finish_logs(logs.entries, logs.truncated, 10, 5)
    assert [e["message"] for e in final[:-1]] == ["12345", "67890"]
    assert final[-1]["level"] == "warn" and "maxLogBytes" in final[-1]["message"] and "10" in final[-1]["message"]
    assert final[-1]["timeMs"] == 5


def test_truncation_respects_utf8_boundaries() -> None:
    logs = R.LogCollector(4)
    logs.add("log", "aé€", 0)  # 1 + 2 + 3 bytes
    assert logs.entries[0]["message"] == "aé"
    assert logs.truncated


def test_exact_fit_is_not_truncated() -> None:
    logs = R.LogCollector(3)
    logs.add("log", "abc", 0)
    assert not logs.truncated
    assert R.finish_logs(logs.entries, logs.truncated, 3, 0) == [{"level": "log", "message": "abc", "timeMs": 0}]


def test_unknown_level_becomes_log_and_lone_surrogates_are_replaced() -> None:
    logs = R.LogCollector(100)
    entry = logs.add("info", "a\ud800b", 0)
    assert entry == {"level": "log", "message": "a\ufffdb", "timeMs": 0}
    assert R.utf8_safe("\U0001f600") == "\U0001f600"


def test_map_stack_keeps_agent_and_codemode_frames_only() -> None:
    stack = (
        "    at toError (@codemode/errors:3:1)\n"
        "    at callTool (@codemode/host:80:5)\n"
        "    at run (eval_script:400:3)\n"
        "    at apply (native)\n"
        "    at f (agent.js:2:15)\n"
        "    at /home/user/secret.py:1\n"
        "    at <anonymous> (agent.js:4:1)\n"
    )
    frames = R.map_stack(stack, ["@codemode/host", "@codemode/errors"])
    assert frames == ["    at callTool (@codemode/host:80:5)", "    at f (agent.js:2:15)", "    at <anonymous> (agent.js:4:1)"]
    assert R.agent_location(stack) == "2:15"


def test_s3_3_3_uncaught_exception_diagnostic() -> None:
    d = R.uncaught_exception(
        {"isError": True, "name": "TypeError", "message": "x is null", "stack": "    at f (agent.js:2:15)\n", "text": "TypeError: x is null"},
        [],
    )
    assert d["severity"] == "error" and d["code"] == "UNCAUGHT_EXCEPTION"
    assert d["message"] == "Uncaught TypeError: x is null\n    at f (agent.js:2:15)"
    assert d["path"] == "2:15" and d["hint"] and "errorClass" not in d


def test_uncaught_codemode_error_keeps_class_and_hint() -> None:
    d = R.uncaught_exception(
        {"isError": True, "name": "Mine", "message": "m", "stack": "", "errorClass": "ToolCallError", "hint": "retry later"}, []
    )
    assert (d["errorClass"], d["hint"]) == ("ToolCallError", "retry later")


def test_uncaught_non_error_value() -> None:
    d = R.uncaught_exception({"isError": False, "text": '{"a":1}', "stack": None}, [])
    assert d["message"] == 'Uncaught {"a":1}' and "path" not in d


def test_syntax_error_path_is_line_column() -> None:
    d = R.syntax_error("unexpected token", "    at check:4:5\n")
    assert d["code"] == "SYNTAX_ERROR" and d["path"] == "4:5" and "agent.js:4:5" in d["message"]


def test_import_failure_lists_server_modules_and_locates_the_import() -> None:
    assert R.module_not_found("module not found: @codemode/servers/nope") == "@codemode/servers/nope"
    assert R.module_not_found("something else") is None
    code = 'const x = 1;\nimport("@codemode/servers/nope");'
    d = R.import_failure("@codemode/servers/nope", code, ["@codemode/servers/b", "@codemode/servers/a", "@codemode/discovery", "@codemode/host"])
    assert d["code"] == "IMPORT_FAILURE" and d["path"] == "2:8"
    assert "@codemode/servers/a, @codemode/servers/b" in d["hint"]
    assert "@codemode/discovery" in d["hint"] and "@codemode/host" not in d["hint"]


def test_sandbox_limit_diagnostic() -> None:
    d = R.timeout_limit(500)
    assert d["code"] == "SANDBOX_LIMIT" and d["errorClass"] == "SandboxLimitError" and "500" in d["message"]
    assert d["hint"]


def test_s3_3_4_result_is_null_on_fatal_error() -> None:
    fatal = R.build_response([], {"a": 1}, [R.timeout_limit(5)])
    assert fatal["result"] is None
    ok = R.build_response([], {"a": "\ud800"}, [R.diagnostic("X", "info only", severity="warning")])
    assert ok["result"] == {"a": "\ufffd"}
    json.dumps(ok, ensure_ascii=False).encode("utf-8")
