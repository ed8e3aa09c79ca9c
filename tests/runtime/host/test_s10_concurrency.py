"""Spec §10.1 (concurrent calls with a cap) and §7.4 (in-flight calls cancelled when a run ends).

Real server: tests/servers/slow.py, whose `sleep` really waits, whose `peak` says how many sleeps
were under way at once (concurrency by overlap, not by timing) and whose `cancelled_count` reports
how many notifications/cancelled it received.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import HANG_S, PROMPT_S
from tests.runtime_support import HostThread, assert_ok, errors, slow_host

pytestmark = pytest.mark.timeout(120)

# Long enough that calls started together overlap however loaded the machine is.
SLEEP_MS = 1000


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    yield from slow_host(tmp_path_factory, "s10")


def timed(n: int) -> str:
    return (
        "import { sleep, peak } from '@codemode/servers/slow';\n"
        "await peak();\n"  # from here on, this run's sleeps only
        "const t0 = Date.now();\n"
        f"const out = await Promise.all(Array.from({{length: {n}}}, () => sleep({{ms: {SLEEP_MS}}})));\n"
        "globalThis.__codemode_result__ = {elapsed: Date.now() - t0, n: out.length, peak: (await peak()).peak};"
    )


def cancelled(host: HostThread) -> dict[str, Any]:
    r = host.run(
        "import { cancelled_count } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await cancelled_count();"
    )
    result: dict[str, Any] = assert_ok(r)
    return result


def test_s10_1_promise_all_runs_calls_concurrently(host: HostThread) -> None:
    r = host.run(timed(5))
    result = assert_ok(r)
    assert result["n"] == 5
    assert result["peak"] == 5  # all five under way at once at the server
    sleeps = [t for t in r["toolTrace"] if t["toolName"] == "sleep"]
    assert len(sleeps) == 5 and all(t["durationMs"] >= SLEEP_MS - 50 for t in sleeps)


def test_s10_1_max_concurrent_calls_caps_calls_in_flight(host: HostThread) -> None:
    result = assert_ok(host.run(timed(4), limits={"maxConcurrentCalls": 2}))
    assert result["peak"] == 2  # never more than the cap, and the cap was used
    assert result["elapsed"] >= 2 * SLEEP_MS - 50  # at least two waves of two


@pytest.mark.slow
def test_s7_4_timeout_cancels_in_flight_calls(host: HostThread) -> None:
    before = cancelled(host)["cancelled"]
    started = time.monotonic()
    hang_ms = int(HANG_S * 1000)
    r = host.run(
        f"import {{ sleep }} from '@codemode/servers/slow';\nawait Promise.all([sleep({{ms: {hang_ms}}}), sleep({{ms: {hang_ms}}})]);",
        limits={"timeoutMs": 1000},
    )
    took = time.monotonic() - started
    assert errors(r)[0]["code"] == "SANDBOX_LIMIT"
    assert [t["ok"] for t in r["toolTrace"]] == [False, False]  # both recorded as cancelled
    assert all("cancelled" in t["error"] for t in r["toolTrace"])
    assert took < PROMPT_S  # the deadline holds, not the sleeps
    deadline = time.monotonic() + PROMPT_S
    while cancelled(host)["cancelled"] < before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cancelled(host)["cancelled"] >= before + 2  # notifications/cancelled reached the server
