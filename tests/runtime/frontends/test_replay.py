"""`codemode-gen replay` and `run --replay`: recordings served over the real MCP path.

Real processes over stdio: the SDK's client (what any MCP client sees) against the demo's
committed notes recording, codemode-gen's own client (what `run --replay` uses, raw wire JSON)
against a hand-made recording with the awkward cases, and `run --replay` end to end through
QuickJS with every configured server unstartable.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig
from codemode_gen.generator.fixtures import load_fixture_set, write_server_fixtures
from codemode_gen.generator.untrusted import TRUNCATION_MARK
from codemode_gen.runtime.frontends.replay import Replay, canonical_json
from codemode_gen.runtime.host.replay_configs import replay_config
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "codemode_gen"]
# Bounds one client session against a replay server (start-up imports the MCP SDK: ~1.5 s).
SESSION_TIMEOUT = 60.0

EDGE_TOOLS: list[dict[str, Any]] = [
    {"name": "a/b", "inputSchema": {"type": "object"}},
    {"name": "big", "inputSchema": {"type": "object"}},
    {  # fields the SDK's models do not know: a replay keeps them for the raw client
        "name": "lookup",
        "inputSchema": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "x-vendor": [1, None],
        },
        "annotations": {"readOnlyHint": True, "customHint": 3},
        "x-extra": {"kept": True},
    },
    {
        "name": "loose",
        "inputSchema": {"properties": {}},
    },  # no "type": the SDK refuses it, record kept it
    {"name": "many", "inputSchema": {"type": "object"}},
    {"name": "secret", "inputSchema": {"type": "object"}},
    {"name": "unrecorded", "inputSchema": {"type": "object"}},
]


def _line(input_: Any, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "input": input_,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
        "durationMs": 1,
        "recordedAt": "2026-01-01T00:00:00Z",
        **extra,
    }


CUT_TEXT = "x" * 64 + TRUNCATION_MARK.format(total=100_000)
EDGE_CALLS: dict[str, list[dict[str, Any]]] = {
    "a/b": [_line({}, "slash")],
    "big": [_line({}, CUT_TEXT, truncated={"originalBytes": 100_050, "keptBytes": 200})],
    "lookup": [
        {
            **_line({"q": "x"}, "found"),
            "result": {
                "content": [{"type": "text", "text": "found", "x-block": 1}],
                "structuredContent": {"hits": [1, 2.5]},
                "isError": False,
                "x-top": "kept",
            },
        }
    ],
    "many": [
        _line({"q": "a", "n": 1}, "a1"),
        _line({"q": "b", "n": 1}, "b1"),
        _line({"q": "a", "n": 2}, "a2"),
        _line({"q": "zzz"}, "z"),
        _line({"other": 1}, "o"),
    ],
    "secret": [_line({"token": "<redacted:API_KEY>"}, "hello <redacted:API_KEY>")],
}
EDGE_SERVER = {
    "serverInfo": {"name": "edge-server", "version": "2.0", "title": "Edge"},
    "instructions": "Edge cases only.",
    "capabilities": {
        "prompts": {},
        "resources": {"subscribe": True},
        "tools": {"listChanged": True},
    },
    "protocolVersion": "2025-11-25",
}


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's committed recordings plus `edge`, written by the fixtures module itself."""
    folder = tmp_path_factory.mktemp("replay") / "fixtures"
    shutil.copytree(REPO / "fixtures", folder)
    write_server_fixtures(folder, "edge", EDGE_SERVER, EDGE_TOOLS, EDGE_CALLS)
    return folder


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["content"])


# --------------------------------------------------------------------------- any MCP client


@pytest.mark.parametrize(
    "mode", ["legacy", "auto"]
)  # handshake era, and 2026-07-28 (server/discover)
def test_an_mcp_client_gets_the_recorded_server(fixtures_dir: Path, mode: str) -> None:
    recorded = json.loads((fixtures_dir / "notes" / "server.json").read_text())
    tools = json.loads((fixtures_dir / "notes" / "tools.json").read_text())
    calls = [
        (tool, line)
        for tool, lines in load_fixture_set(fixtures_dir / "notes").calls.items()
        for line in lines
    ]
    assert len(calls) >= 5

    async def session() -> None:
        import mcp_types as types
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "codemode_gen",
                "replay",
                "--fixtures",
                str(fixtures_dir),
                "--server",
                "notes",
            ],
        )
        with (fixtures_dir.parent / f"sdk-{mode}.stderr.log").open("w") as errlog:
            async with Client(
                stdio_client(params, errlog=errlog),
                mode=mode,
                read_timeout_seconds=SESSION_TIMEOUT,
                client_info=types.Implementation(name="test", version="0"),
            ) as client:
                assert client.server_info is not None
                assert client.server_info.name == recorded["serverInfo"]["name"] == "notes"
                assert client.server_info.version == recorded["serverInfo"]["version"]
                assert client.instructions == recorded["instructions"]
                caps = client.server_capabilities
                assert caps is not None and caps.tools is not None and not caps.tools.list_changed
                assert (
                    caps.prompts is None and caps.resources is None
                )  # not recorded, so not served

                listed = (await client.list_tools()).tools
                assert [
                    t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed
                ] == tools

                for tool, line in calls:  # every recorded input gives its recorded result
                    result = await client.call_tool(tool, line["input"])
                    wire = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                    wire.pop("resultType", None)
                    wire.pop("_meta", None)  # 2026-07-28: the SDK stamps serverInfo here
                    assert wire == line["result"], tool

                # key order and 1.0 vs 1 do not matter (JSON and JavaScript do not tell them apart)
                same = await client.call_tool("search_notes", {"query": "milk", "limit": 1.0})
                assert not same.is_error and "Groceries" in same.content[0].text  # type: ignore[union-attr]

                miss = await client.call_tool("search_notes", {"query": "eggs"})
                assert miss.is_error
                text = miss.content[0].text  # type: ignore[union-attr]
                assert '{"query":"eggs"}' in text and "closest recorded inputs (2 of 2)" in text
                assert text.index('{"query":"search"}') < text.index('{"limit":1,"query":"milk"}')

                unknown = await client.call_tool("no_such_tool", {})
                assert unknown.is_error and "no tool 'no_such_tool'" in unknown.content[0].text  # type: ignore[union-attr]
                never = await client.call_tool("create_note", {"title": "t", "body": "b"})
                assert never.is_error and "has no recorded call" in never.content[0].text  # type: ignore[union-attr]

    async def main() -> None:
        with anyio.fail_after(SESSION_TIMEOUT):
            await session()

    anyio.run(main)


# --------------------------------------------------------------------------- codemode-gen's own client


def _with_session(
    fixtures_dir: Path, server_id: str, body: Callable[[McpSession], Awaitable[None]]
) -> None:
    config = replay_config(
        ServerConfig(id=server_id, transport="stdio", command="/nonexistent/server"), fixtures_dir
    )

    async def main() -> None:
        with anyio.fail_after(SESSION_TIMEOUT):
            async with SessionManager(
                {server_id: config}, log_dir=fixtures_dir.parent / "logs"
            ) as manager:
                await body(await manager.get(server_id))

    anyio.run(main)


def test_the_runtime_client_gets_the_recording_verbatim(fixtures_dir: Path) -> None:
    async def body(session: McpSession) -> None:
        info = session.server_json
        assert info["serverInfo"] == EDGE_SERVER["serverInfo"]
        assert info["instructions"] == EDGE_SERVER["instructions"]
        assert info["capabilities"] == {"tools": {"listChanged": False}}

        # verbatim: fields the SDK does not know, and a definition it refuses, as recorded
        assert await session.list_tools() == sorted(EDGE_TOOLS, key=lambda t: t["name"])
        assert await session.call_tool("lookup", {"q": "x"}) == EDGE_CALLS["lookup"][0]["result"]
        assert (
            await session.call_tool("a/b", None) == EDGE_CALLS["a/b"][0]["result"]
        )  # no arguments = {}

        # a result record cut comes back as recorded, marker and all
        big = await session.call_tool("big", {})
        assert big == EDGE_CALLS["big"][0]["result"] and _text(big).endswith(
            TRUNCATION_MARK.format(total=100_000)
        )

        # a redacted input matches only its placeholder: replay never knew the secret
        leaked = await session.call_tool("secret", {"token": "sk-real-secret-value"})
        assert leaked["isError"] and "redacted when recorded" in _text(leaked)
        assert (
            await session.call_tool("secret", {"token": "<redacted:API_KEY>"})
            == EDGE_CALLS["secret"][0]["result"]
        )

        # the closest recorded inputs: most equal top-level values, then shared keys, then edit distance
        miss = await session.call_tool("many", {"q": "a", "n": 3})
        assert miss["isError"] and "structuredContent" not in miss
        shown = [line.strip() for line in _text(miss).splitlines() if line.startswith("  ")]
        assert shown == ['{"n":1,"q":"a"}', '{"n":2,"q":"a"}', '{"n":1,"q":"b"}']
        assert "closest recorded inputs (3 of 5)" in _text(miss)
        assert await session.call_tool("many", {"q": "a", "n": 3}) == miss  # deterministic

        unrecorded = await session.call_tool("unrecorded", {})
        assert unrecorded["isError"] and "has no recorded call" in _text(unrecorded)
        unknown = await session.call_tool("Many", {})
        assert (
            unknown["isError"] and "no tool 'Many'" in _text(unknown) and "many" in _text(unknown)
        )

    _with_session(fixtures_dir, "edge", body)


def test_canonical_json_and_closeness_rules() -> None:
    assert (
        canonical_json({"b": 1.0, "a": [2.0, 0.5]})
        == canonical_json({"a": [2, 0.5], "b": 1})
        == '{"a":[2,0.5],"b":1}'
    )
    assert canonical_json({"a": True}) != canonical_json({"a": 1})
    assert canonical_json({"a": "ü"}) == '{"a":"ü"}'
    from codemode_gen.generator.fixtures import FixtureSet

    replay = Replay.from_fixture_set(
        FixtureSet(
            "s",
            {},
            [{"name": "t", "inputSchema": {"type": "object"}}],
            {"t": [_line({"k": 1}, "old"), _line({"k": 2}, "two"), _line({"k": 1.0}, "new")]},
        )
    )
    assert _text(replay.call("t", {"k": 1})) == "new"  # the newest line of an input wins
    assert [r.input for r in replay.closest("t", {"k": 3})] == [
        {"k": 2},
        {"k": 1.0},
    ]  # edit distance, then line


# --------------------------------------------------------------------------- usage errors


def test_bad_replay_input_exits_2_before_serving(fixtures_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(fixtures_dir / "edge", broken / "edge")
    (broken / "edge" / "tools.json").write_text("[{")
    shutil.copytree(fixtures_dir / "notes", broken / "notes")
    (broken / "notes" / "calls" / "get_note.jsonl").write_bytes(b"\xff\xfe not utf-8\n")
    cases = [
        (
            ["--fixtures", str(fixtures_dir), "--server", "nope"],
            ["no recording of server 'nope'", "recorded: calendar, edge, notes"],
        ),
        (
            ["--fixtures", str(tmp_path / "missing"), "--server", "notes"],
            ["fixtures folder not found"],
        ),
        (["--fixtures", str(fixtures_dir), "--server", "../notes"], ["not a server id"]),
        (["--fixtures", str(broken), "--server", "edge"], ["tools.json", "invalid JSON"]),
        (["--fixtures", str(broken), "--server", "notes"], ["not UTF-8"]),
    ]
    for args, needles in cases:
        proc = subprocess.run(
            [*CLI, "replay", *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert (
            proc.stdout == ""
            and proc.stderr.startswith("error:")
            and "Traceback" not in proc.stderr
        )
        assert all(needle in proc.stderr for needle in needles), (needles, proc.stderr)


# --------------------------------------------------------------------------- run --replay


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Path:
    """A project whose configured servers cannot start at all: a replay must not need them."""
    base = tmp_path_factory.mktemp("runreplay")
    shutil.copytree(fixtures_dir, base / "fixtures")
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {
                        "command": "/nonexistent/bin/notes-server",
                        "env": {"TOKEN": "${CODEMODE_TEST_UNSET_SECRET}"},
                    },
                    "calendar": {
                        "type": "http",
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": "Bearer ${CODEMODE_TEST_UNSET_KEY}"},
                    },
                    "ghost": {"command": "/nonexistent/bin/ghost"},  # never recorded
                }
            }
        )
    )
    (base / "script.ts").write_text(
        "import { get_note, search_notes } from '@codemode/servers/notes';\n"
        "import { ToolCallError } from '@codemode/errors';\n"
        "const note = await get_note({id: 2});\n"
        "let caught: unknown = null;\n"
        "try { await search_notes({query: 'eggs'}); }\n"
        "catch (e) { caught = {toolCallError: e instanceof ToolCallError, message: (e as Error).message}; }\n"
        "globalThis.__codemode_result__ = {title: note.title, caught};\n"
    )
    return base


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def test_run_replay_answers_from_the_recordings_without_starting_a_server(project: Path) -> None:
    proc = run_cli(project, "--replay", "--no-pretty", "--capability", "ghost", "script.ts")
    assert proc.returncode == 0, proc.stderr
    response = json.loads(proc.stdout)
    result = response["result"]
    assert result["title"] == "Groceries"
    assert result["caught"]["toolCallError"] is True
    assert "no recorded call of 'search_notes'" in result["caught"]["message"]
    assert '{"query":"search"}' in result["caught"]["message"]
    assert [(t["toolName"], t["ok"]) for t in response["toolTrace"]] == [
        ("get_note", True),
        ("search_notes", False),
    ]
    # the server without a recording: named on stderr, and unavailable (its own command never ran)
    assert "no recording of ghost" in proc.stderr
    ghost = [d for d in response["diagnostics"] if "'ghost'" in d["message"]]
    assert (
        ghost
        and ghost[0]["code"] == "CAPABILITY_UNAVAILABLE"
        and "no recording of server 'ghost'" in ghost[0]["message"]
    )
    assert "command not found" not in proc.stdout


def test_run_fixtures_needs_replay(project: Path) -> None:
    proc = run_cli(project, "--fixtures", "fixtures", "script.ts")
    assert proc.returncode == 2 and "--fixtures only applies with --replay" in proc.stderr
    proc = run_cli(project, "--replay", "--fixtures", "nowhere", "script.ts")
    assert proc.returncode == 2 and "nowhere: fixtures folder not found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_from_config_replay_replaces_every_server(project: Path) -> None:
    from codemode_gen.runtime.codemode import CodeMode

    cm = CodeMode.from_config(project / ".mcp.json", replay=True)  # unset ${VARS} are no error here
    assert sorted(cm.configs) == ["calendar", "ghost", "notes"]
    for sid, config in cm.configs.items():
        assert config.transport == "stdio" and config.command == sys.executable
        assert config.args[-4:] == ("--fixtures", str(project / "fixtures"), "--server", sid)
        assert not config.headers and "TOKEN" not in config.env
