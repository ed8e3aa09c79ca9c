"""The repository's own artefacts: committed out/ is fresh, the README example type-checks
and runs end to end on the demo servers, and the code is ruff/mypy clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from . import typecheck
from .tsc import require_tsc

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "examples" / "plan_week.js"


def _env() -> dict[str, str]:
    # As the README's first command runs: the venv active (the demo .mcp.json itself needs no
    # PATH: ${CODEMODE_PYTHON:-python} is the interpreter running codemode-gen).
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode_gen", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_committed_out_matches_committed_fixtures() -> None:
    proc = _cli("generate", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_example_script_type_checks_against_generated_declarations(tmp_path: Path) -> None:
    tsc = require_tsc()
    config = {
        "compilerOptions": {
            "target": "ES2022",
            "module": "ES2022",
            "moduleResolution": "bundler",
            "lib": ["ES2022"],
            "types": [],
            "strict": True,
            "noEmit": True,
            "skipLibCheck": False,
            "allowJs": True,
            "checkJs": True,
        },
        "files": [str(REPO / "out" / "codemode.d.ts"), str(EXAMPLE)],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    proc = subprocess.run(
        [str(tsc), "-p", str(tmp_path / "tsconfig.json"), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout
    # The check is real: a wrongly typed argument is rejected.
    bad = tmp_path / "bad.js"
    bad.write_text(
        EXAMPLE.read_text().replace("notes.list_notes()", "notes.list_notes({ tag: 3 })")
    )
    config["files"] = [str(REPO / "out" / "codemode.d.ts"), str(bad)]
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    proc = subprocess.run(
        [str(tsc), "-p", str(tmp_path / "tsconfig.json"), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "not assignable to type 'string'" in proc.stdout


@pytest.mark.slow
def test_example_chains_two_live_servers() -> None:
    proc = _cli("run", str(EXAMPLE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    response = json.loads(proc.stdout)
    assert [d for d in response["diagnostics"] if d["severity"] != "info"] == []
    assert response["result"]["booked"][0]["note"] == "Groceries"
    servers = {entry["serverId"] for entry in response["toolTrace"]}
    assert servers == {"notes", "calendar"}
    assert all(entry["ok"] for entry in response["toolTrace"])


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / "ruff"
    if not exe.exists():
        exe = Path(shutil.which("ruff") or "ruff")
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_code_is_lint_clean() -> None:
    proc = ruff("check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_code_is_formatted() -> None:
    # pyproject pins ruff's minor, so the formatter's style cannot change under a clean checkout.
    proc = ruff("format", "--check", ".")
    assert proc.returncode == 0, "run `ruff format .`:\n" + proc.stdout + proc.stderr


@pytest.mark.slow
def test_code_is_type_clean_as_installed() -> None:
    """mypy over codemode_gen as installed (generator/ as codemode_gen.generator, …), tests/
    and bench/: see tests/typecheck.py."""
    proc = typecheck.run_mypy()
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_type_check_catches_a_wrong_call_between_layers(tmp_path: Path) -> None:
    # The runtime calls the generator's build_outputs (for servers out/ lacks): a copy of the
    # runtime module that calls it wrongly must fail the check, naming the repository file.
    source = (REPO / "runtime" / "codemode" / "builds.py").read_text(encoding="utf-8").rstrip("\n")
    probe = (
        "\n\n\ndef _probe() -> None:\n"
        "    from codemode_gen.generator.build import build_outputs\n\n"
        "    build_outputs(42, 'not settings', bogus=True)\n"
    )
    line = source.count("\n") + probe.count("\n")
    proc = typecheck.run_mypy(
        {"runtime/codemode/builds.py": source + probe}, cache_dir=tmp_path / "mypy_cache"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    where = f"runtime/codemode/builds.py:{line}: error:"
    errors = [row for row in proc.stdout.splitlines() if row.startswith(where)]
    assert any(
        'Unexpected keyword argument "bogus" for "build_outputs"' in row for row in errors
    ), proc.stdout
    assert any(
        'Argument 1 to "build_outputs" has incompatible type "int"' in row for row in errors
    ), proc.stdout
