"""OAuth 2.1 for remote MCP servers (the MCP authorization spec): the map, and `auth status` / `auth logout`.

The OAuth support is four modules, one job each:

- client/oauth_records.py: whose a login is (`store_key`: server URL and client), the stored
  record (`Storage`, the SDK's `TokenStorage` over client/tokenstore.py) and the live secrets
  every redactor uses;
- client/oauth_provider.py: the session's httpx `Auth` (`session_auth`): the SDK's providers
  with refresh-on-401 and no browser outside `auth login`;
- client/oauth_login.py: the interactive `auth login` flow and its loopback redirect;
- this module: what `auth status` shows of a stored login (never a secret) and `auth logout`,
  which revokes where the authorization server offers it (RFC 7009) and forgets the login.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from codemode_gen.client.oauth_login import LoginError
from codemode_gen.client.oauth_records import (
    client_label,
    login_command,
    shown_url,
    static_authorization,
    store_key,
)
from codemode_gen.client.tokenstore import TokenStore, TokenStoreError, open_store
from codemode_gen.config import ServerConfig

__all__ = ["REVOKE_TIMEOUT", "LogoutResult", "ServerAuthStatus", "auth_status", "logout"]

# Bounds revocation at `auth logout` (per request): an authorization server that does not
# answer must not keep the tokens from being forgotten locally.
REVOKE_TIMEOUT = 15.0


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
    return (
        f"expires at {stamp} (in {minutes} min)"
        if minutes
        else f"expires at {stamp} (in {int(left)} s)"
    )


def auth_status(config: ServerConfig, store: TokenStore | None = None) -> ServerAuthStatus:
    """One server's login state for `auth status`: never a secret."""
    sid = config.id
    if config.transport == "stdio":
        return ServerAuthStatus(sid, "stdio server (no OAuth)")
    if static_authorization(config):
        return ServerAuthStatus(sid, 'static Authorization header (from "headers"; no login)')
    try:
        store = store if store is not None else open_store()
        key = store_key(config)
        record = store.load(key)
        where = store.describe(key)
    except TokenStoreError as exc:
        return ServerAuthStatus(
            sid, f"unusable login store: {exc.message}", [f"fix: {exc.hint}"], needs_login=True
        )
    headless = config.oauth is not None and config.oauth.grant_type == "client_credentials"
    label = client_label(config)
    if record is None or not isinstance(record.get("tokens"), dict):
        if headless:
            return ServerAuthStatus(
                sid, "client credentials: a token is fetched when needed", [label]
            )
        refused = record.get("refreshRefused") if record else None
        if refused:
            return ServerAuthStatus(
                sid,
                "login expired (refresh refused)",
                [f"refused: {refused}", f"run: {login_command(sid)}"],
                needs_login=True,
            )
        if config.oauth is None:
            return ServerAuthStatus(
                sid,
                "not logged in (no OAuth login stored)",
                [f"if it needs OAuth, run: {login_command(sid)}"],
            )
        return ServerAuthStatus(
            sid, "not logged in", [f"run: {login_command(sid)}"], needs_login=True
        )
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
    method = client.get("token_endpoint_auth_method") or (
        "client_secret_basic" if secret else "none"
    )
    wanted = [
        (hint, tokens.get(hint)) for hint in ("refresh_token", "access_token") if tokens.get(hint)
    ]
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
                    result.note = (
                        f"revocation at {shown_url(endpoint)} answered HTTP {response.status_code}:"
                        " the tokens were forgotten here anyway"
                    )
    try:
        await anyio.to_thread.run_sync(store.delete, key)
    except TokenStoreError as exc:
        raise LoginError(exc.message, hint=exc.hint) from None
    return result
