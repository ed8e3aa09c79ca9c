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

What the run sees is decided by runtime/host/reconcile.py from values alone; this module does the
I/O around it (reading out/, connecting, building in memory) and owns the sessions' lifetime.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import logging
import os
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.session_errors import AuthError
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig, ServerSettings, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.manifest import (
    Manifest,
    ServerEntry,
    manifest_path,
    module_file_of,
    module_specifier,
    read_manifest,
)
from codemode_gen.generator.project import load_project_settings
from codemode_gen.mcp_json import load_config
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.host import hints, telemetry, tooltrace, tsinput
from codemode_gen.runtime.host.approval import ApprovalGate
from codemode_gen.runtime.host.approval_request import Approver
from codemode_gen.runtime.host.bridge import Bridge
from codemode_gen.runtime.host.catalog import (
    Catalog,
    LiveServer,
    ServerView,
    ToolView,
    manifest_views,
    module_paths_for,
)
from codemode_gen.runtime.host.discovery import MODULE_NAME as DISCOVERY_MODULE
from codemode_gen.runtime.host.discovery import discovery_module
from codemode_gen.runtime.host.learn import (
    MAX_PENDING_RECORD_BYTES,
    Learned,
    Learner,
    LiveRecorder,
    learned_note,
)
from codemode_gen.runtime.host.offload import Offload, OffloadFailed
from codemode_gen.runtime.host.progress import ProgressCallback, ProgressReporter
from codemode_gen.runtime.host.reconcile import (
    BuiltModule,
    Connections,
    Failure,
    Pending,
    is_slow_connect,
    reconcile,
    select_servers,
)
from codemode_gen.runtime.host.resume import Resumable
from codemode_gen.runtime.host.skills import (
    SKILLS_MODULE,
    SKILLS_MODULE_SOURCE,
    SkillSaver,
    imported_skill_code,
    skill_entries,
    skill_modules,
)
from codemode_gen.runtime.host.telemetry import Telemetry
from codemode_gen.runtime.host.tsdiagnostics import NOT_CHECKED, run_diagnostics
from codemode_gen.runtime.host.tsinput import Erased, runnable
from codemode_gen.runtime.host.typecheck import TypeChecker
from codemode_gen.runtime.limits import Limits, LimitsError, TraceMode
from codemode_gen.runtime.sandbox.pool import Sandbox

if TYPE_CHECKING:
    from codemode_gen.generator.fixtures import FixtureSet

__all__ = ["CodeMode"]

log = logging.getLogger(__name__)

# Bounds the in-memory module cache (one entry per distinct live tool list) so a server that
# keeps changing its tools cannot grow host memory without end.
MAX_BUILD_CACHE = 64
# Bounds the run catalogs kept for reuse (one per distinct manifest, named servers and tool-list
# versions; `_prepare`): scripts naming ever new sets of servers cannot grow host memory.
MAX_CATALOG_CACHE = 16
# Connecting servers slower than this at run start is worth an info diagnostic (CONNECT_TIME)
# when the run then runs out of time: it explains a script timeout that looks too early.
CONNECT_NOTICE_MS = 1000
# The share of a run's timeoutMs the host waits, before the script starts, for the servers it
# names to connect. That wait is not counted in the script's own timeoutMs (its deadline moves
# by it: a cold start of the servers must not eat the script's time), and bounding it keeps the
# answer within 1.5 x timeoutMs (docs/DESIGN.md, "Deadline"). A server still connecting then is
# waited for by the script's first call to it, within the script's time.
CONNECT_WAIT_SHARE = 0.2
# Live results waiting to be learned from or recorded (runtime/host/learn.py: walks of the result,
# done in one thread per host): past it the next call's result waits for a slot before the
# script gets it, instead of results piling up in host memory faster than the thread keeps up.
MAX_PENDING_OBSERVATIONS = 8
# The longest script whose TypeScript is erased on the event loop: erasing is superlinear on
# some inputs (`x!!!…`: ~60 ms for 512 characters), and the loop serves every client and every
# run's watchdog, so anything longer goes to a helper process (runtime/host/offload.py; ~1 ms more).
ERASE_INLINE_MAX_CHARS = 256


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
        max_workers: int | None = None,
        record: bool | Path = False,
        approve: Approver | None = None,
        approve_all: bool = False,
        trace: TraceMode = "full",
        max_response_chars: int | None = None,
        telemetry: Telemetry | None = None,
        skills_writable: bool = False,
    ) -> None:
        self.configs = dict(configs)
        # Sandbox workers running at once (runtime/sandbox/pool.py): the argument, else codemode.toml's
        # [sandbox] max_workers, else sandbox.default_max_workers() (two per CPU).
        self.max_workers = max_workers
        self.out_dir = Path(out_dir)
        self.settings = settings if settings is not None else Settings()
        try:  # the host's own limits: a bad one must fail here, not every run, blaming the caller
            Limits.from_json(self.settings.limits)
            # What a response carries (tooltrace.shape_trace, response.fit_response) unless a run's limits
            # or codemode.toml's say otherwise: `serve` makes it the model's ("errors", a budget),
            # the Python API and `run` keep the whole response by default.
            Limits(trace=trace, maxResponseChars=max_response_chars)
        except LimitsError as exc:
            raise UserError(f"{self.settings.path or 'Settings.limits'}: {exc}",
                            hint="use values within the ranges every run accepts (docs/config.md)") from None
        self.trace: TraceMode = trace
        self.max_response_chars = max_response_chars
        self.log_dir = log_dir
        self._stack: AsyncExitStack | None = None
        self._sessions: SessionManager | None = None
        self._sandbox: Sandbox | None = None
        self._offload: Offload | None = None
        self._runs_in_progress = 0
        self._connected: dict[str, McpSession] = {}
        self._lives: dict[str, tuple[McpSession, LiveServer]] = {}  # configId -> (session, its snapshot)
        # configId -> connection of a server out/ lacks, started ahead of need (never awaited by
        # a run that does not name the server, so a hanging server delays nothing)
        self._background: dict[str, asyncio.Task[LiveServer]] = {}
        self._manifest_key: tuple[int, int] | None = None
        self._manifest: Manifest | None = None
        self._skills_cache: tuple[Manifest | None, dict[str, str]] | None = None
        # serve --skills-writable: runs may propose a skill (`saveSkill` of @codemode/skills),
        # written to skills/ beside out/ only once a person approves it (runtime/host/bridge.py).
        self.skill_saver = SkillSaver(Path(os.path.abspath(self.out_dir)).parent) if skills_writable else None
        self._builds: dict[str, BuiltModule] = {}  # by build key (config id, live server and tools)
        self._built_entries: dict[str, ServerEntry] = {}  # configId -> its in-memory manifest entry
        self._out: _OutViews | None = None  # out/'s views of the manifest last read
        self._catalogs: OrderedDict[tuple[Any, ...], _Prepared] = OrderedDict()  # by what decides them
        # Type checking (runtime/host/typecheck.py): `typecheck` is the default of limits.typecheck
        # (serve --typecheck); tsc is looked for from `project_dir` (default: out/'s folder) up.
        self.typecheck = typecheck
        self.tsc = tsc
        self.project_dir = Path(project_dir) if project_dir is not None else self.out_dir.parent
        self._typechecker: TypeChecker | None = None
        self._typechecks: set[asyncio.Task[Any]] = set()  # checks in flight (and the warm-up)
        # Live calls teach output types to later runs (runtime/host/learn.py); with `record` (True:
        # the settings' fixtures dir, or a folder) they are also written to fixtures/.
        self._learner = Learner()
        self._recorder: LiveRecorder | None = None
        if record is not False:
            fixtures_dir = self.settings.fixtures_dir if record is True else Path(record)
            self._recorder = LiveRecorder(fixtures_dir, self.settings, self.configs)
        self._recording_notes: list[str] = []
        self._learned_builds: dict[tuple[str, int, int], dict[str, Any]] = {}  # (cid, id(live), version)
        # Learning and recording of live results, off the event loop in call order (one thread),
        # at most MAX_PENDING_OBSERVATIONS at once; (config id, tool) being learned from.
        self._observer: ThreadPoolExecutor | None = None
        self._observing: set[asyncio.Future[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._learning: set[tuple[str, str]] = set()
        self._flushing: asyncio.Task[list[str]] | None = None  # a flush past MAX_PENDING_RECORD_BYTES
        # Approval of tool calls (runtime/host/approval.py): `approve` asks a person when a tool's
        # policy says "ask"/"ask-once" (a run may bring its own); without one such calls are
        # denied (fail closed) unless `approve_all`. Ask-once accepts last as long as this host.
        self.approval = ApprovalGate(
            approve=approve, approve_all=approve_all, project_default=self.settings.approval,
            redact_patterns=self.settings.redact_patterns,
        )
        # Traces and metrics of the runs (runtime/host/telemetry.py): codemode.toml's [telemetry] and
        # the OTEL_* environment decide, unless the caller brings its own.
        self.telemetry = telemetry if telemetry is not None else Telemetry.from_settings(self.settings)
        self._register_gauges()

    @classmethod
    def from_config(
        cls,
        config: str | Path = ".mcp.json",
        out: str | Path | None = None,
        settings: Settings | str | Path | None = None,
        *,
        typecheck: bool = False,
        tsc: str | Path | None = None,
        max_workers: int | None = None,
        record: bool | Path = False,
        replay: bool = False,
        fixtures: str | Path | None = None,
        approve: Approver | None = None,
        approve_all: bool = False,
        trace: TraceMode = "full",
        max_response_chars: int | None = None,
        telemetry: Telemetry | None = None,
        skills_writable: bool = False,
    ) -> CodeMode:
        """Read `.mcp.json` (+ codemode.toml: `settings`, else the one beside the config).

        `out` defaults to the settings' out dir, which is rooted at the config's folder (not the
        caller's working directory: an agent client launches us from anywhere); an explicit
        relative `out` stays relative to the working directory, as a CLI user expects.
        `replay`: run against the recordings in `fixtures` (default: the settings' fixtures dir)
        instead of the live servers, none of which is started (runtime/frontends/replay.py: tests, CI).
        `approve` / `approve_all`: approval of tool calls (see `__init__`, runtime/host/approval.py).
        `trace` / `max_response_chars`: the defaults of limits.trace and limits.maxResponseChars.
        `telemetry`: where traces and metrics go (default: from [telemetry] and OTEL_*).
        """
        config_path = Path(config)
        if isinstance(settings, Settings):
            loaded = settings
        else:
            # Tool names are checked against the recordings these runs use (notes on stderr).
            recordings = fixtures if fixtures is not None else record if isinstance(record, Path) else None
            loaded = load_project_settings(config_path, Path(settings) if settings is not None else None,
                                           fixtures_dir=Path(recordings) if recordings is not None else None)
        if replay and record is not False:
            raise UserError("replay and record exclude each other: replayed calls are recordings already")
        if replay:
            from codemode_gen.runtime.frontends.replay import ReplayEnviron, replay_configs

            configs = replay_configs(load_config(config_path, loaded, environ=ReplayEnviron()),
                                     Path(fixtures) if fixtures is not None else loaded.fixtures_dir)
        else:
            configs = load_config(config_path, loaded)
        return cls(configs, out_dir=Path(out) if out is not None else loaded.out_dir, settings=loaded,
                   typecheck=typecheck, tsc=tsc, project_dir=Path(os.path.abspath(config_path)).parent,
                   max_workers=max_workers, record=record, approve=approve, approve_all=approve_all,
                   trace=trace, max_response_chars=max_response_chars, telemetry=telemetry,
                   skills_writable=skills_writable)

    def _register_gauges(self) -> None:
        """What the metrics' gauges read from this host when scraped (weakly: the metrics do
        not keep a closed host alive)."""
        metrics, ref = self.telemetry.metrics, weakref.ref(self)
        key = f"codemode-{id(self)}"

        def read(pick: Callable[[CodeMode], list[tuple[tuple[str, ...], float]]]) -> Callable[[], Any]:
            def source() -> list[tuple[tuple[str, ...], float]]:
                cm = ref()
                return pick(cm) if cm is not None else []

            return source

        def pool(cm: CodeMode) -> Any:
            return cm._sandbox.pool if cm._sandbox is not None else None

        metrics.runs_in_progress.sources[key] = read(lambda cm: [((), cm._runs_in_progress)])
        metrics.workers.sources[key] = read(lambda cm: [] if (p := pool(cm)) is None else [
            (("busy",), p.busy), (("idle",), p.idle)])
        metrics.workers_max.sources[key] = read(lambda cm: [] if (p := pool(cm)) is None else [((), p.max_workers)])
        metrics.runs_queued.sources[key] = read(lambda cm: [] if (p := pool(cm)) is None else [(("worker",), p.waiting)])
        metrics.upstream_sessions.sources[key] = read(lambda cm: [
            ((cid,), 0 if session.closed else 1) for cid, session in sorted(cm._connected.items())])

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CodeMode:
        stack = AsyncExitStack()
        try:
            self._sessions = await stack.enter_async_context(
                SessionManager(self.configs, log_dir=self.log_dir)
            )
            max_workers = self.max_workers if self.max_workers is not None else self.settings.max_workers
            sandbox = Sandbox(max_workers=max_workers)
            stack.push_async_callback(sandbox.aclose)
            # Workers start in the background: the first run waits for one only if it comes
            # before they are ready (a server answers its client's initialize meanwhile).
            await sandbox.start(wait=False)
            self._sandbox = sandbox
            # TypeScript beyond a few lines is erased in a helper process (runtime/host/offload.py),
            # one per run at most, so no script stalls the event loop. The first such script
            # starts one (~0.13 s); one then stays for the next.
            offload = Offload(sandbox.pool.max_workers, warm=1)
            stack.push_async_callback(offload.aclose)
            self._offload = offload
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
        await _cancel_all(background)
        if self._observing:
            await asyncio.gather(*self._observing, return_exceptions=True)
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        if self._recorder is not None:
            await self.flush_recording()
        if self._observer is not None:
            self._observer.shutdown(wait=False)
            self._observer = None
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
        if self._current_live(config_id) is None:  # connecting, or listing its tools again
            with self.telemetry.span(telemetry.SPAN_CONNECT, {"codemode.server": config_id}):
                return await self._live(config_id)
        return await self._live(config_id)

    async def _live(self, config_id: str) -> LiveServer:
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
        covered = self._out_views(self._load_manifest()).covered
        return [self._background_task(cid) for cid in self.configs if cid not in covered]

    async def wait_background(self, timeout: float | None = None) -> None:
        """Wait (at most `timeout` seconds) until the background connections have settled."""
        tasks = list(self._background.values())
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _background_task(self, config_id: str) -> asyncio.Task[LiveServer]:
        task = self._background.get(config_id)
        if task is None:
            # Not the run's (it may outlive it): no span of the run that happens to start it.
            task = asyncio.get_running_loop().create_task(self._connect_and_build(config_id),
                                                          context=telemetry.detached_context())
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
        *,
        progress: ProgressCallback | None = None,
        approve: Approver | None = None,
        approval_session: Hashable = None,
        started: float | None = None,
        resumable: Resumable | None = None,
    ) -> dict[str, Any]:
        """Execute one script in a fresh sandbox; always returns a §3.3 response.

        `progress`, an `async (progress, total, message)` callback (MCP's progress shape), hears
        from the run while it is under way: when a tool call finishes, and at least every
        HEARTBEAT_S seconds (runtime/host/progress.py); one that raises or hangs never affects the run.
        Cancelling the task that awaits `run` ends the run: the worker is killed and every tool
        call still in flight is cancelled upstream (notifications/cancelled, §7.4); the sessions
        stay open for the next run.

        `approve` asks a person about this run's calls that need approval (runtime/host/approval.py),
        instead of the host's approver (`serve` passes one per client request); ask-once
        accepts are remembered per `approval_session` (default: one session for the host), an
        answer of `FOR_RUN` ("run") for the rest of this run only.
        While a person is asked, `progress` hears "waiting for the user's approval of ...".

        `started` (`time.monotonic()` seconds) is when the run's timeoutMs began to count, if
        before this call: serve --http queues a request before it calls, and the caller's
        deadline includes that wait (§3.2.4). Default: now.

        `resumable` (runtime/host/resume.py): the run may end to wait for answers between two MCP
        requests (serve on MCP 2026-07-28) and resume from the state of an earlier round; its
        calls that need approval are asked through it. When it ends that way,
        `resumable.suspension` is set and the response returned is only a placeholder.
        """
        gate = (approve, approval_session)
        self._runs_in_progress += 1
        try:
            with self.telemetry.run(code, started) as traced:  # its span and metrics (runtime/host/telemetry.py)
                if progress is None:
                    return traced.finish(await self._run(code, limits, requested_capabilities, None, gate, started,
                                                         resumable))
                async with ProgressReporter(progress) as reporter:
                    return traced.finish(await self._run(code, limits, requested_capabilities, reporter, gate, started,
                                                         resumable))
        finally:
            self._runs_in_progress -= 1

    @property
    def runs_in_progress(self) -> int:
        """Runs started and not answered yet (their payloads are alive: codemode_gen/gcpolicy.py)."""
        return self._runs_in_progress

    async def _run(
        self,
        code: str,
        limits: Mapping[str, Any] | None,
        requested_capabilities: Iterable[str] | None,
        reporter: ProgressReporter | None,
        gate: tuple[Approver | None, Hashable] = (None, None),
        started: float | None = None,
        resumable: Resumable | None = None,
    ) -> dict[str, Any]:
        if self._sandbox is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        if not isinstance(code, str):
            raise TypeError("code must be a string of JavaScript or TypeScript")
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be an object (mapping of limit name to integer)")
        try:
            run_limits = Limits.from_json({**dict(self.settings.limits), **dict(limits or {})})
        except LimitsError as exc:
            return resp.not_started(diag.diagnostic(
                diag.DiagnosticCode.INVALID_LIMITS, str(exc),
                hint="send limits as non-negative integers within the documented ranges, or omit them",
                path=f"/limits/{exc.key}",
            ))
        telemetry.note_limits(run_limits)
        # The deadline is the caller's (§3.2.4): one instant, fixed now, that connecting, waiting
        # for a worker and the script itself all count against; messages name timeoutMs as given.
        started = time.monotonic() if started is None else min(started, time.monotonic())
        deadline = started + run_limits.timeoutMs / 1000
        if resumable is not None:
            # A resumed run keeps its first round's deadline: the wait for the answer counts.
            if resumable.expired():
                return self._expired(resumable, run_limits)
            deadline = resumable.deadline(deadline)
        # TypeScript runs with its types erased, every position kept (runtime/host/tsinput.py); plain
        # JavaScript comes back unchanged. `code` stays the agent's own source. A script that
        # cannot be erased or parsed never runs: answer as the sandbox would, before connecting
        # anything (a first connect can take seconds).
        erased = await self._erase(code, deadline)
        if erased is None:  # erasing alone outlasted the run's timeoutMs
            return resp.not_started(diag.timeout_limit(run_limits.timeoutMs))
        sandbox = self._sandbox
        # The worker parses every script before it runs it and reports a SYNTAX_ERROR exactly as
        # the separate check does: that check (a round trip to a worker) is made only where it
        # saves something, a connection to wait for; TypeScript also keeps it (a script the
        # TypeScript grammar misread runs as written, `runnable`).
        requested_capabilities = list(requested_capabilities or [])
        checked_by_run = (not erased.diagnostics and erased.code is code and resumable is None
                          and self._nothing_to_connect(code, requested_capabilities))
        if checked_by_run:
            script = code
        else:
            script, refused = await runnable(code, lambda text: sandbox.check_syntax(text, deadline=deadline), erased)
            if refused:
                return resp.not_started(*refused)
        # Type check (limits.typecheck, serve --typecheck) of the agent's own source, while the
        # servers connect; its type errors are warnings and the run goes ahead regardless.
        typecheck = self._start_typecheck(code, run_limits, deadline)
        # Connecting is not counted in the script's timeoutMs (CONNECT_WAIT_SHARE).
        wait_s = run_limits.timeoutMs / 1000 * CONNECT_WAIT_SHARE
        connecting = time.monotonic()
        prepared = await self._prepare(script, list(requested_capabilities or []),
                                       deadline - connecting, lazy_budget_s=wait_s)
        catalog = prepared.for_run()
        waited = time.monotonic() - connecting
        deadline += min(waited, wait_s)
        if typecheck is not None:
            catalog.diagnostics[:0] = self._typecheck_notes(await typecheck, limits)
        if time.monotonic() >= deadline:  # connecting (beyond the wait not counted) used it all
            return resp.not_started(*catalog.diagnostics, diag.prepare_limit(
                run_limits.timeoutMs, round((time.monotonic() - started) * 1000)))
        observed: list[asyncio.Future[None]] = []  # this run's learning and recording work
        run_token = object()  # whose recorded calls are whose (their failures are its diagnostics)
        bridge = Bridge(
            catalog,
            self,
            self.configs,
            max_tool_calls=run_limits.maxToolCalls,
            deadline=deadline,
            on_call_done=None if reporter is None else reporter.call_done,
            on_result=functools.partial(self._on_result, run_token, observed),
            approval=self.approval,
            approve=gate[0],
            approval_session=gate[1],
            on_note=None if reporter is None else reporter.note,
            redact_patterns=self.settings.redact_patterns,
            skill_writer=self.skill_saver,
            journal=resumable,
        )
        modules = prepared.modules
        if resumable is not None:
            resumable.begin(deadline)
            # It may end to ask through input_required: its span and metrics say so, not "ok".
            telemetry.pause_when(lambda: resumable.suspension is not None)
        # The bridge closes after the sandbox, both to the end even if this task is cancelled.
        sandboxed = await telemetry.traced(bridge.serve(self._sandbox.run(
            script, modules, bridge.host_call, run_limits, deadline=deadline, hooks=resumable)), telemetry.SPAN_EXECUTE)
        # The run's results are learned and recorded before it answers: the next run sees the
        # types, and its calls are in fixtures/ (or it says why not).
        if observed:
            await asyncio.gather(*observed, return_exceptions=True)
        if checked_by_run and _refused_by_parse(sandboxed):
            return resp.not_started(*sandboxed["diagnostics"])  # as the separate check answers
        if resumable is not None and resumable.suspension is not None:
            return resp.not_started()  # the caller answers with the suspension instead
        diagnostics = sandboxed.get("diagnostics", [])
        if resumable is not None:
            diagnostics = [*diagnostics, *resumable.diagnostics(diagnostics)]
        if bridge.connecting:  # the script ran out of time waiting for a server to connect
            diagnostics = [diag.waiting_for_connect(d, sorted(bridge.connecting)) for d in diagnostics]
        if hints.needs_explaining(diagnostics):  # a failed run only: off the event loop (a parse)
            diagnostics = await asyncio.to_thread(hints.explain, diagnostics, code, script, catalog)
        recording: list[dict[str, str]] = []
        if self._recorder is not None:
            recording = [
                diag.diagnostic(
                    diag.DiagnosticCode.RECORDING_FAILED, note, severity="warning",
                    hint="the calls themselves succeeded; fix what the message names (fixtures/ writable,"
                    " the tool recorded with `codemode-gen record`) and run the script again to record them",
                )
                for note in await self.flush_recording(run_token)
            ]
        spent_ms = round(waited * 1000)
        timed_out = diag.hit_limit(sandboxed.get("diagnostics", []), "timeoutMs")
        if not timed_out:  # a slow connect the script then waited out explains nothing (§3.3.3)
            catalog.diagnostics[:] = [d for d in catalog.diagnostics if not is_slow_connect(d)]
        if spent_ms >= CONNECT_NOTICE_MS and timed_out:
            # Only when it explains something: the run ran out of time after a slow connect.
            uncounted = "not counted" if waited <= wait_s else f"{round(wait_s * 1000)} ms of it not counted"
            catalog.diagnostics.append(diag.diagnostic(
                diag.DiagnosticCode.CONNECT_TIME,
                f"connecting servers took {spent_ms} ms before the script started, {uncounted} in its "
                f"timeoutMs ({run_limits.timeoutMs} ms)",
                severity="info",
                hint="run it again: the servers stay connected, so the next run has its whole timeoutMs "
                "for the script (or raise limits.timeoutMs)",
            ))
        ended = diagnostics
        mode = run_limits.trace or self.trace
        tool_trace, tool_summary = tooltrace.shape_trace(bridge.trace, bridge.counts, mode)
        return await resp.build_response_async(
            sandboxed.get("logs", []),
            sandboxed.get("result"),
            [*catalog.diagnostics, *ended, *bridge.diagnostics(full_trace=mode == "full"), *recording],
            tool_trace,
            tool_summary=tool_summary,
            max_chars=run_limits.maxResponseChars if run_limits.maxResponseChars is not None else self.max_response_chars,
        )

    def _nothing_to_connect(self, code: str, requested: list[str]) -> bool:
        """Whether preparing a run of `code` would connect or re-list nothing: every server it
        names has a current session, and so has every server out/ lacks (those are connected in
        the background by any run)."""
        out = self._out_views(self._load_manifest())
        if any(self._needs_refresh(cid) for cid in self._connected):
            return False
        selection = select_servers(code, requested, self.configs, out.paths)
        if selection.diagnostics:
            return False
        return all(self._current_live(cid) is not None for cid in selection.wanted) and all(
            self._current_live(cid) is not None for cid in self.configs if cid not in out.covered
        )

    def _expired(self, resumable: Resumable, limits: Limits) -> dict[str, Any]:
        """A retry that came after its run's timeoutMs ran out: nothing runs, the calls that
        waited for the answer are denied, the earlier calls are in the trace."""
        waiting = resumable.expired_trace()
        timeout = diag.timeout_limit(limits.timeoutMs)
        timeout["message"] = (f"{timeout['message']} while waiting for the user's answer to the approval "
                              "request: the calls that waited were not sent")
        mode = limits.trace or self.trace
        tool_trace, tool_summary = tooltrace.shape_trace(waiting, _counts(waiting), mode)
        return resp.build_response([], None, [timeout], tool_trace, tool_summary=tool_summary,
                                   max_chars=limits.maxResponseChars if limits.maxResponseChars is not None
                                   else self.max_response_chars)

    async def _erase(self, code: str, deadline: float) -> Erased | None:
        """`erase_types(code)` without stalling the event loop: inline for a script of at most
        ERASE_INLINE_MAX_CHARS, else in a helper process until `deadline` (None when that passed).
        A helper that fails is a bug: the script then runs as written, as erase_types does."""
        if len(code) <= ERASE_INLINE_MAX_CHARS or self._offload is None:
            return tsinput.erase_types(code)
        try:
            return await self._offload.erase(code, deadline)
        except TimeoutError:
            return None
        except OffloadFailed as exc:
            log.error("erasing TypeScript types failed (%s); running the script as written", exc)
            return Erased(code)

    @staticmethod
    def _typecheck_notes(found: list[dict[str, str]], limits: Mapping[str, Any] | None) -> list[dict[str, str]]:
        """A run's type-check diagnostics as its response carries them: a check that did not
        happen (TYPECHECK_SKIPPED, TYPECHECK_UNAVAILABLE) is said to a run that asked for it in
        its own limits, whose reader would otherwise take no warnings for a clean check; when
        the check is the host's default (`serve --typecheck`, codemode.toml) there is nothing
        the run can do about it, and the host's log says it instead."""
        asked = isinstance(limits, Mapping) and limits.get("typecheck") is True
        if asked:
            return found
        for note in found:
            if note.get("code") in NOT_CHECKED:
                log.info("type check: %s", note.get("message"))
        return [note for note in found if note.get("code") not in NOT_CHECKED]

    async def prepare(self, code: str, requested: list[str], budget_s: float | None = None) -> Catalog:
        """This run's catalog: connect what the run needs, snapshot live tools, load modules.

        Only the servers the script names (static imports, `requestedCapabilities`) and open
        sessions that announced tools/list_changed (§8.1, §8.2) are waited for, at most
        `budget_s`; a server still connecting then stays lazy (its first call waits for the same
        connection) and the run says so. Servers out/ lacks connect in the background and join
        the runs that start after they are connected: one slow or hanging server never delays a
        run that does not use it. What the run sees is decided by runtime/host/reconcile.py; this
        does the I/O around it (out/, connections, in-memory builds).
        """
        return (await self._prepare(code, requested, budget_s)).for_run()

    async def _prepare(
        self, code: str, requested: list[str], budget_s: float | None, *, lazy_budget_s: float | None = None
    ) -> _Prepared:
        """`prepare`, reusing the last catalog built from the same inputs. Servers out/ has a
        module for are waited for at most `lazy_budget_s` (they can connect at their first
        call); the others, which need their tool list before the run can import them, `budget_s`.

        A catalog is a pure function of out/'s manifest, the servers the run names and the
        snapshot (tool-list version) of every connection (runtime/host/reconcile.py), so it is built
        once per distinct set of those and each run gets its own copies of the server views
        (the bridge rebinds their fields, §8.2). Rebuilding it, and the discovery module with
        it, was most of a warm run's host time."""
        manifest = self._load_manifest()
        out = self._out_views(manifest)
        refresh = [cid for cid in self._connected if self._needs_refresh(cid)]
        # Skills are modules of out/ too: the servers a skill the script imports imports are
        # the script's own (README "Skills"); read again whenever out/'s manifest is (a skill is source, §1.4).
        skills = self._skills(manifest)
        used = imported_skill_code(code, skills) if skills else ""
        selection = select_servers(code + "\n" + used if used else code, requested, self.configs, out.paths, refresh)
        connections = await self._connect(selection.wanted, out.covered, budget_s, lazy_budget_s)
        key = (
            id(manifest),
            tuple(requested),
            tuple(sorted(selection.wanted.items())),
            tuple(sorted((cid, id(live)) for cid, live in connections.lives.items())),
            tuple(sorted((cid, f.reason, f.auth, f.hint or "") for cid, f in connections.failures.items())),
            tuple(sorted(connections.pending.items())),
            self._learner.version,
        )
        prepared = self._catalogs.get(key)
        if prepared is not None:
            self._catalogs.move_to_end(key)
            return prepared
        plan = reconcile(self.configs, out.paths, out.views, selection, connections, out_dir=self.out_dir)
        lives = connections.lives
        built = self._build_in_memory({cid: lives[cid] for cid in plan.build}, plan.build) if plan.build else {}
        rebuilt = self._build_in_memory({cid: lives[cid] for cid in plan.redeclare}, {}) if plan.redeclare else {}
        catalog = plan.catalog(built, rebuilt)
        if self._learner.servers():
            self._apply_learned(catalog)
        if self.approval.approve_all:
            _drop_asks(catalog)
        modules = catalog.modules()
        modules[DISCOVERY_MODULE] = discovery_module(catalog, skill_entries(manifest))
        modules.update(skills)
        if self.skill_saver is not None:
            modules[SKILLS_MODULE] = SKILLS_MODULE_SOURCE
        # The key holds ids: the entry keeps those objects alive so that no id is reused.
        prepared = _Prepared((manifest, dict(lives)), catalog, modules)
        self._catalogs[key] = prepared
        while len(self._catalogs) > MAX_CATALOG_CACHE:
            self._catalogs.popitem(last=False)
        return prepared

    # ------------------------------------------------------------------ learning (runtime/host/learn.py)

    async def _on_result(
        self, run: Hashable, observed: list[asyncio.Future[None]],
        config_id: str, tool: ToolView, arguments: Any, result: dict[str, Any], duration_ms: int,
    ) -> None:
        """Every successful live call (the bridge's hook): merged into the tool's learned type,
        and a line for fixtures/ when recording. Both walk the result, so they run in the
        observation thread, never on the event loop; this waits only while
        MAX_PENDING_OBSERVATIONS results are waiting for it already."""
        key = (config_id, tool.tool_name)
        # One result per tool waits to be learned from at a time: later ones would only queue
        # behind it (learning needs a few samples, not every one of a tight loop).
        learn = self._learner.wants(tool) and key not in self._learning
        if not learn and self._recorder is None:
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(MAX_PENDING_OBSERVATIONS)
        slots = self._slots
        await slots.acquire()
        if learn:
            self._learning.add(key)
        if self._observer is None:
            self._observer = ThreadPoolExecutor(1, thread_name_prefix="codemode-observe")
        mode = self.configs[config_id].unwrap
        job = asyncio.get_running_loop().run_in_executor(
            self._observer, self._observe, run, config_id, mode, tool.tool_name, learn, arguments, result, duration_ms
        )
        observed.append(job)
        self._observing.add(job)

        def done(_: asyncio.Future[None]) -> None:
            slots.release()
            self._observing.discard(job)
            if learn:
                self._learning.discard(key)
            recorder = self._recorder
            if recorder is not None and recorder.pending_bytes > MAX_PENDING_RECORD_BYTES and (
                self._flushing is None or self._flushing.done()
            ):  # too much waiting for the run's end: write it now
                self._flushing = asyncio.ensure_future(self.flush_recording())

        job.add_done_callback(done)

    def _observe(
        self, run: Hashable, config_id: str, mode: Any, tool_name: str, learn: bool,
        arguments: Any, result: dict[str, Any], duration_ms: int,
    ) -> None:
        """In the observation thread: learning and recording never fail a call or a run."""
        try:
            if learn:
                self._learner.observe(config_id, tool_name, mode, arguments, result)
            if self._recorder is not None:
                self._recorder.add(config_id, tool_name, arguments, result, duration_ms, run)
        except Exception as exc:
            log.warning("learning from %s.%s failed: %s: %s", config_id, tool_name, type(exc).__name__,
                        jsonsafe.clip(str(exc), 300))

    async def flush_recording(self, run: Hashable = None) -> list[str]:
        """Write the calls recorded so far (after each run: never on a call's path; a no-op
        without `record`); returns why calls of `run` are not in fixtures/ (empty: all are).
        Every note also goes to the log and `take_recording_notes`."""
        if self._recorder is None:
            return []
        lives = {cid: live for cid, (_, live) in self._lives.items()}
        failures = await asyncio.to_thread(self._recorder.flush, lives, run)
        notes = self._recorder.take_notes()
        self._recording_notes.extend(notes)
        for note in notes:
            (log.warning if "not recorded" in note or "not written" in note or "dropped" in note else log.info)(
                "record: %s", note)
        return failures

    def take_recording_notes(self) -> list[str]:
        """What live recording had to say since the last call (written, skipped, failed)."""
        notes, self._recording_notes = self._recording_notes, []
        return notes

    def _apply_learned(self, catalog: Catalog) -> None:
        """Give this run's catalog the output types learned from earlier runs' calls: tools that
        have none of their own get the type (and declaration) `generate` would infer from the
        same calls, marked as learned (`ToolView.learned_calls`)."""
        for config_id in self._learner.servers():
            view = next((v for v in catalog.servers.values() if v.config_id == config_id), None)
            cached = self._lives.get(config_id)
            if view is None or cached is None or view.unavailable is not None:
                continue
            learned = self._learner.learned(config_id)
            entry = self._learned_entry(config_id, view.server_id, cached[1], learned)
            built = {t.get("toolName"): t for t in entry.get("tools", [])} if entry else {}
            tools = dict(view.tools)
            for name, got in learned.items():
                tool, output_tool = tools.get(name), built.get(name)
                if tool is None or output_tool is None or not self._learner.wants(tool):
                    continue
                output = output_tool.get("output")
                if not isinstance(output, Mapping) or output.get("source") != "inferred":
                    continue
                declaration = output_tool.get("declaration")
                if isinstance(declaration, str) and output_tool.get("exportName") == tool.export_name:
                    declaration = f"{learned_note(got.calls, got.stopped)}\n{declaration}"
                else:
                    declaration = tool.declaration
                tools[name] = replace(
                    tool, output_schema=output_tool.get("outputSchema"), declaration=declaration,
                    learned_calls=got.calls, learning_stopped=got.stopped,
                )
            view.tools = tools

    def _learned_entry(
        self, config_id: str, server_id: str, live: LiveServer, learned: Mapping[str, Learned]
    ) -> dict[str, Any] | None:
        """The manifest entry `generate` would write for this server with the learned calls
        recorded: its inferred output types and declarations (built in memory, once per learned
        state, from the merged types: no call is kept)."""
        key = (config_id, id(live), self._learner.version)
        entry = self._learned_builds.get(key)
        if entry is not None:
            return entry
        from codemode_gen.generator.build import build_outputs

        examples = {name: [got.example_call()] for name, got in learned.items() if got.example is not None}
        fixture_set = _fixture_set(config_id, live, self._listed_tools(config_id, live), copy.deepcopy(examples))
        inferences = {name: got.inference for name, got in learned.items()}
        try:
            outputs = build_outputs([fixture_set], self._build_settings(), module_paths={config_id: server_id},
                                    inferences={config_id: inferences})
        except UserError as exc:
            log.info("learning %s: in-memory build failed: %s", config_id, exc.message)
            return None
        found = next((dict(e) for e in outputs.manifest["servers"] if e.get("configId") == config_id), None)
        if len(self._learned_builds) >= MAX_BUILD_CACHE:
            self._learned_builds.clear()
        if found is not None:
            self._learned_builds[key] = found
        return found

    def _out_views(self, manifest: Manifest | None) -> _OutViews:
        """out/'s servers (`manifest_views`, which reads every module file) and every configured
        server's module path, computed once per manifest (the manifest is read again only when
        its file changes, `_load_manifest`; generate replaces out/ as a whole)."""
        cached = self._out
        if cached is not None and cached.manifest is manifest:
            return cached
        views = manifest_views(manifest, self.out_dir, self.configs)
        self._out = _OutViews(manifest, module_paths_for(manifest, self.configs), views, _covered(views))
        return self._out

    async def _connect(
        self, wanted: Iterable[str], covered: set[str], budget_s: float | None, lazy_budget_s: float | None = None
    ) -> Connections:
        """Connect `wanted` concurrently (waiting at most `budget_s`; at most `lazy_budget_s` for
        those out/ covers), take the current snapshot of every other open session, and start or
        check the background connections of the servers out/ does not cover."""
        tasks = {cid: asyncio.ensure_future(self.live(cid)) for cid in wanted}
        if tasks:
            start = time.monotonic()
            first = budget_s if lazy_budget_s is None else min(lazy_budget_s, budget_s if budget_s is not None else lazy_budget_s)
            await asyncio.wait(tasks.values(), timeout=first)
            needed = [t for cid, t in tasks.items() if cid not in covered and not t.done()]
            if needed and first != budget_s:
                left = None if budget_s is None else max(0.0, budget_s - (time.monotonic() - start))
                await asyncio.wait(needed, timeout=left)
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

    async def prepare_typecheck(self, limits: Mapping[str, Any] | None = None) -> None:
        """If a run with `limits` is type-checked and no TypeScript is found, download the pinned
        one now (runtime/host/tsinstall.py, a line on stderr), so that the run's timeoutMs is not spent
        on it (a run does not wait for a download: it would skip its check). For one-shot hosts
        (`codemode-gen run`); `serve --typecheck` downloads at start-up, in the background. A
        failure is not raised: the run reports it (TYPECHECK_UNAVAILABLE)."""
        try:
            merged = Limits.from_json({**dict(self.settings.limits), **dict(limits or {})})
        except LimitsError:
            return  # the run reports it
        if not (self.typecheck if merged.typecheck is None else merged.typecheck):
            return
        with contextlib.suppress(Exception):
            await self.typechecker().install()

    def _start_typecheck(self, code: str, limits: Limits, deadline: float) -> asyncio.Task[list[dict[str, str]]] | None:
        """This run's type check (None when off): warnings, or an info line when it was skipped."""
        if not (self.typecheck if limits.typecheck is None else limits.typecheck):
            return None
        # Servers out/ lacks are built in memory: importing one is no error, only unchecked.
        try:
            modules = {module_specifier(sid) for sid in self.capability_ids().values()}
        except UserError:  # an unreadable out/: prepare() reports it
            modules = set()
        if self.skill_saver is not None:  # @codemode/skills (saveSkill) is not in codemode.d.ts: unchecked
            modules.add(SKILLS_MODULE)
        return self._track(asyncio.ensure_future(telemetry.traced(
            run_diagnostics(self.typechecker(), code, deadline=deadline, modules=modules), telemetry.SPAN_TYPECHECK
        )))

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Keep a check until it ends (a run that failed before awaiting it leaves it to __aexit__)."""
        self._typechecks.add(task)
        task.add_done_callback(self._typechecks.discard)
        task.add_done_callback(_retrieve)
        return task

    async def _close_typechecker(self) -> None:
        await _cancel_all(list(self._typechecks))
        checker, self._typechecker = self._typechecker, None
        if checker is not None:
            await checker.aclose()

    def _failure(self, config_id: str, exc: Exception) -> Failure:
        """A failed connection: reported by this run; the next use connects afresh."""
        self._connected.pop(config_id, None)
        return Failure(str(getattr(exc, "reason", None) or exc), auth=isinstance(exc, AuthError),
                       hint=exc.hint if isinstance(exc, AuthError) else None)

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

    def skill_entries(self) -> list[Mapping[str, Any]]:
        """out/'s skills (manifest `skills`), for the prompt."""
        return skill_entries(self._load_manifest())

    def _skills(self, manifest: Manifest | None) -> dict[str, str]:
        """The skills out/ holds (specifier -> module source), read again when the manifest is."""
        cached = self._skills_cache
        if cached is not None and cached[0] is manifest:
            return cached[1]
        found = skill_modules(self.out_dir, manifest)
        self._skills_cache = (manifest, found)
        return found

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

    def _listed_tools(self, config_id: str, live: LiveServer) -> list[dict[str, Any]]:
        """The live tools an in-memory build covers: all but the config's blocklist."""
        blocked = set(self.configs[config_id].blocklist)
        return [dict(t) for t in live.tools if t.get("name") not in blocked]

    def _build_in_memory(
        self, lives: Mapping[str, LiveServer], ghosts: Mapping[str, list[dict[str, Any]]]
    ) -> dict[str, BuiltModule]:
        """Generate modules for servers out/ lacks, with the generator's own code (no calls)."""
        from codemode_gen.generator.build import build_outputs

        result: dict[str, BuiltModule] = {}
        pending: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # config id -> (build key, its tools)
        for cid, live in lives.items():
            tools = self._listed_tools(cid, live) + list(ghosts.get(cid, []))
            key = json.dumps([cid, live.server_json, tools], sort_keys=True, default=str)
            if key in self._builds:
                result[cid] = self._builds[key]
            else:
                pending[cid] = (key, tools)
        if pending:
            sets = [_fixture_set(cid, lives[cid], tools, {}) for cid, (_, tools) in pending.items()]
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


@dataclass(frozen=True)
class _OutViews:
    """What out/'s manifest says, for every run until the manifest changes."""

    manifest: Manifest | None
    paths: dict[str, str]  # configId -> module path (§5.0.1)
    views: dict[str, ServerView]  # by server id; never changed (reconcile copies them)
    covered: set[str]  # config ids whose module out/ provides


@dataclass(frozen=True)
class _Prepared:
    """One built run catalog and the modules the sandbox gets with it."""

    keep: tuple[Any, ...]  # the objects whose ids key this entry
    catalog: Catalog  # pristine: runs get copies (`for_run`)
    modules: dict[str, str]  # specifier -> source: server modules and @codemode/discovery

    def for_run(self) -> Catalog:
        """A catalog this run may change: the bridge rebinds fields of a server view when the
        server connects during the run; the tool views themselves are never changed."""
        return Catalog(
            servers={sid: replace(view) for sid, view in self.catalog.servers.items()},
            diagnostics=[dict(d) for d in self.catalog.diagnostics],
        )


def _fixture_set(
    config_id: str, live: LiveServer, tools: list[dict[str, Any]], calls: dict[str, list[dict[str, Any]]]
) -> FixtureSet:
    """The generator's input for an in-memory build of one server. The live tools and server
    info are the session's shared snapshot: the generator gets copies."""
    from codemode_gen.generator.fixtures import FixtureSet

    return FixtureSet(
        config_id=config_id,
        server_json=copy.deepcopy(dict(live.server_json)),
        tools=sorted(copy.deepcopy(tools), key=lambda t: str(t.get("name"))),
        calls=calls,
    )


def _refused_by_parse(sandboxed: Mapping[str, Any]) -> bool:
    """A run the worker ended before it started: its script does not parse."""
    diagnostics = sandboxed.get("diagnostics") or []
    return len(diagnostics) == 1 and diagnostics[0].get("code") == diag.DiagnosticCode.SYNTAX_ERROR


def _counts(entries: list[dict[str, Any]]) -> tooltrace.CallCounts:
    counts = tooltrace.CallCounts()
    for entry in entries:
        counts.add(str(entry.get("serverId")), str(entry.get("toolName")), entry.get("ok") is True)
    return counts


def _drop_asks(catalog: Catalog) -> None:
    """With `approve_all` nothing waits for a person: discovery shows no "ask" (copies: the tool
    views may be shared with out/'s cached views)."""
    for view in catalog.servers.values():
        if any(t.approval in ("ask", "ask-once") for t in view.tools.values()):
            view.tools = {
                name: replace(tool, approval=None) if tool.approval in ("ask", "ask-once") else tool
                for name, tool in view.tools.items()
            }


def _covered(views: Mapping[str, ServerView]) -> set[str]:
    """Config ids whose module out/ provides."""
    return {v.config_id for v in views.values() if v.config_id and v.module_source is not None}


async def _cancel_all(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait until each has ended (their failures are not ours to report)."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a background task's failure as seen: the run that needs the server reports it, and
    asyncio must not log it as an unhandled error on stderr when none does."""
    if not task.cancelled():
        task.exception()
