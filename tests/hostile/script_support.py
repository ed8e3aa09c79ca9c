"""Shared machinery of the hostile-script tests (tests/hostile/test_scripts_*.py, spec §11).

Every test runs a script that misbehaves against real QuickJS workers and a real MCP server
(tests/hostile/script_server.py) through the real host: `CodeMode` (on a background loop,
tests/runtime_support.HostThread), `codemode-gen run` (a subprocess: a §3.3 JSON on stdout, no
traceback on stderr) or `codemode-gen serve` (the SDK's client over stdio). Each test checks the
clean error *and* that nothing else was lost: the same host, session and server process still
answer the next call (`assert_still_serves`), and the run came back within 1.5 × timeoutMs.
The modules' `host` and `project` fixtures are conftest.py's, built from the helpers here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.config import ServerConfig

# The hostile tests import HostThread, codes, errors and sandbox_worker_pids from here too.
try:
    from tests.conftest import PROMPT_S
    from tests.conftest import sandbox_worker_pids as sandbox_worker_pids
    from tests.runtime_support import HostThread, against_serve, errors
    from tests.runtime_support import codes as codes
except ImportError:  # pytest's importlib mode names this package `hostile`: find tests/ by path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.conftest import PROMPT_S
    from tests.conftest import sandbox_worker_pids as sandbox_worker_pids
    from tests.runtime_support import HostThread, against_serve, errors
    from tests.runtime_support import codes as codes

SERVER = Path(__file__).resolve().parent / "script_server.py"
PYTHON = sys.executable
CLI = [PYTHON, "-m", "codemode_gen"]
# The host's promise (docs/DESIGN.md "Deadline") is an answer within 1.5 × timeoutMs whatever the
# script does; bench/ measures that figure. A test on a loaded machine checks the behaviour: the
# run was answered at its deadline plus scheduling slack (PROMPT_S), never after a stall.
# Bounds one CLI or serve subprocess in a test (start-up included) on a loaded machine.
PROCESS_TIMEOUT = 90.0

# Reads the server's call counter and returns it: the probe every test ends with.
TICKS = "import { ticks } from '@codemode/servers/s';\nglobalThis.__codemode_result__ = (await ticks()).ticks;"


def server_config(server_id: str = "s", **fields: Any) -> ServerConfig:
    return ServerConfig(
        id=server_id, transport="stdio", command=PYTHON, args=(str(SERVER), "stdio"), **fields
    )


def host_fixture(
    tmp_path_factory: pytest.TempPathFactory, name: str, **extra: ServerConfig
) -> Iterator[HostThread]:
    """A CodeMode with the script server as `s` (plus `extra` servers), connected and warm."""
    base = tmp_path_factory.mktemp(name)
    host = HostThread({"s": server_config(), **extra}, base / "out", base / "logs")
    host.run(TICKS)  # connect and warm the worker pool
    try:
        yield host
    finally:
        host.close()


def timed(host: HostThread, code: str, **kwargs: Any) -> tuple[dict[str, Any], float]:
    """(response, seconds) of one run."""
    started = time.monotonic()
    response = host.run(code, **kwargs)
    return response, time.monotonic() - started


def within_deadline(elapsed: float, timeout_ms: int) -> bool:
    return elapsed <= timeout_ms / 1000 + PROMPT_S


def assert_section_3_3(response: Any) -> None:
    """A §3.3 response: logs, result, diagnostics (and toolTrace) of the right shapes, and
    plain JSON that encodes as UTF-8."""
    assert isinstance(response, dict)
    assert isinstance(response["logs"], list) and isinstance(response["diagnostics"], list)
    assert "result" in response
    assert isinstance(response.get("toolTrace", []), list)
    for entry in response["logs"]:
        assert set(entry) == {"level", "message", "timeMs"}
    for d in response["diagnostics"]:
        assert (
            d["severity"] in ("error", "warning", "info")
            and d["code"]
            and isinstance(d["message"], str)
        )
    json.dumps(response, ensure_ascii=False).encode("utf-8")


def assert_still_serves(host: HostThread, expected_ticks: int | None = None) -> int:
    """The host, its session and the server process answer the next call."""
    response = host.run(TICKS)
    assert not errors(response), response["diagnostics"]
    ticks = response["result"]
    assert isinstance(ticks, int)
    if expected_ticks is not None:
        assert ticks == expected_ticks
    return ticks


# ---------------------------------------------------------------------------- codemode-gen run


def cli_project(base: Path) -> Path:
    (base / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"s": {"command": PYTHON, "args": [str(SERVER), "stdio"]}}})
    )
    return base


def run_cli(
    project: Path, code: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`codemode-gen run` on `code`: stdout must be one §3.3 JSON, stderr free of tracebacks."""
    script = project / "script.js"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [*CLI, "run", "--no-pretty", *args, str(script)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
    response = json.loads(proc.stdout)
    assert_section_3_3(response)
    return proc, response


# ---------------------------------------------------------------------------- codemode-gen serve


def serve_session(project: Path, body: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run `body(client)` against `codemode-gen serve` (the SDK's client over stdio)."""
    result = against_serve(project, body, "--out", str(project / "out"))
    log = (project / "serve.stderr.log").read_text()
    assert "Traceback" not in log, log
    return result


async def serve_run(client: Any, code: str, **arguments: Any) -> dict[str, Any]:
    """One codemode.run through serve: never a tool error, always a §3.3 structuredContent."""
    result = await client.call_tool("codemode.run", {"code": code, **arguments})
    assert not result.is_error, result
    response: dict[str, Any] = result.structured_content
    assert_section_3_3(response)
    assert json.loads(result.content[0].text) == response
    return response
