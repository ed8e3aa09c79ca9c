"""Opening one server's transport: stdio (spawned with a whitelisted environment), Streamable HTTP, SSE.

Separate from the session (client/mcp_session.py) and its manager (client/sessions.py) because
this is where the process and the HTTP client are made: the command checks that give a
readable error before the SDK tries (`ConnectFailure`), the environment a stdio server
inherits (`INHERITED_ENV_VARS`, as the SDK's, so no secret of ours reaches it by accident),
the early spawn that lets a server start while the SDK is still importing, and the HTTP probe
that remembers the statuses the SDK turns into generic JSON-RPC errors (401/403, the 404 of a
forgotten session). stdio uses the hardened `stdio.stdio_transport`; HTTP and SSE the SDK's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import anyio.abc

from codemode_gen.config import ServerConfig

__all__ = [
    "HTTP_READ_TIMEOUT",
    "INHERITED_ENV_VARS",
    "ConnectFailure",
    "HttpProbe",
    "discard_early",
    "log_line",
    "open_transport",
    "spawn_early",
]

# Idle time after which an HTTP response stream (SSE GET stream, long tool call) is dropped
# by httpx; bounds a half-open TCP connection. Calls have their own, shorter call_timeout.
HTTP_READ_TIMEOUT = 600.0
_SESSION_HEADER = (
    "mcp-session-id"  # Streamable HTTP's session id; a 404 to it means the session is gone
)


class ConnectFailure(Exception):
    """A connect failure we already phrased for the user."""


@dataclass
class HttpProbe:
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


def log_line(log: IO[str], text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        log.write(text.rstrip("\n") + "\n")
        log.flush()


def _resolve_command(config: ServerConfig, env: Mapping[str, str]) -> str:
    command = config.command or ""
    cwd = config.cwd
    if cwd is not None and not Path(cwd).is_dir():
        raise ConnectFailure(f"working directory does not exist: {cwd}")
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command) if Path(command).is_absolute() or cwd is None else Path(cwd) / command
        if not path.exists():
            raise ConnectFailure(f"command not found: {command}")
        if not os.access(path, os.X_OK) or path.is_dir():
            raise ConnectFailure(f"command is not executable: {command}")
        return command
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise ConnectFailure(f"command not found: {command} (not on PATH)")
    return command


#: The environment variables a stdio server inherits, as the SDK's `get_default_environment`
#: (mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS on POSIX; a test keeps them equal): read
#: without importing the SDK when a server is started before that import (`spawn_early`).
INHERITED_ENV_VARS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def _server_env(config: ServerConfig) -> dict[str, str]:
    """The SDK passes only a safe whitelist (HOME, PATH, ...) plus the configured env; a
    server should not see our secrets by accident. PATH is in the whitelist."""
    env = {
        key: value
        for key in INHERITED_ENV_VARS
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    }
    env |= dict(config.env)
    env.setdefault("PATH", os.environ.get("PATH", os.defpath))
    return env


async def spawn_early(config: ServerConfig, log: IO[str]) -> anyio.abc.Process | None:
    """A stdio server's process started exactly as the SDK starts it (its own session, stderr
    to the server log), without importing the SDK; None where that is not how it is started
    (Windows, other transports) or the command is not usable (the transport reports it)."""
    if config.transport != "stdio" or sys.platform == "win32":
        return None
    env = _server_env(config)
    try:
        _resolve_command(config, env)
        return await anyio.open_process(
            [config.command or "", *config.args],
            env=env,
            stderr=log,
            cwd=config.cwd,
            start_new_session=True,
        )
    except (ConnectFailure, OSError):
        return None


async def discard_early(process: anyio.abc.Process) -> None:
    """An early-started server whose connection never began: killed and reaped."""
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(ProcessLookupError, OSError):
            os.killpg(process.pid, 9)
        with contextlib.suppress(Exception):
            await process.aclose()


@contextlib.asynccontextmanager
async def open_transport(
    config: ServerConfig, log: IO[str], probe: HttpProbe, process: anyio.abc.Process | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """`process`: a stdio server already started by `spawn_early`."""
    if config.transport == "stdio":
        from mcp.client.stdio import StdioServerParameters

        from codemode_gen.client.stdio import stdio_transport

        env = _server_env(config)
        _resolve_command(config, env)
        params = StdioServerParameters(
            command=config.command or "", args=list(config.args), env=env, cwd=config.cwd
        )

        def log_server_line(text: str) -> None:
            log_line(log, text)

        async with stdio_transport(
            params, errlog=cast(TextIO, log), log=log_server_line, process=process
        ) as streams:
            yield streams[0], streams[1]
        return

    import httpx2

    from codemode_gen.client.oauth_provider import session_auth
    from codemode_gen.client.tokenstore import TokenStoreError

    try:
        auth = await session_auth(config)
    except TokenStoreError as exc:
        raise ConnectFailure(f"{exc.message}; fix: {exc.hint}") from None
    probe.oauth = auth
    timeout = httpx2.Timeout(
        config.connect_timeout, read=max(HTTP_READ_TIMEOUT, config.call_timeout + 5)
    )
    hooks = {"response": [probe.hook]}
    if config.transport == "http":
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(
                headers=dict(config.headers), timeout=timeout, event_hooks=hooks, auth=auth
            ) as client,
            streamable_http_client(config.url or "", http_client=client) as streams,
        ):
            yield streams[0], streams[1]
        return

    from mcp.client.sse import sse_client

    def factory(
        headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> Any:
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
