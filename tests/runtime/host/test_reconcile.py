"""runtime/host/reconcile.py: what one run sees of out/ and the live servers, decided from values
only (no server process, no sandbox)."""

from __future__ import annotations

import copy
from typing import Any

from codemode_gen.config import ServerConfig
from codemode_gen.generator.build import build_outputs
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.manifest import module_file_of, module_specifier
from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host.catalog import LiveServer, ServerView, ToolView
from codemode_gen.runtime.host.reconcile import (
    BuiltModule,
    Connections,
    Failure,
    Plan,
    Selection,
    reconcile,
    select_servers,
)
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS

OUT_MODULE = "// out/'s module"


def cfg(cid: str, **fields: Any) -> ServerConfig:
    return ServerConfig(id=cid, transport="stdio", command="x", **fields)


def wire(name: str, **fields: Any) -> dict[str, Any]:
    """A tool as tools/list sends it."""
    return {
        "name": name,
        "description": f"{name} things.",
        "inputSchema": {"type": "object"},
        **fields,
    }


def out_tool(name: str, export: str | None = None, **fields: Any) -> ToolView:
    """A tool as out/ describes it, generated from `wire(name)`."""
    return ToolView(
        name,
        export or name,
        description=f"{name} things.",
        input_schema={"type": "object"},
        declaration=f"export function {export or name}(): Promise<unknown>;",
        **fields,
    )


def out_view(cid: str, *tools: ToolView, sid: str | None = None) -> ServerView:
    return ServerView(
        server_id=sid or cid,
        config_id=cid,
        server_name=cid,
        tools={t.tool_name: t for t in tools},
        module_source=OUT_MODULE,
    )


def live(*tools: dict[str, Any]) -> LiveServer:
    return LiveServer(
        server_json={
            "serverInfo": {"name": "Live Notes", "version": "2.0"},
            "instructions": "Use me.",
            "capabilities": {"tools": {}},
        },
        tools=tuple(tools),
    )


def plan(
    configs: dict[str, ServerConfig],
    views: dict[str, ServerView],
    *,
    lives: dict[str, LiveServer] | None = None,
    failures: dict[str, Failure] | None = None,
    pending: dict[str, Any] | None = None,
    selection: Selection | None = None,
) -> Plan:
    paths = {cid: cid for cid in configs}
    connections = Connections(lives=lives or {}, failures=failures or {}, pending=pending or {})
    return reconcile(configs, paths, views, selection or Selection({}), connections, out_dir="out")


def codes(diagnostics: list[Diagnostic]) -> list[tuple[str, str]]:
    return [(d["severity"], d["code"]) for d in diagnostics]


def build(cid: str, tools: list[dict[str, Any]], ghosts: list[dict[str, Any]]) -> BuiltModule:
    """What CodeMode's in-memory build gives (the generator's pure build_outputs)."""
    outputs = build_outputs([FixtureSet(cid, {}, copy.deepcopy(tools) + copy.deepcopy(ghosts), {})])
    entry = outputs.manifest["servers"][0]
    return BuiltModule(entry["serverId"], entry, outputs.files[module_file_of(entry)])


# --------------------------------------------------------------------------- select_servers


def test_select_requested_imported_and_refreshed_servers_in_that_order() -> None:
    configs = {"notes": cfg("notes"), "My Cal": cfg("My Cal"), "web": cfg("web")}
    paths = {"notes": "notes", "My Cal": "my-cal", "web": "web"}
    code = "import * as c from \"@codemode/servers/my-cal\";\nconst n = await import('@codemode/servers/notes');"
    selection = select_servers(code, ["notes", "my-cal"], configs, paths, refresh=["web", "notes"])
    assert list(selection.wanted.items()) == [
        ("notes", "requested"),
        ("My Cal", "requested"),
        ("web", "connected"),
    ]
    assert selection.diagnostics == []
    only_imports = select_servers(code, [], configs, paths)
    assert only_imports.wanted == {"My Cal": "imported", "notes": "imported"}
    assert only_imports.named("notes") and not select_servers(
        "", [], configs, paths, ["web"]
    ).named("web")


def test_select_reports_an_unknown_capability_with_the_available_ids() -> None:
    selection = select_servers(
        'import "@codemode/servers/nope";', ["mail"], {"notes": cfg("notes")}, {"notes": "notes"}
    )
    assert selection.wanted == {}
    (diagnostic,) = selection.diagnostics
    assert codes([diagnostic]) == [("warning", "CAPABILITY_UNAVAILABLE")]
    assert "'mail'" in diagnostic["message"] and "available: notes" in diagnostic["message"]


# --------------------------------------------------------------------------- reconcile


def test_out_server_not_connected_keeps_out_view_and_connects_lazily() -> None:
    views = {"notes": out_view("notes", out_tool("get"))}
    result = plan({"notes": cfg("notes")}, views)
    assert result.diagnostics == [] and result.build == {} and result.redeclare == []
    catalog = result.catalog({}, {})
    assert (
        catalog.servers["notes"].live is False
        and catalog.servers["notes"].module_source == OUT_MODULE
    )
    assert catalog.modules() == {module_specifier("notes"): OUT_MODULE}


def test_live_server_matching_out_keeps_out_module_names_and_declarations_with_live_metadata() -> (
    None
):
    views = {"notes": out_view("notes", out_tool("get", export="get"))}
    result = plan({"notes": cfg("notes")}, views, lives={"notes": live(wire("get"))})
    assert result.diagnostics == [] and result.build == {} and result.redeclare == []
    view = result.catalog({}, {}).servers["notes"]
    assert view.live and view.module_source == OUT_MODULE
    assert (
        view.server_name == "Live Notes" and view.version == "2.0" and view.description == "Use me."
    )
    assert view.capabilities == ["tools"]
    assert view.tools["get"].declaration == "export function get(): Promise<unknown>;"
    # The inputs are not changed: the next run starts from out/ again.
    assert views["notes"].live is False and views["notes"].server_name == "notes"


def test_out_export_names_win_while_the_tool_names_match() -> None:
    # out/ exported `get_` (say, a collision it saw); the live §6.1 mapping alone would say `get`.
    views = {"notes": out_view("notes", out_tool("get", export="get_"))}
    view = (
        plan({"notes": cfg("notes")}, views, lives={"notes": live(wire("get"))})
        .catalog({}, {})
        .servers["notes"]
    )
    assert view.tools["get"].export_name == "get_"


def test_changed_definition_is_stale_and_its_declaration_comes_from_a_build() -> None:
    views = {"notes": out_view("notes", out_tool("get"))}
    changed = wire("get", description="Fetch one note.")
    result = plan({"notes": cfg("notes")}, views, lives={"notes": live(changed)})
    assert codes(result.diagnostics) == [("warning", "STALE_OUT")]
    assert "changed: get" in result.diagnostics[0]["message"]
    assert result.build == {} and result.redeclare == ["notes"]
    catalog = result.catalog({}, {"notes": build("notes", [changed], [])})
    view = catalog.servers["notes"]
    assert view.module_source == OUT_MODULE  # same names: out/'s module stays
    assert view.tools["get"].description == "Fetch one note."
    declaration = view.tools["get"].declaration
    assert declaration is not None and "Fetch one note." in declaration


def test_renamed_tools_rebuild_the_module_with_the_vanished_ones_as_ghosts() -> None:
    views = {"notes": out_view("notes", out_tool("get"), out_tool("old"))}
    result = plan({"notes": cfg("notes")}, views, lives={"notes": live(wire("get"), wire("new"))})
    assert codes(result.diagnostics) == [("warning", "STALE_OUT")]
    message = result.diagnostics[0]["message"]
    assert "new tools: new" in message and "tools gone: old" in message
    assert result.build == {
        "notes": [{"name": "old", "description": "old things.", "inputSchema": {"type": "object"}}]
    }
    built = build("notes", [wire("get"), wire("new")], result.build["notes"])
    view = result.catalog({"notes": built}, {}).servers["notes"]
    assert view.module_source == built.source and "export const old = " in built.source
    assert sorted(view.tools) == ["get", "new"]  # a call of `old` fails as ToolNotFoundError
    assert view.live and view.server_name == "Live Notes"


def test_server_out_lacks_is_built_in_memory() -> None:
    result = plan({"web": cfg("web")}, {}, lives={"web": live(wire("fetch"))})
    assert codes(result.diagnostics) == [("info", "MODULE_BUILT_IN_MEMORY")]
    assert "no module in out/" in result.diagnostics[0]["message"]
    assert result.build == {"web": []}
    built = build("web", [wire("fetch")], [])
    view = result.catalog({"web": built}, {}).servers["web"]
    assert view.module_source == built.source and view.tools["fetch"].declaration is not None


def test_built_module_whose_path_collides_is_left_out() -> None:
    result = plan({"web": cfg("web")}, {}, lives={"web": live(wire("fetch"))})
    other = build("web", [wire("fetch")], [])
    catalog = result.catalog({"web": BuiltModule("web--2", other.entry, other.source)}, {})
    assert "web" not in catalog.servers and "web--2" not in catalog.servers
    assert codes(catalog.diagnostics)[-1] == ("warning", "CAPABILITY_UNAVAILABLE")
    assert "collides" in catalog.diagnostics[-1]["message"]


def test_blocklisted_tools_are_hidden_from_the_live_view() -> None:
    views = {"notes": out_view("notes", out_tool("get"))}
    configs = {"notes": cfg("notes", blocklist=("drop",))}
    result = plan(configs, views, lives={"notes": live(wire("get"), wire("drop"))})
    assert result.diagnostics == []
    assert list(result.catalog({}, {}).servers["notes"].tools) == ["get"]


def test_failed_server_is_unavailable_warning_when_named_info_otherwise() -> None:
    views = {"notes": out_view("notes", out_tool("get"))}
    configs = {"notes": cfg("notes"), "web": cfg("web")}
    failures = {"notes": Failure("command not found: x"), "web": Failure("HTTP 401", auth=True)}
    result = plan(configs, views, failures=failures, selection=Selection({"notes": "imported"}))
    assert codes(result.diagnostics) == [
        ("warning", "CAPABILITY_UNAVAILABLE"),
        ("info", "CAPABILITY_UNAVAILABLE"),
    ]
    assert "unavailable: command not found: x" in result.diagnostics[0]["message"]
    assert "out/ has none" not in result.diagnostics[0]["hint"]
    assert "out/ has none" in result.diagnostics[1]["hint"]
    catalog = result.catalog({}, {})
    assert (
        catalog.servers["notes"].unavailable == "command not found: x"
        and not catalog.servers["notes"].auth_failed
    )
    assert catalog.servers["web"].auth_failed and catalog.servers["web"].module_source is None
    assert [v.server_id for v in catalog.visible()] == []
    assert views["notes"].unavailable is None  # the input view is untouched


def test_pending_connections_are_reported_in_order() -> None:
    configs = {"notes": cfg("notes"), "web": cfg("web"), "mail": cfg("mail")}
    pending: dict[str, Any] = {"notes": "timeout", "mail": "timeout", "web": "background"}
    result = plan(
        configs,
        {},
        pending=pending,
        selection=Selection({"notes": "requested", "mail": "connected"}),
    )
    assert codes(result.diagnostics) == [
        ("warning", "CAPABILITY_UNAVAILABLE"),
        ("info", "CAPABILITY_UNAVAILABLE"),
        ("info", "CAPABILITY_UNAVAILABLE"),
    ]
    assert "'notes' did not finish connecting" in result.diagnostics[0]["message"]
    assert "'web' is still connecting in the background" in result.diagnostics[2]["message"]
    assert result.catalog({}, {}).servers == {}


def test_selection_diagnostics_come_first_and_server_text_is_bounded() -> None:
    selection = select_servers("", ["nope"], {"notes": cfg("notes")}, {"notes": "notes"})
    result = plan(
        {"notes": cfg("notes")}, {}, failures={"notes": Failure("x" * 10_000)}, selection=selection
    )
    assert result.diagnostics[0]["message"].startswith("requested capability 'nope'")
    assert len(result.diagnostics[1]["message"]) <= MAX_DIAGNOSTIC_CHARS + 40  # and the cut note
