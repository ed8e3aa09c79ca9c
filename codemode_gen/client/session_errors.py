"""What a failed connection or request is reported as: the error classes and the one-line phrasing.

The SDK raises nested ExceptionGroups on connect failures (anyio task groups) and generic
JSON-RPC errors for HTTP statuses; callers (record, the bridge, serve) need one readable line
per server and a class to branch on. `flatten_connect_error` turns whatever a connect attempt
raised into one `ConnectError` (command not found, exited at start with its stderr tail,
connection refused, HTTP 401/403 as `AuthError` with the one fix, timeout); the `CallError`
family is what an established session's request fails with (client/mcp_session.py).
URLs in messages never carry their query or user info (they may hold credentials).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codemode_gen.client.transports import ConnectFailure, HttpProbe
from codemode_gen.config import ServerConfig

__all__ = [
    "CONNECTION_CLOSED",
    "AuthError",
    "BadFrameError",
    "CallAuthError",
    "CallError",
    "CallTimeout",
    "ConnectError",
    "SessionLost",
    "flatten_connect_error",
]

# How much of a crashed server's stderr is quoted in its ConnectError (the rest is in the log).
STDERR_TAIL_LINES = 15
# Bounds one quoted stderr line so a server dumping a huge line cannot flood the terminal.
STDERR_TAIL_LINE_CHARS = 300

# JSON-RPC code the SDK's dispatcher uses for a closed connection.
CONNECTION_CLOSED = -32000


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

    def __init__(
        self,
        server_id: str,
        reason: str,
        *,
        status: int,
        log_path: Path | None = None,
        hint: str | None = None,
    ) -> None:
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

    def __init__(
        self, code: int | None, message: str, *, kind: str, frame: str | None = None
    ) -> None:
        super().__init__(code, message)
        self.kind = kind
        self.frame = frame  # the frame's text, kept only for salvaging a too-deep tools/list page


class CallAuthError(CallError):
    """An established connection's request was answered HTTP 401/403 (credentials revoked or
    expired, and an OAuth login that cannot be renewed without a person); `hint` as AuthError's."""

    def __init__(
        self,
        code: int | None,
        message: str,
        data: Any = None,
        *,
        status: int,
        hint: str | None = None,
    ) -> None:
        super().__init__(code, message, data)
        self.status = status
        self.hint = hint


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


def _auth_error(
    config: ServerConfig, where: str | None, status: int, probe: HttpProbe, log_path: Path
) -> AuthError:
    """The AuthError of a connection refused with 401/403, with the one fix that applies."""
    from codemode_gen.client.oauth_records import login_command, static_authorization

    sid = config.id
    problem = probe.problem()
    if problem is not None:
        return AuthError(sid, problem.message, status=status, log_path=log_path, hint=problem.hint)
    challenge = (probe.challenge or "").lower()
    if (
        status == 401
        and not static_authorization(config)
        and ("resource_metadata" in challenge or challenge.startswith("bearer"))
    ):
        command = login_command(sid)
        if "resource_metadata" in challenge:  # an MCP OAuth server says so (RFC 9728)
            text = f"{where} requires an OAuth login (HTTP 401); log in: {command}"
            hint = f"run `{command}` in a terminal, then retry; the script cannot fix this"
        else:
            text = (
                f"{where} requires authorization (HTTP 401): if it uses OAuth, log in with `{command}`;"
                ' if it takes an API key or token, put it in "headers"'
            )
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
    tail = [
        ln if len(ln) <= STDERR_TAIL_LINE_CHARS else ln[:STDERR_TAIL_LINE_CHARS] + "…"
        for ln in lines[-STDERR_TAIL_LINES:]
    ]
    return "\n    ".join(tail)


def flatten_connect_error(
    exc: BaseException, config: ServerConfig, probe: HttpProbe, log_path: Path, offset: int
) -> ConnectError:
    """Turn whatever the SDK raised (usually nested ExceptionGroups) into one readable error."""
    import httpx2
    from mcp.shared.exceptions import MCPError

    sid = config.id
    where = _shown_url(config.url) if config.transport != "stdio" else config.command
    leaves = _leaves(exc)

    def with_tail(reason: str) -> str:
        tail = _stderr_tail(log_path, offset)
        return (
            f"{reason}; last lines of its stderr:\n    {tail}"
            if tail
            else f"{reason} (no stderr output; log: {log_path})"
        )

    status = probe.take()
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError) and leaf.response.status_code in (401, 403):
            status = leaf.response.status_code
    if status is not None:
        return _auth_error(config, where, status, probe, log_path)
    for leaf in leaves:
        if isinstance(leaf, ConnectFailure):
            return ConnectError(sid, str(leaf), log_path=log_path)
    for leaf in leaves:
        if isinstance(leaf, FileNotFoundError):
            return ConnectError(sid, f"command not found: {config.command}", log_path=log_path)
        if isinstance(leaf, PermissionError):
            return ConnectError(
                sid, f"permission denied starting {config.command}", log_path=log_path
            )
    for leaf in leaves:
        elsewhere = _auth_server_url(leaf, config)
        if elsewhere is not None:  # an OAuth request (refresh, discovery) to another host
            kind = (
                "timed out"
                if isinstance(leaf, httpx2.TimeoutException)
                else f"connection failed: {type(leaf).__name__}"
            )
            return ConnectError(
                sid,
                f"cannot reach the authorization server of {sid} at {elsewhere} ({kind});"
                " its OAuth token cannot be renewed until it answers",
                log_path=log_path,
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectTimeout | httpx2.PoolTimeout):
            return ConnectError(sid, f"timed out connecting to {where}", log_path=log_path)
        if isinstance(leaf, httpx2.ConnectError):
            return ConnectError(
                sid, f"connection refused: {where} ({_scrub_urls(str(leaf))})", log_path=log_path
            )
        if isinstance(leaf, httpx2.HTTPStatusError):
            return ConnectError(
                sid,
                f"{where} answered HTTP {leaf.response.status_code}; is this the MCP endpoint?",
                log_path=log_path,
            )
        if isinstance(leaf, httpx2.TimeoutException):
            return ConnectError(sid, f"timed out talking to {where}", log_path=log_path)
        if isinstance(leaf, httpx2.HTTPError):
            return ConnectError(
                sid, f"HTTP error talking to {where}: {_scrub_urls(str(leaf))}", log_path=log_path
            )
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            reason = str(leaf) or f"timed out after {config.connect_timeout:g}s"
            return ConnectError(
                sid, with_tail(reason) if config.transport == "stdio" else reason, log_path=log_path
            )
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            from codemode_gen.client.stdio import BadFrame

            if isinstance(leaf.error.data, BadFrame):
                return ConnectError(
                    sid,
                    f"the server answered initialize with {leaf.error.data.reason}",
                    log_path=log_path,
                )
            if leaf.error.code == CONNECTION_CLOSED:
                if config.transport == "stdio":
                    return ConnectError(
                        sid, with_tail("server exited during startup"), log_path=log_path
                    )
                return ConnectError(
                    sid, f"{where} closed the connection during startup", log_path=log_path
                )
            if probe.error_status is not None:
                return ConnectError(
                    sid,
                    f"{where} answered HTTP {probe.error_status} to initialize; is this the MCP endpoint?",
                    log_path=log_path,
                )
            return ConnectError(
                sid,
                f"initialize failed: {leaf.error.message} (code {leaf.error.code})",
                log_path=log_path,
            )
    for leaf in leaves:
        if isinstance(leaf, CallError):
            return ConnectError(sid, f"tools/list failed: {leaf}", log_path=log_path)
    first = leaves[0] if leaves else exc
    return ConnectError(
        sid, f"{type(first).__name__}: {_scrub_urls(str(first))}", log_path=log_path
    )
