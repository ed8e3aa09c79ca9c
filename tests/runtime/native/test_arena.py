"""The realm heap (runtime/native/arena.c) and realm images (realm.c): every run after the first
gets the ready realm copied back over one stretch of memory instead of a realm built again.

What that must not change, on either worker (the Python one is the reference): memory a run is
given holds nothing an earlier run or an earlier block left there (§1.4), each run's limits are
its own whichever realm the worker held before, and a machine that will not reserve the address
space (an address-space limit) still runs everything, on realms built the old way.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox import worker_process
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool

MiB = 1024 * 1024
STRESS_C = Path(__file__).with_name("arena_stress.c")
#: Steps of the random drive per seed (with the rest, ~1.5 s a seed on an idle core).
STRESS_STEPS = 40_000

# Fills what it allocates with 0xff, drops it (QuickJS frees at once: reference counts), and
# allocates again: every new typed array must read as zeros (ECMA-262 §25.1.3.1: a new
# ArrayBuffer is zero-filled, which QuickJS asks of its allocator with calloc). Sizes cover the
# allocator's exact and geometric bins, chunks merged when freed, a chunk reused from a bin, one
# split from a bigger free chunk, big ones whose pages went back, and the top falling and rising.
DIRTY_THEN_CHECK = """
const sizes = [16, 100, 1000, 5000, 60000, 70000, 300000, 3 << 20, 9 << 20];
let dirty = 0;
for (let round = 0; round < 3; round++) {
  for (const n of sizes) {
    const fresh = new Uint8Array(n);
    if (fresh.indexOf(255) !== -1) dirty++;
    fresh.fill(255);
  }
  const keep = [];
  for (const n of sizes) keep.push(new Uint8Array(n).fill(255));
  keep.length = 0;
  const small = [];
  for (let i = 0; i < 2000; i++) small.push(new Float64Array(8));
  if (small.some((a) => a.some((x) => x !== 0))) dirty++;
  for (const a of small) a.fill(NaN);
}
globalThis.__codemode_result__ = dirty;
"""

BIG_STRING = 'globalThis.__codemode_result__ = "y".repeat(16 * 1024 * 1024).length;'


def run_all(scripts: list[tuple[str, dict[str, Any]]]) -> list[Response]:
    """Each (script, limits) in turn on one worker (so each run gets the realm the last one left
    the worker to make), and that the same worker served them all."""

    async def host(request: dict[str, Any]) -> Any:
        return {"ok": True, "value": None}

    async def scenario() -> list[Response]:
        pool = WorkerPool(1, max_workers=1)
        out: list[Response] = []
        async with Sandbox(pool) as sandbox:
            pid = None
            for code, limits in scripts:
                out.append(
                    await sandbox.run(
                        code, {}, host, Limits.from_json({"timeoutMs": 20_000, **limits})
                    )
                )
                assert len(pool._idle) == 1
                assert pid in (None, pool._idle[0].proc.pid), "the worker was replaced"
                pid = pool._idle[0].proc.pid
        return out

    return asyncio.run(asyncio.wait_for(scenario(), 300))


def codes(r: Response) -> list[str]:
    return [d["code"] for d in r["diagnostics"]]


@pytest.mark.usefixtures("sandbox_worker")
def test_s1_4_memory_a_run_is_given_holds_nothing_an_earlier_run_left() -> None:
    results = run_all([(DIRTY_THEN_CHECK, {})] * 4)
    assert [(r["result"], codes(r)) for r in results] == [(0, [])] * 4


@pytest.mark.usefixtures("sandbox_worker")
def test_s1_4_each_run_has_its_own_memory_limit_whatever_realm_came_before() -> None:
    # A 16 MB string (32 MB of UTF-16 in the worst case) fits the default 64 MiB heap, not an
    # 8 MiB one; runs alternate, so a worker holding a realm (or its image) with one limit is
    # asked for the other each time.
    small: dict[str, Any] = {"maxMemoryBytes": 8 * MiB}
    default: dict[str, Any] = {}
    results = run_all([(BIG_STRING, small), (BIG_STRING, default)] * 2 + [(BIG_STRING, small)])
    assert [codes(r) or r["result"] for r in results] == [
        ["SANDBOX_LIMIT"],
        16 * MiB,
        ["SANDBOX_LIMIT"],
        16 * MiB,
        ["SANDBOX_LIMIT"],
    ]


@pytest.fixture
def address_space_kib(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[int]:
    """Native workers started under `ulimit -v` (the parameter, KiB), as a user's shell may
    start them: the worker's command line is wrapped in a shell that sets it and execs."""
    from codemode_gen.runtime.native import launch

    if launch.native_worker_path() is None:
        pytest.skip(f"the native worker is not built: run `{launch.build_command()}`")
    monkeypatch.setenv(worker_process.WORKER_ENV, "native")
    kib: int = request.param
    original: Callable[[], list[str]] = worker_process.worker_command

    def limited() -> list[str]:
        return ["/bin/sh", "-c", f'ulimit -v {kib} && exec "$@"', "sh", *original()]

    monkeypatch.setattr(worker_process, "worker_command", limited)
    yield kib


# 1,000,000 KiB refuses the 4 GiB and 1 GiB reservations (the 256 MiB one is taken: 64 MiB realms
# use it, a 128 MiB one cannot); 200,000 KiB refuses them all: every realm gets its own blocks.
@pytest.mark.parametrize("address_space_kib", [1_000_000, 200_000], indirect=True)
def test_a_worker_under_an_address_space_limit_runs_everything(address_space_kib: int) -> None:
    results = run_all(
        [
            (DIRTY_THEN_CHECK, {}),
            (BIG_STRING, {"maxMemoryBytes": 8 * MiB}),
            (BIG_STRING, {}),
            (BIG_STRING, {"maxMemoryBytes": 128 * MiB}),
            (DIRTY_THEN_CHECK, {}),
            (BIG_STRING, {}),
        ]
    )
    assert [codes(r) or r["result"] for r in results] == [
        0,
        ["SANDBOX_LIMIT"],
        16 * MiB,
        16 * MiB,
        0,
        16 * MiB,
    ]


@pytest.fixture(scope="module")
def arena_stress(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/runtime/native/arena_stress.c built with the compiler and flags of the worker's own
    build (runtime/native/build.py), against the arena.c the worker is built from."""
    from codemode_gen.runtime.native import build

    try:
        cc = build.compiler()
    except build.BuildError as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("arena") / "arena_stress"
    native = build.NATIVE_DIR
    subprocess.run(
        [
            *cc,
            *build.CFLAGS,
            f"-I{native}",
            f"-I{native / 'quickjs'}",
            "-o",
            str(out),
            str(STRESS_C),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_realm_heap_keeps_mallocs_promises_through_random_use_and_images(
    arena_stress: Path, seed: int
) -> None:
    done = subprocess.run(
        [str(arena_stress), str(seed), str(STRESS_STEPS)], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.startswith("ok "), done.stdout + done.stderr
