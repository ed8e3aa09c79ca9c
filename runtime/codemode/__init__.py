"""The Python API: run agent scripts against the configured MCP servers.

    async with CodeMode.from_config(".mcp.json", out="out") as cm:
        response = await cm.run(code, limits={"timeoutMs": 5000})

One `CodeMode` owns the MCP sessions (opened lazily, reused across runs) and the sandbox
pool; every `run` gets a fresh sandbox (§1.4) and returns the §3.3 response
`{logs, result, diagnostics, toolTrace}`, whatever the script did.

`CodeMode` is a façade: it builds the host's owners, opens and closes them in order, and keeps
the public API. Each job is one module of this package:
- out_cache.py: out/'s manifest, views and skills, read again only when out/ changes;
- builds.py: modules built in memory for servers out/ lacks, and learned output types;
- connections.py: the sessions, their tool-list snapshots, background connections;
- learning.py: live results learned from and recorded to fixtures/, off the event loop;
- typechecks.py: the one type-check server and when a run is checked;
- catalogs.py: each run's catalog (runtime/host/reconcile.py decides it), cached;
- run.py: one run's path, from the agent's source to its response.
Approval of tool calls is runtime/host/approval.py's `ApprovalGate`, which the façade holds.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Hashable, Iterable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.config import ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.project import load_project_settings
from codemode_gen.mcp_json import load_config
from codemode_gen.runtime.codemode.builds import Builder
from codemode_gen.runtime.codemode.catalogs import RunCatalogs
from codemode_gen.runtime.codemode.connections import ConnectionManager
from codemode_gen.runtime.codemode.gauges import register_gauges
from codemode_gen.runtime.codemode.learning import LearningSink
from codemode_gen.runtime.codemode.out_cache import OutCache
from codemode_gen.runtime.codemode.run import RunPath
from codemode_gen.runtime.codemode.typechecks import TypeCheckService
from codemode_gen.runtime.host.approval import ApprovalGate
from codemode_gen.runtime.host.approval_request import Approver
from codemode_gen.runtime.host.catalog import Catalog, LiveServer, module_paths_for
from codemode_gen.runtime.host.offload import Offload
from codemode_gen.runtime.host.progress import ProgressCallback
from codemode_gen.runtime.host.replay_configs import ReplayEnviron, replay_configs
from codemode_gen.runtime.host.resume import Resumable
from codemode_gen.runtime.host.skills import SkillSaver, skill_entries
from codemode_gen.runtime.host.telemetry import Telemetry
from codemode_gen.runtime.limits import Limits, LimitsError, TraceMode
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox.pool import Sandbox

if TYPE_CHECKING:
    from codemode_gen.runtime.host.typecheck import TypeChecker

__all__ = ["CodeMode"]


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
            raise UserError(
                f"{self.settings.path or 'Settings.limits'}: {exc}",
                hint="use values within the ranges every run accepts (docs/config.md)",
            ) from None
        self.trace: TraceMode = trace
        self.max_response_chars = max_response_chars
        self.log_dir = log_dir
        self._stack: AsyncExitStack | None = None
        self._sandbox: Sandbox | None = None
        self._offload: Offload | None = None
        # serve --skills-writable: runs may propose a skill (`saveSkill` of @codemode/skills),
        # written to skills/ beside out/ only once a person approves it (runtime/host/bridge.py).
        self.skill_saver = (
            SkillSaver(Path(os.path.abspath(self.out_dir)).parent) if skills_writable else None
        )
        # Type checking: `typecheck` is the default of limits.typecheck (serve --typecheck); tsc
        # is looked for from `project_dir` (default: out/'s folder) up.
        self.typecheck = typecheck
        self.tsc = tsc
        self.project_dir = Path(project_dir) if project_dir is not None else self.out_dir.parent
        self._typechecks = TypeCheckService(
            self.out_dir, default=typecheck, tsc=tsc, project_dir=self.project_dir
        )
        # Approval of tool calls (runtime/host/approval.py): `approve` asks a person when a tool's
        # policy says "ask"/"ask-once" (a run may bring its own); without one such calls are
        # denied (fail closed) unless `approve_all`. Ask-once accepts last as long as this host.
        self.approval = ApprovalGate(
            approve=approve,
            approve_all=approve_all,
            project_default=self.settings.approval,
            redact_patterns=self.settings.redact_patterns,
        )
        # Traces and metrics of the runs (runtime/host/telemetry.py): codemode.toml's [telemetry] and
        # the OTEL_* environment decide, unless the caller brings its own.
        self.telemetry = (
            telemetry if telemetry is not None else Telemetry.from_settings(self.settings)
        )
        self._out = OutCache(self.out_dir, self.configs)
        self._builder = Builder(self.configs, self.settings)
        self._connections = ConnectionManager(
            self.configs,
            log_dir=log_dir,
            telemetry=self.telemetry,
            on_connected=lambda cid, live: self._builder.build({cid: live}, {}),
        )
        # Live calls teach output types to later runs; with `record` (True: the settings'
        # fixtures dir, or a folder) they are also written to fixtures/.
        self._learning = LearningSink(
            self.configs,
            self.settings,
            record=record,
            builder=self._builder,
            lives=self._connections.snapshots,
        )
        self._catalogs = RunCatalogs(
            self.configs,
            self.out_dir,
            out=self._out,
            builder=self._builder,
            connections=self._connections,
            learning=self._learning,
            approval=self.approval,
            skills_writable=self.skill_saver is not None,
        )
        self._runner = RunPath(
            self.configs,
            self.settings,
            trace=trace,
            max_response_chars=max_response_chars,
            catalogs=self._catalogs,
            typechecks=self._typechecks,
            learning=self._learning,
            approval=self.approval,
            skill_saver=self.skill_saver,
            connector=self._connections,
            capability_ids=self.capability_ids,
            telemetry=self.telemetry,
        )
        register_gauges(self)

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
            recordings = (
                fixtures if fixtures is not None else record if isinstance(record, Path) else None
            )
            loaded = load_project_settings(
                config_path,
                Path(settings) if settings is not None else None,
                fixtures_dir=Path(recordings) if recordings is not None else None,
            )
        if replay and record is not False:
            raise UserError(
                "replay and record exclude each other: replayed calls are recordings already"
            )
        if replay:
            configs = replay_configs(
                load_config(config_path, loaded, environ=ReplayEnviron()),
                Path(fixtures) if fixtures is not None else loaded.fixtures_dir,
            )
        else:
            configs = load_config(config_path, loaded)
        return cls(
            configs,
            out_dir=Path(out) if out is not None else loaded.out_dir,
            settings=loaded,
            typecheck=typecheck,
            tsc=tsc,
            project_dir=Path(os.path.abspath(config_path)).parent,
            max_workers=max_workers,
            record=record,
            approve=approve,
            approve_all=approve_all,
            trace=trace,
            max_response_chars=max_response_chars,
            telemetry=telemetry,
            skills_writable=skills_writable,
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> CodeMode:
        stack = AsyncExitStack()
        try:
            await self._connections.open(stack)
            max_workers = (
                self.max_workers if self.max_workers is not None else self.settings.max_workers
            )
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
        self._typechecks.warm()  # the first run should not wait for the compiler to start
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        await self._connections.cancel_background()
        await self._learning.aclose()  # written with the sessions' snapshots, before they go
        self._connections.forget()
        await self._typechecks.aclose()
        if stack is not None:
            await stack.__aexit__(exc_type, exc, tb)

    # ------------------------------------------------------------------ connections (the bridge's Connector)

    async def session(self, config_id: str) -> McpSession:
        """The live session of a configured server, connecting on first use."""
        return await self._connections.session(config_id)

    async def live(self, config_id: str) -> LiveServer:
        """Connect if needed and return the server's current tool list (refreshed after
        tools/list_changed by the session itself)."""
        return await self._connections.live(config_id)

    def connect_in_background(self) -> list[asyncio.Task[LiveServer]]:
        """Start connecting every configured server out/ lacks, without waiting for any.

        Such a server has no module until it is connected, so it joins the runs that start
        after it is; starting early (`serve` does at start-up) makes that the first run. The
        tasks end with the server's LiveServer or its ConnectError.
        """
        return self._connections.connect_in_background(
            self._out.views(self._out.manifest()).covered
        )

    async def wait_background(self, timeout: float | None = None) -> None:
        """Wait (at most `timeout` seconds) until the background connections have settled."""
        await self._connections.wait_background(timeout)

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
    ) -> Response:
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
        return await self._runner.run(
            self._sandbox,
            self._offload,
            code,
            limits,
            requested_capabilities,
            progress=progress,
            gate=(approve, approval_session),
            started=started,
            resumable=resumable,
        )

    @property
    def runs_in_progress(self) -> int:
        """Runs started and not answered yet (their payloads are alive: codemode_gen/gcpolicy.py)."""
        return self._runner.in_progress

    async def prepare(
        self, code: str, requested: list[str], budget_s: float | None = None
    ) -> Catalog:
        """This run's catalog: connect what the run needs, snapshot live tools, load modules.

        Only the servers the script names (static imports, `requestedCapabilities`) and open
        sessions that announced tools/list_changed (§8.1, §8.2) are waited for, at most
        `budget_s`; a server still connecting then stays lazy (its first call waits for the same
        connection) and the run says so. Servers out/ lacks connect in the background and join
        the runs that start after they are connected: one slow or hanging server never delays a
        run that does not use it (runtime/codemode/catalogs.py).
        """
        return (await self._catalogs.prepare(code, requested, budget_s)).for_run()

    # ------------------------------------------------------------------ recording, type checking

    async def flush_recording(self, run: Hashable = None) -> list[str]:
        """Write the calls recorded so far (a no-op without `record`); returns why calls of `run`
        are not in fixtures/ (empty: all are). Every note also goes to `take_recording_notes`."""
        return await self._learning.flush(run)

    def take_recording_notes(self) -> list[str]:
        """What live recording had to say since the last call (written, skipped, failed)."""
        return self._learning.take_notes()

    def typechecker(self) -> TypeChecker:
        """The one type-check server of this host (started on first use, reused by every run)."""
        return self._typechecks.checker()

    async def prepare_typecheck(self, limits: Mapping[str, Any] | None = None) -> None:
        """If a run with `limits` is type-checked and no TypeScript is found, download the pinned
        one now (runtime/host/tsinstall.py, a line on stderr), so that the run's timeoutMs is not spent
        on it (a run does not wait for a download: it would skip its check). For one-shot hosts
        (`codemode-gen run`); `serve --typecheck` downloads at start-up, in the background. A
        failure is not raised: the run reports it (TYPECHECK_UNAVAILABLE)."""
        await self._typechecks.prepare(self.settings.limits, limits)

    # ------------------------------------------------------------------ system prompt

    def capability_ids(self) -> dict[str, str]:
        """configId → the server id scripts import and `requestedCapabilities` accepts."""
        return module_paths_for(self._out.manifest(), self.configs)

    def prompt_servers(self) -> list[Mapping[str, Any]]:
        """Manifest entries (out/ or built in memory) of the configured servers, by server id;
        a configured server known to neither is a stub `{serverId, configId}` (§4.4 deferral)."""
        return self._out.prompt_servers(self._builder.entries)

    def skill_entries(self) -> list[Mapping[str, Any]]:
        """out/'s skills (manifest `skills`), for the prompt."""
        return skill_entries(self._out.manifest())
