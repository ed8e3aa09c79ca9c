"""Idle trimming shared by the host's two process pools (runtime/sandbox/pool.py's sandbox workers,
runtime/host/offload.py's payload helpers): a burst leaves processes idle, and those beyond the
pool's warm size are stopped once they have been idle for its TTL, the longest idle first, so
that the next burst finds them warm but a quiet host does not keep them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar


class Idler(Protocol):
    idle_since: float  # time.monotonic() when it last went idle


T = TypeVar("T", bound=Idler)


async def trim_idle(
    idle: list[T],
    keep: int,
    ttl_s: float,
    *,
    closed: Callable[[], bool],
    stop: Callable[[T], Awaitable[None]],
) -> None:
    """Stop (`stop`) the members of `idle` beyond `keep` once each has been idle `ttl_s`; returns
    when `idle` holds at most `keep` or the pool is `closed()`. A member taken from `idle`
    meanwhile (reused) is simply no longer a candidate."""
    while len(idle) > keep and not closed():
        oldest = min(member.idle_since for member in idle)
        await asyncio.sleep(max(0.0, oldest + ttl_s - time.monotonic()))
        now = time.monotonic()
        while len(idle) > keep:
            stale = min(idle, key=lambda member: member.idle_since)
            if now - stale.idle_since < ttl_s:
                break
            idle.remove(stale)
            await stop(stale)
