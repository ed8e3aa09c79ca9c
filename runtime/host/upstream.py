"""One validated call sent to its MCP server, and what comes back made into the host's reply.

The bridge's side that faces the servers: it connects a server on its first call and takes the
run's snapshot of its live tool list (§8.2), reuses the run's sessions (a session the server
forgot is replaced once), maps every way a call can fail (timeout, rejected credentials, a
JSON-RPC error, a lost connection, an isError result, a result nested too deep) to an
`@codemode/errors` reply, unwraps a good result (§5.3.2, `unbox`) and tells the host of it
(`on_result`: learning and recording). The server's own words in a trace entry have its secrets
and codemode.toml's `redact` patterns replaced (`server_text`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, cast

from codemode_gen import payload
from codemode_gen.client.session_errors import (
    AuthError,
    CallAuthError,
    CallError,
    CallTimeout,
    ConnectError,
    SessionLost,
)
from codemode_gen.config import ServerConfig
from codemode_gen.error_classes import ToolCallCode
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.unwrap import Box
from codemode_gen.jsonio import json_type
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.call_replies import (
    MAX_ERROR_TEXT_CHARS,
    clip_server_text,
    error_reply,
    examine,
)
from codemode_gen.runtime.host.catalog import LiveServer, ServerView, ToolView, live_tools
from codemode_gen.runtime.host.tooltrace import CallLog
from codemode_gen.runtime.limits import MAX_JSON_DEPTH
from codemode_gen.runtime.sandbox.protocol import HostReply

# UNBOX_MISMATCH warnings (one per tool) a run reports at most, so a script calling hundreds of
# misbehaving tools does not flood its response.
MAX_BOX_NOTICES = 20

log = logging.getLogger(__name__)


class CallSession(Protocol):
    """What the bridge uses of an MCP session (`codemode_gen.client.mcp_session.McpSession`)."""

    @property
    def closed(self) -> bool: ...

    async def call_tool(
        self, name: str, arguments: Any, *, timeout: float | None = None
    ) -> dict[str, Any]: ...


class Connector(Protocol):
    """What the bridge needs from the host that owns the sessions (CodeMode)."""

    async def session(self, config_id: str) -> CallSession: ...

    async def live(self, config_id: str) -> LiveServer: ...


class Upstream:
    """The servers as one run's calls reach them: sessions, connections and their failures."""

    def __init__(
        self,
        connector: Connector,
        configs: dict[str, ServerConfig],
        call_log: CallLog,
        *,
        on_result: Callable[[str, ToolView, Any, dict[str, Any], int, bool], Awaitable[None]]
        | None = None,
        redact_patterns: Iterable[str] = (),
    ) -> None:
        self.connector = connector
        self.configs = configs
        # Where BRIDGE_LIMIT and UNBOX_MISMATCH notices go (the run's call log).
        self.log = call_log
        self._inflight: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        # Sessions this run already obtained, by config id: asking the session manager again
        # costs two event-loop turns (its lock and ready event) on every call.
        self._sessions: dict[str, CallSession] = {}
        # Servers a call of this run was waiting for to connect when the run ended (a timeout
        # then says so: diagnostics.waiting_for_connect).
        self.connecting: set[str] = set()
        # Told (config id, tool view, the arguments sent, the wire result, ms, whether it is
        # large: payload.is_large) of every successful call, before the script gets its value:
        # the host learns output types and records calls from it (runtime/codemode/learning.py),
        # off the event loop; awaited (it may make the call wait while the host is behind). An
        # exception is logged, not raised.
        self._on_result = on_result
        self.redact_patterns = tuple(redact_patterns)
        self._redactors: dict[str, Redactor] = {}

    async def cancel_inflight(self) -> None:
        """Cancel the calls still waiting for their server (the run ended)."""
        tasks = [t for t in self._inflight if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def ensure_live(self, view: ServerView) -> HostReply | None:
        """Connect on first use and take this run's snapshot of the live tool list (§8.2)."""
        if view.live and view.unavailable is None:
            return None
        assert view.config_id is not None
        lock = self._locks.setdefault(view.server_id, asyncio.Lock())
        async with lock:
            if view.unavailable is None and not view.live:
                self.connecting.add(view.server_id)  # left there if the run ends meanwhile
                try:
                    live = await self.connector.live(view.config_id)
                except ConnectError as exc:  # AuthError too
                    view.unavailable = exc.reason or str(exc)
                    view.auth_failed = isinstance(exc, AuthError)
                    view.auth_hint = exc.hint if isinstance(exc, AuthError) else None
                except CallError as exc:  # connected, but tools/list failed
                    view.unavailable = f"tools/list failed: {exc}"
                else:
                    view.tools = live_tools(live, self.configs[view.config_id], known=view.tools)
                    view.live = True
                self.connecting.discard(view.server_id)
        if view.unavailable is not None:
            if view.auth_failed:
                return error_reply(
                    "AuthenticationError",
                    f"server '{view.server_id}' rejected the connection: {view.unavailable}",
                    view.auth_hint
                    or f"fix the credentials (headers/env) of '{view.config_id}' in the MCP config; the script cannot fix this",
                    serverId=view.server_id,
                    _summary=f"AuthenticationError: connection rejected: {self.server_text(view.config_id, view.unavailable)}",
                )
            return error_reply(
                "ServerNotFoundError",
                f"server '{view.server_id}' is not connected: {view.unavailable}",
                f"check the '{view.config_id}' entry of the MCP config; continue without this server meanwhile",
                serverId=view.server_id,
                _summary=f"ServerNotFoundError: not connected: {self.server_text(view.config_id, view.unavailable)}",
            )
        return None

    async def dispatch(
        self, view: ServerView, config: ServerConfig, tool_name: str, arguments: Any, tool: ToolView
    ) -> HostReply:
        server_id = view.server_id
        tool_name_shown = jsonsafe.safe_name(tool_name)
        where = f"{server_id}.{tool_name_shown}"
        try:
            session = self._sessions.get(config.id)
            if session is None or session.closed:
                session = await self.connector.session(config.id)
                self._sessions[config.id] = session
            # The calling task itself is what aclose() cancels: no extra task per call.
            task = asyncio.current_task()
            if task is not None:
                self._inflight.add(task)
            sent = time.monotonic()  # not self._clock: the trace's clock counts its own readings
            try:
                try:
                    result = await session.call_tool(
                        tool_name, arguments, timeout=config.call_timeout
                    )
                except SessionLost:
                    # The server forgot the session and did not run the call (a restart, or a new
                    # login under another client): once more on a new session.
                    session = await self.connector.session(config.id)
                    self._sessions[config.id] = session
                    result = await session.call_tool(
                        tool_name, arguments, timeout=config.call_timeout
                    )
            finally:
                if task is not None:
                    self._inflight.discard(task)
        except CallTimeout:
            return error_reply(
                "ToolCallError",
                f"{where} did not answer within {config.call_timeout:g} s; the call was cancelled",
                "retry once with a smaller request, or skip this step",
                serverId=server_id,
                toolName=tool_name_shown,
                code=ToolCallCode.TIMEOUT,
                _summary=f"ToolCallError: timeout after {config.call_timeout:g} s",
            )
        except (AuthError, CallAuthError) as exc:
            # Rejected while connecting (AuthError) or on an established connection whose
            # credentials were revoked or expired (CallAuthError): the same fix either way.
            detail = exc.reason if isinstance(exc, AuthError) else clip_server_text(exc.message)
            return error_reply(
                "AuthenticationError",
                f"{where}: the server rejected the credentials ({exc.status}): {detail}",
                exc.hint
                or f"fix the credentials (headers/env) of '{config.id}' in the MCP config; the script cannot fix this",
                serverId=server_id,
                toolName=tool_name_shown,
                code=exc.status,
                _summary=f"AuthenticationError ({exc.status}): {self.server_text(config.id, detail)}",
            )
        except CallError as exc:
            code = exc.code
            text = exc.message
            return error_reply(
                "ToolCallError",
                f"{where} failed with JSON-RPC error {code}: {clip_server_text(text)}",
                "check the input against getTool() from @codemode/discovery, then retry",
                serverId=server_id,
                toolName=tool_name_shown,
                code=code,
                _summary=f"ToolCallError: JSON-RPC error {code}: {self.server_text(config.id, text)}",
            )
        except ConnectError as exc:
            return error_reply(
                "ToolCallError",
                f"{where}: connection to the server failed: {getattr(exc, 'reason', exc)}",
                "retry later or continue without this server",
                serverId=server_id,
                toolName=tool_name_shown,
                _summary=f"ToolCallError: connection failed: {self.server_text(config.id, str(getattr(exc, 'reason', exc)))}",
            )
        if not isinstance(result, dict):
            return error_reply(
                "ToolCallError",
                f"{where} returned a malformed result",
                "report this server as faulty",
                serverId=server_id,
                toolName=tool_name_shown,
                _summary="ToolCallError: malformed result",
            )
        # Checking and unwrapping walk the result: a large one is handled off the event loop.
        depth = payload.depth_if_small(result)
        large = depth is None
        if large:
            kind, got = await payload.offload(examine, result, config.unwrap, tool)
        else:
            kind, got = examine(result, config.unwrap, tool, depth)
        if kind == "deep":
            return self._too_deep(server_id, tool_name_shown, where)
        if kind == "error":
            text, content = got
            return error_reply(
                "ToolCallError",
                f"{where} failed: {text}",
                f"the server's message says why {where} failed: fix the input or the precondition it names "
                "and retry once; if the script can do without it, catch the ToolCallError and go on",
                serverId=server_id,
                toolName=tool_name_shown,
                content=content,
                _summary=f"ToolCallError: {self.server_text(config.id, text)}",
            )
        value, mismatch, parsed = got
        if mismatch and tool.box is not None:
            self._box_mismatch(where, tool.box, value)
        if self._on_result is not None:
            try:
                await self._on_result(
                    config.id,
                    tool,
                    arguments,
                    result,
                    round((time.monotonic() - sent) * 1000),
                    large,
                )
            except Exception as exc:  # learning and recording never fail a call
                log.warning("learning from %s failed: %s: %s", where, type(exc).__name__, exc)
        if large or parsed:  # a value parsed from text was not measured
            return {"ok": True, "value": value}
        # A part of a small result: the reply is small too (Run._answer encodes it on the loop).
        return cast(HostReply, payload.Small(ok=True, value=value))

    def _box_mismatch(self, where: str, box: Box, value: Any) -> None:
        """A boxed tool answered with something else: the value goes to the script unchanged
        (never an exception) and the run says so, once per tool."""
        key = f"box:{where}"
        if (
            key in self.log.notices
            or sum(k.startswith("box:") for k in self.log.notices) >= MAX_BOX_NOTICES
        ):
            return
        got = (
            "an object without it"
            if isinstance(value, dict)
            else f"{json_type(value) or 'a value'}, not an object"
        )
        self.log.notices[key] = diag.diagnostic(
            diag.DiagnosticCode.UNBOX_MISMATCH,
            f"{where} declares its value boxed in {json.dumps(box.field)} ({box.marker}) but returned {got};"
            " the result was returned unchanged, not unboxed",
            severity="warning",
            hint=f"check the value's shape before using it (for example `{json.dumps(box.field)} in value`)",
        )

    def _too_deep(self, server_id: str, tool_name: str, where: str) -> HostReply:
        message = f"{where} returned a result nested deeper than {MAX_JSON_DEPTH} levels; the host does not pass it on"
        hint = "ask the tool for less (a narrower query, fewer fields), or use another tool"
        self.log.notice(
            "result:depth", f"a tool result was refused at the sandbox boundary: {message}", hint
        )
        return error_reply(
            "ToolCallError",
            message,
            hint,
            serverId=server_id,
            toolName=tool_name,
            _summary="ToolCallError: result nested too deep",
        )

    def server_text(self, config_id: str | None, text: str) -> str:
        """A server's own words (an error message, a connect failure) for a trace entry: its
        secrets and codemode.toml's `redact` patterns replaced, as `record` does in fixtures/
        (redacted before `trace_error` cuts it, so no secret is left half-shown)."""
        text = text[:MAX_ERROR_TEXT_CHARS]
        config = self.configs.get(config_id) if config_id is not None else None
        if config is None:
            return text
        redactor = self._redactors.get(config.id)
        if redactor is None:
            redactor = self._redactors[config.id] = Redactor.for_server(
                config, self.redact_patterns
            )
        return redactor.text(text) if redactor else text
