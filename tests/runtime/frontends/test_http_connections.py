"""runtime/frontends/http_connections.py: serve --http's connection cap and request-head deadline, on a real
uvicorn server over real sockets (127.0.0.1, a free port) with a small ASGI app; the whole of
serve --http is in test_serve_http_bounds.py."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode_gen.runtime.frontends.http_connections import ConnectionLimits, connection_protocol

pytestmark = pytest.mark.timeout(120)

# Generous bounds on a loaded machine: how long a test waits for a connection to be closed.
CLOSE_WAIT_S = 15.0


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(3600)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


@contextlib.asynccontextmanager
async def _serving(limits: ConnectionLimits) -> AsyncIterator[int]:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            _app,
            http=connection_protocol(limits),
            log_level="warning",
            lifespan="on",
            ws="none",
            timeout_keep_alive=60,
        )
    )
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = server.force_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


async def _get(port: int, path: str = "/") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        return await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)
    finally:
        writer.close()


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (EOF or reset) within CLOSE_WAIT_S."""
    try:
        data = await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return data == b"" or data.startswith(b"HTTP/1.1 503")


def test_idle_connections_beyond_the_cap_make_room_for_a_request() -> None:
    async def main() -> tuple[bytes, list[bool], int]:
        limits = ConnectionLimits(8)
        async with _serving(limits) as port:
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
            answer = await _get(port)
            # The oldest idle ones were closed to make room, the newest are still open.
            closed = [await _closed(reader) for reader, _ in idle[:5]]
            for _, writer in idle:
                writer.close()
            return answer, closed, len(limits.open)

    answer, closed, still_open = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
    assert all(closed)
    assert still_open <= 8


def test_when_every_connection_is_busy_a_newcomer_is_told_to_retry() -> None:
    async def main() -> tuple[bytes, int]:
        limits = ConnectionLimits(3)
        async with _serving(limits) as port:
            busy = []
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                await writer.drain()
                busy.append((reader, writer))
            while len(limits.idle) or len(limits.open) < 3:  # all three are in their request
                await asyncio.sleep(0.01)
            answer = await _get(port)
            for _, writer in busy:
                writer.close()
            return answer, limits.refused

    answer, refused = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 5" in answer.lower()
    assert b"too_many_connections" in answer and refused == 1


def test_a_request_head_that_does_not_arrive_in_time_closes_the_connection() -> None:
    async def main() -> tuple[bool, bool, bytes, int]:
        limits = ConnectionLimits(16, header_timeout_s=0.5)
        async with _serving(limits) as port:
            # slowloris: a byte now and then, never the end of the head
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")

            async def drip() -> None:
                with contextlib.suppress(ConnectionError):
                    for _ in range(100):
                        await asyncio.sleep(0.1)
                        writer.write(b"X")
                        await writer.drain()

            dripping = asyncio.ensure_future(drip())
            slowloris_closed = await _closed(reader)
            dripping.cancel()
            writer.close()
            # a connection that never sends anything
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            silent_closed = await _closed(silent_reader)
            silent_writer.close()
            # a client that sends its request at once is not affected
            answer = await _get(port)
            return slowloris_closed, silent_closed, answer, limits.timed_out

    slowloris_closed, silent_closed, answer, timed_out = asyncio.run(main())
    assert slowloris_closed and silent_closed and timed_out >= 2
    assert answer.startswith(b"HTTP/1.1 200")


def test_a_kept_alive_connection_gets_a_new_head_deadline_per_request() -> None:
    async def main() -> tuple[bytes, bytes]:
        limits = ConnectionLimits(16, header_timeout_s=0.5)
        async with _serving(limits) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = await reader.readuntil(b"ok")
            await asyncio.sleep(
                1.0
            )  # idle between requests: the keep-alive time applies, not the head's
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            second = await asyncio.wait_for(reader.read(), CLOSE_WAIT_S)
            writer.close()
            return first, second

    first, second = asyncio.run(main())
    assert first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 200")
