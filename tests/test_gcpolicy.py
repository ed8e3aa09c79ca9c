"""codemode_gen/gcpolicy.py: no automatic full collection while a host processes large payloads;
the host collects everything itself, between runs (§11: a payload within the caps must not stall
the event loop). Collections are observed with `gc.callbacks`, never timed."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen import gcpolicy
from codemode_gen.config import ServerConfig

from .runtime_support import PYTHON, HostThread

PAYLOAD = Path(__file__).resolve().parent / "servers" / "payload.py"


class Collections:
    """The generations of the collections that ran while it was recording."""

    def __init__(self) -> None:
        self.generations: list[int] = []

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.generations.append(info["generation"])

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@pytest.fixture
def policy() -> Iterator[None]:
    gcpolicy.install()
    try:
        yield
    finally:
        gcpolicy.uninstall()


def test_s11_no_automatic_full_collection_while_a_large_payload_lives(policy: None) -> None:
    with Collections() as seen:
        payload = [{"id": i, "tags": [str(i)]} for i in range(300_000)]  # ~600,000 containers
        assert len(payload) == 300_000
    assert seen.generations and 2 not in seen.generations  # young collections went on, no full one
    gcpolicy.uninstall()
    with Collections() as seen:
        again = [{"id": i, "tags": [str(i)]} for i in range(300_000)]
        assert len(again) == 300_000
    assert 2 in seen.generations  # CPython's own policy walks them all, more than once


def test_the_host_collects_everything_once_its_runs_are_done(policy: None) -> None:
    busy = [True]

    async def main() -> list[int]:
        with Collections() as seen:
            task = asyncio.ensure_future(
                gcpolicy.collect_periodically(lambda: busy[0], every_s=0.05, max_defer_s=60)
            )
            await asyncio.sleep(0.3)
            during = list(seen.generations)
            busy[0] = False
            for _ in range(200):
                if 2 in seen.generations:
                    break
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert 2 not in during  # put off while runs were in progress
        return seen.generations

    assert 2 in asyncio.run(main())  # and done once they ended


def test_a_host_that_is_never_idle_still_collects(policy: None) -> None:
    async def main() -> list[int]:
        with Collections() as seen:
            task = asyncio.ensure_future(
                gcpolicy.collect_periodically(lambda: True, every_s=0.05, max_defer_s=0.2)
            )
            for _ in range(200):
                if 2 in seen.generations:
                    break
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return seen.generations

    assert 2 in asyncio.run(main())  # after at most max_defer_s


@pytest.mark.slow
def test_s11_a_12_mb_tool_result_goes_through_the_host_without_a_full_collection(
    policy: None, tmp_path: Path
) -> None:
    """The real path: a 12 MB result from a real server, through the host into QuickJS and back."""
    config = ServerConfig(
        id="p", transport="stdio", command=PYTHON, args=(str(PAYLOAD), "stdio"), call_timeout=300.0
    )
    host = HostThread({"p": config}, tmp_path / "out", tmp_path / "logs")
    try:
        host.run(
            "import * as p from '@codemode/servers/p';\nawait p.take({});"
        )  # connected and warm
        with Collections() as seen:
            response = host.run(
                "import * as p from '@codemode/servers/p';\n"
                "globalThis.__codemode_result__ = (await p.blob({ kib: 12288 })).items.length;",
                limits={"maxMemoryBytes": 512 * 1024 * 1024, "timeoutMs": 120_000},
            )
        assert isinstance(response["result"], int) and response["result"] > 50_000, response[
            "diagnostics"
        ]
        assert 2 not in seen.generations, seen.generations
    finally:
        host.close()
