"""Spec §11, deep nesting: what crosses the sandbox boundary is bounded in depth.

A tool input nested ~1,000 levels or a result nested ~500 raised RecursionError in the host
(`run` printed a traceback, the API raised, `serve` answered a bare JSON-RPC error); an input
nested ~300 levels made the MCP client fail to serialise it, which killed the session and
restarted the server. Now: an input deeper than MAX_JSON_DEPTH is a SchemaValidationError
(§7.2) that never reaches the server, a result deeper is a ToolCallError (§7.1), the script's own
result deeper is RESULT_NOT_SERIALIZABLE (§3.2.2), each with a diagnostic (§3.3.3); the session
and the server process survive and serve the next call.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen import jsonio
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.limits import MAX_JSON_DEPTH

from .script_support import (
    TICKS,
    HostThread,
    assert_still_serves,
    codes,
    errors,
    host_fixture,
    run_cli,
    serve_run,
    serve_session,
    server_config,
    timed,
    within_deadline,
)

pytestmark = pytest.mark.timeout(180)

TIMEOUT_MS = 5000

# Catches the call's error and reports what the script saw.
CATCH = """
async function attempt(fn) {
  try { return {value: await fn()}; }
  catch (e) { return {error: {name: e.name, message: e.message, path: e.path, hint: e.hint, serverId: e.serverId}}; }
}
"""


def nested_input(depth: int) -> str:
    """JS that builds `v`, an array nested `depth` levels."""
    return f"let v = 1; for (let i = 0; i < {depth}; i++) v = [v];\n"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    yield from host_fixture(tmp_path_factory, "nesting", j=server_config("j", unwrap="json"))


def attempt(host: HostThread, setup: str, call: str) -> tuple[dict[str, Any], dict[str, Any]]:
    code = f"import {{ echo, tick, deep }} from '@codemode/servers/s';\n{CATCH}\n{setup}globalThis.__codemode_result__ = await attempt(() => {call});"
    response, elapsed = timed(host, code, limits={"timeoutMs": TIMEOUT_MS})
    assert within_deadline(elapsed, TIMEOUT_MS), elapsed
    assert not errors(response), response["diagnostics"]
    result: dict[str, Any] = response["result"]
    return response, result


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 300, 1000, 2000])
def test_s7_2_too_deep_input_is_a_schema_validation_error_and_never_sent(
    host: HostThread, depth: int
) -> None:
    before = assert_still_serves(host)
    response, result = attempt(host, nested_input(depth), "tick({value: v})")
    error = result["error"]
    assert error["name"] == "SchemaValidationError"
    assert f"at most {MAX_JSON_DEPTH} levels" in error["message"] and error["path"] == ""
    assert error["hint"]
    # §3.3.2: the trace says what happened; §3.3.3: so does a diagnostic, even though caught
    [trace] = response["toolTrace"]
    assert (
        trace["toolName"] == "tick"
        and trace["ok"] is False
        and "SchemaValidationError" in trace["error"]
    )
    assert "BRIDGE_LIMIT" in codes(response, "warning")
    # nothing reached the server, and the same session (same server process) still serves
    assert_still_serves(host, before)


def test_s7_2_input_too_deep_for_the_engine_itself_is_a_type_error(host: HostThread) -> None:
    """JSON.stringify in QuickJS gives up first (its stack): a TypeError in JS, nothing sent."""
    before = assert_still_serves(host)
    response, result = attempt(host, nested_input(200_000), "tick({value: v})")
    assert result["error"]["name"] == "TypeError" and "JSON" in result["error"]["message"]
    assert response["toolTrace"] == []
    assert_still_serves(host, before)


def test_s7_2_input_at_the_depth_limit_still_works(host: HostThread) -> None:
    # echo's input is {value: v}: one level for the object around the array
    setup = nested_input(MAX_JSON_DEPTH - 1) + (
        "async function depthOfEcho() { let x = (await echo({value: v})).value, d = 0;"
        " while (Array.isArray(x)) { x = x[0]; d++; } return d; }\n"
    )
    _, result = attempt(host, setup, "depthOfEcho()")
    assert result == {"value": MAX_JSON_DEPTH - 1}


def test_s7_2_depth_hidden_behind_to_json_is_caught_too(host: HostThread) -> None:
    """The check is on what is sent (after toJSON), not on the object the script passed."""
    setup = nested_input(500) + "const sneaky = {toJSON() { return v; }};\n"
    _, result = attempt(host, setup, "echo({value: sneaky})")
    assert result["error"]["name"] == "SchemaValidationError"
    assert_still_serves(host)


@pytest.mark.parametrize(
    ("server", "shape", "depth"),
    [
        (
            "s",
            "structured",
            MAX_JSON_DEPTH + 5,
        ),  # structuredContent, within what MCP transports carry
        ("j", "text", 500),  # a text block of JSON, parsed under unwrap = "json"
        ("s", "error", 150),  # an isError result whose content carries the nesting
    ],
)
def test_s7_1_too_deep_result_is_a_tool_call_error(
    host: HostThread, server: str, shape: str, depth: int
) -> None:
    before = assert_still_serves(host)
    code = (
        f"import {{ deep }} from '@codemode/servers/{server}';\n{CATCH}\n"
        f"globalThis.__codemode_result__ = await attempt(() => deep({{depth: {depth}, shape: '{shape}'}}));"
    )
    response, elapsed = timed(host, code, limits={"timeoutMs": TIMEOUT_MS})
    assert within_deadline(elapsed, TIMEOUT_MS), elapsed
    assert not errors(response), response["diagnostics"]
    error = response["result"]["error"]
    assert (
        error["name"] == "ToolCallError"
        and f"deeper than {MAX_JSON_DEPTH} levels" in error["message"]
    )
    assert error["serverId"] == server and error["hint"]
    [trace] = response["toolTrace"]
    assert trace["ok"] is False and "too deep" in trace["error"]
    assert "BRIDGE_LIMIT" in codes(response, "warning")
    assert_still_serves(host, before)


def test_s3_2_2_result_deeper_than_the_limit_is_not_serializable(host: HostThread) -> None:
    """The script's own result: parsed JSON text of 500 levels, and 20,000 levels built in JS."""
    for build in (
        "import { deep } from '@codemode/servers/s';\nconst v = JSON.parse(await deep({depth: 500, shape: 'text'}));\n",
        nested_input(20_000),
    ):
        response, elapsed = timed(
            host,
            build + "console.log('kept');\nglobalThis.__codemode_result__ = v;",
            limits={"timeoutMs": TIMEOUT_MS},
        )
        assert within_deadline(elapsed, TIMEOUT_MS), elapsed
        assert response["result"] is None
        [error] = errors(response)
        assert error["code"] == "RESULT_NOT_SERIALIZABLE"
        assert response["logs"][0]["message"] == "kept"  # §3.3.4: logs kept
    assert_still_serves(host)


def test_s3_3_host_walks_are_iterative() -> None:
    """Host-side helpers never recurse on a value's depth."""
    deep: Any = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    assert jsonsafe.json_depth_exceeds(deep, MAX_JSON_DEPTH)
    safe = jsonsafe.utf8_safe_json(deep)
    for _ in range(100_000):
        safe = safe[0]
    assert safe == "\ufffd"
    text = "[" * 100_000 + "]" * 100_000
    assert jsonio.json_text_depth_exceeds(text, MAX_JSON_DEPTH)
    # brackets inside strings (escaped quotes included) do not count
    assert not jsonio.json_text_depth_exceeds('["' + "[" * 500 + '\\"' + "{" * 500 + '"]', 10)
    assert jsonio.json_text_depth_exceeds(
        '[{"a":[[1]]}]', 3
    ) and not jsonio.json_text_depth_exceeds('[{"a":[[1]]}]', 4)


# ---------------------------------------------------------------------------- the CLI and serve


@pytest.mark.slow
def test_s3_3_4_run_cli_answers_deep_nesting_with_a_response(project: Path) -> None:
    code = (
        f"import {{ echo, deep }} from '@codemode/servers/s';\n{nested_input(1000)}"
        "try { await echo({value: v}); } catch (e) { console.log(e.name); }\n"
        "globalThis.__codemode_result__ = JSON.parse(await deep({depth: 500, shape: 'text'}));\n"
    )
    proc, response = run_cli(project, code)
    assert proc.returncode == 1
    assert response["logs"][0]["message"] == "SchemaValidationError"
    assert codes(response, "error") == ["RESULT_NOT_SERIALIZABLE"] and response["result"] is None


@pytest.mark.slow
def test_s3_3_4_serve_answers_deep_nesting_and_keeps_the_session(project: Path) -> None:
    async def body(client: Any) -> Any:
        first = await serve_run(
            client, "import { tick } from '@codemode/servers/s';\nawait tick();\n" + TICKS
        )
        deep_in = await serve_run(
            client,
            "import { tick } from '@codemode/servers/s';\n"
            + nested_input(300)
            + "await tick({value: v});",
        )
        deep_out = await serve_run(
            client,
            "import { deep } from '@codemode/servers/s';\n"
            "globalThis.__codemode_result__ = JSON.parse(await deep({depth: 500, shape: 'text'}));",
        )
        after = await serve_run(client, TICKS)
        return first, deep_in, deep_out, after

    first, deep_in, deep_out, after = serve_session(project, body)
    assert first["result"] == 1
    [error] = errors(deep_in)
    assert error["code"] == "UNCAUGHT_EXCEPTION" and error["errorClass"] == "SchemaValidationError"
    assert codes(deep_out, "error") == ["RESULT_NOT_SERIALIZABLE"]
    # same server process (its counter kept), so the session was never lost or restarted
    assert after["result"] == 1 and not errors(after)
