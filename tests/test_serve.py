"""`codemode-gen serve`: a real MCP client (the SDK's) talks to it over stdio (spec §2, §3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .runtime_support import PYTHON, against_serve, script

pytestmark = pytest.mark.timeout(120)


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

    tools = against_serve(project, body, "--out", str(project / "out"))
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

    first, second, broken, missing = against_serve(project, body, "--out", str(project / "out"))
    assert not first.is_error and first.structured_content["result"] == 1
    assert json.loads(first.content[0].text) == first.structured_content
    assert second.structured_content["result"] == 2  # same server process: the session was reused
    assert not broken.is_error  # §3.3.4: script failures are responses, not tool errors
    assert [d["code"] for d in broken.structured_content["diagnostics"] if d["severity"] == "error"] == ["SYNTAX_ERROR"]
    assert [d["code"] for d in missing.structured_content["diagnostics"]] == ["INVALID_REQUEST"]
