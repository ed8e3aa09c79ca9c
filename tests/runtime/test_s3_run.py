"""Spec §3: the codemode.run request (code, limits, requestedCapabilities) and response.

Real servers (tests/servers/slow.py over stdio), real QuickJS, through the Python API.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HANG_S, PROMPT_S
from tests.runtime_support import HostThread, assert_ok, errors, fixture_set, stdio, write_out

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s3")
    out = base / "out"
    # `broken` is in out/ (so its module imports) but its process dies at start.
    write_out(
        out,
        [
            fixture_set("broken", [{"name": "ping", "inputSchema": {"type": "object"}}]),
            fixture_set("hang", [{"name": "ping", "inputSchema": {"type": "object"}}]),
        ],
    )
    configs = {
        "slow": stdio("slow", "slow"),
        "broken": stdio("broken", "crash_at_start"),
        "hang": stdio("hang", "hang_on_initialize", connect_timeout=HANG_S),
    }
    h = HostThread(configs, out, base / "logs")
    yield h
    h.close()


def test_s3_2_1_module_semantics_and_top_level_await(host: HostThread) -> None:
    r = host.run(
        "export const x = 1;\nconst v = await Promise.resolve(21);\nglobalThis.__codemode_result__ = v * 2;"
    )
    assert assert_ok(r) == 42


def test_s3_2_2_result_is_null_when_unset(host: HostThread) -> None:
    r = host.run("console.log('hi');")
    assert r["result"] is None
    assert not errors(r)


def test_s3_2_3_requested_capability_is_connected_before_the_script(host: HostThread) -> None:
    r = host.run(
        "import { listServers } from '@codemode/discovery';\n"
        "globalThis.__codemode_result__ = (await listServers()).map(s => s.serverId);",
        requested_capabilities=["slow"],
    )
    assert "slow" in assert_ok(r)
    assert not [d for d in r["diagnostics"] if "slow" in d["message"] and d["severity"] != "info"]


def test_s3_2_3_unknown_capability_gets_an_eager_diagnostic(host: HostThread) -> None:
    r = host.run("globalThis.__codemode_result__ = 1;", requested_capabilities=["nope"])
    diag = [d for d in r["diagnostics"] if d["code"] == "CAPABILITY_UNAVAILABLE"]
    assert diag and "nope" in diag[0]["message"] and diag[0]["hint"]
    assert r["result"] == 1


def test_s3_2_3_unavailable_capability_is_reported_and_throws_structured_on_use(
    host: HostThread,
) -> None:
    code = (
        "import * as broken from '@codemode/servers/broken';\n"
        "import { listServers } from '@codemode/discovery';\n"
        "import { ServerNotFoundError } from '@codemode/errors';\n"
        "const ids = (await listServers()).map(s => s.serverId);\n"
        "try { await broken.ping(); globalThis.__codemode_result__ = 'called'; }\n"
        "catch (e) { globalThis.__codemode_result__ = {ids, cls: e.name, ok: e instanceof ServerNotFoundError,"
        " serverId: e.serverId, hint: e.hint, msg: e.message}; }"
    )
    r = host.run(code, requested_capabilities=["broken"])
    eager = [
        d
        for d in r["diagnostics"]
        if d["code"] == "CAPABILITY_UNAVAILABLE" and "broken" in d["message"]
    ]
    assert eager and eager[0]["severity"] == "warning"
    result = assert_ok(r)
    assert result["ok"] is True and result["cls"] == "ServerNotFoundError"
    assert result["serverId"] == "broken" and result["hint"]
    assert "broken" not in result["ids"]  # MUST NOT silently claim it


def test_s3_2_4_unknown_limit_keys_are_ignored(host: HostThread) -> None:
    r = host.run(
        "globalThis.__codemode_result__ = 'ok';", limits={"bogusLimit": 5, "timeoutMs": 10_000}
    )
    assert assert_ok(r) == "ok"


def test_s3_2_4_invalid_limit_value_is_a_diagnostic_not_a_crash(host: HostThread) -> None:
    r = host.run("globalThis.__codemode_result__ = 1;", limits={"timeoutMs": "soon"})
    assert r["result"] is None
    assert errors(r)[0]["code"] == "INVALID_LIMITS" and errors(r)[0]["path"] == "/limits/timeoutMs"


def test_s3_2_4_max_tool_calls_ends_the_run_with_sandbox_limit(host: HostThread) -> None:
    code = (
        "import { tick } from '@codemode/servers/slow';\n"
        "console.log('before');\n"
        "for (let i = 0; i < 5; i++) { await tick(); console.log('call', i); }\n"
        "globalThis.__codemode_result__ = 'finished';"
    )
    r = host.run(code, limits={"maxToolCalls": 2})
    assert r["result"] is None
    diag = errors(r)
    assert (
        diag and diag[0]["code"] == "SANDBOX_LIMIT" and diag[0]["errorClass"] == "SandboxLimitError"
    )
    messages = [entry["message"] for entry in r["logs"]]
    assert messages[:3] == ["before", "call 0", "call 1"]  # logs before the limit are kept (§7.4)
    assert [t["ok"] for t in r["toolTrace"]][:2] == [True, True]


def test_s3_3_response_has_every_field_with_the_right_shapes(host: HostThread) -> None:
    code = (
        "import { echo } from '@codemode/servers/slow';\n"
        "console.log('n', 1, {b: 2, a: [1]});\n"
        "console.warn('careful'); console.error('bad'); console.debug('dbg');\n"
        "await echo({value: 'SECRET-INPUT-1234'});\n"
        "globalThis.__codemode_result__ = {done: true};"
    )
    r = host.run(code)
    assert set(r) >= {"logs", "result", "diagnostics", "toolTrace"}
    assert r["result"] == {"done": True}
    assert [e["level"] for e in r["logs"]] == ["log", "warn", "error", "debug"]
    for entry in r["logs"]:
        assert set(entry) == {"level", "message", "timeMs"} and isinstance(entry["timeMs"], int)
    assert r["logs"][0]["message"].startswith("n 1 {")
    (call,) = r["toolTrace"]
    # §3.3.2's fields, plus the approval decision (issue 12: extra fields are not excluded).
    assert (
        set(call) == {"serverId", "toolName", "durationMs", "ok", "approval"}
        and call["approval"] == "allowed"
    )
    assert call["serverId"] == "slow" and call["toolName"] == "echo" and call["ok"] is True
    assert isinstance(call["durationMs"], int)


def test_s3_3_2_tool_trace_never_holds_inputs_or_outputs(host: HostThread) -> None:
    code = (
        "import { echo, sleep } from '@codemode/servers/slow';\n"
        "await echo({value: 'SECRET-INPUT-1234'});\n"
        "try { await sleep({ms: 'SECRET-BAD-5678'}); } catch (e) {}\n"
    )
    r = host.run(code)
    trace = json.dumps(r["toolTrace"])
    assert (
        len(r["toolTrace"]) == 2 and r["toolTrace"][1]["ok"] is False and r["toolTrace"][1]["error"]
    )
    assert "SECRET" not in trace


def test_s3_3_4_syntax_error_is_a_diagnostic(host: HostThread) -> None:
    r = host.run("const x = ;\n")
    assert r["result"] is None and r["logs"] == []
    diag = errors(r)[0]
    assert diag["code"] == "SYNTAX_ERROR" and diag["message"]


def test_s3_3_4_uncaught_exception_keeps_logs_and_completed_calls(host: HostThread) -> None:
    code = (
        "import { tick } from '@codemode/servers/slow';\n"
        "console.log('start'); await tick();\n"
        "globalThis.__codemode_result__ = 'partial';\n"
        "throw new Error('boom');"
    )
    r = host.run(code)
    assert r["result"] is None
    assert [e["message"] for e in r["logs"]] == ["start"]
    assert errors(r)[0]["code"] == "UNCAUGHT_EXCEPTION" and "boom" in errors(r)[0]["message"]
    assert [t["toolName"] for t in r["toolTrace"]] == ["tick"]


def test_s3_3_4_import_failure_is_a_diagnostic(host: HostThread) -> None:
    r = host.run("import * as x from '@codemode/servers/does-not-exist';\nconsole.log(x);")
    assert r["result"] is None
    assert errors(r)[0]["code"] == "IMPORT_FAILURE"


def test_s3_2_4_timeout_cancels_and_reports(host: HostThread) -> None:
    r = host.run(
        "import { sleep } from '@codemode/servers/slow';\nconsole.log('go');\nawait sleep({ms: 20000});",
        limits={"timeoutMs": 800},
    )
    assert r["result"] is None
    assert errors(r)[0]["code"] == "SANDBOX_LIMIT"
    assert [e["message"] for e in r["logs"]][:1] == ["go"]


def test_s1_4_every_run_starts_with_a_fresh_sandbox(host: HostThread) -> None:
    host.run("globalThis.leftover = 7; Object.prototype.polluted = 1;")
    r = host.run(
        "globalThis.__codemode_result__ = [typeof globalThis.leftover, typeof ({}).polluted];"
    )
    assert assert_ok(r) == ["undefined", "undefined"]


def test_s3_response_is_json_serialisable(host: HostThread, tmp_path: Path) -> None:
    r = host.run("globalThis.__codemode_result__ = {a: [1, 'x', null, true]};")
    assert json.loads(json.dumps(r)) == r


def test_s3_3_1_log_truncation_appends_a_final_warning(host: HostThread) -> None:
    r = host.run(
        "for (let i = 0; i < 50; i++) console.log('line', i);\nglobalThis.__codemode_result__ = 'done';",
        limits={"maxLogBytes": 100},
    )
    assert r["result"] == "done"
    assert r["logs"][-1]["level"] == "warn" and "100" in r["logs"][-1]["message"]
    assert sum(len(e["message"].encode()) for e in r["logs"][:-1]) <= 100


def test_s3_2_4_memory_limit_is_a_sandbox_limit(host: HostThread) -> None:
    r = host.run(
        "console.log('start');\nconst a = []; for (;;) a.push('x'.repeat(1024) + a.length);",
        limits={"maxMemoryBytes": 8 * 1024 * 1024, "timeoutMs": 10_000},
    )
    assert r["result"] is None
    diag = errors(r)[0]
    assert diag["code"] == "SANDBOX_LIMIT" and diag.get("errorClass") == "SandboxLimitError"
    assert r["logs"][0]["message"] == "start"


@pytest.mark.slow
def test_s3_2_4_the_deadline_includes_connecting_servers(host: HostThread) -> None:
    started = time.monotonic()
    r = host.run(
        "import * as hang from '@codemode/servers/hang';\n"
        "try { await hang.ping(); } catch (e) { console.log(e.name); }",
        limits={"timeoutMs": 1500},
    )
    took = time.monotonic() - started
    assert (
        took < PROMPT_S
    )  # bounded by timeoutMs (and the wait before the script), not hang's connect timeout
    assert [
        d
        for d in r["diagnostics"]
        if d["code"] == "CAPABILITY_UNAVAILABLE" and "hang" in d["message"]
    ]
    assert errors(r) and errors(r)[0]["code"] == "SANDBOX_LIMIT"
    # the script's call was waiting for hang: the timeout says so, and how to go on
    assert "waited for server 'hang' to connect" in errors(r)[0]["message"], errors(r)
    assert "run it again" in errors(r)[0]["hint"]
