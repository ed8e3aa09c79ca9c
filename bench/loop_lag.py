"""Benchmark: how long large payloads within the caps block the host's event loop. Not a test.

    .venv/bin/python bench/loop_lag.py [--repeat N] [--sample] [--only NAME] [--record]

One `CodeMode` (the public Python API) runs scripts against tests/servers/payload.py over stdio
(a real MCP server process), with out/ empty (the server's module is built in memory and its
untyped tools' output types are learned, as in `serve`). A probe task on the same event loop
sleeps LAG_TICK_S again and again and records by how much each sleep overshot: the loop's worst
lag while the script runs is the largest overshoot. Scenarios:

- take-400k: a script calls `take` with an input of 400,000 extra keys (valid, ~6 MB);
- strict-400k: the same input to `take_strict` (additionalProperties: false: invalid);
- blob-12mb: a tool returns 12 MB of JSON (structuredContent); the script reads its length;
- text-12mb: the same as one text block of JSON (a string after §5.3.2 unwrapping: the script parses it);
- result-12mb: the script returns the 12 MB value as its own result;
- timeout-12mb: a 12 MB result with timeoutMs 300: when the timeout diagnostic arrives.

With --record, every successful call is also recorded (`CodeMode(record=...)`) to a scratch
fixtures/ folder. With --sample, a thread samples the loop thread's stack whenever the probe is
late by more than SAMPLE_AFTER_S, and prints the functions seen most often (where the loop was
stuck). Target: the worst lag of every scenario <= TARGET_LAG_MS.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # bench/ as the namespace package `bench`

from bench.runtime import PYTHON, median  # noqa: E402
from codemode_gen import CodeMode, gcpolicy  # noqa: E402
from codemode_gen.config import ServerConfig, Settings  # noqa: E402

PAYLOAD = REPO / "tests" / "servers" / "payload.py"
# The probe's sleep; its overshoot is the loop's lag.
LAG_TICK_S = 0.005
# A late probe past this gets the loop thread's stack sampled (--sample).
SAMPLE_AFTER_S = 0.03
SAMPLE_EVERY_S = 0.005
TARGET_LAG_MS = 100.0
LIMITS = {"timeoutMs": 120_000, "maxMemoryBytes": 512 * 1024 * 1024}

KEYS = 400_000
BIG_KIB = 12 * 1024

HEAD = "import * as p from '@codemode/servers/payload';\n"
SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "take-400k": (
        HEAD + f"const o = {{}}; for (let i = 0; i < {KEYS}; i++) o['key' + i] = i;\n"
        "globalThis.__codemode_result__ = await p.take(o);",
        LIMITS,
    ),
    "strict-400k": (
        HEAD + f"const o = {{}}; for (let i = 0; i < {KEYS}; i++) o['key' + i] = i;\n"
        "try { await p.take_strict(o); } catch (e) { globalThis.__codemode_result__ = e.name; }",
        LIMITS,
    ),
    "blob-12mb": (
        HEAD + f"const r = await p.blob({{kib: {BIG_KIB}, seed: SEED}});\n"
        "globalThis.__codemode_result__ = r.items.length;",
        LIMITS,
    ),
    "text-12mb": (
        HEAD + f"const r = await p.blob({{kib: {BIG_KIB}, seed: SEED, shape: 'text'}});\n"
        "globalThis.__codemode_result__ = JSON.parse(r).items.length;",
        LIMITS,
    ),  # §5.3.2: the text itself
    "result-12mb": (
        HEAD + f"globalThis.__codemode_result__ = await p.blob({{kib: {BIG_KIB}, seed: SEED}});",
        LIMITS,
    ),
    "timeout-12mb": (
        HEAD + f"globalThis.__codemode_result__ = await p.blob({{kib: {BIG_KIB}, seed: SEED}});",
        {**LIMITS, "timeoutMs": 300},
    ),
}


class LagProbe:
    """A task that measures the loop's lag; optionally samples the loop thread when it is late."""

    def __init__(self, sample: bool) -> None:
        self.worst = 0.0
        self.last_tick = time.monotonic()
        self.sample = sample
        self.loop_thread = threading.get_ident()
        self.counts: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()

    def reset(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(LAG_TICK_S)
            now = time.monotonic()
            self.last_tick = now
            self.worst = max(self.worst, now - before - LAG_TICK_S)

    def sampler(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            if time.monotonic() - self.last_tick < SAMPLE_AFTER_S:
                continue
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                stack = traceback.extract_stack(frame)
                if ident != self.loop_thread and stack[-1].name in ("wait", "_worker", "select"):
                    continue  # an idle thread
                # the innermost frame, then the innermost frames of the product (who called it)
                ours = [
                    f
                    for f in stack[:-1]
                    if "codemode_gen" in f.filename or "/runtime/" in f.filename
                ][-3:]
                where = " <- ".join(
                    f"{Path(f.filename).name}:{f.lineno} {f.name}"
                    for f in reversed([*ours, stack[-1]])
                )
                self.counts[("loop: " if ident == self.loop_thread else "thread: ") + where] += 1

    def stop(self) -> None:
        self._stop.set()


async def main_async(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="loop-lag-"))
    config = ServerConfig(
        id="payload",
        transport="stdio",
        command=PYTHON,
        args=(str(PAYLOAD), "stdio"),
        call_timeout=300.0,
    )
    settings = Settings(max_result_bytes=64 * 1024 * 1024)
    record: bool | Path = work / "fixtures" if args.record else False
    probe = LagProbe(args.sample)
    sampler = threading.Thread(target=probe.sampler, daemon=True)
    if args.sample:
        sampler.start()
    rows: list[tuple[str, str, str, str]] = []
    failed = False
    async with CodeMode(
        {"payload": config},
        out_dir=work / "out",
        settings=settings,
        log_dir=work / "logs",
        record=record,
    ) as cm:
        cm.connect_in_background()
        await cm.wait_background(60)
        await cm.run(HEAD + "globalThis.__codemode_result__ = (await p.take({})).keys;", LIMITS)
        lag_task = asyncio.ensure_future(probe.run())
        try:
            for name, (code, limits) in SCENARIOS.items():
                if args.only and name not in args.only:
                    continue
                for policy in args.gc:  # side by side: the host's policy and CPython's own
                    if policy == "host":
                        gcpolicy.install()
                    else:
                        gcpolicy.uninstall()
                    lags, walls = [], []
                    summary = ""
                    for i in range(args.repeat):
                        await asyncio.sleep(0.2)
                        probe.reset()
                        started = time.monotonic()
                        response = await cm.run(code.replace("SEED", str(i)), limits)
                        walls.append(time.monotonic() - started)
                        await asyncio.sleep(0.05)  # lag from work after the response (flushes)
                        lags.append(probe.worst * 1000)
                        if policy == "host":
                            gc.collect()  # what the host's periodic collection does between runs
                        result = response.get("result")
                        codes = [d.get("code") for d in response.get("diagnostics", [])]
                        summary = f"result {str(result)[:40]!r} diagnostics {codes}"
                        if args.verbose:
                            print(
                                name,
                                [
                                    (d.get("code"), d.get("message", "")[:300])
                                    for d in response.get("diagnostics", [])
                                ],
                            )
                    worst = max(lags)
                    failed |= policy == "host" and worst > TARGET_LAG_MS
                    rows.append(
                        (
                            f"{name} gc={policy}",
                            f"{worst:.0f} ms (median {median(lags):.0f})",
                            f"{median(walls) * 1000:.0f} ms",
                            summary,
                        )
                    )
        finally:
            lag_task.cancel()
            probe.stop()
            gcpolicy.uninstall()
    print(f"logs: {work / 'logs'}")
    print(
        f"worst event-loop lag per scenario (target <= {TARGET_LAG_MS:.0f} ms; --record: {args.record})"
    )
    width = max(len(r[0]) for r in rows) if rows else 10
    for name, lag, wall, summary in rows:
        print(f"  {name:<{width}}  lag {lag:<24} run {wall:<9} {summary}")
    if args.sample and probe.counts:
        print("\nwhere the loop was stuck (samples while the probe was late):")
        for where, count in probe.counts.most_common(args.top):
            print(f"  {count:5d}  {where}")
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--sample", action="store_true", help="sample the loop thread's stack when it is late"
    )
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--verbose", action="store_true", help="print every run's diagnostics")
    parser.add_argument("--only", nargs="*", help="scenario names to run")
    parser.add_argument(
        "--record", action="store_true", help="record every call to a scratch fixtures/"
    )
    parser.add_argument(
        "--gc",
        nargs="+",
        choices=("host", "cpython"),
        default=["host", "cpython"],
        help="garbage collection policies to compare: serve's and run's (codemode_gen/gcpolicy.py),"
        " CPython's own (the Python API's)",
    )
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
