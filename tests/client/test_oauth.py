"""OAuth for remote servers, end to end: `codemode-gen auth`, and record/run/serve using and
refreshing the stored login (client/oauth.py, client/tokenstore.py).

Everything runs against tests/servers/oauth_http.py: a real MCP server on 127.0.0.1 protected by
the `mcp` SDK's server auth (its authorization server: metadata, dynamic registration, PKCE,
rotating refresh tokens, revocation; client credentials and private-key JWT added there). The
browser step of `auth login` is a test that follows the printed authorization URL with an HTTP
client, through the authorization server's redirect to codemode-gen's loopback port. Every
secret the server ever issued (its `/test/state`) and every stored token is then searched for in
every file of the project (fixtures/, out/, the server logs) and in everything printed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from codemode_gen.client.tokenstore import AUTH_DIR_ENV, STORE_ENV
from codemode_gen.config import ServerConfig
from codemode_gen.mcp_json import load_config
from tests.conftest import HANG_S, PROMPT_S, PYTHON, TEST_SERVERS, RunningServer, free_port
from tests.runtime_support import against_serve, child_env, script

ECHO_SECRET = "ci-secret-5c1f0d8e"  # the pre-registered client's secret (client credentials)
WHOAMI = (
    "import { whoami } from '@codemode/servers/{sid}';\n"
    "globalThis.__codemode_result__ = await whoami();"
)


# --------------------------------------------------------------------------- helpers


def write_config(project: Path, servers: dict[str, Any]) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return project / ".mcp.json"


def env_for(project: Path, **extra: str) -> dict[str, str]:
    """A codemode-gen process's environment: logins in the test's own folder (outside the
    project, as for a user), server logs inside the project (so the secret scan sees them)."""
    (project / "tmp").mkdir(parents=True, exist_ok=True)
    (project.parent / "auth").mkdir(mode=0o700, exist_ok=True)
    return child_env(
        TMPDIR=str(project / "tmp"),
        **{AUTH_DIR_ENV: str(project.parent / "auth"), STORE_ENV: "file"},
        **extra,
    )


def cli(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "codemode_gen", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


class Login:
    """`codemode-gen auth login SID --no-browser`, the URL it prints, and its outcome."""

    def __init__(self, project: Path, sid: str, env: dict[str, str], *extra: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "codemode_gen", "auth", "login", sid, "--no-browser", *extra],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        self.err = ""
        self.url: str | None = None
        for line in self.proc.stderr:  # the URL comes before any waiting; a failure closes stderr
            self.err += line
            found = re.search(r"(http://\S+/authorize\?\S+)", line)
            if found:
                self.url = found.group(1)
                break

    @property
    def redirect_uri(self) -> str:
        assert self.url is not None
        return parse_qs(urlsplit(self.url).query)["redirect_uri"][0]

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=HANG_S)
        self.err += err
        return self.proc.returncode, out, self.err


def remote_project(tmp_path: Path, url: str) -> tuple[Path, dict[str, str]]:
    """A project whose one server, `remote`, is the HTTP server at `url`, and its environment."""
    project = tmp_path / "project"
    env = env_for(project)
    write_config(project, {"remote": {"type": "http", "url": url}})
    return project, env


def login(project: Path, sid: str, env: dict[str, str]) -> str:
    """A whole login, the person's part played by an HTTP client; returns what it printed."""
    attempt = Login(project, sid, env)
    assert attempt.url is not None, attempt.finish()
    page = httpx2.get(attempt.url, follow_redirects=True, timeout=PROMPT_S)
    assert page.status_code == 200 and "logged in" in page.text
    code, out, err = attempt.finish()
    assert code == 0, err
    return out + err


def state(server: RunningServer) -> dict[str, Any]:
    found: dict[str, Any] = httpx2.get(f"{server.base}/test/state", timeout=PROMPT_S).json()
    return found


def grants(server: RunningServer, kind: str) -> int:
    return int(state(server)["stats"].get(f"grant:{kind}", 0))


def stored_records(auth_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(auth_dir.glob("*.json"))]


def all_secrets(server: RunningServer, auth_dir: Path, *extra: str) -> set[str]:
    found = set(state(server)["issued"]) | set(extra)
    for record in stored_records(auth_dir):
        tokens = record.get("tokens") or {}
        found |= {
            tokens.get("access_token"),
            tokens.get("refresh_token"),
            (record.get("clientInfo") or {}).get("client_secret"),
        } - {None}
    return {s for s in found if s}


def assert_no_secret(project: Path, outputs: list[str], secrets: set[str]) -> None:
    assert secrets, "nothing to look for"
    files = [p for p in project.rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, f"a secret is in {path}"
    for text in outputs:
        for secret in secrets:
            assert secret not in text, "a secret was printed"


def run_json(project: Path, code: str, env: dict[str, str]) -> tuple[dict[str, Any], str]:
    (project / "script.js").write_text(code)
    done = cli(project, "run", "script.js", "--no-pretty", "--yes", env=env)
    return json.loads(done.stdout), done.stderr


def serve_runs(
    project: Path, scripts: list[str | Callable[[], None]], env: dict[str, str]
) -> list[dict[str, Any]]:
    """One `codemode-gen serve` session running each script in turn (a callable in the list is
    called between two runs)."""

    async def body(client: Any) -> list[dict[str, Any]]:
        out = []
        for step in scripts:
            if callable(step):
                step()
                continue
            response = await client.call_tool("codemode.run", {"code": step})
            out.append(response.structured_content)
        return out

    return against_serve(project, body, env=env)


@pytest.fixture
def oauth_server(start_server: Callable[..., RunningServer]) -> Callable[..., RunningServer]:
    def start(*args: str) -> RunningServer:
        return start_server("oauth_http", "http", "--client", f"ci-bot:{ECHO_SECRET}", *args)

    return start


def recorded_project(
    project: Path, server: RunningServer, env: dict[str, str], sid: str = "remote"
) -> None:
    """A project whose `sid` is the OAuth server, logged in, recorded and generated."""
    write_config(project, {sid: {"type": "http", "url": server.mcp_url}})
    login(project, sid, env)
    done = cli(project, "record", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    done = cli(project, "generate", env=env)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- the full path


@pytest.mark.slow
def test_login_then_record_generate_run_and_serve_with_no_secret_anywhere(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project, env = remote_project(tmp_path, server.mcp_url)
    outputs = [login(project, "remote", env)]
    assert state(server)["stats"]["register"] == 1  # dynamic registration
    assert grants(server, "authorization_code") == 1

    status = cli(project, "auth", "status", env=env)
    outputs.append(status.stdout + status.stderr)
    assert (
        "remote  logged in" in status.stdout
        and "refreshable" in status.stdout
        and "scopes: mcp:read" in status.stdout
    )
    auth_dir = tmp_path / "auth"
    [token_file] = auth_dir.glob("*.json")
    assert (
        stat.S_IMODE(token_file.stat().st_mode) == 0o600
        and stat.S_IMODE(auth_dir.stat().st_mode) == 0o700
    )
    assert not any(project.rglob("*.json")) or all(
        "auth" not in p.parts for p in project.rglob("*.json")
    )

    for args in (("record",), ("record", "--check"), ("generate",)):
        done = cli(project, *args, env=env)
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (project / "fixtures" / "remote" / "tools.json").is_file()
    prompt = cli(project, "serve", "--print-prompt", env=env)
    outputs.append(prompt.stdout + prompt.stderr)
    assert prompt.returncode == 0 and '"@codemode/servers/remote"' in prompt.stdout

    response, err = run_json(project, WHOAMI.replace("{sid}", "remote"), env)
    outputs += [json.dumps(response), err]
    assert response["result"]["client"] == stored_records(auth_dir)[0]["clientInfo"]["client_id"]

    first, second = serve_runs(project, [WHOAMI.replace("{sid}", "remote")] * 2, env)
    outputs += [json.dumps(first), json.dumps(second), (project / "serve.stderr.log").read_text()]
    assert first["result"] == second["result"] == response["result"]

    # The Python API (CodeMode.from_config) uses the same stored login.
    api = subprocess.run(
        [
            PYTHON,
            "-c",
            "import asyncio, json\nfrom codemode_gen import CodeMode\n"
            "async def main():\n    async with CodeMode.from_config('.mcp.json') as cm:\n"
            f"        print(json.dumps(await cm.run({WHOAMI.replace('{sid}', 'remote')!r})))\nasyncio.run(main())",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    outputs.append(api.stdout + api.stderr)
    assert json.loads(api.stdout)["result"] == response["result"]

    assert grants(server, "authorization_code") == 1  # nobody logged in again
    assert_no_secret(project, outputs, all_secrets(server, auth_dir))


@pytest.mark.slow
def test_a_token_expiring_between_two_runs_of_one_serve_session_is_refreshed(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    ttl = 2
    server = oauth_server("--token-ttl", str(ttl))
    project = tmp_path / "project"
    env = env_for(project)
    recorded_project(project, server, env)
    auth_dir = tmp_path / "auth"
    before = grants(server, "refresh_token")
    old_access = stored_records(auth_dir)[0]["tokens"]["access_token"]

    def let_it_expire() -> None:  # the client's clock knows: refreshed before the request
        time.sleep(ttl + 1)

    def server_expires_it() -> None:  # only the server knows: refreshed on its 401
        httpx2.post(f"{server.base}/test/expire", timeout=PROMPT_S)

    code = WHOAMI.replace("{sid}", "remote")
    responses = serve_runs(project, [code, let_it_expire, code, server_expires_it, code], env)
    assert [r["diagnostics"] for r in responses] == [[], [], []]
    assert responses[0]["result"] == responses[1]["result"] == responses[2]["result"]
    assert grants(server, "refresh_token") >= before + 2
    assert grants(server, "authorization_code") == 1  # no new login was needed
    new_access = stored_records(auth_dir)[0]["tokens"]["access_token"]
    assert new_access != old_access  # the refreshed tokens were stored for the next process
    assert_no_secret(
        project,
        [json.dumps(responses), (project / "serve.stderr.log").read_text()],
        all_secrets(server, auth_dir),
    )


@pytest.mark.slow
def test_s7_3_a_revoked_refresh_token_is_an_authentication_error_for_that_server_only(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project = tmp_path / "project"
    env = env_for(project)
    write_config(
        project,
        {
            "remote": {"type": "http", "url": server.mcp_url},
            "notes": {"command": PYTHON, "args": [script("notes_server")]},
        },
    )
    login(project, "remote", env)
    assert cli(project, "record", env=env).returncode == 0
    assert cli(project, "generate", env=env).returncode == 0
    both = (
        "import { whoami } from '@codemode/servers/remote';\n"
        "import { list_notes } from '@codemode/servers/notes';\n"
        "import { AuthenticationError, ToolCallError } from '@codemode/errors';\n"
        "let caught = null, who = null;\n"
        "try { who = await whoami(); } catch (e) {\n"
        "  caught = {name: e.name, auth: e instanceof AuthenticationError, call: e instanceof ToolCallError,\n"
        "            message: e.message, hint: e.hint};\n"
        "}\n"
        "const notes = await list_notes({});\n"
        "globalThis.__codemode_result__ = {who: who && who.client, caught, notes: notes != null};"
    )

    def revoke() -> None:
        httpx2.post(f"{server.base}/test/revoke", timeout=PROMPT_S)

    def login_again() -> None:  # in a terminal, while serve keeps running; after a logout the
        # login registers a new client, so the server no longer knows serve's MCP session (404)
        assert cli(project, "auth", "logout", "remote", env=env).returncode == 0
        login(project, "remote", env)

    # In one serve session: connected while the login was good, then revoked under it; after a
    # new `auth login` the same session works again (no restart), on a new MCP session.
    first, second, third = serve_runs(project, [both, revoke, both, login_again, both], env)
    assert first["result"]["who"] and first["result"]["caught"] is None and first["result"]["notes"]
    caught = second["result"]["caught"]
    assert caught["name"] == "AuthenticationError" and caught["auth"] and caught["call"]
    assert (
        "codemode-gen auth login remote" in caught["message"]
        and "codemode-gen auth login remote" in caught["hint"]
    )
    assert "refused to refresh" in caught["message"]
    assert second["result"]["notes"]  # the other server kept answering in the same run
    assert third["result"]["caught"] is None and third["result"]["notes"]
    assert (
        third["result"]["who"]
        == stored_records(tmp_path / "auth")[0]["clientInfo"]["client_id"]
        != first["result"]["who"]
    )
    assert third["diagnostics"] == []

    # Revoked again: a fresh `run` process (connect-time path) says the same; so do `record` and
    # `auth status`.
    revoke()
    response, _ = run_json(project, both, env)
    assert response["result"]["caught"]["name"] == "AuthenticationError"
    assert "codemode-gen auth login remote" in response["result"]["caught"]["hint"]
    assert response["result"]["notes"]
    recorded = cli(project, "record", "--server", "remote", env=env)
    assert recorded.returncode == 1 and "codemode-gen auth login remote" in recorded.stdout
    assert "Traceback" not in recorded.stdout + recorded.stderr
    status = cli(project, "auth", "status", env=env)
    assert (
        "login expired (refresh refused)" in status.stdout
        and "codemode-gen auth login remote" in status.stdout
    )

    # Logging in again is the fix.
    login(project, "remote", env)
    response, _ = run_json(project, both, env)
    assert response["result"]["caught"] is None and response["result"]["who"]


@pytest.mark.slow
def test_client_credentials_in_ci_mode_need_no_login(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = tmp_path / "jwt.pub.pem"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    server = oauth_server("--jwt-client", "ci-signer", "--jwt-key", str(public))
    project = tmp_path / "project"
    env = env_for(project, CI="true", CI_CLIENT_SECRET=ECHO_SECRET, CI_PRIVATE_KEY=private_pem)
    write_config(
        project,
        {
            "ci": {
                "type": "http",
                "url": server.mcp_url,
                "oauth": {
                    "grantType": "client_credentials",
                    "clientId": "ci-bot",
                    "clientSecret": "${CI_CLIENT_SECRET}",
                    "scope": "mcp:read",
                },
            },
            "signed": {
                "type": "http",
                "url": server.mcp_url,
                "oauth": {
                    "grantType": "client_credentials",
                    "clientId": "ci-signer",
                    "privateKey": "${CI_PRIVATE_KEY}",
                    "issuer": server.base,
                },
            },
        },
    )
    outputs = []
    for args in (("record",), ("generate",)):
        done = cli(project, *args, env=env)
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, done.stdout + done.stderr
    code = (
        "import * as ci from '@codemode/servers/ci';\nimport * as signed from '@codemode/servers/signed';\n"
        "globalThis.__codemode_result__ = [(await ci.whoami()).client, (await signed.whoami()).client];"
    )
    response, err = run_json(project, code, env)
    outputs += [json.dumps(response), err]
    assert response["result"] == ["ci-bot", "ci-signer"]
    assert grants(server, "client_credentials") >= 2 and grants(server, "authorization_code") == 0

    # A token the server expired is replaced without anyone: one serve session across it.
    def expire() -> None:
        httpx2.post(f"{server.base}/test/expire", timeout=PROMPT_S)

    first, second = serve_runs(project, [code, expire, code], env)
    assert first["result"] == second["result"] == ["ci-bot", "ci-signer"]
    status = cli(project, "auth", "status", env=env)
    outputs.append(status.stdout)
    assert "client credentials of ci-bot (client secret)" in status.stdout
    assert "client credentials of ci-signer (private-key JWT)" in status.stdout
    # `auth login` on such a server only checks the credentials.
    checked = cli(project, "auth", "login", "ci", env=env)
    assert checked.returncode == 0 and "logged in to ci" in checked.stdout

    # A wrong secret: an actionable error for that server, not a traceback.
    wrong = env_for(project, CI_CLIENT_SECRET="not-the-secret", CI_PRIVATE_KEY=private_pem)
    for record in (tmp_path / "auth").glob("*.json"):
        record.unlink()
    response, err = run_json(project, code, wrong)
    assert any(
        "oauth.clientId and oauth.clientSecret" in (d.get("hint") or "")
        for d in response["diagnostics"]
    ), response
    assert "Traceback" not in err
    assert_no_secret(
        project,
        outputs,
        all_secrets(server, tmp_path / "auth", ECHO_SECRET, private_pem.splitlines()[1]),
    )


@pytest.mark.slow
def test_auth_status_and_logout_revoke_and_forget(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project = tmp_path / "project"
    env = env_for(project)
    write_config(
        project,
        {
            "remote": {"type": "http", "url": server.mcp_url},
            "static": {
                "type": "http",
                "url": server.mcp_url,
                "headers": {"Authorization": "Bearer ${STATIC_TOKEN:-x}"},
            },
            "local": {"command": PYTHON, "args": [script("notes_server")]},
            # CI's entry, its variables not set on this machine: it must not stop the others' auth.
            "ci": {
                "type": "http",
                "url": server.mcp_url,
                "oauth": {
                    "grantType": "client_credentials",
                    "clientId": "${CODEMODE_TEST_UNSET_ID}",
                    "clientSecret": "${CODEMODE_TEST_UNSET_SECRET}",
                },
            },
        },
    )
    before = cli(project, "auth", "status", env=env)
    assert before.returncode == 0, before.stderr
    assert "not logged in" in before.stdout and "static Authorization header" in before.stdout
    assert "stdio server (no OAuth)" in before.stdout
    assert (
        "ci      not usable here:" in before.stdout
        and "CODEMODE_TEST_UNSET_ID is not set" in before.stdout
    )
    ci = cli(project, "auth", "login", "ci", env=env)
    assert ci.returncode == 2 and "CODEMODE_TEST_UNSET_ID is not set" in ci.stderr
    static = cli(project, "auth", "login", "static", env=env)
    assert (
        static.returncode == 1
        and 'remove "Authorization" from mcpServers.static.headers' in static.stderr
    )
    unknown = cli(project, "auth", "login", "nope", env=env)
    assert (
        unknown.returncode == 2
        and "no server 'nope'" in unknown.stderr
        and "remote" in unknown.stderr
    )
    outputs = [login(project, "remote", env), before.stdout]
    status = cli(project, "auth", "status", env=env)
    outputs.append(status.stdout)
    assert "remote  logged in" in status.stdout

    out = cli(project, "auth", "logout", "remote", env=env)
    outputs.append(out.stdout + out.stderr)
    assert out.returncode == 0 and "logged out of remote" in out.stdout
    assert "revoked at the authorization server: refresh token" in out.stdout
    assert state(server)["stats"]["revoke"] >= 1
    assert not list((tmp_path / "auth").glob("*.json"))
    again = cli(project, "auth", "logout", "remote", env=env)
    assert "not logged in" in again.stdout
    after = cli(project, "auth", "status", env=env)
    assert "remote  not logged in" in after.stdout

    # Without a login the server's 401 names the command (it publishes OAuth metadata).
    write_config(project, {"remote": {"type": "http", "url": server.mcp_url}})
    recorded = cli(project, "record", env=env)
    assert recorded.returncode == 1 and "requires an OAuth login" in recorded.stdout
    assert "codemode-gen auth login remote" in recorded.stdout
    assert_no_secret(project, outputs, set(state(server)["issued"]))


@pytest.mark.slow
def test_a_pre_registered_client_logs_in_on_its_port_and_calls_run_concurrently(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    port = free_port()
    server = start_server("oauth_http", "http", "--client", f"desktop-app:app-secret-9f2d77:{port}")
    project = tmp_path / "project"
    env = env_for(project, APP_SECRET="app-secret-9f2d77")
    write_config(
        project,
        {
            "crm": {
                "type": "http",
                "url": server.mcp_url,
                "oauth": {
                    "clientId": "desktop-app",
                    "clientSecret": "${APP_SECRET}",
                    "redirectPort": port,
                },
            }
        },
    )
    outputs = [login(project, "crm", env)]
    assert state(server)["stats"].get("register", 0) == 0  # no dynamic registration
    assert cli(project, "record", env=env).returncode == 0
    assert cli(project, "generate", env=env).returncode == 0
    code = (
        "import { whoami, rendezvous } from '@codemode/servers/crm';\n"
        "const [a, b] = await Promise.all([rendezvous({seconds: 30}), rendezvous({seconds: 30})]);\n"
        "globalThis.__codemode_result__ = {client: (await whoami()).client, met: [a.met, b.met]};"
    )
    response, err = run_json(project, code, env)
    outputs += [json.dumps(response), err]
    assert response["result"] == {
        "client": "desktop-app",
        "met": [True, True],
    }  # §10.1: not serialised
    assert_no_secret(project, outputs, all_secrets(server, tmp_path / "auth", "app-secret-9f2d77"))


@pytest.mark.slow
def test_a_client_id_metadata_document_replaces_registration(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("oauth_http", "http", "--cimd")
    project = tmp_path / "project"
    env = env_for(project)
    document = "https://tools.example/codemode-gen/client.json"
    write_config(
        project,
        {
            "remote": {
                "type": "http",
                "url": server.mcp_url,
                "oauth": {"clientMetadataUrl": document},
            }
        },
    )
    login(project, "remote", env)
    stats = state(server)["stats"]
    assert stats.get("register", 0) == 0 and stats["cimd"] == 1
    assert cli(project, "record", env=env).returncode == 0
    assert cli(project, "generate", env=env).returncode == 0
    response, _ = run_json(project, WHOAMI.replace("{sid}", "remote"), env)
    assert response["result"]["client"] == document


@pytest.mark.slow
def test_an_sse_server_logs_in_and_refreshes_too(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("oauth_http", "sse")
    project = tmp_path / "project"
    env = env_for(project)
    write_config(project, {"legacy": {"type": "sse", "url": server.sse_url}})
    login(project, "legacy", env)
    assert cli(project, "record", env=env).returncode == 0
    assert cli(project, "generate", env=env).returncode == 0
    code = WHOAMI.replace("{sid}", "legacy")
    first, _ = run_json(project, code, env)
    httpx2.post(
        f"{server.base}/test/expire", timeout=PROMPT_S
    )  # the server's 401 asks for a refresh
    second, _ = run_json(project, code, env)
    assert first["result"]["client"] and first["result"] == second["result"]
    assert grants(server, "refresh_token") >= 1 and grants(server, "authorization_code") == 1


# --------------------------------------------------------------------------- bad input


@pytest.mark.slow
def test_login_against_a_server_without_oauth_metadata_says_so(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server("--metadata", "missing")
    project = tmp_path / "project"
    env = env_for(project)
    write_config(project, {"plain": {"type": "http", "url": server.mcp_url}})
    code, _out, err = Login(project, "plain", env).finish()
    assert code == 1 and "Traceback" not in err
    assert (
        "publishes no OAuth metadata" in err
        and "oauth-protected-resource" in err
        and "HTTP 404" in err
    )
    assert 'put it in "headers"' in err
    assert not list((tmp_path / "auth").glob("*.json"))


@pytest.mark.slow
def test_login_refuses_malformed_metadata(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server("--metadata", "malformed")
    project = tmp_path / "project"
    env = env_for(project)
    write_config(project, {"broken": {"type": "http", "url": server.mcp_url}})
    code, _out, err = Login(project, "broken", env).finish()
    assert code == 1 and "Traceback" not in err
    assert (
        "published malformed OAuth metadata" in err
        and "malformed protected resource metadata" in err
    )
    assert state(server)["stats"].get("register", 0) == 0  # no guessed endpoint was used
    # record/run without a login: the same server is a clear per-server error.
    recorded = cli(project, "record", env=env)
    assert recorded.returncode == 1 and "codemode-gen auth login broken" in recorded.stdout


@pytest.mark.slow
def test_login_when_the_authorization_server_is_down(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    server = oauth_server("--issuer", dead)
    project, env = remote_project(tmp_path, server.mcp_url)
    code, _out, err = Login(project, "remote", env).finish()
    assert code == 1 and "Traceback" not in err
    assert f"cannot reach the authorization server of 'remote' at {dead}" in err


@pytest.mark.slow
def test_a_token_refresh_with_the_authorization_server_down_names_it(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project, env = remote_project(tmp_path, server.mcp_url)
    login(project, "remote", env)
    # The stored metadata now names a token endpoint nobody answers at.
    dead = f"http://127.0.0.1:{free_port()}"
    [path] = (tmp_path / "auth").glob("*.json")
    record = json.loads(path.read_text())
    record["oauthMetadata"]["token_endpoint"] = f"{dead}/token"
    record["expiresAt"] = time.time() - 10
    path.write_text(json.dumps(record))
    recorded = cli(project, "record", env=env)
    assert recorded.returncode == 1 and "Traceback" not in recorded.stdout + recorded.stderr
    assert f"cannot reach the authorization server of remote at {dead}/token" in recorded.stdout


@pytest.mark.slow
def test_login_state_mismatch_is_refused_and_nothing_is_stored(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project, env = remote_project(tmp_path, server.mcp_url)
    attempt = Login(project, "remote", env)
    assert attempt.url is not None
    forged = httpx2.get(f"{attempt.redirect_uri}?code=stolen&state=not-the-state", timeout=PROMPT_S)
    assert forged.status_code == 400
    code, _out, err = attempt.finish()
    assert code == 1 and "state does not match" in err and "Traceback" not in err
    assert not list((tmp_path / "auth").glob("*.json"))


@pytest.mark.slow
def test_login_redirect_that_never_comes_ends_with_a_clear_error(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project, env = remote_project(tmp_path, server.mcp_url)
    started = time.monotonic()
    attempt = Login(project, "remote", env, "--timeout", "1")
    code, _out, err = attempt.finish()
    assert time.monotonic() - started < HANG_S
    assert (
        code == 1
        and "no login redirect reached" in err
        and "within 1 s" in err
        and "--timeout" in err
    )
    assert "Traceback" not in err and not list((tmp_path / "auth").glob("*.json"))


@pytest.mark.slow
def test_a_token_file_others_can_read_is_refused_with_the_fix(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    server = oauth_server()
    project = tmp_path / "project"
    env = env_for(project)
    recorded_project(project, server, env)
    write_config(
        project,
        {
            "remote": {"type": "http", "url": server.mcp_url},
            "notes": {"command": PYTHON, "args": [script("notes_server")]},
        },
    )
    assert cli(project, "record", "--server", "notes", env=env).returncode == 0
    assert cli(project, "generate", env=env).returncode == 0
    [path] = (tmp_path / "auth").glob("*.json")
    path.chmod(0o644)
    status = cli(project, "auth", "status", env=env)
    assert f"chmod 600 {path}" in status.stdout and "accessible by other users" in status.stdout
    code = (
        "import { whoami } from '@codemode/servers/remote';\nimport { list_notes } from '@codemode/servers/notes';\n"
        "let caught = null;\ntry { await whoami(); } catch (e) { caught = e.message; }\n"
        "globalThis.__codemode_result__ = {caught, notes: (await list_notes({})) != null};"
    )
    response, _ = run_json(project, code, env)
    assert f"chmod 600 {path}" in response["result"]["caught"] and response["result"]["notes"]
    recorded = cli(project, "record", "--server", "remote", env=env)
    assert recorded.returncode == 1 and f"chmod 600 {path}" in recorded.stdout
    path.chmod(0o600)
    response, _err = run_json(project, code, env)
    assert response["result"]["caught"] is None


# --------------------------------------------------------------------------- the keyring


@pytest.mark.slow
def test_login_kept_in_the_os_keyring_when_one_works(
    tmp_path: Path, oauth_server: Callable[..., RunningServer]
) -> None:
    pytest.importorskip("keyring")
    server = oauth_server()
    project = tmp_path / "project"
    keyring_file = tmp_path / "keyring.json"
    env = env_for(
        project,
        PYTHON_KEYRING_BACKEND="_keyring_backend.FileKeyring",
        TEST_KEYRING_FILE=str(keyring_file),
        PYTHONPATH=os.pathsep.join([str(TEST_SERVERS), os.environ.get("PYTHONPATH", "")]),
    )
    env[STORE_ENV] = "auto"
    recorded_project(project, server, env)
    assert not list((tmp_path / "auth").glob("*.json"))  # nothing in the file store
    assert len(list((tmp_path / "auth").glob("*.keyring"))) == 1  # only a marker: no secret
    entries = json.loads(keyring_file.read_text())
    assert len(entries) == 1 and "access_token" in next(iter(entries.values()))
    status = cli(project, "auth", "status", env=env)
    assert "stored in the OS keyring (FileKeyring" in status.stdout
    response, _ = run_json(project, WHOAMI.replace("{sid}", "remote"), env)
    assert response["result"]["client"]
    assert cli(project, "auth", "logout", "remote", env=env).returncode == 0
    assert json.loads(keyring_file.read_text()) == {}


# --------------------------------------------------------------------------- units


def test_oauth_config_is_checked_expanded_and_secret(tmp_path: Path) -> None:
    from codemode_gen.errors import UserError

    def load(entry: dict[str, Any], **environ: str) -> ServerConfig:
        path = write_config(
            tmp_path, {"x": {"type": "http", "url": "https://x.example/mcp", **entry}}
        )
        return load_config(path, environ=environ)["x"]

    cfg = load(
        {
            "oauth": {
                "grantType": "client_credentials",
                "clientId": "${ID}",
                "clientSecret": "${SECRET}",
                "scope": "a b",
                "issuer": "https://auth.example",
            }
        },
        ID="bot",
        SECRET="s3cr3t-value",
    )
    assert cfg.oauth is not None and cfg.oauth.client_id == "bot" and cfg.oauth.scope == "a b"
    assert ("SECRET", "s3cr3t-value") in cfg.secrets() and (
        "oauth.clientSecret",
        "s3cr3t-value",
    ) in cfg.secrets()
    literal = load(
        {"oauth": {"clientId": "app", "clientSecret": "written-in-the-file", "callbackPort": 8976}}
    )
    assert ("oauth.clientSecret", "written-in-the-file") in literal.secrets()
    assert literal.oauth is not None and literal.oauth.redirect_port == 8976
    assert literal.oauth.grant_type == "authorization_code"
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    keyed = load(
        {
            "oauth": {
                "grantType": "client_credentials",
                "clientId": "bot",
                "privateKeyFile": "key.pem",
            }
        }
    )
    assert keyed.oauth is not None and keyed.oauth.private_key_file == str(tmp_path / "key.pem")

    for entry, needle in (
        ({"oauth": {"clientSecert": "x"}}, 'unknown key "clientSecert"'),
        ({"oauth": {"grantType": "password"}}, "grantType must be"),
        ({"oauth": {"grantType": "client_credentials", "clientId": "a"}}, "needs a clientSecret"),
        ({"oauth": {"grantType": "client_credentials", "clientSecret": "a"}}, "needs a clientId"),
        ({"oauth": {"redirectPort": 70000}}, "must be a port number"),
        ({"oauth": {"clientMetadataUrl": "http://x.example/c.json"}}, "must be an https:// URL"),
        ({"oauth": {"privateKey": "k"}}, "signs client-credentials requests only"),
        ({"oauth": "yes"}, "must be an object"),
    ):
        with pytest.raises(UserError, match=re.escape(needle)):
            load(entry)
    path = write_config(tmp_path, {"s": {"command": "x", "oauth": {"clientId": "a"}}})
    with pytest.raises(UserError, match="only an http or sse server"):
        load_config(path)


def test_file_store_is_private_atomic_and_refuses_what_others_can_touch(tmp_path: Path) -> None:
    from codemode_gen.client.tokenstore import (
        FileStore,
        TokenStoreError,
        default_auth_dir,
        open_store,
    )

    store = FileStore(tmp_path / "auth")
    assert store.load("k") is None
    store.save("k", {"tokens": {"access_token": "a"}})
    path = store.path("k")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "auth").stat().st_mode) == 0o700
    assert store.load("k") == {"tokens": {"access_token": "a"}}
    store.save("k", {"tokens": {"access_token": "b"}})  # replaced whole, no temp file left
    assert [p.name for p in (tmp_path / "auth").iterdir()] == [path.name]
    path.chmod(0o640)
    with pytest.raises(TokenStoreError) as caught:
        store.load("k")
    assert f"chmod 600 {path}" in caught.value.hint
    path.chmod(0o600)
    (tmp_path / "auth").chmod(0o777)
    with pytest.raises(TokenStoreError) as caught:
        store.load("k")
    assert "chmod 700" in caught.value.hint
    (tmp_path / "auth").chmod(0o700)
    path.write_text("{not json")
    with pytest.raises(TokenStoreError, match="not valid JSON"):
        store.load("k")
    assert store.delete("k") and not store.delete("k")

    assert default_auth_dir({"XDG_CONFIG_HOME": "/cfg"}) == Path("/cfg/codemode-gen/auth")
    assert default_auth_dir({AUTH_DIR_ENV: "/x", "XDG_CONFIG_HOME": "/cfg"}) == Path("/x")
    with pytest.raises(TokenStoreError, match="not one of"):
        open_store({STORE_ENV: "vault"})
    assert isinstance(open_store({STORE_ENV: "file", AUTH_DIR_ENV: str(tmp_path)}), FileStore)


def test_a_failing_keyring_falls_back_to_the_file(tmp_path: Path) -> None:
    from codemode_gen.client.tokenstore import FallbackStore, FileStore, KeyringStore

    class Broken:
        def get_password(self, *args: str) -> str | None:
            raise RuntimeError("the keyring is locked")

        set_password = delete_password = get_password

    class Memory:
        def __init__(self) -> None:
            self.entries: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, name: str) -> str | None:
            return self.entries.get((service, name))

        def set_password(self, service: str, name: str, value: str) -> None:
            self.entries[(service, name)] = value

        def delete_password(self, service: str, name: str) -> None:
            del self.entries[(service, name)]

    file = FileStore(tmp_path / "auth")
    never = FallbackStore(KeyringStore(Broken()), file)
    assert never.load("other") is None and never.fell_back is None  # no login there: not asked
    broken = FallbackStore(KeyringStore(Broken()), file)
    broken.save("k", {"a": 1})
    assert broken.fell_back is not None and "locked" in broken.fell_back
    assert file.load("k") == {"a": 1} and broken.load("k") == {"a": 1}
    memory = Memory()
    working = FallbackStore(KeyringStore(memory), file)
    assert working.load("k") == {"a": 1}  # saved to the file while the keyring was locked
    working.save("k", {"a": 2})
    assert file.load("k") is None and len(memory.entries) == 1  # one place per login
    assert working.load("k") == {"a": 2}
    assert working.delete("k") and working.load("k") is None


def test_redactor_picks_up_tokens_seen_after_it_was_made() -> None:
    from codemode_gen.client import oauth_records
    from codemode_gen.generator.redact import Redactor

    config = ServerConfig(id="r", transport="http", url="https://redact.example/mcp")
    redactor = Redactor.for_server(config)
    assert redactor.text("token-AAAA-1234567") == "token-AAAA-1234567"
    oauth_records.remember_record(
        oauth_records.store_key(config),
        {"tokens": {"access_token": "token-AAAA-1234567", "refresh_token": "refresh-BBBB-7654321"}},
    )
    assert redactor.text("got token-AAAA-1234567") == "got <redacted:oauth-access-token>"
    assert redactor.value({"k": ["refresh-BBBB-7654321"]}) == {
        "k": ["<redacted:oauth-refresh-token>"]
    }
    assert (
        oauth_records.scrub("x refresh-BBBB-7654321", config) == "x <redacted:oauth-refresh-token>"
    )


def test_store_keys_separate_servers_and_clients() -> None:
    from codemode_gen.client.oauth_records import store_key
    from codemode_gen.config import OAuthSettings

    base = ServerConfig(id="a", transport="http", url="https://Host.example/mcp")
    other_id = ServerConfig(id="b", transport="http", url="https://host.example/mcp")
    assert store_key(base) == store_key(other_id)  # same server, same client: one login
    keys = {
        store_key(base),
        store_key(ServerConfig(id="a", transport="http", url="https://host.example/other")),
        store_key(
            ServerConfig(
                id="a",
                transport="http",
                url="https://host.example/mcp",
                oauth=OAuthSettings(client_id="app"),
            )
        ),
        store_key(
            ServerConfig(
                id="a",
                transport="http",
                url="https://host.example/mcp",
                oauth=OAuthSettings(
                    grant_type="client_credentials", client_id="app", client_secret="s"
                ),
            )
        ),
    }
    assert len(keys) == 4


@pytest.mark.slow
def test_a_bearer_401_without_any_login_names_both_fixes(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("auth_http", "http", "--token", "some-token-value")
    project = tmp_path / "project"
    env = env_for(project)
    write_config(project, {"api": {"type": "http", "url": server.mcp_url}})
    recorded = cli(project, "record", env=env)
    assert recorded.returncode == 1
    assert "codemode-gen auth login api" in recorded.stdout and '"headers"' in recorded.stdout


def test_auth_is_listed_and_lazily_loaded() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "codemode_gen", "auth", "--help"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0
    for sub in ("login", "status", "logout"):
        assert sub in done.stdout
