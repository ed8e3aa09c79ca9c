"""The host's connections to its MCP servers: sessions opened lazily and kept across runs.

A run names the servers it needs and waits for those only; a server out/ lacks has no module
until it is connected, so it connects in the background (never awaited by a run that does not
name it: a slow or hanging server delays nothing) and joins the runs that start afterwards.
This owner keeps one snapshot (`LiveServer`) per tool-list version of each session, so runs
share it instead of copying, and knows which sessions announced tools/list_changed (§8.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.session_errors import AuthError
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig
from codemode_gen.runtime.host import telemetry
from codemode_gen.runtime.host.catalog import LiveServer
from codemode_gen.runtime.host.reconcile import Connections, Failure, Pending
from codemode_gen.runtime.host.telemetry import Telemetry


class ConnectionManager:
    """Sessions of the configured servers, their live tool lists and background connections."""

    def __init__(
        self,
        configs: Mapping[str, ServerConfig],
        *,
        log_dir: Path | None,
        telemetry: Telemetry,
        on_connected: Callable[[str, LiveServer], object],
    ) -> None:
        """`on_connected(config_id, live)` is called when a background connection is made (its
        failure is ignored): the host builds the server's module then, for the tool description."""
        self.configs = configs
        self.log_dir = log_dir
        self.telemetry = telemetry
        self._on_connected = on_connected
        self._sessions: SessionManager | None = None
        self.connected: dict[str, McpSession] = {}
        self._lives: dict[
            str, tuple[McpSession, LiveServer]
        ] = {}  # configId -> (session, its snapshot)
        # configId -> connection of a server out/ lacks, started ahead of need (never awaited by
        # a run that does not name the server, so a hanging server delays nothing)
        self._background: dict[str, asyncio.Task[LiveServer]] = {}

    async def open(self, stack: AsyncExitStack) -> None:
        """Start the session manager; `stack` closes it (every session) with the host."""
        self._sessions = await stack.enter_async_context(
            SessionManager(self.configs, log_dir=self.log_dir)
        )

    async def cancel_background(self) -> None:
        """Cancel the background connections (the host is closing)."""
        background = list(self._background.values())
        self._background.clear()
        await cancel_all(background)

    def forget(self) -> None:
        """Forget the sessions and their snapshots (the stack closes the sessions)."""
        self.connected.clear()
        self._lives.clear()

    async def session(self, config_id: str) -> McpSession:
        """The live session of a configured server, connecting on first use."""
        if self._sessions is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        session = await self._sessions.get(config_id)
        self.connected[config_id] = session
        return session

    async def live(self, config_id: str) -> LiveServer:
        """Connect if needed and return the server's current tool list (refreshed after
        tools/list_changed by the session itself)."""
        if self.current_live(config_id) is None:  # connecting, or listing its tools again
            with self.telemetry.span(telemetry.SPAN_CONNECT, {"codemode.server": config_id}):
                return await self._live(config_id)
        return await self._live(config_id)

    async def _live(self, config_id: str) -> LiveServer:
        session = await self.session(config_id)
        tools = await session.tools_snapshot()
        cached = self._lives.get(config_id)
        if cached is not None and cached[0] is session and cached[1].tools is tools:
            return cached[1]
        # One LiveServer per tool-list version: the tools are the session's read-only snapshot
        # (not deep-copied per run), and every per-run step only reads them.
        live = LiveServer(server_json=dict(session.server_json), tools=tools)
        self._lives[config_id] = (session, live)
        return live

    def snapshots(self) -> dict[str, LiveServer]:
        """configId -> the last tool-list snapshot of its session (current or not)."""
        return {cid: live for cid, (_, live) in self._lives.items()}

    def connect_in_background(self, covered: set[str]) -> list[asyncio.Task[LiveServer]]:
        """Start connecting every configured server not in `covered` (out/ lacks its module)."""
        return [self._background_task(cid) for cid in self.configs if cid not in covered]

    async def wait_background(self, timeout: float | None = None) -> None:
        """Wait (at most `timeout` seconds) until the background connections have settled."""
        tasks = list(self._background.values())
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _background_task(self, config_id: str) -> asyncio.Task[LiveServer]:
        task = self._background.get(config_id)
        if task is None:
            # Not the run's (it may outlive it): no span of the run that happens to start it.
            task = asyncio.get_running_loop().create_task(
                self._connect_and_build(config_id), context=telemetry.detached_context()
            )
            task.add_done_callback(retrieve)
            self._background[config_id] = task
        return task

    async def _connect_and_build(self, config_id: str) -> LiveServer:
        live = await self.live(config_id)
        # Its declarations join the tool description (tools/list) as soon as it is connected;
        # the run that needs the module reuses this build (same cache key), or builds it again
        # and reports why it cannot.
        with contextlib.suppress(Exception):
            self._on_connected(config_id, live)
        return live

    def current_live(self, config_id: str) -> LiveServer | None:
        """The snapshot of an open session whose tools did not change since: usable without
        waiting (§8.1 needs no refresh)."""
        cached = self._lives.get(config_id)
        if cached is None:
            return None
        session, live = cached
        if session.closed or session.tools_changed:
            return None
        return live

    def needs_refresh(self, config_id: str) -> bool:
        """An open session that announced tools/list_changed: one round trip re-lists it."""
        session = self.connected.get(config_id)
        if session is None or session.closed:
            return False
        return self.current_live(config_id) is None

    async def connect(
        self,
        wanted: Iterable[str],
        covered: set[str],
        budget_s: float | None,
        lazy_budget_s: float | None = None,
    ) -> Connections:
        """Connect `wanted` concurrently (waiting at most `budget_s`; at most `lazy_budget_s` for
        those out/ covers), take the current snapshot of every other open session, and start or
        check the background connections of the servers out/ does not cover."""
        tasks = {cid: asyncio.ensure_future(self.live(cid)) for cid in wanted}
        if tasks:
            start = time.monotonic()
            first = (
                budget_s
                if lazy_budget_s is None
                else min(lazy_budget_s, budget_s if budget_s is not None else lazy_budget_s)
            )
            await asyncio.wait(tasks.values(), timeout=first)
            needed = [t for cid, t in tasks.items() if cid not in covered and not t.done()]
            if needed and first != budget_s:
                left = None if budget_s is None else max(0.0, budget_s - (time.monotonic() - start))
                await asyncio.wait(needed, timeout=left)
        lives: dict[str, LiveServer] = {}
        failures: dict[str, Failure] = {}
        pending: dict[str, Pending] = {}
        for cid, task in tasks.items():
            if not task.done():
                task.cancel()
                pending[cid] = "timeout"
                continue
            outcome = task.exception() or task.result()
            if isinstance(outcome, LiveServer):
                lives[cid] = outcome
            elif isinstance(outcome, Exception):
                failures[cid] = self._failure(cid, outcome)
            else:
                raise outcome
        for cid in self.configs:
            if cid in tasks:
                continue
            live = self.current_live(cid)
            if live is not None:
                lives[cid] = live
                continue
            if cid in covered:
                continue  # out/ has its module: connected lazily on first call
            background = self._background_task(cid)
            if background.done():
                # Settled since the last run: take a failure (and retry for the runs after this
                # one); a success is in current_live unless it went stale, so reconnect then.
                del self._background[cid]
                failed = None if background.cancelled() else background.exception()
                if isinstance(failed, Exception):
                    failures[cid] = self._failure(cid, failed)
                    self._background_task(cid)
                    continue
                background = self._background_task(cid)
            if not background.done():
                pending[cid] = "background"
        return Connections(lives=lives, failures=failures, pending=pending)

    def _failure(self, config_id: str, exc: Exception) -> Failure:
        """A failed connection: reported by this run; the next use connects afresh."""
        self.connected.pop(config_id, None)
        return Failure(
            str(getattr(exc, "reason", None) or exc),
            auth=isinstance(exc, AuthError),
            hint=exc.hint if isinstance(exc, AuthError) else None,
        )


async def cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until each has ended (their failures are not ours to report)."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's failure as seen: the run that needs the server reports it, and
    asyncio must not log it as an unhandled error on stderr when none does."""
    if not task.cancelled():
        task.exception()
