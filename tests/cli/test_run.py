"""`codemode-gen run` as a user runs it: a real process, a real .mcp.json, the demo server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sandbox_worker_pids
from tests.runtime_support import PYTHON, script

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "codemode_gen"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("runcli")
    (base / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": PYTHON, "args": [script("notes_server")]}}})
    )
    (base / "ok.js").write_text(
        "import { get_note } from '@codemode/servers/notes';\n"
        "const n = await get_note({id: 2});\nconsole.log('got', n.id);\n"
        "globalThis.__codemode_result__ = n.title;\n"
    )
    (base / "fails.js").write_text("console.log('before');\nthrow new Error('script broke');\n")
    return base


def run_cli(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=90
    )


@pytest.mark.slow
def test_run_prints_the_response_and_exits_0(project: Path) -> None:
    proc = run_cli(project, "--no-pretty", "--capability", "notes", "--capability", "nope", "ok.js")
    assert proc.returncode == 0, proc.stderr  # warnings do not fail the run
    response = json.loads(proc.stdout)
    warned = [d for d in response["diagnostics"] if d["severity"] == "warning"]
    assert len(warned) == 1 and "nope" in warned[0]["message"]
    assert response["result"] == "Groceries"
    assert response["logs"][0]["message"] == "got 2"
    assert response["toolTrace"][0]["toolName"] == "get_note"


@pytest.mark.slow
def test_run_reads_the_script_from_stdin_and_exits_1_on_failure(project: Path) -> None:
    proc = run_cli(project, "--pretty", "-", stdin=(project / "fails.js").read_text())
    assert proc.returncode == 1
    response = json.loads(proc.stdout)  # --pretty goes to stderr; stdout stays JSON
    assert response["result"] is None and response["logs"][0]["message"] == "before"
    assert response["diagnostics"][-1]["code"] == "UNCAUGHT_EXCEPTION"
    assert "UNCAUGHT_EXCEPTION" in proc.stderr and "before" in proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--limits", "{not json", "ok.js"], "--limits"),
        (["--limits", '{"timeoutMs": "x"}', "ok.js"], "timeoutMs"),
        (["missing.js"], "missing.js"),
        (["--config", "nope.json", "ok.js"], "nope.json"),
    ],
)
def test_run_usage_and_config_errors_exit_2(project: Path, args: list[str], needle: str) -> None:
    proc = run_cli(project, *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error:") and needle in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes through /proc")
def test_run_starts_one_sandbox_worker(project: Path) -> None:
    # One run needs one worker: a second would start beside the server and the SDK's import
    # on the cold start and hold its memory for nothing.
    import time

    (project / "waits.js").write_text(
        "await new Promise((r) => setTimeout(r, 1500));\nglobalThis.__codemode_result__ = 1;\n"
    )
    proc = subprocess.Popen(
        [*CLI, "run", "--no-pretty", "waits.js"], cwd=project, stdout=subprocess.PIPE, text=True
    )

    def workers() -> int:
        return len(sandbox_worker_pids(proc.pid))

    peak = 0
    while proc.poll() is None:
        peak = max(peak, workers())
        time.sleep(0.05)
    out, _ = proc.communicate(timeout=90)
    assert json.loads(out)["result"] == 1
    assert peak == 1, peak
