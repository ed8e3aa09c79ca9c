"""runtime/waits.py: the sandbox pool's worker waits reach the current run's observer, and only it."""

from __future__ import annotations

import asyncio
import time

from codemode_gen.runtime import waits


class Observer:
    def __init__(self) -> None:
        self.told: list[tuple[str, float, float]] = []

    def queue_waited(self, queue: str, began: float, waited: float) -> None:
        self.told.append((queue, began, waited))


def test_a_wait_is_told_to_the_observer_current_where_it_began() -> None:
    observer = Observer()
    token = waits.OBSERVER.set(observer)
    try:
        before = time.monotonic()
        with waits.queue_wait("worker"):
            time.sleep(0.002)
    finally:
        waits.OBSERVER.reset(token)
    [(queue, began, waited)] = observer.told
    assert queue == "worker" and began >= before and waited >= 0.002


def test_outside_a_run_a_wait_tells_nobody() -> None:
    observer = Observer()
    waiting = waits.queue_wait("worker")  # made before the observer is current: not its wait
    token = waits.OBSERVER.set(observer)
    try:
        with waiting:
            pass
    finally:
        waits.OBSERVER.reset(token)
    assert observer.told == [] and waits.OBSERVER.get() is None


def test_concurrent_runs_each_see_their_own_waits() -> None:
    first, second = Observer(), Observer()

    async def run(observer: Observer, queue: str) -> None:
        waits.OBSERVER.set(observer)  # a task's own context: as the host's run scope sets it
        with waits.queue_wait(queue):
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(run(first, "a"), run(second, "b"))

    asyncio.run(both())
    assert [t[0] for t in first.told] == ["a"] and [t[0] for t in second.told] == ["b"]
