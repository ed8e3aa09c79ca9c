"""Spec §4 (@codemode/discovery) and §12.1 (specVersion), in real QuickJS against real servers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen import SPEC_VERSION
from codemode_gen.runtime.host.discovery import (
    MODULE_NAME,
    discovery_module,
    search_index,
    stem,
    terms,
)
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox.protocol import HostReply
from tests.catalogs import copies_catalog
from tests.conftest import NOTES_TOOLS
from tests.runtime_support import REPO, HostThread, assert_ok, stdio, write_out

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s4")
    configs = {
        "notes": stdio("notes", "notes_server"),
        "calendar": stdio("calendar", "calendar_server", blocklist=("create_event",)),
    }
    h = HostThread(configs, base / "out", base / "logs")
    # out/ is empty: a server joins the runs after the one that first waits for its connection.
    assert_ok(h.run("1", requested_capabilities=list(configs)))
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
    # listSkills: the project's skills (README "Skills"), beyond §4.1's functions.
    assert names == [
        "describeServer",
        "getTool",
        "listServers",
        "listSkills",
        "listTools",
        "searchTools",
        "specVersion",
    ]


def test_s4_2_1_list_servers(host: HostThread) -> None:
    servers = disc(host, "return await d.listServers();")
    assert [s["serverId"] for s in servers] == ["calendar", "notes"]
    notes = servers[1]
    assert set(notes) <= {"serverId", "serverName", "capabilities"} and isinstance(
        notes["serverName"], str
    )
    assert "tools" in notes.get("capabilities", ["tools"])


def test_s4_2_2_describe_server(host: HostThread) -> None:
    desc = disc(host, "return await d.describeServer('notes');")
    assert desc["serverId"] == "notes" and desc["version"] == "1.0.0"
    assert isinstance(desc.get("description", ""), str)


def test_s4_3_list_tools_detail_levels(host: HostThread) -> None:
    levels = disc(
        host,
        "return [await d.listTools('notes', {detail: 'name'}), await d.listTools('notes'),"
        " await d.listTools('notes', {detail: 'full'})];",
    )
    name, description, full = levels
    assert [t["toolName"] for t in name] == NOTES_TOOLS
    assert all(set(t) == {"toolName", "exportName"} for t in name)
    assert all(
        set(t) <= {"toolName", "exportName", "description", "annotations"} for t in description
    )
    assert any("annotations" in t for t in description) and all(
        "description" in t for t in description
    )
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
    result = disc(
        host,
        """
      const out = [];
      try { await d.describeServer('nope'); } catch (e) { out.push([e.name, e instanceof E.ServerNotFoundError, !!e.hint]); }
      try { await d.getTool('notes', 'nope'); } catch (e) { out.push([e.name, e instanceof E.ToolNotFoundError, !!e.hint]); }
      try { await d.listTools('nope'); } catch (e) { out.push([e.name, e instanceof E.CodemodeError, !!e.hint]); }
      return out;""",
    )
    assert result == [
        ["ServerNotFoundError", True, True],
        ["ToolNotFoundError", True, True],
        ["ServerNotFoundError", True, True],
    ]


def test_s4_2_5_search_ranks_name_matches_first(host: HostThread) -> None:
    res = disc(host, "return await d.searchTools('search notes');")
    assert res["query"] == "search notes"
    assert (
        res["results"][0]["toolName"] == "search_notes" and res["results"][0]["serverId"] == "notes"
    )
    assert all("serverId" in r and "description" in r for r in res["results"])


def test_s4_2_7_search_options_detail_server_and_limit(host: HostThread) -> None:
    res = disc(
        host,
        "return [await d.searchTools('event', {serverId: 'calendar', detail: 'name', limit: 2}),"
        " await d.searchTools('note', {detail: 'full', limit: 1})];",
    )
    cal, notes = res
    assert 0 < len(cal["results"]) <= 2
    assert all(
        r["serverId"] == "calendar" and set(r) == {"serverId", "toolName", "exportName"}
        for r in cal["results"]
    )
    assert len(notes["results"]) == 1 and "inputSchema" in notes["results"][0]


def test_s4_search_is_case_insensitive_and_tokenised(host: HostThread) -> None:
    a = disc(
        host,
        "return (await d.searchTools('TASKS list', {detail: 'name'})).results.map(r => r.toolName);",
    )
    assert a[0] == "tasks.list"


def test_s4_results_are_fresh_copies(host: HostThread) -> None:
    result = disc(
        host,
        """
      const t = await d.getTool('notes', 'create_note');
      t.inputSchema.properties = null; t.toolName = 'hacked';
      const s = await d.listServers(); s[0].serverId = 'hacked';
      return [(await d.getTool('notes', 'create_note')).toolName,
              typeof (await d.getTool('notes', 'create_note')).inputSchema.properties,
              (await d.listServers())[0].serverId];""",
    )
    assert result == ["create_note", "object", "calendar"]


def test_s4_blocklisted_tools_are_hidden(host: HostThread) -> None:
    names = disc(
        host, "return (await d.listTools('calendar', {detail: 'name'})).map(t => t.toolName);"
    )
    assert names and "create_event" not in names


# --------------------------------------------------------------------------- declarations


def test_s4_3_declaration_only_at_full_detail(host: HostThread) -> None:
    tool, full, described, named, found_full, found = disc(
        host,
        """return [
      await d.getTool('notes', 'get_note'), await d.listTools('notes', {detail: 'full'}),
      await d.listTools('notes'), await d.listTools('notes', {detail: 'name'}),
      await d.searchTools('note', {detail: 'full', limit: 3}), await d.searchTools('note', {limit: 3})];""",
    )
    declaration = tool["declaration"]
    assert (
        declaration.startswith("/**")
        and "export function get_note(" in declaration
        and "Promise<" in declaration
    )
    assert "Fetch one note by id." in declaration
    assert all(f"export function {t['exportName']}(" in t["declaration"] for t in full)
    assert all("declaration" in r for r in found_full["results"])
    assert not any("declaration" in t for t in described + named + found["results"])


@pytest.mark.slow
def test_s4_3_declaration_follows_the_live_tool_when_out_is_stale(tmp_path: Path) -> None:
    """Same tool names, one changed definition: out/'s module stays, but its declaration of
    the changed tool would describe the old one, so that one comes from an in-memory build."""
    from codemode_gen.generator.fixtures import load_fixture_set

    recorded = load_fixture_set(REPO / "fixtures" / "notes")
    tools = json.loads(json.dumps(recorded.tools))
    for tool in tools:
        if tool["name"] == "get_note":
            tool["description"] = "Outdated text."
            tool["inputSchema"]["properties"]["id"]["description"] = "Outdated id."
    write_out(tmp_path / "out", [dataclasses.replace(recorded, tools=tools)])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    out_declarations = {t["toolName"]: t["declaration"] for t in manifest["servers"][0]["tools"]}
    assert "Outdated" in out_declarations["get_note"]

    h = HostThread({"notes": stdio("notes", "notes_server")}, tmp_path / "out", tmp_path / "logs")
    try:
        response = h.run(
            "import * as d from '@codemode/discovery';\n"
            "globalThis.__codemode_result__ = await d.listTools('notes', {detail: 'full'});",
            requested_capabilities=["notes"],
        )
    finally:
        h.close()
    assert any(
        d["code"] == "STALE_OUT" and "get_note" in d["message"] for d in response["diagnostics"]
    )
    declared = {t["toolName"]: t.get("declaration") for t in assert_ok(response)}
    fresh = declared["get_note"]
    assert fresh is not None and "Fetch one note by id." in fresh and "Outdated" not in fresh
    # Unchanged tools keep out/'s text, which knows the output types inferred from recordings.
    assert declared["stats"] == out_declarations["stats"]
    assert declared["create_note"] == out_declarations["create_note"]


# --------------------------------------------------------------------------- search ranking

# Catalogs of real servers, three times over (~500 tools), next to the same `time` catalog
# served alone (exact ties across servers) and the demo notes server.
CATALOG_COPIES = "3"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s4-big")
    configs = {
        "catalog": stdio("catalog", "catalog_server", "--copies", CATALOG_COPIES),
        "clock": stdio("clock", "catalog_server", "--catalog", "time"),
        "notes": stdio("notes", "notes_server"),
    }
    h = HostThread(configs, base / "out", base / "logs")
    assert_ok(h.run("1", requested_capabilities=list(configs)))
    yield h
    h.close()


def found(host: HostThread, query: str, **options: Any) -> list[tuple[str, str]]:
    opts = json.dumps({"detail": "name", **options})
    res = disc(host, f"return await d.searchTools({json.dumps(query)}, {opts});")
    return [(r["serverId"], r["toolName"]) for r in res["results"]]


@pytest.mark.slow
def test_s4_2_5_search_ranks_by_relevance_among_hundreds_of_tools(big: HostThread) -> None:
    count = disc(big, "return (await d.listTools('catalog', {detail: 'name'})).length;")
    assert count >= 400
    assert found(big, "current time")[0][1] == "get_current_time"
    assert found(big, "delete a note")[0] == ("notes", "delete_note")
    assert found(big, "read file")[0][1] == "read_file"
    assert found(big, "post a message to a slack channel")[0][1] == "slack_post_message"
    assert found(big, "geocode an address")[0][1] == "maps_geocode"
    shots = [name for _, name in found(big, "take a screenshot", limit=8)]
    assert shots[0] == "browser_take_screenshot" and "puppeteer_screenshot" in shots


@pytest.mark.slow
def test_s4_2_5_search_matches_other_word_forms(big: HostThread) -> None:
    assert found(big, "create issues")[0][1] == "create_issue"
    assert found(big, "deleting notes")[0] == ("notes", "delete_note")
    assert found(big, "screenshots", limit=3)[0][1] == "browser_take_screenshot"
    assert ("notes", "list_notes") in found(big, "listing note", serverId="notes", limit=3)
    assert found(big, "calend") == []  # a prefix matches only where the catalog has the word
    assert found(big, "directori", limit=1)[0][1].startswith(
        ("list_directory", "create_directory", "directory_tree")
    )
    assert found(big, "getCurrentTime")[0][1] == "get_current_time"  # camelCase splits


@pytest.mark.slow
def test_s4_2_5_search_tie_break_is_catalog_order(big: HostThread) -> None:
    # The same tool text on two servers scores the same: server id decides, then tool name.
    first = found(big, "current time", limit=4)
    assert first[:2] == [("catalog", "get_current_time"), ("clock", "get_current_time")]
    # Copies that differ only in their name tie on a description-only match.
    zones = [name for sid, name in found(big, "timezone", serverId="catalog", limit=200)]
    copies = [n for n in zones if n.startswith("get_current_time")]
    assert copies == ["get_current_time", "get_current_time_2", "get_current_time_3"]
    assert found(big, "timezone") == found(big, "timezone")
    everything = found(big, "", limit=200)  # empty query: every tool, in catalog order
    assert everything == sorted(everything) and len(everything) == 200


@pytest.mark.slow
def test_s4_2_7_search_filters_limits_and_details_with_ranking(big: HostThread) -> None:
    clock = found(big, "current time", serverId="clock")
    assert clock[0] == ("clock", "get_current_time") and {sid for sid, _ in clock} == {"clock"}
    assert len(found(big, "get", limit=7)) == 7
    assert len(found(big, "", limit=10_000)) == 200  # MAX_SEARCH_LIMIT
    assert len(found(big, "")) == 20  # DEFAULT_SEARCH_LIMIT
    assert len(found(big, "get", limit=200)) > 20  # every match, ranked, up to the limit
    assert found(big, "get", limit=0) == []
    assert found(big, "zzzzqqq") == []


# Searches run inside QuickJS over this many tools: the real catalogs, renamed copies until there
# are this many. How fast they are is bench/discovery.py's (indexed search vs a scan of listTools).
BIG_CATALOG_TOOLS = 5000


def run_in_sandbox(code: str, modules: dict[str, str]) -> Response:
    """One script in the project's own sandbox (a worker running QuickJS), no servers: for
    catalogs an MCP server would make slow to set up (5,000 tools built in memory take seconds)."""
    from codemode_gen.runtime.limits import Limits
    from codemode_gen.runtime.sandbox.pool import Sandbox

    async def host_call(request: dict[str, Any]) -> HostReply:
        return {"ok": False, "error": {"errorClass": "ToolCallError", "message": "no tools here"}}

    async def run() -> Response:
        async with Sandbox(pool_size=1) as sandbox:
            return await sandbox.run(
                code, modules, host_call, Limits.from_json({"timeoutMs": 60_000})
            )

    return asyncio.run(run())


@pytest.mark.slow
def test_s4_2_5_search_over_5000_tools_ranks_the_named_tool_first() -> None:
    response = run_in_sandbox(
        """
      import * as d from '@codemode/discovery';
      const queries = ['current time', 'delete a note', 'create issues', 'list files in a directory', 'get'];
      const top = {};
      for (const q of queries) top[q] = (await d.searchTools(q, {detail: 'name', limit: 3})).results.map((t) => t.toolName);
      const count = (await d.listTools('catalog', {detail: 'name'})).length;
      globalThis.__codemode_result__ = {top, count};""",
        {MODULE_NAME: discovery_module(copies_catalog(BIG_CATALOG_TOOLS))},
    )
    result = assert_ok(response)
    assert result["count"] == BIG_CATALOG_TOOLS
    top = result["top"]
    assert top["current time"][0] == "get_current_time"
    assert top["create issues"][0] == "create_issue"
    assert all(len(names) == 3 for names in top.values()), top  # every query matches, limit kept


# --------------------------------------------------------------------------- normalisation

WORD_FORMS = [
    ["note", "notes", "noting", "noted"],
    ["create", "creates", "created", "creating"],
    ["use", "uses", "used", "using"],
    ["add", "adds", "added", "adding"],
    ["get", "gets", "getting"],
    ["query", "queries", "queried"],
    ["copy", "copies", "copied", "copying"],
    ["fix", "fixes", "fixed", "fixing"],
    ["match", "matches", "matched"],
    ["class", "classes"],
    ["status", "statuses"],
    ["alias", "aliases"],
    ["embed", "embeds", "embedded", "embedding", "embeddings"],
    ["list", "lists", "listed", "listing"],
    ["id", "ids"],
    ["type", "types", "typed", "typing"],
    ["call", "calls", "called", "calling"],
    ["file", "files", "filing"],
    ["need", "needs", "needed"],
    ["stop", "stops", "stopped", "stopping"],
]


def test_s4_search_stemming_folds_word_forms() -> None:
    for forms in WORD_FORMS:
        assert len({stem(w) for w in forms}) == 1, {w: stem(w) for w in forms}
    assert len({stem(w) for w in ("note", "not", "notebook")}) == 3
    assert terms("getHTTPServer tasks.list export-csv API-get-users") == [
        "get",
        "http",
        "server",
        "task",
        "list",
        "export",
        "csv",
        "api",
        "get",
        "user",
    ]


def test_s4_search_index_encodes_every_occurrence() -> None:
    from codemode_gen.runtime.host.catalog import ToolView

    index = search_index(
        [
            ToolView("get_note", "get_note", description="Fetch one note; a note by id."),
            ToolView("tasks.add", "tasks_add", title="Add Task"),
        ]
    )
    by_term = dict(zip(index["terms"], index["postings"], strict=True))
    assert index["terms"] == sorted(index["terms"]) and index["width"] == 1
    assert by_term["note"] == "ACC"  # slot 0 (name of tool 0), twice slot 2 (its description)
    assert by_term["task"] == "DE"  # tool 1: name (slot 3) and title (slot 4)
    assert index["lengths"] == [2, 0, 7, 2, 2, 0] and index["totals"] == [4, 2, 7]


def test_s4_search_query_and_catalog_normalise_alike() -> None:
    """The host normalises the catalog, QuickJS the query: both must give the same terms."""
    from codemode_gen.runtime.host.catalog import Catalog

    samples = [w for forms in WORD_FORMS for w in forms] + [
        "getHTTPServer",
        "tasks.list",
        "export-csv",
        "API-get-users",
        "Créer_Événements naïve",
        "日本語テキスト",
        "x2Y",
        "ÜBERSICHT",
        "straße",
        "Ωmega",
        "𝐀𝐁𝐂 emoji😀here",
        "𝐀𝐁e 𝐀ing x𝐀ed 𝐀y",
        "dried drying",
        "hopping hoping",
        "statuses",
        "Fetch one note by id.",
        "ISO 8601 UTC timestamps",
    ]
    module = discovery_module(Catalog()) + "\nexport { terms as __terms };\n"
    code = (
        "import { __terms } from 'test:discovery';\n"
        f"globalThis.__codemode_result__ = {json.dumps(samples)}.map(__terms);"
    )
    response = run_in_sandbox(code, {"test:discovery": module, MODULE_NAME: module})
    assert_ok(response)
    assert response["result"] == [terms(s) for s in samples]


def test_approval_is_in_the_full_definition_and_tags_its_declaration(host: HostThread) -> None:
    """Issue 12: a tool whose calls wait for approval says so where a script reads declarations
    (the default "auto" policy asks for the destructive delete_note)."""
    got = disc(
        host,
        "const t = await d.getTool('notes', 'delete_note'); const r = await d.getTool('notes', 'get_note');"
        " return [t.approval, t.declaration.split('\\n')[0], 'approval' in r];",
    )
    assert got == [
        "ask",
        "/** Delete a note permanently. @destructive @idempotent @closedWorld @approval the user is"
        " asked before each call; batch such calls in one Promise.all */",
        False,
    ]


def test_tag_declaration_finds_the_doc_of_the_function() -> None:
    from codemode_gen.runtime.host.catalog import ToolView, tag_declaration

    view = ToolView(
        "wipe",
        "wipe",
        declaration="/** Wipe. @destructive */\nexport function wipe(): Promise<void>;",
        approval="ask-once",
    )
    definition = view.definition()
    assert definition["approval"] == "ask-once"
    assert definition["declaration"] == (
        "/** Wipe. @destructive @approvalOnce the user is asked before the first call per"
        " session; batch such calls in one Promise.all */\nexport function wipe(): Promise<void>;"
    )
    assert (
        view.declaration == "/** Wipe. @destructive */\nexport function wipe(): Promise<void>;"
    )  # out/'s text kept
    bare = "export function f(): Promise<X>;\ntype X = { a: string };"
    assert tag_declaration(bare, "@denied") == "/** @denied */\n" + bare
    learned = (
        "// output type learned from 2 live calls\n/** Get. */\nexport function g(): Promise<X>;"
    )
    assert tag_declaration(learned, "@approval").split("\n")[:2] == [
        "// output type learned from 2 live calls",
        "/** Get. @approval */",
    ]
    example = "/** Get. @readOnly */\n// e.g. g({ id: 2 })\nexport function g(input: { id: number }): Promise<X>;"
    assert tag_declaration(example, "@approval").split("\n")[:2] == [
        "/** Get. @readOnly @approval */",
        "// e.g. g({ id: 2 })",
    ]
    assert tag_declaration(example.split("\n", 1)[1], "@denied").startswith(
        "/** @denied */\n// e.g. g({ id: 2 })\nexport "
    )
    assert "approval" not in ToolView("r", "r").definition()
