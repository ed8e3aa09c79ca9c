"""`codemode-gen serve --http`: the real CLI on 127.0.0.1 (a free port), the SDK's own client over
Streamable HTTP, the demo notes server upstream (spec §2, §3; docs/deploy.md).

One instance is shared by the module's tests (it holds the bearer token); the tests that need a
process of their own (exit status, SIGTERM) start one.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from .conftest import child_pids, pid_alive
from .runtime_support import PYTHON, RUN_TIMEOUT, assert_ok, child_env, script

pytestmark = pytest.mark.timeout(180)

T = TypeVar("T")

TOKEN = "test-token-5f0c2a9e"  # what the shared instance requires (the environment variable's way)
# Bounds how long serve may take to print its listening line (cold imports on a busy machine).
LISTEN_TIMEOUT_S = 30.0
# Bounds a clean shutdown after SIGTERM: stop listening, close the notes session, reap workers.
STOP_TIMEOUT_S = 30.0
# The bounded load test: clients at once, runs each (sequential within a client).
CLIENTS = 8
RUNS_PER_CLIENT = 5
# /healthz turns 200 once the sandbox pool is up; this bounds the wait for it.
HEALTHY_TIMEOUT_S = 30.0

_LISTENING = re.compile(r"codemode-gen serve: listening on (http://127\.0\.0\.1:(\d+)/mcp)")
GET_NOTE = "import { get_note } from '@codemode/servers/notes';\n"


@dataclass
class HttpServe:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def env(**extra: str) -> dict[str, str]:
    return child_env(**extra)


def project(base: Path) -> Path:
    """A project whose notes server is a copy of its own, so its process can be told apart."""
    (base / "servers").mkdir(parents=True)
    for name in ("notes_server.py", "_serving.py"):
        (base / "servers" / name).write_text(Path(script("notes_server")).with_name(name).read_text())
    (base / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "notes": {"command": PYTHON, "args": [str(base / "servers" / "notes_server.py")]},
    }}))
    return base


def start_serve(proj: Path, *args: str, token: str | None = TOKEN, extra_env: Mapping[str, str] | None = None) -> HttpServe:
    """`codemode-gen serve --http 127.0.0.1:0` in `proj`; returns once it printed its URL.
    `extra_env`: variables over `env()`'s."""
    log = proj / f"serve-http-{time.monotonic_ns()}.stderr.log"
    with log.open("wb") as errlog:
        proc = subprocess.Popen(
            [PYTHON, "-m", "codemode_gen", "serve", "--config", str(proj / ".mcp.json"), "--out", str(proj / "out"),
             "--http", "127.0.0.1:0", *args],
            cwd=proj, env=env(**({"CODEMODE_AUTH_TOKEN": token} if token is not None else {}), **dict(extra_env or {})),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
        )
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(errors="replace"))
        if found:
            return HttpServe(proc, found.group(1), log)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise AssertionError(f"serve --http did not listen: {log.read_text(errors='replace')}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServe]:
    server = start_serve(project(tmp_path_factory.mktemp("serve-http")))
    try:
        yield server
    finally:
        server.stop()


def with_client(url: str, body: Callable[[Any], Awaitable[T]], token: str = TOKEN) -> T:
    """`body(client)` with the SDK's Client over Streamable HTTP, sending the bearer token."""

    async def main() -> T:
        return await in_client(url, body, token)

    return anyio.run(main)


async def in_client(url: str, body: Callable[[Any], Awaitable[T]], token: str = TOKEN) -> T:
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(RUN_TIMEOUT, read=RUN_TIMEOUT))
    async with http, Client(streamable_http_client(url, http_client=http), mode="legacy",
                            read_timeout_seconds=RUN_TIMEOUT,
                            client_info=types.Implementation(name="test", version="0")) as client:
        return await body(client)


def http_get(url: str, **headers: str) -> Any:
    import httpx2

    return httpx2.get(url, headers=headers, timeout=RUN_TIMEOUT)


@pytest.mark.slow
def test_s2_the_tool_is_listed_and_runs_a_script_against_the_notes_server(served: HttpServe) -> None:
    code = GET_NOTE + "globalThis.__codemode_result__ = (await get_note({id: 2})).title;"

    async def body(client: Any) -> Any:
        run = await client.call_tool("codemode.run", {"code": code})
        tools = (await client.list_tools()).tools
        return tools, run, client.instructions

    tools, run, instructions = with_client(served.url, body)
    assert [t.name for t in tools] == ["codemode.run"]
    assert 'declare module "@codemode/servers/notes"' in (tools[0].description or "")  # built once connected
    assert "codemode.run" in (instructions or "")
    assert not run.is_error
    assert assert_ok(run.structured_content) == "Groceries"
    assert json.loads(run.content[0].text) == run.structured_content


@pytest.mark.slow
def test_s1_4_concurrent_clients_each_get_their_own_runs(served: HttpServe) -> None:
    # Stateless: every request stands alone, so 8 clients at once share the one CodeMode (one
    # notes session) while every run still has a sandbox of its own (§1.4).
    async def client_runs(index: int) -> list[Any]:
        async def body(client: Any) -> list[Any]:
            results = []
            for run in range(RUNS_PER_CLIENT):
                code = (GET_NOTE + f"globalThis.__seen__ = globalThis.__seen__ ?? {index * 100 + run};\n"
                        "globalThis.__codemode_result__ = [globalThis.__seen__, (await get_note({id: 2})).title];")
                result = await client.call_tool("codemode.run", {"code": code})
                results.append(result.structured_content)
            return results

        return await in_client(served.url, body)

    async def main() -> list[list[Any]]:
        out: list[list[Any]] = [[] for _ in range(CLIENTS)]

        async def one(i: int) -> None:
            out[i] = await client_runs(i)

        async with anyio.create_task_group() as tg:
            for i in range(CLIENTS):
                tg.start_soon(one, i)
        return out

    per_client = anyio.run(main)
    for index, responses in enumerate(per_client):
        assert [assert_ok(r) for r in responses] == [[index * 100 + run, "Groceries"] for run in range(RUNS_PER_CLIENT)]


def test_every_mcp_request_needs_the_bearer_token(served: HttpServe) -> None:
    import httpx2

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def post(**extra: str) -> Any:
        return httpx2.post(served.url, json=initialize, headers={**headers, **extra}, timeout=RUN_TIMEOUT)

    missing = post()
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "error=" not in missing.headers["www-authenticate"]  # RFC 6750 §3: no credential, no error code
    wrong = post(Authorization=f"Bearer {TOKEN}x")
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert post(Authorization=f"Basic {TOKEN}").status_code == 401
    ok = post(Authorization=f"Bearer {TOKEN}")
    assert ok.status_code == 200, ok.text
    assert '"serverInfo"' in ok.text and "codemode-gen" in ok.text

    # The health check needs no token (it says only ok / starting / error).
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while (health := http_get(served.base + "/healthz")).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert health.status_code == 200 and health.json() == {"status": "ok"}


@pytest.mark.slow
def test_sigterm_stops_listening_and_the_upstream_servers(tmp_path: Path) -> None:
    served = start_serve(project(tmp_path))
    try:
        code = GET_NOTE + "globalThis.__codemode_result__ = (await get_note({id: 1})).id;"
        run = with_client(served.url, lambda client: client.call_tool("codemode.run", {"code": code}))
        assert assert_ok(run.structured_content) == 1
        upstream = [pid for pid in child_pids(served.proc.pid)
                    if str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")]
        assert upstream, "the notes server should be running under serve"
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=STOP_TIMEOUT_S) == 0, served.log.read_text()
        assert not [pid for pid in upstream if pid_alive(pid)]
        assert "Traceback" not in served.log.read_text()
    finally:
        served.stop()


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "serve", "--config", str(tmp_path / ".mcp.json"), "--http", "0.0.0.0:0"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "refusing to listen on 0.0.0.0 without authentication" in proc.stderr
    assert "CODEMODE_AUTH_TOKEN" in proc.stderr and "--allow-unauthenticated" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", [
    ["--max-workers", "0"], ["--max-workers", "-2"], ["--max-workers", "two"], ["--max-workers", "1.5"],
    ["--http", "localhost"], ["--http", "127.0.0.1:99999"], ["--http", "::1:80"],
    ["--auth-token", "x"],  # only with --http
])
def test_invalid_serve_options_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    proc = subprocess.run([PYTHON, "-m", "codemode_gen", "serve", *bad], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert bad[0] in proc.stderr and "Traceback" not in proc.stderr
