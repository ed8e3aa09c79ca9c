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

What the run sees is decided by runtime/reconcile.py from values alone; this module does the
I/O around it (reading out/, connecting, building in memory) and owns the sessions' lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import time
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any

from codemode_gen.client.sessions import AuthError, McpSession, SessionManager
from codemode_gen.config import (
    ServerConfig,
    ServerSettings,
    Settings,
    load_config,
    project_settings,
)
from codemode_gen.errors import UserError
from codemode_gen.generator.manifest import (
    Manifest,
    ServerEntry,
    manifest_path,
    module_file_of,
    module_specifier,
    read_manifest,
)
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.bridge import Bridge
from codemode_gen.runtime.catalog import (
    Catalog,
    LiveServer,
    ServerView,
    manifest_views,
    module_paths_for,
)
from codemode_gen.runtime.discovery import MODULE_NAME as DISCOVERY_MODULE
from codemode_gen.runtime.discovery import discovery_module
from codemode_gen.runtime.limits import Limits, LimitsError
from codemode_gen.runtime.reconcile import (
    BuiltModule,
    Connections,
    Failure,
    Pending,
    reconcile,
    select_servers,
)
from codemode_gen.runtime.sandbox import Sandbox
from codemode_gen.runtime.tsinput import erase_types
from codemode_gen.runtime.typecheck import TypeChecker, run_diagnostics

__all__ = ["CodeMode"]

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
        typecheck: bool = False,
        tsc: str | Path | None = None,
        project_dir: Path | None = None,
    ) -> None:
        self.configs = dict(configs)
        self.out_dir = Path(out_dir)
        self.settings = settings if settings is not None else Settings()
        self.log_dir = log_dir
        self._stack: AsyncExitStack | None = None
        self._sessions: SessionManager | None = None
        self._sandbox: Sandbox | None = None
        self._connected: dict[str, McpSession] = {}
        self._lives: dict[str, tuple[McpSession, LiveServer]] = {}  # configId -> (session, its snapshot)
        # configId -> connection of a server out/ lacks, started ahead of need (never awaited by
        # a run that does not name the server, so a hanging server delays nothing)
        self._background: dict[str, asyncio.Task[LiveServer]] = {}
        self._manifest_key: tuple[int, int] | None = None
        self._manifest: Manifest | None = None
        self._builds: dict[str, BuiltModule] = {}  # by build key (config id, live server and tools)
        self._built_entries: dict[str, ServerEntry] = {}  # configId -> its in-memory manifest entry
        # Type checking (runtime/typecheck.py): `typecheck` is the default of limits.typecheck
        # (serve --typecheck); tsc is looked for from `project_dir` (default: out/'s folder) up.
        self.typecheck = typecheck
        self.tsc = tsc
        self.project_dir = Path(project_dir) if project_dir is not None else self.out_dir.parent
        self._typechecker: TypeChecker | None = None
        self._typechecks: set[asyncio.Task[Any]] = set()  # checks in flight (and the warm-up)

    @classmethod
    def from_config(
        cls,
        config: str | Path = ".mcp.json",
        out: str | Path | None = None,
        settings: Settings | str | Path | None = None,
        *,
        typecheck: bool = False,
        tsc: str | Path | None = None,
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
        return cls(configs, out_dir=Path(out) if out is not None else loaded.out_dir, settings=loaded,
                   typecheck=typecheck, tsc=tsc, project_dir=Path(os.path.abspath(config_path)).parent)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CodeMode:
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
        if self.typecheck:  # the first run should not wait for the compiler to start
            self._track(asyncio.ensure_future(self.typechecker().warm()))
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
        await self._close_typechecker()
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    # ------------------------------------------------------------------ Connector (bridge)

    async def session(self, config_id: str) -> McpSession:
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
        covered = _covered(manifest_views(self._load_manifest(), self.out_dir, self.configs))
        return [self._background_task(cid) for cid in self.configs if cid not in covered]

    async def wait_background(self, timeout: float | None = None) -> None:
        """Wait (at most `timeout` seconds) until the background connections have settled."""
        tasks = list(self._background.values())
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

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
        if session.closed or session.tools_changed:
            return None
        return live

    def _needs_refresh(self, config_id: str) -> bool:
        """An open session that announced tools/list_changed: one round trip re-lists it."""
        session = self._connected.get(config_id)
        if session is None or session.closed:
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
        if self._sandbox is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        if not isinstance(code, str):
            raise TypeError("code must be a string of JavaScript or TypeScript")
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be an object (mapping of limit name to integer)")
        try:
            run_limits = Limits.from_json({**dict(self.settings.limits), **dict(limits or {})})
        except LimitsError as exc:
            return resp.not_started(resp.diagnostic(
                "INVALID_LIMITS", str(exc),
                hint="send limits as non-negative integers within the documented ranges, or omit them",
                path=f"/limits/{exc.key}",
            ))
        # The deadline is the caller's (§3.2.4): one instant, fixed now, that connecting, waiting
        # for a worker and the script itself all count against; messages name timeoutMs as given.
        started = time.monotonic()
        deadline = started + run_limits.timeoutMs / 1000
        # TypeScript runs with its types erased, every position kept (runtime/tsinput.py); plain
        # JavaScript comes back unchanged. `code` stays the agent's own source.
        erased = erase_types(code)
        if erased.diagnostics:
            return resp.not_started(*erased.diagnostics)
        script = erased.code
        # A script that cannot parse never runs: answer as the sandbox would, before connecting
        # anything (a first connect can take seconds).
        syntax = await self._sandbox.check_syntax(script, deadline=deadline)
        if syntax is not None and script is not code and await self._sandbox.check_syntax(code, deadline=deadline) is None:
            script, syntax = code, None  # JavaScript the TypeScript grammar misread: run it as written
        if syntax is not None:
            return resp.not_started(*syntax)
        # Type check (limits.typecheck, serve --typecheck) of the agent's own source, while the
        # servers connect; its type errors are warnings and the run goes ahead regardless.
        typecheck = self._start_typecheck(code, run_limits, deadline)
        catalog = await self.prepare(script, list(requested_capabilities or []), budget_s=deadline - time.monotonic())
        spent_ms = round((time.monotonic() - started) * 1000)
        if spent_ms >= CONNECT_NOTICE_MS:
            catalog.diagnostics.append(resp.diagnostic(
                "CONNECT_TIME",
                f"connecting servers took {spent_ms} ms of the run's timeoutMs ({run_limits.timeoutMs} ms)",
                severity="info",
                hint="nothing to do; connections are reused by later runs of the same host",
            ))
        if typecheck is not None:
            catalog.diagnostics[:0] = await typecheck
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
            sandboxed = await self._sandbox.run(script, modules, bridge.host_call, run_limits, deadline=deadline)
        finally:
            await bridge.aclose()
        return resp.build_response(
            sandboxed.get("logs", []),
            sandboxed.get("result"),
            [*catalog.diagnostics, *sandboxed.get("diagnostics", []), *bridge.diagnostics()],
            bridge.trace,
        )

    async def prepare(self, code: str, requested: list[str], budget_s: float | None = None) -> Catalog:
        """This run's catalog: connect what the run needs, snapshot live tools, load modules.

        Only the servers the script names (static imports, `requestedCapabilities`) and open
        sessions that announced tools/list_changed (§8.1, §8.2) are waited for, at most
        `budget_s`; a server still connecting then stays lazy (its first call waits for the same
        connection) and the run says so. Servers out/ lacks connect in the background and join
        the runs that start after they are connected: one slow or hanging server never delays a
        run that does not use it. What the run sees is decided by runtime/reconcile.py; this
        does the I/O around it (out/, connections, in-memory builds).
        """
        manifest = self._load_manifest()
        paths = module_paths_for(manifest, self.configs)
        views = manifest_views(manifest, self.out_dir, self.configs)
        refresh = [cid for cid in self._connected if self._needs_refresh(cid)]
        selection = select_servers(code, requested, self.configs, paths, refresh)
        connections = await self._connect(selection.wanted, _covered(views), budget_s)
        plan = reconcile(self.configs, paths, views, selection, connections, out_dir=self.out_dir)
        lives = connections.lives
        built = self._build_in_memory({cid: lives[cid] for cid in plan.build}, plan.build) if plan.build else {}
        rebuilt = self._build_in_memory({cid: lives[cid] for cid in plan.redeclare}, {}) if plan.redeclare else {}
        return plan.catalog(built, rebuilt)

    async def _connect(self, wanted: Iterable[str], covered: set[str], budget_s: float | None) -> Connections:
        """Connect `wanted` concurrently (waiting at most `budget_s`), take the current snapshot
        of every other open session, and start or check the background connections of the
        servers out/ does not cover."""
        tasks = {cid: asyncio.ensure_future(self.live(cid)) for cid in wanted}
        if tasks:
            await asyncio.wait(tasks.values(), timeout=budget_s)
        lives: dict[str, LiveServer] = {}
        failures: dict[str, Failure] = {}
        pending: dict[str, Pending] = {}
        for cid, task in tasks.items():
            if not task.done():
                task.cancel()
                pending[cid] = "timeout"
                continue
            outcome = task.exception() or task.result()
            if isinstance(outcome, LiveServer):
                lives[cid] = outcome
            elif isinstance(outcome, Exception):
                failures[cid] = self._failure(cid, outcome)
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
                    failures[cid] = self._failure(cid, failed)
                    self._background_task(cid)
                    continue
                background = self._background_task(cid)
            if not background.done():
                pending[cid] = "background"
        return Connections(lives=lives, failures=failures, pending=pending)

    # ------------------------------------------------------------------ type checking

    def typechecker(self) -> TypeChecker:
        """The one type-check server of this host (started on first use, reused by every run)."""
        if self._typechecker is None:
            self._typechecker = TypeChecker(self.out_dir, tsc=self.tsc, roots=(self.project_dir, self.out_dir.parent))
        return self._typechecker

    def _start_typecheck(self, code: str, limits: Limits, deadline: float) -> asyncio.Task[list[dict[str, str]]] | None:
        """This run's type check (None when off): warnings, or an info line when it was skipped."""
        if not (self.typecheck if limits.typecheck is None else limits.typecheck):
            return None
        # Servers out/ lacks are built in memory: importing one is no error, only unchecked.
        try:
            modules = {module_specifier(sid) for sid in self.capability_ids().values()}
        except UserError:  # an unreadable out/: prepare() reports it
            modules = set()
        return self._track(asyncio.ensure_future(
            run_diagnostics(self.typechecker(), code, deadline=deadline, modules=modules)
        ))

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Keep a check until it ends (a run that failed before awaiting it leaves it to __aexit__)."""
        self._typechecks.add(task)
        task.add_done_callback(self._typechecks.discard)
        task.add_done_callback(_retrieve)
        return task

    async def _close_typechecker(self) -> None:
        tasks = list(self._typechecks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        checker, self._typechecker = self._typechecker, None
        if checker is not None:
            await checker.aclose()

    def _failure(self, config_id: str, exc: Exception) -> Failure:
        """A failed connection: reported by this run; the next use connects afresh."""
        self._connected.pop(config_id, None)
        return Failure(str(getattr(exc, "reason", None) or exc), auth=isinstance(exc, AuthError))

    # ------------------------------------------------------------------ system prompt

    def capability_ids(self) -> dict[str, str]:
        """configId → the server id scripts import and `requestedCapabilities` accepts."""
        return module_paths_for(self._load_manifest(), self.configs)

    def prompt_servers(self) -> list[Mapping[str, Any]]:
        """Manifest entries (out/ or built in memory) of the configured servers, by server id;
        a configured server known to neither is a stub `{serverId, configId}` (§4.4 deferral)."""
        manifest = self._load_manifest()
        paths = module_paths_for(manifest, self.configs)
        by_config = {s["configId"]: s for s in manifest["servers"] if "configId" in s} if manifest else {}
        out: list[Mapping[str, Any]] = []
        for cid, sid in paths.items():
            if cid not in self.configs:
                continue
            entry = by_config.get(cid) or self._built_entries.get(cid)
            out.append(dict(entry) if entry is not None else {"serverId": sid, "configId": cid})
        return sorted(out, key=lambda e: str(e.get("serverId")))

    # ------------------------------------------------------------------ helpers

    def _load_manifest(self) -> Manifest | None:
        """out/'s manifest (validated: `read_manifest`), read again only when the file changed."""
        path = manifest_path(self.out_dir)
        try:
            st = path.stat()
        except OSError:
            self._manifest_key, self._manifest = None, None
            return None
        key = (st.st_mtime_ns, st.st_size)
        if key != self._manifest_key:
            self._manifest = read_manifest(self.out_dir)
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
    ) -> dict[str, BuiltModule]:
        """Generate modules for servers out/ lacks, with the generator's own code (no calls)."""
        from codemode_gen.generator.build import build_outputs
        from codemode_gen.generator.fixtures import FixtureSet

        result: dict[str, BuiltModule] = {}
        pending: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # config id -> (build key, its tools)
        for cid, live in lives.items():
            blocked = set(self.configs[cid].blocklist)
            tools = [dict(t) for t in live.tools if t.get("name") not in blocked] + list(ghosts.get(cid, []))
            key = json.dumps([cid, live.server_json, tools], sort_keys=True, default=str)
            if key in self._builds:
                result[cid] = self._builds[key]
            else:
                pending[cid] = (key, tools)
        if pending:
            sets = [
                FixtureSet(
                    config_id=cid,
                    server_json=dict(lives[cid].server_json),
                    # The live tools are the session's shared snapshot: the generator gets copies.
                    tools=sorted(copy.deepcopy(tools), key=lambda t: str(t.get("name"))),
                    calls={},
                )
                for cid, (_, tools) in pending.items()
            ]
            outputs = build_outputs(sets, self._build_settings())
            for entry in outputs.manifest["servers"]:
                cid = entry.get("configId", "")
                if cid not in pending:
                    continue
                module_rel = module_file_of(entry)
                source = outputs.files.get(module_rel)
                if source is None:
                    raise UserError(f"in-memory build of '{cid}' produced no module {module_rel}")
                self._built_entries[cid] = entry
                built = BuiltModule(entry["serverId"], entry, source)
                if len(self._builds) >= MAX_BUILD_CACHE:
                    self._builds.clear()
                self._builds[pending[cid][0]] = built
                result[cid] = built
        return result


def _covered(views: Mapping[str, ServerView]) -> set[str]:
    """Config ids whose module out/ provides."""
    return {v.config_id for v in views.values() if v.config_id and v.module_source is not None}


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's failure as seen: the run that needs the server reports it, and
    asyncio must not log it as an unhandled error on stderr when none does."""
    if not task.cancelled():
        task.exception()
