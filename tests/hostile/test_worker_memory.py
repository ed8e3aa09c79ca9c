"""Spec §11, resource exhaustion: a worker's RSS returns to its baseline after every run.

Each run's QuickJS realm used to stay alive for ever: the jsbox Runtime holds the realm's bound
host methods in Rust, where Python's cycle collector cannot see them, so realm → engine →
Runtime → bound method → realm was a cycle nothing freed (the whole JS heap with it, up to the
memory limit per run), and the reply futures of a run stayed with it. Real worker processes and
real QuickJS here; only the host side of tool calls is a plain async function.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import weakref
from typing import Any

import pytest

from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox import outcome, protocol
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool
from codemode_gen.runtime.sandbox.worker import Done, Worker

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status"
)

MiB = 1024 * 1024
#: Allowed growth of the worker's RSS from after the first run to after the last.
RSS_SLACK = 64 * MiB
RUNS = 20

NOTES = """
import { callTool } from "@codemode/host";
export function echo(input) { return callTool("notes", "echo", input); }
export function hang(input) { return callTool("notes", "hang", input); }
export function bulk(input) { return callTool("notes", "bulk", input); }
"""
MODULES = {"@codemode/servers/notes": NOTES}

# Each kind is (script, limits, expected diagnostic code or None for a clean result).
Kind = tuple[str, dict[str, Any], str | None]
SMALL: Kind = (
    """
import { echo } from "@codemode/servers/notes";
globalThis.__codemode_result__ = await echo({ n: 1 });
""",
    {},
    None,
)
# ~40 MB of live objects and strings in a 64 MiB heap, kept until the run ends.
ALLOCATE: Kind = (
    """
const rows = [];
for (let i = 0; i < 150000; i++) rows.push({ i, s: "row " + i });
const blob = "y".repeat(16 * 1024 * 1024);
console.log(rows.length, blob.length);
globalThis.__codemode_result__ = rows.length;
""",
    {},
    None,
)
# Fills a 128 MiB heap (other limits than the warm realm's: that realm is replaced and freed).
FILL: Kind = (
    """
const keep = [];
for (;;) keep.push({ n: keep.length, s: "x" + keep.length });
""",
    {"maxMemoryBytes": 128 * MiB},
    "SANDBOX_LIMIT",
)
# A 8 MiB tool result into JS.
BULK: Kind = (
    """
import { bulk } from "@codemode/servers/notes";
const text = await bulk({});
globalThis.__codemode_result__ = text.length;
""",
    {},
    None,
)
# Tool calls and a timer still pending when the script throws: the run ends with them unanswered.
PENDING: Kind = (
    """
import { hang } from "@codemode/servers/notes";
for (let i = 0; i < 8; i++) hang({ i });
setTimeout(() => {}, 60000);
throw new Error("left calls pending");
""",
    {},
    "UNCAUGHT_EXCEPTION",
)
KINDS: list[Kind] = [SMALL, ALLOCATE, FILL, BULK, PENDING]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class Host:
    def __init__(self) -> None:
        self.cancelled = 0
        self.started = 0

    async def __call__(self, request: dict[str, Any]) -> protocol.HostReply:
        tool = request.get("toolName")
        if tool == "bulk":
            return {"ok": True, "value": "z" * (8 * MiB)}
        if tool == "hang":
            self.started += 1
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return {"ok": True, "value": request.get("input")}


@pytest.mark.slow
def test_worker_rss_returns_to_baseline_after_every_run() -> None:
    async def scenario() -> tuple[list[int], Host]:
        pool = WorkerPool(1)
        host = Host()
        rss: list[int] = []
        pid = None
        async with Sandbox(pool) as sandbox:
            for i in range(RUNS):
                code, limits, expected = KINDS[i % len(KINDS)]
                out = await sandbox.run(
                    code, MODULES, host, Limits.from_json({"timeoutMs": 10_000, **limits})
                )
                got = [d["code"] for d in out["diagnostics"]]
                assert got == ([expected] if expected else []), (i, out["diagnostics"])
                # A syntax check is answered only once the worker is idle again: it has freed the
                # run's realm and built the next one, so RSS is measured at a stable point.
                assert await sandbox.check_syntax("1") is None
                assert len(pool._idle) == 1
                worker_pid = pool._idle[0].proc.pid
                # The same process served every run (a replaced worker would hide a leak).
                assert pid in (None, worker_pid), "the worker was replaced"
                pid = worker_pid
                rss.append(rss_bytes(worker_pid))
        return rss, host

    rss, host = asyncio.run(asyncio.wait_for(scenario(), 120))
    series = [round(r / MiB) for r in rss]
    assert rss[-1] - rss[0] <= RSS_SLACK, f"worker RSS per run (MiB): {series}"
    assert max(rss) - rss[0] <= RSS_SLACK, f"worker RSS per run (MiB): {series}"
    # Every call left pending at a run's end that reached the host was cancelled there (a call
    # whose task had not started yet when the run ended never reaches it).
    assert host.cancelled == host.started


def answer(done: Done, code: str) -> tuple[Any, list[Diagnostic]]:
    """What the host makes of a `done` the worker would send for `code`."""
    line = protocol.encode_done(*done)
    return outcome.compose(protocol.decode(line.rstrip(b"\n")), code, MODULES, Limits())


def test_a_run_leaves_nothing_behind_in_the_worker() -> None:
    """Deterministic, without the cycle collector: once the answer is out, the run's realm,
    its engine and its pending reply futures are gone."""

    async def scenario() -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            worker = Worker(devnull)
            await worker.prepare_next(Limits())
            realm = worker._warm
            assert realm is not None
            table, sources = protocol.module_table(MODULES, set())
            msg = {
                "op": "run",
                "code": PENDING[0],
                "modules": table,
                "sources": sources,
                "limits": {"timeoutMs": 5000},
            }
            _, diagnostics = answer(await worker.run(msg), PENDING[0])
            assert [d["code"] for d in diagnostics] == ["UNCAUGHT_EXCEPTION"]
            assert next(worker._ids) == 9  # the script made its 8 calls (ids 1-8), unanswered:
            assert worker._replies == {}  # dropped with their futures
            assert realm.state.futures == set()
            assert worker._spent is realm
            ref = weakref.ref(realm)
            del realm
            gc.disable()
            try:
                worker.free_spent()
                assert ref() is None, [type(r).__name__ for r in gc.get_referrers(ref())]
            finally:
                gc.enable()
            # A reply that arrives after the run is ignored, and the next run is unaffected.
            worker._resolve(1, '{"ok":true,"value":1}')
            await worker.prepare_next(Limits())
            code = "globalThis.__codemode_result__ = 7;"
            done = await worker.run({"op": "run", "code": code, "limits": {}})
            assert answer(done, code) == (7, [])
            worker.free_spent()
        finally:
            os.close(devnull)

    asyncio.run(scenario())
