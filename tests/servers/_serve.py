"""Command line shared by the purpose-built test servers in this folder.

Every server here is started as `python <file> [stdio|http|sse] [--port N] [--host 127.0.0.1]`
(stdio by default). With http/sse it prints exactly one line, `listening on
http://127.0.0.1:<port>`, to stderr once the socket accepts connections, so tests can start it
with `--port 0` and read the port it picked. Streamable HTTP is served at /mcp, legacy SSE at
/sse. Only loopback addresses are accepted: these servers have no authentication of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from _asgi import serve_asgi
from _cli import parse_args
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
