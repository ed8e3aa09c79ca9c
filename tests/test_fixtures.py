"""generator/fixtures.py: the on-disk recording format, read and written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import (
    calls_file_name,
    fixtures_hash,
    load_fixture_set,
    load_fixtures,
    tool_name_from_calls_file,
    write_server_fixtures,
)

SERVER = {"serverInfo": {"name": "demo", "version": "1.0"}, "capabilities": {"tools": {}},
          "protocolVersion": "2025-11-25"}
TOOLS = [{"name": "b.tool", "inputSchema": {"type": "object"}},
         {"name": "a/tool", "inputSchema": {"type": "object"}}]
CALL = {"input": {}, "result": {"content": [{"type": "text", "text": "hi"}]}, "durationMs": 3,
        "recordedAt": "2026-11-22T00:00:00Z"}


@pytest.mark.parametrize("name", ["get_note", "a/b", "..", ".hidden", "with space", "ünï", "x%y"])
def test_calls_file_name_is_safe_and_reversible(name: str) -> None:
    file_name = calls_file_name(name)
    assert "/" not in file_name and not file_name.startswith(".")
    assert tool_name_from_calls_file(file_name) == name


def test_write_then_load_round_trips_and_sorts(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL], "b.tool": []})
    loaded = load_fixture_set(tmp_path / "demo")
    assert [t["name"] for t in loaded.tools] == ["a/tool", "b.tool"]
    assert loaded.calls == {"a/tool": [CALL]}
    assert set(loaded.hashes) == {"demo/server.json", "demo/tools.json", "demo/calls/a%2Ftool.jsonl"}
    text = (tmp_path / "demo" / "tools.json").read_text()
    assert text.endswith("}\n]\n") and json.loads(text)[0]["name"] == "a/tool"


def test_rewrite_replaces_the_whole_server_folder(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS[:1], {})
    loaded = load_fixture_set(tmp_path / "demo")
    assert loaded.calls == {} and len(loaded.tools) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # no staging leftovers


def test_failed_write_keeps_the_old_recording(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    before = (tmp_path / "demo" / "tools.json").read_bytes()
    with pytest.raises(TypeError):
        write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [{"input": object()}]})
    assert (tmp_path / "demo" / "tools.json").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


def test_hash_changes_with_content_not_order(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "a", SERVER, TOOLS, {})
    write_server_fixtures(tmp_path, "b", SERVER, TOOLS, {})
    sets = load_fixtures(tmp_path)
    assert [s.config_id for s in sets] == ["a", "b"]
    first = fixtures_hash(sets)
    assert fixtures_hash(list(reversed(sets))) == first
    write_server_fixtures(tmp_path, "b", SERVER, TOOLS[:1], {})
    assert fixtures_hash(load_fixtures(tmp_path)) != first


def test_missing_folder_and_bad_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="fixtures folder not found"):
        load_fixtures(tmp_path / "nope")
    with pytest.raises(UserError, match="no recorded servers"):
        load_fixtures(tmp_path)
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    (tmp_path / "demo" / "tools.json").write_text('[{"name": "x",}]')
    with pytest.raises(UserError, match=r"tools.json:1:\d+: invalid JSON"):
        load_fixtures(tmp_path)
    (tmp_path / "demo" / "tools.json").write_text('{"name": "x"}')
    with pytest.raises(UserError, match="expected a JSON array of tools"):
        load_fixtures(tmp_path)
    (tmp_path / "demo" / "tools.json").write_text("[]")
    (tmp_path / "demo" / "calls" / "a%2Ftool.jsonl").write_text('{"input": {}}\n')
    with pytest.raises(UserError, match=r"a%2Ftool.jsonl:1: a recorded call must be an object"):
        load_fixtures(tmp_path)
