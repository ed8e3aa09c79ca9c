"""Spec §10.1 (concurrent calls with a cap) and §7.4 (in-flight calls cancelled when a run ends).

Real server: tests/servers/slow.py, whose `sleep` really waits and whose `cancelled_count`
reports how many notifications/cancelled it received.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from .runtime_support import HostThread, assert_ok, errors, slow_host

pytestmark = pytest.mark.timeout(120)

SLEEP_MS = 400


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    yield from slow_host(tmp_path_factory, "s10")


def timed(n: int) -> str:
    return (
        "import { sleep } from '@codemode/servers/slow';\n"
        "const t0 = Date.now();\n"
        f"const out = await Promise.all(Array.from({{length: {n}}}, () => sleep({{ms: {SLEEP_MS}}})));\n"
        "globalThis.__codemode_result__ = {elapsed: Date.now() - t0, n: out.length};"
    )


def cancelled(host: HostThread) -> dict[str, Any]:
    r = host.run("import { cancelled_count } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await cancelled_count();")
    result: dict[str, Any] = assert_ok(r)
    return result


def test_s10_1_promise_all_runs_calls_concurrently(host: HostThread) -> None:
    r = host.run(timed(5))
    result = assert_ok(r)
    assert result["n"] == 5
    assert result["elapsed"] < 2.5 * SLEEP_MS  # serial would take 5 × SLEEP_MS
    assert len(r["toolTrace"]) == 5 and all(t["durationMs"] >= SLEEP_MS - 50 for t in r["toolTrace"])


def test_s10_1_max_concurrent_calls_caps_calls_in_flight(host: HostThread) -> None:
    result = assert_ok(host.run(timed(4), limits={"maxConcurrentCalls": 2}))
    assert result["elapsed"] >= 2 * SLEEP_MS - 50  # two waves of two
    assert result["elapsed"] < 4 * SLEEP_MS


@pytest.mark.slow
def test_s7_4_timeout_cancels_in_flight_calls(host: HostThread) -> None:
    before = cancelled(host)["cancelled"]
    started = time.monotonic()
    r = host.run(
        "import { sleep } from '@codemode/servers/slow';\nawait Promise.all([sleep({ms: 20000}), sleep({ms: 20000})]);",
        limits={"timeoutMs": 1000},
    )
    took = time.monotonic() - started
    assert errors(r)[0]["code"] == "SANDBOX_LIMIT"
    assert [t["ok"] for t in r["toolTrace"]] == [False, False]  # both recorded as cancelled
    assert all("cancelled" in t["error"] for t in r["toolTrace"])
    assert took < 1.5 * 1.0 + 0.75  # the deadline holds (plus host bookkeeping on a busy machine)
    deadline = time.monotonic() + 5
    while cancelled(host)["cancelled"] < before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cancelled(host)["cancelled"] >= before + 2  # notifications/cancelled reached the server

