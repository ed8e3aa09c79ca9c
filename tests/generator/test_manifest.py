"""generator/manifest.py: out/'s paths, the manifest writer, and the validating reader the
runtime uses (an invalid or foreign manifest.json is a clear user error naming file and fix)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.errors import UserError
from codemode_gen.generator.build import build_outputs
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.manifest import (
    MANIFEST_FILE,
    dump_manifest,
    manifest_document,
    module_file,
    module_file_of,
    module_specifier,
    read_manifest,
    server_entry,
    types_file,
    written_by_codemode_gen,
)

TOOLS = [{"name": "get_note", "description": "Fetch one.", "inputSchema": {"type": "object"}}]


def generated() -> dict[str, Any]:
    outputs = build_outputs(
        [FixtureSet("notes", {"serverInfo": {"name": "notes"}}, copy.deepcopy(TOOLS))]
    )
    return json.loads(outputs.files[MANIFEST_FILE])


def write(out: Path, data: Any) -> None:
    out.mkdir(exist_ok=True)
    (out / MANIFEST_FILE).write_text(
        json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8"
    )


def test_paths_have_one_spelling() -> None:
    assert module_specifier("notes") == "@codemode/servers/notes"
    assert (
        module_file("notes") == "servers/notes.js" and types_file("notes") == "servers/notes.d.ts"
    )
    assert module_file_of({"serverId": "a", "tools": []}) == "servers/a.js"
    assert (
        module_file_of({"serverId": "a", "module": "servers/b.js", "tools": []}) == "servers/b.js"
    )


def test_build_writes_through_the_writer() -> None:
    outputs = build_outputs([FixtureSet("notes", {}, copy.deepcopy(TOOLS))])
    entry = outputs.manifest["servers"][0]
    assert entry["module"] in outputs.files and entry["types"] in outputs.files
    assert outputs.files[MANIFEST_FILE] == dump_manifest(outputs.manifest)
    assert outputs.manifest["generator"]["name"] == "codemode-gen"
    # Optional values are left out, never null.
    bare = server_entry(
        server_id="s",
        config_id="s",
        server_name="s",
        capabilities=[],
        unwrap="spec",
        unbox=False,
        tools=[],
        agent={"types": []},
    )
    assert "unbox" not in bare and "version" not in bare and "description" not in bare


def test_read_manifest_accepts_what_generate_writes(tmp_path: Path) -> None:
    data = generated()
    write(tmp_path, data)
    assert read_manifest(tmp_path) == data
    assert written_by_codemode_gen(tmp_path)


def test_read_manifest_without_a_file_is_none(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    assert not written_by_codemode_gen(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid JSON in generated manifest"),
        ('{"servers": []}', "not a codemode-gen manifest"),  # no generator: another tool's file
        ('{"generator": {"name": "other"}, "servers": []}', "not a codemode-gen manifest"),
        ("[]", "not a codemode-gen manifest"),
    ],
)
def test_read_manifest_refuses_a_broken_or_foreign_file(
    tmp_path: Path, text: str, message: str
) -> None:
    write(tmp_path, text)
    with pytest.raises(UserError, match=message) as info:
        read_manifest(tmp_path)
    assert str(tmp_path / MANIFEST_FILE) in info.value.message
    assert info.value.hint and "codemode-gen generate" in info.value.hint


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (lambda m: m.pop("servers"), "/servers must be a list"),
        (lambda m: m["servers"][0].pop("serverId"), "/servers/0/serverId must be a string"),
        (
            lambda m: m["servers"][0].update(serverId=""),
            "/servers/0/serverId must be a non-empty string",
        ),
        (lambda m: m["servers"][0].update(tools={}), "/servers/0/tools must be a list"),
        (
            lambda m: m["servers"][0]["tools"][0].update(toolName=3),
            "/servers/0/tools/0/toolName must be a string",
        ),
        (
            lambda m: m["servers"][0]["tools"][0].pop("exportName"),
            "/servers/0/tools/0/exportName must be a string",
        ),
        (
            lambda m: m["servers"][0]["tools"][0].update(declaration=None),
            "/servers/0/tools/0/declaration must be",
        ),
        (
            lambda m: m["servers"][0].update(capabilities=["tools", 1]),
            "/servers/0/capabilities/1 must be a string",
        ),
        (lambda m: m["servers"][0].update(unwrap="raw"), "/servers/0/unwrap must be"),
        (
            lambda m: m["servers"][0].update(module="../../etc/passwd"),
            "/servers/0/module must be a path inside out/",
        ),
        (
            lambda m: m["servers"][0].update(module="/etc/passwd"),
            "/servers/0/module must be a path inside out/",
        ),
        (
            lambda m: m["servers"][0].update(agent={"types": [{"name": "T"}]}),
            "/servers/0/agent/types/0/text must be a string",
        ),
        (
            lambda m: m["servers"][0]["tools"][0].update(agent={"summary": "x"}),
            "/servers/0/tools/0/agent/signature must be a string",
        ),
        (
            lambda m: m["servers"][0]["tools"][0]["agent"].update(tags=["@a", 2]),
            "/servers/0/tools/0/agent/tags/1 must be a string",
        ),
        (
            lambda m: m["servers"].append(copy.deepcopy(m["servers"][0])),
            "/servers/1/serverId must be unique",
        ),
    ],
)
def test_read_manifest_names_the_field_that_is_wrong(
    tmp_path: Path, change: Any, pointer: str
) -> None:
    data = generated()
    change(data)
    write(tmp_path, data)
    with pytest.raises(UserError, match="not a valid codemode-gen manifest") as info:
        read_manifest(tmp_path)
    assert pointer in info.value.message
    assert info.value.message.startswith(str(tmp_path / MANIFEST_FILE))
    assert info.value.hint and "codemode-gen generate" in info.value.hint


def test_manifest_document_sorts_sources() -> None:
    doc = manifest_document(fixtures_hash="sha256:0", sources={"b": "2", "a": "1"}, servers=[])
    assert list(doc["sources"]) == ["a", "b"] and doc["servers"] == []
