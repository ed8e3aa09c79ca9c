"""Admission of runs: a bounded number run at once, the rest wait in a bounded queue that serves
clients in turn.

serve --http admits a `codemode.run` request here before anything of it is parsed or prepared
(runtime/frontends/serve_http.py), so a waiting run holds only its request body. Runs in progress are
bounded by the sandbox's worker cap (`slots`); the queue by `max_queued` runs in all and
`max_queued_per_client` per client, so one client can fill neither the memory nor the whole
queue. When a slot frees, the next run comes from the waiting client served least recently
(ties: the one waiting longest), so one client's backlog of long runs cannot starve another
client's trivial run: that run waits for at most one run of each other client ahead of it.

What a "client" is belongs to the caller (serve --http: the remote address; docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import time
from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["TICKET_SCOPE_KEY", "Admission", "QueueFull", "Ticket"]

#: Where serve --http leaves a run's `Ticket` in the request's ASGI scope for the tool handler.
TICKET_SCOPE_KEY = "codemode.ticket"


@dataclass(frozen=True)
class Ticket:
    """How a run got through admission: since when its timeoutMs counts (`time.monotonic()`
    seconds: it arrived, then waited), and whether its deadline passed while it waited (it is
    then answered at once, as a run that found no worker: `slots` ran all along)."""

    queued_at: float
    timeout_ms: int
    slots: int
    expired: bool = False


class QueueFull(Exception):
    """The run cannot even wait: the queue (in all, or this client's share) is full."""

    def __init__(self, message: str, *, per_client: bool) -> None:
        super().__init__(message)
        self.message = message
        self.per_client = per_client


@dataclass
class _Client:
    waiters: collections.deque[asyncio.Future[None]] = field(default_factory=collections.deque)
    running: int = 0
    last_served: int = -1  # the admission counter when it last got a slot (-1: never)


class Admission:
    """`slots` runs at once; `acquire` waits for one (client by client in turn), `release` frees it."""

    def __init__(self, slots: int, *, max_queued: int, max_queued_per_client: int) -> None:
        self.slots = max(1, slots)
        self.max_queued = max(0, max_queued)
        self.max_queued_per_client = max(0, min(max_queued_per_client, self.max_queued))
        self._running = 0
        self._queued = 0
        self._clients: dict[Hashable, _Client] = {}
        self._served = itertools.count()
        self._arrival = itertools.count()
        self._arrived: dict[asyncio.Future[None], int] = {}

    def resize(self, slots: int) -> None:
        """Change the number of slots (serve learns the worker cap once its host is loaded)."""
        self.slots = max(1, slots)
        self._hand_over()

    @property
    def running(self) -> int:
        return self._running

    @property
    def queued(self) -> int:
        return self._queued

    async def acquire(self, client: Hashable, deadline: float | None = None) -> bool:
        """Wait for a slot: True once the run holds one (`release` it), False when `deadline`
        (`time.monotonic()` seconds) came first. Raises QueueFull at once when it cannot wait."""
        record = self._clients.setdefault(client, _Client())
        if self._running < self.slots and self._queued == 0:
            self._grant(record)
            return True
        if self._queued >= self.max_queued:
            self._forget(client, record)
            raise QueueFull(
                f"{self._queued} runs are already waiting (at most {self.max_queued})",
                per_client=False,
            )
        if len(record.waiters) >= self.max_queued_per_client:
            self._forget(client, record)
            raise QueueFull(
                f"this client has {len(record.waiters)} runs waiting already (at most "
                f"{self.max_queued_per_client} per client)",
                per_client=True,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        record.waiters.append(waiter)
        self._arrived[waiter] = next(self._arrival)
        self._queued += 1
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            async with asyncio.timeout(timeout):
                await waiter
            return True
        except TimeoutError:
            # granted just as the deadline came: the run goes ahead
            return self._leave(client, record, waiter)
        except asyncio.CancelledError:
            if self._leave(client, record, waiter):
                self.release(client)
            raise

    def release(self, client: Hashable) -> None:
        """A run admitted for `client` ended: its slot goes to the next client in turn."""
        record = self._clients.get(client)
        if record is not None:
            record.running -= 1
            self._forget(client, record)
        self._running -= 1
        self._hand_over()

    # ------------------------------------------------------------------ internals

    def _grant(self, record: _Client) -> None:
        self._running += 1
        record.running += 1
        record.last_served = next(self._served)

    def _hand_over(self) -> None:
        while self._running < self.slots and self._queued:
            waiting = [
                (c.last_served, self._arrived[c.waiters[0]], key)
                for key, c in self._clients.items()
                if c.waiters
            ]
            if not waiting:
                return
            _, _, key = min(waiting, key=lambda w: (w[0], w[1]))
            record = self._clients[key]
            waiter = record.waiters.popleft()
            self._arrived.pop(waiter, None)
            self._queued -= 1
            if waiter.done():  # cancelled between its wake-up and now: `_leave` finds it gone
                continue
            self._grant(record)
            waiter.set_result(None)

    def _leave(self, client: Hashable, record: _Client, waiter: asyncio.Future[None]) -> bool:
        """A waiter gives up; True when it had been granted a slot already (the caller owns it)."""
        if waiter in record.waiters:
            record.waiters.remove(waiter)
            self._arrived.pop(waiter, None)
            self._queued -= 1
            self._forget(client, record)
            return False
        granted = waiter.done() and not waiter.cancelled()
        with contextlib.suppress(asyncio.InvalidStateError):
            waiter.cancel()
        return granted

    def _forget(self, client: Hashable, record: _Client) -> None:
        """Drop a client with nothing running or waiting: the table stays as small as the queue.
        (Its turn is forgotten with it: next time it counts as never served, which is fair, as
        it had nothing in progress.)"""
        if not record.running and not record.waiters:
            self._clients.pop(client, None)
