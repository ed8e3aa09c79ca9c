"""OAuth 2.1 for remote MCP servers (the MCP authorization spec), on the `mcp` SDK's providers.

The protocol is the SDK's: `OAuthClientProvider` (protected-resource and authorization-server
discovery, dynamic client registration or a client ID metadata document, PKCE, the token and
refresh requests) and its client-credentials / private-key-JWT extensions, used as the httpx
`Auth` of a session's Streamable HTTP or SSE transport. What this module adds around them:

- Storage (`_Storage`, the SDK's `TokenStorage`) over client/tokenstore.py, keyed by server URL
  and client (`store_key`), with what the SDK keeps only in memory: the absolute expiry and the
  discovered metadata. Without them a login from an earlier process would be sent expired (the
  SDK has no expiry for loaded tokens) and refreshed at a guessed token endpoint.
- Refresh when a 401 says so, not only when the clock does: a token the server revoked or
  expired early is refreshed and the request retried once, before anything else.
- No person in `record`/`run`/`serve`: when a login is needed there (never logged in, the
  refresh token refused, more scopes asked for), the flow does not open a browser. The request
  ends with the server's 401, the provider keeps the reason (`problem`), and the session turns
  that into an `AuthError`/`CallAuthError` naming the server and `codemode-gen auth login ID`;
  the connection itself stays up (run/serve: a ToolCallError for that server only, §7.3/§10).
  Client credentials (CI) need no person: their token request is the SDK's.
- `login`: the interactive flow of `codemode-gen auth login`, with the loopback redirect on
  127.0.0.1 (a random free port unless configured), the state checked when the redirect
  arrives, and a bounded wait; nothing is stored unless it succeeds.
- Secrets: every token and client secret seen is registered (`live_secrets`), so the fixtures,
  traces and printed lines of this process redact them like a configured credential
  (generator/redact.py), however a server echoes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qs, urlsplit, urlunsplit

import anyio
import anyio.to_thread

from codemode_gen.client.tokenstore import RECORD_VERSION, TokenStore, TokenStoreError, open_store
from codemode_gen.config import ServerConfig

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthToken

__all__ = [
    "AUTH_SIDE",
    "CALLBACK_PATH",
    "LOGIN_TIMEOUT",
    "AuthProblem",
    "LoginError",
    "LoginResult",
    "LogoutResult",
    "ServerAuthStatus",
    "auth_status",
    "live_secrets",
    "login",
    "login_command",
    "logout",
    "scrub",
    "secrets_generation",
    "session_auth",
    "shown_url",
    "static_authorization",
    "store_key",
]

# Marks (in `httpx2.Request.extensions`) the requests the OAuth flow makes itself (metadata,
# registration, token): the session's HTTP probe must not mistake their 401/404 for the server's.
AUTH_SIDE = "codemode_oauth"
# Bounds how long `auth login` waits for the browser's redirect (seconds; `--timeout`).
LOGIN_TIMEOUT = 300.0
CALLBACK_PATH = "/callback"
# Bounds one request read on the loopback redirect port: a redirect is one short GET line; a
# local process sending megabytes (or nothing) must not hold the login.
MAX_CALLBACK_REQUEST_BYTES = 16 * 1024
CALLBACK_READ_TIMEOUT = 10.0
# Bounds revocation at `auth logout` (per request): an authorization server that does not
# answer must not keep the tokens from being forgotten locally.
REVOKE_TIMEOUT = 15.0
# Bounds each HTTP request of `auth login` (discovery, registration, token): the wait for the
# person is LOGIN_TIMEOUT, not this.
LOGIN_HTTP_TIMEOUT = 30.0
# How much of an authorization server's error body a message quotes.
ERROR_BODY_CHARS = 300

# The SDK logs every failed flow with a traceback (`logger.exception`); we report failures
# ourselves, once and readable. A NullHandler keeps Python's last-resort handler from printing
# them on the terminal; an application that configures logging still gets them.
logging.getLogger("mcp.client.auth").addHandler(logging.NullHandler())


def login_command(server_id: str) -> str:
    return f"codemode-gen auth login {server_id}"


def shown_url(url: str | None) -> str:
    """A URL for messages and records: without user info and query, which may hold credentials."""
    try:
        parts = urlsplit(url or "")
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "the server URL"
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{host}{port}", parts.path, "", ""))


def static_authorization(config: ServerConfig) -> bool:
    """The server is configured with its own Authorization header (`headers`), which wins: a
    token from an environment variable needs no login."""
    return any(name.lower() == "authorization" for name in config.headers)


def _client_key(config: ServerConfig) -> str:
    oauth = config.oauth
    if oauth is None:
        return "dynamic"
    if oauth.grant_type == "client_credentials":
        return f"client-credentials:{oauth.client_id}"
    if oauth.client_id:
        return f"client:{oauth.client_id}"
    if oauth.client_metadata_url:
        return f"cimd:{oauth.client_metadata_url}"
    return "dynamic"


def client_label(config: ServerConfig) -> str:
    oauth = config.oauth
    if oauth is None or (oauth.grant_type == "authorization_code" and not oauth.client_id and not oauth.client_metadata_url):
        return "dynamically registered client"
    if oauth.grant_type == "client_credentials":
        how = "private-key JWT" if oauth.private_key or oauth.private_key_file else "client secret"
        return f"client credentials of {oauth.client_id} ({how})"
    if oauth.client_id:
        return f"pre-registered client {oauth.client_id}"
    return f"client ID metadata document {oauth.client_metadata_url}"


def store_key(config: ServerConfig) -> str:
    """The login's key: server URL (scheme and host lower-cased, no fragment) and client."""
    parts = urlsplit(config.url or "")
    url = urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))
    return f"{url}#{_client_key(config)}"


# --------------------------------------------------------------------------- live secrets

_LIVE: dict[str, dict[str, str]] = {}  # store key -> secret value -> name
_GENERATION = [0]


def _remember(key: str, name: str, value: str | None) -> None:
    if not value:
        return
    known = _LIVE.setdefault(key, {})
    if value not in known:
        known[value] = name
        _GENERATION[0] += 1


def _remember_record(key: str, record: Mapping[str, Any] | None) -> None:
    if not record:
        return
    tokens = record.get("tokens") or {}
    _remember(key, "oauth-access-token", tokens.get("access_token"))
    _remember(key, "oauth-refresh-token", tokens.get("refresh_token"))
    _remember(key, "oauth-client-secret", (record.get("clientInfo") or {}).get("client_secret"))


def live_secrets(config: ServerConfig) -> list[tuple[str, str]]:
    """Tokens and client secrets this process has seen for the server: redacted wherever the
    server's configured credentials are (generator/redact.py)."""
    if config.transport == "stdio":
        return []
    return [(name, value) for value, name in _LIVE.get(store_key(config), {}).items()]


def secrets_generation() -> int:
    """Changes whenever a new secret is seen, so cached redactors know to rebuild."""
    return _GENERATION[0]


def scrub(text: str, config: ServerConfig) -> str:
    """`text` without this server's live OAuth secrets, for the client layer's own log lines."""
    for name, value in live_secrets(config):
        text = text.replace(value, f"<redacted:{name}>")
    return text


# --------------------------------------------------------------------------- storage


def _new_record(config: ServerConfig) -> dict[str, Any]:
    return {"version": RECORD_VERSION, "serverUrl": shown_url(config.url), "client": client_label(config)}


class _Storage:
    """The SDK's `TokenStorage` over one store record, plus what the SDK does not persist."""

    def __init__(self, store: TokenStore, key: str, record: dict[str, Any] | None, config: ServerConfig,
                 *, persist: bool = True) -> None:
        self.store = store
        self.key = key
        self.record = record if record is not None else _new_record(config)
        self.persist = persist  # False while logging in: stored only once the login succeeded
        self.context: Any = None  # the provider's OAuthContext, set by the provider
        _remember_record(key, self.record)

    async def reload(self) -> dict[str, Any]:
        if self.persist:
            found = await anyio.to_thread.run_sync(self.store.load, self.key)
            if found is not None:
                self.record = found
                _remember_record(self.key, found)
        return self.record

    async def save(self) -> None:
        self.record["updatedAt"] = int(time.time())
        _remember_record(self.key, self.record)
        if self.persist:
            await anyio.to_thread.run_sync(self.store.save, self.key, dict(self.record))

    def tokens(self) -> OAuthToken | None:
        from mcp.shared.auth import OAuthToken
        from pydantic import ValidationError

        raw = self.record.get("tokens")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthToken.model_validate(raw)
        except ValidationError:
            return None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.record["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        self.record["expiresAt"] = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        self.record.pop("refreshRefused", None)
        context = self.context
        if context is not None:
            for name, value in (("oauthMetadata", context.oauth_metadata),
                                ("resourceMetadata", context.protected_resource_metadata)):
                if value is not None:
                    self.record[name] = value.model_dump(mode="json", exclude_none=True)
            if context.auth_server_url:
                self.record["authServerUrl"] = context.auth_server_url
        await self.save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        from mcp.shared.auth import OAuthClientInformationFull
        from pydantic import ValidationError

        raw = self.record.get("clientInfo")
        if not isinstance(raw, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(raw)
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.record["clientInfo"] = client_info.model_dump(mode="json", exclude_none=True)
        await self.save()

    async def forget_tokens(self, refused: str, *, used_refresh_token: str | None) -> None:
        """The refresh token was refused: drop the tokens (the client registration stays), unless
        another process has stored newer ones meanwhile."""
        await self.reload()
        stored = self.record.get("tokens") or {}
        if used_refresh_token is not None and stored.get("refresh_token") not in (None, used_refresh_token):
            return
        self.record.pop("tokens", None)
        self.record.pop("expiresAt", None)
        self.record["refreshRefused"] = refused
        await self.save()


# --------------------------------------------------------------------------- the provider


@dataclass(frozen=True)
class AuthProblem:
    """Why a request ended with the server's 401/403: one line, and the exact fix."""

    message: str
    hint: str


class _NeedsPerson(Exception):
    """The flow wanted a browser where there is no person (record, run, serve)."""


class _MetadataProblem(Exception):
    """The server published OAuth metadata that cannot be used: better stop than guess endpoints."""


def _error_text(body: bytes) -> str:
    """`error: description` of an OAuth error body, else its first characters."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        description = data.get("error_description")
        return f"{data['error']}: {description}" if isinstance(description, str) and description else data["error"]
    text = body.decode("utf-8", "replace").strip()
    return text[:ERROR_BODY_CHARS] or "no details"


class _Behaviour:
    """What codemode-gen adds to each SDK provider class (see the module docstring). Mixed in
    before the SDK class, so `super()` is the SDK's implementation."""

    context: Any
    _initialized: bool

    def _setup(self, config: ServerConfig, storage: _Storage, *, interactive: bool,
                fixed_client: OAuthClientInformationFull | None = None) -> None:
        self.config = config
        self._storage = storage
        storage.context = self.context
        self.interactive = interactive
        self.headless = config.oauth is not None and config.oauth.grant_type == "client_credentials"
        self._fixed_client = fixed_client
        self.problem: AuthProblem | None = None
        self._rejected: int | None = None  # status of the last request that ended rejected
        self._refusal: str | None = None  # why the authorization server refused a refresh
        self.discovery: list[str] = []  # what each metadata request found, for messages
        self._malformed = False

    # ---------------------------------------------------------------- the SDK's hooks

    async def _initialize(self) -> None:
        from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
        from pydantic import ValidationError

        record = await self._storage.reload()
        await super()._initialize()  # type: ignore[misc]
        if self._fixed_client is not None:
            self.context.client_info = self._fixed_client
        expires = record.get("expiresAt")
        if self.context.current_tokens is not None and isinstance(expires, int | float):
            self.context.token_expiry_time = float(expires)
        self._refusal = record.get("refreshRefused") if isinstance(record.get("refreshRefused"), str) else None
        for name, model, attr in (("oauthMetadata", OAuthMetadata, "oauth_metadata"),
                                  ("resourceMetadata", ProtectedResourceMetadata, "protected_resource_metadata")):
            raw = record.get(name)
            if isinstance(raw, dict) and getattr(self.context, attr) is None:
                with contextlib.suppress(ValidationError):
                    setattr(self.context, attr, model.model_validate(raw))
        if isinstance(record.get("authServerUrl"), str) and self.context.auth_server_url is None:
            self.context.auth_server_url = record["authServerUrl"]

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        used = self.context.current_tokens.refresh_token if self.context.current_tokens else None
        if response.status_code == 200:
            ok: bool = await super()._handle_refresh_response(response)  # type: ignore[misc]
            if ok:
                self._refusal = None
            return ok
        body = await response.aread()
        await super()._handle_refresh_response(response)  # type: ignore[misc]  # clears the tokens
        # Another process (a second serve, a record) may have refreshed first: with rotating
        # refresh tokens ours is then stale, and the stored one is good.
        record = await self._storage.reload()
        stored = self._storage.tokens()
        if stored is not None and stored.refresh_token not in (None, used):
            self.context.current_tokens = stored
            expires = record.get("expiresAt")
            self.context.token_expiry_time = float(expires) if isinstance(expires, int | float) else None
            return True
        reason = f"HTTP {response.status_code}, {_error_text(body)}"
        self._refusal = reason
        if 400 <= response.status_code < 500:  # refused for good; a 5xx may pass
            await self._storage.forget_tokens(reason, used_refresh_token=used)
        return False

    async def _adopt_stored(self) -> bool:
        """Take up tokens stored since this provider last read them (a new `auth login`, or
        another process's refresh), when they differ from the ones just rejected. Client
        credentials are no login: their token request is the fix."""
        if self.headless or not self._storage.persist:
            return False
        record = await self._storage.reload()
        stored = self._storage.tokens()
        current = self.context.current_tokens
        if stored is None or (current is not None and stored.access_token == current.access_token):
            return False
        client = await self._storage.get_client_info()
        if client is not None and self._fixed_client is None:
            self.context.client_info = client
        self.context.current_tokens = stored
        expires = record.get("expiresAt")
        self.context.token_expiry_time = float(expires) if isinstance(expires, int | float) else None
        self._refusal = None
        self.problem = None
        return True

    # ---------------------------------------------------------------- the flow

    def _note(self, request: httpx2.Request, response: httpx2.Response, body: bytes | None) -> None:
        from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
        from pydantic import ValidationError

        where = f"{request.method} {shown_url(str(request.url))}"
        if request.method != "GET" or "/.well-known/" not in request.url.path:
            return
        if response.status_code != 200 or body is None:
            self.discovery.append(f"{where}: HTTP {response.status_code}")
            return
        model: Any = ProtectedResourceMetadata if "oauth-protected-resource" in request.url.path else OAuthMetadata
        what = "protected resource metadata" if model is ProtectedResourceMetadata else "authorization server metadata"
        try:
            model.model_validate_json(body)
        except ValidationError as exc:
            errors = exc.errors()
            loc = ".".join(str(part) for part in errors[0]["loc"]) if errors else ""
            message = errors[0]["msg"] if errors else "invalid"
            self.discovery.append(f"{where}: malformed {what} ({loc or 'document'}: {message})")
            self._malformed = True
            return
        self.discovery.append(f"{where}: {what}")

    def _check_outgoing(self, outgoing: httpx2.Request) -> None:
        """Before a registration, authorization or token request: metadata that was published
        but broken is not silently replaced by guessed endpoints (the 2025-03-26 fallback is for
        servers that publish none at all)."""
        if outgoing.method == "GET" and "/.well-known/" in outgoing.url.path:
            return
        if self._malformed and self.context.oauth_metadata is None:
            raise _MetadataProblem(
                f"{self.config.id} published malformed OAuth metadata: " + "; ".join(self.discovery)
            )

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = super()._auth_flow(request)  # type: ignore[misc]
        last: httpx2.Response | None = None  # the last response to `request` itself
        latest: httpx2.Response | None = None  # the last response of any request: what httpx returns
        refreshed = adopted = False
        self.discovery, self._malformed = [], False  # this flow's (bounded: a few lines)
        try:
            try:
                outgoing = await inner.__anext__()
                while True:
                    self._check_outgoing(outgoing)
                    response = latest = yield outgoing
                    if outgoing is not request:
                        self._note(outgoing, response, await response.aread() if response.status_code == 200 else None)
                    else:
                        last = response
                        if response.status_code == 401 and not self.interactive:
                            if not refreshed and self.context.can_refresh_token():
                                # The server says the token is bad before the clock does: refresh
                                # once and retry, as the SDK does only for an expiry it knows.
                                refreshed = True
                                refresh = await self._refresh_token()  # type: ignore[attr-defined]
                                latest = yield refresh
                                if await self._handle_refresh_response(latest):
                                    self._add_auth_header(request)  # type: ignore[attr-defined]
                                    response = last = latest = yield request
                            if response.status_code == 401 and not adopted and await self._adopt_stored():
                                # `codemode-gen auth login` ran meanwhile (another process): its
                                # login is taken up here, so a long `serve` needs no restart.
                                adopted = True
                                if not self.context.is_token_valid() and self.context.can_refresh_token():
                                    latest = yield await self._refresh_token()  # type: ignore[attr-defined]
                                    await self._handle_refresh_response(latest)
                                self._add_auth_header(request)  # type: ignore[attr-defined]
                                response = last = latest = yield request
                            if response.status_code != 401:
                                self._settled(response)
                                return
                            if not self.headless:
                                raise _NeedsPerson("login needed")
                    try:
                        outgoing = await inner.asend(response)
                    except StopAsyncIteration:
                        if last is not None:
                            self._settled(last)
                        return
            except Exception as exc:  # every failure of the flow; _is_flow_failure sorts them
                if self.interactive or not _is_flow_failure(exc):
                    raise
                self.problem = self._explain(exc)
        finally:
            await inner.aclose()
        # No person here: hand the transport the server's own refusal, so the session reports it
        # (AuthError / CallAuthError with `problem`) and stays usable. httpx returns the response
        # the flow saw last, so when that was one of the flow's own (a token endpoint's), the
        # request is sent once more to get the server's.
        if last is None or latest is not last:
            last = yield request
        self._rejected = last.status_code if last.status_code in (401, 403) else 401

    def _settled(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            self._rejected = response.status_code
            if self.problem is None:
                self.problem = self._explain(None)
        else:
            self.problem = None

    def _explain(self, exc: BaseException | None) -> AuthProblem:
        sid = self.config.id
        command = login_command(sid)
        if self.headless:
            detail = f": {exc}" if exc is not None else ""
            return AuthProblem(
                f"the client-credentials token request for '{sid}' failed{detail}",
                f"check oauth.clientId and oauth.clientSecret (or privateKey) of '{sid}' in the MCP config",
            )
        hint = f"run `{command}` in a terminal, then retry; the script cannot fix this"
        if isinstance(exc, _MetadataProblem):
            return AuthProblem(str(exc), f"the server's OAuth setup is broken; ask its operator, or use a token in \"headers\" ({hint})")
        if self._refusal is not None:
            return AuthProblem(
                f"the login of '{sid}' expired and the authorization server refused to refresh it"
                f" ({self._refusal}); log in again: {command}",
                hint,
            )
        if self.context.current_tokens is None and not isinstance(exc, _NeedsPerson | type(None)):
            return AuthProblem(f"OAuth for '{sid}' failed ({exc}); log in again: {command}", hint)
        if self.context.current_tokens is None or (exc is None and not self.context.can_refresh_token()):
            return AuthProblem(f"'{sid}' needs an OAuth login (HTTP 401); log in: {command}", hint)
        return AuthProblem(
            f"'{sid}' rejected its OAuth token and it could not be renewed without you; log in again: {command}",
            hint,
        )

    def take_rejection(self) -> int | None:
        status, self._rejected = self._rejected, None
        return status

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super().async_auth_flow(request)  # type: ignore[misc]
        try:
            outgoing = await flow.__anext__()
            while True:
                if outgoing is not request:
                    outgoing.extensions[AUTH_SIDE] = True
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


def _is_flow_failure(exc: BaseException) -> bool:
    from mcp.client.auth import OAuthFlowError
    from pydantic import ValidationError

    return isinstance(exc, _NeedsPerson | _MetadataProblem | OAuthFlowError | TokenStoreError | ValidationError | ValueError)


def _provider_classes() -> dict[str, type]:
    """The SDK's providers with `_Behaviour` mixed in (imported only when a server uses OAuth)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.auth.extensions.client_credentials import (
        ClientCredentialsOAuthProvider,
        PrivateKeyJWTOAuthProvider,
    )

    class Interactive(_Behaviour, OAuthClientProvider):
        pass

    class ClientCredentials(_Behaviour, ClientCredentialsOAuthProvider):
        pass

    class PrivateKeyJWT(_Behaviour, PrivateKeyJWTOAuthProvider):
        pass

    return {"interactive": Interactive, "client_credentials": ClientCredentials, "private_key_jwt": PrivateKeyJWT}


_CLASSES: dict[str, type] = {}


def _classes() -> dict[str, type]:
    if not _CLASSES:
        _CLASSES.update(_provider_classes())
    return _CLASSES


def _private_key(config: ServerConfig) -> str:
    oauth = config.oauth
    assert oauth is not None
    if oauth.private_key:
        return oauth.private_key
    assert oauth.private_key_file is not None
    try:
        with open(oauth.private_key_file, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise TokenStoreError(
            f"cannot read oauth.privateKeyFile of '{config.id}' ({oauth.private_key_file}): {exc.strerror}",
            hint="point privateKeyFile at the PEM file of the client's private key (relative to the config's folder)",
        ) from None


def _build(
    config: ServerConfig,
    storage: _Storage,
    *,
    interactive: bool,
    redirect_uri: str | None = None,
    redirect_handler: Callable[[str], Awaitable[None]] | None = None,
    callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
) -> Any:
    """The provider for `config`: client credentials / private-key JWT when configured, else the
    authorization-code flow (interactive only in `auth login`)."""
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
    from pydantic import AnyUrl

    classes = _classes()
    oauth = config.oauth
    url = config.url or ""
    issuer = oauth.issuer if oauth is not None else None
    if oauth is not None and oauth.grant_type == "client_credentials":
        assert oauth.client_id is not None
        with warnings.catch_warnings():
            # Without an issuer the SDK warns (deprecation) on every connection; docs/config.md
            # recommends oauth.issuer, which pins the authorization server.
            warnings.simplefilter("ignore")
            if oauth.private_key or oauth.private_key_file:
                from mcp.client.auth.extensions.client_credentials import SignedJWTParameters

                assertion = SignedJWTParameters(
                    issuer=oauth.client_id, subject=oauth.client_id, signing_key=_private_key(config),
                    signing_algorithm=oauth.signing_algorithm,
                ).create_assertion_provider()
                provider = classes["private_key_jwt"](
                    url, storage, oauth.client_id, assertion, scope=oauth.scope, issuer=issuer,
                )
            else:
                assert oauth.client_secret is not None
                method = oauth.token_endpoint_auth_method
                provider = classes["client_credentials"](
                    url, storage, oauth.client_id, oauth.client_secret,
                    token_endpoint_auth_method=method if method in ("client_secret_basic", "client_secret_post") else "client_secret_basic",
                    scope=oauth.scope, issuer=issuer,
                )
        provider._setup(config, storage, interactive=interactive)
        return provider

    async def no_person(url: str) -> None:
        raise _NeedsPerson("no browser outside `codemode-gen auth login`")

    async def no_callback() -> AuthorizationCodeResult:  # pragma: no cover - no_person raised first
        raise _NeedsPerson("no redirect outside `codemode-gen auth login`")

    redirect = redirect_uri or _stored_redirect(storage) or f"http://127.0.0.1{CALLBACK_PATH}"
    metadata = OAuthClientMetadata(
        redirect_uris=[AnyUrl(redirect)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        client_name="codemode-gen",
        scope=oauth.scope if oauth is not None else None,
        # one of config.py's _OAUTH_AUTH_METHODS, all of which the SDK knows
        token_endpoint_auth_method=cast(Any, oauth.token_endpoint_auth_method if oauth is not None else None),
    )
    fixed = None
    if oauth is not None and oauth.client_id:
        method = oauth.token_endpoint_auth_method or ("client_secret_basic" if oauth.client_secret else "none")
        fixed = OAuthClientInformationFull(
            client_id=oauth.client_id, client_secret=oauth.client_secret, redirect_uris=[AnyUrl(redirect)],
            grant_types=["authorization_code", "refresh_token"], response_types=["code"],
            token_endpoint_auth_method=method, scope=oauth.scope,
        )
    provider = classes["interactive"](
        url, metadata, storage,
        redirect_handler=redirect_handler if interactive else no_person,
        callback_handler=callback_handler if interactive else no_callback,
        client_metadata_url=oauth.client_metadata_url if oauth is not None else None,
    )
    provider._setup(config, storage, interactive=interactive, fixed_client=fixed)
    return provider


def _stored_redirect(storage: _Storage) -> str | None:
    uris = (storage.record.get("clientInfo") or {}).get("redirect_uris")
    return uris[0] if isinstance(uris, list) and uris and isinstance(uris[0], str) else None


async def session_auth(config: ServerConfig) -> Any | None:
    """The httpx `Auth` of a session to `config` (record, run, serve, the Python API), or None
    when the server uses no OAuth: no `oauth` object and no stored login, or a static
    Authorization header. A store that cannot be used raises `TokenStoreError`."""
    if config.transport == "stdio" or static_authorization(config):
        return None
    store = open_store()
    key = store_key(config)
    record = await anyio.to_thread.run_sync(store.load, key)
    if config.oauth is None and record is None:
        return None
    return _build(config, _Storage(store, key, record, config), interactive=False)


# --------------------------------------------------------------------------- auth login


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
        self.result: asyncio.Future[AuthorizationCodeResult] = asyncio.get_running_loop().create_future()
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
                if port else "check that this machine allows listening on 127.0.0.1",
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
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            target = urlsplit(parts[1] if len(parts) >= 2 else "/")
            if parts[0] != "GET" or target.path != CALLBACK_PATH:
                await self._respond(writer, 404, "Not the codemode-gen login redirect.")
                return
            params = {k: v[0] for k, v in parse_qs(target.query).items()}
            if self.result.done():
                await self._respond(writer, 409, "This login is already finished; you can close this tab.")
                return
            if self.expected_state is None or params.get("state") != self.expected_state:
                self.result.set_exception(LoginError(
                    "the login redirect's state does not match this login's (a stale tab or a forged"
                    " redirect); nothing was stored",
                    hint="run `codemode-gen auth login` again and finish it in the browser tab it opens",
                ))
                await self._respond(writer, 400, "State mismatch: this redirect does not belong to the login in progress.")
                return
            if "error" in params:
                description = params.get("error_description")
                self.result.set_exception(LoginError(
                    f"the authorization server refused the login: {params['error']}"
                    + (f" ({description[:ERROR_BODY_CHARS]})" if description else ""),
                    hint="log in again and approve the access, or ask the server's operator about your account",
                ))
                await self._respond(writer, 400, f"Login refused: {params['error']}.")
                return
            if not params.get("code"):
                self.result.set_exception(LoginError(
                    "the login redirect carried no authorization code", hint="run `codemode-gen auth login` again"
                ))
                await self._respond(writer, 400, "No authorization code in this redirect.")
                return
            from mcp.shared.auth import AuthorizationCodeResult

            self.result.set_result(AuthorizationCodeResult(code=params["code"], state=params["state"], iss=params.get("iss")))
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
        raise LoginError(f"'{sid}' is a stdio server: OAuth is for http and sse servers",
                         hint="give a stdio server its credentials through \"env\"")
    if static_authorization(config):
        raise LoginError(
            f"'{sid}' is configured with an Authorization header, which is sent instead of any login",
            hint=f"remove \"Authorization\" from mcpServers.{sid}.headers to log in with OAuth",
        )
    try:
        store = open_store()
        key = store_key(config)
        old = await anyio.to_thread.run_sync(store.load, key)
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    record = _new_record(config)
    headless = config.oauth is not None and config.oauth.grant_type == "client_credentials"
    callback = _Callback()
    if headless:
        storage = _Storage(store, key, record, config, persist=False)
        provider = _build(config, storage, interactive=True)
    else:
        oauth = config.oauth
        port = oauth.redirect_port if oauth is not None and oauth.redirect_port else 0
        reuse = old.get("clientInfo") if old and not (oauth and oauth.client_id) else None
        registered = urlsplit(reuse["redirect_uris"][0]) if reuse and reuse.get("redirect_uris") else None
        if not port and registered is not None and registered.port and _port_free(registered.port):
            port = registered.port  # the registered redirect URI still works: no new registration
        port = await callback.start(port)
        redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
        if reuse is not None and registered is not None and urlunsplit(registered) == redirect_uri:
            record["clientInfo"] = reuse
        storage = _Storage(store, key, record, config, persist=False)

        async def show(url: str) -> None:
            callback.expected_state = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}.get("state")
            say(f"Open this URL in a browser to log in to '{sid}' (waiting up to {timeout:g} s):\n  {url}")
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

        provider = _build(config, storage, interactive=True, redirect_uri=redirect_uri,
                          redirect_handler=show, callback_handler=wait)
    try:
        status = await _provoke(config, provider)
    except LoginError:
        raise
    except httpx2.TransportError as exc:
        raise _unreachable(config, exc) from None
    except _MetadataProblem as exc:
        raise LoginError(str(exc), hint="the server's OAuth setup is broken; ask its operator, or use a token in \"headers\"") from None
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
        return LoginResult(sid, store.describe(key), note=f"'{sid}' did not ask for authorization (HTTP {status}): nothing to store")
    storage.persist = True
    try:
        await storage.save()
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    tokens = storage.record["tokens"]
    expires = storage.record.get("expiresAt")
    return LoginResult(
        sid, store.describe(key), scope=tokens.get("scope"),
        expires_at=float(expires) if isinstance(expires, int | float) else None,
        refreshable=bool(tokens.get("refresh_token")),
    )


async def _provoke(config: ServerConfig, provider: Any) -> int:
    """One MCP request through `provider`, so the server's 401 starts the flow; the status of
    its final answer."""
    import httpx2

    headers = {"accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(auth=provider, timeout=LOGIN_HTTP_TIMEOUT, headers=dict(config.headers)) as client:
        if config.transport == "sse":
            async with client.stream("GET", config.url or "", headers={"accept": "text/event-stream"}) as response:
                provider.interactive = False
                return response.status_code
        initialize = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "codemode-gen", "version": "auth-login"}},
        }
        async with client.stream("POST", config.url or "", json=initialize, headers=headers) as response:
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
        return LoginError(f"cannot reach '{config.id}' at {shown_url(url)} ({kind})",
                          hint="check that the server runs and its url in the MCP config")
    return LoginError(
        f"cannot reach the authorization server of '{config.id}' at {shown_url(url)} ({kind})",
        hint="the server's OAuth metadata names this authorization server: check that it runs, or ask the server's operator",
    )


def _flow_failed(config: ServerConfig, provider: Any, exc: Exception) -> LoginError:
    from mcp.client.auth import OAuthRegistrationError, OAuthTokenError

    found = "; ".join(provider.discovery) or "no metadata requests were made"
    none_found = provider.context.oauth_metadata is None and provider.context.protected_resource_metadata is None
    if isinstance(exc, OAuthRegistrationError) and none_found:
        return LoginError(
            f"'{config.id}' asks for authorization but publishes no OAuth metadata ({found}),"
            f" and registering a client at its default endpoint failed: {exc}",
            hint="it may not be an OAuth server: if it takes an API key, put it in \"headers\";"
            " if it has a pre-registered client, set oauth.clientId",
        )
    if isinstance(exc, OAuthRegistrationError):
        return LoginError(f"client registration with the authorization server of '{config.id}' failed: {exc}",
                          hint="configure a pre-registered client (oauth.clientId, oauth.clientSecret) if the server does not allow dynamic registration")
    if isinstance(exc, OAuthTokenError):
        return LoginError(f"the token request for '{config.id}' failed: {exc}",
                          hint="run the login again; if it keeps failing, check oauth.clientId/clientSecret in the MCP config")
    return LoginError(f"OAuth for '{config.id}' failed: {exc} (metadata: {found})",
                      hint="run the login again; if it keeps failing, the server's OAuth setup may be broken")


# --------------------------------------------------------------------------- status, logout


@dataclass
class ServerAuthStatus:
    server_id: str
    state: str  # one short phrase
    details: list[str] = field(default_factory=list)
    needs_login: bool = False


def _describe_expiry(expires: Any, now: float) -> str:
    if not isinstance(expires, int | float):
        return "no expiry given"
    left = expires - now
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(expires))
    if left <= 0:
        return f"expired at {stamp}"
    minutes = int(left // 60)
    return f"expires at {stamp} (in {minutes} min)" if minutes else f"expires at {stamp} (in {int(left)} s)"


def auth_status(config: ServerConfig, store: TokenStore | None = None) -> ServerAuthStatus:
    """One server's login state for `auth status`: never a secret."""
    sid = config.id
    if config.transport == "stdio":
        return ServerAuthStatus(sid, "stdio server (no OAuth)")
    if static_authorization(config):
        return ServerAuthStatus(sid, "static Authorization header (from \"headers\"; no login)")
    try:
        store = store if store is not None else open_store()
        key = store_key(config)
        record = store.load(key)
        where = store.describe(key)
    except TokenStoreError as exc:
        return ServerAuthStatus(sid, f"unusable login store: {exc.message}", [f"fix: {exc.hint}"], needs_login=True)
    headless = config.oauth is not None and config.oauth.grant_type == "client_credentials"
    label = client_label(config)
    if record is None or not isinstance(record.get("tokens"), dict):
        if headless:
            return ServerAuthStatus(sid, "client credentials: a token is fetched when needed", [label])
        refused = record.get("refreshRefused") if record else None
        if refused:
            return ServerAuthStatus(sid, "login expired (refresh refused)", [f"refused: {refused}", f"run: {login_command(sid)}"], needs_login=True)
        if config.oauth is None:
            return ServerAuthStatus(sid, "not logged in (no OAuth login stored)", [f"if it needs OAuth, run: {login_command(sid)}"])
        return ServerAuthStatus(sid, "not logged in", [f"run: {login_command(sid)}"], needs_login=True)
    tokens = record["tokens"]
    now = time.time()
    expires = record.get("expiresAt")
    expired = isinstance(expires, int | float) and expires <= now
    refreshable = bool(tokens.get("refresh_token"))
    if headless:
        state = "client credentials: token cached"
    elif expired and not refreshable:
        state = "login expired (no refresh token)"
    else:
        state = "logged in"
    details = [
        _describe_expiry(expires, now) + ("; refreshable" if refreshable else "; not refreshable"),
        f"scopes: {tokens.get('scope') or '(none given)'}",
        label,
        f"stored in {where}",
    ]
    needs = expired and not refreshable and not headless
    if needs:
        details.append(f"run: {login_command(sid)}")
    return ServerAuthStatus(sid, state, details, needs_login=needs)


@dataclass
class LogoutResult:
    existed: bool
    revoked: list[str] = field(default_factory=list)
    note: str | None = None


async def logout(config: ServerConfig) -> LogoutResult:
    """Forget the server's login, revoking its tokens first where the authorization server
    offers revocation (RFC 7009). A revocation that fails does not keep the tokens stored."""
    import httpx2

    try:
        store = open_store()
        key = store_key(config)
        record = await anyio.to_thread.run_sync(store.load, key)
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    if record is None:
        return LogoutResult(existed=False)
    result = LogoutResult(existed=True)
    tokens = record.get("tokens") or {}
    endpoint = (record.get("oauthMetadata") or {}).get("revocation_endpoint")
    client = record.get("clientInfo") or {}
    oauth = config.oauth
    client_id = client.get("client_id") or (oauth.client_id if oauth else None)
    secret = client.get("client_secret") or (oauth.client_secret if oauth else None)
    method = client.get("token_endpoint_auth_method") or ("client_secret_basic" if secret else "none")
    wanted = [(hint, tokens.get(hint)) for hint in ("refresh_token", "access_token") if tokens.get(hint)]
    if wanted and not isinstance(endpoint, str):
        result.note = "the authorization server offers no token revocation: the tokens were only forgotten here"
    elif wanted:
        async with httpx2.AsyncClient(timeout=REVOKE_TIMEOUT) as http:
            for hint, token in wanted:
                data = {"token": token, "token_type_hint": hint}
                extra: dict[str, Any] = {}
                if method == "client_secret_basic" and client_id and secret:
                    extra["auth"] = httpx2.BasicAuth(client_id, secret)
                else:
                    if client_id:
                        data["client_id"] = client_id
                    if method == "client_secret_post" and secret:
                        data["client_secret"] = secret
                try:
                    response = await http.post(str(endpoint), data=data, **extra)
                except httpx2.HTTPError as exc:
                    result.note = f"revocation at {shown_url(endpoint)} failed ({type(exc).__name__}): the tokens were forgotten here anyway"
                    break
                if response.status_code == 200:
                    result.revoked.append(hint.replace("_", " "))
                else:
                    result.note = (f"revocation at {shown_url(endpoint)} answered HTTP {response.status_code}:"
                                   " the tokens were forgotten here anyway")
    try:
        await anyio.to_thread.run_sync(store.delete, key)
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    return result
