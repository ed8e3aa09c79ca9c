"""Spec §3.2.4 and §11, limits that bound the response: logs, toolTrace and the whole §3.3 response.

maxLogBytes counted only message bytes (300,000 empty `console.log()` calls made a 14.8 MB
response) and toolTrace copied script-chosen names verbatim (an 8 MB server id × 30 calls made
151 MB). Now every part has a documented cap (runtime/limits.py): log entries are bounded by
their overhead too (§3.3.1, still with the truncation warning), trace names and errors are cut,
the trace keeps MAX_TRACE_ENTRIES entries (then a TOOL_TRACE_TRUNCATED warning, §3.3.2), a
diagnostic's text MAX_DIAGNOSTIC_CHARS (§3.3.3) and the result MAX_RESULT_BYTES (over it:
SANDBOX_LIMIT, §7.4, logs kept). So the whole response has a bound that no script can lift.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode_gen.runtime import limits as L
from codemode_gen.runtime.logs import max_log_entries

from .script_support import (
    HostThread,
    assert_section_3_3,
    assert_still_serves,
    codes,
    errors,
    run_cli,
    timed,
    within_deadline,
)

pytestmark = pytest.mark.timeout(180)

TIMEOUT_MS = 20_000
NAME_CHARS = 1_000_000  # a script-chosen server id of a megabyte
# Response bytes besides logs and result that a run may take: the trace at its cap (names and
# error cut, as UTF-8) and a handful of diagnostics.
TRACE_BYTES = L.MAX_TRACE_ENTRIES * (3 * (2 * L.MAX_NAME_CHARS + L.MAX_TRACE_ERROR_CHARS) + 120)
DIAGNOSTIC_BYTES = 10 * 3 * (3 * L.MAX_DIAGNOSTIC_CHARS + 100)

# Everything at once: a log flood of empty lines, megabyte names, more calls than the trace
# keeps, and a 20 MB error message.
EVERYTHING = f"""
import {{ callTool }} from '@codemode/host';
for (let i = 0; i < 300000; i++) console.log();
const big = 'n'.repeat({NAME_CHARS});
for (let i = 0; i < 30; i++) {{ try {{ await callTool(big, big, {{}}); }} catch (e) {{}} }}
for (let i = 0; i < {L.MAX_TRACE_ENTRIES + 200}; i++) {{ try {{ await callTool('nope', 'x', {{}}); }} catch (e) {{}} }}
throw new Error('x'.repeat(2e7));
"""
EVERYTHING_LIMITS = {"timeoutMs": TIMEOUT_MS, "maxToolCalls": 5000, "maxMemoryBytes": 256 << 20}


def response_bound(max_log_bytes: int) -> int:
    """What the documented caps allow a response to take (ASCII content: no JSON escapes)."""
    logs = (
        max_log_bytes
        + (max_log_entries(max_log_bytes) + 1) * (L.LOG_ENTRY_OVERHEAD_BYTES + 20)
        + 500
    )
    return logs + TRACE_BYTES + DIAGNOSTIC_BYTES


def size(response: object) -> int:
    return len(json.dumps(response, ensure_ascii=False).encode("utf-8"))


@pytest.mark.parametrize("max_log_bytes", [None, 100, 1 << 20])
def test_s3_3_1_empty_log_floods_are_bounded_by_entry_overhead(
    host: HostThread, max_log_bytes: int | None
) -> None:
    limits = {"timeoutMs": TIMEOUT_MS} | ({"maxLogBytes": max_log_bytes} if max_log_bytes else {})
    response, elapsed = timed(
        host,
        "for (let i = 0; i < 300000; i++) console.log();\nglobalThis.__codemode_result__ = 'done';",
        limits=limits,
    )
    assert within_deadline(elapsed, TIMEOUT_MS)
    budget = max_log_bytes or L.DEFAULT_MAX_LOG_BYTES
    logs = response["logs"]
    assert len(logs) == max_log_entries(budget) + 1  # the kept entries, then the warning
    assert (
        logs[-1]["level"] == "warn"
        and "maxLogBytes" in logs[-1]["message"]
        and str(budget) in logs[-1]["message"]
    )
    assert size(logs) <= 2 * max(budget, L.MIN_LOG_ENTRIES * L.LOG_ENTRY_OVERHEAD_BYTES) + 10_000
    assert response["result"] == "done" and not errors(response)  # truncation is not an error
    assert_still_serves(host)


def test_s3_3_1_message_bytes_are_still_counted_as_before(host: HostThread) -> None:
    response, _ = timed(
        host,
        "for (let i = 0; i < 1000; i++) console.log('line ' + i);",
        limits={"maxLogBytes": 100},
    )
    assert sum(len(e["message"].encode()) for e in response["logs"][:-1]) == 100
    assert response["logs"][0]["message"] == "line 0"


def test_s3_3_2_trace_names_are_cut_and_the_trace_is_capped(host: HostThread) -> None:
    code = f"""
import {{ callTool }} from '@codemode/host';
const big = 's'.repeat({NAME_CHARS});
for (let i = 0; i < 30; i++) {{ try {{ await callTool(big, 'tick', {{}}); }} catch (e) {{}} }}
for (let i = 0; i < {L.MAX_TRACE_ENTRIES}; i++) {{ try {{ await callTool('s', 'nope', {{}}); }} catch (e) {{}} }}
globalThis.__codemode_result__ = 'done';
"""
    before = assert_still_serves(host)
    response, elapsed = timed(host, code, limits={"timeoutMs": TIMEOUT_MS, "maxToolCalls": 5000})
    assert within_deadline(elapsed, TIMEOUT_MS)
    assert response["result"] == "done"
    trace = response["toolTrace"]
    assert len(trace) == L.MAX_TRACE_ENTRIES
    assert all(len(t["serverId"]) <= L.MAX_NAME_CHARS + 1 for t in trace)
    assert (
        trace[0]["serverId"] == "s" * L.MAX_NAME_CHARS + "…"
        and trace[0]["error"] == "ServerNotFoundError: no such server"
    )
    [cut] = [d for d in response["diagnostics"] if d["code"] == "TOOL_TRACE_TRUNCATED"]
    assert cut["severity"] == "warning" and "30 later calls" in cut["message"]
    assert size(response) <= TRACE_BYTES + DIAGNOSTIC_BYTES
    assert_still_serves(host, before)


EMPTY_REQUEST = (
    '{"op":"call","serverId":"s","toolName":"tick","input":{"blob":""}}'  # as host.js writes it
)


def test_s7_2_input_over_the_size_cap_is_refused_before_the_host_parses_it(
    host: HostThread,
) -> None:
    before = assert_still_serves(host)
    code = (
        "import { tick } from '@codemode/servers/s';\n"
        f"try {{ await tick({{blob: 'b'.repeat({L.MAX_INPUT_BYTES})}}); }}\n"
        "catch (e) { globalThis.__codemode_result__ = {name: e.name, expected: e.expected, received: e.received}; }"
    )
    response, elapsed = timed(host, code, limits={"timeoutMs": TIMEOUT_MS})
    assert within_deadline(elapsed, TIMEOUT_MS)
    assert response["result"] == {
        "name": "SchemaValidationError",
        "expected": f"at most {L.MAX_INPUT_BYTES} bytes of JSON",
        "received": f"{L.MAX_INPUT_BYTES + len(EMPTY_REQUEST)} bytes",
    }
    assert response["toolTrace"][0]["ok"] is False
    assert "BRIDGE_LIMIT" in codes(response, "warning")
    assert_still_serves(host, before)  # never sent


def test_s7_4_result_over_the_cap_is_a_sandbox_limit_with_logs_kept(host: HostThread) -> None:
    code = f"console.log('kept');\nglobalThis.__codemode_result__ = 'r'.repeat({L.MAX_RESULT_BYTES + 1});"
    response, elapsed = timed(
        host, code, limits={"timeoutMs": TIMEOUT_MS, "maxMemoryBytes": 256 << 20}
    )
    assert within_deadline(elapsed, TIMEOUT_MS)
    assert response["result"] is None
    [error] = errors(response)
    assert error["code"] == "SANDBOX_LIMIT" and error["errorClass"] == "SandboxLimitError"
    assert str(L.MAX_RESULT_BYTES) in error["message"]
    assert response["logs"] == [
        {"level": "log", "message": "kept", "timeMs": response["logs"][0]["timeMs"]}
    ]
    # a result just under the cap is returned whole
    ok, _ = timed(
        host,
        f"globalThis.__codemode_result__ = 'r'.repeat({L.MAX_RESULT_BYTES - 2});",
        limits={"timeoutMs": TIMEOUT_MS, "maxMemoryBytes": 256 << 20},
    )
    assert not errors(ok) and len(ok["result"]) == L.MAX_RESULT_BYTES - 2
    assert_still_serves(host)


@pytest.mark.slow
def test_s3_3_the_whole_response_is_bounded_whatever_the_script_does(host: HostThread) -> None:
    response, elapsed = timed(host, EVERYTHING, limits=EVERYTHING_LIMITS)
    assert within_deadline(elapsed, TIMEOUT_MS)
    assert_section_3_3(response)
    assert codes(response, "error") == ["UNCAUGHT_EXCEPTION"]
    assert "TOOL_TRACE_TRUNCATED" in codes(response, "warning")
    assert size(response) <= response_bound(L.DEFAULT_MAX_LOG_BYTES)
    assert_still_serves(host)


@pytest.mark.slow
def test_s3_3_run_cli_output_is_bounded_too(project: Path) -> None:
    proc, response = run_cli(project, EVERYTHING, "--limits", json.dumps(EVERYTHING_LIMITS))
    assert proc.returncode == 1
    assert codes(response, "error") == ["UNCAUGHT_EXCEPTION"]
    # indent=2 adds a few bytes per line on top of the compact bound
    assert len(proc.stdout.encode()) <= 2 * response_bound(L.DEFAULT_MAX_LOG_BYTES)
