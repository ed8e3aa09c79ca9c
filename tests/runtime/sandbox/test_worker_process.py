"""runtime/sandbox/worker_process.py: which worker the host starts (native when built, unless
CODEMODE_SANDBOX_WORKER says otherwise), and that the process it starts is found as a sandbox
worker by the suite's helper (tests/conftest.py), whichever kind it is."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codemode_gen.runtime.native import launch
from codemode_gen.runtime.sandbox import protocol
from codemode_gen.runtime.sandbox.worker_process import (
    WORKER_ENV,
    WorkerProcess,
    WorkerUnavailable,
    is_worker_cmdline,
    worker_command,
    worker_kind,
)
from tests.conftest import sandbox_worker_pids

PYTHON_WORKER = "codemode_gen.runtime.sandbox.worker"


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the built binary (an executable file where launch.py looks)."""
    binary = tmp_path / "codemode-worker"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", binary)
    return binary


@pytest.fixture
def missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "codemode-worker"
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", binary)
    return binary


@pytest.mark.parametrize("choice", [None, "", "auto", " Auto "])
def test_auto_starts_the_native_worker_when_it_is_built(
    choice: str | None, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if choice is None:
        monkeypatch.delenv(WORKER_ENV, raising=False)
    else:
        monkeypatch.setenv(WORKER_ENV, choice)
    assert worker_kind() == "native"
    assert worker_command()[0] == str(built)


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_starts_the_python_worker_without_the_binary(
    choice: str | None, missing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if choice is None:
        monkeypatch.delenv(WORKER_ENV, raising=False)
    else:
        monkeypatch.setenv(WORKER_ENV, choice)
    assert worker_kind() == "python"
    assert worker_command()[-2:] == ["-m", PYTHON_WORKER]


def test_python_is_chosen_even_when_the_native_worker_is_built(
    built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKER_ENV, "python")
    assert worker_kind() == "python"
    assert PYTHON_WORKER in worker_command()


def test_native_is_chosen_when_built(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKER_ENV, "native")
    assert worker_kind() == "native"


def test_native_without_the_binary_says_how_to_build_it(
    missing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WORKER_ENV, "native")
    with pytest.raises(WorkerUnavailable) as failed:
        worker_kind()
    message = str(failed.value)
    assert message.startswith("CODEMODE_SANDBOX_WORKER=native, but the native sandbox worker is")
    assert message.endswith(" -m codemode_gen.runtime.native.build`")
    with pytest.raises(WorkerUnavailable):
        worker_command()


def test_an_unknown_choice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WORKER_ENV, "rust")
    with pytest.raises(WorkerUnavailable, match=r"'rust': expected one of auto, native, python"):
        worker_kind()


def test_both_kinds_of_command_line_are_recognised_as_sandbox_workers() -> None:
    assert is_worker_cmdline(b"/venv/bin/python\0-I\0-m\0" + PYTHON_WORKER.encode() + b"\0")
    assert is_worker_cmdline(b"/site/codemode_gen/runtime/native/codemode-worker\0/js\0{}\0")
    assert not is_worker_cmdline(
        b"/venv/bin/python\0-I\0-m\0codemode_gen.runtime.sandbox.typecheck_worker\0"
    )
    assert not is_worker_cmdline(b"/usr/bin/grep\0codemode-worker\0")


@pytest.mark.parametrize("kind", ["python", "native"])
def test_the_started_worker_says_ready_and_is_found_by_its_command_line(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "native" and launch.native_worker_path() is None:
        pytest.skip(f"the native worker is not built: {launch.build_command()}")
    monkeypatch.setenv(WORKER_ENV, kind)

    async def scenario() -> tuple[int, set[int]]:
        worker = await WorkerProcess.start()
        try:
            await worker.wait_ready()
            return worker.proc.pid, sandbox_worker_pids()
        finally:
            worker.send({"op": protocol.EXIT})
            await worker.drain()
            await worker.reap()

    pid, found = asyncio.run(scenario())
    assert pid in found
