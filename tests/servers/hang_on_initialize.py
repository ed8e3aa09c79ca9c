"""Test server that accepts a connection but never answers `initialize`.

stdio: reads (and discards) stdin and never writes a byte to stdout, even after stdin closes,
so a client must time out and kill it. http/sse: listens, prints the readiness line, then
leaves every request hanging. Either way it gives up on its own after HANG_MAX_SECONDS, so a
client that forgets to kill it leaks a process for minutes, not forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time

from _asgi import serve_asgi
from _cli import parse_args
from starlette.types import Receive, Scope, Send

HANG_MAX_SECONDS = 300  # bounds the life of a process a buggy client forgot to kill


def drain_stdin() -> None:
    for _line in sys.stdin.buffer:
        pass  # read and ignore every request


async def hanging_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await asyncio.sleep(HANG_MAX_SECONDS)  # never answer


def main() -> None:
    args = parse_args()
    if args.transport == "stdio":
        threading.Thread(target=drain_stdin, daemon=True).start()
        time.sleep(HANG_MAX_SECONDS)
        return
    with contextlib.suppress(KeyboardInterrupt, TimeoutError):
        asyncio.run(
            asyncio.wait_for(serve_asgi(hanging_app, args.host, args.port), HANG_MAX_SECONDS)
        )


if __name__ == "__main__":
    main()
