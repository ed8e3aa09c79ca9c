"""`codemode-gen serve`: a real MCP client (the SDK's) talks to it over stdio (spec §2, §3)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sandbox_worker_pids
from tests.runtime_support import PYTHON, RUN_TIMEOUT, against_serve, mcp_project

pytestmark = pytest.mark.timeout(120)

# How long the test watches for a sandbox worker that should not be there: far longer than
# spawning the pool takes once it is asked for (it is asked for at once when it is).
NO_WORKER_WATCH_S = 0.5


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mcp_project(tmp_path_factory.mktemp("serve"), slow=["slow", "stdio"])


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
    for needle in (
        "structuredContent",
        "base64",
        "timeoutMs",
        "maxToolCalls",
        "maxLogBytes",
        "maxMemoryBytes",
        "`slow`",
        "setInterval",
        "Promise.all",
        "Top-level await",
        'declare module "@codemode/servers/slow"',
        '"@codemode/discovery"',
    ):
        assert needle in text, needle


@pytest.mark.slow
def test_s3_serve_runs_scripts_and_reuses_sessions_between_runs(project: Path) -> None:
    code = "import { tick } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = (await tick()).ticks;"

    async def body(client: Any) -> Any:
        first = await client.call_tool("codemode.run", {"code": code})
        second = await client.call_tool(
            "codemode.run", {"code": code, "limits": {"timeoutMs": 5000}}
        )
        broken = await client.call_tool("codemode.run", {"code": "let = ;"})
        missing = await client.call_tool("codemode.run", {"limits": {}})
        return first, second, broken, missing

    first, second, broken, missing = against_serve(project, body, "--out", str(project / "out"))
    assert not first.is_error and first.structured_content["result"] == 1
    assert json.loads(first.content[0].text) == first.structured_content
    assert second.structured_content["result"] == 2  # same server process: the session was reused
    assert not broken.is_error  # §3.3.4: script failures are responses, not tool errors
    assert [
        d["code"] for d in broken.structured_content["diagnostics"] if d["severity"] == "error"
    ] == ["SYNTAX_ERROR"]
    assert [d["code"] for d in missing.structured_content["diagnostics"]] == ["INVALID_REQUEST"]


def _workers(pid: int) -> list[int]:
    """Sandbox worker processes of the serve process `pid`."""
    return sorted(sandbox_worker_pids(pid))


def test_initialize_is_answered_before_the_sandbox_pool_starts(tmp_path: Path) -> None:
    # Fast start, without timing anything: serve answers initialize having started no sandbox
    # worker (and none starts until the client has initialized); then the pool warms, and a
    # tools/call is answered. Raw JSON-RPC lines, so the test decides when each message goes.
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}}')
    proc = subprocess.Popen(
        [PYTHON, "-m", "codemode_gen", "serve", "--config", str(tmp_path / ".mcp.json")],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    stdout = proc.stdout
    assert proc.stdin is not None and stdout is not None
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            message = json.loads(lines.get(timeout=RUN_TIMEOUT))
            if message.get("id") == request_id:
                return message

    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"},
                },
            }
        )
        assert answer(1)["result"]["serverInfo"]["name"] == "codemode-gen"
        assert _workers(proc.pid) == []
        time.sleep(NO_WORKER_WATCH_S)
        assert _workers(proc.pid) == []  # nothing warms before the client has initialized

        send({"method": "notifications/initialized"})
        deadline = time.monotonic() + RUN_TIMEOUT
        while not _workers(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _workers(proc.pid), "the sandbox pool should warm once the client has initialized"

        send(
            {
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "codemode.run",
                    "arguments": {"code": "globalThis.__codemode_result__ = 6 * 7;"},
                },
            }
        )
        assert answer(2)["result"]["structuredContent"]["result"] == 42
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0
