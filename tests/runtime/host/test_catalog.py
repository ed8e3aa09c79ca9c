"""runtime/host/catalog.py: the per-run view of servers and tools (pure parts), and reading
out/manifest.json (generator/manifest.py's validating reader, which the runtime uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode_gen.config import ServerConfig
from codemode_gen.errors import UserError
from codemode_gen.generator.manifest import ServerEntry, manifest_document, read_manifest
from codemode_gen.runtime.host.catalog import (
    MAX_NAMES_IN_WARNING,
    ToolView,
    adopt_built,
    lost_declarations,
    manifest_views,
    module_paths_for,
    stale_message,
    tools_from_live,
)


def cfg(cid: str) -> ServerConfig:
    return ServerConfig(id=cid, transport="stdio", command="x")


def test_tools_from_live_hides_blocklisted_and_keeps_inferred_output_schema() -> None:
    known = {"get": ToolView("get", "get", output_schema={"type": "object", "title": "inferred"})}
    views = tools_from_live(
        [
            {"name": "get", "inputSchema": {"type": "object"}},
            {"name": "drop", "inputSchema": {}},
            {"name": "2x", "outputSchema": {"type": "object", "title": "declared"}},
        ],
        blocklist=["drop"],
        known=known,
    )
    assert list(views) == ["2x", "get"]
    assert views["get"].output_schema == {"type": "object", "title": "inferred"}
    assert views["2x"].output_schema == {"type": "object", "title": "declared"}
    assert views["2x"].export_name == "_2x"  # §6.1 over the live set


def test_stale_message_names_added_removed_and_changed_tools() -> None:
    out = {"a": ToolView("a", "a", input_schema={"type": "object"}), "b": ToolView("b", "b")}
    live = {"a": ToolView("a", "a", input_schema={"type": "array"}), "c": ToolView("c", "c")}
    message = stale_message("srv", out, live)
    assert message is not None
    assert "new tools: c" in message and "tools gone: b" in message and "changed: a" in message
    assert stale_message("srv", out, dict(out)) is None


def test_stale_message_is_bounded() -> None:
    live = {f"t{i:03}": ToolView(f"t{i:03}", f"t{i:03}") for i in range(100)}
    message = stale_message("srv", {}, live)
    assert message is not None and f"+{100 - MAX_NAMES_IN_WARNING} more" in message


def test_s5_0_1_module_paths_keep_out_choices_and_disambiguate_new_servers() -> None:
    manifest = manifest_document(
        fixtures_hash="sha256:0",
        sources={},
        servers=[{"serverId": "notes", "configId": "notes", "tools": []}],
    )
    paths = module_paths_for(
        manifest, {"notes": cfg("notes"), "Notes": cfg("Notes"), "My Cal": cfg("My Cal")}
    )
    assert paths["notes"] == "notes"
    assert paths["Notes"] == "notes--2"
    assert paths["My Cal"] == "my-cal"


def test_read_manifest_missing_is_none_and_malformed_is_a_user_error(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    (tmp_path / "manifest.json").write_text('{"servers": [{"tools": []}]}')
    with pytest.raises(UserError, match="not a codemode-gen manifest") as info:
        read_manifest(tmp_path)
    assert info.value.hint and "generate" in info.value.hint


def _out_view(**changes: object) -> ToolView:
    """A tool as out/ describes it: generated from LIVE_GET with an inferred output schema."""
    view = ToolView(
        "get",
        "get",
        description="Fetch one.",
        annotations={"readOnlyHint": True},
        input_schema={"type": "object"},
        output_schema={"type": "object", "title": "inferred"},
        declaration="/** Fetch one. */\nexport function get(input: {}): Promise<Get>;",
        declared_output_schema=None,
    )
    for key, value in changes.items():
        setattr(view, key, value)
    return view


LIVE_GET = {
    "name": "get",
    "description": "Fetch one.",
    "annotations": {"readOnlyHint": True},
    "inputSchema": {"type": "object"},
}


@pytest.mark.parametrize(
    "change",
    [
        {},
        {"description": "Fetch two."},
        {"annotations": {"readOnlyHint": False}},
        {"inputSchema": {"type": "object", "required": ["id"]}},
        {"outputSchema": {"type": "object"}},
    ],
)
def test_s4_3_out_declaration_kept_only_for_the_definition_it_was_generated_from(
    change: dict,
) -> None:
    known = {"get": _out_view()}
    view = tools_from_live([{**LIVE_GET, **change}], blocklist=[], known=known)["get"]
    assert view.declaration == (known["get"].declaration if not change else None)
    assert lost_declarations(known, {"get": view}) is bool(change)


def test_s4_3_out_declaration_holds_for_a_declared_output_schema_too(tmp_path: Path) -> None:
    declared = {"type": "object", "properties": {"id": {"type": "integer"}}}
    known = {"get": _out_view(output_schema=declared, declared_output_schema=declared)}
    view = tools_from_live([{**LIVE_GET, "outputSchema": declared}], blocklist=[], known=known)[
        "get"
    ]
    assert view.declaration is not None
    # A manifest without output provenance counts its schema as declared: a live tool without
    # one no longer matches, so the declaration is dropped rather than possibly wrong.
    entry: ServerEntry = {
        "serverId": "s",
        "configId": "s",
        "tools": [
            {
                "toolName": "get",
                "exportName": "get",
                "outputSchema": declared,
                "inputSchema": {"type": "object"},
                "declaration": "x",
            }
        ],
    }
    manifest = manifest_document(fixtures_hash="sha256:0", sources={}, servers=[entry])
    legacy = manifest_views(manifest, tmp_path, {"s": cfg("s")})["s"].tools["get"]
    bare = {"name": "get", "inputSchema": {"type": "object"}}
    assert (
        tools_from_live([{**bare, "outputSchema": declared}], [], known={"get": legacy})[
            "get"
        ].declaration
        == "x"
    )
    assert tools_from_live([bare], [], known={"get": legacy})["get"].declaration is None


def test_s4_3_adopt_built_export_names_and_declarations() -> None:
    built = {
        "tools": [
            {
                "toolName": "get",
                "exportName": "get__2",
                "declaration": "export function get__2(): Promise<unknown>;",
            },
            {
                "toolName": "put",
                "exportName": "put",
                "declaration": "export function put(): Promise<unknown>;",
            },
            {
                "toolName": "gone",
                "exportName": "gone",
                "declaration": "export function gone(): Promise<unknown>;",
            },
        ]
    }
    # The built module is the one imported: its names win, its text replaces a renamed one.
    tools = {"get": _out_view(), "put": ToolView("put", "put", declaration="kept from out/")}
    adopt_built(tools, built, export_names=True)
    assert tools["get"].export_name == "get__2" and tools["get"].declaration is not None
    assert "get__2" in tools["get"].declaration and tools["put"].declaration == "kept from out/"
    # out/'s module is imported: built text only fills gaps, and only under the same name.
    tools = {"get": _out_view(declaration=None), "put": ToolView("put", "put")}
    adopt_built(tools, built, export_names=False)
    assert tools["get"].export_name == "get" and tools["get"].declaration is None
    assert tools["put"].declaration == "export function put(): Promise<unknown>;"


def test_s4_3_definition_carries_declaration_when_known() -> None:
    assert _out_view().definition()["declaration"].startswith("/** Fetch one. */")
    assert "declaration" not in ToolView("a", "a").definition()
