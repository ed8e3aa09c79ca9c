"""`record` against a hostile server, then `generate` (spec §11: server responses are
untrusted input). Real processes: codemode-gen and tests/hostile/record_server.py.

The server lists 28 good tools, tools whose names are hostile as file names (300 characters,
`/`, `../`, NUL, control characters, non-ASCII, a leading dot, two names equal but for case, a
Windows device name), a tool answering with 50 MiB of text and one answering with NaN.
`record` must keep every good tool, cap the big one, report the bad one (never a traceback),
and `generate` must then work on what it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.config import DEFAULT_MAX_RESULT_BYTES, MIN_RESULT_BYTES
from codemode_gen.generator.fixtures import MAX_CALLS_FILE_NAME_CHARS, load_fixture_set

from . import record_server  # the server's tool names, not its process

pytestmark = pytest.mark.slow  # every test runs record (and generate) against a real server

PYTHON = sys.executable
SERVER = Path(__file__).resolve().parent / "record_server.py"

# Bounds each codemode-gen command; the 50 MiB answer is slow to read (the SDK's stdio reader
# joins its buffer per chunk), but must still finish.
COMMAND_TIMEOUT_S = 240


def _project(tmp_path: Path, *server_args: str, toml: str = "") -> Path:
    entry = {"command": PYTHON, "args": [str(SERVER), "stdio", *server_args]}
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"hostile": entry}}), encoding="utf-8"
    )
    if toml:
        (tmp_path / "codemode.toml").write_text(toml, encoding="utf-8")
    return tmp_path


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [PYTHON, "-m", "codemode_gen", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def _calls(project: Path) -> dict[str, list[dict[str, Any]]]:
    return load_fixture_set(project / "fixtures" / "hostile").calls


def _assert_generate_works(project: Path) -> None:
    gen = _run(project, "generate")
    assert gen.returncode == 0, gen.stdout + gen.stderr
    assert "Traceback" not in gen.stdout + gen.stderr
    manifest = json.loads((project / "out" / "manifest.json").read_text(encoding="utf-8"))
    (server,) = manifest["servers"]
    listed = {tool["toolName"] for tool in server["tools"]}
    assert set(record_server.GOOD + record_server.NAMES) <= listed
    check = _run(project, "generate", "--check")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.timeout(600)
def test_record_keeps_good_tools_caps_the_bomb_reports_nan_then_generate(tmp_path: Path) -> None:
    project = _project(tmp_path)
    proc = _run(project, "record")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output  # only probes failed: a report, not a failure
    assert "Traceback" not in output
    assert (
        "\x1b" not in output and "\x00" not in output
    )  # server names never reach the terminal raw

    calls = _calls(project)
    # every good tool and every hostile name: recorded under its canonical name
    for name in record_server.GOOD + record_server.NAMES:
        (call,) = calls[name]
        assert call["result"]["structuredContent"] == {"tool": name}
    calls_dir = project / "fixtures" / "hostile" / "calls"
    files = [p.name for p in calls_dir.iterdir()]
    assert all(p.parent == calls_dir for p in (project / "fixtures").rglob("*.jsonl"))
    for file_name in files:
        assert file_name.isascii() and file_name.isprintable() and not file_name.startswith(".")
        assert len(file_name) <= MAX_CALLS_FILE_NAME_CHARS
    assert len({f.lower() for f in files}) == len(files)  # "Case"/"case": two files everywhere

    # the 50 MiB answer: kept, cut to the default cap, marked, and warned about
    (big,) = calls["big_text"]
    assert big["truncated"]["originalBytes"] > 50 * 1024 * 1024
    assert big["truncated"]["keptBytes"] <= DEFAULT_MAX_RESULT_BYTES
    assert "cut by codemode-gen record" in big["result"]["content"][0]["text"]
    assert (calls_dir / "big_text.jsonl").stat().st_size < DEFAULT_MAX_RESULT_BYTES + 1024
    assert "warning: hostile: big_text {}: result of" in proc.stdout

    # NaN: not recorded, and said (by the transport or by record's own check)
    assert "nan_result" not in calls
    (line,) = [ln for ln in proc.stdout.splitlines() if "nan_result" in ln]
    assert "NaN" in line or "nan" in line
    for path in calls_dir.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "NaN" not in text and "Infinity" not in text
    assert [p.name for p in (project / "fixtures").iterdir()] == ["hostile"]  # nothing hidden

    _assert_generate_works(project)


def test_asked_sample_with_infinity_fails_alone_and_small_cap_applies(tmp_path: Path) -> None:
    """A sample the user asked for whose result is not JSON fails the run, naming the call; the
    other tools are still written. `max_result_bytes` from codemode.toml is the cap."""
    cap = MIN_RESULT_BYTES * 4
    project = _project(tmp_path, "--big-bytes", "600000", toml=f"max_result_bytes = {cap}\n")
    samples = project / "samples.json"
    samples.write_text(json.dumps([{"server": "hostile", "tool": "inf_sample", "input": {}}]))
    proc = _run(project, "record", "--samples", str(samples))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "Traceback" not in output
    (failed,) = [ln for ln in proc.stdout.splitlines() if "sample inf_sample" in ln]
    assert "Infinity" in failed or "inf" in failed
    calls = _calls(project)
    assert "inf_sample" not in calls
    assert set(record_server.GOOD + record_server.NAMES) <= set(calls)
    (big,) = calls["big_text"]
    assert set(big["truncated"]) == {"originalBytes", "keptBytes"}
    assert big["truncated"]["originalBytes"] > 600_000
    assert cap - 200 < big["truncated"]["keptBytes"] <= cap
    _assert_generate_works(project)


def test_nan_over_http_is_not_recorded(tmp_path: Path, start_server: Any) -> None:
    """The SDK's Streamable HTTP client parses NaN into a float: record's own check refuses it
    (a warning; a note if a stricter transport refuses the frame first)."""
    # server_script() looks in tests/servers; this server lives next door in tests/hostile
    http = start_server("../hostile/record_server", "http", "--big-bytes", "10")
    entry = {"type": "http", "url": http.mcp_url}
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"hostile": entry}}), encoding="utf-8"
    )
    proc = _run(tmp_path, "record")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "Traceback" not in output
    (line,) = [ln for ln in proc.stdout.splitlines() if "nan_result" in ln]
    assert line.startswith(
        ("  warning: hostile: probe nan_result {}:", "  note: hostile: probe nan_result {}:")
    ), line
    assert "not valid JSON" in line or "NaN" in line
    calls = _calls(tmp_path)
    assert "nan_result" not in calls and set(record_server.GOOD) <= set(calls)
    _assert_generate_works(tmp_path)
