"""Garbage collection that cannot stall a host's event loop in the middle of a large payload.

CPython's cyclic collector runs in whichever thread happens to allocate, holding the GIL, and a
full collection walks every live container. While a 12 MB tool result is alive (about a million
dicts and lists, from the frame's parse to the reply to the worker) one takes 0.2-0.4 s, and the
event loop that serves every client and every run's watchdog waits that long: it was most of
the loop lag left once payload work moved off the loop (bench/loop_lag.py compares both
policies side by side). JSON payloads hold no reference cycles (reference counting frees them),
so a long-running host can do without automatic full collections:

- `install()` freezes what start-up allocated (modules, classes, the SDK's models: `gc.freeze`,
  never collected, never walked again) and keeps the automatic collector to the young
  generations (cheap: at most a few thousand objects each) by setting the full collection's
  threshold out of reach;
- `collect_periodically()` runs the full collections itself, every FULL_COLLECT_EVERY_S, put off
  while runs are in progress (their payloads alive) for up to FULL_COLLECT_MAX_DEFER_S: cyclic
  garbage (asyncio's exception tracebacks, mostly) is still freed, at moments the host chooses.

Only processes codemode-gen owns install it (`serve`, `run`); the Python API leaves the
embedding application's collector alone.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

__all__ = ["FULL_COLLECT_EVERY_S", "collect_periodically", "install", "installed", "uninstall"]

#: The automatic collector's thresholds for generations 0 and 1 (CPython's defaults: a young
#: collection every 700 net allocations, a generation-1 collection every tenth of those).
YOUNG_THRESHOLDS = (700, 10)
#: Generation-1 collections before an automatic full collection: out of reach, so a full
#: collection (which walks every live object, a large payload's included) never starts by itself
#: in the middle of a run.
NO_AUTOMATIC_FULL = 1_000_000_000
#: How often the host collects everything itself: bounds how long cyclic garbage is kept.
FULL_COLLECT_EVERY_S = 30.0
#: How long a due full collection waits for the runs in progress to end (their payloads freed)
#: before it runs anyway: bounds the garbage a host that is never idle keeps.
FULL_COLLECT_MAX_DEFER_S = 300.0
#: How often a deferred collection looks again whether the runs ended.
DEFER_POLL_S = 0.5

_saved: tuple[int, int, int] | None = None


def install() -> None:
    """Freeze start-up's objects and leave full collections to `collect_periodically`;
    idempotent. Call it once start-up (imports, the sandbox's pool) is done."""
    global _saved
    if _saved is not None:
        return
    _saved = gc.get_threshold()
    gc.collect()  # what start-up left as garbage is freed, not frozen
    gc.freeze()
    gc.set_threshold(*YOUNG_THRESHOLDS, NO_AUTOMATIC_FULL)


def installed() -> bool:
    return _saved is not None


def uninstall() -> None:
    """Back to CPython's own policy (tests; a host that ends)."""
    global _saved
    if _saved is None:
        return
    gc.set_threshold(*_saved)
    gc.unfreeze()
    _saved = None


async def collect_periodically(
    busy: Callable[[], bool],
    every_s: float = FULL_COLLECT_EVERY_S,
    max_defer_s: float = FULL_COLLECT_MAX_DEFER_S,
) -> None:
    """Run a full collection every `every_s`, each put off while `busy()` (runs in progress) for
    at most `max_defer_s`. Runs until cancelled."""
    while True:
        await asyncio.sleep(every_s)
        due = time.monotonic()
        while busy() and time.monotonic() - due < max_defer_s:
            await asyncio.sleep(DEFER_POLL_S)
        gc.collect()
