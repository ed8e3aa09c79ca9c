"""MCP client sessions shared by `record`, `run` and `serve`.

Why this is not just `mcp.Client`:

- The SDK validates every result against its pydantic models. One tool with a non-object
  `inputSchema`, one unknown content-block type, or structured content that drifts from a
  declared `outputSchema` makes `list_tools()`/`call_tool()` raise for the whole server. We
  record and relay *wire JSON* anyway, so after the (envelope-only) handshake every request
  goes through `JSONRPCDispatcher.send_raw_request`: results come back as plain dicts,
  verbatim, and a bad tool costs only itself. This raw path is the only path, so there is no
  strict/lenient divergence to test twice.
- The SDK waits forever by default; here the connect phase (spawn/connect + initialize + every
  page of tools/list) has `connect_timeout` and every call has `call_timeout`.
- The SDK's stdio transport drops every line it cannot parse (the request then waits out its
  timeout) and buffers lines without bound. stdio runs on `stdio.stdio_transport` instead: the
  SDK's process handling with a hardened reader, where a bad frame (too large, too deep, not
  JSON, not JSON-RPC) fails its own request at once as a `BadFrameError`, and a `tools/list`
  page with one too-deep tool keeps the others (that tool's schema becomes `{}`, unknown, with
  a warning). HTTP and SSE keep the SDK's transports.
- The SDK raises nested ExceptionGroups on connect failures; `ConnectError` flattens them
  into one line per server (command not found, exited at start with its stderr tail,
  connection refused, HTTP 401/403 as `AuthError`, timeout).
- A server using OAuth (an `oauth` object, or a login stored by `codemode-gen auth login`) gets
  client/oauth_provider.py's provider as its transport's httpx `Auth`: tokens attached, refreshed when they
  expire or a 401 says so; when only a person could help, the 401 comes through with the reason
  and the exact command (`AuthError.hint`), and the connection stays usable.
- A server that no longer knows a Streamable HTTP session (HTTP 404 to its Mcp-Session-Id: it
  restarted, or a new login changed the client the session belongs to) ends that session
  (`SessionLost`); the bridge sends the call, which was not run, once more on a new one.
- anyio cancel scopes must be exited by the task that entered them. Each connection
  therefore lives in its own long-lived task, started in the `SessionManager`'s task group,
  which enters the transport, runs the dispatcher, and leaves on close. Callers in any task
  only put requests on the dispatcher's streams, so lazy `get()` from one task and
  `aclose()` from another both work.
- Cancelling a caller's `call_tool` sends `notifications/cancelled` (the dispatcher's courtesy
  cancel, written under a shield) and leaves the session usable. The SDK's shield does not stop
  a second `Task.cancel()`, and a caller is often cancelled again while it cleans up: anyio's
  cancel scopes (the MCP SDK's server cancels a handler through one when its client sends
  notifications/cancelled) cancel every await of the task until it leaves the scope, and
  `asyncio.gather` passes each of those on to its children. So every request is sent from a
  task of its own (`cancel_once`), which the caller's cancellation cancels exactly once.

A server's stderr (and its `notifications/message` log lines) go to
`<log_dir>/<server_id>.stderr.log`, never the user's terminal.

This module owns the connections' lifetimes (`SessionManager`: one task per connection, the
handshake, reconnecting); one connection's requests are client/mcp_session.py's, opening a
transport client/transports.py's, the errors and their phrasing client/session_errors.py's.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import anyio
import anyio.abc

from codemode_gen import __version__
from codemode_gen.client.mcp_session import HANDSHAKE_VERSION, PROTOCOL_HEADER, McpSession
from codemode_gen.client.session_errors import ConnectError, flatten_connect_error
from codemode_gen.client.transports import (
    ConnectFailure,
    HttpProbe,
    discard_early,
    log_line,
    open_transport,
    spawn_early,
)
from codemode_gen.config import ServerConfig

__all__ = ["CLOSE_TIMEOUT", "SessionManager", "default_log_dir"]

# Bounds how long aclose() waits for one connection to shut down (the stdio transport's own
# escalation stdin-close -> SIGTERM -> SIGKILL takes at most ~6 s).
CLOSE_TIMEOUT = 15.0
# JSON-RPC code of our answer to a server's request: we advertise no client capabilities.
_METHOD_NOT_FOUND = -32601


def default_log_dir() -> Path:
    """Server stderr logs land here unless the caller chooses a folder (not the fixtures)."""
    return (
        Path(tempfile.gettempdir())
        / f"codemode-gen-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        / "logs"
    )


@dataclass
class _Slot:
    config: ServerConfig
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)  # end the connection (any reason)
    closing: anyio.Event = field(default_factory=anyio.Event)  # the manager is closing
    done: anyio.Event = field(default_factory=anyio.Event)
    session: McpSession | None = None
    error: ConnectError | None = None


class SessionManager:
    """Owns every connection; an async context manager whose task group hosts one task each."""

    def __init__(self, configs: Mapping[str, ServerConfig], *, log_dir: Path | None = None) -> None:
        self.configs = dict(configs)
        self.log_dir = log_dir if log_dir is not None else default_log_dir()
        self._slots: dict[str, _Slot] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        self._lock = anyio.Lock()

    async def __aenter__(self) -> SessionManager:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._tg is not None
        try:
            with anyio.CancelScope(shield=True):
                await self.aclose()
        finally:
            # The body's own exception is left to propagate as is (not wrapped in a group):
            # connection tasks never raise, so the group has nothing of its own to report.
            tg, self._tg = self._tg, None
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
        return None

    def log_path(self, server_id: str) -> Path:
        return self.log_dir / f"{server_id}.stderr.log"

    async def get(self, server_id: str) -> McpSession:
        """The live session for `server_id`, connecting (or reconnecting) on first use."""
        if self._tg is None or self._closed:
            raise ConnectError(
                server_id, "session manager is not open (use `async with SessionManager(...)`)"
            )
        config = self.configs.get(server_id)
        if config is None:
            known = ", ".join(sorted(self.configs)) or "none"
            raise ConnectError(
                server_id, f"no server {server_id!r} in the configuration (known: {known})"
            )
        async with self._lock:
            slot = self._slots.get(server_id)
            stale = (
                slot is not None
                and slot.ready.is_set()
                and (slot.error is not None or (slot.session is not None and slot.session.closed))
            )
            if slot is None or stale:
                if slot is not None:
                    slot.stop.set()
                slot = _Slot(config)
                self._slots[server_id] = slot
                self._tg.start_soon(self._run_connection, slot, name=f"mcp-connection-{server_id}")
        await slot.ready.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.session is not None
        return slot.session

    async def aclose(self) -> None:
        """Close every connection (callable from any task); waits until each is shut down."""
        self._closed = True
        slots = list(self._slots.values())
        for slot in slots:
            slot.closing.set()
            slot.stop.set()
        with anyio.move_on_after(CLOSE_TIMEOUT):
            for slot in slots:
                await slot.done.wait()

    # ------------------------------------------------------------------ connection task

    async def _run_connection(self, slot: _Slot) -> None:
        config = slot.config
        log_path = self.log_path(config.id)
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in finally, outlives a with
            log.write(
                f"--- codemode-gen: connecting to {config.id} at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
            )
            log.flush()
            start_offset = log.tell()
        except OSError as exc:
            slot.error = ConnectError(
                config.id, f"cannot write the server log {log_path}: {exc.strerror}"
            )
            slot.ready.set()
            slot.done.set()
            return
        probe = HttpProbe()
        phase = ["starting"]
        try:
            async with anyio.create_task_group() as watchers:
                with anyio.CancelScope(
                    deadline=anyio.current_time() + config.connect_timeout
                ) as scope:

                    async def abort_connect_on_close() -> None:
                        await slot.closing.wait()
                        if slot.session is None:  # closing while still connecting: give up now
                            scope.cancel()

                    watchers.start_soon(abort_connect_on_close)
                    await self._connect_and_serve(slot, scope, log, log_path, probe, phase)
                watchers.cancel_scope.cancel()
            if scope.cancelled_caught and slot.session is None and not slot.closing.is_set():
                raise TimeoutError(f"timed out after {config.connect_timeout:g}s while {phase[0]}")
        except Exception as exc:  # every failure of one server becomes its ConnectError
            if slot.session is None:
                slot.error = flatten_connect_error(exc, config, probe, log_path, start_offset)
            else:  # died after connecting: callers see CallError(connection closed)
                log_line(log, f"[codemode-gen] connection ended: {type(exc).__name__}: {exc}")
        finally:
            if slot.session is not None:
                slot.session.closed = True
            elif slot.error is None:  # cancelled while connecting (manager closing)
                slot.error = ConnectError(
                    config.id, "connection attempt cancelled", log_path=log_path
                )
            with contextlib.suppress(OSError):
                log.close()
            slot.ready.set()
            slot.done.set()

    async def _connect_and_serve(
        self,
        slot: _Slot,
        scope: anyio.CancelScope,
        log: IO[str],
        log_path: Path,
        probe: HttpProbe,
        phase: list[str],
    ) -> None:
        config = slot.config
        # A first connection in a fresh process: start the server before importing the SDK
        # (about a second), so the server's own start-up runs beside that import.
        early = await spawn_early(config, log) if "mcp" not in sys.modules else None
        try:
            from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

            from codemode_gen.client.oauth_records import scrub
        except BaseException:
            if early is not None:
                await discard_early(early)
            raise

        async with contextlib.AsyncExitStack() as stack:
            phase[0] = "connecting" if config.transport != "stdio" else "starting the server"
            try:
                read, write = await stack.enter_async_context(
                    open_transport(config, log, probe, early)
                )
            except BaseException:
                if early is not None and early.returncode is None:
                    await discard_early(early)
                raise
            holder: list[McpSession] = []

            async def on_request(
                dctx: Any, method: str, params: Mapping[str, Any] | None
            ) -> dict[str, Any]:
                from mcp.shared.exceptions import MCPError

                if method == "ping":
                    return {}
                # We advertise no client capabilities (sampling, roots, elicitation).
                raise MCPError(code=_METHOD_NOT_FOUND, message=f"client does not support {method}")

            async def on_notify(dctx: Any, method: str, params: Mapping[str, Any] | None) -> None:
                if method == "notifications/tools/list_changed" and holder:
                    holder[0].tools_changed = True
                elif method == "notifications/message" and params:
                    line = f"[{params.get('level', 'info')}] {params.get('data')}"
                    log_line(log, scrub(line, config) if config.transport != "stdio" else line)

            async def on_stream_exception(exc: Exception) -> None:
                log_line(log, f"[codemode-gen] unreadable message from server: {exc}")

            dispatcher = JSONRPCDispatcher(read, write, on_stream_exception=on_stream_exception)

            async def run_dispatcher(
                *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
            ) -> None:
                try:
                    await dispatcher.run(on_request, on_notify, task_status=task_status)
                finally:
                    # The server hung up (EOF): end this connection now, so the process is
                    # reaped and the next get() reconnects instead of reusing a dead session.
                    if holder:
                        holder[0].closed = True
                    slot.stop.set()

            tg = await stack.enter_async_context(anyio.create_task_group())
            # LIFO: cancel the dispatcher before the transport closes its streams under it.
            stack.callback(tg.cancel_scope.cancel)
            await tg.start(run_dispatcher)

            phase[0] = "waiting for initialize"
            init = await dispatcher.send_raw_request(
                "initialize",
                {
                    "protocolVersion": HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "codemode-gen", "version": __version__},
                },
                {"cancel_on_abandon": False},
            )
            version = init.get("protocolVersion")
            if not isinstance(version, str):
                raise ConnectFailure("the initialize result has no protocolVersion")
            server_json: dict[str, Any] = {
                "serverInfo": init.get("serverInfo"),
                "capabilities": init.get("capabilities"),
                "protocolVersion": version,
            }
            if init.get("instructions") is not None:
                server_json["instructions"] = init["instructions"]
            await dispatcher.notify(
                "notifications/initialized", None, {"headers": {PROTOCOL_HEADER: version}}
            )
            session = McpSession(config, dispatcher, server_json, log_path)
            session._auth_failed = probe.take
            session._session_lost = probe.take_lost
            session._auth_problem = probe.problem
            holder.append(session)
            phase[0] = "listing tools"
            session._tools = tuple(await session._list_all(None))  # bounded by the connect deadline

            # Connected: the connect deadline no longer bounds this connection's lifetime.
            scope.deadline = math.inf
            slot.session = session
            slot.ready.set()
            await slot.stop.wait()
