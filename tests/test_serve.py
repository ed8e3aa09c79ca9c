"""`codemode-gen serve`: a real MCP client (the SDK's) talks to it over stdio (spec §2, §3)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .runtime_support import PYTHON, script

pytestmark = pytest.mark.timeout(120)


async def session_run(project: Path, body: Any) -> Any:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode_gen", "serve", "--config", str(project / ".mcp.json"), "--out", str(project / "out")],
        cwd=str(project),
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    with (project / "serve.stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=60,
                          client_info=types.Implementation(name="test", version="0")) as client:
            return await body(client)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("serve")
    (base / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "slow": {"command": PYTHON, "args": [script("slow"), "stdio"]},
    }}))
    return base


@pytest.mark.slow
def test_s2_serve_exposes_exactly_one_tool_documenting_the_host(project: Path) -> None:
    async def body(client: Any) -> Any:
        # out/ lacks `slow`: tools/list never waits for it, and its declarations join the
        # description once it is connected (here by a run that requests it).
        await client.call_tool("codemode.run", {"code": "1", "requestedCapabilities": ["slow"]})
        return (await client.list_tools()).tools

    tools = anyio.run(session_run, project, body)
    assert [t.name for t in tools] == ["codemode.run"]
    tool = tools[0]
    assert tool.input_schema["required"] == ["code"]
    assert set(tool.input_schema["properties"]) == {"code", "limits", "requestedCapabilities"}
    text = tool.description
    for needle in ("structuredContent", "base64", "timeoutMs", "maxToolCalls", "maxLogBytes", "maxMemoryBytes",
                   "`slow`", "setInterval", "Promise.all", "Top-level await",
                   'declare module "@codemode/servers/slow"', '"@codemode/discovery"'):
        assert needle in text, needle


@pytest.mark.slow
def test_s3_serve_runs_scripts_and_reuses_sessions_between_runs(project: Path) -> None:
    code = "import { tick } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = (await tick()).ticks;"

    async def body(client: Any) -> Any:
        first = await client.call_tool("codemode.run", {"code": code})
        second = await client.call_tool("codemode.run", {"code": code, "limits": {"timeoutMs": 5000}})
        broken = await client.call_tool("codemode.run", {"code": "let = ;"})
        missing = await client.call_tool("codemode.run", {"limits": {}})
        return first, second, broken, missing

    first, second, broken, missing = anyio.run(session_run, project, body)
    assert not first.is_error and first.structured_content["result"] == 1
    assert json.loads(first.content[0].text) == first.structured_content
    assert second.structured_content["result"] == 2  # same server process: the session was reused
    assert not broken.is_error  # §3.3.4: script failures are responses, not tool errors
    assert [d["code"] for d in broken.structured_content["diagnostics"] if d["severity"] == "error"] == ["SYNTAX_ERROR"]
    assert [d["code"] for d in missing.structured_content["diagnostics"]] == ["INVALID_REQUEST"]
