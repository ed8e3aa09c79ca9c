"""runtime/catalog.py: the per-run view of servers and tools (pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode_gen.config import ServerConfig
from codemode_gen.errors import UserError
from codemode_gen.runtime.catalog import (
    MAX_NAMES_IN_WARNING,
    ToolView,
    load_manifest,
    module_paths_for,
    stale_message,
    tools_from_live,
)


def cfg(cid: str) -> ServerConfig:
    return ServerConfig(id=cid, transport="stdio", command="x")


def test_tools_from_live_hides_blocklisted_and_keeps_inferred_output_schema() -> None:
    known = {"get": ToolView("get", "get", output_schema={"type": "object", "title": "inferred"})}
    views = tools_from_live(
        [{"name": "get", "inputSchema": {"type": "object"}}, {"name": "drop", "inputSchema": {}},
         {"name": "2x", "outputSchema": {"type": "object", "title": "declared"}}],
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
    manifest = {"servers": [{"serverId": "notes", "configId": "notes", "tools": []}]}
    paths = module_paths_for(manifest, {"notes": cfg("notes"), "Notes": cfg("Notes"), "My Cal": cfg("My Cal")})
    assert paths["notes"] == "notes"
    assert paths["Notes"] == "notes--2"
    assert paths["My Cal"] == "my-cal"


def test_load_manifest_missing_is_none_and_malformed_is_a_user_error(tmp_path: Path) -> None:
    assert load_manifest(tmp_path) is None
    (tmp_path / "manifest.json").write_text('{"servers": [{"tools": []}]}')
    with pytest.raises(UserError, match="not a codemode-gen manifest") as info:
        load_manifest(tmp_path)
    assert info.value.hint and "generate" in info.value.hint
