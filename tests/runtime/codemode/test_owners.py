"""The owners behind the CodeMode facade (runtime/codemode/), each on its own: no server
process, no sandbox; fakes stand where a session would be."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.runtime.codemode import builds, catalogs, connections, run, typechecks
from codemode_gen.runtime.codemode.builds import Builder
from codemode_gen.runtime.codemode.connections import ConnectionManager
from codemode_gen.runtime.codemode.learning import LearningSink
from codemode_gen.runtime.codemode.out_cache import OutCache
from codemode_gen.runtime.diagnostics import DiagnosticCode, diagnostic, ts_code
from codemode_gen.runtime.host.catalog import Catalog, LiveServer, ServerView, ToolView
from codemode_gen.runtime.host.telemetry import Telemetry
from codemode_gen.runtime.limits import Limits
from tests.runtime_support import fixture_set, write_out

TOOL = {
    "name": "echo",
    "description": "Echo.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
SERVER_JSON = {"serverInfo": {"name": "notes", "version": "1.0.0"}, "capabilities": {"tools": {}}}


def configs(*ids: str, blocklist: tuple[str, ...] = ()) -> dict[str, ServerConfig]:
    return {
        cid: ServerConfig(id=cid, transport="stdio", command="/nonexistent", blocklist=blocklist)
        for cid in ids
    }


# ---------------------------------------------------------------------- out_cache.py


def test_out_cache_reads_the_manifest_again_only_when_it_changes(tmp_path: Path) -> None:
    out = OutCache(tmp_path / "out", configs("notes", "extra"))
    assert out.manifest() is None and out.views(None).covered == set()
    write_out(tmp_path / "out", [fixture_set("notes", [TOOL])])
    first = out.manifest()
    assert first is not None and out.manifest() is first
    views = out.views(first)
    assert out.views(first) is views and views.covered == {"notes"}
    # out/ knows `notes`; `extra` is neither there nor built: a stub (§4.4 deferral)
    assert [e["serverId"] for e in out.prompt_servers({})] == ["extra", "notes"]
    assert out.prompt_servers({})[0] == {"serverId": "extra", "configId": "extra"}
    write_out(tmp_path / "out", [fixture_set("notes", [TOOL, {**TOOL, "name": "echo2"}])])
    manifest = tmp_path / "out" / "manifest.json"
    os.utime(manifest, ns=(1, 1))  # a different mtime even on a coarse clock
    again = out.manifest()
    assert again is not first and out.views(again) is not views


# ---------------------------------------------------------------------- builds.py


def test_builder_caches_a_build_per_tool_list_and_leaves_out_the_blocklist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builder = Builder(configs("notes", blocklist=("hidden",)), Settings())
    live = LiveServer(server_json=SERVER_JSON, tools=(TOOL, {**TOOL, "name": "hidden"}))
    assert [t["name"] for t in builder.listed_tools("notes", live)] == ["echo"]
    first = builder.build({"notes": live}, {})["notes"]
    assert "echo" in first.source and "hidden" not in first.source
    assert builder.build({"notes": live}, {})["notes"] is first  # same key: no second build
    assert builder.entries["notes"]["serverId"] == first.server_id
    monkeypatch.setattr(builds, "MAX_BUILD_CACHE", 1)
    other = LiveServer(server_json=SERVER_JSON, tools=({**TOOL, "name": "other"},))
    builder.build({"notes": other}, {})
    assert builder.build({"notes": live}, {})["notes"] is not first  # the bound emptied the cache


# ---------------------------------------------------------------------- connections.py


@dataclass
class FakeSession:
    tools: tuple[dict[str, Any], ...]
    server_json: dict[str, Any] = field(default_factory=lambda: dict(SERVER_JSON))
    closed: bool = False
    tools_changed: bool = False

    async def tools_snapshot(self) -> tuple[dict[str, Any], ...]:
        return self.tools


class FakeSessions:
    """SessionManager's `get`: a session per id, a failure, or a connect that never ends."""

    def __init__(
        self,
        sessions: dict[str, FakeSession],
        failing: tuple[str, ...] = (),
        hanging: tuple[str, ...] = (),
    ) -> None:
        self.sessions, self.failing, self.hanging = sessions, failing, hanging

    async def get(self, config_id: str) -> FakeSession:
        if config_id in self.failing:
            raise ConnectionError(f"{config_id} refused")
        if config_id in self.hanging:
            await asyncio.Event().wait()
        return self.sessions[config_id]


def manager(
    ids: tuple[str, ...], sessions: FakeSessions, built: list[str] | None = None
) -> ConnectionManager:
    cm = ConnectionManager(
        configs(*ids),
        log_dir=None,
        telemetry=Telemetry(),
        on_connected=lambda cid, live: (built if built is not None else []).append(cid),
    )
    cm._sessions = sessions  # type: ignore[assignment]
    return cm


def test_connections_share_one_snapshot_per_tool_list_and_see_list_changed() -> None:
    async def main() -> None:
        session = FakeSession(tools=(TOOL,))
        cm = manager(("notes",), FakeSessions({"notes": session}))
        assert cm.current_live("notes") is None and not cm.needs_refresh("notes")
        live = await cm.live("notes")
        assert await cm.live("notes") is live and cm.current_live("notes") is live
        session.tools_changed = True  # tools/list_changed (§8.1)
        assert cm.current_live("notes") is None and cm.needs_refresh("notes")
        session.tools_changed, session.tools = False, ({**TOOL, "name": "new"},)
        assert (await cm.live("notes")) is not live and cm.snapshots()[
            "notes"
        ].tools == session.tools
        cm.forget()
        assert cm.snapshots() == {} and cm.connected == {}

    anyio.run(main)


def test_connect_reports_failures_timeouts_and_background_connections() -> None:
    async def main() -> None:
        built: list[str] = []
        sessions = FakeSessions(
            {"ok": FakeSession(tools=(TOOL,)), "late": FakeSession(tools=(TOOL,))},
            failing=("bad",),
            hanging=("slow",),
        )
        cm = manager(("ok", "bad", "slow", "late"), sessions, built)
        found = await cm.connect(["ok", "bad", "slow"], covered={"ok", "bad", "slow"}, budget_s=0.2)
        assert set(found.lives) == {"ok"} and found.failures["bad"].reason == "bad refused"
        assert found.pending == {"slow": "timeout", "late": "background"}  # `late` is not in out/
        await cm.wait_background(5)
        assert built == ["late"]  # connected in the background, then built for the description
        again = await cm.connect([], covered={"ok", "bad", "slow"}, budget_s=0.2)
        assert set(again.lives) == {"ok", "late"} and again.pending == {}
        await cm.cancel_background()

    anyio.run(main)


def test_a_session_before_the_host_is_entered_is_a_clear_error() -> None:
    cm = ConnectionManager(
        configs("notes"), log_dir=None, telemetry=Telemetry(), on_connected=lambda cid, live: None
    )
    with pytest.raises(RuntimeError, match="async with CodeMode"):
        anyio.run(cm.session, "notes")


# ---------------------------------------------------------------------- learning.py


def test_learning_without_record_writes_nothing_and_says_nothing() -> None:
    sink = LearningSink(
        configs("notes"),
        Settings(),
        record=False,
        builder=Builder(configs("notes"), Settings()),
        lives=dict,
    )
    assert sink.recorder is None
    assert anyio.run(sink.flush) == [] and sink.take_notes() == []
    catalog = Catalog(servers={"notes": ServerView("notes", "notes", "notes")})
    sink.apply(catalog)  # nothing learned: the catalog is left as it is
    assert catalog.servers["notes"].tools == {}


def test_learning_with_record_writes_to_the_given_folder(tmp_path: Path) -> None:
    sink = LearningSink(
        configs("notes"),
        Settings(),
        record=tmp_path / "fx",
        builder=Builder(configs("notes"), Settings()),
        lives=dict,
    )
    assert sink.recorder is not None


# ---------------------------------------------------------------------- typechecks.py


def test_a_skipped_check_is_said_to_the_run_that_asked_for_it_only() -> None:
    skipped = [
        diagnostic(DiagnosticCode.TYPECHECK_SKIPPED, "no time", severity="info"),
        diagnostic(ts_code(2339), "x", severity="warning"),
    ]
    assert typechecks.typecheck_notes(skipped, {"typecheck": True}) == skipped
    assert typechecks.typecheck_notes(skipped, None) == [skipped[1]]
    service = typechecks.TypeCheckService(
        Path("out"), default=True, tsc=None, project_dir=Path(".")
    )
    assert service.wanted(Limits()) and not service.wanted(Limits(typecheck=False))
    assert service.start("1", Limits(typecheck=False), deadline=0.0, modules=set()) is None


# ---------------------------------------------------------------------- catalogs.py


def test_approve_all_drops_ask_from_copies_of_the_tool_views() -> None:
    shared = ToolView("write", "write", approval="ask")
    view = ServerView(
        "notes", "notes", "notes", tools={"write": shared, "read": ToolView("read", "read")}
    )
    prepared = catalogs.Prepared((), Catalog(servers={"notes": view}), {})
    catalog = prepared.for_run()
    catalogs.drop_asks(catalog)
    assert catalog.servers["notes"].tools["write"].approval is None
    assert (
        shared.approval == "ask" and view.tools["write"] is shared
    )  # the cached views are untouched


# ---------------------------------------------------------------------- run.py


def test_short_scripts_are_erased_inline_and_a_parse_refusal_is_recognised() -> None:
    erased = anyio.run(run.erase, None, "const x: number = 1", 0.0)
    assert erased is not None and "number" not in erased.code
    refusal = {"diagnostics": [{"code": "SYNTAX_ERROR", "severity": "error"}]}
    assert run.refused_by_parse(refusal)
    assert not run.refused_by_parse({"diagnostics": [*refusal["diagnostics"], {"code": "X"}]})
    counted = run.counts(
        [
            {"serverId": "a", "toolName": "t", "durationMs": 1, "ok": True},
            {"serverId": "a", "toolName": "t", "durationMs": 1, "ok": False},
        ]
    )
    assert counted.summary() == {"calls": {"a.t": 2}, "failed": 1}


def test_connections_module_cancels_and_waits() -> None:
    async def main() -> bool:
        task = asyncio.ensure_future(asyncio.Event().wait())
        await connections.cancel_all([task])
        return task.cancelled()

    assert anyio.run(main)
