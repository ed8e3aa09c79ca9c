"""Whose an OAuth login is and what is kept of it: the store key, the stored record, live secrets.

A login is keyed by server URL and client (`store_key`), so projects using the same server share
one login. `Storage` is the SDK's `TokenStorage` over one record of client/tokenstore.py, with
what the SDK keeps only in memory: the absolute expiry and the discovered metadata (without
them a login from an earlier process would be sent expired and refreshed at a guessed token
endpoint). Every token and client secret seen is registered here (`live_secrets`), so the
fixtures, traces and printed lines of this process redact them like a configured credential
(generator/redact.py), however a server echoes them.

Separate from the provider (client/oauth_provider.py) because the redactor, `auth status` and
`auth logout` need these without the SDK's OAuth machinery.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.to_thread

from codemode_gen.client.tokenstore import RECORD_VERSION, TokenStore
from codemode_gen.config import ServerConfig

if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = [
    "Storage",
    "client_label",
    "live_secrets",
    "login_command",
    "new_record",
    "remember_record",
    "scrub",
    "secrets_generation",
    "shown_url",
    "static_authorization",
    "store_key",
]


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
    if oauth is None or (
        oauth.grant_type == "authorization_code"
        and not oauth.client_id
        and not oauth.client_metadata_url
    ):
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
    url = urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, "")
    )
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


def remember_record(key: str, record: Mapping[str, Any] | None) -> None:
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


def new_record(config: ServerConfig) -> dict[str, Any]:
    return {
        "version": RECORD_VERSION,
        "serverUrl": shown_url(config.url),
        "client": client_label(config),
    }


class Storage:
    """The SDK's `TokenStorage` over one store record, plus what the SDK does not persist."""

    def __init__(
        self,
        store: TokenStore,
        key: str,
        record: dict[str, Any] | None,
        config: ServerConfig,
        *,
        persist: bool = True,
    ) -> None:
        self.store = store
        self.key = key
        self.record = record if record is not None else new_record(config)
        self.persist = persist  # False while logging in: stored only once the login succeeded
        self.context: Any = None  # the provider's OAuthContext, set by the provider
        remember_record(key, self.record)

    async def reload(self) -> dict[str, Any]:
        if self.persist:
            found = await anyio.to_thread.run_sync(self.store.load, self.key)
            if found is not None:
                self.record = found
                remember_record(self.key, found)
        return self.record

    async def save(self) -> None:
        self.record["updatedAt"] = int(time.time())
        remember_record(self.key, self.record)
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
        self.record["expiresAt"] = (
            time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None
        )
        self.record.pop("refreshRefused", None)
        context = self.context
        if context is not None:
            for name, value in (
                ("oauthMetadata", context.oauth_metadata),
                ("resourceMetadata", context.protected_resource_metadata),
            ):
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
        if used_refresh_token is not None and stored.get("refresh_token") not in (
            None,
            used_refresh_token,
        ):
            return
        self.record.pop("tokens", None)
        self.record.pop("expiresAt", None)
        self.record["refreshRefused"] = refused
        await self.save()
