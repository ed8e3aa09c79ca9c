"""`codemode-gen record --check` end to end: real server processes over stdio (and one HTTP
address nobody listens on), the committed fixtures never touched.

The server is tests/servers/drift_server.py: recorded once as variant `a`, then checked as
`a` (no drift), `b` (drift: a tool added, a description and an input schema changed, a result
shape changed, plus value changes that are not drift) and `c` (a sample call fails).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.cli import main
from tests.conftest import free_port
from tests.generator.test_record import record, stdio_entry, write_config

SAMPLES = [
    {"server": "drift", "tool": "lookup", "input": {"id": 1}},
    {"server": "drift", "tool": "lookup", "input": {"id": 2}},
    {"server": "drift", "tool": "search", "input": {"query": "x"}},
    {"server": "drift", "tool": "delete_item", "input": {"id": 9}},  # recorded, never repeated
]
# What a check of variant `a` calls: every recorded sample of a read-only tool, once each
# (ping, count, clock and tally were probed by record; delete_item is not read-only).
REPEATED = ["clock", "count", "lookup", "lookup", "ping", "search", "tally"]


def drift_entry(variant: str, calls_log: Path | None = None) -> dict[str, Any]:
    extra = ["--calls-log", str(calls_log)] if calls_log is not None else []
    return stdio_entry("drift_server", "--variant", variant, *extra)


def tree_hash(folder: Path) -> str:
    """Every path (folders too, hidden ones too) and every file's bytes under `folder`."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/ of variant `a`, recorded once for the module (each test copies it)."""
    project = tmp_path_factory.mktemp("recorded")
    config = write_config(project, {"drift": drift_entry("a")})
    samples = project / "samples.json"
    samples.write_text(json.dumps(SAMPLES), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        pytest.raises(SystemExit) as info,
    ):
        main(["record", "--config", str(config), "--samples", str(samples)])
    assert info.value.code == 0, out.getvalue() + err.getvalue()
    return project / "fixtures"


@pytest.fixture
def project(tmp_path: Path, recorded: Path) -> Path:
    shutil.copytree(recorded, tmp_path / "fixtures")
    return tmp_path


def check(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return record(project, capsys, "--check", *args)


def test_unchanged_server_exit_0_repeats_only_read_only_samples(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls_log = project / "calls.log"
    write_config(project, {"drift": drift_entry("a", calls_log)})
    before = tree_hash(project / "fixtures")
    code, out, err = check(project, capsys)
    assert code == 0, out + err
    assert "drift: up to date (7 tools, 7 results compared)" in out
    assert out.rstrip().endswith(f"no drift: the 1 server checked match {project / 'fixtures'}/")
    # bounded: each recorded sample of a readOnlyHint tool once, never delete_item
    assert sorted(calls_log.read_text().split()) == REPEATED
    assert tree_hash(project / "fixtures") == before


def test_drift_names_added_tool_input_schema_and_result_shape(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(project, {"drift": drift_entry("b")})
    before = tree_hash(project / "fixtures")
    code, out, err = check(project, capsys)
    assert code == 1, out + err
    report = out.splitlines()
    assert report[report.index("drift: drift, 7 findings (8 tools, 7 results compared)") + 1 :] == [
        "  archive: tool added (not in the fixtures)",
        "  lookup: result shape changed at /id: expected number, got string (samples 1, 2)",
        "  lookup: result shape changed at /tags: expected array, got nothing (missing) (samples 1, 2)",
        '  ping: description changed: "Answer pong." -> "Answer pong, politely."',
        '  search: inputSchema changed at /properties/limit: added {"type":"integer"}',
        '  search: inputSchema changed at /required: ["query"] -> ["query","limit"]',
        # a map (keys are data): its value shape changed, one finding for all its keys
        "  tally: result shape changed at /byTag/*: expected number, got string (sample 1)",
    ]
    # count's -2.5 breaks only `minimum` and `integer` (not the TypeScript type), lookup's new
    # name and clock's new time are values: none of them is drift
    assert not any(word in line for line in report[1:] for word in ("count", "clock", "name"))
    assert (
        "error: drift in 1 of 1 server: drift" in err
        and "codemode-gen record --server drift" in err
    )
    assert tree_hash(project / "fixtures") == before  # nothing written, no staging folder left
    assert check(project, capsys)[1] == out  # the same report again


def test_maps_compare_value_shapes_not_keys(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tally`'s byTag and byDay were recorded as maps (their keys are data): other tags, days
    and counts are values, not drift (variant `b`'s strings for counts are, in the test above)."""
    recorded = json.loads((project / "fixtures" / "drift" / "calls" / "tally.jsonl").read_text())
    assert {"books", "home"} <= set(
        recorded["result"]["structuredContent"]["byTag"]
    )  # `d` has neither
    write_config(project, {"drift": drift_entry("d")})
    code, out, err = check(project, capsys)
    assert code == 0, out + err
    assert "drift: up to date (7 tools, 7 results compared)" in out


def test_unreachable_servers_are_not_drift_but_exit_3(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for sid in ("crashing", "nobody"):
        shutil.copytree(project / "fixtures" / "drift", project / "fixtures" / sid)
    write_config(
        project,
        {
            "drift": drift_entry("a"),
            "crashing": stdio_entry("crash_at_start"),
            "nobody": {"type": "http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
        },
    )
    before = tree_hash(project / "fixtures")
    code, out, err = check(project, capsys)
    assert code == 3, out + err
    assert "crashing: unreachable: server exited during startup" in out
    assert "database file missing" in out  # its stderr, quoted
    assert "nobody: unreachable: connection refused" in out
    assert "drift: up to date" in out
    statuses = [line.split(":")[0] for line in out.splitlines()[1:] if not line.startswith(" ")]
    assert statuses[:3] == ["crashing", "drift", "nobody"]  # sorted by server id
    assert (
        "error: no drift seen, but 2 of 3 servers could not be checked (completely): crashing, nobody"
        in err
    )
    assert tree_hash(project / "fixtures") == before

    # drift elsewhere wins: exit 1, and the unreachable server is still named as such
    write_config(project, {"drift": drift_entry("b"), "crashing": stdio_entry("crash_at_start")})
    code, out, err = check(project, capsys)
    assert code == 1
    assert "crashing: unreachable: server exited during startup" in out
    assert "error: drift in 1 of 2 servers: drift; could not check crashing" in err


def test_failed_sample_call_could_not_be_checked(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(project, {"drift": drift_entry("c")})
    code, out, err = check(project, capsys)
    assert code == 3, out + err
    assert (
        "drift: no drift found, but 2 samples could not be checked (7 tools, 5 results compared)"
        in out
    )
    assert (
        "  could not check: lookup sample 1: call failed: lookup backend unavailable (code -32050)"
        in out
    )


def test_server_without_fixtures_is_drift_not_recorded_yet(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(project, {"drift": drift_entry("a"), "newbie": drift_entry("a")})
    (project / "fixtures" / "stray").mkdir()
    code, out, err = check(
        project, capsys, "--server", "newbie"
    )  # never started: nothing to compare
    assert code == 1, out + err
    newbie = project / "fixtures" / "newbie"
    assert (
        f"newbie: not recorded yet: no {newbie}/ (run `codemode-gen record --server newbie`)" in out
    )
    assert "error: drift in 1 of 1 server: newbie" in err
    assert "stray" not in out  # only named servers were asked about
    assert not newbie.exists()


def test_configuration_errors_exit_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(project, {"drift": drift_entry("a")})
    code, _out, err = check(project, capsys, "--server", "nope")
    assert code == 2 and "--server nope: no such server" in err
    code, _out, err = check(project, capsys, "--fixtures", "elsewhere")
    assert code == 2 and "elsewhere: fixtures folder not found" in err
    code, _out, err = check(project, capsys, "--no-probe", "--max-samples", "3")
    assert code == 2 and "it takes no --no-probe, --max-samples" in err
    tools = project / "fixtures" / "drift" / "tools.json"
    tools.write_text("[", encoding="utf-8")
    code, _out, err = check(project, capsys)
    assert code == 2 and "tools.json:1:2: invalid JSON" in err
    (project / ".mcp.json").write_text("{", encoding="utf-8")
    code, _out, err = check(project, capsys)
    assert code == 2 and ".mcp.json:1:2: invalid JSON" in err
    assert "Traceback" not in err


def test_help_documents_check_and_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["record", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--check" in text
    for status in (
        "0 every server matches",
        "1 drift in at least one server",
        "2 configuration error",
        "3 no drift seen",
    ):
        assert status in text


def test_check_leaves_a_crashed_records_hidden_copy_alone(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a reader, like generate: it reports what an interrupted record left, never repairs it
    fixtures = project / "fixtures"
    holder = fixtures / ".drift.old-abcd1234"
    holder.mkdir()
    (fixtures / "drift").rename(holder / "drift")
    write_config(project, {"drift": drift_entry("a")})
    before = tree_hash(fixtures)
    code, _out, err = check(project, capsys)
    assert code == 2 and "an interrupted record left" in err
    assert tree_hash(fixtures) == before
    assert os.listdir(fixtures) == [".drift.old-abcd1234"]


def test_redacted_recordings_compare_and_redacted_inputs_are_not_resent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # results are compared after record's redaction; a recorded input that was redacted holds
    # the placeholder, not the secret, so it is never sent again
    secret = "hunter2-very-secret"
    monkeypatch.setenv("MY_SECRET", secret)
    write_config(tmp_path, {"slow": stdio_entry("slow", env={"SLOW_SECRET": "${MY_SECRET}"})})
    samples = tmp_path / "samples.json"
    samples.write_text(
        json.dumps(
            [
                {"server": "slow", "tool": "env", "input": {"name": "SLOW_SECRET"}},
                {"server": "slow", "tool": "echo", "input": {"value": f"key {secret}"}},
            ]
        )
    )
    code, out, _err = record(tmp_path, capsys, "--samples", str(samples), "--no-probe")
    assert code == 0, out
    before = tree_hash(tmp_path / "fixtures")
    code, out, err = check(tmp_path, capsys)
    assert code == 0, out + err
    assert "slow: up to date (12 tools, 1 result compared)" in out
    assert "note: echo sample 1: not repeated: its recorded input was redacted" in out
    assert secret not in out + err
    assert tree_hash(tmp_path / "fixtures") == before
