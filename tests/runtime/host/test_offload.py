"""runtime/host/offload.py: CPU-heavy steps on untrusted input run in helper processes, never on the
host's event loop (erasing TypeScript, parsing a large JSON request), and a helper that outlives
its caller's deadline is killed. Real helper processes; the loop's responsiveness is measured
against the same work done inline, so the bounds hold on a loaded machine."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from codemode_gen.runtime.host.offload import (
    MAX_JSON_VALUES,
    Offload,
    count_json_values,
    envelope_of,
    structure_bound,
)
from codemode_gen.runtime.host.tsinput import erase_types
from tests.conftest import child_pids

pytestmark = pytest.mark.timeout(180)

# A script whose types take the eraser seconds (tree-sitter's parse holds the GIL throughout).
BIG_TS = "\n".join(f"const v{i}: number = ({i} as number);" for i in range(40_000))


async def _loop_gaps(work: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    """`work()`'s result, and the longest the event loop went without running a 5 ms ticker."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(tick())
    try:
        result = await work()
    finally:
        stop.set()
        await ticker
    return result, max(gaps, default=0.0)


def test_erasing_in_a_helper_gives_what_erasing_inline_gives() -> None:
    cases = [
        "const n: number = 1;\nglobalThis.__codemode_result__ = n as number;",
        "let plain = 1; // JavaScript comes back as the very same string",
        "enum Color { Red }",  # cannot be erased: a SYNTAX_ERROR diagnostic
        "const s: string = 'é\U0001f600\\ud800';",  # non-ASCII, an escaped lone surrogate
        "const lone = '\ud800';",  # a lone surrogate in the source itself
    ]

    async def main() -> list[Any]:
        offload = Offload(1)
        try:
            return [await offload.erase(code, None) for code in cases]
        finally:
            await offload.aclose()

    for code, erased in zip(cases, asyncio.run(main()), strict=True):
        inline = erase_types(code)
        assert erased.code == inline.code and erased.diagnostics == inline.diagnostics
        assert (erased.code is code) == (inline.code is code)  # "nothing to erase" keeps the object


@pytest.mark.slow
def test_erasing_a_large_script_leaves_the_loop_free() -> None:
    started = time.perf_counter()
    inline = erase_types(BIG_TS)
    inline_s = time.perf_counter() - started

    async def main() -> tuple[Any, float]:
        offload = Offload(1, warm=1)
        offload.start()
        try:
            await offload.erase("let x: number = 1;", None)  # the helper is up
            return await _loop_gaps(lambda: offload.erase(BIG_TS, None))
        finally:
            await offload.aclose()

    erased, gap = asyncio.run(main())
    assert erased.code == inline.code
    # Inline, the loop would stand still for the whole erase; here it keeps ticking.
    assert gap < inline_s / 4, (gap, inline_s)


@pytest.mark.slow
def test_a_helper_past_its_deadline_is_killed_and_the_next_request_gets_a_fresh_one() -> None:
    hostile = "x" + "!" * 40_000  # quadratic for the eraser: minutes

    async def main() -> tuple[float, set[int], set[int], Any]:
        offload = Offload(1)
        try:
            await offload.erase("let a: number = 1;", None)
            before = child_pids()
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await offload.erase(hostile, started + 0.5)
            waited = time.monotonic() - started
            await asyncio.sleep(0.2)
            after = child_pids()
            again = await offload.erase("let b: number = 2;", None)
            return waited, before, after, again
        finally:
            await offload.aclose()

    waited, before, after, again = asyncio.run(main())
    assert waited < 30  # the caller was answered at its deadline, not when the erase would end
    assert before - after, "the helper busy with the hostile script should be gone"
    assert again.code.startswith("let b")


def test_a_helper_is_gone_after_aclose() -> None:
    async def main() -> tuple[set[int], set[int]]:
        offload = Offload(2, warm=1)
        offload.start()
        await offload.erase("let a: number = 1;", None)
        during = child_pids()
        await offload.aclose()
        await asyncio.sleep(0.2)
        return during, child_pids()

    during, after = asyncio.run(main())
    assert during and not (during & after)


def test_envelope_of_a_request_names_what_admission_needs() -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "codemode.run",
            "arguments": {"code": "x".ljust(1000), "limits": {"timeoutMs": 5000}},
        },
    }
    envelope = envelope_of(request)
    assert (envelope.method, envelope.id, envelope.tool, envelope.code_chars) == (
        "tools/call",
        7,
        "codemode.run",
        1000,
    )
    assert envelope.limits == {"timeoutMs": 5000} and envelope.limits_valid
    assert envelope_of({"params": {"arguments": {"limits": [1]}}}).limits_valid is False
    assert envelope_of([1, 2]).method is None

    async def main() -> Any:
        offload = Offload(1)
        try:
            return (
                await offload.envelope(json.dumps(request).encode(), None),
                await offload.envelope(b"[[],[],", None),
            )
        finally:
            await offload.aclose()

    parsed, broken = asyncio.run(main())
    assert parsed == envelope and broken is None


def test_the_structure_bound_is_an_upper_bound_and_exact_counts_stop_past_the_cap() -> None:
    values: list[Any] = [{"a": [1, 2, {"b": None}]}, [], "x,y:[z", {"code": "a, b, [c]: d"}]
    for value in values:
        body = json.dumps(value).encode()
        assert structure_bound(body) >= count_json_values(value)
    many: list[list[int]] = [[] for _ in range(MAX_JSON_VALUES * 2)]
    assert MAX_JSON_VALUES < count_json_values(many) <= MAX_JSON_VALUES + 2
