"""Spec §3.3.2 and §7.4, late work: after the script ends, nothing reaches a server and the
trace tells the truth.

A tool call started from a result's `toJSON` (run while the host serialises the result, after
the script ended) still ran on the server while toolTrace said it was cancelled. The prelude
now closes the door to the host when the script ends (§1.4, §7.4): such a call gets a
ToolCallError in JS and is never sent, so the server never sees it and toolTrace (§3.3.2)
lists only the calls that were made. A call still in flight when a run is cut short is
cancelled on the server (§7.4) and the trace says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .script_support import (
    HostThread,
    assert_still_serves,
    codes,
    errors,
    run_cli,
    timed,
    within_deadline,
)

pytestmark = pytest.mark.timeout(180)

TIMEOUT_MS = 4000
IMPORT = "import { tick, sleep } from '@codemode/servers/s';\n"

LATE = {
    # serialising the result (§3.2.2) calls toJSON after the script ended
    "result toJSON": "globalThis.__codemode_result__ = {toJSON() { tick(); tick().catch(() => {}); return 'x'; }};",
    "nested toJSON": "globalThis.__codemode_result__ = [1, {a: {toJSON() { tick(); return 2; }}}];",
    # describing an uncaught error (§3.3.4) reads its fields and serialises a thrown object
    "thrown toJSON": "throw {toJSON() { tick(); return 'boom'; }};",
    "error getter": "const e = new Error('boom'); Object.defineProperty(e, 'stack', {get() { tick(); return ''; }}); throw e;",
    "thrown getter": "throw {get message() { tick(); return 'boom'; }, get stack() { tick(); return ''; }};",
}


@pytest.mark.parametrize("late", list(LATE.values()), ids=list(LATE))
def test_s7_4_calls_after_the_script_ended_never_reach_the_server(
    host: HostThread, late: str
) -> None:
    before = assert_still_serves(host)
    response, elapsed = timed(
        host, IMPORT + "await tick();\n" + late, limits={"timeoutMs": TIMEOUT_MS}
    )
    assert within_deadline(elapsed, TIMEOUT_MS)
    # the trace lists exactly the one call the script made while it ran, and it worked
    assert [(t["toolName"], t["ok"]) for t in response["toolTrace"]] == [("tick", True)]
    assert "SANDBOX_LIMIT" not in codes(response)
    assert_still_serves(host, before + 1)  # the server saw only that call


def test_s3_2_2_a_result_to_json_still_serialises(host: HostThread) -> None:
    """Closing the door changes nothing else: toJSON runs and its value is the result."""
    response, _ = timed(
        host, IMPORT + "globalThis.__codemode_result__ = {toJSON() { return {late: true}; }};"
    )
    assert response["result"] == {"late": True} and not errors(response)


@pytest.mark.slow
def test_s7_4_in_flight_calls_cut_short_are_reported_as_cancelled(host: HostThread) -> None:
    before = assert_still_serves(host)
    timeout_ms = 1000
    code = IMPORT + "tick(); await sleep({ms: 30000});"
    response, elapsed = timed(host, code, limits={"timeoutMs": timeout_ms})
    assert within_deadline(elapsed, timeout_ms), elapsed
    assert codes(response, "error") == ["SANDBOX_LIMIT"]
    trace = {t["toolName"]: t for t in response["toolTrace"]}
    assert trace["tick"]["ok"] is True
    assert trace["sleep"]["ok"] is False and "cancelled" in trace["sleep"]["error"]
    assert_still_serves(host, before + 1)


@pytest.mark.slow
def test_s7_4_run_cli_sends_no_late_call(project: Path) -> None:
    code = IMPORT + "await tick();\n" + LATE["result toJSON"]
    proc, response = run_cli(project, code)
    assert proc.returncode == 0 and response["result"] == "x"
    assert [t["toolName"] for t in response["toolTrace"]] == ["tick"]
