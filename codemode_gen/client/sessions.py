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
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TextIO, TypeVar, cast

import anyio
import anyio.abc
import anyio.to_thread

from codemode_gen import __version__
from codemode_gen.config import ServerConfig

__all__ = [
    "AuthError",
    "BadFrameError",
    "CallAuthError",
    "CallError",
    "CallTimeout",
    "ConnectError",
    "McpSession",
    "SessionManager",
    "cancel_once",
    "default_log_dir",
]

T = TypeVar("T")

# Bounds a server that pages tools/list forever (or loops on the same cursor).
MAX_TOOL_PAGES = 1000
# Bounds memory spent on one server's tool list (a hostile server could send millions).
MAX_TOOLS = 10_000
# How much of a crashed server's stderr is quoted in its ConnectError (the rest is in the log).
STDERR_TAIL_LINES = 15
# Bounds one quoted stderr line so a server dumping a huge line cannot flood the terminal.
STDERR_TAIL_LINE_CHARS = 300
# Idle time after which an HTTP response stream (SSE GET stream, long tool call) is dropped
# by httpx; bounds a half-open TCP connection. Calls have their own, shorter call_timeout.
HTTP_READ_TIMEOUT = 600.0
# Bounds how long aclose() waits for one connection to shut down (the stdio transport's own
# escalation stdin-close -> SIGTERM -> SIGKILL takes at most ~6 s).
CLOSE_TIMEOUT = 15.0
# Bounds how long a cancelled request's caller waits for its notifications/cancelled to be
# written (microseconds normally) before it goes on: a server that stopped reading its stdin must
# not hold up a run's response; the write goes on in the background (the SDK bounds it at 5 s).
CANCEL_NOTICE_WAIT = 0.25

# JSON-RPC codes the SDK's dispatcher uses for its own outcomes.
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_METHOD_NOT_FOUND = -32601
_HANDSHAKE_VERSION = "2025-11-25"  # what we offer in initialize (the SDK's LATEST_HANDSHAKE_VERSION)
_PROTOCOL_HEADER = "mcp-protocol-version"
_SESSION_HEADER = "mcp-session-id"  # Streamable HTTP's session id; a 404 to it means the session is gone


class ConnectError(Exception):
    """A server could not be started, reached or initialized; `reason` is one readable line."""

    def __init__(self, server_id: str, reason: str, *, log_path: Path | None = None) -> None:
        super().__init__(f"{server_id}: {reason}")
        self.server_id = server_id
        self.reason = reason
        self.log_path = log_path


class AuthError(ConnectError):
    """The server rejected our credentials (HTTP 401/403) while connecting; `hint` is the one fix
    (a config line, or `codemode-gen auth login ID`), None for the generic one."""

    def __init__(self, server_id: str, reason: str, *, status: int, log_path: Path | None = None,
                 hint: str | None = None) -> None:
        super().__init__(server_id, reason, log_path=log_path)
        self.status = status
        self.hint = hint


class CallError(Exception):
    """A tools/call (or tools/list) that failed at the protocol level (JSON-RPC error, closed)."""

    def __init__(self, code: int | None, message: str, data: Any = None) -> None:
        super().__init__(message if code is None else f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class SessionLost(CallError):
    """The server no longer knows this connection's MCP session (HTTP 404 to a request carrying
    its Mcp-Session-Id: the server restarted, expired it, or the credentials changed identity,
    e.g. a new OAuth login with a new client). The request was not processed; the session is
    closed, so the next `get()` starts a new one (Streamable HTTP: the client MUST re-initialize)."""


class CallTimeout(CallError):
    """The server did not answer within the call timeout; a cancellation was sent."""


class BadFrameError(CallError):
    """The server's answer to this request was unusable (too large, nested too deeply, not
    JSON, not a JSON-RPC response), or the request itself could not be serialised. Only this
    request failed; the session goes on. `kind` is one of the `stdio.BadFrame` kinds."""

    def __init__(self, code: int | None, message: str, *, kind: str, frame: str | None = None) -> None:
        super().__init__(code, message)
        self.kind = kind
        self.frame = frame  # the frame's text, kept only for salvaging a too-deep tools/list page


class CallAuthError(CallError):
    """An established connection's request was answered HTTP 401/403 (credentials revoked or
    expired, and an OAuth login that cannot be renewed without a person); `hint` as AuthError's."""

    def __init__(self, code: int | None, message: str, data: Any = None, *, status: int,
                 hint: str | None = None) -> None:
        super().__init__(code, message, data)
        self.status = status
        self.hint = hint


# Tasks started by `cancel_once` that have not ended: the event loop keeps only weak references,
# and a caller that stopped waiting no longer holds one.
_RUNNING: set[asyncio.Future[Any]] = set()


async def cancel_once(work: Awaitable[T], *, grace: float) -> T:
    """Await `work` in a task of its own that the caller's cancellation cancels exactly once.

    A cancelled caller cancels the task, waits at most `grace` seconds for it to wind down (its
    own cleanup: a notifications/cancelled to write, a worker to kill) and re-raises. Cancelled
    again meanwhile, as an anyio cancel scope does on every await until the task leaves it, the
    caller stops waiting at once, but the task is not cancelled a second time, so its cleanup
    still runs to the end, in the background.
    """
    task = asyncio.ensure_future(work)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait([task], timeout=grace)
        raise


def default_log_dir() -> Path:
    """Server stderr logs land here unless the caller chooses a folder (not the fixtures)."""
    return Path(tempfile.gettempdir()) / f"codemode-gen-{os.getuid() if hasattr(os, 'getuid') else 'user'}" / "logs"


# --------------------------------------------------------------------------- session


class McpSession:
    """One live, initialized connection. Create through `SessionManager.get`."""

    def __init__(
        self,
        config: ServerConfig,
        dispatcher: Any,
        server_json: dict[str, Any],
        log_path: Path,
    ) -> None:
        self.server_id = config.id
        self.config = config
        self.server_json = server_json
        self.tools_changed = False
        self.closed = False
        self.log_path = log_path
        # Tools dropped from the list (not an object / no string name) and other oddities.
        self.warnings: list[str] = []
        self._dispatcher = dispatcher
        self._tools: tuple[dict[str, Any], ...] | None = None
        self._auth_failed: Callable[[], int | None] = lambda: None
        self._auth_problem: Callable[[], Any] = lambda: None  # client/oauth_provider.AuthProblem | None
        self._session_lost: Callable[[], bool] = lambda: False

    @property
    def protocol_version(self) -> str:
        return str(self.server_json.get("protocolVersion", _HANDSHAKE_VERSION))

    async def list_tools(self, *, refresh: bool = False) -> list[dict[str, Any]]:
        """All pages of tools/list, verbatim wire JSON sorted by name; cached until the server
        says the list changed (or `refresh`)."""
        return copy.deepcopy(list(await self.tools_snapshot(refresh=refresh)))  # callers may mutate

    async def tools_snapshot(self, *, refresh: bool = False) -> tuple[dict[str, Any], ...]:
        """The same tools as `list_tools`, not copied: read-only by contract.

        The same tuple object is returned until the list is refreshed, so a caller that runs
        often (the runtime, once per run) can reuse work keyed by its identity instead of
        deep-copying every tool definition each time."""
        if self._tools is None or self.tools_changed or refresh:
            self._tools = tuple(await self._list_all(self.config.call_timeout))
        return self._tools

    async def _list_all(self, timeout: float | None) -> list[dict[str, Any]]:
        # Cleared first: a change notification that arrives while we page re-arms it.
        self.tools_changed = False
        tools: dict[str, dict[str, Any]] = {}
        cursor: Any = None
        seen_cursors: set[str] = set()
        warnings: list[str] = []
        for page_no in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            try:
                page = await self._request("tools/list", params, timeout, keep_frame=True)
            except BadFrameError as exc:
                if exc.kind != "too-deep":
                    raise
                page = await self._salvage_page(exc, page_no, warnings)
            items = page.get("tools")
            if not isinstance(items, list):
                raise CallError(None, f"tools/list page {page_no + 1} has no \"tools\" array")
            for item in items:
                name = item.get("name") if isinstance(item, dict) else None
                if not isinstance(name, str) or not name:
                    warnings.append(f"ignored a tools/list entry without a string name: {str(item)[:120]}")
                elif name in tools:
                    warnings.append(f"tool {name!r} listed twice; kept the first definition")
                elif len(tools) >= MAX_TOOLS:
                    raise CallError(None, f"server lists more than {MAX_TOOLS} tools")
                else:
                    tools[name] = item
            cursor = page.get("nextCursor")
            if cursor is None or cursor == "":
                break
            key = repr(cursor)
            if key in seen_cursors:
                warnings.append("tools/list repeated a cursor; stopped paging")
                break
            seen_cursors.add(key)
        else:
            raise CallError(None, f"tools/list did not finish within {MAX_TOOL_PAGES} pages")
        self.warnings = warnings
        return [tools[name] for name in sorted(tools)]

    async def _salvage_page(self, exc: BadFrameError, page_no: int, warnings: list[str]) -> dict[str, Any]:
        """A tools/list page nested too deeply: keep every tool, turning the schema (or other
        field) that holds the too-deep part into `{}` (unknown), with a warning per tool."""
        from codemode_gen.client.stdio import MAX_FRAME_DEPTH, MAX_SALVAGE_BYTES, parse_pruned

        frame, exc.frame = exc.frame, None
        if frame is None:
            raise BadFrameError(
                exc.code, f"{exc.message}; the page is larger than {MAX_SALVAGE_BYTES // 2**20} MiB, "
                "too large to salvage its other tools", kind=exc.kind,
            ) from None
        try:
            # a pure-Python walk over every token: off the event loop, so other sessions go on
            message, marker = await anyio.to_thread.run_sync(parse_pruned, frame, MAX_FRAME_DEPTH)
        except ValueError:
            raise BadFrameError(exc.code, f"{exc.message}; the page is not JSON either", kind=exc.kind) from None
        del frame
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            raise BadFrameError(exc.code, f"{exc.message}; no tools could be salvaged", kind=exc.kind) from None
        for key in [k for k in result if k != "tools" and _holds(result[k], marker)]:
            del result[key]
            warnings.append(f"tools/list page {page_no + 1}: dropped its {key!r}, nested too deeply")
        for tool in result["tools"]:
            if not isinstance(tool, dict) or not _holds(tool, marker):
                continue
            typed = [k for k in ("inputSchema", "outputSchema") if k in tool and _holds(tool[k], marker)]
            dropped = [k for k in tool if k not in typed and _holds(tool[k], marker)]
            for key in typed:
                tool[key] = {}
            for key in dropped:
                del tool[key]
            name = tool.get("name")
            parts = [f"{' and '.join(typed)} nested deeper than {MAX_FRAME_DEPTH} levels: typed as unknown"] if typed else []
            parts += [f"dropped {', '.join(dropped)} (nested too deeply)"] if dropped else []
            warnings.append(f"tool {name!r}: {'; '.join(parts)}")
        return result

    async def call_tool(self, name: str, arguments: Any, *, timeout: float | None = None) -> dict[str, Any]:
        """Raw CallToolResult wire JSON (`isError` results are results, not exceptions).

        Cancelling the awaiting task abandons the request and sends notifications/cancelled.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self._request("tools/call", params, timeout if timeout is not None else self.config.call_timeout)

    async def _request(
        self, method: str, params: dict[str, Any] | None, timeout: float | None, *, keep_frame: bool = False
    ) -> dict[str, Any]:
        """One request and its result; cancelling the caller (any number of times) abandons it
        and sends notifications/cancelled once (`cancel_once`)."""
        return await cancel_once(self._send(method, params, timeout, keep_frame), grace=CANCEL_NOTICE_WAIT)

    async def _send(
        self, method: str, params: dict[str, Any] | None, timeout: float | None, keep_frame: bool
    ) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        from codemode_gen.client.stdio import BadFrame

        opts: dict[str, Any] = {"headers": {_PROTOCOL_HEADER: self.protocol_version}}
        if timeout is not None:
            opts["timeout"] = timeout
        try:
            result = await self._dispatcher.send_raw_request(method, params, opts)
        except MCPError as exc:
            code = exc.error.code
            bad = exc.error.data
            if isinstance(bad, BadFrame):  # the transport's own verdict, not the server's error
                if bad.kind == "unsendable":
                    text = f"cannot send {method} to server '{self.server_id}': {bad.reason}"
                else:
                    text = f"server '{self.server_id}' answered {method} with {bad.reason}"
                raise BadFrameError(code, text, kind=bad.kind, frame=bad.text if keep_frame else None) from None
            if code == _REQUEST_TIMEOUT:
                raise CallTimeout(code, f"{method} to {self.server_id} timed out after {timeout:g}s") from None
            if code == _CONNECTION_CLOSED:
                self.closed = True
                raise CallError(code, f"connection to {self.server_id} closed (see {self.log_path})") from None
            if self._session_lost():
                self.closed = True
                raise SessionLost(code, f"server '{self.server_id}' no longer knows this session (HTTP 404)") from None
            status = self._auth_failed()
            if status is not None:
                problem = self._auth_problem()
                text = problem.message if problem is not None else f"{self.server_id} rejected the credentials (HTTP {status})"
                raise CallAuthError(
                    code, text, exc.error.data, status=status, hint=problem.hint if problem is not None else None
                ) from None
            raise CallError(code, exc.error.message, exc.error.data) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.closed = True
            raise CallError(_CONNECTION_CLOSED, f"connection to {self.server_id} closed") from None
        if not isinstance(result, dict):  # pragma: no cover - the dispatcher only yields dicts
            raise CallError(None, f"{method} returned {type(result).__name__}, not an object")
        return result


# --------------------------------------------------------------------------- manager


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
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
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
            raise ConnectError(server_id, "session manager is not open (use `async with SessionManager(...)`)")
        config = self.configs.get(server_id)
        if config is None:
            known = ", ".join(sorted(self.configs)) or "none"
            raise ConnectError(server_id, f"no server {server_id!r} in the configuration (known: {known})")
        async with self._lock:
            slot = self._slots.get(server_id)
            stale = slot is not None and slot.ready.is_set() and (
                slot.error is not None or (slot.session is not None and slot.session.closed)
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
            log.write(f"--- codemode-gen: connecting to {config.id} at {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
            log.flush()
            start_offset = log.tell()
        except OSError as exc:
            slot.error = ConnectError(config.id, f"cannot write the server log {log_path}: {exc.strerror}")
            slot.ready.set()
            slot.done.set()
            return
        probe = _HttpProbe()
        phase = ["starting"]
        try:
            async with anyio.create_task_group() as watchers:
                with anyio.CancelScope(deadline=anyio.current_time() + config.connect_timeout) as scope:

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
                slot.error = _flatten(exc, config, probe, log_path, start_offset)
            else:  # died after connecting: callers see CallError(connection closed)
                _log_line(log, f"[codemode-gen] connection ended: {type(exc).__name__}: {exc}")
        finally:
            if slot.session is not None:
                slot.session.closed = True
            elif slot.error is None:  # cancelled while connecting (manager closing)
                slot.error = ConnectError(config.id, "connection attempt cancelled", log_path=log_path)
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
        probe: _HttpProbe,
        phase: list[str],
    ) -> None:
        config = slot.config
        # A first connection in a fresh process: start the server before importing the SDK
        # (about a second), so the server's own start-up runs beside that import.
        early = await _spawn_early(config, log) if "mcp" not in sys.modules else None
        try:
            from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

            from codemode_gen.client.oauth_records import scrub
        except BaseException:
            if early is not None:
                await _discard(early)
            raise

        async with contextlib.AsyncExitStack() as stack:
            phase[0] = "connecting" if config.transport != "stdio" else "starting the server"
            try:
                read, write = await stack.enter_async_context(_open_transport(config, log, probe, early))
            except BaseException:
                if early is not None and early.returncode is None:
                    await _discard(early)
                raise
            holder: list[McpSession] = []

            async def on_request(dctx: Any, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
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
                    _log_line(log, scrub(line, config) if config.transport != "stdio" else line)

            async def on_stream_exception(exc: Exception) -> None:
                _log_line(log, f"[codemode-gen] unreadable message from server: {exc}")

            dispatcher = JSONRPCDispatcher(read, write, on_stream_exception=on_stream_exception)

            async def run_dispatcher(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
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
                    "protocolVersion": _HANDSHAKE_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "codemode-gen", "version": __version__},
                },
                {"cancel_on_abandon": False},
            )
            version = init.get("protocolVersion")
            if not isinstance(version, str):
                raise _Failure("the initialize result has no protocolVersion")
            server_json: dict[str, Any] = {
                "serverInfo": init.get("serverInfo"),
                "capabilities": init.get("capabilities"),
                "protocolVersion": version,
            }
            if init.get("instructions") is not None:
                server_json["instructions"] = init["instructions"]
            await dispatcher.notify("notifications/initialized", None, {"headers": {_PROTOCOL_HEADER: version}})
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


# --------------------------------------------------------------------------- helpers


class _Failure(Exception):
    """A connect failure we already phrased for the user."""


@dataclass
class _HttpProbe:
    """Remembers HTTP error statuses, which the SDK turns into generic JSON-RPC errors.

    With OAuth (`oauth`: the provider) a 401 may be followed by a refresh and a successful retry,
    so the provider itself says which requests ended rejected; the requests of its own flow
    (metadata, registration, token) are never the server's answer."""

    status: int | None = None  # last 401/403: credentials rejected
    error_status: int | None = None  # last status >= 400 of any kind
    challenge: str | None = None  # the WWW-Authenticate of the last 401/403
    oauth: Any = None  # client/oauth_provider.py's provider, when the server uses OAuth
    lost: bool = False  # a 404 answered a request of the session: the server forgot it

    async def hook(self, response: Any) -> None:
        from codemode_gen.client.oauth_provider import AUTH_SIDE

        if response.request.extensions.get(AUTH_SIDE):
            return
        if response.status_code >= 400:
            self.error_status = response.status_code
        if response.status_code == 404 and _SESSION_HEADER in response.request.headers:
            self.lost = True
        if response.status_code in (401, 403):
            self.challenge = response.headers.get("www-authenticate")
            if self.oauth is None:
                self.status = response.status_code

    def take_lost(self) -> bool:
        lost, self.lost = self.lost, False
        return lost

    def take(self) -> int | None:
        if self.oauth is not None:
            taken: int | None = self.oauth.take_rejection()
            return taken
        status, self.status = self.status, None
        return status

    def problem(self) -> Any:
        """Why the OAuth provider could not authorize (client/oauth_provider.AuthProblem), if it said."""
        return self.oauth.problem if self.oauth is not None else None


def _holds(value: Any, marker: str) -> bool:
    """Whether `marker` occurs anywhere in `value` (depth is bounded by the pruning)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item == marker:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _log_line(log: IO[str], text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        log.write(text.rstrip("\n") + "\n")
        log.flush()


def _resolve_command(config: ServerConfig, env: Mapping[str, str]) -> str:
    command = config.command or ""
    cwd = config.cwd
    if cwd is not None and not Path(cwd).is_dir():
        raise _Failure(f"working directory does not exist: {cwd}")
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command) if Path(command).is_absolute() or cwd is None else Path(cwd) / command
        if not path.exists():
            raise _Failure(f"command not found: {command}")
        if not os.access(path, os.X_OK) or path.is_dir():
            raise _Failure(f"command is not executable: {command}")
        return command
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise _Failure(f"command not found: {command} (not on PATH)")
    return command


#: The environment variables a stdio server inherits, as the SDK's `get_default_environment`
#: (mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS on POSIX; a test keeps them equal): read
#: without importing the SDK when a server is started before that import (`_spawn_early`).
INHERITED_ENV_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def _server_env(config: ServerConfig) -> dict[str, str]:
    """The SDK passes only a safe whitelist (HOME, PATH, ...) plus the configured env; a
    server should not see our secrets by accident. PATH is in the whitelist."""
    env = {key: value for key in INHERITED_ENV_VARS
           if (value := os.environ.get(key)) is not None and not value.startswith("()")}
    env |= dict(config.env)
    env.setdefault("PATH", os.environ.get("PATH", os.defpath))
    return env


async def _spawn_early(config: ServerConfig, log: IO[str]) -> anyio.abc.Process | None:
    """A stdio server's process started exactly as the SDK starts it (its own session, stderr
    to the server log), without importing the SDK; None where that is not how it is started
    (Windows, other transports) or the command is not usable (the transport reports it)."""
    if config.transport != "stdio" or sys.platform == "win32":
        return None
    env = _server_env(config)
    try:
        _resolve_command(config, env)
        return await anyio.open_process(
            [config.command or "", *config.args], env=env, stderr=log, cwd=config.cwd, start_new_session=True
        )
    except (_Failure, OSError):
        return None


async def _discard(process: anyio.abc.Process) -> None:
    """An early-started server whose connection never began: killed and reaped."""
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(ProcessLookupError, OSError):
            os.killpg(process.pid, 9)
        with contextlib.suppress(Exception):
            await process.aclose()


@contextlib.asynccontextmanager
async def _open_transport(
    config: ServerConfig, log: IO[str], probe: _HttpProbe, process: anyio.abc.Process | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """`process`: a stdio server already started by `_spawn_early`."""
    if config.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters

        from codemode_gen.client.stdio import stdio_transport

        env = _server_env(config)
        _resolve_command(config, env)
        params = StdioServerParameters(
            command=config.command or "", args=list(config.args), env=env, cwd=config.cwd
        )
        def log_line(text: str) -> None:
            _log_line(log, text)

        async with stdio_transport(params, errlog=cast(TextIO, log), log=log_line, process=process) as streams:
            yield streams[0], streams[1]
        return

    import httpx2

    from codemode_gen.client.oauth_provider import session_auth
    from codemode_gen.client.tokenstore import TokenStoreError

    try:
        auth = await session_auth(config)
    except TokenStoreError as exc:
        raise _Failure(f"{exc.message}; fix: {exc.hint}") from None
    probe.oauth = auth
    timeout = httpx2.Timeout(config.connect_timeout, read=max(HTTP_READ_TIMEOUT, config.call_timeout + 5))
    hooks = {"response": [probe.hook]}
    if config.transport == "http":
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout, event_hooks=hooks, auth=auth) as client,
            streamable_http_client(config.url or "", http_client=client) as streams,
        ):
            yield streams[0], streams[1]
        return

    from mcp.client.sse import sse_client

    def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
        return httpx2.AsyncClient(headers=headers, timeout=timeout, auth=auth, event_hooks=hooks)

    async with sse_client(
        config.url or "",
        headers=dict(config.headers),
        timeout=config.connect_timeout,
        sse_read_timeout=HTTP_READ_TIMEOUT,
        httpx_client_factory=cast(Any, factory),
        auth=auth,
    ) as streams:
        yield streams[0], streams[1]


def _shown_url(url: str | None) -> str:
    """A server URL for a message: without its query and user info, which may hold credentials
    (`?api_key=…`, `https://user:pass@…`) that would otherwise reach the terminal or a script."""
    from urllib.parse import urlsplit

    from codemode_gen.client.oauth_records import shown_url

    shown = shown_url(url)
    try:
        query = urlsplit(url or "").query
    except ValueError:
        query = ""
    return shown + ("?…" if query and shown != "the server URL" else "")


_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")


def _scrub_urls(text: str) -> str:
    """`text` (an HTTP library's message) with every URL in it shown as `_shown_url` shows it."""
    return _URL_IN_TEXT.sub(lambda m: _shown_url(m.group(0)), text)


def _auth_server_url(leaf: BaseException, config: ServerConfig) -> str | None:
    """The URL (shown) an OAuth request failed to reach, when it is not the server's own."""
    import httpx2

    if not isinstance(leaf, httpx2.TransportError) or config.transport == "stdio":
        return None
    try:
        request = leaf.request
    except RuntimeError:
        return None
    from codemode_gen.client.oauth_provider import AUTH_SIDE

    if not request.extensions.get(AUTH_SIDE):
        return None
    return _shown_url(str(request.url))


def _auth_error(config: ServerConfig, where: str | None, status: int, probe: _HttpProbe, log_path: Path) -> AuthError:
    """The AuthError of a connection refused with 401/403, with the one fix that applies."""
    from codemode_gen.client.oauth_records import login_command, static_authorization

    sid = config.id
    problem = probe.problem()
    if problem is not None:
        return AuthError(sid, problem.message, status=status, log_path=log_path, hint=problem.hint)
    challenge = (probe.challenge or "").lower()
    if status == 401 and not static_authorization(config) and (
        "resource_metadata" in challenge or challenge.startswith("bearer")
    ):
        command = login_command(sid)
        if "resource_metadata" in challenge:  # an MCP OAuth server says so (RFC 9728)
            text = f"{where} requires an OAuth login (HTTP 401); log in: {command}"
            hint = f"run `{command}` in a terminal, then retry; the script cannot fix this"
        else:
            text = (f"{where} requires authorization (HTTP 401): if it uses OAuth, log in with `{command}`;"
                    " if it takes an API key or token, put it in \"headers\"")
            hint = f"run `{command}`, or set an Authorization header for '{sid}' in the MCP config"
        return AuthError(sid, text, status=status, log_path=log_path, hint=hint)
    return AuthError(
        sid,
        f"{where} rejected the credentials (HTTP {status}); check the headers configured for it",
        status=status,
        log_path=log_path,
    )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def _stderr_tail(log_path: Path, offset: int) -> str:
    try:
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            fh.seek(offset)
            lines = [ln.rstrip() for ln in fh.read().splitlines() if ln.strip()]
    except OSError:
        return ""
    tail = [ln if len(ln) <= STDERR_TAIL_LINE_CHARS else ln[:STDERR_TAIL_LINE_CHARS] + "…" for ln in lines[-STDERR_TAIL_LINES:]]
    return "\n    ".join(tail)


def _flatten(exc: BaseException, config: ServerConfig, probe: _HttpProbe, log_path: Path, offset: int) -> ConnectError:
    """Turn whatever the SDK raised (usually nested ExceptionGroups) into one readable error."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    sid = config.id
    where = _shown_url(config.url) if config.transport != "stdio" else config.command
    leaves = _leaves(exc)

    def with_tail(reason: str) -> str:
        tail = _stderr_tail(log_path, offset)
        return f"{reason}; last lines of its stderr:\n    {tail}" if tail else f"{reason} (no stderr output; log: {log_path})"

    status = probe.take()
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code in (401, 403):
            status = leaf.response.status_code
    if status is not None:
        return _auth_error(config, where, status, probe, log_path)
    for leaf in leaves:
        if isinstance(leaf, _Failure):
            return ConnectError(sid, str(leaf), log_path=log_path)
    for leaf in leaves:
        if isinstance(leaf, FileNotFoundError):
            return ConnectError(sid, f"command not found: {config.command}", log_path=log_path)
        if isinstance(leaf, PermissionError):
            return ConnectError(sid, f"permission denied starting {config.command}", log_path=log_path)
    for leaf in leaves:
        elsewhere = _auth_server_url(leaf, config)
        if elsewhere is not None:  # an OAuth request (refresh, discovery) to another host
            kind = "timed out" if isinstance(leaf, httpx2.TimeoutException) else f"connection failed: {type(leaf).__name__}"
            return ConnectError(
                sid, f"cannot reach the authorization server of {sid} at {elsewhere} ({kind});"
                " its OAuth token cannot be renewed until it answers", log_path=log_path,
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectTimeout | httpx2.PoolTimeout):
            return ConnectError(sid, f"timed out connecting to {where}", log_path=log_path)
        if isinstance(leaf, httpx2.ConnectError):
            return ConnectError(sid, f"connection refused: {where} ({_scrub_urls(str(leaf))})", log_path=log_path)
        if isinstance(leaf, httpx2.HTTPStatusError):
            return ConnectError(
                sid, f"{where} answered HTTP {leaf.response.status_code}; is this the MCP endpoint?", log_path=log_path
            )
        if isinstance(leaf, httpx2.TimeoutException):
            return ConnectError(sid, f"timed out talking to {where}", log_path=log_path)
        if isinstance(leaf, httpx2.HTTPError):
            return ConnectError(sid, f"HTTP error talking to {where}: {_scrub_urls(str(leaf))}", log_path=log_path)
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            reason = str(leaf) or f"timed out after {config.connect_timeout:g}s"
            return ConnectError(sid, with_tail(reason) if config.transport == "stdio" else reason, log_path=log_path)
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            from codemode_gen.client.stdio import BadFrame

            if isinstance(leaf.error.data, BadFrame):
                return ConnectError(sid, f"the server answered initialize with {leaf.error.data.reason}", log_path=log_path)
            if leaf.error.code == _CONNECTION_CLOSED:
                if config.transport == "stdio":
                    return ConnectError(sid, with_tail("server exited during startup"), log_path=log_path)
                return ConnectError(sid, f"{where} closed the connection during startup", log_path=log_path)
            if probe.error_status is not None:
                return ConnectError(
                    sid, f"{where} answered HTTP {probe.error_status} to initialize; is this the MCP endpoint?",
                    log_path=log_path,
                )
            return ConnectError(
                sid, f"initialize failed: {leaf.error.message} (code {leaf.error.code})", log_path=log_path
            )
    for leaf in leaves:
        if isinstance(leaf, CallError):
            return ConnectError(sid, f"tools/list failed: {leaf}", log_path=log_path)
    first = leaves[0] if leaves else exc
    return ConnectError(sid, f"{type(first).__name__}: {_scrub_urls(str(first))}", log_path=log_path)
