"""runtime/frontends/admission.py: runs take slots client by client in turn, the queue is bounded in all and
per client, and a run that waits past its deadline leaves the queue (serve --http's queue; the
process-level tests are in test_serve_http_bounds.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from codemode_gen.runtime.frontends.admission import Admission, QueueFull


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_backlog_of_one_client_does_not_starve_another() -> None:
    async def main() -> list[str]:
        admission = Admission(1, max_queued=16, max_queued_per_client=8)
        order: list[str] = []
        release: dict[str, asyncio.Event] = {}

        async def run(client: str, name: str) -> None:
            assert await admission.acquire(client)
            order.append(name)
            release[name] = asyncio.Event()
            await release[name].wait()
            admission.release(client)

        tasks = [asyncio.ensure_future(run("A", f"A{i}")) for i in range(4)]
        await _settle()
        tasks.append(asyncio.ensure_future(run("B", "B0")))  # arrives while A0 runs, A1-A3 wait
        await _settle()
        tasks.append(asyncio.ensure_future(run("C", "C0")))
        await _settle()
        while len(order) < 6:
            release[order[-1]].set()
            await _settle()
        release[order[-1]].set()
        await asyncio.gather(*tasks)
        return order

    # A0 held the slot; then each waiting client in turn, least recently served first.
    assert asyncio.run(main()) == ["A0", "B0", "C0", "A1", "A2", "A3"]


def test_clients_alternate_when_both_have_backlogs() -> None:
    async def main() -> list[str]:
        admission = Admission(1, max_queued=16, max_queued_per_client=8)
        order: list[str] = []

        async def run(client: str, name: str) -> None:
            assert await admission.acquire(client)
            order.append(name)
            await asyncio.sleep(0)
            admission.release(client)

        await asyncio.gather(*[run(c, f"{c}{i}") for c in "AB" for i in range(3)])
        return order

    order = asyncio.run(main())
    assert [name[0] for name in order] == ["A", "B", "A", "B", "A", "B"]


def test_the_queue_is_bounded_in_all_and_per_client() -> None:
    async def main() -> tuple[QueueFull, QueueFull, int]:
        admission = Admission(1, max_queued=3, max_queued_per_client=2)
        assert await admission.acquire("A")  # runs
        waiting = [asyncio.ensure_future(admission.acquire("A")) for _ in range(2)]
        await _settle()
        with pytest.raises(QueueFull) as per_client:
            await admission.acquire("A")
        waiting.append(asyncio.ensure_future(admission.acquire("B")))
        await _settle()
        with pytest.raises(QueueFull) as in_all:
            await admission.acquire("C")
        queued = admission.queued
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        return per_client.value, in_all.value, queued

    per_client, in_all, queued = asyncio.run(main())
    assert per_client.per_client and "at most 2 per client" in per_client.message
    assert not in_all.per_client and "at most 3" in in_all.message
    assert queued == 3


def test_a_run_waiting_past_its_deadline_leaves_the_queue_and_the_slot_goes_on() -> None:
    async def main() -> tuple[bool, bool, int, int]:
        admission = Admission(1, max_queued=4, max_queued_per_client=4)
        assert await admission.acquire("A")
        late = await admission.acquire("B", time.monotonic() + 0.05)
        queued_after = admission.queued
        waiter = asyncio.ensure_future(admission.acquire("C"))
        await _settle()
        admission.release("A")
        got = await waiter
        admission.release("C")
        return late, got, queued_after, admission.running

    late, got, queued_after, running = asyncio.run(main())
    assert late is False and queued_after == 0
    assert got is True and running == 0


def test_a_cancelled_waiter_hands_a_slot_it_was_given_to_the_next() -> None:
    async def main() -> tuple[int, int]:
        admission = Admission(1, max_queued=4, max_queued_per_client=4)
        assert await admission.acquire("A")
        first = asyncio.ensure_future(admission.acquire("B"))
        second = asyncio.ensure_future(admission.acquire("C"))
        await _settle()
        admission.release("A")  # B is granted ...
        first.cancel()  # ... and cancelled before it ran: C gets the slot
        await asyncio.gather(first, return_exceptions=True)
        assert await second
        admission.release("C")
        return admission.running, admission.queued

    assert asyncio.run(main()) == (0, 0)
