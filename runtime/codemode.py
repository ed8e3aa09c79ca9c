"""The Python API: run agent scripts against the configured MCP servers.

    async with CodeMode.from_config(".mcp.json", out="out") as cm:
        response = await cm.run(code, limits={"timeoutMs": 5000})

One `CodeMode` owns the MCP sessions (opened lazily, reused across runs) and the sandbox
pool; every `run` gets a fresh sandbox (§1.4) and returns the §3.3 response
`{logs, result, diagnostics, toolTrace}`, whatever the script did.

Per run, before the sandbox starts, the host:
- has a worker check the script's syntax (no server is connected for a script that cannot
  parse: the response is the sandbox's own SYNTAX_ERROR);
- connects the servers the script names (static `@codemode/servers/...` imports and
  `requestedCapabilities`, §3.2.3) concurrently, so their live tool lists are known and an
  unavailable one is reported up front instead of in the middle of the script; servers out/
  lacks connect in the background and join the runs after they are connected, so a slow or
  hanging server never delays a run that does not name it;
- refreshes the tool list of every server that sent tools/list_changed (§8.1) and freezes the
  run's catalog from there on (§8.2);
- loads server modules from out/, building in memory (same generator code) any configured
  server that out/ lacks or whose tools no longer match, with a diagnostic saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import time
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from codemode_gen.config import (
    ServerConfig,
    ServerSettings,
    Settings,
    load_config,
    project_settings,
)
from codemode_gen.errors import UserError
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.bridge import Bridge
from codemode_gen.runtime.catalog import (
    Catalog,
    LiveServer,
    ServerView,
    adopt_built,
    capabilities_of,
    diagnostic,
    load_manifest,
    lost_declarations,
    manifest_views,
    module_paths_for,
    stale_message,
    tools_from_live,
)
from codemode_gen.runtime.discovery import MODULE_NAME as DISCOVERY_MODULE
from codemode_gen.runtime.discovery import discovery_module
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS
from codemode_gen.runtime.sessions import AuthError

__all__ = ["CodeMode"]

_IMPORT_RE = re.compile(r"""["']@codemode/servers/([^"'\s]+)["']""")
# Bounds the in-memory module cache (one entry per distinct live tool list) so a server that
# keeps changing its tools cannot grow host memory without end.
MAX_BUILD_CACHE = 64
# Connecting servers slower than this at run start is worth an info diagnostic: it explains a
# script timeout that looks too early.
CONNECT_NOTICE_MS = 1000


class CodeMode:
    """Owns sessions and sandboxes; `run()` many scripts through one instance."""

    def __init__(
        self,
        configs: Mapping[str, ServerConfig],
        *,
        out_dir: Path,
        settings: Settings | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.configs = dict(configs)
        self.out_dir = Path(out_dir)
        self.settings = settings if settings is not None else Settings()
        self.log_dir = log_dir
        self._stack: AsyncExitStack | None = None
        self._sessions: Any = None
        self._sandbox: Any = None
        self._connected: dict[str, Any] = {}
        self._lives: dict[str, tuple[Any, LiveServer]] = {}  # configId -> (session, its snapshot)
        # configId -> connection of a server out/ lacks, started ahead of need (never awaited by
        # a run that does not name the server, so a hanging server delays nothing)
        self._background: dict[str, asyncio.Task[LiveServer]] = {}
        self._manifest_key: tuple[int, int] | None = None
        self._manifest: dict[str, Any] | None = None
        self._builds: dict[str, tuple[str, dict[str, Any], str]] = {}
        self._built_entries: dict[str, dict[str, Any]] = {}  # configId -> its in-memory manifest entry

    @classmethod
    def from_config(
        cls,
        config: str | Path = ".mcp.json",
        out: str | Path | None = None,
        settings: Settings | str | Path | None = None,
    ) -> CodeMode:
        """Read `.mcp.json` (+ codemode.toml: `settings`, else the one beside the config).

        `out` defaults to the settings' out dir, which is rooted at the config's folder (not the
        caller's working directory: an agent client launches us from anywhere); an explicit
        relative `out` stays relative to the working directory, as a CLI user expects.
        """
        config_path = Path(config)
        if isinstance(settings, Settings):
            loaded = settings
        else:
            loaded = project_settings(config_path, Path(settings) if settings is not None else None)
        configs = load_config(config_path, loaded)
        return cls(configs, out_dir=Path(out) if out is not None else loaded.out_dir, settings=loaded)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CodeMode:
        from codemode_gen.runtime.sandbox import Sandbox
        from codemode_gen.runtime.sessions import SessionManager

        stack = AsyncExitStack()
        try:
            self._sessions = await stack.enter_async_context(
                SessionManager(self.configs, log_dir=self.log_dir)
            )
            self._sandbox = await stack.enter_async_context(Sandbox())
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack = self._stack, None
        background = list(self._background.values())
        self._background.clear()
        for task in background:
            task.cancel()
        if background:
            await asyncio.gather(*background, return_exceptions=True)
        self._connected.clear()
        self._lives.clear()
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    # ------------------------------------------------------------------ Connector (bridge)

    async def session(self, config_id: str) -> Any:
        """The live session of a configured server, connecting on first use."""
        if self._sessions is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        session = await self._sessions.get(config_id)
        self._connected[config_id] = session
        return session

    async def live(self, config_id: str) -> LiveServer:
        """Connect if needed and return the server's current tool list (refreshed after
        tools/list_changed by the session itself)."""
        session = await self.session(config_id)
        tools = await session.tools_snapshot()
        cached = self._lives.get(config_id)
        if cached is not None and cached[0] is session and cached[1].tools is tools:
            return cached[1]
        # One LiveServer per tool-list version: the tools are the session's read-only snapshot
        # (not deep-copied per run), and every per-run step only reads them.
        live = LiveServer(server_json=dict(session.server_json), tools=tools)
        self._lives[config_id] = (session, live)
        return live

    def connect_in_background(self) -> list[asyncio.Task[LiveServer]]:
        """Start connecting every configured server out/ lacks, without waiting for any.

        Such a server has no module until it is connected, so it joins the runs that start
        after it is; starting early (`serve` does at start-up) makes that the first run. The
        tasks end with the server's LiveServer or its ConnectError.
        """
        covered = self._covered()
        return [self._background_task(cid) for cid in self.configs if cid not in covered]

    async def wait_background(self, timeout: float | None = None) -> None:
        """Wait (at most `timeout` seconds) until the background connections have settled."""
        tasks = list(self._background.values())
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _covered(self) -> set[str]:
        """Config ids whose module out/ provides."""
        manifest = self._load_manifest()
        views = manifest_views(manifest, self.out_dir, self.configs)
        return {v.config_id for v in views.values() if v.config_id and v.module_source is not None}

    def _background_task(self, config_id: str) -> asyncio.Task[LiveServer]:
        task = self._background.get(config_id)
        if task is None:
            task = asyncio.ensure_future(self._connect_and_build(config_id))
            task.add_done_callback(_retrieve)
            self._background[config_id] = task
        return task

    async def _connect_and_build(self, config_id: str) -> LiveServer:
        live = await self.live(config_id)
        # Its declarations join the tool description (tools/list) as soon as it is connected;
        # the run that needs the module reuses this build (same cache key), or builds it again
        # and reports why it cannot.
        with contextlib.suppress(Exception):
            self._build_in_memory({config_id: live}, {})
        return live

    def _current_live(self, config_id: str) -> LiveServer | None:
        """The snapshot of an open session whose tools did not change since: usable without
        waiting (§8.1 needs no refresh)."""
        cached = self._lives.get(config_id)
        if cached is None:
            return None
        session, live = cached
        if getattr(session, "closed", False) or getattr(session, "tools_changed", False):
            return None
        return live

    def _needs_refresh(self, config_id: str) -> bool:
        """An open session that announced tools/list_changed: one round trip re-lists it."""
        session = self._connected.get(config_id)
        if session is None or getattr(session, "closed", False):
            return False
        return self._current_live(config_id) is None

    # ------------------------------------------------------------------ run

    async def run(
        self,
        code: str,
        limits: Mapping[str, Any] | None = None,
        requested_capabilities: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Execute one script in a fresh sandbox; always returns a §3.3 response."""
        from codemode_gen.runtime.limits import Limits, LimitsError

        if self._sandbox is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        if not isinstance(code, str):
            raise TypeError("code must be a string of JavaScript")
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be an object (mapping of limit name to integer)")
        try:
            run_limits = Limits.from_json({**dict(self.settings.limits), **dict(limits or {})})
        except LimitsError as exc:
            return {
                "logs": [],
                "result": None,
                "diagnostics": [diagnostic(
                    "error", "INVALID_LIMITS", resp.clip(str(exc), MAX_DIAGNOSTIC_CHARS),
                    "send limits as non-negative integers within the documented ranges, or omit them",
                    path=f"/limits/{exc.key}",
                )],
                "toolTrace": [],
            }
        # The deadline is the caller's (§3.2.4): one instant, fixed now, that connecting, waiting
        # for a worker and the script itself all count against; messages name timeoutMs as given.
        started = time.monotonic()
        deadline = started + run_limits.timeoutMs / 1000
        # A script that cannot parse never runs: answer as the sandbox would, before connecting
        # anything (a first connect can take seconds).
        syntax = await self._sandbox.check_syntax(code, deadline=deadline)
        if syntax is not None:
            return {"logs": [], "result": None, "diagnostics": syntax, "toolTrace": []}
        catalog = await self.prepare(code, list(requested_capabilities or []), budget_s=deadline - time.monotonic())
        spent_ms = round((time.monotonic() - started) * 1000)
        if spent_ms >= CONNECT_NOTICE_MS:
            catalog.diagnostics.append(diagnostic(
                "info", "CONNECT_TIME",
                f"connecting servers took {spent_ms} ms of the run's timeoutMs ({run_limits.timeoutMs} ms)",
                "nothing to do; connections are reused by later runs of the same host",
            ))
        bridge = Bridge(
            catalog,
            self,
            self.configs,
            max_tool_calls=run_limits.maxToolCalls,
            deadline=deadline,
        )
        modules = catalog.modules()
        modules[DISCOVERY_MODULE] = discovery_module(catalog)
        try:
            response = await self._sandbox.run(code, modules, bridge.host_call, run_limits, deadline=deadline)
        finally:
            await bridge.aclose()
        response = dict(response)
        response["diagnostics"] = [
            _bounded(d) for d in [*catalog.diagnostics, *response.get("diagnostics", []), *bridge.diagnostics()]
        ]
        response["toolTrace"] = bridge.trace
        response.setdefault("logs", [])
        response.setdefault("result", None)
        return response

    async def prepare(self, code: str, requested: list[str], budget_s: float | None = None) -> Catalog:
        """This run's catalog: connect what the run needs, snapshot live tools, load modules.

        Only the servers the script names (static imports, `requestedCapabilities`) and open
        sessions that announced tools/list_changed (§8.1, §8.2) are waited for, at most
        `budget_s`; a server still connecting then stays lazy (its first call waits for the same
        connection) and the run says so. Servers out/ lacks connect in the background and join
        the runs that start after they are connected: one slow or hanging server never delays a
        run that does not use it.
        """
        catalog = Catalog()
        manifest = self._load_manifest()
        paths = module_paths_for(manifest, self.configs)
        by_path = {path: cid for cid, path in paths.items()}
        views = manifest_views(manifest, self.out_dir, self.configs)
        covered = {v.config_id for v in views.values() if v.config_id and v.module_source is not None}

        wanted: dict[str, str] = {}  # config id -> why it is connected now
        for cap in requested:
            cid = cap if cap in self.configs else by_path.get(cap)
            if cid is None:
                known = ", ".join(sorted(paths.values())) or "none"
                catalog.diagnostics.append(diagnostic(
                    "warning", "CAPABILITY_UNAVAILABLE",
                    f"requested capability '{cap}' is not a configured server (available: {known})",
                    "request one of the available server ids, or do without it",
                ))
            else:
                wanted[cid] = "requested"
        for path in _IMPORT_RE.findall(code):
            cid = by_path.get(path)
            if cid is not None:
                wanted.setdefault(cid, "imported")
        for cid in self._connected:
            if cid not in wanted and self._needs_refresh(cid):
                wanted[cid] = "connected"

        tasks = {cid: asyncio.ensure_future(self.live(cid)) for cid in wanted}
        if tasks:
            await asyncio.wait(tasks.values(), timeout=budget_s)
        lives: dict[str, LiveServer] = {}
        failures: dict[str, str] = {}
        auth_failures: set[str] = set()
        for cid, task in tasks.items():
            if not task.done():
                task.cancel()
                catalog.diagnostics.append(diagnostic(
                    "warning" if wanted[cid] in ("requested", "imported") else "info", "CAPABILITY_UNAVAILABLE",
                    f"server '{paths[cid]}' did not finish connecting within the run's timeout",
                    "raise limits.timeoutMs, or check the server's start-up (connect_timeout in codemode.toml)",
                ))
                continue
            outcome = task.exception() or task.result()
            if isinstance(outcome, LiveServer):
                lives[cid] = outcome
            elif isinstance(outcome, Exception):
                failures[cid] = str(getattr(outcome, "reason", None) or outcome)
                if isinstance(outcome, AuthError):
                    auth_failures.add(cid)
                self._connected.pop(cid, None)
            else:
                raise outcome
        for cid in self.configs:
            if cid in tasks:
                continue
            live = self._current_live(cid)
            if live is not None:
                lives[cid] = live
                continue
            if cid in covered:
                continue  # out/ has its module: connected lazily on first call
            background = self._background_task(cid)
            if background.done():
                # Settled since the last run: take a failure (and retry for the runs after this
                # one); a success is in _current_live unless it went stale, so reconnect then.
                del self._background[cid]
                failed = None if background.cancelled() else background.exception()
                if isinstance(failed, Exception):
                    failures[cid] = str(getattr(failed, "reason", None) or failed)
                    if isinstance(failed, AuthError):
                        auth_failures.add(cid)
                    self._connected.pop(cid, None)
                    self._background_task(cid)
                    continue
                background = self._background_task(cid)
            if not background.done():
                catalog.diagnostics.append(diagnostic(
                    "info", "CAPABILITY_UNAVAILABLE",
                    f"server '{paths[cid]}' is still connecting in the background; this run does not include it",
                    "import it statically or list it in requestedCapabilities to wait for it; "
                    "later runs include it once it is connected",
                ))

        to_build: list[str] = []
        redeclare: dict[str, ServerView] = {}  # out/'s module stays, its declarations are stale
        ghosts: dict[str, list[dict[str, Any]]] = {}
        for cid, config in self.configs.items():
            sid = paths[cid]
            view = views.get(sid)
            if view is not None and view.config_id != cid:
                view = None
            live = lives.get(cid)
            if cid in failures:
                reason = failures[cid]
                if view is None:
                    view = ServerView(server_id=sid, config_id=cid, server_name=cid)
                    views[sid] = view
                view.unavailable = reason
                view.auth_failed = cid in auth_failures
                why = wanted.get(cid)
                severity = "warning" if why in ("requested", "imported") else "info"
                catalog.diagnostics.append(diagnostic(
                    severity, "CAPABILITY_UNAVAILABLE",
                    f"server '{sid}' is unavailable: {reason}",
                    f"calls to '{sid}' will throw; fix its entry '{cid}' in the MCP config"
                    + (" (its module cannot be imported: out/ has none)" if view.module_source is None else ""),
                ))
                continue
            if live is None:
                continue  # in out/, not needed yet: connected lazily on first call
            live_tools = tools_from_live(
                live.tools, config.blocklist, known=view.tools if view else None, unbox=config.unbox
            )
            if view is None or view.module_source is None:
                to_build.append(cid)
                catalog.diagnostics.append(diagnostic(
                    "info", "MODULE_BUILT_IN_MEMORY",
                    f"server '{cid}' has no module in {self.out_dir}/; built it in memory from the live tool list",
                    "run `codemode-gen record` then `codemode-gen generate` for typed, committed bindings",
                ))
                continue
            stale = stale_message(cid, view.tools, live_tools)
            if stale:
                catalog.diagnostics.append(diagnostic(
                    "warning", "STALE_OUT", stale,
                    "run `codemode-gen record` then `codemode-gen generate` to refresh out/",
                ))
                if set(live_tools) != set(view.tools):
                    # Bindings for the live tools, plus the out/ tools that are gone so that a
                    # script importing one still loads and gets ToolNotFoundError on the call.
                    ghosts[cid] = [
                        {"name": t.tool_name, "description": t.description or "",
                         "inputSchema": t.input_schema if isinstance(t.input_schema, dict) else {"type": "object"}}
                        for name, t in view.tools.items() if name not in live_tools
                    ]
                    to_build.append(cid)
                    continue
            for name, tool in live_tools.items():  # out/'s module defines the export names
                tool.export_name = view.tools[name].export_name if name in view.tools else tool.export_name
            if lost_declarations(view.tools, live_tools):
                redeclare[cid] = view
            _apply_live(view, live, live_tools)

        if to_build:
            built = self._build_in_memory({cid: lives[cid] for cid in to_build}, ghosts)
            for cid in to_build:
                sid, entry, source = built[cid]
                if sid != paths[cid]:  # §5.0.1 collision the subset build could not see
                    catalog.diagnostics.append(diagnostic(
                        "warning", "CAPABILITY_UNAVAILABLE",
                        f"server '{cid}' cannot be loaded: its module path collides with another server",
                        "run `codemode-gen record` then `codemode-gen generate` so out/ assigns unique paths",
                    ))
                    continue
                old = views.get(paths[cid])
                if old is not None and old.config_id == cid:
                    del views[paths[cid]]
                live = lives[cid]
                view = ServerView(
                    server_id=sid,
                    config_id=cid,
                    server_name=str(entry.get("serverName") or cid),
                    module_source=source,
                )
                known_tools = old.tools if old is not None else None
                _apply_live(
                    view, live, tools_from_live(
                        live.tools, self.configs[cid].blocklist, known=known_tools, unbox=self.configs[cid].unbox
                    )
                )
                adopt_built(view.tools, entry, export_names=True)  # the names the built module exports
                views[sid] = view
        if redeclare:  # declarations of the live definitions, from the same (cached) in-memory build
            rebuilt = self._build_in_memory({cid: lives[cid] for cid in redeclare}, {})
            for cid, view in redeclare.items():
                adopt_built(view.tools, rebuilt[cid][1], export_names=False)
        catalog.servers = dict(sorted(views.items()))
        return catalog

    # ------------------------------------------------------------------ system prompt

    def capability_ids(self) -> dict[str, str]:
        """configId → the server id scripts import and `requestedCapabilities` accepts."""
        return module_paths_for(self._load_manifest(), self.configs)

    def prompt_servers(self) -> list[dict[str, Any]]:
        """Manifest entries (out/ or built in memory) of the configured servers, by server id;
        a configured server known to neither is a stub `{serverId, configId}` (§4.4 deferral)."""
        manifest = self._load_manifest()
        paths = module_paths_for(manifest, self.configs)
        by_config = {
            s.get("configId"): s for s in (manifest or {}).get("servers", []) if isinstance(s, dict)
        }
        out: list[dict[str, Any]] = []
        for cid, sid in paths.items():
            if cid not in self.configs:
                continue
            entry = by_config.get(cid) or self._built_entries.get(cid)
            out.append(dict(entry) if entry is not None else {"serverId": sid, "configId": cid})
        return sorted(out, key=lambda e: str(e.get("serverId")))

    # ------------------------------------------------------------------ helpers

    def _load_manifest(self) -> dict[str, Any] | None:
        path = self.out_dir / "manifest.json"
        try:
            st = path.stat()
        except OSError:
            self._manifest_key, self._manifest = None, None
            return None
        key = (st.st_mtime_ns, st.st_size)
        if key != self._manifest_key:
            self._manifest = load_manifest(self.out_dir)
            self._manifest_key = key
        return self._manifest

    def _build_settings(self) -> Settings:
        """The settings an in-memory build uses: each configured server's own unwrap mode and
        unbox choice (a CodeMode may be given ServerConfigs that no codemode.toml produced), so
        a module built in memory types exactly what the bridge returns."""
        servers = dict(self.settings.servers)
        for cid, config in self.configs.items():
            servers[cid] = replace(
                servers.get(cid, ServerSettings()), unwrap=config.unwrap, unbox=config.unbox
            )
        return replace(self.settings, servers=MappingProxyType(servers))

    def _build_in_memory(
        self, lives: Mapping[str, LiveServer], ghosts: Mapping[str, list[dict[str, Any]]]
    ) -> dict[str, tuple[str, dict[str, Any], str]]:
        """Generate modules for servers out/ lacks, with the generator's own code (no calls)."""
        from codemode_gen.generator.build import build_outputs
        from codemode_gen.generator.fixtures import FixtureSet

        result: dict[str, tuple[str, dict[str, Any], str]] = {}
        pending: dict[str, str] = {}
        for cid, live in lives.items():
            blocked = set(self.configs[cid].blocklist)
            tools = [dict(t) for t in live.tools if t.get("name") not in blocked] + list(ghosts.get(cid, []))
            key = json.dumps([cid, live.server_json, tools], sort_keys=True, default=str)
            if key in self._builds:
                result[cid] = self._builds[key]
            else:
                pending[cid] = key
        if pending:
            sets = []
            for cid in pending:
                live = lives[cid]
                blocked = set(self.configs[cid].blocklist)
                # The live tools are the session's shared snapshot: the generator gets copies.
                tools = [copy.deepcopy(dict(t)) for t in live.tools if t.get("name") not in blocked]
                sets.append(FixtureSet(
                    config_id=cid,
                    server_json=dict(live.server_json),
                    tools=sorted(tools + copy.deepcopy(list(ghosts.get(cid, []))), key=lambda t: str(t.get("name"))),
                    calls={},
                ))
            outputs = build_outputs(sets, self._build_settings())
            for entry in outputs.manifest.get("servers", []):
                cid = entry.get("configId")
                if cid not in pending:
                    continue
                module_rel = entry.get("module") or f"servers/{entry['serverId']}.js"
                source = outputs.files.get(module_rel)
                if source is None:
                    raise UserError(f"in-memory build of '{cid}' produced no module {module_rel}")
                self._built_entries[cid] = entry
                built = (str(entry["serverId"]), entry, source)
                if len(self._builds) >= MAX_BUILD_CACHE:
                    self._builds.clear()
                self._builds[pending[cid]] = built
                result[cid] = built
        return result


def _bounded(entry: Any) -> Any:
    """A diagnostic whose texts are UTF-8-safe and at most MAX_DIAGNOSTIC_CHARS (they can carry
    server text, e.g. a connect failure, or the script's, e.g. an uncaught error's message)."""
    if not isinstance(entry, dict):
        return entry
    return {
        k: resp.clip(v, MAX_DIAGNOSTIC_CHARS) if isinstance(v, str) and k in ("message", "hint", "path") else v
        for k, v in entry.items()
    }


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's failure as seen: the run that needs the server reports it, and
    asyncio must not log it as an unhandled error on stderr when none does."""
    if not task.cancelled():
        task.exception()


def _apply_live(view: ServerView, live: LiveServer, tools: dict[str, Any]) -> None:
    """Take the run's snapshot of a connected server (§8.2)."""
    info = live.server_json.get("serverInfo")
    info = info if isinstance(info, Mapping) else {}
    if isinstance(info.get("name"), str) and (not view.server_name or view.server_name == view.config_id):
        view.server_name = info["name"]
    if view.version is None and isinstance(info.get("version"), str):
        view.version = info["version"]
    if view.description is None and isinstance(live.server_json.get("instructions"), str):
        view.description = live.server_json["instructions"]
    if not view.capabilities:
        view.capabilities = capabilities_of(live.server_json)
    view.tools = tools
    view.live = True
