"""Shared machinery for the runtime's spec-section tests (tests/**/test_s*.py).

`HostThread` runs one `CodeMode` on its own event loop in a background thread, so a
module-scoped fixture can keep real server processes and sessions alive across tests while
each test calls `host.run(code)` synchronously. It starts once the servers out/ lacks have
connected (or failed): keep hanging servers in out/, or start-up waits for their
connect_timeout. The CodeMode is entered and exited inside one long-lived task, as anyio's task
groups require.

`against_serve` runs a body against a real `codemode-gen serve` (the SDK's client over stdio).
Finding and starting the test servers is conftest.py's (`server_script`, `stdio_config`,
`launch_server`), under the short names these tests use.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.runtime.codemode import CodeMode
from codemode_gen.runtime.host.telemetry import Telemetry

from .conftest import PYTHON, REPO, launch_server, server_script
from .conftest import stdio_config as stdio

__all__ = [
    "PYTHON",
    "REPO",
    "RUN_TIMEOUT",
    "HostThread",
    "against_serve",
    "assert_ok",
    "codes",
    "errors",
    "fixture_set",
    "mcp_project",
    "script",
    "slow_host",
    "start_http",
    "stdio",
    "write_out",
]

T = TypeVar("T")

# Bounds one test run (server start + script); a hang fails the test instead of the suite.
RUN_TIMEOUT = 60.0


def script(name: str) -> str:
    """examples/servers/<name>.py or tests/servers/<name>.py, as a string for .mcp.json."""
    return str(server_script(name))


def mcp_project(base: Path, **servers: list[str]) -> Path:
    """`base` with a .mcp.json starting each server `id=[name, *args]` as `python <script(name)> ARGS`."""
    entries = {
        sid: {"command": PYTHON, "args": [script(name), *args]}
        for sid, (name, *args) in servers.items()
    }
    (base / ".mcp.json").write_text(json.dumps({"mcpServers": entries}))
    return base


class HostThread:
    """A CodeMode living in a background event loop; `run()` is synchronous."""

    def __init__(
        self,
        configs: Mapping[str, ServerConfig],
        out_dir: Path,
        log_dir: Path,
        settings: Settings | None = None,
        *,
        approve_all: bool = False,
        connect: bool = True,
        telemetry: Telemetry | None = None,
    ) -> None:
        # approve_all: tools whose approval policy asks (runtime/host/approval.py) are called without
        # asking; for tests of other things that call such tools (unannotated, destructive).
        # connect=False: servers are connected by the first run that names them, not at start.
        # telemetry: where the runs' spans and metrics go (runtime/host/telemetry.py).
        self.connect = connect
        self.cm = CodeMode(
            configs,
            out_dir=out_dir,
            settings=settings,
            log_dir=log_dir,
            approve_all=approve_all,
            telemetry=telemetry,
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="codemode-host", daemon=True
        )
        self.thread.start()
        self._stop: asyncio.Event | None = None
        ready: Future[None] = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._hold(ready), self.loop)
        ready.result(timeout=RUN_TIMEOUT)

    async def _hold(self, ready: Future[None]) -> None:
        self._stop = asyncio.Event()
        try:
            async with self.cm:
                # As `serve` does at start-up: servers out/ lacks connect in the background, and a
                # run includes only those connected by then. Tests expect every server in
                # discovery from the first run, so the host is ready once they have settled.
                if self.connect:
                    self.cm.connect_in_background()
                    await self.cm.wait_background(RUN_TIMEOUT)
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = RUN_TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)

    def run(self, code: str, **kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.call(self.cm.run(code, **kwargs))
        return result

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._main.result(timeout=RUN_TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()


def slow_host(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    warm: str = "import { tick } from '@codemode/servers/slow'; await tick();",
) -> Iterator[HostThread]:
    """For a module-scoped fixture: a HostThread with tests/servers/slow.py as `slow`, connected
    and warm (the script `warm` has run), closed when the module is done."""
    base = tmp_path_factory.mktemp(name)
    host = HostThread({"slow": stdio("slow", "slow")}, base / "out", base / "logs")
    try:
        host.run(warm)
        yield host
    finally:
        host.close()


def errors(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [d for d in response["diagnostics"] if d["severity"] == "error"]


def codes(response: Mapping[str, Any], severity: str | None = None) -> list[str]:
    return [
        d["code"] for d in response["diagnostics"] if severity is None or d["severity"] == severity
    ]


def assert_ok(response: Mapping[str, Any]) -> Any:
    assert not errors(response), response["diagnostics"]
    return response["result"]


def start_http(
    name: str, *args: str, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start an HTTP test server on a free loopback port; returns (process, base URL). The caller
    kills the process."""
    server = launch_server(name, "http", *args, env=env)
    return server.proc, server.base


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a codemode-gen process a test starts: PATH, PYTHONPATH, where a
    type check finds or downloads TypeScript (conftest: a test's cache, no registry), and where
    OAuth logins are kept (conftest: a folder of the test run)."""
    from codemode_gen.client.tokenstore import AUTH_DIR_ENV, STORE_ENV
    from codemode_gen.runtime.host.tsinstall import CACHE_ENV, REGISTRY_ENV

    passed = ("PATH", "PYTHONPATH", CACHE_ENV, REGISTRY_ENV, AUTH_DIR_ENV, STORE_ENV)
    return {**{name: os.environ[name] for name in passed if name in os.environ}, **extra}


def path_without_node(folder: Path) -> str:
    """A PATH of one empty folder: no node, npm or tsc (a fresh `pip install`); codemode-gen's
    own children run sys.executable by absolute path."""
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def against_serve(
    project: Path,
    body: Callable[[Any], Awaitable[T]],
    *serve_args: str,
    message_handler: Any = None,
    elicitation_callback: Any = None,
    env: Mapping[str, str] | None = None,
    mode: str = "legacy",
) -> T:
    """`body(client)` against `codemode-gen serve --config <project>/.mcp.json SERVE_ARGS`, started
    in `project` (the SDK's client over stdio); serve's stderr goes to <project>/serve.stderr.log.
    `message_handler`: `async (message) -> None`, told of every notification the client receives;
    `elicitation_callback`: answers elicitation/create (given one, the client declares the
    elicitation capability). Both are the SDK's `Client` options. `env`: variables over `child_env()`'s.
    `mode`: the Client's; "legacy" negotiates MCP 2025-11-25, "auto" 2026-07-28."""

    async def main() -> T:
        import mcp_types as types
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=PYTHON,
            args=[
                "-m",
                "codemode_gen",
                "serve",
                "--config",
                str(project / ".mcp.json"),
                *serve_args,
            ],
            cwd=str(project),
            env=child_env(**dict(env or {})),
        )
        with (project / "serve.stderr.log").open("w") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog),
                mode=mode,
                read_timeout_seconds=RUN_TIMEOUT,
                client_info=types.Implementation(name="test", version="0"),
                message_handler=message_handler,
                elicitation_callback=elicitation_callback,
            ) as client:
                return await body(client)

    return anyio.run(main)


def write_out(out_dir: Path, fixture_sets: list[Any], settings: Settings | None = None) -> None:
    """Generate out/ with the real generator from (possibly hand-made) fixture sets."""
    from codemode_gen.generator.build import build_outputs
    from codemode_gen.jsonio import atomic_write_text

    outputs = build_outputs(fixture_sets, settings)
    for rel, text in outputs.files.items():
        atomic_write_text(out_dir / rel, text)


def fixture_set(config_id: str, tools: list[dict[str, Any]], name: str | None = None) -> Any:
    """A FixtureSet as `record` would write it for a server with these tools (no calls)."""
    from codemode_gen.generator.fixtures import FixtureSet

    server_json = {
        "serverInfo": {"name": name or config_id, "version": "1.0.0"},
        "capabilities": {"tools": {}},
        "instructions": None,
        "protocolVersion": "2025-11-25",
    }
    return FixtureSet(config_id=config_id, server_json=server_json, tools=tools, calls={})
