"""Spec §7.4: a cancelled run cancels its tool calls in flight upstream, however it is cancelled.

A client that cancels its codemode.run request (notifications/cancelled) makes the MCP SDK's
server cancel the handler through an anyio cancel scope, which cancels every await of the task
again until it leaves the scope, cleanup included; the Python API's caller cancels the task
awaiting `CodeMode.run` (once). Either way the worker stops, every tool call in flight gets a
notifications/cancelled upstream, and the same upstream session serves the next run.

Real processes throughout: tests/servers/slow.py, whose `cancelled_count` reports the
notifications/cancelled it received, the sleeps they cut short and the sleeps under way (so a
test cancels once its calls are in flight, not after a guessed delay).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.client.sessions import SessionManager
from codemode_gen.runtime.host.bridge import Bridge
from codemode_gen.runtime.host.catalog import Catalog
from tests.conftest import HANG_S, PROMPT_S
from tests.runtime_support import (
    HostThread,
    against_serve,
    assert_ok,
    mcp_project,
    slow_host,
    stdio,
)

pytestmark = pytest.mark.timeout(120)

CALLS = 3  # sleeps in flight when the run is cancelled
SLEEP_MS = int(
    HANG_S * 1000
)  # far longer than any test waits: a sleep that ended by itself fails the test
# How soon after the cancellation every sleep must have been cut short ("well before the sleeps
# would have ended"); generous for a loaded 2-core machine, tiny next to SLEEP_MS.
CANCELLED_WITHIN_S = PROMPT_S
# Bounds the wait for the sleeps to be in flight (a cold sandbox worker on a busy machine).
IN_FLIGHT_WITHIN_S = 30.0

SLEEPS = (
    "import { sleep } from '@codemode/servers/slow';\n"
    f"await Promise.all(Array.from({{length: {CALLS}}}, () => sleep({{ms: {SLEEP_MS}}})));\n"
)
COUNTS = (
    "import { cancelled_count } from '@codemode/servers/slow';\n"
    "globalThis.__codemode_result__ = await cancelled_count();"
)
RUN_LIMITS = {"timeoutMs": 2 * SLEEP_MS}  # the run's own timeout is not what ends it
PAIR_RUN = "import { sleep } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await sleep({ms: 1000});"


def settled(before: dict[str, int]) -> Callable[[dict[str, int]], bool]:
    """The counts once every sleep of the cancelled run was cut short."""
    return lambda c: c["interrupted"] >= before["interrupted"] + CALLS and c["sleeping"] == 0


def check_cancelled(before: dict[str, int], after: dict[str, int], took: float) -> None:
    assert took < CANCELLED_WITHIN_S, took
    # One notifications/cancelled per call in flight, each cutting its sleep short, received by the
    # server process that counted `before`: the session survived (a new one would count from 0).
    assert after["cancelled"] - before["cancelled"] == CALLS
    assert after["interrupted"] - before["interrupted"] == CALLS
    assert after["sleeping"] == 0


# --------------------------------------------------------------------------- serve


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mcp_project(tmp_path_factory.mktemp("serve-cancel"), slow=["slow", "stdio"])


@pytest.mark.slow
def test_s7_4_client_cancelling_codemode_run_cancels_its_calls_upstream(project: Path) -> None:
    async def counts(client: Any) -> dict[str, int]:
        r = await client.call_tool("codemode.run", {"code": COUNTS})
        result: dict[str, int] = assert_ok(r.structured_content)
        return result

    async def until(
        client: Any, done: Callable[[dict[str, int]], bool], within: float
    ) -> dict[str, int]:
        with anyio.fail_after(within):
            while not done(c := await counts(client)):
                await anyio.sleep(0.05)
        return c

    async def body(client: Any) -> tuple[dict[str, int], dict[str, int], float, Any]:
        before = await counts(client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "codemode.run", {"code": SLEEPS, "limits": RUN_LIMITS})
            await until(
                client, lambda c: c["sleeping"] == before["sleeping"] + CALLS, IN_FLIGHT_WITHIN_S
            )
            # The SDK client abandons the request and sends notifications/cancelled for it.
            tg.cancel_scope.cancel()
        cancelled_at = time.monotonic()
        after = await until(client, settled(before), CANCELLED_WITHIN_S)
        took = time.monotonic() - cancelled_at
        # The cancelled run gave its worker back: two runs get one each at once (with a worker
        # slot leaked, the second would wait out the first and miss its own timeoutMs).
        pair: list[Any] = []

        async def one() -> None:
            pair.append(
                await client.call_tool(
                    "codemode.run", {"code": PAIR_RUN, "limits": {"timeoutMs": 1800}}
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
            tg.start_soon(one)
        return before, after, took, pair

    before, after, took, pair = against_serve(
        project, body, "--out", str(project / "out"), "--max-workers", "2"
    )
    check_cancelled(before, after, took)
    assert [assert_ok(r.structured_content) for r in pair] == [{"slept": 1000}] * 2
    log = (project / "serve.stderr.log").read_text()
    assert "Traceback" not in log and "never retrieved" not in log, log


# --------------------------------------------------------------------------- Python API


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    yield from slow_host(tmp_path_factory, "cancel", COUNTS)


def host_counts(host: HostThread) -> dict[str, int]:
    result: dict[str, int] = assert_ok(host.run(COUNTS))
    return result


def host_until(
    host: HostThread, done: Callable[[dict[str, int]], bool], within: float
) -> dict[str, int]:
    deadline = time.monotonic() + within
    while not done(c := host_counts(host)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return c


def test_s7_4_cancelling_the_task_awaiting_codemode_run_cancels_its_calls_upstream(
    host: HostThread,
) -> None:
    before = host_counts(host)
    run = asyncio.run_coroutine_threadsafe(host.cm.run(SLEEPS, limits=RUN_LIMITS), host.loop)
    host_until(host, lambda c: c["sleeping"] == before["sleeping"] + CALLS, IN_FLIGHT_WITHIN_S)
    cancelled_at = time.monotonic()
    run.cancel()  # Task.cancel() on the host's loop
    after = host_until(host, settled(before), CANCELLED_WITHIN_S)
    check_cancelled(before, after, time.monotonic() - cancelled_at)
    assert run.cancelled()


def test_s7_4_a_run_cancelled_through_an_anyio_scope_cancels_its_calls_upstream(
    host: HostThread,
) -> None:
    """What the SDK's server does on notifications/cancelled: an anyio cancel scope cancels the
    run's task, then every await of its cleanup too."""
    before = host_counts(host)

    async def cancel_when_in_flight() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: host.cm.run(SLEEPS, limits=RUN_LIMITS))
            with anyio.fail_after(IN_FLIGHT_WITHIN_S):
                while (await host.cm.run(COUNTS))["result"]["sleeping"] < before[
                    "sleeping"
                ] + CALLS:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

    host.call(cancel_when_in_flight())
    cancelled_at = time.monotonic()
    after = host_until(host, settled(before), CANCELLED_WITHIN_S)
    check_cancelled(before, after, time.monotonic() - cancelled_at)


# --------------------------------------------------------------------------- layers


def test_s7_4_a_call_cancelled_again_during_its_cleanup_still_sends_notifications_cancelled(
    tmp_path: Path,
) -> None:
    """McpSession: the caller's cleanup re-cancelled (an anyio scope; `gather` passing each
    cancellation on to its children) must not cut off the notifications/cancelled."""

    async def go() -> tuple[dict[str, int], dict[str, int]]:
        async with SessionManager({"slow": stdio("slow", "slow")}, log_dir=tmp_path) as manager:
            session = await manager.get("slow")

            async def counts() -> dict[str, int]:
                result: dict[str, int] = (await session.call_tool("cancelled_count", {}))[
                    "structuredContent"
                ]
                return result

            before = await counts()
            calls = [
                asyncio.ensure_future(session.call_tool("sleep", {"ms": SLEEP_MS}))
                for _ in range(CALLS)
            ]
            with anyio.fail_after(IN_FLIGHT_WITHIN_S):
                while (await counts())["sleeping"] < CALLS:
                    await anyio.sleep(0.02)
            with anyio.CancelScope() as scope:
                scope.cancel()
                try:
                    await anyio.sleep(60)
                finally:  # Sandbox.cancel_calls's shape: cancel, then gather under a cancelled scope
                    for call in calls:
                        call.cancel()
                    await asyncio.gather(*calls, return_exceptions=True)
            with anyio.fail_after(CANCELLED_WITHIN_S):
                while (after := await counts())["interrupted"] < before["interrupted"] + CALLS:
                    await anyio.sleep(0.02)
            assert (await session.call_tool("sleep", {"ms": 1}))["structuredContent"] == {
                "slept": 1
            }
            return before, after

    before, after = asyncio.run(go())
    assert after["cancelled"] - before["cancelled"] == CALLS


def test_bridge_serve_finishes_the_runs_teardown_however_often_its_caller_is_cancelled() -> None:
    """Bridge.serve: the sandbox run's cleanup and the bridge's aclose run to their end in a
    task that is cancelled once, while the caller stops waiting as soon as it is cancelled."""
    bridge = Bridge(Catalog(servers={}), connector=None, configs={}, max_tool_calls=None)  # type: ignore[arg-type]
    cleaned: list[str] = []

    async def sandbox_run() -> dict[str, Any]:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # e.g. reaping the worker, cancelling calls
            cleaned.append("sandbox")
        return {}

    async def go() -> float:
        started = time.monotonic()
        with anyio.CancelScope() as scope:
            asyncio.get_running_loop().call_later(0.05, scope.cancel)
            await bridge.serve(sandbox_run())
        stopped = time.monotonic() - started
        with anyio.fail_after(PROMPT_S):
            while not cleaned:
                await anyio.sleep(0.01)
        return stopped

    stopped = asyncio.run(go())
    assert stopped < PROMPT_S  # not the run's 60 s
    assert cleaned == ["sandbox"]
    assert bridge._closed  # aclose ran after the run
