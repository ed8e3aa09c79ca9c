"""The one CodeMode of a serve process (stdio or --http), and what to say when there is none.

Both transports share this: loading the CodeMode with serve's options (codemode_gen/host_options.py)
and checking its config without importing the runtime (`load_host`, `check_config`: a
client gives a server seconds to answer `initialize`), the tool's description or the reason
there is none (`tool_description`), the host's start-up in steps and its shutdown
(`ServeHost`), and serve's stderr lines (`log_line`: the client's log view). The MCP handlers
that use it are runtime/frontends/serve.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen import gcpolicy
from codemode_gen.errors import UserError
from codemode_gen.host_options import HostOptions
from codemode_gen.runtime.frontends.admission import Ticket
from codemode_gen.runtime.frontends.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME
from codemode_gen.runtime.host import telemetry, telemetry_serve
from codemode_gen.runtime.jsonsafe import safe_name

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode
    from codemode_gen.runtime.frontends.input_required import StateSealer

__all__ = [
    "ServeHost",
    "check_config",
    "load_host",
    "log_line",
    "restart_hint",
    "tool_description",
]

# Bounds one stderr line about an unexpected failure: a summary for the client's log view, not
# a dump (a traceback could carry a script's data; stdout, the protocol, never gets any of it).
MAX_LOG_LINE_CHARS = 500


def log_line(text: str) -> None:
    """One line on stderr: what the client's log view shows (white space folded, then cut and
    made terminal-safe as every script-chosen name is: `safe_name`). A line written during a
    run ends with its trace id (runtime/host/telemetry_serve.py), which leads to the run's trace."""
    line = safe_name(" ".join(text.split()), MAX_LOG_LINE_CHARS - 1)
    with contextlib.suppress(OSError, ValueError):
        print(
            f"codemode-gen serve: {line}{telemetry_serve.log_suffix()}", file=sys.stderr, flush=True
        )


def load_host(
    config: Path, out: Path | None, options: HostOptions = HostOptions()
) -> tuple[CodeMode | None, UserError | None]:
    """The CodeMode for `config`, or the configuration error that prevents it."""
    from codemode_gen.runtime.codemode import CodeMode

    try:
        return CodeMode.from_config(config, out=out, **options.codemode_kwargs()), None
    except UserError as exc:
        return None, exc


def check_config(config: Path) -> UserError | None:
    """What `load_host` would refuse, found without importing the runtime: `initialize` says
    it in the instructions and must not wait for more (the same files CodeMode.from_config reads)."""
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.mcp_json import load_config

    try:  # quietly: load_host says the notes when it loads the same files
        load_config(config, load_project_settings(config, report=lambda line: None))
    except UserError as exc:
        return exc
    return None


def restart_hint(problem: UserError) -> str:
    fix = problem.hint or f"fix {problem.message.split(': ', 1)[0]}"
    return f"{fix}; then restart this MCP server (reconnect it in your MCP client)"


def tool_description(
    cm: CodeMode | None,
    problem: UserError | None,
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    budget: int = DEFAULT_PROMPT_BUDGET,
    on_error: Callable[[UserError], None] | None = None,
) -> str:
    """The description served for the one tool: the system prompt, or what prevents it.

    An unreadable out/ makes every run fail the same way, so the description says that rather
    than silently leaving the declarations out; `on_error` gets the error (for stderr).
    """
    if problem is None and cm is not None:
        from codemode_gen.runtime.frontends.prompt import system_prompt

        try:
            return system_prompt(cm, tool_name=tool_name, budget=budget)
        except UserError as exc:
            if on_error is not None:
                on_error(exc)
            return _broken_description(exc, tool_name)
    assert problem is not None
    return (
        "Code Mode (run JavaScript against MCP servers) is NOT available.\n\n"
        f"Problem: {problem.message}\n"
        f"Fix: {restart_hint(problem)}.\n\n"
        f"Until then every `{tool_name}` call returns this as a CONFIG_ERROR diagnostic. "
        "Tell the user what is wrong; do not retry.\n"
    )


def _broken_description(problem: UserError, tool_name: str) -> str:
    """The description when out/ (not the config) is unreadable: runs would fail the same way."""
    return (
        "Code Mode (run JavaScript against MCP servers) is NOT available: codemode-gen cannot "
        "read its generated modules.\n\n"
        f"Problem: {problem.message}\n"
        f"Fix: {problem.hint or 'run `codemode-gen generate`'}.\n\n"
        f"Until then every `{tool_name}` call returns this as a CONFIG_ERROR diagnostic.\n"
    )


class ServeHost:
    """The one CodeMode of a serve process, shared by all its clients, and what is wrong when
    there is none; the handlers of `build_server` use nothing else.

    It comes up in steps, so that no step waits for a later one: `check()` reads the config
    (for `initialize`'s instructions); `describe()` (tools/list) constructs the CodeMode, which
    needs no sandbox (the description is built from out/manifest.json); `start()` enters it in a
    task of its own — the sandbox worker pool, then the background connections of the servers
    out/ lacks — and `ready()` (tools/call) awaits that. `announce`: tell the clients that
    listed tools when a background server joins (stdio; a stateless HTTP server has no channel
    outside a request to say it on).
    """

    def __init__(
        self,
        config: Path,
        out: Path | None,
        *,
        tool_name: str = DEFAULT_TOOL_NAME,
        prompt_budget: int = DEFAULT_PROMPT_BUDGET,
        options: HostOptions = HostOptions(),
        announce: bool = True,
    ) -> None:
        self.config = config
        self.out = out
        self.tool_name = tool_name
        self.prompt_budget = prompt_budget
        self.options = options
        self.announce = announce
        self.problem: UserError | None = None  # set: every run is a CONFIG_ERROR saying it
        self.listeners: list[
            Any
        ] = []  # the client session(s) that listed tools: told when the list changes
        self._cm: CodeMode | None = None
        self._entered: CodeMode | None = None  # the CodeMode while it is entered (runs go to it)
        self._task: asyncio.Task[None] | None = None  # holds the CodeMode entered (anyio: one task)
        self._ready = asyncio.Event()  # entered, or failed to: ready() returns
        self._stop = asyncio.Event()
        self._closing = False
        self._reported: set[str] = (
            set()
        )  # configuration errors already on stderr (once each, not per request)
        self._sealer: StateSealer | None = None

    # ------------------------------------------------------------------ start-up

    def check(self) -> UserError | None:
        """Read the config (not the runtime); a problem goes to stderr and serving goes on."""
        self.problem = check_config(self.config)
        if self.problem is not None:
            self.report(self.problem)
            log_line("serving anyway: the tool's description and every run report this error")
        return self.problem

    def instructions(self) -> str:
        if self.problem is None:
            return f"Use the {self.tool_name} tool: write JavaScript that imports @codemode/servers/* modules."
        return f"codemode-gen cannot serve: {self.problem.message} ({restart_hint(self.problem)})."

    def codemode(self) -> CodeMode | None:
        """The CodeMode, constructed on first need (imports the runtime); None when the config
        or its start failed (`problem` says why)."""
        if self._cm is None and self.problem is None:
            self._cm, problem = load_host(self.config, self.out, self.options)
            if problem is not None:  # the files changed since check(): as if check() had failed
                self.problem = problem
                self.report(problem)
            elif self._cm is not None:  # its runs' spans name the tool; a line per run on stderr
                self._cm.telemetry.tool_name = self.tool_name
                self._cm.telemetry.run_log = log_line
        return self._cm if self.problem is None else None

    def start(self) -> None:
        """Enter the CodeMode in the background, once (idempotent; no-op while closing)."""
        if self._task is None and not self._closing:
            self._task = asyncio.ensure_future(self._hold())

    async def ready(self) -> CodeMode | None:
        """The entered CodeMode, once it is (starting it if nothing did yet); None when there is
        none: `problem` says why, or the server is shutting down."""
        self.start()
        await self._ready.wait()
        return self._entered

    @property
    def is_ready(self) -> bool:
        return self._entered is not None

    async def _hold(self) -> None:
        """Enter the CodeMode, serve until aclose(), exit it: in one task, as anyio's task groups
        (the MCP sessions) require."""
        entered = False
        try:
            cm = self.codemode()
            if cm is None:
                return
            async with cm:
                entered = True
                try:
                    background = cm.connect_in_background()
                except UserError as exc:  # unreadable out/: every run says so
                    self.report(exc)
                    background = []
                self._entered = cm
                self._ready.set()
                announcer = (
                    asyncio.ensure_future(self._announce(background))
                    if self.announce and background
                    else None
                )
                # A long-running host: no automatic full collection in the middle of a run's
                # payload; the host collects between runs (codemode_gen/gcpolicy.py).
                gcpolicy.install()
                collector = asyncio.ensure_future(
                    gcpolicy.collect_periodically(lambda: cm.runs_in_progress > 0)
                )
                try:
                    await self._stop.wait()
                finally:
                    self._entered = None
                    for task in (announcer, collector):
                        if task is not None:
                            task.cancel()
                            await asyncio.gather(task, return_exceptions=True)
        except Exception as exc:
            if entered:  # closing the sessions or the sandbox failed: the process is ending anyway
                log_line(f"shutdown: unexpected {type(exc).__name__}: {exc}")
            else:  # e.g. the sandbox's worker cannot start: say so, keep serving
                self.problem = UserError(
                    f"cannot start the Code Mode host: {type(exc).__name__}: {exc}",
                    hint="check that codemode-gen is installed completely (pip install -e .)",
                )
                self.report(self.problem)
        finally:
            self._entered = None
            self._ready.set()

    async def _announce(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Tell a client that already listed tools when a background server joins (its
        declarations are now in the description)."""
        for next_done in asyncio.as_completed(tasks):
            try:
                await next_done
            except Exception:
                continue  # the next run that needs it reports why
            for session in list(self.listeners):
                with contextlib.suppress(Exception):
                    await session.send_tool_list_changed()

    async def aclose(self) -> None:
        """Exit the CodeMode (upstream servers stopped, sandbox workers reaped); idempotent."""
        self._closing = True
        self._stop.set()
        task = self._task
        if task is None:
            self._ready.set()  # never started: a late ready() answers instead of waiting forever
            return
        if not self._ready.is_set():
            task.cancel()  # still entering: CodeMode.__aenter__ undoes what it started
        await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------------ per request

    def report(self, exc: UserError) -> None:
        if exc.message not in self._reported:
            self._reported.add(exc.message)
            print(exc.render(), file=sys.stderr, flush=True)

    def expired(self, ticket: Ticket) -> None:
        """A run that waited for admission past its deadline (answered without running): its
        metrics, as a run that timed out (runtime/host/telemetry.py)."""
        cm = self.codemode()
        if cm is not None:
            waited = max(0.0, time.monotonic() - ticket.queued_at)
            metrics = cm.telemetry.metrics
            metrics.queue_wait.observe(waited, "admission")
            metrics.runs.add(telemetry.TIMEOUT)
            metrics.run_duration.observe(waited, telemetry.TIMEOUT)

    def run_slots(self) -> int:
        """How many runs this host runs at once: its sandbox's worker cap (--max-workers, else
        [sandbox] max_workers, else two per CPU), as CodeMode sizes its pool."""
        if self.options.max_workers is not None:
            return self.options.max_workers
        cm = self.codemode()
        if cm is not None and cm.settings.max_workers is not None:
            return cm.settings.max_workers
        from codemode_gen.runtime.sandbox.pool import default_max_workers

        return default_max_workers()

    def run_timeout_ms(self, limits: Mapping[str, Any] | None) -> int | None:
        """The timeoutMs a run asking for `limits` gets (the project's [limits] under them);
        None when it cannot start anyway (invalid limits, a broken config): it is answered at
        once without a worker."""
        cm = self.codemode()
        if cm is None:
            return None
        from codemode_gen.runtime.limits import Limits, LimitsError

        try:
            return Limits.from_json({**dict(cm.settings.limits), **dict(limits or {})}).timeoutMs
        except (LimitsError, TypeError, ValueError):
            return None

    def sealer(self) -> StateSealer:
        """What seals the state of runs waiting for approval (MCP 2026-07-28), made on first use."""
        if self._sealer is None:
            from codemode_gen.runtime.frontends.input_required import StateSealer

            self._sealer = StateSealer(self.options.state_secret)
        return self._sealer

    def describe(self) -> str:
        """The tool's description; never waits (no sandbox, no upstream server)."""
        try:
            return tool_description(
                self.codemode(),
                self.problem,
                tool_name=self.tool_name,
                budget=self.prompt_budget,
                on_error=self.report,
            )
        except Exception as exc:  # a bug: still answer, with the reason on stderr
            log_line(f"tools/list: unexpected {type(exc).__name__}: {exc}")
            return (
                f"Code Mode: the description could not be built ({type(exc).__name__}: {exc}). "
                f'`{self.tool_name}` calls may still work: send {{"code": "<JavaScript ES module>"}}.\n'
            )
