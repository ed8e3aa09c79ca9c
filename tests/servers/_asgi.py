"""Serving an ASGI app for the test servers: bind the socket ourselves, announce readiness.

Kept free of the MCP SDK so raw servers (`_rawrpc.py`) start fast over HTTP too.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import uvicorn
from starlette.types import ASGIApp


class _AnnouncingServer(uvicorn.Server):
    """Prints the one readiness line tests wait for, after the socket really accepts."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"listening on http://{shown}:{port}", file=sys.stderr, flush=True)


ORPHAN_CHECK_SECONDS = 1.0  # how quickly a server whose test process died notices and exits


async def _exit_when_orphaned(server: uvicorn.Server, parent: int) -> None:
    """A killed test run must not leave HTTP servers behind: stop once we are re-parented."""
    while not server.should_exit:
        if os.getppid() != parent:
            server.should_exit = True
            return
        await asyncio.sleep(ORPHAN_CHECK_SECONDS)


def bind(host: str, port: int) -> socket.socket:
    """A listening-to-be socket on host:port (`0`: a free port), for servers that must know their
    own URL before building the app (OAuth metadata names it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


async def serve_asgi(
    app: ASGIApp, host: str, port: int, *, sock: socket.socket | None = None
) -> None:
    """Serve on a socket bound here (or `sock`, bound by `bind`), so `--port 0` can report the
    port the OS picked."""
    if sock is None:
        sock = bind(host, port)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", interface="asgi3"
    )
    server = _AnnouncingServer(config)
    watchdog = asyncio.create_task(_exit_when_orphaned(server, os.getppid()))
    try:
        await server.serve(sockets=[sock])
    finally:
        watchdog.cancel()
