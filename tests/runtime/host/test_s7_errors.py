"""Spec §7 (error classes, hints, validation errors) and §10 (a failed call does not abort).

Every error is produced for real: a server that answers isError, one that answers a JSON-RPC
error, one that is too slow, one whose process dies at start, one behind bearer auth with the
wrong token (tests/servers/auth_http.py over Streamable HTTP), and an out/ that lists a tool
the live server no longer has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.config import ServerConfig
from tests.runtime_support import (
    HostThread,
    assert_ok,
    errors,
    fixture_set,
    start_http,
    stdio,
    write_out,
)

pytestmark = pytest.mark.timeout(120)

TOKEN = "s3cret-token-4242"

CATCH = """
import * as E from '@codemode/errors';
async function attempt(fn) {
  try { return {value: await fn()}; }
  catch (e) {
    const classes = Object.keys(E).filter(k => e instanceof E[k]);
    const out = {name: e.name, classes, message: e.message, hint: e.hint};
    for (const k of ['toolName', 'exportName', 'path', 'expected', 'received', 'example', 'serverId', 'code', 'content']) {
      if (e[k] !== undefined) out[k] = e[k];
    }
    return {error: out};
  }
}
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s7")
    proc, url = start_http("auth_http", "--token", TOKEN)
    out = base / "out"
    write_out(
        out,
        [
            fixture_set("broken", [{"name": "ping", "inputSchema": {"type": "object"}}]),
            # generated while its credentials were still valid
            fixture_set(
                "locked", [{"name": "whoami", "inputSchema": {"type": "object", "properties": {}}}]
            ),
            # out/ was generated when `stale` still had a tool called `vanished`
            fixture_set(
                "stale",
                [
                    {"name": "tick", "inputSchema": {"type": "object"}},
                    {"name": "vanished", "inputSchema": {"type": "object"}},
                ],
            ),
        ],
    )
    configs = {
        "slow": stdio("slow", "slow", blocklist=("env",)),
        "impatient": stdio("impatient", "slow", call_timeout=0.5),
        "broken": stdio("broken", "crash_at_start"),
        "stale": stdio("stale", "slow"),
        "locked": ServerConfig(
            id="locked",
            transport="http",
            url=f"{url}/mcp",
            headers={"Authorization": "Bearer wrong-token"},
        ),
        "open": ServerConfig(
            id="open",
            transport="http",
            url=f"{url}/mcp",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ),
    }
    h = HostThread(configs, out, base / "logs")
    yield h
    h.close()
    proc.kill()
    proc.wait(timeout=10)


def attempt(host: HostThread, imports: str, call: str) -> dict[str, Any]:
    r = host.run(
        f"{imports}\n{CATCH}\nglobalThis.__codemode_result__ = await attempt(() => {call});"
    )
    result: dict[str, Any] = assert_ok(r)
    return result


def check_error(result: dict[str, Any], cls: str) -> dict[str, Any]:
    assert "error" in result, result
    err: dict[str, Any] = result["error"]
    assert err["name"] == cls
    assert cls in err["classes"] and "CodemodeError" in err["classes"]  # §7.1 instanceof works
    assert isinstance(err["hint"], str) and err["hint"].strip()  # §7.3
    return err


def test_s7_2_schema_validation_error_has_pointer_expected_received_and_example(
    host: HostThread,
) -> None:
    err = check_error(
        attempt(
            host,
            "import { book_room } from '@codemode/servers/slow';",
            "book_room({room: 'A1', minutes: 'ten'})",
        ),
        "SchemaValidationError",
    )
    assert err["toolName"] == "book_room" and err["exportName"] == "book_room"
    assert err["path"] == "/minutes"
    assert "integer" in err["expected"] and "ten" in err["received"]
    assert err["example"] == {"room": "A1", "minutes": 30}  # the schema's own `examples`


def test_s7_2_missing_input_reports_the_required_property(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { sleep } from '@codemode/servers/slow';", "sleep()"),
        "SchemaValidationError",
    )
    assert err["path"] == "/ms" and err["received"] == "undefined"
    assert isinstance(err["example"], dict) and "ms" in err["example"]


def test_s7_1_tool_call_error_carries_the_servers_text(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { tool_error } from '@codemode/servers/slow';", "tool_error()"),
        "ToolCallError",
    )
    assert "disk full" in err["message"]
    assert err["content"][0]["type"] == "text"
    assert err["serverId"] == "slow" and err["toolName"] == "tool_error"


def test_s7_1_json_rpc_error_is_a_tool_call_error_with_code(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { rpc_error } from '@codemode/servers/slow';", "rpc_error()"),
        "ToolCallError",
    )
    assert err["code"] == -32050 and "quota" in err["message"]


def test_s7_4_call_timeout_is_a_tool_call_error(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { sleep } from '@codemode/servers/impatient';", "sleep({ms: 5000})"),
        "ToolCallError",
    )
    assert err["code"] == "timeout"


def test_s7_1_tool_not_found_when_the_live_server_lost_the_tool(host: HostThread) -> None:
    r = host.run(
        "import { vanished } from '@codemode/servers/stale';\n"
        + CATCH
        + "globalThis.__codemode_result__ = await attempt(() => vanished());"
    )
    err = check_error(assert_ok(r), "ToolNotFoundError")
    assert err["serverId"] == "stale" and err["toolName"] == "vanished"
    stale = [d for d in r["diagnostics"] if d["code"] == "STALE_OUT"]
    assert stale and stale[0]["severity"] == "warning" and "vanished" in stale[0]["message"]


def test_s7_1_blocklisted_tool_is_not_found(host: HostThread) -> None:
    r = host.run(
        "import * as slow from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = typeof slow.env;"
    )
    assert assert_ok(r) == "undefined"


def test_s7_1_server_not_found_for_a_dead_server(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { ping } from '@codemode/servers/broken';", "ping()"),
        "ServerNotFoundError",
    )
    assert err["serverId"] == "broken" and "broken" in err["message"]


def test_s7_1_authentication_error_for_rejected_credentials(host: HostThread) -> None:
    err = check_error(
        attempt(host, "import { whoami } from '@codemode/servers/locked';", "whoami()"),
        "AuthenticationError",
    )
    assert "ToolCallError" in err["classes"]  # AuthenticationError extends ToolCallError
    assert "wrong-token" not in json.dumps(err)


def test_s7_1_valid_credentials_work(host: HostThread) -> None:
    result = attempt(host, "import { whoami } from '@codemode/servers/open';", "whoami()")
    assert result["value"]["tokenSuffix"] == TOKEN[-4:]


def test_s10_failed_call_does_not_abort_the_script(host: HostThread) -> None:
    r = host.run(
        "import { tool_error, tick } from '@codemode/servers/slow';\n"
        "let caught = null;\n"
        "try { await tool_error(); } catch (e) { caught = e.name; }\n"
        "const after = await tick();\n"
        "globalThis.__codemode_result__ = {caught, after: typeof after.ticks};"
    )
    assert assert_ok(r) == {"caught": "ToolCallError", "after": "number"}
    assert [t["ok"] for t in r["toolTrace"]] == [False, True]  # the Python API lists every call
    assert (
        "disk full" in r["toolTrace"][0]["error"] and "toolSummary" not in r
    )  # the server's own words


def test_s7_uncaught_tool_error_names_its_class_in_the_diagnostic(host: HostThread) -> None:
    r = host.run("import { tool_error } from '@codemode/servers/slow';\nawait tool_error();")
    diag = errors(r)[0]
    assert diag["code"] == "UNCAUGHT_EXCEPTION" and diag.get("errorClass") == "ToolCallError"
    assert diag.get("hint")
