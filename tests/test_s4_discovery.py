"""Spec §4 (@codemode/discovery) and §12.1 (specVersion), in real QuickJS against real servers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen import SPEC_VERSION

from .runtime_support import HostThread, assert_ok, stdio

pytestmark = pytest.mark.timeout(120)

NOTES_TOOLS = [
    "create_note", "delete_note", "export-csv", "flaky_sync", "get_note", "list_notes", "render_chart",
    "search_notes", "stats", "summary", "tasks.add", "tasks.list", "update_note",
]


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s4")
    configs = {"notes": stdio("notes", "notes_server"), "calendar": stdio("calendar", "calendar_server", blocklist=("create_event",))}
    h = HostThread(configs, base / "out", base / "logs")
    yield h
    h.close()


def disc(host: HostThread, expr: str) -> Any:
    r = host.run(
        "import * as d from '@codemode/discovery';\nimport * as E from '@codemode/errors';\n"
        f"globalThis.__codemode_result__ = await (async () => {{ {expr} }})();"
    )
    return assert_ok(r)


def test_s12_1_spec_version_is_semver(host: HostThread) -> None:
    assert disc(host, "return d.specVersion;") == SPEC_VERSION == "1.0.0"


def test_s4_1_module_exports_every_function(host: HostThread) -> None:
    names = disc(host, "return Object.keys(d).sort();")
    assert names == ["describeServer", "getTool", "listServers", "listTools", "searchTools", "specVersion"]


def test_s4_2_1_list_servers(host: HostThread) -> None:
    servers = disc(host, "return await d.listServers();")
    assert [s["serverId"] for s in servers] == ["calendar", "notes"]
    notes = servers[1]
    assert set(notes) <= {"serverId", "serverName", "capabilities"} and isinstance(notes["serverName"], str)
    assert "tools" in notes.get("capabilities", ["tools"])


def test_s4_2_2_describe_server(host: HostThread) -> None:
    desc = disc(host, "return await d.describeServer('notes');")
    assert desc["serverId"] == "notes" and desc["version"] == "1.0.0"
    assert isinstance(desc.get("description", ""), str)


def test_s4_3_list_tools_detail_levels(host: HostThread) -> None:
    levels = disc(host, "return [await d.listTools('notes', {detail: 'name'}), await d.listTools('notes'),"
                        " await d.listTools('notes', {detail: 'full'})];")
    name, description, full = levels
    assert [t["toolName"] for t in name] == NOTES_TOOLS
    assert all(set(t) == {"toolName", "exportName"} for t in name)
    assert all(set(t) <= {"toolName", "exportName", "description", "annotations"} for t in description)
    assert any("annotations" in t for t in description) and all("description" in t for t in description)
    assert all("inputSchema" in t for t in full)
    assert any("outputSchema" in t for t in full)
    by_name = {t["toolName"]: t for t in full}
    assert by_name["export-csv"]["exportName"] == "export_csv"
    assert by_name["get_note"]["annotations"]["readOnlyHint"] is True  # §6.3


def test_s4_1_get_tool_is_full_definition(host: HostThread) -> None:
    tool = disc(host, "return await d.getTool('notes', 'create_note');")
    assert tool["toolName"] == "create_note" and tool["inputSchema"]["type"] == "object"
    assert "title" in tool["inputSchema"]["properties"]


def test_s4_unknown_server_and_tool_throw_the_error_classes(host: HostThread) -> None:
    result = disc(host, """
      const out = [];
      try { await d.describeServer('nope'); } catch (e) { out.push([e.name, e instanceof E.ServerNotFoundError, !!e.hint]); }
      try { await d.getTool('notes', 'nope'); } catch (e) { out.push([e.name, e instanceof E.ToolNotFoundError, !!e.hint]); }
      try { await d.listTools('nope'); } catch (e) { out.push([e.name, e instanceof E.CodemodeError, !!e.hint]); }
      return out;""")
    assert result == [["ServerNotFoundError", True, True], ["ToolNotFoundError", True, True],
                      ["ServerNotFoundError", True, True]]


def test_s4_2_5_search_ranks_name_matches_first(host: HostThread) -> None:
    res = disc(host, "return await d.searchTools('search notes');")
    assert res["query"] == "search notes"
    assert res["results"][0]["toolName"] == "search_notes" and res["results"][0]["serverId"] == "notes"
    assert all("serverId" in r and "description" in r for r in res["results"])


def test_s4_2_7_search_options_detail_server_and_limit(host: HostThread) -> None:
    res = disc(host, "return [await d.searchTools('event', {serverId: 'calendar', detail: 'name', limit: 2}),"
                     " await d.searchTools('note', {detail: 'full', limit: 1})];")
    cal, notes = res
    assert 0 < len(cal["results"]) <= 2
    assert all(r["serverId"] == "calendar" and set(r) == {"serverId", "toolName", "exportName"} for r in cal["results"])
    assert len(notes["results"]) == 1 and "inputSchema" in notes["results"][0]


def test_s4_search_is_case_insensitive_and_tokenised(host: HostThread) -> None:
    a = disc(host, "return (await d.searchTools('TASKS list', {detail: 'name'})).results.map(r => r.toolName);")
    assert a[0] == "tasks.list"


def test_s4_results_are_fresh_copies(host: HostThread) -> None:
    result = disc(host, """
      const t = await d.getTool('notes', 'create_note');
      t.inputSchema.properties = null; t.toolName = 'hacked';
      const s = await d.listServers(); s[0].serverId = 'hacked';
      return [(await d.getTool('notes', 'create_note')).toolName,
              typeof (await d.getTool('notes', 'create_note')).inputSchema.properties,
              (await d.listServers())[0].serverId];""")
    assert result == ["create_note", "object", "calendar"]


def test_s4_blocklisted_tools_are_hidden(host: HostThread) -> None:
    names = disc(host, "return (await d.listTools('calendar', {detail: 'name'})).map(t => t.toolName);")
    assert names and "create_event" not in names
