"""Shared machinery for the runtime's spec-section tests (tests/test_s*.py).

`HostThread` runs one `CodeMode` on its own event loop in a background thread, so a
module-scoped fixture can keep real server processes and sessions alive across tests while
each test calls `host.run(code)` synchronously. It starts once the servers out/ lacks have
connected (or failed): keep hanging servers in out/, or start-up waits for their connect_timeout. The CodeMode is entered and exited inside
one long-lived task, as anyio's task groups require.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.runtime.codemode import CodeMode

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# Bounds one test run (server start + script); a hang fails the test instead of the suite.
RUN_TIMEOUT = 60.0
# Bounds how long we wait for an HTTP test server's readiness line.
SERVER_START_TIMEOUT = 30.0
_READY = re.compile(r"listening on (http://\S+?):(\d+)")


def script(name: str) -> str:
    for folder in (REPO / "examples" / "servers", REPO / "tests" / "servers"):
        path = folder / f"{name}.py"
        if path.is_file():
            return str(path)
    raise FileNotFoundError(name)


def stdio(server_id: str, name: str, **fields: Any) -> ServerConfig:
    return ServerConfig(id=server_id, transport="stdio", command=PYTHON, args=(script(name), "stdio"), **fields)


class HostThread:
    """A CodeMode living in a background event loop; `run()` is synchronous."""

    def __init__(self, configs: Mapping[str, ServerConfig], out_dir: Path, log_dir: Path,
                 settings: Settings | None = None) -> None:
        self.cm = CodeMode(configs, out_dir=out_dir, settings=settings, log_dir=log_dir)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="codemode-host", daemon=True)
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


def errors(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in response["diagnostics"] if d["severity"] == "error"]


def assert_ok(response: dict[str, Any]) -> Any:
    assert not errors(response), response["diagnostics"]
    return response["result"]


def start_http(name: str, *args: str, env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """Start an HTTP test server on a free loopback port; returns (process, base URL)."""
    proc = subprocess.Popen(
        [PYTHON, script(name), "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    found: list[re.Match[str]] = []
    seen: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            match = _READY.search(line)
            if match and not found:
                found.append(match)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while not found and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if not found:
        proc.kill()
        raise RuntimeError(f"{name} did not start: {''.join(seen)[-2000:]}")
    port = int(found[0].group(2))
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    return proc, f"http://127.0.0.1:{port}"


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
