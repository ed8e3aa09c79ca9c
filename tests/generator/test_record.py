"""`codemode-gen record` end to end against real servers, plus its pure helpers."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.cli import main
from codemode_gen.config import Sample
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import calls_file_name, load_fixture_set
from codemode_gen.generator.probe import fill_input, probe_input
from codemode_gen.generator.recorded import merge_calls
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.samples import load_samples_file
from codemode_gen.jsonio import dumps_stable
from tests.conftest import PYTHON, REPO, child_pids, pid_alive, server_script

NOTES_PROBED = {"export-csv", "list_notes", "render_chart", "stats", "summary", "tasks.list"}
# Read-only, with a required argument a probe's result fills (list_notes' ids): probed once after.
NOTES_FILLED = {"get_note": {"id": 1}}
NOTES_NEVER_UNASKED = {"create_note", "delete_note", "update_note", "tasks.add", "flaky_sync"}
RECORDED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\Z")
EVERYTHING_BIN = REPO / "node_modules" / ".bin" / "mcp-server-everything"


def stdio_entry(name: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(server_script(name)), "stdio", *args], **extra}


def write_config(project: Path, servers: dict[str, dict[str, Any]]) -> Path:
    path = project / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def record(project: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `codemode-gen record` in-process in `project`; returns (exit code, stdout, stderr)."""
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with pytest.raises(SystemExit) as info:
            main(["record", *args])
    finally:
        os.chdir(cwd)
    captured = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 0), captured.out, captured.err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- end to end


def test_record_notes_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    code, out, err = record(tmp_path, capsys)
    assert code == 0, out + err
    assert "recorded 1 of 1 servers" in out
    assert "notes: connecting" in err and "notes: recorded 13 tools" in err  # plain progress lines
    folder = tmp_path / "fixtures" / "notes"
    server = json.loads((folder / "server.json").read_text())
    assert set(server) == {"serverInfo", "capabilities", "instructions", "protocolVersion"}
    tools_text = (folder / "tools.json").read_text()
    tools = json.loads(tools_text)
    assert tools_text == dumps_stable(tools)  # sorted keys, 2-space indent, trailing newline
    assert [t["name"] for t in tools] == sorted(t["name"] for t in tools)
    assert len(tools) == 13
    recorded = {p.name for p in (folder / "calls").iterdir()}
    assert recorded == {calls_file_name(n) for n in NOTES_PROBED | set(NOTES_FILLED)}
    assert not {calls_file_name(n) for n in NOTES_NEVER_UNASKED} & recorded
    for name, args in NOTES_FILLED.items():
        (call,) = lines(folder / "calls" / calls_file_name(name))
        assert call["input"] == args and call["result"]["structuredContent"]["id"] == 1
    assert (
        'probed with arguments filled from schemas and other calls (round 1): get_note {"id":1}'
        in out
    )
    # recording again probes get_note no more: it has a recorded call
    again = record(tmp_path, capsys)
    assert again[0] == 0 and "filled" not in again[1]
    assert len(lines(folder / "calls" / "get_note.jsonl")) == 1
    for name in NOTES_PROBED:
        (call,) = lines(folder / "calls" / calls_file_name(name))
        assert set(call) == {"input", "result", "durationMs", "recordedAt"}
        assert call["input"] == {}
        assert isinstance(call["durationMs"], int)
        assert RECORDED_AT.match(call["recordedAt"])
        assert "content" in call["result"] and "resultType" not in call["result"]
    fixture = load_fixture_set(folder)  # the generator can read what we wrote
    assert fixture.calls["list_notes"][0]["result"]["structuredContent"]


@pytest.mark.slow
def test_samples_rerecord_is_idempotent_and_capped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    (tmp_path / "codemode.toml").write_text(
        '[[samples]]\nserver = "notes"\ntool = "search_notes"\ninput = { query = "milk" }\n',
        encoding="utf-8",
    )
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        '{"server": "notes", "tool": "get_note", "input": {"id": 1}}\n'
        "\n"
        '{"server": "notes", "tool": "get_note", "input": {"id": 2}}\n',
        encoding="utf-8",
    )
    get_note = tmp_path / "fixtures" / "notes" / "calls" / "get_note.jsonl"
    first: dict[str, bytes] = {}
    for _ in range(2):
        code, out, _err = record(tmp_path, capsys, "--samples", str(samples), "--no-probe")
        assert code == 0, out
        assert [c["input"] for c in lines(get_note)] == [{"id": 1}, {"id": 2}]
        # the demo server is deterministic: re-recording it changes no byte
        assert snapshot(tmp_path / "fixtures") == (first or snapshot(tmp_path / "fixtures"))
        first = snapshot(tmp_path / "fixtures")
    search = lines(tmp_path / "fixtures" / "notes" / "calls" / "search_notes.jsonl")
    assert [c["input"] for c in search] == [{"query": "milk"}]
    assert sorted(p.name for p in get_note.parent.iterdir()) == [
        "get_note.jsonl",
        "search_notes.jsonl",
    ]

    # another sample and a cap of 2: the oldest line goes, the new one is kept
    listed = tmp_path / "more.json"
    listed.write_text(
        json.dumps([{"server": "notes", "tool": "get_note", "input": {"id": 3}}]), encoding="utf-8"
    )
    code, out, _err = record(
        tmp_path, capsys, "--samples", str(listed), "--no-probe", "--max-samples", "2"
    )
    assert code == 0, out
    assert [c["input"] for c in lines(get_note)] == [{"id": 2}, {"id": 3}]

    # without new samples for a tool, its lines stay byte-identical
    before = get_note.read_bytes()
    code, out, _err = record(tmp_path, capsys)
    assert code == 0, out
    assert get_note.read_bytes() == before


@pytest.mark.slow
def test_failed_server_reported_others_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(
        tmp_path, {"crash": stdio_entry("crash_at_start"), "notes": stdio_entry("notes_server")}
    )
    code, out, err = record(tmp_path, capsys)
    assert code == 1
    assert (tmp_path / "fixtures" / "notes" / "tools.json").is_file()
    assert not (tmp_path / "fixtures" / "crash").exists()
    assert "recorded 1 of 2 servers" in out
    assert "crash: server exited during startup" in out
    assert "database file missing" in out
    assert (
        "1 of 2 servers not recorded (crash): nothing written for them, their old fixtures kept"
        in err
    )
    assert "Traceback" not in out + err


@pytest.mark.slow
def test_failed_record_leaves_old_fixtures_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    assert record(tmp_path, capsys)[0] == 0
    fixtures = tmp_path / "fixtures"
    before = snapshot(fixtures)
    write_config(tmp_path, {"notes": stdio_entry("crash_at_start")})
    assert record(tmp_path, capsys)[0] == 1
    write_config(tmp_path, {"notes": stdio_entry("hang_on_initialize")})
    (tmp_path / "codemode.toml").write_text(
        "[servers.notes]\nconnect_timeout = 1\n", encoding="utf-8"
    )
    code, out, _err = record(tmp_path, capsys)
    assert code == 1 and "timed out after 1s" in out
    assert snapshot(fixtures) == before
    assert [p.name for p in fixtures.iterdir()] == ["notes"]  # no staging folders left


def test_settings_and_fixtures_are_the_ones_beside_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The lookup rule of every command: codemode.toml beside --config, not the working directory's.
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    config = write_config(project, {"notes": stdio_entry("notes_server")})
    (project / "codemode.toml").write_text(
        '[[samples]]\nserver = "notes"\ntool = "search_notes"\ninput = { query = "milk" }\n',
        encoding="utf-8",
    )
    (elsewhere / "codemode.toml").write_text("not = = toml", encoding="utf-8")
    code, out, err = record(elsewhere, capsys, "--config", str(config), "--no-probe")
    assert code == 0, out + err
    search = lines(project / "fixtures" / "notes" / "calls" / "search_notes.jsonl")
    assert [c["input"] for c in search] == [{"query": "milk"}]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["codemode.toml"]


@pytest.mark.slow
def test_interrupted_record_leaves_old_fixtures_and_no_process(tmp_path: Path) -> None:
    write_config(tmp_path, {"slow": stdio_entry("slow")})
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    exe = [PYTHON, "-m", "codemode_gen"]
    first = subprocess.run(
        [*exe, "record", "--no-probe"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    samples = tmp_path / "s.json"
    samples.write_text(json.dumps([{"server": "slow", "tool": "sleep", "input": {"ms": 30000}}]))
    fixtures = tmp_path / "fixtures"
    before = snapshot(fixtures)
    proc = subprocess.Popen(
        [*exe, "record", "--samples", str(samples)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "calling sleep" in line:
            break
    else:
        pytest.fail("record never reached the sleep call: " + "".join(seen))
    servers = child_pids(proc.pid)
    assert servers, "the server process should be a child of record"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert snapshot(fixtures) == before
    assert [p.name for p in fixtures.iterdir()] == ["slow"]
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in servers)


@pytest.mark.slow
def test_record_reads_merges_and_writes_under_the_fixtures_lock(tmp_path: Path) -> None:
    """Another writer (a `serve --record` flush) holding fixtures/'s lock: record waits to read
    the recording until that writer is done, so the calls it wrote meanwhile are merged, not lost."""
    from codemode_gen import dirswap
    from codemode_gen.generator.fixtures import write_server_fixtures

    write_config(tmp_path, {"slow": stdio_entry("slow")})
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    exe = [PYTHON, "-m", "codemode_gen"]
    first = subprocess.run(
        [*exe, "record", "--no-probe"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    fixtures = tmp_path / "fixtures"
    samples = tmp_path / "s.json"
    samples.write_text(
        json.dumps([{"server": "slow", "tool": "echo", "input": {"value": "from record"}}])
    )
    line = {
        "input": {"value": "from the other writer"},
        "result": {"content": [], "isError": False},
        "durationMs": 1,
        "recordedAt": "2026-01-01T00:00:00Z",
    }
    with dirswap.locked(fixtures):
        proc = subprocess.Popen(
            [*exe, "record", "--no-probe", "--samples", str(samples)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        seen = []
        for text in proc.stderr:
            seen.append(text)
            if "writing fixtures" in text:
                break
        else:
            pytest.fail("record never reached writing: " + "".join(seen))
        time.sleep(1.0)  # it may only wait: however slow the machine, it cannot have written
        assert proc.poll() is None
        current = load_fixture_set(fixtures / "slow")
        assert "echo" not in current.calls
        write_server_fixtures(
            fixtures, "slow", current.server_json, current.tools, {**current.calls, "echo": [line]}
        )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    echoed = sorted(c["input"]["value"] for c in load_fixture_set(fixtures / "slow").calls["echo"])
    assert echoed == ["from record", "from the other writer"]


@pytest.mark.slow
def test_redaction_of_env_headers_and_patterns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start_server: Any
) -> None:
    token = "tok-abcdef123456"
    auth = start_server("auth_http", "http", "--token", token)
    write_config(
        tmp_path,
        {
            "slow": stdio_entry("slow", env={"SLOW_SECRET": "${MY_SECRET}"}),
            "auth": {
                "type": "http",
                "url": auth.mcp_url,
                "headers": {"Authorization": f"Bearer {token}"},
            },
        },
    )
    (tmp_path / "codemode.toml").write_text('redact = ["sk-[A-Za-z0-9]+"]\n', encoding="utf-8")
    secret = "hunter2-very-secret"
    samples = tmp_path / "samples.json"
    samples.write_text(
        json.dumps(
            [
                {"server": "slow", "tool": "env", "input": {"name": "SLOW_SECRET"}},
                {
                    "server": "slow",
                    "tool": "echo",
                    "input": {"value": f"key {secret} and sk-AbC123"},
                },
                {"server": "auth", "tool": "echo", "input": {"message": f"my token is {token}"}},
            ]
        )
    )
    os.environ["MY_SECRET"] = secret
    try:
        code, out, _err = record(tmp_path, capsys, "--samples", str(samples), "--no-probe")
    finally:
        del os.environ["MY_SECRET"]
    assert code == 0, out
    everything = b"".join(snapshot(tmp_path / "fixtures").values()).decode()
    assert secret not in everything
    assert token not in everything and "abcdef123456" not in everything
    assert "sk-AbC123" not in everything
    (env_call,) = lines(tmp_path / "fixtures" / "slow" / "calls" / "env.jsonl")
    assert env_call["result"]["structuredContent"]["value"] == "<redacted:SLOW_SECRET>"
    (echo_call,) = lines(tmp_path / "fixtures" / "slow" / "calls" / "echo.jsonl")
    assert echo_call["input"] == {"value": "key <redacted:SLOW_SECRET> and <redacted:pattern>"}
    (auth_echo,) = lines(tmp_path / "fixtures" / "auth" / "calls" / "echo.jsonl")
    assert "<redacted:Authorization>" in auth_echo["input"]["message"]
    assert "<redacted:Authorization>" in json.dumps(auth_echo["result"])


def test_bad_schema_server_recorded_through_raw_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"bad": stdio_entry("bad_schema")})
    samples = tmp_path / "s.jsonl"
    samples.write_text('{"server": "bad", "tool": "widget", "input": {}}\n')
    code, out, _err = record(tmp_path, capsys, "--samples", str(samples))
    assert code == 0, out
    tools = {
        t["name"]: t for t in json.loads((tmp_path / "fixtures" / "bad" / "tools.json").read_text())
    }
    assert tools["shout"]["inputSchema"]["type"] == "string"
    (widget,) = lines(tmp_path / "fixtures" / "bad" / "calls" / "widget.jsonl")
    assert any(block.get("type") == "widget" for block in widget["result"]["content"])


@pytest.mark.slow
def test_paginated_server_every_tool_and_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"paged": stdio_entry("paginated")})
    code, out, _err = record(tmp_path, capsys)
    assert code == 0, out
    tools = json.loads((tmp_path / "fixtures" / "paged" / "tools.json").read_text())
    assert [t["name"] for t in tools] == [f"item_{i:02d}" for i in range(1, 26)]
    assert len(list((tmp_path / "fixtures" / "paged" / "calls").iterdir())) == 25


@pytest.mark.slow
def test_record_server_everything_from_npm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not EVERYTHING_BIN.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{EVERYTHING_BIN} missing in CI: run `npm ci` (the .ci/run script does)")
        pytest.skip(f"{EVERYTHING_BIN} not installed (run `npm ci`); required when CI is set")
    write_config(tmp_path, {"everything": {"command": str(EVERYTHING_BIN), "args": ["stdio"]}})
    code, out, err = record(tmp_path, capsys)
    assert code == 0, out + err

    async def live_names() -> list[str]:
        from codemode_gen.client.sessions import SessionManager
        from codemode_gen.mcp_json import load_config

        configs = load_config(tmp_path / ".mcp.json")
        async with SessionManager(configs, log_dir=tmp_path / "logs") as manager:
            session = await manager.get("everything")
            return [t["name"] for t in await session.list_tools()]

    import anyio

    listed = anyio.run(live_names)
    folder = tmp_path / "fixtures" / "everything"
    recorded = [t["name"] for t in json.loads((folder / "tools.json").read_text())]
    assert recorded == listed and len(recorded) >= 10
    fixture = load_fixture_set(folder)
    probed = {t["name"] for t in fixture.tools if probe_input(t) is not None}
    # and the read-only tools whose schema fills their required arguments (an enum, a default)
    filled = {t["name"] for t in fixture.tools if fill_input(t, []) is not None}
    assert probed and filled and set(fixture.calls) == probed | filled
    assert {"get-annotated-message", "get-structured-content"} <= filled


# --------------------------------------------------------------------------- user errors


def test_unknown_server_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    code, _out, err = record(tmp_path, capsys, "--server", "nope")
    assert code == 2
    assert "--server nope: no such server" in err and "notes" in err


@pytest.mark.slow
def test_sample_for_unknown_server_or_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    samples = tmp_path / "s.json"
    samples.write_text(json.dumps([{"server": "ghost", "tool": "x"}]))
    code, _out, err = record(tmp_path, capsys, "--samples", str(samples))
    assert code == 2 and "server 'ghost'" in err
    samples.write_text(
        json.dumps(
            [
                {"server": "notes", "tool": "no_such_tool"},
                {"server": "notes", "tool": "get_note", "input": {"id": 1}},
            ]
        )
    )
    code, out, _err = record(tmp_path, capsys, "--samples", str(samples), "--no-probe")
    assert code == 1
    assert (
        f"notes: sample no_such_tool {{}}: the server lists no such tool (sample from {samples}: [0])"
        in out
    )
    assert "1 sample call failed (notes): not recorded" in _err
    assert lines(tmp_path / "fixtures" / "notes" / "calls" / "get_note.jsonl")[0]["input"] == {
        "id": 1
    }


@pytest.mark.slow
def test_only_selected_servers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(
        tmp_path, {"notes": stdio_entry("notes_server"), "crash": stdio_entry("crash_at_start")}
    )
    code, out, _err = record(
        tmp_path, capsys, "--server", "notes", "--fixtures", "elsewhere", "--no-probe"
    )
    assert code == 0, out
    assert [p.name for p in (tmp_path / "elsewhere").iterdir()] == ["notes"]


def test_bad_config_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / ".mcp.json").write_text("{", encoding="utf-8")
    code, _out, err = record(tmp_path, capsys)
    assert code == 2 and ".mcp.json:1:2: invalid JSON" in err and "Traceback" not in err


# --------------------------------------------------------------------------- helpers


def test_load_samples_file_formats_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "s"
    path.write_text(
        '[{"server": "a", "tool": "t", "input": {"x": 1}}, {"server": "a", "tool": "u"}]'
    )
    assert load_samples_file(path) == [Sample("a", "t", {"x": 1}), Sample("a", "u", {})]
    path.write_text('{"server": "a", "tool": "t"}\n{"server": "b", "tool": "u", "input": {}}\n')
    assert [s.server for s in load_samples_file(path)] == ["a", "b"]
    path.write_text('{"server": "a", "tool": "t"}\n{"server": "b", tool}\n')
    with pytest.raises(UserError, match=r"s:2:\d+: invalid JSON"):
        load_samples_file(path)
    path.write_text('[{"server": "a"}]')
    with pytest.raises(UserError, match=r"\[0\]\.tool must be a non-empty string"):
        load_samples_file(path)
    path.write_text("3")
    with pytest.raises(UserError, match="expected a JSON list"):
        load_samples_file(path)
    with pytest.raises(UserError, match="not found"):
        load_samples_file(tmp_path / "missing.json")


def test_fill_input_from_schemas_and_other_calls() -> None:
    """A read-only tool's required arguments, filled from its schema (examples, default, const,
    enum) or from what other tools were called with and returned; None when any is missing,
    when the tool is not read-only, or when only a redacted placeholder would fill it."""
    read_only = {"readOnlyHint": True}

    def tool(
        props: dict[str, Any], required: list[str], annotations: Any = read_only, name: str = "t"
    ) -> dict[str, Any]:
        return {
            "name": name,
            "annotations": annotations,
            "inputSchema": {"type": "object", "properties": props, "required": required},
        }

    assert fill_input(
        tool({"n": {"type": "integer", "examples": [3, 4], "default": 9}}, ["n"]), []
    ) == {"n": 3}
    assert fill_input(tool({"n": {"type": "integer", "default": 9}}, ["n"]), []) == {"n": 9}
    assert fill_input(tool({"k": {"type": "string", "enum": ["local", "all"]}}, ["k"]), []) == {
        "k": "local"
    }
    git = tool({"repo_path": {"type": "string"}}, ["repo_path"], name="git_log")
    sources = [("git_status", {"repo_path": "/src/app"}, "On branch main")]
    assert fill_input(git, sources) == {"repo_path": "/src/app"}  # the argument another tool took
    assert fill_input(git, [("git_log", {"repo_path": "/x"}, "")]) is None  # never from itself
    note = tool({"noteId": {"type": "integer", "minimum": 1}}, ["noteId"], name="get_note_details")
    listed: list[tuple[str, dict[str, Any], Any]] = [
        ("list_notes", {}, {"result": [{"id": 0}, {"id": 7, "title": "a"}]})
    ]
    assert fill_input(note, listed) == {"noteId": 7}  # `id` of a notes list, the first valid one
    assert (
        fill_input(note, [("list_events", {}, {"events": [{"id": 7}]})]) is None
    )  # not a note's id
    text = [
        ("search_notes", {"query": "x"}, '[{"id": 3, "title": "t"}]')
    ]  # JSON text is searched too
    assert fill_input(tool({"id": {"type": "integer"}}, ["id"]), text) == {"id": 3}
    assert fill_input(tool({"id": {"type": "integer"}}, ["id"], annotations={}), text) is None
    assert (
        fill_input(tool({"id": {"type": "integer"}, "q": {"type": "string"}}, ["id", "q"]), text)
        is None
    )
    redacted = [("other", {"token": "<redacted:API_TOKEN>"}, None)]
    assert fill_input(tool({"token": {"type": "string"}}, ["token"]), redacted) is None
    assert fill_input(tool({}, []), text) is None  # nothing required: the `{}` probe's case


def test_probe_input_only_read_only_without_required_args() -> None:
    ro = {"readOnlyHint": True}
    assert probe_input({"annotations": ro, "inputSchema": {"type": "object"}}) == {}
    assert probe_input({"annotations": ro, "inputSchema": {"type": "object", "required": []}}) == {}
    assert (
        probe_input({"annotations": ro, "inputSchema": {"type": "object", "required": ["q"]}})
        is None
    )
    assert (
        probe_input({"annotations": {"readOnlyHint": False}, "inputSchema": {"type": "object"}})
        is None
    )
    assert probe_input({"inputSchema": {"type": "object"}}) is None
    assert probe_input({"annotations": {"readOnlyHint": "true"}, "inputSchema": {}}) is None
    assert probe_input({"annotations": ro, "inputSchema": "weird"}) is None


def test_merge_calls_replaces_same_input_and_keeps_newest() -> None:
    old = [
        {"input": {"a": 1}, "result": {"v": "old1"}},
        {"input": {"a": 2}, "result": {"v": "old2"}},
    ]
    new = [{"input": {"a": 1}, "result": {"v": "new1"}}]
    assert merge_calls(old, new, 20) == [{"input": {"a": 2}, "result": {"v": "old2"}}, new[0]]
    same = [{"input": {"a": 1}, "result": {"v": "old1"}, "recordedAt": "later"}]
    assert merge_calls(old, same, 20) == old  # same result: the old line (and its timestamp) stays
    newer = [{"input": {"a": i}, "result": {}} for i in range(3, 6)]
    assert [c["input"]["a"] for c in merge_calls(old, newer, 3)] == [3, 4, 5]
    assert merge_calls(old, [], 20) == old


def test_redactor_replaces_secrets_everywhere() -> None:
    redactor = Redactor(
        {"API_KEY": "abcdef123", "DEBUG": "1", "Authorization": "Bearer tok-999999"}, ["sk-[a-z]+"]
    )
    value = {"k abcdef123": ["x abcdef123 y", "Bearer tok-999999", "tok-999999", "sk-abc", 1, None]}
    assert redactor.value(value) == {
        "k <redacted:API_KEY>": [
            "x <redacted:API_KEY> y",
            "<redacted:Authorization>",
            "<redacted:Authorization>",
            "<redacted:pattern>",
            1,
            None,
        ]
    }
    assert redactor.text("1 and 1") == "1 and 1"  # too short to be a secret: left alone


def test_progress_live_redraws_in_place() -> None:
    from codemode_gen.cli.record import _Progress

    stream = io.StringIO()
    progress = _Progress(["a", "bb"], stream, live=True)
    progress("a", "connecting")
    progress("a", "recorded 1 tool, 0 calls")
    progress("bb", "failed: boom\nsecond line")
    text = stream.getvalue()
    assert "\x1b[2F" in text  # moved back up over the two status lines
    assert text.rstrip("\n").split("\n")[-1].endswith("bb  failed: boom")
    plain = io.StringIO()
    _Progress(["a"], plain, live=False)("a", "connecting")
    assert plain.getvalue() == "a: connecting\n"


def test_cli_help_lists_record() -> None:
    proc = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "record", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for option in (
        "--config",
        "--fixtures",
        "--server",
        "--samples",
        "--no-probe",
        "--max-samples",
    ):
        assert option in proc.stdout


@pytest.mark.slow
def test_blocklisted_tools_not_probed_and_stale_calls_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from codemode_gen.generator.fixtures import write_server_fixtures

    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    (tmp_path / "codemode.toml").write_text(
        '[servers.notes]\nblocklist = ["stats"]\n', encoding="utf-8"
    )
    old_call = {
        "input": {},
        "result": {"content": []},
        "durationMs": 1,
        "recordedAt": "2020-01-01T00:00:00Z",
    }
    write_server_fixtures(
        tmp_path / "fixtures", "notes", {}, [{"name": "gone_tool"}], {"gone_tool": [old_call]}
    )
    code, out, _err = record(tmp_path, capsys)
    assert code == 0, out
    calls = tmp_path / "fixtures" / "notes" / "calls"
    names = {p.name for p in calls.iterdir()}
    assert "stats.jsonl" not in names and "list_notes.jsonl" in names
    assert "gone_tool.jsonl" not in names
    assert "dropped recorded calls of tools no longer listed: gone_tool" in out


# --------------------------------------------------------------------------- §11: hostile results


def test_json_problem_names_what_is_not_json() -> None:
    from codemode_gen.generator.untrusted import MAX_RECORDED_DEPTH, json_problem

    assert (
        json_problem({"content": [{"type": "text", "text": "ok"}], "n": [1, 2.5, None, True]})
        is None
    )
    assert json_problem({"a": {"b": float("nan")}}) == "nan (not a JSON number) at /a/b"
    assert json_problem([1, float("-inf")]) == "-inf (not a JSON number) at /1"
    assert "lone surrogate" in (json_problem({"t": "x\ud800y"}) or "")
    assert "key that is not Unicode" in (json_problem({"k\udfff": 1}) or "")
    deep: Any = "leaf"
    for _ in range(MAX_RECORDED_DEPTH + 5):
        deep = [deep]
    assert f"nested deeper than {MAX_RECORDED_DEPTH} levels" in (json_problem(deep) or "")
    assert json_problem([[1]] * 3) is None
    # iterative: a nesting far past the recursion limit is a clear answer, not a RecursionError
    very: Any = {}
    for _ in range(100_000):
        very = {"a": very}
    assert "nested deeper" in (json_problem(very) or "")


@pytest.mark.slow
def test_cap_result_cuts_strings_then_arrays_and_marks_them() -> None:
    from codemode_gen.generator.untrusted import TRUNCATION_MARK, cap_result
    from codemode_gen.generator.untrusted import json_bytes as _json_bytes

    small = {"content": [{"type": "text", "text": "hello"}]}
    assert cap_result(small, 1024) == (small, None)

    huge: dict[str, Any] = {
        "content": [{"type": "text", "text": "b" * 3_000_000}],
        "structuredContent": {"id": "x"},
    }
    kept, size = cap_result(huge, 65_536)
    assert size == _json_bytes(huge)
    assert 60_000 < _json_bytes(kept) <= 65_536  # close to the cap, not half of it
    text = kept["content"][0]["text"]
    assert text.endswith(TRUNCATION_MARK.format(total=3_000_000)) and text.startswith("bbbb")
    assert kept["content"][0]["type"] == "text" and kept["structuredContent"] == {"id": "x"}
    assert huge["content"][0]["text"] == "b" * 3_000_000  # the input is not modified

    many = {"structuredContent": {"items": [{"id": i, "name": "n"} for i in range(200_000)]}}
    kept, size = cap_result(many, 4096)
    assert size is not None and _json_bytes(kept) <= 4096
    items = kept["structuredContent"]["items"]
    assert 1 <= len(items) < 200_000 and items[0] == {"id": 0, "name": "n"}

    keys = {f"k{i}": i for i in range(100_000)}  # no string or array left to cut
    assert cap_result(keys, 4096) == (None, _json_bytes(keys))


def test_shown_keeps_report_lines_printable_and_short() -> None:
    from codemode_gen.generator.untrusted import MAX_SHOWN_CHARS, shown

    assert shown("get_note") == "get_note"
    assert shown("ctl\x01\x1b[31mred\x00") == "ctl\\x01\\x1b[31mred\\x00"
    assert shown("ünï-名前") == "ünï-名前"
    assert shown("bad\ud800") == "bad\\ud800"
    long = shown("x" * 300)
    assert len(long) == MAX_SHOWN_CHARS + 1 and long.endswith("…")


def test_max_result_bytes_setting(tmp_path: Path) -> None:
    from codemode_gen.codemode_toml import load_settings
    from codemode_gen.config import DEFAULT_MAX_RESULT_BYTES

    path = tmp_path / "codemode.toml"
    path.write_text("", encoding="utf-8")
    assert load_settings(path).max_result_bytes == DEFAULT_MAX_RESULT_BYTES
    path.write_text("max_result_bytes = 4096\n", encoding="utf-8")
    assert load_settings(path).max_result_bytes == 4096
    for bad in ("10", '"1MB"', "true"):
        path.write_text(f"max_result_bytes = {bad}\n", encoding="utf-8")
        with pytest.raises(UserError, match="max_result_bytes must be an integer of at least 1024"):
            load_settings(path)


@pytest.mark.slow
def test_final_rename_failure_keeps_old_fixtures_and_no_hidden_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode_gen import dirswap

    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    assert record(tmp_path, capsys)[0] == 0
    fixtures = tmp_path / "fixtures"
    (fixtures / "notes" / "calls" / "stats.jsonl").unlink()  # so the next record changes it
    before = snapshot(fixtures)
    real_replace = os.replace

    def failing(src: Any, dst: Any) -> None:
        if Path(dst).name == "notes" and ".new-" in Path(src).name:  # the final rename only
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(dirswap.os, "replace", failing)
    code, out, err = record(tmp_path, capsys)
    assert code == 1
    assert "notes: cannot write fixtures: [Errno 28] No space left on device" in out
    assert "Traceback" not in out + err
    assert snapshot(fixtures) == before  # rolled back: the old recording, in its place
    assert [p.name for p in fixtures.iterdir()] == ["notes"]  # nothing hidden left behind
    monkeypatch.undo()
    code, out, _err = record(tmp_path, capsys)
    assert code == 0, out
    assert (fixtures / "notes" / "calls" / "stats.jsonl").is_file()


@pytest.mark.slow
def test_record_restores_what_a_crashed_record_left_hidden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"notes": stdio_entry("notes_server")})
    samples = tmp_path / "s.json"
    samples.write_text(json.dumps([{"server": "notes", "tool": "get_note", "input": {"id": 1}}]))
    assert record(tmp_path, capsys, "--samples", str(samples), "--no-probe")[0] == 0
    fixtures = tmp_path / "fixtures"
    get_note = fixtures / "notes" / "calls" / "get_note.jsonl"
    recorded = get_note.read_bytes()
    # SIGKILL between "notes -> .notes.old-*/notes" and "staging -> notes"
    holder = fixtures / ".notes.old-abcd1234"
    holder.mkdir()
    (fixtures / "notes").rename(holder / "notes")
    (fixtures / ".notes.new-efgh5678").mkdir()
    # generate refuses instead of silently leaving the server out
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as info:
            main(["generate"])
    finally:
        os.chdir(cwd)
    assert info.value.code == 2
    assert "fixtures/notes: missing; an interrupted record left" in capsys.readouterr().err
    # the next record restores it before merging, so its recorded calls are kept
    code, out, _err = record(tmp_path, capsys, "--no-probe")
    assert code == 0, out
    assert "note: notes: restored" in out and "removed .notes.new-efgh5678" in out
    assert get_note.read_bytes() == recorded
    assert [p.name for p in fixtures.iterdir()] == ["notes"]


# --------------------------------------------------------------------------- failed samples


def echo_entry(*args: str) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(server_script("echo_secrets")), "stdio", *args]}


@pytest.mark.slow
def test_fixtures_path_that_cannot_be_written_fails_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "started.txt"
    write_config(tmp_path, {"local": echo_entry("--marker", str(marker))})
    (tmp_path / "a-file").write_text("not a folder")
    code, out, err = record(tmp_path, capsys, "--fixtures", "a-file")
    assert code == 2 and out == ""
    assert "error: a-file: the fixtures path is not a folder" in err and "--fixtures" in err
    code, _out, err = record(tmp_path, capsys, "--fixtures", "a-file/fixtures")
    assert code == 2
    assert "a-file/fixtures: the fixtures path cannot be created: a-file is not a folder" in err
    # run --record too: its fixtures come from codemode.toml
    (tmp_path / "codemode.toml").write_text('fixtures = "a-file"\n')
    proc = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "run", "--record", "-"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        input="globalThis.__codemode_result__ = 1;\n",
        timeout=120,
    )
    assert proc.returncode == 2 and "the fixtures path is not a folder" in proc.stderr, proc.stderr
    assert "Traceback" not in err + proc.stderr
    assert not marker.exists()  # no server was started by any of them
    assert (tmp_path / "a-file").read_text() == "not a folder"
    # the check is not in the way of a folder that does not exist yet
    code, out, _err = record(tmp_path, capsys, "--fixtures", "new/deeper", "--no-probe")
    assert code == 0, out
    assert marker.exists() and (tmp_path / "new" / "deeper" / "local" / "tools.json").is_file()


@pytest.mark.slow
def test_failed_samples_fail_record_and_are_not_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"local": echo_entry("--api-key", "literal-key")})
    (tmp_path / "codemode.toml").write_text(
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = { n = "three" }\n\n'  # schema rejects
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = {}\n\n'  # required n missing
        '[[samples]]\nserver = "local"\ntool = "fail"\n\n'  # isError
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = { n = 13 }\n\n'  # breaks outputSchema
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = { n = 2 }\n'  # fine
    )
    toml = tmp_path / "codemode.toml"
    code, out, err = record(tmp_path, capsys)
    assert code == 1, out + err
    failures = [line for line in out.splitlines() if line.startswith("  local: sample ")]
    assert failures == [
        f'  local: sample count {{"n":"three"}}: input rejected by the tool\'s inputSchema (not sent):'
        f" /n: expected integer, got string (sample from {toml}:1: samples[0])",
        "  local: sample count {}: input rejected by the tool's inputSchema (not sent):"
        f' /: expected required properties "n", got object without them (sample from {toml}:6: samples[1])',
        "  local: sample fail {}: the tool answered with an error (isError): backend refused key"
        f" literal-key (sample from {toml}:11: samples[2])",
        f'  local: sample count {{"n":13}}: the result does not match the tool\'s declared outputSchema:'
        f" /n: expected integer, got string (sample from {toml}:15: samples[3])",
    ]
    assert "error: 4 sample calls failed (local): not recorded" in err
    assert 'expect = "error"' in err  # the hint says how to record a failure on purpose
    assert "recorded 1 of 1 servers" in out and "local: 4 tools, 2 calls recorded" in out
    calls = tmp_path / "fixtures" / "local" / "calls"
    assert sorted(p.name for p in calls.iterdir()) == [
        "count.jsonl",
        "whoami.jsonl",
    ]  # the probe too
    assert [c["input"] for c in lines(calls / "count.jsonl")] == [{"n": 2}]

    # the same failures, expected: recorded as what they are, and record succeeds
    (tmp_path / "codemode.toml").write_text(
        '[[samples]]\nserver = "local"\ntool = "fail"\nexpect = "error"\n\n'
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = { n = 13 }\nexpect = "drift"\n\n'
        '[[samples]]\nserver = "local"\ntool = "count"\ninput = { n = 3 }\nexpect = "error"\n'
    )
    code, out, err = record(tmp_path, capsys, "--no-probe")
    assert code == 0, out + err
    assert (
        'note: local: count {"n":3}: expect = "error", but the call succeeded; recorded as it is'
        in out
    )
    (failed,) = lines(calls / "fail.jsonl")
    assert failed["result"]["isError"] is True
    assert [c["input"] for c in lines(calls / "count.jsonl")] == [{"n": 2}, {"n": 13}, {"n": 3}]
    # generate types count from its good samples and reports the drift; fail stays untyped
    assert main_exit(tmp_path, ["generate"]) == 0
    dts = (tmp_path / "out" / "servers" / "local.d.ts").read_text()
    assert "export function fail(input?: { [k: string]: unknown }): Promise<unknown>;" in dts
    assert "do not match the declared outputSchema (drift)" in dts


@pytest.mark.slow
def test_failed_probes_are_best_effort_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, {"slow": stdio_entry("slow")})
    code, out, err = record(tmp_path, capsys)
    assert code == 0, out + err
    assert (
        "  warning: slow: probe tool_error {}: the tool answered with an error (isError): disk full:"
        " cannot write /var/tmp/report.bin (0 bytes free) (an automatic probe: not recorded, not a"
        " failure of record)"
    ) in out
    assert (
        "  warning: slow: probe rpc_error {}: protocol error: quota exceeded for tenant demo" in out
    )
    calls = {p.name for p in (tmp_path / "fixtures" / "slow" / "calls").iterdir()}
    assert (
        "tool_error.jsonl" not in calls and "rpc_error.jsonl" not in calls and "beep.jsonl" in calls
    )


def test_samples_file_expect_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"server": "a", "tool": "t", "expect": "error"}]))
    (sample,) = load_samples_file(path)
    assert sample.expect == "error" and sample.where == f"{path}: [0]"
    path.write_text(json.dumps([{"server": "a", "tool": "t", "expect": "failure"}]))
    with pytest.raises(UserError) as info:
        load_samples_file(path)
    assert f'{path}: [0].expect must be "error" or "drift"' in info.value.message


def main_exit(project: Path, args: list[str]) -> int:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with pytest.raises(SystemExit) as info:
            main(args)
    finally:
        os.chdir(cwd)
    code = info.value.code
    return code if isinstance(code, int) else 0
