"""Test server behind bearer-token authentication, Streamable HTTP only.

`python auth_http.py [http] [--port N] [--token T]` (token also from env AUTH_TOKEN). Every
HTTP request without `Authorization: Bearer <token>` gets 401 with a `WWW-Authenticate`
header, before any MCP processing, as OAuth-protected servers answer. Tools: `whoami`
(structured: the last 4 characters of the caller's token, never the whole token), `echo`, and
`revoke`, which invalidates the token so that every later request of the session gets 401 (a
credential revoked or expired mid-session).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import os
import sys
from typing import Any

import mcp_types as types
from _asgi import serve_asgi
from _cli import parse_args
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

TOKEN_SUFFIX_CHARS = 4  # whoami reveals only this much of the secret


# The accepted Authorization header; `revoke` clears it (no header can match an empty value).
_ACCEPTED: dict[str, bytes] = {"header": b""}


def require_bearer(app: Any, token: str) -> Any:
    """ASGI middleware: 401 unless the exact bearer token is presented (constant-time compare)."""
    _ACCEPTED["header"] = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            expected = _ACCEPTED["header"]
            if not expected or not hmac.compare_digest(given, expected):
                reason = "missing bearer token" if not given else "invalid bearer token"
                body = json.dumps({"error": "invalid_token", "error_description": reason}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (
                                b"www-authenticate",
                                b'Bearer realm="auth_http", error="invalid_token"',
                            ),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


TOOLS = [
    types.Tool(
        name="whoami",
        description="Who the server thinks you are (from your bearer token).",
        input_schema={"type": "object", "properties": {}},
        output_schema={
            "type": "object",
            "properties": {"user": {"type": "string"}, "tokenSuffix": {"type": "string"}},
            "required": ["user", "tokenSuffix"],
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
    types.Tool(
        name="revoke",
        description="Revoke the server's token: every later request is answered 401.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(destructive_hint=True),
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
            header = ctx.request.headers.get("authorization", "") if ctx.request is not None else ""
            suffix = header[-TOKEN_SUFFIX_CHARS:] if header.startswith("Bearer ") else ""
            value = {"user": "demo", "tokenSuffix": suffix}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(value))],
                structured_content=value,
            )
        if params.name == "echo":
            message = args.get("message")
            if not isinstance(message, str):
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text="echo: message must be a string")],
                    is_error=True,
                )
            return types.CallToolResult(content=[types.TextContent(type="text", text=message)])
        if params.name == "revoke":
            _ACCEPTED["header"] = b""
            return types.CallToolResult(content=[types.TextContent(type="text", text="revoked")])
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")

    return Server("auth-http", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    def token_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--token", default=os.environ.get("AUTH_TOKEN"))

    args = parse_args(transports=("http",), default="http", extra=token_option)
    if not args.token:
        print("auth_http: give --token or set AUTH_TOKEN", file=sys.stderr)
        sys.exit(2)
    server = build_server()
    app = require_bearer(server.streamable_http_app(host=args.host), args.token)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_asgi(app, args.host, args.port))


if __name__ == "__main__":
    main()
