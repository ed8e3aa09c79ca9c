"""runtime/learn.py through the Python API: output types learned from live calls, shown to the
runs after them, and live calls recorded to fixtures/ (real server processes, real QuickJS)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.generator.fixtures import load_fixture_set

from .runtime_support import PYTHON, script

pytestmark = pytest.mark.timeout(120)

PROBE = (
    "import { getTool, searchTools } from '@codemode/discovery';\n"
    "const t = await getTool('slow', 'echo');\n"
    "const found = (await searchTools('answer the value given', { detail: 'full' })).results"
    ".find((r) => r.toolName === 'echo');\n"
    "globalThis.__codemode_result__ = { schema: t.outputSchema ?? null, learned: t.outputSchemaLearned ?? null,"
    " declaration: t.declaration, searched: found.outputSchemaLearned ?? null };"
)


def echo(value: Any) -> str:
    return (
        "import { echo } from '@codemode/servers/slow';\n"
        f"globalThis.__codemode_result__ = await echo({{ value: {json.dumps(value)} }});"
    )


def project(tmp_path: Path, toml: str = "") -> Path:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}}))
    if toml:
        (tmp_path / "codemode.toml").write_text(toml)
    return tmp_path / ".mcp.json"


def test_an_untyped_tools_output_type_is_learned_from_one_call_and_refined(tmp_path: Path) -> None:
    config = project(tmp_path)

    async def main() -> list[dict[str, Any]]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            before = await cm.run(PROBE, requested_capabilities=["slow"])
            called = await cm.run(echo({"id": 7, "tags": ["a"]}))
            once = await cm.run(PROBE)
            await cm.run(echo({"id": 8, "tags": [], "note": "x"}))
            twice = await cm.run(PROBE)
            return [before["result"], called["result"], once["result"], twice["result"]]

    before, called, once, twice = anyio.run(main)
    assert before["schema"] is None and before["learned"] is None and "Promise<unknown>" in before["declaration"]
    assert called == {"value": {"id": 7, "tags": ["a"]}}
    value = once["schema"]["properties"]["value"]
    assert value["properties"]["id"] == {"type": "integer"} and set(value["required"]) == {"id", "tags"}
    assert once["learned"] == once["searched"] == {"liveCalls": 1, "scope": "session"}
    assert once["declaration"].startswith("// output type learned from 1 live call in this session")
    assert "Promise<{ value: { id: number; tags: string[] } }>" in once["declaration"]
    # A second call with another shape refines it: the samples are merged, as generate does.
    assert twice["learned"] == {"liveCalls": 2, "scope": "session"}
    assert "note?: string" in twice["declaration"]


def test_declared_output_types_are_not_relearned(tmp_path: Path) -> None:
    config = project(tmp_path)
    probe = ("import { getTool } from '@codemode/discovery';\nconst t = await getTool('slow', 'total');\n"
             "globalThis.__codemode_result__ = [t.outputSchemaLearned ?? null, t.outputSchema];")

    async def main() -> tuple[Any, Any]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            first = await cm.run(probe, requested_capabilities=["slow"])
            await cm.run("import { total } from '@codemode/servers/slow'; await total([1, 2]);")
            return first["result"], (await cm.run(probe))["result"]

    first, after = anyio.run(main)
    assert after == first and after[0] is None


def test_record_writes_redacted_calls_once_and_generate_types_them(tmp_path: Path) -> None:
    config = project(tmp_path, 'redact = ["sk-[A-Za-z0-9]+"]\n')
    secret = {"id": 1, "token": "sk-abcdefghij", "ok": True}

    async def main() -> list[str]:
        notes: list[str] = []
        for _ in range(2):  # the same call twice, in two sessions: one line
            async with CodeMode.from_config(config, out=tmp_path / "out", record=True) as cm:
                response = await cm.run(echo(secret))
                assert response["result"] == {"value": secret}
                notes += cm.take_recording_notes()
        return notes

    notes = anyio.run(main)
    assert notes == [f"slow: no recording yet; wrote {tmp_path / 'fixtures' / 'slow'} from the live session"]
    recorded = load_fixture_set(tmp_path / "fixtures" / "slow")
    lines = recorded.calls["echo"]
    assert len(lines) == 1
    text = json.dumps(lines[0])
    assert "sk-abcdefghij" not in text and "<redacted" in text
    assert lines[0]["input"]["value"]["id"] == 1 and isinstance(lines[0]["durationMs"], int)
    assert {t["name"] for t in recorded.tools} >= {"echo", "total"}

    from codemode_gen.cli import main as cli

    with pytest.raises(SystemExit) as exc:
        cli(["generate", "--config", str(config)])
    assert exc.value.code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    tool = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert tool["output"]["source"] == "inferred" and tool["output"]["samples"] == 1


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from codemode_gen.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_run_record_then_generate_types_an_unknown_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = project(tmp_path, 'redact = ["sk-[A-Za-z0-9]+"]\n')
    assert cli(["record", "--config", str(config), "--no-probe"], capsys)[0] == 0
    assert cli(["generate", "--config", str(config)], capsys)[0] == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    echo_entry = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert echo_entry["output"]["source"] == "none"
    agent = tmp_path / "agent.js"
    agent.write_text(echo({"id": 3, "key": "sk-secretvalue1"}))
    for _ in range(2):  # the same call twice: one recorded line
        code, stdout, _ = cli(["run", "--config", str(config), "--record", "--no-pretty", str(agent)], capsys)
        assert code == 0 and json.loads(stdout)["result"] == {"value": {"id": 3, "key": "sk-secretvalue1"}}
    lines = (tmp_path / "fixtures" / "slow" / "calls" / "echo.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "sk-secretvalue1" not in lines[0] and "<redacted" in lines[0]
    code, stdout, _ = cli(["generate", "--config", str(config)], capsys)
    assert code == 0 and "echo (1 sample)" in stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    echo_entry = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert echo_entry["output"]["source"] == "inferred"
    assert "Promise<{ value: { id: number; key: string } }>" in echo_entry["declaration"]


def test_run_record_and_replay_exclude_each_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = project(tmp_path)
    (tmp_path / "a.js").write_text("1;")
    code, _, err = cli(["run", "--config", str(config), "--record", "--replay", str(tmp_path / "a.js")], capsys)
    assert code == 2 and "exclude each other" in err


def test_one_serve_session_learns_the_type_through_a_real_client_and_records_it(tmp_path: Path) -> None:
    from .runtime_support import against_serve

    project(tmp_path)

    async def body(client: Any) -> list[Any]:
        out = []
        for code in (PROBE, echo({"id": 1, "tags": ["x"]}), PROBE):
            response = await client.call_tool("codemode.run", {"code": code, "requestedCapabilities": ["slow"]})
            out.append(response.structured_content["result"])
        return out

    before, called, after = against_serve(tmp_path, body, "--record")
    assert before["schema"] is None and "Promise<unknown>" in before["declaration"]
    assert called == {"value": {"id": 1, "tags": ["x"]}}
    assert after["learned"] == {"liveCalls": 1, "scope": "session"}
    assert "Promise<{ value: { id: number; tags: string[] } }>" in after["declaration"]
    # --record: the call is in fixtures/ for `generate`.
    recorded = load_fixture_set(tmp_path / "fixtures" / "slow")
    assert [line["input"] for line in recorded.calls["echo"]] == [{"value": {"id": 1, "tags": ["x"]}}]


def test_live_recording_refuses_a_hostile_recording_instead_of_replacing_it(tmp_path: Path) -> None:
    """A FIFO (or link) at server.json is named, not taken for "never recorded" (which would
    replace the folder and its recorded calls) nor read (which would block)."""
    import os

    from codemode_gen.config import ServerConfig, Settings
    from codemode_gen.generator.fixtures import write_server_fixtures
    from codemode_gen.runtime.learn import LiveRecorder

    line = {"input": {}, "result": {"content": []}, "durationMs": 1, "recordedAt": "2026-01-01T00:00:00Z"}
    write_server_fixtures(tmp_path, "s", {"serverInfo": {"name": "s"}}, [{"name": "t"}], {"t": [line]})
    (tmp_path / "s" / "server.json").unlink()
    os.mkfifo(tmp_path / "s" / "server.json")
    recorder = LiveRecorder(tmp_path, Settings(), {"s": ServerConfig(id="s", transport="stdio", command="x")})
    recorder.add("s", "t", {"n": 1}, {"content": [{"type": "text", "text": "a\u2028b"}]}, 1)
    (note,) = recorder.flush({})
    assert "recorded calls not written" in note and "server.json: server recording is a named pipe" in note
    assert (tmp_path / "s" / "calls" / "t.jsonl").read_text() == json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n"
