"""Hostile files in fixtures/ (spec §11: recordings are untrusted input, a pull request can
change them). Real files of each kind in a copy of the demo's fixtures/, run through the real
CLI in subprocesses (with timeouts, so a hang fails the test instead of the suite):

- `generate` exits 2 with one message naming the file, and writes nothing to out/;
- `record --check` exits 2 with it before connecting to anything;
- `run --replay` reports that server unavailable with the message, the other one still answers;
- `replay`, driven by the MCP SDK's client, exits 2 with it before serving;
- `record` (merging the old calls) and `run --record` finish instead of hanging on a FIFO.

No case may print a traceback, hang, read outside fixtures/ or quote a file from outside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.generator.fixtures import (
    MAX_CALLS_FILE_BYTES,
    MAX_FIXTURE_DEPTH,
    MAX_TOOLS_JSON_BYTES,
)

pytestmark = pytest.mark.slow  # real CLI processes, several per case

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "codemode_gen"]
# Bounds each codemode-gen command: a read that blocks (FIFO) or never ends (/dev/zero) hits it.
COMMAND_TIMEOUT_S = 120
# A secret outside fixtures/, shaped so that replay would serve it if it followed a link.
SECRET = "SECRET-TOKEN-5f1c0a"


def _files(folder: Path) -> dict[str, str]:
    """Every file under folder -> sha256 of its bytes (what "writes nothing" is checked by)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _cli(project: Path, *args: str, config: str = ".mcp.json") -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*CLI, *args[:1], "--config", config, *args[1:]],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's fixtures and a generated out/, with servers that cannot start (replay needs none)."""
    root = tmp_path_factory.mktemp("hostile-fixtures")
    shutil.copytree(REPO / "fixtures", root / "fixtures")
    (root / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": "/nonexistent/bin/notes-server"},
                    "calendar": {"command": "/nonexistent/bin/calendar-server"},
                }
            }
        )
    )
    (root / "script.js").write_text(
        "import { get_event } from '@codemode/servers/calendar';\n"
        "globalThis.__codemode_result__ = (await get_event({ id: 1 })).title;\n"
    )
    assert _cli(root, "generate").returncode == 0
    return root


def _deep(folder: Path) -> str:
    (folder / "calls" / "stats.jsonl").write_text(
        '{"input":{},"result":{"x":' + "[" * 100_000 + "]" * 100_000 + "}}\n"
    )
    return f"stats.jsonl:1: recorded call nested deeper than {MAX_FIXTURE_DEPTH} levels"


def _fifo(folder: Path) -> str:
    (folder / "calls" / "stats.jsonl").unlink()
    os.mkfifo(folder / "calls" / "stats.jsonl")
    return "stats.jsonl: calls file is a named pipe (FIFO), not a regular file"


def _zero(folder: Path) -> str:
    (folder / "calls" / "stats.jsonl").unlink()
    (folder / "calls" / "stats.jsonl").symlink_to("/dev/zero")
    return "stats.jsonl: calls file is a symbolic link to '/dev/zero'"


def _secret_file(folder: Path) -> str:
    outside = folder.parent.parent / "secret-tools.json"
    outside.write_text(
        json.dumps([{"name": "leak", "description": SECRET, "inputSchema": {"type": "object"}}])
    )
    (folder / "tools.json").unlink()
    (folder / "tools.json").symlink_to(outside)
    return "tools.json: tool list recording is a symbolic link to"


def _secret_calls(folder: Path) -> str:
    outside = folder.parent.parent / "secret-calls"
    outside.mkdir()
    (outside / "stats.jsonl").write_text(
        json.dumps({"input": {}, "result": {"content": [{"type": "text", "text": SECRET}]}}) + "\n"
    )
    shutil.rmtree(folder / "calls")
    (folder / "calls").symlink_to(outside)
    return "notes/calls: calls folder is a symbolic link"


def _secret_server(folder: Path) -> str:
    outside = folder.parent.parent / "secret-server"
    shutil.move(folder, outside)
    (outside / "tools.json").write_text(json.dumps([{"name": "leak", "description": SECRET}]))
    folder.symlink_to(outside)
    return "fixtures/notes: server recording folder is a symbolic link"


def _huge(folder: Path) -> str:
    with (folder / "calls" / "stats.jsonl").open("r+b") as fh:
        fh.truncate(MAX_CALLS_FILE_BYTES + 1)  # sparse: no disk or time spent on it
    return f"stats.jsonl: calls file is {MAX_CALLS_FILE_BYTES + 1:,} bytes; at most {MAX_CALLS_FILE_BYTES:,} are read"


def _huge_tools(folder: Path) -> str:
    with (folder / "tools.json").open("r+b") as fh:
        fh.truncate(MAX_TOOLS_JSON_BYTES + 1)
    return "tools.json: tool list recording is"


def _invalid_utf8(folder: Path) -> str:
    path = folder / "calls" / "get_note.jsonl"
    path.write_bytes(
        path.read_bytes()
        + b'{"input":{"id":9},"result":{"content":[{"type":"text","text":"\xc3\x28"}]}}\n'
    )
    return "get_note.jsonl:2:63: recorded call is not UTF-8 text (byte 0xc3)"


def _nan(folder: Path) -> str:
    (folder / "server.json").write_text('{"serverInfo": {"name": "notes", "version": NaN}}')
    return "server.json: invalid JSON in server recording: NaN is not a JSON number"


def _calls_is_a_file(folder: Path) -> str:
    shutil.rmtree(folder / "calls")
    (folder / "calls").write_text("{}")
    return "notes/calls: calls folder is not a folder"


CASES: dict[str, Callable[[Path], str]] = {
    "fifo": _fifo,
    "link-to-dev-zero": _zero,
    "link-to-secret-file": _secret_file,
    "link-to-secret-calls-folder": _secret_calls,
    "link-to-secret-server-folder": _secret_server,
    "huge-calls-file": _huge,
    "huge-tools-json": _huge_tools,
    "invalid-utf8": _invalid_utf8,
    "100k-deep": _deep,
    "nan": _nan,
    "calls-is-a-file": _calls_is_a_file,
}


@pytest.fixture(params=list(CASES))
def hostile(request: pytest.FixtureRequest, base: Path, tmp_path: Path) -> tuple[Path, str]:
    project = tmp_path / "project"
    shutil.copytree(base, project, symlinks=True)
    return project, CASES[request.param](project / "fixtures" / "notes")


def test_s11_a_hostile_fixture_file_is_refused_by_name_everywhere(
    hostile: tuple[Path, str],
) -> None:
    project, needle = hostile
    out_before = _files(project / "out")

    gen = _cli(project, "generate")
    assert gen.returncode == 2 and gen.stderr.startswith("error: "), gen.stderr
    assert needle in gen.stderr and gen.stderr.count("error: ") == 1
    assert "hint: " in gen.stderr and gen.stdout == ""
    assert _files(project / "out") == out_before  # nothing written
    assert not [p for p in project.iterdir() if p.name.startswith(".out")]

    check = _cli(project, "record", "--check")
    assert check.returncode == 2 and needle in check.stderr, check.stderr

    run = _cli(project, "run", "--replay", "--no-pretty", "--capability", "notes", "script.js")
    assert run.returncode == 0, run.stderr
    response = json.loads(run.stdout)
    assert response["result"] == "Q2 planning review"  # the other server still replays
    unavailable = [d for d in response["diagnostics"] if d["code"] == "CAPABILITY_UNAVAILABLE"]
    assert len(unavailable) == 1 and "'notes'" in unavailable[0]["message"]
    assert needle.split(":")[0] in unavailable[0]["message"], unavailable[0]["message"]


@pytest.mark.parametrize("case", ["fifo", "link-to-secret-file"])
def test_s11_replay_refuses_to_serve_a_hostile_recording_to_an_mcp_client(
    base: Path, tmp_path: Path, case: str
) -> None:
    project = tmp_path / "project"
    shutil.copytree(base, project, symlinks=True)
    needle = CASES[case](project / "fixtures" / "notes")
    errlog = project / "replay.stderr.log"

    async def connect() -> BaseException | None:
        import mcp_types as types
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            cwd=str(project),
            args=["-m", "codemode_gen", "replay", "--fixtures", "fixtures", "--server", "notes"],
        )
        try:
            with anyio.fail_after(COMMAND_TIMEOUT_S), errlog.open("w") as err:
                async with Client(
                    stdio_client(params, errlog=err),
                    mode="legacy",
                    read_timeout_seconds=COMMAND_TIMEOUT_S,
                    client_info=types.Implementation(name="test", version="0"),
                ) as client:
                    await client.list_tools()
        except TimeoutError:
            raise
        except Exception as exc:  # the server went away before answering initialize
            return exc
        return None

    failure = anyio.run(connect)
    assert failure is not None and not isinstance(failure, TimeoutError)
    log = errlog.read_text()
    assert (
        log.startswith("error: ") and needle in log and "Traceback" not in log and SECRET not in log
    )


def test_s11_record_and_run_record_finish_on_a_fifo_in_fixtures(base: Path, tmp_path: Path) -> None:
    """A FIFO among the old calls made `record` (merging them) and `run --record` hang."""
    project = tmp_path / "project"
    shutil.copytree(base, project, symlinks=True)
    notes = project / "fixtures" / "notes"
    needle = _fifo(notes)
    server = REPO / "examples" / "servers" / "notes_server.py"
    (project / "live.mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": sys.executable, "args": [str(server)]}}})
    )
    (project / "agent.js").write_text(
        "import { get_note } from '@codemode/servers/notes';\n"
        "globalThis.__codemode_result__ = (await get_note({ id: 2 })).title;\n"
    )

    run = _cli(project, "run", "--record", "--no-pretty", "agent.js", config="live.mcp.json")
    assert run.returncode == 0 and json.loads(run.stdout)["result"] == "Groceries", run.stderr
    assert "not written" in run.stderr and needle in run.stderr
    assert (notes / "calls" / "stats.jsonl").is_fifo()  # refused, not replaced

    rec = _cli(project, "record", "--server", "notes", "--no-probe", config="live.mcp.json")
    assert rec.returncode == 0, rec.stdout + rec.stderr
    report: Any = rec.stdout + rec.stderr
    assert "previous fixtures unreadable, replaced" in report and needle in report
    assert not (notes / "calls" / "stats.jsonl").is_fifo()
    assert _cli(project, "generate").returncode == 0
