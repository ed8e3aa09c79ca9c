"""`codemode-gen serve` launched the way agent clients launch it (README "Use it from your agent").

Clients start the server from their own working directory, with no virtualenv active (the
absolute path of the console script instead), show its stderr only in a log view, and take an
exit or a JSON-RPC error for a flaky connection. Each test spawns the real console script and
talks to it with the SDK's stdio client, as tests/runtime/frontends/test_serve.py does.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from tests.conftest import HANG_S, PROMPT_S
from tests.runtime_support import REPO, codes, fixture_set, write_out

if TYPE_CHECKING:
    from mcp.client.session import MessageHandlerFnT

pytestmark = pytest.mark.timeout(120)

CODEMODE_GEN = Path(sys.executable).parent / "codemode-gen"
VENV_BIN = CODEMODE_GEN.parent
# A client's patience for one request in these tests; a hang fails the test, not the suite.
REQUEST_TIMEOUT_S = 60
# `hang` never answers initialize; it is given this long before serve gives up on it, so any
# request that waited for it would take at least this long.
HANG_CONNECT_TIMEOUT_S = HANG_S
# What "does not wait for the hanging server" means here: far below its connect timeout, with
# room for a loaded 2-core CI machine (a run that imports a server also starts that server).
NO_WAIT_BOUND_S = PROMPT_S

# How late the "late" server starts: far more than serve needs to answer initialize + tools/list.
LATE_START_S = 1

TICK = {"name": "tick", "inputSchema": {"type": "object", "properties": {}}}


def client_env() -> dict[str, str]:
    """PATH as a client has it: without the virtualenv; and no VIRTUAL_ENV (never passed on)."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    return {"PATH": os.pathsep.join(path) or os.defpath}


def project_with(
    tmp_path: Path,
    servers: dict[str, Any],
    *,
    out_tools: dict[str, list[dict[str, Any]]] | None = None,
    toml: str | None = None,
) -> Path:
    """A project folder with copies of the demo and test servers, so .mcp.json can use relative paths."""
    proj = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO / "examples" / "servers", proj / "servers", ignore=ignore)
    shutil.copytree(REPO / "tests" / "servers", proj / "test_servers", ignore=ignore)
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    if toml is not None:
        (proj / "codemode.toml").write_text(toml, encoding="utf-8")
    if out_tools:
        write_out(proj / "out", [fixture_set(cid, tools) for cid, tools in out_tools.items()])
    return proj


def elsewhere(tmp_path: Path) -> Path:
    """The client's own working directory: unrelated, with a garbage out/manifest.json that
    serve must not pick up."""
    cwd = tmp_path / "client-cwd"
    (cwd / "out").mkdir(parents=True)
    (cwd / "out" / "manifest.json").write_text("{ this is not a manifest", encoding="utf-8")
    (cwd / "codemode.toml").write_text("this is = = not toml", encoding="utf-8")
    return cwd


async def _session(
    args: list[str],
    cwd: Path,
    log: Path,
    body: Callable[[Any], Awaitable[Any]],
    on_message: MessageHandlerFnT | None,
) -> Any:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(CODEMODE_GEN), args=["serve", *args], cwd=str(cwd), env=client_env()
    )
    with log.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            mode="legacy",
            read_timeout_seconds=REQUEST_TIMEOUT_S,
            message_handler=on_message,
            client_info=types.Implementation(name="test", version="0"),
        ) as client:
            return await body(client)


def serve_session(
    args: list[str],
    cwd: Path,
    body: Callable[[Any], Awaitable[Any]],
    on_message: MessageHandlerFnT | None = None,
) -> tuple[Any, str]:
    """Run `body(client)` against a fresh `codemode-gen serve ARGS`; returns (its result, serve's stderr)."""
    log = cwd / "serve.stderr.log"
    result = anyio.run(_session, args, cwd, log, body, on_message)
    return result, log.read_text()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CODEMODE_GEN), *args],
        cwd=cwd,
        env=client_env(),
        capture_output=True,
        text=True,
        timeout=REQUEST_TIMEOUT_S,
    )


@pytest.mark.slow
def test_s2_tool_name_option_is_listed_called_and_printed_as_served(tmp_path: Path) -> None:
    proj = project_with(
        tmp_path,
        {
            "slow": {
                "command": "${CODEMODE_PYTHON:-python}",
                "args": ["test_servers/slow.py", "stdio"],
            }
        },
        out_tools={"slow": [TICK]},
    )
    args = ["--config", str(proj / ".mcp.json"), "--tool-name", "codemode_run"]

    async def body(client: Any) -> Any:
        tools = (await client.list_tools()).tools
        ok = await client.call_tool(
            "codemode_run", {"code": "globalThis.__codemode_result__ = 6 * 7;"}
        )
        wrong = await client.call_tool("codemode.run", {"code": "1"})
        return tools, ok, wrong, client.instructions

    (tools, ok, wrong, instructions), _ = serve_session(args, elsewhere(tmp_path), body)
    assert [t.name for t in tools] == ["codemode_run"]
    assert ok.structured_content["result"] == 42 and not ok.is_error
    assert wrong.is_error and "codemode_run" in wrong.content[0].text
    assert "codemode_run" in (instructions or "")

    printed = cli("serve", *args, "--print-prompt", cwd=elsewhere(tmp_path / "again"))
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == tools[0].description  # exactly as served
    assert "characters" in printed.stderr and "tokens" in printed.stderr


@pytest.mark.parametrize(
    "bad", [["--tool-name", "codemode run"], ["--tool-name", "x" * 129], ["--prompt-budget", "10"]]
)
def test_s2_invalid_serve_options_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    proc = cli("serve", *bad, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert bad[0] in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_launched_from_an_unrelated_cwd_without_the_venv(tmp_path: Path) -> None:
    # Relative paths everywhere: `notes` runs a script relative to the config's folder (its
    # default cwd) with ${CODEMODE_PYTHON:-python}; `slow` is a relative command in bin/ with a
    # relative cwd, and gets the interpreter through its env.
    proj = project_with(
        tmp_path,
        {
            "notes": {"command": "${CODEMODE_PYTHON:-python}", "args": ["servers/notes_server.py"]},
            "slow": {
                "command": "./bin/slow",
                "cwd": "test_servers",
                "args": ["stdio"],
                "env": {"PY": "${CODEMODE_PYTHON}"},
            },
        },
        out_tools={"slow": [TICK]},
    )
    (proj / "bin").mkdir()
    (proj / "bin" / "slow").write_text('#!/bin/sh\nexec "$PY" slow.py "$@"\n', encoding="utf-8")
    (proj / "bin" / "slow").chmod(0o755)
    code = (
        "import { get_note } from '@codemode/servers/notes';\nimport { tick } from '@codemode/servers/slow';\n"
        "globalThis.__codemode_result__ = [(await get_note({id: 2})).title, (await tick()).ticks];"
    )

    async def body(client: Any) -> Any:
        tools = (await client.list_tools()).tools
        run = await client.call_tool("codemode.run", {"code": code})
        return tools[0].description, run.structured_content

    (description, response), stderr = serve_session(
        ["--config", str(proj / ".mcp.json")], elsewhere(tmp_path), body
    )
    assert response["result"] == ["Groceries", 1], response["diagnostics"]
    assert not codes(response, "error")
    assert (
        "CONFIG_ERROR" not in description and "NOT available" not in description
    )  # not the cwd's garbage out/
    assert "error:" not in stderr


@pytest.mark.slow
def test_a_hanging_server_missing_from_out_delays_neither_tools_list_nor_other_runs(
    tmp_path: Path,
) -> None:
    proj = project_with(
        tmp_path,
        {
            "hang": {
                "command": "${CODEMODE_PYTHON:-python}",
                "args": ["test_servers/hang_on_initialize.py", "stdio"],
            },
            "slow": {
                "command": "${CODEMODE_PYTHON:-python}",
                "args": ["test_servers/slow.py", "stdio"],
            },
        },
        toml=f"[servers.hang]\nconnect_timeout = {HANG_CONNECT_TIMEOUT_S}\n",
    )
    code = "import { tick } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = (await tick()).ticks;"

    async def body(client: Any) -> Any:
        t0 = time.monotonic()
        tools = (await client.list_tools()).tools
        t1 = time.monotonic()
        run = await client.call_tool("codemode.run", {"code": code})
        t2 = time.monotonic()
        return tools, run.structured_content, t1 - t0, t2 - t1

    (tools, response, list_s, run_s), _ = serve_session(
        ["--config", str(proj / ".mcp.json")], elsewhere(tmp_path), body
    )
    assert [t.name for t in tools] == ["codemode.run"]
    assert list_s < NO_WAIT_BOUND_S and run_s < NO_WAIT_BOUND_S, (list_s, run_s)
    assert response["result"] == 1 and not codes(response, "error"), response["diagnostics"]
    [connecting] = [d for d in response["diagnostics"] if "'hang'" in d["message"]]
    assert connecting["severity"] == "info" and "still connecting" in connecting["message"], (
        connecting
    )


@pytest.mark.slow
def test_a_server_connected_in_background_joins_the_description_and_the_client_is_told(
    tmp_path: Path,
) -> None:
    import mcp_types as types

    # `slow` takes a second to start, so the first tools/list surely comes before it is connected.
    proj = project_with(
        tmp_path, {"slow": {"command": "./bin/late", "env": {"PY": "${CODEMODE_PYTHON}"}}}
    )
    (proj / "bin").mkdir()
    (proj / "bin" / "late").write_text(
        f'#!/bin/sh\nsleep {LATE_START_S}\nexec "$PY" test_servers/slow.py stdio\n'
    )
    (proj / "bin" / "late").chmod(0o755)
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def body(client: Any) -> Any:
        first = (await client.list_tools()).tools[0].description
        with anyio.fail_after(REQUEST_TIMEOUT_S):
            await changed.wait()
        return first, (await client.list_tools()).tools[0].description

    (first, second), _ = serve_session(
        ["--config", str(proj / ".mcp.json")], elsewhere(tmp_path), body, on_message
    )
    declared = 'declare module "@codemode/servers/slow"'
    assert declared in second and "function tick" in second
    assert (
        declared not in first
    )  # listed before `slow` was connected: announced with tools/list_changed


def test_s3_3_4_a_missing_config_keeps_serving_and_every_run_says_why(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / ".mcp.json"

    async def body(client: Any) -> Any:
        tools = (await client.list_tools()).tools
        run = await client.call_tool(
            "codemode.run", {"code": "globalThis.__codemode_result__ = 1;"}
        )
        return tools, run

    (tools, run), stderr = serve_session(["--config", str(missing)], elsewhere(tmp_path), body)
    assert [t.name for t in tools] == ["codemode.run"]
    assert "not found" in (tools[0].description or "") and str(missing) in (
        tools[0].description or ""
    )
    assert not run.is_error
    response = run.structured_content
    assert response["result"] is None and response["logs"] == [] and response["toolTrace"] == []
    [diag] = response["diagnostics"]
    assert (
        diag["severity"] == "error"
        and diag["code"] == "CONFIG_ERROR"
        and "not found" in diag["message"]
    )
    assert diag["hint"] and "restart" in diag["hint"]
    assert "error:" in stderr and str(missing) in stderr and "Traceback" not in stderr


@pytest.mark.slow
def test_s3_3_4_an_unreadable_out_manifest_is_a_config_error_not_a_jsonrpc_error(
    tmp_path: Path,
) -> None:
    proj = project_with(tmp_path, {})
    (proj / "out").mkdir()
    (proj / "out" / "manifest.json").write_text('{"unrelated": true}', encoding="utf-8")

    async def body(client: Any) -> Any:
        tools = (await client.list_tools()).tools
        run = await client.call_tool(
            "codemode.run", {"code": "globalThis.__codemode_result__ = 1;"}
        )
        return tools, run

    (tools, run), stderr = serve_session(
        ["--config", str(proj / ".mcp.json")], elsewhere(tmp_path), body
    )
    assert "manifest" in (tools[0].description or "")
    assert not run.is_error and codes(run.structured_content) == ["CONFIG_ERROR"]
    assert "manifest" in run.structured_content["diagnostics"][0]["message"]
    assert stderr.count("error:") == 1  # reported once, not once per request


def _snippet_command(client: str, stdout: str) -> tuple[str, list[str]]:
    if client == "claude-code":
        words = shlex.split(stdout)
        assert (
            words[:6] == ["claude", "mcp", "add-json", "-s", "user", "codemode"] and len(words) == 7
        )
        entry = json.loads(words[6])
        assert entry["type"] == "stdio"
    elif client == "codex":
        entry = tomllib.loads(stdout)["mcp_servers"]["codemode"]
        assert entry["tool_timeout_sec"] >= 600 and entry["startup_timeout_sec"] >= 10
        assert entry["required"] is True  # Codex waits for serve before the model's first turn
    else:
        entry = json.loads(stdout)["mcpServers"]["codemode"]
    return entry["command"], entry["args"]


@pytest.mark.parametrize("client", ["claude-code", "cursor", "codex", "json"])
def test_print_config_gives_absolute_paths_for_each_client(tmp_path: Path, client: str) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / ".mcp.json").write_text('{"mcpServers": {}}')
    extra = (
        ["--tool-name", "codemode_run"] if client == "json" else []
    )  # the OpenAI Agents SDK's choice
    proc = cli(
        "serve", "--config", "proj/.mcp.json", "--print-config", client, *extra, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    command, args = _snippet_command(client, proc.stdout)
    assert Path(command).is_absolute() and Path(command) == CODEMODE_GEN
    assert args[:3] == ["serve", "--config", str(tmp_path / "proj" / ".mcp.json")]
    assert args[3:] == extra
