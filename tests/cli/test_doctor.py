"""`codemode-gen doctor`: which sandbox worker runs scripts, and the command that builds the
native one when it is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode_gen.cli import main
from codemode_gen.runtime.native import launch
from codemode_gen.runtime.sandbox.worker_process import WORKER_ENV


def run(capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as info:
        main(["doctor"])
    out, err = capsys.readouterr()
    assert err == ""
    return int(info.value.code or 0), out.splitlines()


def test_without_the_native_worker_it_says_python_and_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "codemode-worker"
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", missing)
    monkeypatch.delenv(WORKER_ENV, raising=False)
    code, lines = run(capsys)
    assert code == 0
    assert lines[0].startswith("codemode-gen ")
    assert lines[1] == f"sandbox worker: python (the native one is not built: {missing})"
    assert lines[2] == f"  build the native one: {launch.build_command()}"
    assert lines[2].endswith(" -P -m codemode_gen.runtime.native.build")
    assert lines[3].startswith("  C compiler: ")


def test_with_the_native_worker_it_says_native(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "codemode-worker"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", binary)
    monkeypatch.delenv(WORKER_ENV, raising=False)
    assert run(capsys)[1][1:] == [f"sandbox worker: native, {binary} ({WORKER_ENV} unset: auto)"]
    monkeypatch.setenv(WORKER_ENV, "python")
    assert run(capsys)[1][1:] == [
        f"sandbox worker: python ({WORKER_ENV}=python; the native one is built: {binary})"
    ]


def test_a_worker_that_cannot_start_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", tmp_path / "codemode-worker")
    monkeypatch.setenv(WORKER_ENV, "native")
    code, lines = run(capsys)
    assert code == 1
    assert lines[1].startswith("sandbox worker: none can start: CODEMODE_SANDBOX_WORKER=native")
    assert lines[1].endswith("-m codemode_gen.runtime.native.build`")


def test_the_installed_command_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k != WORKER_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "codemode_gen", "doctor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    kind = "native" if launch.native_worker_path() is not None else "python"
    assert proc.stdout.splitlines()[1].startswith(f"sandbox worker: {kind}")
