"""Any JSON value a server can send round-trips through fixtures/ (spec §11: server responses
are untrusted input, and a recording must not break on any of them).

Property: for arbitrary JSON values (every character `str.splitlines` ends a line at, lone
surrogates, big integers, floats, deep-ish nesting, awkward keys), the real recording path
(`recorded.recorded_call` -> `fixtures.write_server_fixtures`) writes lines that are one line for
any reader, read back as the same value, generate without error, and a real replay server
process answers each recorded input with it: to the MCP SDK's client (both protocol eras) and
to codemode-gen's own client (what `run --replay` uses). One replay server serves every example.

Lone surrogates are the one documented difference on the wire: the Python MCP SDK can neither
send nor read one, so replay serves U+FFFD there (`jsonio.without_lone_surrogates`), which is
also what codemode-gen's client makes of one sent by a live server.

End to end for line separators: `run --record` against a real server, a second `run --record`
adding to that file, `generate`, and `run --replay` answering both calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig
from codemode_gen.generator.build import build_outputs
from codemode_gen.generator.emit import write_outputs
from codemode_gen.generator.fixtures import load_fixture_set, load_fixtures, write_server_fixtures
from codemode_gen.generator.recorded import recorded_call
from codemode_gen.generator.redact import Redactor
from codemode_gen.jsonio import without_lone_surrogates
from codemode_gen.runtime.host.replay_configs import replay_config
from tests.runtime_support import PYTHON, script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # hypothesis, real processes

CLI = [sys.executable, "-m", "codemode_gen"]
# Bounds one CLI command or client session (start-up imports the MCP SDK) on a loaded machine.
PROCESS_TIMEOUT_S = 120
# Examples drawn; each is recorded, read and generated alone, then all are replayed by one server.
EXAMPLES = 40

# Every character `str.splitlines` ends a line at (computed: the class, not a sample of it).
LINE_TERMINATORS = [
    chr(c) for c in range(sys.maxunicode + 1) if len(f"a{chr(c)}b".splitlines()) > 1
]
LONE_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]

_CHARS = st.one_of(
    st.characters(exclude_categories=()),  # any code point, surrogates included
    st.sampled_from(LINE_TERMINATORS + LONE_SURROGATES),
)
TEXT = st.text(_CHARS, max_size=12)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=16,
)

SERVER_JSON = {
    "serverInfo": {"name": "prop", "version": "1.0"},
    "capabilities": {"tools": {}},
    "protocolVersion": "2025-11-25",
}
TOOLS = [{"name": "echo", "inputSchema": {"type": "object"}}]


def _as_json(value: Any) -> Any:
    """The JSON value `value` stands for (a surrogate pair held as two code points is one
    character in JSON text: "\\ud83d\\ude00" is U+1F600)."""
    return json.loads(json.dumps(value))


def _result(text: str, value: Any) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"value": value},
        "isError": False,
    }


def _recorded(example: int, argument: Any, text: str, value: Any) -> dict[str, Any]:
    """One calls line made by the real recording path (redaction, JSON checks, size cap)."""
    record, note = recorded_call(
        {"example": example, "argument": argument},
        _result(text, value),
        1,
        Redactor(),
        max_result_bytes=64 * 1024 * 1024,
    )
    assert record is not None and note is None, note
    return record


def test_s11_any_json_value_round_trips_through_record_fixtures_generate_and_replay(
    tmp_path: Path,
) -> None:
    lines: list[dict[str, Any]] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(argument=JSON_VALUES, text=TEXT, value=JSON_VALUES)
    def record_read_generate(argument: Any, text: str, value: Any) -> None:
        record = _recorded(len(lines), argument, text, value)
        with tempfile.TemporaryDirectory() as scratch:
            fixtures_dir = Path(scratch) / "fixtures"
            write_server_fixtures(fixtures_dir, "prop", SERVER_JSON, TOOLS, {"echo": [record]})
            written = (fixtures_dir / "prop" / "calls" / "echo.jsonl").read_bytes().decode("utf-8")
            assert len(written.splitlines()) == 1 and written.endswith(
                "\n"
            )  # one line for any reader
            loaded = load_fixture_set(fixtures_dir / "prop").calls["echo"]
            assert loaded == [_as_json(record)]
            assert loaded[0]["result"] == _as_json(_result(text, value))
            outputs = build_outputs(load_fixtures(fixtures_dir), None)
            write_outputs(Path(scratch) / "out", outputs)  # every generated file is UTF-8 text
            (tool,) = outputs.manifest["servers"][0]["tools"]
            assert tool["output"]["source"] == "inferred"
        lines.append(record)

    record_read_generate()
    assert len(lines) >= EXAMPLES // 2  # hypothesis may stop early, never with nothing

    project = tmp_path / "project"
    (project / "fixtures").mkdir(parents=True)
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"prop": {"command": "/nonexistent/prop"}}})
    )
    write_server_fixtures(project / "fixtures", "prop", SERVER_JSON, TOOLS, {"echo": lines})
    gen = subprocess.run(
        [*CLI, "generate"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert gen.returncode == 0 and "prop: 1 tools" in gen.stdout, gen.stderr

    # what goes over the wire: the JSON value, lone surrogates as U+FFFD (see the docstring)
    expected = [without_lone_surrogates(_as_json(line)) for line in lines]
    assert all(json.dumps(e, ensure_ascii=False).encode("utf-8") for e in expected)

    async def sdk_client(mode: str) -> None:
        import mcp_types as types
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            cwd=str(project),
            args=["-m", "codemode_gen", "replay", "--fixtures", "fixtures", "--server", "prop"],
        )
        with (project / f"replay-{mode}.log").open("w") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog),
                mode=mode,
                read_timeout_seconds=PROCESS_TIMEOUT_S,
                client_info=types.Implementation(name="test", version="0"),
            ) as client:
                for line in expected:
                    got = await client.call_tool("echo", line["input"])
                    assert not got.is_error, got
                    block = got.content[0]
                    assert isinstance(block, types.TextContent)
                    assert block.text == line["result"]["content"][0]["text"]
                    assert got.structured_content == line["result"]["structuredContent"]

    async def own_client() -> None:
        config = replay_config(
            ServerConfig(id="prop", transport="stdio", command="/nonexistent/prop"),
            project / "fixtures",
        )
        async with SessionManager({"prop": config}, log_dir=project / "logs") as manager:
            session = await manager.get("prop")
            for line in expected:
                assert await session.call_tool("echo", line["input"]) == line["result"]

    async def main() -> None:
        with anyio.fail_after(3 * PROCESS_TIMEOUT_S):
            await sdk_client("legacy")  # handshake era: the recorded JSON itself
            await sdk_client("auto")  # 2026-07-28: the SDK's typed rendering of it
            await own_client()

    anyio.run(main)
    log = (project / "replay-legacy.log").read_text()
    assert "Traceback" not in log
    if any(
        "\ufffd" in json.dumps(e, ensure_ascii=False) and e != _as_json(line)
        for e, line in zip(expected, lines, strict=True)
    ):
        assert "served as U+FFFD" in log  # said once, at start-up


# --------------------------------------------------------------------------- end to end

AWKWARD = "".join(LINE_TERMINATORS) + " é \U0001f600"


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*CLI, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def _echo(value: Any) -> str:
    return (
        "import { echo } from '@codemode/servers/slow';\n"
        f"globalThis.__codemode_result__ = await echo({{ value: {json.dumps(value)} }});\n"
    )


def test_s11_line_separators_survive_run_record_generate_and_run_replay(tmp_path: Path) -> None:
    """A recorded U+2028 used to make generate fail for the whole project, replay lose the
    server, and the next run --record stop adding to the file."""
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    assert _run(tmp_path, "record", "--no-probe").returncode == 0
    first, second = {"text": AWKWARD, AWKWARD: [AWKWARD]}, {"text": "\u2029second\u2028"}
    for value in (first, second):
        (tmp_path / "agent.js").write_text(_echo(value))
        run = _run(tmp_path, "run", "--record", "--no-pretty", "agent.js")
        assert run.returncode == 0 and json.loads(run.stdout)["result"] == {"value": value}, (
            run.stderr
        )
        assert "not written" not in run.stderr
    calls = tmp_path / "fixtures" / "slow" / "calls" / "echo.jsonl"
    assert len(calls.read_text(encoding="utf-8").splitlines()) == 2  # added to, one line each
    assert [
        line["input"] for line in load_fixture_set(tmp_path / "fixtures" / "slow").calls["echo"]
    ] == [{"value": first}, {"value": second}]

    gen = _run(tmp_path, "generate")
    assert gen.returncode == 0 and "echo (2 samples)" in gen.stdout, gen.stdout + gen.stderr
    for value in (first, second):
        (tmp_path / "agent.js").write_text(_echo(value))
        replayed = _run(tmp_path, "run", "--replay", "--no-pretty", "agent.js")
        assert replayed.returncode == 0, replayed.stderr
        assert json.loads(replayed.stdout)["result"] == {"value": value}
