"""`codemode-gen auth login`: the interactive OAuth flow, with its loopback redirect.

The redirect lands on 127.0.0.1 (a random free port unless `oauth.redirectPort` is set); the
state is checked when the redirect arrives, the wait for the person is bounded
(`LOGIN_TIMEOUT`), and nothing is stored unless the login succeeds (the record is written
only at the end). The flow itself is the provider's (client/oauth_provider.py), made
interactive: the only place a browser is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import anyio
import anyio.to_thread

from codemode_gen.client.oauth_provider import (
    CALLBACK_PATH,
    ERROR_BODY_CHARS,
    MetadataProblem,
    build_provider,
)
from codemode_gen.client.oauth_records import (
    Storage,
    new_record,
    shown_url,
    static_authorization,
    store_key,
)
from codemode_gen.client.tokenstore import TokenStoreError, open_store
from codemode_gen.config import ServerConfig

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["LOGIN_TIMEOUT", "LoginError", "LoginResult", "login"]

# Bounds how long `auth login` waits for the browser's redirect (seconds; `--timeout`).
LOGIN_TIMEOUT = 300.0
# Bounds one request read on the loopback redirect port: a redirect is one short GET line; a
# local process sending megabytes (or nothing) must not hold the login.
MAX_CALLBACK_REQUEST_BYTES = 16 * 1024
CALLBACK_READ_TIMEOUT = 10.0
# Bounds each HTTP request of `auth login` (discovery, registration, token): the wait for the
# person is LOGIN_TIMEOUT, not this.
LOGIN_HTTP_TIMEOUT = 30.0


class LoginError(Exception):
    """`auth login` failed; `message` says why, `hint` what to do."""

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass
class LoginResult:
    server_id: str
    where: str  # the store, for the message
    scope: str | None = None
    expires_at: float | None = None
    refreshable: bool = False
    note: str | None = None


class _Callback:
    """The loopback redirect target: one `GET /callback?code=…&state=…` completes the login."""

    def __init__(self) -> None:
        self.expected_state: str | None = None
        self.result: asyncio.Future[AuthorizationCodeResult] = (
            asyncio.get_running_loop().create_future()
        )
        self.server: asyncio.Server | None = None

    async def start(self, port: int) -> int:
        try:
            self.server = await asyncio.start_server(
                self._handle, "127.0.0.1", port, limit=MAX_CALLBACK_REQUEST_BYTES
            )
        except OSError as exc:
            raise LoginError(
                f"cannot listen for the login redirect on 127.0.0.1:{port}: {exc.strerror}",
                hint="free that port (oauth.redirectPort), or drop redirectPort to use any free port"
                if port
                else "check that this machine allows listening on 127.0.0.1",
            ) from None
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CALLBACK_READ_TIMEOUT)
            except (
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                TimeoutError,
                ConnectionError,
            ):
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            target = urlsplit(parts[1] if len(parts) >= 2 else "/")
            if parts[0] != "GET" or target.path != CALLBACK_PATH:
                await self._respond(writer, 404, "Not the codemode-gen login redirect.")
                return
            params = {k: v[0] for k, v in parse_qs(target.query).items()}
            if self.result.done():
                await self._respond(
                    writer, 409, "This login is already finished; you can close this tab."
                )
                return
            if self.expected_state is None or params.get("state") != self.expected_state:
                self.result.set_exception(
                    LoginError(
                        "the login redirect's state does not match this login's (a stale tab or a forged"
                        " redirect); nothing was stored",
                        hint="run `codemode-gen auth login` again and finish it in the browser tab it opens",
                    )
                )
                await self._respond(
                    writer,
                    400,
                    "State mismatch: this redirect does not belong to the login in progress.",
                )
                return
            if "error" in params:
                description = params.get("error_description")
                self.result.set_exception(
                    LoginError(
                        f"the authorization server refused the login: {params['error']}"
                        + (f" ({description[:ERROR_BODY_CHARS]})" if description else ""),
                        hint="log in again and approve the access, or ask the server's operator about your account",
                    )
                )
                await self._respond(writer, 400, f"Login refused: {params['error']}.")
                return
            if not params.get("code"):
                self.result.set_exception(
                    LoginError(
                        "the login redirect carried no authorization code",
                        hint="run `codemode-gen auth login` again",
                    )
                )
                await self._respond(writer, 400, "No authorization code in this redirect.")
                return
            from mcp.shared.auth import AuthorizationCodeResult

            self.result.set_result(
                AuthorizationCodeResult(
                    code=params["code"], state=params["state"], iss=params.get("iss")
                )
            )
            await self._respond(writer, 200, "codemode-gen is logged in. You can close this tab.")
        finally:
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, text: str) -> None:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 409: "Conflict"}[status]
        body = f"<!doctype html><title>codemode-gen</title><p>{text}</p>\n".encode()
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def login(
    config: ServerConfig,
    *,
    open_browser: bool = True,
    timeout: float = LOGIN_TIMEOUT,
    say: Callable[[str], None] = print,
) -> LoginResult:
    """The interactive login of `codemode-gen auth login` (see the module docstring)."""
    import httpx2

    sid = config.id
    if config.transport == "stdio":
        raise LoginError(
            f"'{sid}' is a stdio server: OAuth is for http and sse servers",
            hint='give a stdio server its credentials through "env"',
        )
    if static_authorization(config):
        raise LoginError(
            f"'{sid}' is configured with an Authorization header, which is sent instead of any login",
            hint=f'remove "Authorization" from mcpServers.{sid}.headers to log in with OAuth',
        )
    try:
        store = open_store()
        key = store_key(config)
        old = await anyio.to_thread.run_sync(store.load, key)
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    record = new_record(config)
    headless = config.oauth is not None and config.oauth.grant_type == "client_credentials"
    callback = _Callback()
    if headless:
        storage = Storage(store, key, record, config, persist=False)
        provider = build_provider(config, storage, interactive=True)
    else:
        oauth = config.oauth
        port = oauth.redirect_port if oauth is not None and oauth.redirect_port else 0
        reuse = old.get("clientInfo") if old and not (oauth and oauth.client_id) else None
        registered = (
            urlsplit(reuse["redirect_uris"][0]) if reuse and reuse.get("redirect_uris") else None
        )
        if not port and registered is not None and registered.port and _port_free(registered.port):
            port = registered.port  # the registered redirect URI still works: no new registration
        port = await callback.start(port)
        redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        if reuse is not None and registered is not None and urlunsplit(registered) == redirect_uri:
            record["clientInfo"] = reuse
        storage = Storage(store, key, record, config, persist=False)

        async def show(url: str) -> None:
            callback.expected_state = {
                k: v[0] for k, v in parse_qs(urlsplit(url).query).items()
            }.get("state")
            say(
                f"Open this URL in a browser to log in to '{sid}' (waiting up to {timeout:g} s):\n  {url}"
            )
            if open_browser:
                import webbrowser

                opened = await anyio.to_thread.run_sync(webbrowser.open, url)
                if not opened:
                    say("(no browser could be started here: open the URL above yourself)")

        async def wait() -> AuthorizationCodeResult:
            try:
                with anyio.fail_after(timeout):
                    return await callback.result
            except TimeoutError:
                raise LoginError(
                    f"no login redirect reached {redirect_uri} within {timeout:g} s; nothing was stored",
                    hint="run the command again and finish the login in the browser within the time"
                    " (--timeout SECONDS gives more); on a remote shell, open the printed URL on a machine"
                    " whose browser can reach this one's 127.0.0.1 (e.g. through ssh -L)",
                ) from None

        provider = build_provider(
            config,
            storage,
            interactive=True,
            redirect_uri=redirect_uri,
            redirect_handler=show,
            callback_handler=wait,
        )
    try:
        status = await _provoke(config, provider)
    except LoginError:
        raise
    except httpx2.TransportError as exc:
        raise _unreachable(config, exc) from None
    except MetadataProblem as exc:
        raise LoginError(
            str(exc),
            hint='the server\'s OAuth setup is broken; ask its operator, or use a token in "headers"',
        ) from None
    except Exception as exc:
        from mcp.client.auth import OAuthFlowError

        if not isinstance(exc, OAuthFlowError):
            raise
        raise _flow_failed(config, provider, exc) from None
    finally:
        await callback.close()
    if status in (401, 403):
        raise LoginError(
            f"'{sid}' still answers HTTP {status} after the login",
            hint="the account may lack access to this server; check the scopes (oauth.scope) or ask its operator",
        )
    if "tokens" not in storage.record:
        return LoginResult(
            sid,
            store.describe(key),
            note=f"'{sid}' did not ask for authorization (HTTP {status}): nothing to store",
        )
    storage.persist = True
    try:
        await storage.save()
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    tokens = storage.record["tokens"]
    expires = storage.record.get("expiresAt")
    return LoginResult(
        sid,
        store.describe(key),
        scope=tokens.get("scope"),
        expires_at=float(expires) if isinstance(expires, int | float) else None,
        refreshable=bool(tokens.get("refresh_token")),
    )


async def _provoke(config: ServerConfig, provider: Any) -> int:
    """One MCP request through `provider`, so the server's 401 starts the flow; the status of
    its final answer."""
    import httpx2

    headers = {"accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(
        auth=provider, timeout=LOGIN_HTTP_TIMEOUT, headers=dict(config.headers)
    ) as client:
        if config.transport == "sse":
            async with client.stream(
                "GET", config.url or "", headers={"accept": "text/event-stream"}
            ) as response:
                provider.interactive = False
                return response.status_code
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "codemode-gen", "version": "auth-login"},
            },
        }
        async with client.stream(
            "POST", config.url or "", json=initialize, headers=headers
        ) as response:
            session = response.headers.get("mcp-session-id")
        # Logged in: whatever follows (the session's DELETE) must never start a second login,
        # even if a short-lived token already expired (it is refreshed, or the DELETE fails).
        provider.interactive = False
        if session and response.status_code < 300:
            with contextlib.suppress(httpx2.HTTPError):
                await client.delete(config.url or "", headers={"mcp-session-id": session})
        return response.status_code


def _unreachable(config: ServerConfig, exc: httpx2.TransportError) -> LoginError:
    try:
        url = str(exc.request.url)
    except RuntimeError:
        url = config.url or ""
    kind = "timed out" if "Timeout" in type(exc).__name__ else "connection refused or failed"
    if shown_url(url) == shown_url(config.url):
        return LoginError(
            f"cannot reach '{config.id}' at {shown_url(url)} ({kind})",
            hint="check that the server runs and its url in the MCP config",
        )
    return LoginError(
        f"cannot reach the authorization server of '{config.id}' at {shown_url(url)} ({kind})",
        hint="the server's OAuth metadata names this authorization server: check that it runs, or ask the server's operator",
    )


def _flow_failed(config: ServerConfig, provider: Any, exc: Exception) -> LoginError:
    from mcp.client.auth import OAuthRegistrationError, OAuthTokenError

    found = "; ".join(provider.discovery) or "no metadata requests were made"
    none_found = (
        provider.context.oauth_metadata is None
        and provider.context.protected_resource_metadata is None
    )
    if isinstance(exc, OAuthRegistrationError) and none_found:
        return LoginError(
            f"'{config.id}' asks for authorization but publishes no OAuth metadata ({found}),"
            f" and registering a client at its default endpoint failed: {exc}",
            hint='it may not be an OAuth server: if it takes an API key, put it in "headers";'
            " if it has a pre-registered client, set oauth.clientId",
        )
    if isinstance(exc, OAuthRegistrationError):
        return LoginError(
            f"client registration with the authorization server of '{config.id}' failed: {exc}",
            hint="configure a pre-registered client (oauth.clientId, oauth.clientSecret) if the server does not allow dynamic registration",
        )
    if isinstance(exc, OAuthTokenError):
        return LoginError(
            f"the token request for '{config.id}' failed: {exc}",
            hint="run the login again; if it keeps failing, check oauth.clientId/clientSecret in the MCP config",
        )
    return LoginError(
        f"OAuth for '{config.id}' failed: {exc} (metadata: {found})",
        hint="run the login again; if it keeps failing, the server's OAuth setup may be broken",
    )
