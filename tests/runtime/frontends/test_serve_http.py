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

from tests.conftest import child_pids, pid_alive
from tests.runtime_support import PYTHON, RUN_TIMEOUT, assert_ok, child_env, script

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

_LISTENING = re.compile(r"codemode-gen serve: listening on (http://[^\s/]+:(\d+)/mcp)")
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
        (base / "servers" / name).write_text(
            Path(script("notes_server")).with_name(name).read_text()
        )
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {
                        "command": PYTHON,
                        "args": [str(base / "servers" / "notes_server.py")],
                    },
                }
            }
        )
    )
    return base


def start_serve(
    proj: Path,
    *args: str,
    token: str | None = TOKEN,
    listen: str = "127.0.0.1:0",
    preexec: Callable[[], None] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> HttpServe:
    """`codemode-gen serve --http LISTEN` in `proj`; returns once it printed its URL.
    `preexec` runs in the child before serve starts (e.g. a lower open-file limit); `extra_env`:
    variables over `env()`'s."""
    log = proj / f"serve-http-{time.monotonic_ns()}.stderr.log"
    with log.open("wb") as errlog:
        proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "codemode_gen",
                "serve",
                "--config",
                str(proj / ".mcp.json"),
                "--out",
                str(proj / "out"),
                "--http",
                listen,
                *args,
            ],
            cwd=proj,
            env=env(
                **({"CODEMODE_AUTH_TOKEN": token} if token is not None else {}),
                **dict(extra_env or {}),
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            preexec_fn=preexec,
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


async def in_client(
    url: str,
    body: Callable[[Any], Awaitable[T]],
    token: str = TOKEN,
    *,
    headers: dict[str, str] | None = None,
    local_address: str | None = None,
) -> T:
    """`body(client)` in a running loop; `headers` go with every request, `local_address` is the
    client's own address (another loopback address: another client to the server)."""
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    transport = httpx2.AsyncHTTPTransport(local_address=local_address) if local_address else None
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}", **(headers or {})},
        transport=transport,
        timeout=httpx2.Timeout(RUN_TIMEOUT, read=RUN_TIMEOUT),
    )
    async with (
        http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            read_timeout_seconds=RUN_TIMEOUT,
            client_info=types.Implementation(name="test", version="0"),
        ) as client,
    ):
        return await body(client)


def http_get(url: str, **headers: str) -> Any:
    import httpx2

    return httpx2.get(url, headers=headers, timeout=RUN_TIMEOUT)


@pytest.mark.slow
def test_s2_the_tool_is_listed_and_runs_a_script_against_the_notes_server(
    served: HttpServe,
) -> None:
    code = GET_NOTE + "globalThis.__codemode_result__ = (await get_note({id: 2})).title;"

    async def body(client: Any) -> Any:
        run = await client.call_tool("codemode.run", {"code": code})
        tools = (await client.list_tools()).tools
        return tools, run, client.instructions

    tools, run, instructions = with_client(served.url, body)
    assert [t.name for t in tools] == ["codemode.run"]
    assert 'declare module "@codemode/servers/notes"' in (
        tools[0].description or ""
    )  # built once connected
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
                code = (
                    GET_NOTE
                    + f"globalThis.__seen__ = globalThis.__seen__ ?? {index * 100 + run};\n"
                    "globalThis.__codemode_result__ = [globalThis.__seen__, (await get_note({id: 2})).title];"
                )
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
        assert [assert_ok(r) for r in responses] == [
            [index * 100 + run, "Groceries"] for run in range(RUNS_PER_CLIENT)
        ]


def test_every_mcp_request_needs_the_bearer_token(served: HttpServe) -> None:
    import httpx2

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def post(**extra: str) -> Any:
        return httpx2.post(
            served.url, json=initialize, headers={**headers, **extra}, timeout=RUN_TIMEOUT
        )

    missing = post()
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert (
        "error=" not in missing.headers["www-authenticate"]
    )  # RFC 6750 §3: no credential, no error code
    wrong = post(Authorization=f"Bearer {TOKEN}x")
    assert wrong.status_code == 401 and 'error="invalid_token"' in wrong.headers["www-authenticate"]
    assert post(Authorization=f"Basic {TOKEN}").status_code == 401
    ok = post(Authorization=f"Bearer {TOKEN}")
    assert ok.status_code == 200, ok.text
    assert '"serverInfo"' in ok.text and "codemode-gen" in ok.text

    # The health check needs no token (it says only ok / starting / error).
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while (
        health := http_get(served.base + "/healthz")
    ).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert health.status_code == 200 and health.json() == {"status": "ok"}


@pytest.mark.slow
def test_sigterm_stops_listening_and_the_upstream_servers(tmp_path: Path) -> None:
    served = start_serve(project(tmp_path))
    try:
        code = GET_NOTE + "globalThis.__codemode_result__ = (await get_note({id: 1})).id;"
        run = with_client(
            served.url, lambda client: client.call_tool("codemode.run", {"code": code})
        )
        assert assert_ok(run.structured_content) == 1
        upstream = [
            pid
            for pid in child_pids(served.proc.pid)
            if str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
        ]
        assert upstream, "the notes server should be running under serve"
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(timeout=STOP_TIMEOUT_S) == 0, served.log.read_text()
        assert not [pid for pid in upstream if pid_alive(pid)]
        assert "Traceback" not in served.log.read_text()
    finally:
        served.stop()


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "codemode_gen",
            "serve",
            "--config",
            str(tmp_path / ".mcp.json"),
            "--http",
            "0.0.0.0:0",
        ],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "refusing to listen on 0.0.0.0 without authentication" in proc.stderr
    assert "CODEMODE_AUTH_TOKEN" in proc.stderr and "--allow-unauthenticated" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "bad",
    [
        ["--max-workers", "0"],
        ["--max-workers", "-2"],
        ["--max-workers", "two"],
        ["--max-workers", "1.5"],
        ["--http", "localhost"],
        ["--http", "127.0.0.1:99999"],
        ["--http", "::1:80"],
        ["--auth-token", "x"],  # only with --http
    ],
)
def test_invalid_serve_options_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "serve", *bad],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert bad[0] in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------- §11: token sources


@pytest.mark.parametrize(
    ("flag", "environment"),
    [
        (None, ""),
        (None, "   "),
        (None, "\t\n"),  # CODEMODE_AUTH_TOKEN set but empty or blank
        ("", None),
        (" ", None),  # --auth-token '' / ' '
        ("", "a-real-token"),  # the option wins over the environment, and is just as empty
    ],
)
def test_s11_an_empty_token_from_any_source_is_refused(
    tmp_path: Path, flag: str | None, environment: str | None
) -> None:
    # An empty token must never mean "no authentication": serve exits 2 before listening,
    # naming the variable and the two ways on (a real token, or --allow-unauthenticated).
    args = ["--auth-token", flag] if flag is not None else []
    extra = {"CODEMODE_AUTH_TOKEN": environment} if environment is not None else {}
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "codemode_gen",
            "serve",
            "--config",
            str(tmp_path / ".mcp.json"),
            "--http",
            "127.0.0.1:0",
            *args,
        ],
        cwd=tmp_path,
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "is set but empty" in proc.stderr
    assert (
        "--auth-token" if flag is not None else "CODEMODE_AUTH_TOKEN"
    ) in proc.stderr.splitlines()[0]
    assert "CODEMODE_AUTH_TOKEN" in proc.stderr and "--allow-unauthenticated" in proc.stderr
    assert "listening" not in proc.stderr and "Traceback" not in proc.stderr


def test_s11_a_token_no_header_can_carry_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "codemode_gen",
            "serve",
            "--config",
            str(tmp_path / ".mcp.json"),
            "--http",
            "127.0.0.1:0",
        ],
        cwd=tmp_path,
        env=env(CODEMODE_AUTH_TOKEN="two words"),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert (
        proc.returncode == 2
        and "cannot carry" in proc.stderr
        and "CODEMODE_AUTH_TOKEN" in proc.stderr
    )


@pytest.mark.slow
def test_s11_an_empty_token_with_allow_unauthenticated_serves_without_one_and_says_so(
    tmp_path: Path,
) -> None:
    served = start_serve(project(tmp_path), "--allow-unauthenticated", token="")
    try:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        }
        import httpx2

        answer = httpx2.post(
            served.url,
            json=initialize,
            timeout=RUN_TIMEOUT,
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert answer.status_code == 200 and "codemode-gen" in answer.text
        assert "no bearer token" in served.log.read_text()
    finally:
        served.stop()


# ---------------------------------------------------------------------------- MCP transport security


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "Authorization": f"Bearer {TOKEN}",
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "listen", ["127.0.0.2:0", "LOCALHOST:0", "127.0.1.1:0", "[::ffff:127.0.0.1]:0"]
)
def test_every_loopback_bind_refuses_other_hosts_and_origins(tmp_path: Path, listen: str) -> None:
    # DNS rebinding (MCP transport spec, "Security Warning"): a page of evil.example whose name
    # now resolves to this machine sends Host: evil.example and Origin: http://evil.example. On
    # any loopback address both are refused, on /healthz as on /mcp, even with the token
    # (the page cannot send it, but nothing should depend on that alone).
    import httpx2

    served = start_serve(project(tmp_path), listen=listen)
    try:
        port = served.url.rsplit(":", 1)[1].split("/", 1)[0]
        for path, request in (("/healthz", None), ("/mcp", INITIALIZE)):
            for headers, status, option in (
                ({"Host": f"evil.example:{port}"}, 421, "--allowed-host evil.example"),
                ({"Host": "evil.example"}, 421, "--allowed-host evil.example"),
                ({"Origin": "http://evil.example"}, 403, "--allowed-origin http://evil.example"),
                ({"Origin": "null"}, 403, "--allowed-origin"),
            ):
                url = served.base + path
                answer = (
                    httpx2.post(
                        url, json=request, headers={**MCP_HEADERS, **headers}, timeout=RUN_TIMEOUT
                    )
                    if request
                    else httpx2.get(url, headers=headers, timeout=RUN_TIMEOUT)
                )
                assert answer.status_code == status, (path, headers, answer.text)
                assert option in answer.json()["error_description"]
        # Names of this machine pass, in any case and with any port.
        for host in (f"LOCALHOST:{port}", "localhost", "127.0.0.1:1", f"[::1]:{port}"):
            answer = httpx2.post(
                served.url,
                json=INITIALIZE,
                timeout=RUN_TIMEOUT,
                headers={**MCP_HEADERS, "Host": host, "Origin": f"http://localhost:{port}"},
            )
            assert answer.status_code == 200, (host, answer.text)
        # The log line says which option would let the refused requests in.
        assert "--allowed-host evil.example" in served.log.read_text()
        # A real client still runs scripts.
        code = GET_NOTE + "globalThis.__codemode_result__ = (await get_note({id: 2})).title;"
        run = with_client(
            served.url, lambda client: client.call_tool("codemode.run", {"code": code})
        )
        assert assert_ok(run.structured_content) == "Groceries"
    finally:
        served.stop()


@pytest.mark.slow
def test_allowed_host_and_origin_let_a_reverse_proxy_and_its_pages_in(tmp_path: Path) -> None:
    import httpx2

    served = start_serve(
        project(tmp_path),
        "--allowed-host",
        "codemode.example.com",
        "--allowed-origin",
        "https://app.example.com",
    )
    try:

        def post(**headers: str) -> Any:
            return httpx2.post(
                served.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=RUN_TIMEOUT
            )

        assert post(Host="codemode.example.com").status_code == 200
        assert (
            post(Host="CODEMODE.example.com:443", Origin="https://app.example.com").status_code
            == 200
        )
        assert post(Host="other.example.com").status_code == 421
        assert (
            post(Origin="https://app.example.com:8443").status_code == 403
        )  # an origin includes its port
        assert post(Origin="http://app.example.com").status_code == 403  # ... and its scheme
    finally:
        served.stop()


@pytest.mark.slow
def test_a_non_loopback_bind_with_a_token_refuses_other_origins(tmp_path: Path) -> None:
    # Clients reach a LAN address by any name (Host is not checked unless --allowed-host), but
    # a browser page of another site is refused whatever the address.
    import httpx2

    served = start_serve(project(tmp_path), listen="0.0.0.0:0")
    try:
        url = served.url.replace("0.0.0.0", "127.0.0.1")
        ok = httpx2.post(
            url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Host": "codemode.lan:8000"},
            timeout=RUN_TIMEOUT,
        )
        assert ok.status_code == 200, ok.text
        page = httpx2.post(
            url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Origin": "https://evil.example"},
            timeout=RUN_TIMEOUT,
        )
        assert page.status_code == 403 and "--allowed-origin https://evil.example" in page.text
    finally:
        served.stop()


@pytest.mark.parametrize(
    "bad",
    [
        ["--allowed-origin", "evil.example"],
        ["--allowed-origin", "ftp://x.example"],
        ["--allowed-host", "a b"],
        ["--allowed-host", "https://x.example"],
        ["--http", "127.0.0.1:0", "--max-connections", "0"],
        ["--http", "127.0.0.1:0", "--max-queued-runs", "-1"],
        ["--max-queued-runs", "3"],
        ["--allowed-host", "x.example"],  # only with --http
    ],
)
def test_invalid_http_options_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "serve", *bad],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "Traceback" not in proc.stderr
