"""Two sandbox workers, one protocol: the host cannot tell them apart.

The host starts either the Python worker (runtime/sandbox/worker.py) or the native one
(runtime/native/: the C shell `codemode-worker` and runtime/js/supervisor.js), whichever
`CODEMODE_SANDBOX_WORKER` and the build choose (runtime/sandbox/worker_process.py), and speaks
the same pipe protocol to both (runtime/sandbox/protocol.py, runtime/native/INTERFACE.md).
Everything the host concludes about a run (its result, logs, errors, calls, journal) comes from
what the worker writes on that pipe; so for the same messages in, both workers must write the
same messages out. Each case plays one scenario (tests/runtime/native/conformance_scenarios.py)
against each worker, started with its real command line, and compares the two transcripts,
message by message, with only the wall-clock readings masked (`normalise`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codemode_gen.runtime.native import launch
from codemode_gen.runtime.sandbox.worker_process import (
    NATIVE_WORKER_BINARY,
    PYTHON_WORKER_MODULE,
    WORKER_ENV,
    worker_command,
)
from tests.runtime.native.conformance_scenarios import SCENARIOS, Scenario, Transcript, play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        launch.native_worker_path() is None,
        reason=f"the native worker is not built: run `{launch.build_command()}`",
    ),
]


def command_of(kind: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The command line the host itself starts a worker of `kind` with."""
    monkeypatch.setenv(WORKER_ENV, kind)
    return worker_command()


def both(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> tuple[Transcript, Transcript]:
    """`scenario` played against the Python worker and the native one, side by side."""
    python, native = command_of("python", monkeypatch), command_of("native", monkeypatch)
    assert PYTHON_WORKER_MODULE in python and Path(native[0]).name == NATIVE_WORKER_BINARY

    async def main() -> tuple[Transcript, Transcript]:
        return await asyncio.gather(play(python, scenario), play(native, scenario))

    return asyncio.run(main())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_native_worker_says_what_the_python_worker_says(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    python, native = both(scenario, monkeypatch)
    stderr = "".join(
        f"\n{kind} worker stderr:\n{t.stderr[-2000:]}"
        for kind, t in (("python", python), ("native", native))
        if t.stderr
    )
    assert native.comparable() == python.comparable(), stderr
    assert python.exit == "code 0", stderr  # both played it through and exited when told
