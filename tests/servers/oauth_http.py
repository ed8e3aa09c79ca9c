"""Test MCP server protected by OAuth 2.1, built with the `mcp` SDK's server auth (Streamable HTTP).

`python oauth_http.py http|sse [--port N] [options]`. The same process is the resource server
(`/mcp`, or legacy SSE at `/sse` + `/messages/`; protected-resource metadata) and its authorization server (the SDK's routes: metadata,
`/authorize`, `/token`, dynamic `/register`, `/revoke`; PKCE and refresh tokens), with an
in-memory provider that approves every authorization at once (no login page: a test follows
the authorization URL with an HTTP client). Options:

  --token-ttl S        access tokens live S seconds (short-lived tokens for refresh tests)
  --client ID:SECRET[:PORT]   a pre-registered confidential client (client_credentials, and
                       authorization_code with the redirect http://127.0.0.1:PORT/callback;
                       repeatable)
  --jwt-client ID --jwt-key FILE   a client authenticating with a private-key JWT (RFC 7523),
                       FILE being its PEM public key
  --metadata MODE      ok (default) | missing (a plain Bearer 401, no metadata, no AS routes) |
                       malformed (both metadata documents are broken)
  --issuer URL         the authorization server is elsewhere (no AS routes here): a dead URL
                       makes "the authorization server is down"
  --scopes "A B"       scopes the tokens need (default "mcp:read")
  --cimd               client ID metadata documents: an https:// client id is a client (any
                       loopback redirect port), advertised in the metadata

Test-only endpoints (loopback only, no auth): `POST /test/expire` (every access token expires
now: the server's word, not the client's clock), `POST /test/revoke` (every refresh token
revoked and every access token expired), `GET /test/state` (every secret issued so far, for
secret scans, and counts of grants, registrations and revocations).

Tools: `whoami` (the token's client id and scopes, never the token), `rendezvous` (true when
two calls are in progress at once: concurrency through one OAuth session) and `echo`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import secrets
import time
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, unquote

import mcp_types as types
from _asgi import bind, serve_asgi
from _cli import parse_args
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    ProviderTokenVerifier,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

_WAITING = [0]  # `rendezvous` calls in progress
SUBJECT = "demo-user"  # the resource owner every authorization is for
CODE_TTL = 300  # seconds an authorization code stays valid


class LoopbackClient(OAuthClientInformationFull):
    """A client known by its metadata document URL (CIMD): any loopback redirect port is its
    own (RFC 8252 §7.3). The document itself is not fetched here (no https in tests)."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if (
            redirect_uri is not None
            and redirect_uri.scheme == "http"
            and redirect_uri.host == "127.0.0.1"
        ):
            return redirect_uri
        return super().validate_redirect_uri(redirect_uri)


class Provider:
    """In-memory OAuthAuthorizationServerProvider: auto-approve, rotating refresh tokens."""

    def __init__(self, ttl: int) -> None:
        self.ttl = ttl
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.pairs: dict[str, str] = {}  # refresh token -> its access token
        self.issued: list[str] = []  # every secret handed out
        self.stats: Counter[str] = Counter()
        self.cimd: list[str] = []  # scopes of clients known by a metadata document URL; [] = off

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if client_id.startswith("https://") and self.cimd and client_id not in self.clients:
            self.clients[client_id] = LoopbackClient(
                client_id=client_id,
                redirect_uris=None,
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"],
                scope=" ".join(self.cimd),
            )
            self.stats["cimd"] += 1
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info
        if client_info.client_secret:
            self.issued.append(client_info.client_secret)
        self.stats["register"] += 1

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(32)
        self.issued.append(code)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or (client.scope or "").split(),
            expires_at=time.time() + CODE_TTL,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=SUBJECT,
        )
        self.stats["authorize"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    def issue(
        self, client_id: str, scopes: list[str], resource: str | None, *, refresh: bool = True
    ) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.ttl,
            resource=resource,
            subject=SUBJECT,
        )
        self.issued.append(access)
        refresh_token = None
        if refresh:
            refresh_token = secrets.token_urlsafe(32)
            self.refresh[refresh_token] = RefreshToken(
                token=refresh_token,
                client_id=client_id,
                scopes=scopes,
                resource=resource,
                subject=SUBJECT,
            )
            self.pairs[refresh_token] = access
            self.issued.append(refresh_token)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.ttl,
            scope=" ".join(scopes),
            refresh_token=refresh_token,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.stats["grant:authorization_code"] += 1
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # rotation: the old one is spent
        self.access.pop(self.pairs.pop(refresh_token.token, ""), None)
        self.stats["grant:refresh_token"] += 1
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.stats["revoke"] += 1
        if isinstance(token, RefreshToken):
            self.refresh.pop(token.token, None)
            self.access.pop(self.pairs.pop(token.token, ""), None)
        else:
            self.access.pop(token.token, None)
            for refresh, access in list(self.pairs.items()):
                if access == token.token:
                    self.refresh.pop(refresh, None)
                    self.pairs.pop(refresh, None)

    async def exchange_identity_assertion(
        self, client: Any, params: Any
    ) -> OAuthToken:  # pragma: no cover
        raise NotImplementedError


TOOLS = [
    types.Tool(
        name="whoami",
        description="Who the server thinks you are (from your OAuth token; never the token itself).",
        input_schema={"type": "object", "properties": {}},
        output_schema={
            "type": "object",
            "properties": {
                "client": {"type": "string"},
                "subject": {"type": "string"},
                "scopes": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["client", "scopes"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="rendezvous",
        description="Waits (up to `seconds`) until another call of it is in progress too; says whether one was.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
        output_schema={
            "type": "object",
            "properties": {"met": {"type": "boolean"}},
            "required": ["met"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name="echo",
        description="Echo a message back.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
]


def build_server() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "whoami":
            token = get_access_token()
            value = {
                "client": token.client_id if token else "",
                "subject": (token.subject or "") if token else "",
                "scopes": list(token.scopes) if token else [],
            }
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(value))],
                structured_content=value,
            )
        if params.name == "rendezvous":
            _WAITING[0] += 1
            try:
                deadline = time.monotonic() + float(args.get("seconds", 10))
                while _WAITING[0] < 2 and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                met = {"met": _WAITING[0] >= 2}
                await asyncio.sleep(0.2)  # the other caller sees this one too
            finally:
                _WAITING[0] -= 1
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(met))],
                structured_content=met,
            )
        if params.name == "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(args.get("message")))]
            )
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")

    return Server("oauth-http", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _json(status: int, value: Any) -> list[dict[str, Any]]:
    body = json.dumps(value).encode()
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


def with_client_credentials(
    app: Any, provider: Provider, issuer: str, jwt_clients: dict[str, str]
) -> Any:
    """POST /token with grant_type=client_credentials (which the SDK's token handler does not
    serve): client_secret_basic / client_secret_post, or a private-key JWT (RFC 7523 §2.2)."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            sent = [False]

            async def replay() -> dict[str, Any]:
                if not sent[0]:
                    sent[0] = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await app(scope, replay, send)
            return
        client_id, secret = form.get("client_id"), form.get("client_secret")
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        if header.lower().startswith("basic "):
            decoded = base64.b64decode(header[6:]).decode()
            client_id, _, secret = decoded.partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
        ok = False
        if form.get("client_assertion"):
            import jwt

            try:
                claims = jwt.decode(
                    form["client_assertion"],
                    options={"verify_aud": False},
                    key=jwt_clients.get(
                        jwt.decode(
                            form["client_assertion"], options={"verify_signature": False}
                        ).get("iss", ""),
                        "",
                    ),
                    algorithms=["RS256", "ES256"],
                )
                ok = (
                    claims.get("aud", "").rstrip("/") == issuer.rstrip("/")
                    and claims.get("iss") in jwt_clients
                )
                client_id = claims.get("iss")
            except jwt.PyJWTError:
                ok = False
        else:
            client = provider.clients.get(client_id or "")
            ok = (
                client is not None
                and client.client_secret is not None
                and secrets.compare_digest(client.client_secret, secret or "")
            )
        if not ok or client_id is None:
            for part in _json(
                401,
                {"error": "invalid_client", "error_description": "client authentication failed"},
            ):
                await send(part)
            return
        provider.stats["grant:client_credentials"] += 1
        scopes = (form.get("scope") or "").split() or ["mcp:read"]
        token = provider.issue(client_id, scopes, form.get("resource"), refresh=False)
        for part in _json(200, token.model_dump(mode="json", exclude_none=True)):
            await send(part)

    return guarded


def with_malformed_metadata(app: Any) -> Any:
    async def broken(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith("/.well-known/oauth-protected-resource"):
            for part in _json(200, {"resource": "not a url", "authorization_servers": []}):
                await send(part)
            return
        if path.startswith(
            ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration")
        ):
            for part in _json(200, {"issuer": 42}):
                await send(part)
            return
        await app(scope, receive, send)

    return broken


def with_cimd(app: Any, base: str, scopes: list[str]) -> Any:
    """Authorization server metadata that says client ID metadata documents are supported."""
    from mcp.server.auth.routes import build_metadata
    from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
    from pydantic import AnyHttpUrl

    metadata = build_metadata(
        AnyHttpUrl(base),
        None,
        ClientRegistrationOptions(enabled=True, valid_scopes=scopes),
        RevocationOptions(enabled=True),
    )
    metadata.client_id_metadata_document_supported = True
    document = metadata.model_dump(mode="json", exclude_none=True)
    document["issuer"] = base  # as the SDK's own metadata spells it (no trailing slash)

    async def advertised(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/.well-known/oauth-authorization-server":
            for part in _json(200, document):
                await send(part)
            return
        await app(scope, receive, send)

    return advertised


def test_routes(provider: Provider) -> list[Route]:
    async def expire(request: Request) -> Response:
        for token in provider.access.values():
            token.expires_at = int(time.time()) - 1
        return JSONResponse({"expired": len(provider.access)})

    async def revoke(request: Request) -> Response:
        count = len(provider.refresh)
        provider.refresh.clear()
        provider.pairs.clear()
        for token in provider.access.values():
            token.expires_at = int(time.time()) - 1
        return JSONResponse({"revoked": count})

    async def state(request: Request) -> Response:
        return JSONResponse({"issued": provider.issued, "stats": dict(provider.stats)})

    return [
        Route("/test/expire", expire, methods=["POST"]),
        Route("/test/revoke", revoke, methods=["POST"]),
        Route("/test/state", state, methods=["GET"]),
    ]


def sse_app(server: Server[Any], provider: Provider, settings: AuthSettings, base: str) -> Any:
    """Legacy HTTP+SSE behind the same authorization server: the SDK builds this only for its
    high-level server, so the parts (bearer middleware, auth and metadata routes) are put
    together here."""
    from _serve import lowlevel_sse_app
    from mcp.server import NotificationOptions
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from mcp.server.auth.routes import (
        build_resource_metadata_url,
        create_auth_routes,
        create_protected_resource_routes,
    )
    from pydantic import AnyHttpUrl
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Mount

    resource = AnyHttpUrl(f"{base}/sse")
    scopes = settings.required_scopes or []
    protected = RequireAuthMiddleware(
        lowlevel_sse_app(server, NotificationOptions()),
        scopes,
        build_resource_metadata_url(resource),
    )
    routes: list[Any] = [
        *create_auth_routes(
            provider,
            settings.issuer_url,
            client_registration_options=settings.client_registration_options,
            revocation_options=settings.revocation_options,
        ),
        *create_protected_resource_routes(resource, [settings.issuer_url], scopes_supported=scopes),
        *test_routes(provider),
        Mount("/", app=protected),
    ]
    middleware = [
        Middleware(
            AuthenticationMiddleware, backend=BearerAuthBackend(ProviderTokenVerifier(provider))
        ),
        Middleware(AuthContextMiddleware),
    ]
    return Starlette(routes=routes, middleware=middleware)


def main() -> None:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--token-ttl", type=int, default=3600)
        parser.add_argument("--client", action="append", default=[], metavar="ID:SECRET")
        parser.add_argument("--jwt-client", default=None)
        parser.add_argument("--jwt-key", default=None)
        parser.add_argument("--metadata", choices=("ok", "missing", "malformed"), default="ok")
        parser.add_argument("--issuer", default=None)
        parser.add_argument("--scopes", default="mcp:read")
        parser.add_argument(
            "--cimd", action="store_true", help="support client ID metadata documents"
        )

    args = parse_args(transports=("http", "sse"), default="http", extra=options)
    sock = bind(args.host, args.port)
    base = f"http://{args.host}:{sock.getsockname()[1]}"
    scopes = args.scopes.split()
    provider = Provider(args.token_ttl)
    for spec in args.client:
        client_id, secret, *port = spec.split(":")
        redirect = [AnyUrl(f"http://127.0.0.1:{port[0]}/callback")] if port else None
        provider.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=secret,
            redirect_uris=redirect,
            scope=" ".join(scopes),
            grant_types=["client_credentials", "authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic",
        )
    jwt_clients: dict[str, str] = {}
    if args.jwt_client and args.jwt_key:
        with open(args.jwt_key, encoding="utf-8") as fh:
            jwt_clients[args.jwt_client] = fh.read()
    server = build_server()
    verifier = ProviderTokenVerifier(provider)
    if args.metadata == "missing":
        settings = AuthSettings(issuer_url=base, resource_server_url=None, required_scopes=scopes)  # type: ignore[arg-type]
        app: Any = server.streamable_http_app(
            host=args.host,
            auth=settings,
            token_verifier=verifier,
            custom_starlette_routes=test_routes(provider),
        )
    elif args.transport == "sse":
        settings = AuthSettings(
            issuer_url=base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/sse",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=scopes, default_scopes=scopes
            ),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=scopes,
            validate_token_resource=False,
        )
        app = sse_app(server, provider, settings, base)
    else:
        settings = AuthSettings(
            issuer_url=args.issuer or base,  # type: ignore[arg-type]
            resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=scopes, default_scopes=scopes
            ),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=scopes,
            validate_token_resource=True,
        )
        app = server.streamable_http_app(
            host=args.host,
            auth=settings,
            token_verifier=verifier,
            auth_server_provider=None if args.issuer else provider,
            custom_starlette_routes=test_routes(provider),
        )
        app = with_client_credentials(app, provider, base, jwt_clients)
        if args.cimd:
            provider.cimd = scopes
            app = with_cimd(app, base, scopes)
        if args.metadata == "malformed":
            app = with_malformed_metadata(app)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_asgi(app, args.host, 0, sock=sock))


if __name__ == "__main__":
    main()
