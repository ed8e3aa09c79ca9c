"""Spec §11, engine faults a script can reach: the run ends with its diagnostic and the worker
process lives on.

Two faults of QuickJS itself, each found in the native worker (runtime/native/) and fixed there:

- out of memory inside `Function.prototype.bind` left a bound function with no record, which the
  GC then dereferenced: a segfault, at some memory limits only (which ones depends on the exact
  heap layout). Fixed by runtime/native/quickjs/oom-fixes.patch (quickjs/README.md);
- a realm freed while a module's top-level await is still pending (its run timed out) freed the
  module before the evaluation callbacks that still point at it, and their finalizer then wrote
  into the freed module: a use-after-free that silently corrupts the C heap (an ASan build of the
  worker reports it at the first such run; a normal build may crash much later, or not).
  Contained in realm.c (realm memory is given back only once the runtime is freed).

Real worker processes, of both kinds (tests/conftest.py `sandbox_worker`), through the real
Sandbox and pool; only the host side of tool calls is a plain async function. One worker serves
every run of a test, and it must be the same process at the end: a worker that died after
answering would otherwise go unnoticed (the pool replaces dead workers).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from codemode_gen.runtime.diagnostics import memory_limit
from codemode_gen.runtime.limits import MIN_MEMORY_BYTES, Limits
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox import protocol
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool
from codemode_gen.runtime.sandbox.worker_process import WorkerKind

from .script_support import sandbox_worker_pids

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds workers in /proc"),
]

NOTES = """
import { callTool } from "@codemode/host";
export function hang(input) { return callTool("notes", "hang", input); }
"""
MODULES = {"@codemode/servers/notes": NOTES}
# Generous: no run here is meant to reach it but the top-level-await ones, which set their own.
TIMEOUT_MS = 60_000


async def host_call(request: dict[str, Any]) -> protocol.HostReply:
    if request.get("toolName") == "hang":
        await asyncio.Event().wait()  # until the run ends and cancels it
    return {"ok": True, "value": None}


async def one_worker_runs(runs: list[tuple[str, Limits]]) -> tuple[list[Response], bool]:
    """The responses to `runs` on a pool of one worker, and whether a clean run after them
    succeeded on the same worker process (the pool replaces a worker that died)."""
    async with Sandbox(WorkerPool(1, max_workers=1)) as sandbox:
        before = sandbox_worker_pids()
        responses = [await sandbox.run(code, MODULES, host_call, limits) for code, limits in runs]
        after = await sandbox.run(
            "globalThis.__codemode_result__ = 'still here';", MODULES, host_call, Limits()
        )
        usable = after["diagnostics"] == [] and after["result"] == "still here"
        return responses, usable and len(before) == 1 and sandbox_worker_pids() == before


# --- out of memory in Function.prototype.bind -----------------------------------------------

# Binds until the heap is full: some allocation inside bind fails sooner or later.
BIND_UNTIL_OOM = (
    "function r(n) { return [r.bind(null, n)]; }\nconst a = [];\nfor (;;) a.push(r(1));"
)
# The limits swept: the crash needed one of a few exact limits (4 of these 32 with the unpatched
# engine), so the sweep covers 128 KiB from the least limit a caller may set.
LIMIT_STEP = 4 * 1024
SWEPT_LIMITS = [MIN_MEMORY_BYTES + i * LIMIT_STEP for i in range(32)]


def test_running_out_of_memory_in_bind_is_a_memory_limit_at_every_limit(
    sandbox_worker: WorkerKind,
) -> None:
    if sandbox_worker == "python":
        pytest.skip(
            "jsbox's QuickJS has the same bug (out of memory in Function.prototype.bind: the GC "
            "dereferences a bound function with no record, a segfault); only the native worker's "
            "QuickJS is patched (runtime/native/quickjs/oom-fixes.patch)"
        )
    runs = [(BIND_UNTIL_OOM, Limits(timeoutMs=TIMEOUT_MS, maxMemoryBytes=n)) for n in SWEPT_LIMITS]
    responses, still_serves = asyncio.run(one_worker_runs(runs))
    wrong = {
        limit: r["diagnostics"]
        for limit, r in zip(SWEPT_LIMITS, responses, strict=True)
        if r["diagnostics"] != [memory_limit(limit)] or r["result"] is not None
    }
    assert not wrong, wrong
    assert still_serves


# --- a realm freed while the module's top-level await is pending --------------------------------

PENDING_AT_TIMEOUT = {
    # awaiting a tool call that never answers: the case that reached the freed module
    "tool call": 'import { hang } from "@codemode/servers/notes";\nconsole.log("waiting");\nawait hang({});',
    "calls after a dynamic import": 'const { hang } = await import("@codemode/servers/notes");\nawait Promise.all([hang({ i: 1 }), hang({ i: 2 })]);',
    "timer": "await new Promise((resolve) => setTimeout(resolve, 600000));",
}
TLA_TIMEOUT_MS = 300
ROUNDS = 2


def test_runs_timing_out_inside_top_level_await_leave_the_worker_sound(
    sandbox_worker: WorkerKind,
) -> None:
    scripts = list(PENDING_AT_TIMEOUT.items()) * ROUNDS
    runs = [(code, Limits(timeoutMs=TLA_TIMEOUT_MS)) for _, code in scripts]
    responses, still_serves = asyncio.run(one_worker_runs(runs))
    for (name, _), r in zip(scripts, responses, strict=True):
        assert [d["code"] for d in r["diagnostics"]] == ["SANDBOX_LIMIT"], (name, r)
        assert "timeoutMs" in r["diagnostics"][0]["message"] and r["result"] is None, (name, r)
    assert still_serves
