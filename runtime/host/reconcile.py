"""The catalog one run sees: out/ reconciled with the live tool lists (pure: no I/O, no process).

`CodeMode.prepare` (runtime/codemode/catalogs.py) does the I/O around this: it reads out/ into views
(`catalog.manifest_views`), connects what `select_servers` asks for, collects what connecting
found (`Connections`), builds in memory what the `Plan` asks for (the generator's own
`build_outputs`), and hands the builds back to `Plan.catalog`. Every decision in between is
made here, from values only, so it is tested without a server (tests/runtime/host/test_reconcile.py):

- which servers a run waits for (`select_servers`): its static imports, its
  requestedCapabilities (config id or module path; an unknown one is a warning), and open
  sessions that announced tools/list_changed (§8.1);
- per configured server (`reconcile`): unavailable (a failed connect: calls throw, a
  diagnostic says why), still connecting (not in this run, info), not connected yet (out/'s
  module, connected lazily on first call), or connected: the live tool list wins over out/
  (§8.2 snapshot). Same tool names: out/'s module and export names, live metadata, out/'s
  declarations where the definition is unchanged (else rebuilt in memory: `redeclare`);
  different names (STALE_OUT): a module built in memory from the live tools plus the vanished
  ones, which then fail with ToolNotFoundError; no module in out/: built in memory
  (MODULE_BUILT_IN_MEMORY);
- the built modules join the catalog (`Plan.catalog`), unless their §5.0.1 module path
  collides with another server's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from codemode_gen import MODULE_PREFIX
from codemode_gen.config import ServerConfig
from codemode_gen.generator.manifest import ServerEntry
from codemode_gen.runtime.diagnostics import Diagnostic, DiagnosticCode, diagnostic
from codemode_gen.runtime.host.catalog import (
    Catalog,
    LiveServer,
    ServerView,
    ToolView,
    adopt_built,
    capabilities_of,
    live_tools,
    lost_declarations,
    stale_message,
)

__all__ = [
    "BuiltModule",
    "Connections",
    "Failure",
    "Plan",
    "Selection",
    "reconcile",
    "select_servers",
]

# A static import of a server module, as the script's source spells it.
IMPORT_RE = re.compile(r"""["']""" + re.escape(MODULE_PREFIX) + r"""([^"'\s]+)["']""")

# Why a server is connected before the run starts: the script names it (requested, imported),
# or its open session announced tools/list_changed (connected).
Why = Literal["requested", "imported", "connected"]
# A server still connecting when the run starts: the run waited for it until its deadline
# (timeout), or it connects in the background because out/ lacks it (background).
Pending = Literal["timeout", "background"]

REFRESH_HINT = "run `codemode-gen record` then `codemode-gen generate` to refresh out/"


@dataclass(frozen=True)
class Selection:
    """The servers a run connects before its sandbox starts, and what the request got wrong."""

    wanted: dict[str, Why]  # config id -> why, in the order they were named
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def named(self, config_id: str) -> bool:
        """The script asked for this server: its problems are warnings, not info."""
        return self.wanted.get(config_id) in ("requested", "imported")


@dataclass(frozen=True)
class Failure:
    """A server that could not be connected."""

    reason: str  # one readable line (ConnectError.reason)
    auth: bool = False  # it rejected our credentials (AuthenticationError on use)
    hint: str | None = None  # the fix the client layer knows (AuthError.hint), else the generic one


@dataclass(frozen=True)
class Connections:
    """What connecting found at run start, by config id (each id in at most one of them)."""

    lives: Mapping[str, LiveServer] = field(default_factory=dict)  # connected: this run's snapshot
    failures: Mapping[str, Failure] = field(default_factory=dict)
    pending: Mapping[str, Pending] = field(default_factory=dict)  # diagnostics keep this order


@dataclass(frozen=True)
class BuiltModule:
    """One server built in memory (`build_outputs`): its module path, manifest entry, module text."""

    server_id: str
    entry: ServerEntry
    source: str


@dataclass
class Plan:
    """The run's catalog before the in-memory builds: `catalog()` completes it (once)."""

    views: dict[str, ServerView]  # by server id
    diagnostics: list[Diagnostic]
    # config id -> the out/ tools the live server no longer lists, to build (as definitions
    # that fail with ToolNotFoundError) together with its live tools; [] for a plain build.
    build: dict[str, list[dict[str, Any]]]
    # config ids whose out/ module stays but whose changed tools need declarations of the live
    # definitions (from an in-memory build of the live tools; its module is not used).
    redeclare: list[str]
    lives: Mapping[str, LiveServer]
    # config id -> the live tools of each `build` server as views (what out/ knew of them kept)
    live_views: dict[str, dict[str, ToolView]]
    paths: Mapping[str, str]

    def catalog(
        self, built: Mapping[str, BuiltModule], rebuilt: Mapping[str, BuiltModule]
    ) -> Catalog:
        """The run's catalog: `built` holds a build of every `build` server (the live tools
        plus its ghosts), `rebuilt` one of every `redeclare` server (its live tools)."""
        catalog = Catalog(diagnostics=list(self.diagnostics))
        views = dict(self.views)
        for cid in self.build:
            module = built[cid]
            if (
                module.server_id != self.paths[cid]
            ):  # §5.0.1 collision the subset build could not see
                catalog.diagnostics.append(
                    diagnostic(
                        DiagnosticCode.CAPABILITY_UNAVAILABLE,
                        f"server '{cid}' cannot be loaded: its module path collides with another server",
                        severity="warning",
                        hint="run `codemode-gen record` then `codemode-gen generate` so out/ assigns unique paths",
                    )
                )
                continue
            old = views.get(self.paths[cid])
            if old is not None and old.config_id == cid:
                del views[self.paths[cid]]
            view = ServerView(
                server_id=module.server_id,
                config_id=cid,
                server_name=module.entry.get("serverName") or cid,
                module_source=module.source,
            )
            apply_live(view, self.lives[cid], self.live_views[cid])
            adopt_built(
                view.tools, module.entry, export_names=True
            )  # the names the built module exports
            views[module.server_id] = view
        for (
            cid
        ) in self.redeclare:  # declarations of the live definitions, from the same (cached) build
            adopt_built(views[self.paths[cid]].tools, rebuilt[cid].entry, export_names=False)
        catalog.servers = dict(sorted(views.items()))
        return catalog


def select_servers(
    code: str,
    requested: Iterable[str],
    configs: Mapping[str, ServerConfig],
    paths: Mapping[str, str],
    refresh: Iterable[str] = (),
) -> Selection:
    """The servers to connect before the run: `requested` (config ids or module paths), the
    server modules `code` imports statically, then `refresh` (open sessions that announced
    tools/list_changed, §8.1). `paths` maps config id -> module path."""
    by_path = {path: cid for cid, path in paths.items()}
    wanted: dict[str, Why] = {}
    diagnostics: list[Diagnostic] = []
    for cap in requested:
        cid = cap if cap in configs else by_path.get(cap)
        if cid is None:
            known = ", ".join(sorted(paths.values())) or "none"
            diagnostics.append(
                diagnostic(
                    DiagnosticCode.CAPABILITY_UNAVAILABLE,
                    f"requested capability '{cap}' is not a configured server (available: {known})",
                    severity="warning",
                    hint="request one of the available server ids, or do without it",
                )
            )
        else:
            wanted[cid] = "requested"
    for path in IMPORT_RE.findall(code):
        cid = by_path.get(path)
        if cid is not None:
            wanted.setdefault(cid, "imported")
    for cid in refresh:
        wanted.setdefault(cid, "connected")
    return Selection(wanted, diagnostics)


# The words of the warning for a server still connecting when the script started: it only
# explains a run that then ran out of time (codemode.run drops it otherwise, like CONNECT_TIME).
SLOW_CONNECT = "did not finish connecting before the script started"


def is_slow_connect(d: Mapping[str, Any]) -> bool:
    """Whether `d` is the warning above (a host diagnostic, never the script's text)."""
    return d.get("code") == DiagnosticCode.CAPABILITY_UNAVAILABLE and SLOW_CONNECT in str(
        d.get("message", "")
    )


def reconcile(
    configs: Mapping[str, ServerConfig],
    paths: Mapping[str, str],
    views: Mapping[str, ServerView],
    selection: Selection,
    connections: Connections,
    *,
    out_dir: Path | str,
) -> Plan:
    """Decide what the run sees of every configured server (see the module docstring).

    `views` are out/'s servers by server id (`manifest_views`), `paths` every configured
    server's module path (`module_paths_for`); neither is changed. `out_dir` only names the
    folder in messages."""
    views = {sid: replace(view) for sid, view in views.items()}  # the plan's own copies
    diagnostics = list(selection.diagnostics)
    for cid, why in connections.pending.items():
        if why == "timeout":
            diagnostics.append(
                diagnostic(
                    DiagnosticCode.CAPABILITY_UNAVAILABLE,
                    f"server '{paths[cid]}' {SLOW_CONNECT} (the host waits a fifth of timeoutMs); the "
                    "script's first call to it waits for the connection",
                    severity="warning" if selection.named(cid) else "info",
                    hint="run it again (the server stays connected, so the next run has its whole timeoutMs); "
                    "if it keeps happening, check the server's start-up (connect_timeout in codemode.toml)",
                )
            )
        else:
            diagnostics.append(
                diagnostic(
                    DiagnosticCode.CAPABILITY_UNAVAILABLE,
                    f"server '{paths[cid]}' is still connecting in the background; this run does not include it",
                    severity="info",
                    hint="import it statically or list it in requestedCapabilities to wait for it; "
                    "later runs include it once it is connected",
                )
            )

    build: dict[str, list[dict[str, Any]]] = {}
    live_views: dict[str, dict[str, ToolView]] = {}
    redeclare: list[str] = []
    for cid, config in configs.items():
        sid = paths[cid]
        view = views.get(sid)
        if view is not None and view.config_id != cid:
            view = None
        failure = connections.failures.get(cid)
        if failure is not None:
            if view is None:
                view = ServerView(server_id=sid, config_id=cid, server_name=cid)
                views[sid] = view
            view.unavailable = failure.reason
            view.auth_failed = failure.auth
            view.auth_hint = failure.hint
            diagnostics.append(
                diagnostic(
                    DiagnosticCode.CAPABILITY_UNAVAILABLE,
                    f"server '{sid}' is unavailable: {failure.reason}",
                    severity="warning" if selection.named(cid) else "info",
                    hint=(
                        f"calls to '{sid}' will throw; {failure.hint}"
                        if failure.hint
                        else f"calls to '{sid}' will throw; fix its entry '{cid}' in the MCP config"
                    )
                    + (
                        " (its module cannot be imported: out/ has none)"
                        if view.module_source is None
                        else ""
                    ),
                )
            )
            continue
        live = connections.lives.get(cid)
        if live is None:
            continue  # in out/, not needed yet: connected lazily on first call
        tools = live_tools(live, config, view.tools if view else None)
        if view is None or view.module_source is None:
            build[cid], live_views[cid] = [], tools
            diagnostics.append(
                diagnostic(
                    DiagnosticCode.MODULE_BUILT_IN_MEMORY,
                    f"server '{cid}' has no module in {out_dir}/; built it in memory from the live tool list",
                    severity="info",
                    hint="run `codemode-gen record` then `codemode-gen generate` for typed, committed bindings",
                )
            )
            continue
        stale = stale_message(cid, view.tools, tools)
        if stale:
            diagnostics.append(
                diagnostic(DiagnosticCode.STALE_OUT, stale, severity="warning", hint=REFRESH_HINT)
            )
            if set(tools) != set(view.tools):
                # Bindings for the live tools, plus the out/ tools that are gone so that a
                # script importing one still loads and gets ToolNotFoundError on the call.
                build[cid] = [_ghost(t) for name, t in view.tools.items() if name not in tools]
                live_views[cid] = tools
                continue
        for name, tool in tools.items():  # out/'s module defines the export names
            if name in view.tools:
                tool.export_name = view.tools[name].export_name
        if lost_declarations(view.tools, tools):
            redeclare.append(cid)
        apply_live(view, live, tools)
    return Plan(
        views=views,
        diagnostics=diagnostics,
        build=build,
        redeclare=redeclare,
        lives=connections.lives,
        live_views=live_views,
        paths=paths,
    )


def _ghost(tool: ToolView) -> dict[str, Any]:
    """An out/ tool the live server no longer lists, as a tools/list entry to build a binding of."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
    return {"name": tool.tool_name, "description": tool.description or "", "inputSchema": schema}


def apply_live(view: ServerView, live: LiveServer, tools: dict[str, ToolView]) -> None:
    """Take the run's snapshot of a connected server (§8.2): its tools, and what out/ did not
    say about the server itself."""
    info = live.server_json.get("serverInfo")
    info = info if isinstance(info, Mapping) else {}
    if isinstance(info.get("name"), str) and (
        not view.server_name or view.server_name == view.config_id
    ):
        view.server_name = info["name"]
    if view.version is None and isinstance(info.get("version"), str):
        view.version = info["version"]
    if view.description is None and isinstance(live.server_json.get("instructions"), str):
        view.description = live.server_json["instructions"]
    if not view.capabilities:
        view.capabilities = capabilities_of(live.server_json)
    view.tools = tools
    view.live = True
