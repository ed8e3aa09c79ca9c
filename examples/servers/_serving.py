"""Command line and HTTP serving shared by the demo servers in this folder.

Every demo server is started as `python <file> [stdio|http|sse] [--port N] [--host 127.0.0.1]`
(stdio by default). With http/sse it prints exactly one line, `listening on
http://127.0.0.1:<port>`, to stderr once the socket accepts connections, so tests and users can
pass `--port 0` and read the port it picked. Only loopback hosts are accepted: the demos have no
authentication. The servers import this as `from _serving import run`, which works because a
script's own folder is the first entry of sys.path.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import uvicorn
from starlette.applications import Starlette

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # no auth: never listen beyond this machine

AppBuilder = Callable[[str], Starlette]  # host -> ASGI app (the host feeds DNS-rebinding checks)


class _AnnouncingServer(uvicorn.Server):
    """Prints the one readiness line tests wait for, after the socket really accepts."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            host, port = sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"listening on http://{shown}:{port}", file=sys.stderr, flush=True)


async def serve_http(app: Starlette, host: str, port: int) -> None:
    """Serve an ASGI app on a socket we bind ourselves, so `--port 0` can report the real port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    await _AnnouncingServer(config).serve(sockets=[sock])


def parse_args(
    argv: list[str] | None, default_port: int, description: str | None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--port", type=int, default=default_port, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK_HOSTS)
    return parser.parse_args(argv)


def run(
    *,
    stdio: Callable[[], Coroutine[Any, Any, None]],
    http: AppBuilder,
    sse: AppBuilder,
    default_port: int,
    doc: str | None,
    argv: list[str] | None = None,
) -> None:
    """Parse the command line and serve one transport until interrupted.

    Takes builders rather than a server object so that both SDK styles (MCPServer, which has its
    own apps, and the low-level Server, which needs them assembled) share one command line.
    `doc` is the server module's docstring; its first line is the --help description.
    """
    args = parse_args(argv, default_port, doc.splitlines()[0] if doc else None)
    try:
        if args.transport == "stdio":
            asyncio.run(stdio())
        else:
            builder = http if args.transport == "http" else sse
            asyncio.run(serve_http(builder(args.host), args.host, args.port))
    except KeyboardInterrupt:
        pass
