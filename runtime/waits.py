"""The sandbox side's one telemetry seam: how long a run waited for a sandbox worker.

A run's wait for a worker (queued behind max_workers runs, or a cold start) belongs in its
telemetry: the queue-wait histogram and, when long enough, a `codemode.queue` span
(docs/observability.md). The sandbox pool (runtime/sandbox/pool.py) times that wait but must
not import the host (the runtime's edges, tests/runtime/sandbox/test_engine.py), so the contract lives here: the
host's run scope (runtime/host/telemetry.py `RunScope`) is the current `WaitObserver` for the
duration of a run, and `queue_wait` tells the observer current where the wait began. Outside a
run there is none and the wait costs a clock read.
"""

from __future__ import annotations

import contextvars
import time
from typing import Protocol

__all__ = ["OBSERVER", "WaitObserver", "queue_wait"]


class WaitObserver(Protocol):
    def queue_waited(self, queue: str, began: float, waited: float) -> None:
        """`waited` seconds spent in `queue` from `began` (a `time.monotonic()` instant)."""


#: The observer of the run the current task belongs to; the host sets it for a run's duration.
OBSERVER: contextvars.ContextVar[WaitObserver | None] = contextvars.ContextVar(
    "codemode_wait_observer", default=None
)


class queue_wait:  # lower case: used as a function, `with queue_wait("worker"):`
    """Time spent waiting in `queue` (a sandbox worker), told to the current run's observer.
    (A class, not a generator: it is on every run's path.)"""

    __slots__ = ("began", "observer", "queue")

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.observer = OBSERVER.get()
        self.began = 0.0

    def __enter__(self) -> None:
        self.began = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        observer = self.observer
        if observer is not None:
            observer.queue_waited(self.queue, self.began, time.monotonic() - self.began)
