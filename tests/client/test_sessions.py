"""MCP sessions against real server processes: stdio, Streamable HTTP and legacy SSE."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.session_errors import (
    AuthError,
    CallAuthError,
    CallError,
    CallTimeout,
    ConnectError,
)
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig
from codemode_gen.mcp_json import load_config
from tests.conftest import (
    NOTES_TOOLS,
    PROMPT_S,
    PYTHON,
    RunningServer,
    child_pids,
    free_port,
    pid_alive,
    server_script,
    stdio_config,
)


def run(fn: Callable[[], Any]) -> Any:
    return anyio.run(fn)


async def connect_once(config: ServerConfig, log_dir: Path) -> McpSession:
    async with SessionManager({config.id: config}, log_dir=log_dir) as manager:
        return await manager.get(config.id)


def connect_error(config: ServerConfig, log_dir: Path) -> ConnectError:
    async def go() -> None:
        await connect_once(config, log_dir)

    with pytest.raises(ConnectError) as info:
        run(go)
    return info.value


async def check_notes(session: McpSession) -> None:
    assert set(session.server_json) >= {"serverInfo", "capabilities", "protocolVersion"}
    assert session.server_json["serverInfo"]["name"] == "notes"
    tools = await session.list_tools()
    assert [t["name"] for t in tools] == NOTES_TOOLS
    get_note = next(t for t in tools if t["name"] == "get_note")
    assert get_note["inputSchema"]["required"] == ["id"]  # verbatim wire JSON, camelCase
    result = await session.call_tool("get_note", {"id": 1})
    assert result["structuredContent"]["id"] == 1
    assert "resultType" not in result  # raw wire JSON, nothing added by SDK models
    failing = await session.call_tool("flaky_sync", {})
    assert failing["isError"] is True  # a tool error is a result, not an exception


# --------------------------------------------------------------------------- transports


def test_stdio_session_lists_and_calls(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager(
            {"notes": stdio_config("notes", "notes_server")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("notes")
            assert await manager.get("notes") is session  # reused, not reconnected
            await check_notes(session)

    run(go)


def test_streamable_http_session_with_headers_and_env_expansion(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("auth_http", "http", "--token", "tok-123456789")
    mcp_json = tmp_path / ".mcp.json"
    mcp_json.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "auth": {
                        "type": "http",
                        "url": server.mcp_url,
                        "headers": {"Authorization": "Bearer ${AUTH_TEST_TOKEN}"},
                    }
                }
            }
        )
    )
    config = load_config(mcp_json, environ={"AUTH_TEST_TOKEN": "tok-123456789"})["auth"]

    async def go() -> None:
        async with SessionManager({"auth": config}, log_dir=tmp_path) as manager:
            session = await manager.get("auth")
            result = await session.call_tool("whoami", {})
            assert result["structuredContent"]["tokenSuffix"] == "6789"

    run(go)


@pytest.mark.slow
def test_http_wrong_token_is_auth_error(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("auth_http", "http", "--token", "right-token")
    config = ServerConfig(
        id="auth",
        transport="http",
        url=server.mcp_url,
        headers={"Authorization": "Bearer wrong"},
        connect_timeout=10,
    )
    err = connect_error(config, tmp_path)
    assert isinstance(err, AuthError)
    assert "HTTP 401" in err.reason and server.mcp_url in err.reason
    no_header = ServerConfig(id="auth", transport="http", url=server.mcp_url, connect_timeout=10)
    assert isinstance(connect_error(no_header, tmp_path), AuthError)


@pytest.mark.slow
def test_notes_over_streamable_http(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("notes_server", "http")
    config = ServerConfig(
        id="notes", transport="http", url=server.mcp_url, headers={"X-Trace": "1"}
    )

    async def go() -> None:
        async with SessionManager({"notes": config}, log_dir=tmp_path) as manager:
            await check_notes(await manager.get("notes"))

    run(go)


@pytest.mark.slow
def test_notes_over_legacy_sse(tmp_path: Path, start_server: Callable[..., RunningServer]) -> None:
    server = start_server("notes_server", "sse")
    config = ServerConfig(id="notes", transport="sse", url=server.sse_url, headers={"X-Trace": "1"})

    async def go() -> None:
        async with SessionManager({"notes": config}, log_dir=tmp_path) as manager:
            await check_notes(await manager.get("notes"))

    run(go)


def test_stdio_env_passes_config_env_and_path_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_TEST_PRIVATE", "must-not-leak")
    config = stdio_config("slow", "slow", env={"CODEMODE_TEST_GIVEN": "given-value"})

    async def go() -> dict[str, Any]:
        async with SessionManager({"slow": config}, log_dir=tmp_path) as manager:
            session = await manager.get("slow")
            return {
                name: (await session.call_tool("env", {"name": name}))["structuredContent"]["value"]
                for name in ("CODEMODE_TEST_GIVEN", "CODEMODE_TEST_PRIVATE", "PATH")
            }

    values = run(go)
    assert values["CODEMODE_TEST_GIVEN"] == "given-value"
    assert values["CODEMODE_TEST_PRIVATE"] is None  # only the SDK's whitelist + config env
    assert values["PATH"] == os.environ["PATH"]


# --------------------------------------------------------------------------- connect failures


def test_command_not_found(tmp_path: Path) -> None:
    err = connect_error(
        ServerConfig(id="x", transport="stdio", command="codemode-no-such-binary"), tmp_path
    )
    assert err.reason.startswith("command not found: codemode-no-such-binary")
    missing_path = ServerConfig(id="x", transport="stdio", command=str(tmp_path / "nope"))
    assert "command not found" in connect_error(missing_path, tmp_path).reason
    bad_cwd = ServerConfig(id="x", transport="stdio", command=PYTHON, cwd=str(tmp_path / "missing"))
    assert "working directory does not exist" in connect_error(bad_cwd, tmp_path).reason


def test_server_exits_at_start_shows_stderr_tail(tmp_path: Path) -> None:
    err = connect_error(stdio_config("crash", "crash_at_start"), tmp_path)
    assert "exited during startup" in err.reason
    assert "fatal: database file missing" in err.reason
    assert "Traceback" not in err.reason
    log = tmp_path / "crash.stderr.log"
    assert err.log_path == log
    assert "database file missing" in log.read_text()


@pytest.mark.slow
def test_hang_on_initialize_times_out_and_kills_the_server(tmp_path: Path) -> None:
    before = child_pids()
    config = stdio_config("hang", "hang_on_initialize", connect_timeout=1.5)
    started = time.monotonic()
    err = connect_error(config, tmp_path)
    assert "timed out after 1.5s while waiting for initialize" in err.reason
    assert time.monotonic() - started < 1.5 + PROMPT_S
    assert child_pids() - before == set()  # no leftover process


def test_connection_refused(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    err = connect_error(
        ServerConfig(id="down", transport="http", url=url, connect_timeout=5), tmp_path
    )
    assert err.reason.startswith(f"connection refused: {url}")
    err = connect_error(
        ServerConfig(id="down", transport="sse", url=url, connect_timeout=5), tmp_path
    )
    assert err.reason.startswith(f"connection refused: {url}")


@pytest.mark.slow
def test_http_hang_times_out(tmp_path: Path, start_server: Callable[..., RunningServer]) -> None:
    server = start_server("hang_on_initialize", "http")
    err = connect_error(
        ServerConfig(id="h", transport="http", url=server.mcp_url, connect_timeout=1), tmp_path
    )
    assert "timed out" in err.reason


@pytest.mark.slow
def test_wrong_http_path_is_named(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("notes_server", "http")
    err = connect_error(ServerConfig(id="n", transport="http", url=f"{server.base}/nope"), tmp_path)
    assert "HTTP 404" in err.reason and "MCP endpoint" in err.reason


def test_unknown_server_id(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager({}, log_dir=tmp_path) as manager:
            await manager.get("ghost")

    with pytest.raises(ConnectError, match="no server 'ghost'"):
        run(go)


@pytest.mark.slow
def test_one_failing_server_does_not_affect_others(tmp_path: Path) -> None:
    configs = {
        "crash": stdio_config("crash", "crash_at_start"),
        "notes": stdio_config("notes", "notes_server"),
    }

    async def go() -> None:
        async with SessionManager(configs, log_dir=tmp_path) as manager:
            with pytest.raises(ConnectError):
                await manager.get("crash")
            session = await manager.get("notes")
            assert (await session.call_tool("stats", {}))["content"]

    run(go)


# --------------------------------------------------------------------------- listing


@pytest.mark.slow
def test_all_pages_of_tools_list(tmp_path: Path) -> None:
    async def go() -> list[str]:
        session = await connect_once(stdio_config("paged", "paginated"), tmp_path)
        return [t["name"] for t in await session.list_tools()]

    assert run(go) == [f"item_{i:02d}" for i in range(1, 26)]  # 3 pages: 10 + 10 + 5


def test_bad_schema_server_goes_through_raw_path(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager(
            {"bad": stdio_config("bad", "bad_schema")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("bad")
            tools = {t["name"]: t for t in await session.list_tools()}
            assert set(tools) >= {"good_echo", "shout", "widget"}
            assert tools["shout"]["inputSchema"]["type"] == "string"  # verbatim, non-object root
            shout = await session.call_tool("shout", "hello")
            assert "HELLO" in json.dumps(shout)
            widget = await session.call_tool("widget", {})
            assert {
                "type": "widget",
                "widget": {"kind": "gauge", "value": 42, "max": 100},
            } in widget["content"]
            assert (await session.call_tool("good_echo", {"text": "hi"}))["content"][0][
                "text"
            ] == "hi"

    run(go)


@pytest.mark.slow
def test_s8_list_changed_notification_sets_tools_changed(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager(
            {"lc": stdio_config("lc", "list_changed")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("lc")
            before = [t["name"] for t in await session.list_tools()]
            assert "greet_x" not in before and session.tools_changed is False
            await session.call_tool("add_tool", {"name": "greet_x"})
            with anyio.fail_after(10):
                while not session.tools_changed:
                    await anyio.sleep(0.02)
            after = [t["name"] for t in await session.list_tools()]  # refreshed because it changed
            assert "greet_x" in after
            assert session.tools_changed is False

    run(go)


# --------------------------------------------------------------------------- calls


def test_call_timeout_cancels_the_request(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager(
            {"slow": stdio_config("slow", "slow")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("slow")
            with pytest.raises(CallTimeout) as info:
                await session.call_tool("sleep", {"ms": 20_000}, timeout=0.5)
            assert "timed out after 0.5s" in str(info.value)
            with anyio.fail_after(10):
                while True:
                    counts = (await session.call_tool("cancelled_count", {}))["structuredContent"]
                    if counts["cancelled"] >= 1:
                        break
                    await anyio.sleep(0.05)
            assert (await session.call_tool("sleep", {"ms": 1}))["structuredContent"] == {
                "slept": 1
            }

    run(go)


def test_s7_4_cancelling_the_caller_sends_notifications_cancelled(tmp_path: Path) -> None:
    async def go() -> None:
        async with SessionManager(
            {"slow": stdio_config("slow", "slow")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("slow")
            with anyio.move_on_after(0.5) as scope:
                await session.call_tool("sleep", {"ms": 20_000})
            assert scope.cancelled_caught
            with anyio.fail_after(10):
                while (await session.call_tool("cancelled_count", {}))["structuredContent"][
                    "interrupted"
                ] < 1:
                    await anyio.sleep(0.05)

    run(go)


@pytest.mark.slow
def test_s10_1_concurrent_calls_on_one_session(tmp_path: Path) -> None:
    async def go() -> int:
        async with SessionManager(
            {"slow": stdio_config("slow", "slow")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("slow")
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(session.call_tool, "sleep", {"ms": 1000})
            peak: int = (await session.call_tool("peak", {}))["structuredContent"]["peak"]
            return peak

    assert run(go) == 5  # the five sleeps were under way at once at the server


def test_json_rpc_error_is_call_error(tmp_path: Path) -> None:
    async def go() -> None:
        session_cfg = stdio_config("slow", "slow")
        async with SessionManager({"slow": session_cfg}, log_dir=tmp_path) as manager:
            session = await manager.get("slow")
            with pytest.raises(CallError) as info:
                await session.call_tool("rpc_error", {})
            assert info.value.code == -32050
            assert info.value.data == {"retryAfterMs": 1500}
            assert not isinstance(info.value, CallTimeout)
            total = await session.call_tool(
                "total", [1, 2, 3.5]
            )  # non-object arguments pass through
            assert total["structuredContent"]["total"] == 6.5

    run(go)


# --------------------------------------------------------------------------- lifecycle


@pytest.mark.slow
def test_get_in_one_task_close_from_another_leaves_no_process(tmp_path: Path) -> None:
    before = child_pids()

    async def go() -> set[int]:
        async with SessionManager(
            {"notes": stdio_config("notes", "notes_server")}, log_dir=tmp_path
        ) as manager:
            sessions: list[McpSession] = []

            async def getter() -> None:
                sessions.append(await manager.get("notes"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(getter)
            pids = child_pids() - before
            assert len(pids) == 1 and all(pid_alive(p) for p in pids)

            async def closer() -> None:
                await manager.aclose()

            async with anyio.create_task_group() as tg:
                tg.start_soon(closer)
            assert sessions[0].closed
            with pytest.raises(CallError):
                await sessions[0].call_tool("stats", {})
            return pids

    pids = run(go)
    assert not any(pid_alive(p) for p in pids)
    assert child_pids() - before == set()


def test_server_killed_midway_then_reconnects(tmp_path: Path) -> None:
    before = child_pids()

    async def go() -> None:
        async with SessionManager(
            {"slow": stdio_config("slow", "slow")}, log_dir=tmp_path
        ) as manager:
            session = await manager.get("slow")
            (pid,) = child_pids() - before
            os.kill(pid, signal.SIGKILL)
            with anyio.fail_after(10):  # noticed without any call: EOF ends the connection
                while not session.closed:
                    await anyio.sleep(0.02)
            with pytest.raises(CallError) as info:
                await session.call_tool("sleep", {"ms": 10})
            assert info.value.code == -32000 and session.closed
            fresh = await manager.get("slow")  # a dead session is replaced on the next get
            assert fresh is not session
            assert (await fresh.call_tool("sleep", {"ms": 1}))["structuredContent"] == {"slept": 1}

    run(go)
    assert child_pids() - before == set()


def test_log_file_receives_server_stderr(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys, runpy\n"
        "print('chatty: hello on stderr', file=sys.stderr, flush=True)\n"
        f"sys.argv = [{str(server_script('notes_server'))!r}, 'stdio']\n"
        f"sys.path.insert(0, {str(server_script('notes_server').parent)!r})  # as `python <file>` would\n"
        f"runpy.run_path({str(server_script('notes_server'))!r}, run_name='__main__')\n"
    )
    config = ServerConfig(id="chatty", transport="stdio", command=PYTHON, args=(str(script),))

    async def go() -> None:
        async with SessionManager({"chatty": config}, log_dir=tmp_path / "logs") as manager:
            await manager.get("chatty")

    run(go)
    assert "chatty: hello on stderr" in (tmp_path / "logs" / "chatty.stderr.log").read_text()


@pytest.mark.slow
def test_aclose_while_connecting_aborts_quickly(tmp_path: Path) -> None:
    before = child_pids()
    config = stdio_config("hang", "hang_on_initialize", connect_timeout=60)

    async def go() -> str:
        async with SessionManager({"hang": config}, log_dir=tmp_path) as manager:
            errors: list[ConnectError] = []

            async def getter() -> None:
                try:
                    await manager.get("hang")
                except ConnectError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(getter)
                await anyio.sleep(0.5)
                await manager.aclose()  # from a different task than the one waiting in get()
            return errors[0].reason

    started = time.monotonic()
    assert run(go) == "connection attempt cancelled"
    assert time.monotonic() - started < PROMPT_S  # not the 60 s connect timeout
    assert child_pids() - before == set()


@pytest.mark.slow
def test_http_credentials_revoked_mid_session_are_call_auth_error(
    tmp_path: Path, start_server: Callable[..., RunningServer]
) -> None:
    server = start_server("auth_http", "http", "--token", "right-token")
    config = ServerConfig(
        id="auth",
        transport="http",
        url=server.mcp_url,
        headers={"Authorization": "Bearer right-token"},
        connect_timeout=10,
        call_timeout=10,
    )

    async def go() -> None:
        async with SessionManager({"auth": config}, log_dir=tmp_path) as manager:
            session = await manager.get("auth")
            assert (await session.call_tool("revoke", {}))["content"][0]["text"] == "revoked"
            with pytest.raises(CallAuthError) as info:
                await session.call_tool("whoami", {})
            assert info.value.status == 401 and "HTTP 401" in info.value.message

    run(go)


# --------------------------------------------------------------------------- cold start


def test_inherited_env_vars_are_the_sdks() -> None:
    # A server started before the SDK is imported gets the SDK's own whitelist.
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    from codemode_gen.client.transports import INHERITED_ENV_VARS

    if os.name == "posix":
        assert list(INHERITED_ENV_VARS) == list(DEFAULT_INHERITED_ENV_VARS)


COLD_CONNECT = """
import json, os, sys
import anyio, anyio.abc
from pathlib import Path

spawned = []
open_process = anyio.open_process

async def recording_open_process(*args, **kwargs):
    spawned.append("mcp" in sys.modules)
    return await open_process(*args, **kwargs)

anyio.open_process = recording_open_process
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig

async def main():
    config = ServerConfig(id="slow", transport="stdio", command=sys.executable, args=(sys.argv[1], "stdio"),
                          env={"CODEMODE_TEST_GIVEN": "given-value"})
    async with SessionManager({"slow": config}, log_dir=Path(sys.argv[2])) as manager:
        session = await manager.get("slow")
        values = {name: (await session.call_tool("env", {"name": name}))["structuredContent"]["value"]
                  for name in ("CODEMODE_TEST_GIVEN", "CODEMODE_TEST_PRIVATE", "PATH")}
    print(json.dumps({"spawned": spawned, "values": values}))

anyio.run(main)
"""


@pytest.mark.slow
def test_cold_connect_starts_the_server_before_importing_the_sdk(tmp_path: Path) -> None:
    # In a fresh process (the SDK not imported yet) the stdio server is started first and the
    # SDK imported while it starts; the server gets the same environment and works the same.
    import subprocess
    import sys

    env = {**os.environ, "CODEMODE_TEST_PRIVATE": "must-not-leak"}
    done = subprocess.run(
        [sys.executable, "-c", COLD_CONNECT, str(server_script("slow")), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["spawned"] == [False], (
        report
    )  # one server process, started before `mcp` was imported
    assert report["values"]["CODEMODE_TEST_GIVEN"] == "given-value"
    assert report["values"]["CODEMODE_TEST_PRIVATE"] is None
    assert report["values"]["PATH"] == os.environ["PATH"]
