"""Command line shared by the purpose-built test servers in this folder.

Every server here is started as `python <file> [stdio|http|sse] [--port N] [--host 127.0.0.1]`
(stdio by default). With http/sse it prints exactly one line, `listening on
http://127.0.0.1:<port>`, to stderr once the socket accepts connections, so tests can start it
with `--port 0` and read the port it picked. Streamable HTTP is served at /mcp, legacy SSE at
/sse. Only loopback addresses are accepted: these servers have no authentication of their own.
`tools_page` pages a low-level server's tools/list (paginated.py, catalog_server.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import mcp_types as types
from _asgi import serve_asgi
from _cli import parse_args
from mcp import MCPError
from mcp.server import NotificationOptions, Server
from mcp.server.mcpserver import MCPServer
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_cursor(cursor: str, count: int) -> int:
    """The offset of a cursor `tools_page` issued, else a JSON-RPC error (-32602)."""
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["offset"]
    except (ValueError, KeyError, TypeError):
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
    if not isinstance(offset, int) or not 0 < offset < count:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
    return offset


def tools_page(
    tools: list[types.Tool], params: types.PaginatedRequestParams | None, page_size: int
) -> types.ListToolsResult:
    """The tools/list page `params.cursor` names (the first without one): `page_size` tools and,
    unless it is the last, an opaque cursor to the next."""
    count = len(tools)
    offset = decode_cursor(params.cursor, count) if params and params.cursor else 0
    end = offset + page_size
    return types.ListToolsResult(
        tools=tools[offset:end], next_cursor=encode_cursor(end) if end < count else None
    )


def loopback_security() -> TransportSecuritySettings:
    """DNS-rebinding protection as the SDK applies it to loopback servers."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def lowlevel_sse_app(server: Server[Any], options: NotificationOptions) -> Starlette:
    """Legacy HTTP+SSE for a low-level server: GET /sse streams, POST /messages/ carries requests."""
    transport = SseServerTransport("/messages/", security_settings=loopback_security())

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options(options))
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


def _run(main: Coroutine[Any, Any, None]) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main)


def run_lowlevel(
    server: Server[Any],
    argv: Sequence[str] | None = None,
    *,
    options: NotificationOptions | None = None,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
) -> None:
    """Run a low-level `Server` on the transport named on the command line."""
    args = parse_args(argv)
    opts = options or NotificationOptions()
    if args.transport == "stdio":

        async def stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options(opts))

        _run(stdio())
        return
    app: ASGIApp = (
        server.streamable_http_app(host=args.host)
        if args.transport == "http"
        else lowlevel_sse_app(server, opts)
    )
    _run(serve_asgi(wrap(app) if wrap else app, args.host, args.port))


def run_mcpserver(app: MCPServer, argv: Sequence[str] | None = None) -> None:
    """Run a high-level `MCPServer` on the transport named on the command line."""
    args = parse_args(argv)
    if args.transport == "stdio":
        _run(app.run_stdio_async())
    elif args.transport == "http":
        _run(serve_asgi(app.streamable_http_app(host=args.host), args.host, args.port))
    else:
        _run(serve_asgi(app.sse_app(host=args.host), args.host, args.port))
