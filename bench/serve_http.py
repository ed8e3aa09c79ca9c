"""Benchmark: what large payloads and queued runs cost `codemode-gen serve --http`. Not a test.

    .venv/bin/python bench/serve_http.py [--queued N] [--workdir DIR]

It builds a throw-away project with the demo notes server (the real `record` + `generate`,
bench/runtime.py), starts the real CLI, `codemode-gen serve --http 127.0.0.1:0`, and measures
with real clients (the `mcp` SDK's Streamable HTTP client, httpx):

(1) Event loop: the latency of GET /healthz, polled every POLL_S, while the instance handles
    - a TypeScript script of SCRIPT_BYTES (erasing its types takes seconds of CPU),
    - a JSON request of BOMB_BYTES of tiny values (`[[],[],…]`),
    and, for reference, while idle. Target: the worst /healthz latency stays under
    TARGET_HEALTHZ_MS (no payload within the caps stalls the loop).
(2) Memory per queued run: with --max-workers 1 and one run holding the worker, --queued runs
    of QUEUED_SCRIPT_BYTES each are sent (each from its own client, as X-Forwarded-For from a
    proxy on 127.0.0.1 says, so no per-client share is hit) and the serve process's VmRSS is
    read before and once it has settled: (after - before) / runs queued. For information (it
    depends on the allocator); the queue holds a waiting run's request body and little else, and
    the bodies of all waiting requests are capped (http_gate.MAX_PENDING_BYTES: beyond it, 503).

Every process the bench started is gone when it exits. Linux only (/proc). Exit status 1 when
the target of (1) is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # bench/ as the namespace package `bench`

from bench.runtime import NOTES, PYTHON, print_table, write_project  # noqa: E402
from bench.serve import Reaper, descendants, vm_rss_kb  # noqa: E402

TOKEN = "bench-token"
#: /healthz is polled this often while a payload is handled.
POLL_S = 0.02
#: The TypeScript script of (1), about the size that used to stall the loop for 5.6 s.
SCRIPT_BYTES = 3_400_000
#: The JSON request of (1): just under serve's 4 MiB body cap.
BOMB_BYTES = 4_000_000
#: Each queued run's script in (2).
QUEUED_SCRIPT_BYTES = 3 * 1024 * 1024
#: The worst /healthz latency allowed while a payload is handled (the issue's bound: ~100 ms).
TARGET_HEALTHZ_MS = 100.0
#: Bounds a start, a run and the settling of (2).
LISTEN_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 300.0
SETTLE_S = 2.0

_LISTENING = re.compile(r"listening on (http://\S+/mcp)")
HOLD = "await new Promise(r => setTimeout(r, 600000)); globalThis.__codemode_result__ = 0;"


def big_typescript(target: int) -> str:
    blocks, size, index = [], 0, 0
    while size < target:
        lines = [f"  const v{index + i}: number = ({index + i} as number);" for i in range(1000)]
        block = "(() => {\n" + "\n".join(lines) + "\n})();"
        blocks.append(block)
        size += len(block) + 1
        index += 1000
    return "\n".join(blocks) + "\nglobalThis.__codemode_result__ = 42 as number;\n"


def tool_call(code: str, **limits: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "codemode.run", "arguments": {"code": code, "limits": limits}},
    }


HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "Authorization": f"Bearer {TOKEN}",
}


class Instance:
    def __init__(self, project: Path, reaper: Reaper, *args: str) -> None:
        self.log = project / f"serve-{time.monotonic_ns()}.log"
        with self.log.open("wb") as errlog:
            self.proc = subprocess.Popen(
                [
                    PYTHON,
                    "-m",
                    "codemode_gen",
                    "serve",
                    "--config",
                    str(project / ".mcp.json"),
                    "--out",
                    str(project / "out"),
                    "--http",
                    "127.0.0.1:0",
                    *args,
                ],
                cwd=project,
                env={**os.environ, "CODEMODE_AUTH_TOKEN": TOKEN},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
            )
        reaper.track([self.proc.pid])
        self.reaper = reaper
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not (found := _LISTENING.search(self.log.read_text(errors="replace"))):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"serve --http did not start: {self.log.read_text()}")
            time.sleep(0.05)
        self.url = found.group(1)
        self.base = self.url.removesuffix("/mcp")

    async def healthy(self) -> None:
        import httpx2

        async with httpx2.AsyncClient(timeout=30) as http:
            deadline = time.monotonic() + LISTEN_TIMEOUT_S
            while (await http.get(self.base + "/healthz")).status_code != 200:
                if time.monotonic() > deadline:
                    raise SystemExit("serve --http never became healthy")
                await asyncio.sleep(0.1)

    def stop(self) -> None:
        self.reaper.track(descendants(self.proc.pid))
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.reaper.kill_all()


async def healthz_during(instance: Instance, work: Any) -> tuple[float, float, int]:
    """(worst /healthz latency in ms, how long `work` took in s, polls) while `work()` runs."""
    import httpx2

    latencies: list[float] = []
    done = asyncio.Event()

    async def poll() -> None:
        async with httpx2.AsyncClient(timeout=RUN_TIMEOUT_S) as http:
            while not done.is_set():
                started = time.perf_counter()
                await http.get(instance.base + "/healthz")
                latencies.append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(POLL_S)

    poller = asyncio.ensure_future(poll())
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    try:
        await work()
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        await poller
    return max(latencies), elapsed, len(latencies)


async def bench_loop(project: Path, reaper: Reaper) -> tuple[list[tuple[str, str, str, str]], bool]:
    import httpx2

    instance = Instance(project, reaper)
    rows: list[tuple[str, str, str, str]] = []
    ok = True
    try:
        await instance.healthy()
        script = big_typescript(SCRIPT_BYTES)
        bomb = b"[" + b"[]," * (BOMB_BYTES // 3 - 1) + b"[]]"

        async def idle() -> None:
            await asyncio.sleep(2.0)

        async def typescript() -> None:
            async with httpx2.AsyncClient(timeout=RUN_TIMEOUT_S) as http:
                answer = await http.post(
                    instance.url, json=tool_call(script, timeoutMs=240_000), headers=HEADERS
                )
                if '"result": 42' not in answer.text and '"result":42' not in answer.text:
                    raise SystemExit(f"the TypeScript run failed: {answer.text[:500]}")

        async def json_bomb() -> None:
            async with httpx2.AsyncClient(timeout=RUN_TIMEOUT_S) as http:
                await http.post(instance.url, content=bomb, headers=HEADERS)

        for name, work, target in (
            ("idle (reference)", idle, None),
            (f"TypeScript run, {SCRIPT_BYTES / 1e6:.1f} MB", typescript, TARGET_HEALTHZ_MS),
            (f"JSON of tiny values, {BOMB_BYTES / 1e6:.1f} MB", json_bomb, TARGET_HEALTHZ_MS),
        ):
            worst, took, polls = await healthz_during(instance, work)
            verdict = "info" if target is None else ("PASS" if worst <= target else "FAIL")
            ok &= verdict != "FAIL"
            rows.append(
                (
                    f"/healthz worst latency: {name}",
                    f"{worst:.1f} ms",
                    f"{polls} polls over {took:.1f} s",
                    verdict,
                )
            )
    finally:
        instance.stop()
    return rows, ok


async def bench_queue(
    project: Path, reaper: Reaper, queued: int
) -> list[tuple[str, str, str, str]]:
    import httpx2

    queue_flag: list[str] = []
    helptext = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "serve", "--help"], capture_output=True, text=True
    ).stdout
    if (
        "--max-queued-runs" in helptext
    ):  # (an older serve, measured for comparison, has no such flag)
        queue_flag = ["--max-queued-runs", str(max(64, queued))]
    instance = Instance(project, reaper, "--max-workers", "1", *queue_flag)
    try:
        await instance.healthy()
        script = "/*" + "x" * (QUEUED_SCRIPT_BYTES - 60) + "*/ globalThis.__codemode_result__ = 1;"
        body = json.dumps(tool_call(script, timeoutMs=600_000)).encode()
        async with httpx2.AsyncClient(
            timeout=RUN_TIMEOUT_S, limits=httpx2.Limits(max_connections=queued + 4)
        ) as http:
            holder = asyncio.ensure_future(
                http.post(instance.url, json=tool_call(HOLD, timeoutMs=600_000), headers=HEADERS)
            )
            await asyncio.sleep(SETTLE_S)
            before = vm_rss_kb(instance.proc.pid) or 0
            waiting = [
                asyncio.ensure_future(
                    http.post(
                        instance.url,
                        content=body,
                        headers={**HEADERS, "X-Forwarded-For": f"10.0.{i // 250}.{i % 250}"},
                    )
                )
                for i in range(queued)
            ]
            # Settled: every body sent and the RSS steady for SETTLE_S.
            last, steady_since = -1, time.monotonic()
            deadline = time.monotonic() + RUN_TIMEOUT_S
            while time.monotonic() < deadline:
                await asyncio.sleep(0.25)
                rss = vm_rss_kb(instance.proc.pid) or 0
                if abs(rss - last) > 512:
                    last, steady_since = rss, time.monotonic()
                elif time.monotonic() - steady_since >= SETTLE_S:
                    break
            after = vm_rss_kb(instance.proc.pid) or 0
            refused = [t.result().status_code for t in waiting if t.done() and not t.exception()]
            for task in [holder, *waiting]:
                task.cancel()
            await asyncio.gather(holder, *waiting, return_exceptions=True)
        held = queued - len(
            refused
        )  # the rest were refused at once (503: the bytes waiting are capped)
        per_run = (after - before) / 1024 / max(1, held)
        return [
            (
                f"serve VmRSS, {queued} runs of {QUEUED_SCRIPT_BYTES / 1024 / 1024:.0f} MiB sent, {held} queued",
                f"+{(after - before) / 1024:.0f} MiB",
                f"{before / 1024:.0f} -> {after / 1024:.0f} MiB"
                + (f"; {len(refused)} answered {sorted(set(refused))} at once" if refused else ""),
                "info",
            ),
            (
                "memory per queued run",
                f"{per_run:.1f} MiB",
                "(after - before) / runs queued",
                "info",
            ),
        ]
    finally:
        instance.stop()


async def main_async(args: argparse.Namespace) -> int:
    reaper = Reaper()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        project = Path(tmp) / "demo"
        write_project(project, {"notes": [str(NOTES)]})
        try:
            rows, ok = await bench_loop(project, reaper)
            rows += await bench_queue(project, reaper, args.queued)
        finally:
            reaper.kill_all()
    print_table(rows)
    return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queued", type=int, default=24, help="runs queued in (2)")
    parser.add_argument("--workdir", default=None, help="where the throw-away project goes")
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
