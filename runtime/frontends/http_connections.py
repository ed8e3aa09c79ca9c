"""serve --http's connections: a cap on how many are open, and a deadline for each request's head.

uvicorn closes a connection only after its keep-alive time once a response is done; one that
never completes a request (opened and left idle, or sending its header a byte at a time:
slowloris) stays open, and every open connection holds a file descriptor. Enough of them and
the process cannot accept another (EMFILE): /healthz stops answering. So:

- a request's head (request line and headers) must arrive within HEADER_TIMEOUT_S of the
  connection opening or of the first byte of a later request on it, else the connection closes;
- at most `max_connections` are open (by default half the file descriptors the process may
  open, at most DEFAULT_MAX_CONNECTIONS). A connection beyond that closes the one idle longest
  (waiting for a request head or between requests); when every one is busy with a request, the
  newcomer is answered `503` with `Retry-After` and closed.

The protocol is uvicorn's own h11 one, subclassed; uvicorn is imported when `connection_protocol`
is called (serve_http imports nothing heavy before its checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
from collections import OrderedDict
from typing import Any

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "HEADER_TIMEOUT_S",
    "ConnectionLimits",
    "connection_protocol",
    "default_max_connections",
]

#: Bounds how long a client may take to send a request's head (from connecting, or from the
#: first byte of a later request on the connection): slowloris and never-used connections.
HEADER_TIMEOUT_S = 10.0
#: The most connections open at once when the operator sets none (each holds a file descriptor
#: and a little memory; a proxy in front keeps a few dozen open).
DEFAULT_MAX_CONNECTIONS = 1024
#: The fewest connections a default cap allows, however few descriptors the process may open.
MIN_MAX_CONNECTIONS = 16
#: How often a "connection cap reached" line may go to stderr (a flood must not flood the log).
CAP_LOG_INTERVAL_S = 60.0
#: What a client that cannot get a connection is told to wait before trying again.
RETRY_AFTER_S = 5


def default_max_connections() -> int:
    """Half the file descriptors this process may open (the other half for sandbox workers,
    upstream servers, helpers and the connection being refused), at most DEFAULT_MAX_CONNECTIONS."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return DEFAULT_MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return DEFAULT_MAX_CONNECTIONS
    return max(MIN_MAX_CONNECTIONS, min(DEFAULT_MAX_CONNECTIONS, soft // 2))


class ConnectionLimits:
    """The open connections of one server, idle ones in the order they became idle."""

    def __init__(
        self, max_connections: int, header_timeout_s: float = HEADER_TIMEOUT_S, log: Any = None
    ) -> None:
        self.max_connections = max(1, max_connections)
        self.header_timeout_s = header_timeout_s
        self.open: set[Any] = set()
        self.idle: OrderedDict[Any, None] = OrderedDict()
        self.evicted = 0  # idle connections closed to make room (for tests and the log)
        self.refused = 0  # connections answered 503 because every one was busy
        self.timed_out = 0  # connections closed for a request head that did not arrive in time
        self._log = log
        self._last_log = -CAP_LOG_INTERVAL_S

    def admit(self, conn: Any) -> bool:
        """A new connection (already counted idle): False when it must be refused."""
        self.open.add(conn)
        self.idle[conn] = None
        while len(self.open) > self.max_connections:
            oldest = next((c for c in self.idle if c is not conn), None)
            if oldest is None:
                self.gone(conn)
                self.refused += 1
                self._say(
                    f"refused a connection: all {self.max_connections} connections are busy with "
                    "requests (serve --max-connections raises the cap)"
                )
                return False
            self.evicted += 1
            self._say(
                f"{self.max_connections} connections open: closing the ones idle longest "
                "(serve --max-connections raises the cap)"
            )
            oldest.close_idle()
        return True

    def busy(self, conn: Any) -> None:
        self.idle.pop(conn, None)

    def rest(self, conn: Any) -> None:
        if conn in self.open:
            self.idle.pop(conn, None)
            self.idle[conn] = None

    def gone(self, conn: Any) -> None:
        self.open.discard(conn)
        self.idle.pop(conn, None)

    def _say(self, text: str) -> None:
        now = time.monotonic()
        if self._log is not None and now - self._last_log >= CAP_LOG_INTERVAL_S:
            self._last_log = now
            self._log(text)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": "too_many_connections",
            "error_description": "the server has too many connections open, each busy with a request; retry later",
        }
    ).encode("utf-8")
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"retry-after: %d\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
        % (RETRY_AFTER_S, len(body), body)
    )


def connection_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with `limits`' cap and request-head deadline."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if not limits.admit(self):
                self._refused = True
                transport.write(_refusal())
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if not self._in_request() and self._head_timer is None:
                self._arm()  # the first byte of another request on a kept-alive connection
            super().data_received(data)
            self._settle()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._settle()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            limits.gone(self)
            super().connection_lost(exc)

        # -- state

        def _in_request(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _settle(self) -> None:
            if self._in_request():
                self._disarm()
                limits.busy(self)
            else:
                limits.rest(self)

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if not self._in_request():
                limits.timed_out += 1
                self.close_idle()

        def close_idle(self) -> None:
            """Close this connection, which is between requests (no response is cut short)."""
            self._disarm()
            limits.gone(self)
            if not self.transport.is_closing():
                with contextlib.suppress(h11.LocalProtocolError):
                    self.conn.send(h11.ConnectionClosed())
                self.transport.close()

    return BoundedH11Protocol
