"""§7.1/§7.3: credentials revoked mid-session reach the script as AuthenticationError.

A server that accepted the connection but answers a later call with HTTP 401 (token revoked
or expired) must not look like a generic JSON-RPC failure: the script sees
AuthenticationError (a ToolCallError, §10) with a hint, and carries on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode_gen.config import ServerConfig
from tests.runtime_support import HostThread, assert_ok, fixture_set, start_http, write_out

TOKEN = "revocable-token-1234"


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s7-revoked")
    proc, url = start_http("auth_http", "--token", TOKEN)
    out = base / "out"
    tools = [
        {"name": n, "inputSchema": {"type": "object", "properties": {}}}
        for n in ("revoke", "whoami")
    ]
    write_out(out, [fixture_set("auth", tools)])
    configs = {
        "auth": ServerConfig(
            id="auth",
            transport="http",
            url=f"{url}/mcp",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    }
    h = HostThread(configs, out, base / "logs", approve_all=True)  # `revoke` is destructive
    yield h
    h.close()
    proc.kill()
    proc.wait(timeout=10)


@pytest.mark.slow
def test_s7_1_revoked_credentials_become_authentication_error(host: HostThread) -> None:
    response = host.run(
        "import { whoami, revoke } from '@codemode/servers/auth';\n"
        "import { AuthenticationError, ToolCallError } from '@codemode/errors';\n"
        "const before = await whoami();\n"
        "await revoke();\n"
        "let caught = null;\n"
        "try { await whoami(); } catch (e) {\n"
        "  caught = {name: e.name, auth: e instanceof AuthenticationError, call: e instanceof ToolCallError,\n"
        "            code: e.code, hint: e.hint};\n"
        "}\n"
        "globalThis.__codemode_result__ = {before: before.tokenSuffix, caught};"
    )
    result = assert_ok(response)
    assert result["before"] == TOKEN[-4:]
    caught = result["caught"]
    assert caught["name"] == "AuthenticationError" and caught["auth"] and caught["call"]
    assert caught["code"] == 401 and "credentials" in caught["hint"]
    assert [t["ok"] for t in response["toolTrace"]] == [True, True, False]
    assert TOKEN not in str(response)
