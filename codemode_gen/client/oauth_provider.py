"""The OAuth provider of a session: the `mcp` SDK's providers with codemode-gen's behaviour mixed in.

The protocol is the SDK's: `OAuthClientProvider` (protected-resource and authorization-server
discovery, dynamic client registration or a client ID metadata document, PKCE, the token and
refresh requests) and its client-credentials / private-key-JWT extensions, used as the httpx
`Auth` of a session's Streamable HTTP or SSE transport. What `_Behaviour` adds around them:

- Refresh when a 401 says so, not only when the clock does: a token the server revoked or
  expired early is refreshed and the request retried once, before anything else.
- No person in `record`/`run`/`serve`: when a login is needed there (never logged in, the
  refresh token refused, more scopes asked for), the flow does not open a browser. The request
  ends with the server's 401, the provider keeps the reason (`problem`), and the session turns
  that into an `AuthError`/`CallAuthError` naming the server and `codemode-gen auth login ID`;
  the connection itself stays up (run/serve: a ToolCallError for that server only, §7.3/§10).
  Client credentials (CI) need no person: their token request is the SDK's.

`_Behaviour` overrides hooks the SDK names with a leading underscore (`_initialize`,
`_handle_refresh_response`, `_auth_flow`) and calls `_refresh_token` / `_add_auth_header`:
there is no public extension point for them. client/mcp_private.py lists them and
tests/client/test_mcp_private.py fails by name when an SDK release moves one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread

from codemode_gen.client.oauth_records import (
    Storage,
    login_command,
    shown_url,
    static_authorization,
    store_key,
)
from codemode_gen.client.tokenstore import TokenStoreError, open_store
from codemode_gen.config import ServerConfig

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull

__all__ = [
    "AUTH_SIDE",
    "CALLBACK_PATH",
    "AuthProblem",
    "MetadataProblem",
    "build_provider",
    "session_auth",
]


# Marks (in `httpx2.Request.extensions`) the requests the OAuth flow makes itself (metadata,
# registration, token): the session's HTTP probe must not mistake their 401/404 for the server's.
AUTH_SIDE = "codemode_oauth"
CALLBACK_PATH = "/callback"
# How much of an authorization server's error body a message quotes.
ERROR_BODY_CHARS = 300

# The SDK logs every failed flow with a traceback (`logger.exception`); we report failures
# ourselves, once and readable. A NullHandler keeps Python's last-resort handler from printing
# them on the terminal; an application that configures logging still gets them.
logging.getLogger("mcp.client.auth").addHandler(logging.NullHandler())


@dataclass(frozen=True)
class AuthProblem:
    """Why a request ended with the server's 401/403: one line, and the exact fix."""

    message: str
    hint: str


class _NeedsPerson(Exception):
    """The flow wanted a browser where there is no person (record, run, serve)."""


class MetadataProblem(Exception):
    """The server published OAuth metadata that cannot be used: better stop than guess endpoints."""


def _error_text(body: bytes) -> str:
    """`error: description` of an OAuth error body, else its first characters."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        description = data.get("error_description")
        return (
            f"{data['error']}: {description}"
            if isinstance(description, str) and description
            else data["error"]
        )
    text = body.decode("utf-8", "replace").strip()
    return text[:ERROR_BODY_CHARS] or "no details"


class _Behaviour:
    """What codemode-gen adds to each SDK provider class (see the module docstring). Mixed in
    before the SDK class, so `super()` is the SDK's implementation."""

    context: Any
    _initialized: bool

    def _setup(
        self,
        config: ServerConfig,
        storage: Storage,
        *,
        interactive: bool,
        fixed_client: OAuthClientInformationFull | None = None,
    ) -> None:
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
        self._refusal = (
            record.get("refreshRefused") if isinstance(record.get("refreshRefused"), str) else None
        )
        for name, model, attr in (
            ("oauthMetadata", OAuthMetadata, "oauth_metadata"),
            ("resourceMetadata", ProtectedResourceMetadata, "protected_resource_metadata"),
        ):
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
            self.context.token_expiry_time = (
                float(expires) if isinstance(expires, int | float) else None
            )
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
        self.context.token_expiry_time = (
            float(expires) if isinstance(expires, int | float) else None
        )
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
        model: Any = (
            ProtectedResourceMetadata
            if "oauth-protected-resource" in request.url.path
            else OAuthMetadata
        )
        what = (
            "protected resource metadata"
            if model is ProtectedResourceMetadata
            else "authorization server metadata"
        )
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
            raise MetadataProblem(
                f"{self.config.id} published malformed OAuth metadata: " + "; ".join(self.discovery)
            )

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = super()._auth_flow(request)  # type: ignore[misc]
        last: httpx2.Response | None = None  # the last response to `request` itself
        latest: httpx2.Response | None = (
            None  # the last response of any request: what httpx returns
        )
        refreshed = adopted = False
        self.discovery, self._malformed = [], False  # this flow's (bounded: a few lines)
        try:
            try:
                outgoing = await inner.__anext__()
                while True:
                    self._check_outgoing(outgoing)
                    response = latest = yield outgoing
                    if outgoing is not request:
                        self._note(
                            outgoing,
                            response,
                            await response.aread() if response.status_code == 200 else None,
                        )
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
                            if (
                                response.status_code == 401
                                and not adopted
                                and await self._adopt_stored()
                            ):
                                # `codemode-gen auth login` ran meanwhile (another process): its
                                # login is taken up here, so a long `serve` needs no restart.
                                adopted = True
                                if (
                                    not self.context.is_token_valid()
                                    and self.context.can_refresh_token()
                                ):
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
        if isinstance(exc, MetadataProblem):
            return AuthProblem(
                str(exc),
                f'the server\'s OAuth setup is broken; ask its operator, or use a token in "headers" ({hint})',
            )
        if self._refusal is not None:
            return AuthProblem(
                f"the login of '{sid}' expired and the authorization server refused to refresh it"
                f" ({self._refusal}); log in again: {command}",
                hint,
            )
        if self.context.current_tokens is None and not isinstance(exc, _NeedsPerson | type(None)):
            return AuthProblem(f"OAuth for '{sid}' failed ({exc}); log in again: {command}", hint)
        if self.context.current_tokens is None or (
            exc is None and not self.context.can_refresh_token()
        ):
            return AuthProblem(f"'{sid}' needs an OAuth login (HTTP 401); log in: {command}", hint)
        return AuthProblem(
            f"'{sid}' rejected its OAuth token and it could not be renewed without you; log in again: {command}",
            hint,
        )

    def take_rejection(self) -> int | None:
        status, self._rejected = self._rejected, None
        return status

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
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

    return isinstance(
        exc,
        _NeedsPerson
        | MetadataProblem
        | OAuthFlowError
        | TokenStoreError
        | ValidationError
        | ValueError,
    )


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

    return {
        "interactive": Interactive,
        "client_credentials": ClientCredentials,
        "private_key_jwt": PrivateKeyJWT,
    }


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


def build_provider(
    config: ServerConfig,
    storage: Storage,
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
                    issuer=oauth.client_id,
                    subject=oauth.client_id,
                    signing_key=_private_key(config),
                    signing_algorithm=oauth.signing_algorithm,
                ).create_assertion_provider()
                provider = classes["private_key_jwt"](
                    url,
                    storage,
                    oauth.client_id,
                    assertion,
                    scope=oauth.scope,
                    issuer=issuer,
                )
            else:
                assert oauth.client_secret is not None
                method = oauth.token_endpoint_auth_method
                provider = classes["client_credentials"](
                    url,
                    storage,
                    oauth.client_id,
                    oauth.client_secret,
                    token_endpoint_auth_method=method
                    if method in ("client_secret_basic", "client_secret_post")
                    else "client_secret_basic",
                    scope=oauth.scope,
                    issuer=issuer,
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
        # one of mcp_json.py's _OAUTH_AUTH_METHODS, all of which the SDK knows
        token_endpoint_auth_method=cast(
            Any, oauth.token_endpoint_auth_method if oauth is not None else None
        ),
    )
    fixed = None
    if oauth is not None and oauth.client_id:
        method = oauth.token_endpoint_auth_method or (
            "client_secret_basic" if oauth.client_secret else "none"
        )
        fixed = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            redirect_uris=[AnyUrl(redirect)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method=method,
            scope=oauth.scope,
        )
    provider = classes["interactive"](
        url,
        metadata,
        storage,
        redirect_handler=redirect_handler if interactive else no_person,
        callback_handler=callback_handler if interactive else no_callback,
        client_metadata_url=oauth.client_metadata_url if oauth is not None else None,
    )
    provider._setup(config, storage, interactive=interactive, fixed_client=fixed)
    return provider


def _stored_redirect(storage: Storage) -> str | None:
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
    return build_provider(config, Storage(store, key, record, config), interactive=False)
