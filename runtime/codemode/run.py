"""One run, from the agent's source to its §3.3 response: the path every script takes.

Per run, before the sandbox starts, the host has the script's types erased and its syntax
checked (no server is connected for a script that cannot parse), starts its type check, and
prepares its catalog (connecting the servers it names, within a share of its time that is not
counted against it); then the sandbox runs it against a bridge to the sessions, and the
response is assembled from the sandbox's answer, the bridge's trace and every diagnostic. This
owner holds that order and the deadline arithmetic; each step belongs to the owner it calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.manifest import module_specifier
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.codemode.catalogs import RunCatalogs, Selected
from codemode_gen.runtime.codemode.learning import LearningSink
from codemode_gen.runtime.codemode.typechecks import TypeCheckService, typecheck_notes
from codemode_gen.runtime.host import hints, telemetry, tooltrace, tsinput
from codemode_gen.runtime.host.approval import ApprovalGate
from codemode_gen.runtime.host.approval_request import Approver
from codemode_gen.runtime.host.bridge import Bridge, Connector
from codemode_gen.runtime.host.offload import Offload, OffloadFailed
from codemode_gen.runtime.host.progress import ProgressCallback, ProgressReporter
from codemode_gen.runtime.host.reconcile import is_slow_connect
from codemode_gen.runtime.host.skills import SKILLS_MODULE, SkillSaver
from codemode_gen.runtime.host.telemetry import Telemetry
from codemode_gen.runtime.host.tsinput import Erased, runnable
from codemode_gen.runtime.limits import Limits, LimitsError, TraceMode
from codemode_gen.runtime.sandbox.pool import Sandbox

if TYPE_CHECKING:
    from codemode_gen.runtime.host.resume import Resumable

log = logging.getLogger(__name__)

# Connecting servers slower than this at run start is worth an info diagnostic (CONNECT_TIME)
# when the run then runs out of time: it explains a script timeout that looks too early.
CONNECT_NOTICE_MS = 1000
# The share of a run's timeoutMs the host waits, before the script starts, for the servers it
# names to connect. That wait is not counted in the script's own timeoutMs (its deadline moves
# by it: a cold start of the servers must not eat the script's time), and bounding it keeps the
# answer within 1.5 x timeoutMs (docs/DESIGN.md, "Deadline"). A server still connecting then is
# waited for by the script's first call to it, within the script's time.
CONNECT_WAIT_SHARE = 0.2
# The longest script whose TypeScript is erased on the event loop: erasing is superlinear on
# some inputs (`x!!!…`: ~60 ms for 512 characters), and the loop serves every client and every
# run's watchdog, so anything longer goes to a helper process (runtime/host/offload.py; ~1 ms more).
ERASE_INLINE_MAX_CHARS = 256


class RunPath:
    """Runs scripts through the host's owners; counts the runs in progress."""

    def __init__(
        self,
        configs: dict[str, ServerConfig],
        settings: Settings,
        *,
        trace: TraceMode,
        max_response_chars: int | None,
        catalogs: RunCatalogs,
        typechecks: TypeCheckService,
        learning: LearningSink,
        approval: ApprovalGate,
        skill_saver: SkillSaver | None,
        connector: Connector,
        capability_ids: Callable[[], Mapping[str, str]],
        telemetry: Telemetry,
    ) -> None:
        self.configs = configs
        self.settings = settings
        self.trace = trace
        self.max_response_chars = max_response_chars
        self._catalogs = catalogs
        self._typechecks = typechecks
        self._learning = learning
        self._approval = approval
        self._skill_saver = skill_saver
        self._connector = connector
        self._capability_ids = capability_ids
        self._telemetry = telemetry
        self.in_progress = 0

    async def run(
        self,
        sandbox: Sandbox | None,
        offload: Offload | None,
        code: str,
        limits: Mapping[str, Any] | None,
        requested_capabilities: Iterable[str] | None,
        *,
        progress: ProgressCallback | None,
        gate: tuple[Approver | None, Hashable],
        started: float | None,
        resumable: Resumable | None,
    ) -> resp.Response:
        """`CodeMode.run` (whose docstring says what each argument means)."""
        self.in_progress += 1
        try:
            with self._telemetry.run(
                code, started
            ) as traced:  # its span and metrics (runtime/host/telemetry.py)
                if progress is None:
                    return traced.finish(
                        await self._run(
                            sandbox,
                            offload,
                            code,
                            limits,
                            requested_capabilities,
                            None,
                            gate,
                            started,
                            resumable,
                        )
                    )
                async with ProgressReporter(progress) as reporter:
                    return traced.finish(
                        await self._run(
                            sandbox,
                            offload,
                            code,
                            limits,
                            requested_capabilities,
                            reporter,
                            gate,
                            started,
                            resumable,
                        )
                    )
        finally:
            self.in_progress -= 1

    async def _run(
        self,
        sandbox: Sandbox | None,
        offload: Offload | None,
        code: str,
        limits: Mapping[str, Any] | None,
        requested_capabilities: Iterable[str] | None,
        reporter: ProgressReporter | None,
        gate: tuple[Approver | None, Hashable] = (None, None),
        started: float | None = None,
        resumable: Resumable | None = None,
    ) -> resp.Response:
        if sandbox is None:
            raise RuntimeError("use `async with CodeMode...` before running scripts")
        if not isinstance(code, str):
            raise TypeError("code must be a string of JavaScript or TypeScript")
        if limits is not None and not isinstance(limits, Mapping):
            raise TypeError("limits must be an object (mapping of limit name to integer)")
        try:
            run_limits = Limits.from_json({**dict(self.settings.limits), **dict(limits or {})})
        except LimitsError as exc:
            return resp.not_started(
                diag.diagnostic(
                    diag.DiagnosticCode.INVALID_LIMITS,
                    str(exc),
                    hint="send limits as non-negative integers within the documented ranges, or omit them",
                    path=f"/limits/{exc.key}",
                )
            )
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
        erased = await erase(offload, code, deadline)
        if erased is None:  # erasing alone outlasted the run's timeoutMs
            return resp.not_started(diag.timeout_limit(run_limits.timeoutMs))
        # The worker parses every script before it runs it and reports a SYNTAX_ERROR exactly as
        # the separate check does: that check (a round trip to a worker) is made only where it
        # saves something, a connection to wait for; TypeScript also keeps it (a script the
        # TypeScript grammar misread runs as written, `runnable`).
        requested_capabilities = list(requested_capabilities or [])
        # Types learned from earlier runs' calls (learning.py) are in this run's catalog.
        await self._learning.settled()
        selected: Selected | None = None
        if not erased.diagnostics and erased.code is code and resumable is None:
            selected = self._catalogs.select(code, requested_capabilities)
        checked_by_run = selected is not None and self._catalogs.nothing_to_connect(selected)
        if checked_by_run:
            script = code
        else:
            script, refused = await runnable(
                code, lambda text: sandbox.check_syntax(text, deadline=deadline), erased
            )
            if refused:
                return resp.not_started(*refused)
        # Type check (limits.typecheck, serve --typecheck) of the agent's own source, while the
        # servers connect; its type errors are warnings and the run goes ahead regardless.
        typecheck = self._start_typecheck(code, run_limits, deadline)
        # Connecting is not counted in the script's timeoutMs (CONNECT_WAIT_SHARE).
        wait_s = run_limits.timeoutMs / 1000 * CONNECT_WAIT_SHARE
        connecting = time.monotonic()
        prepared = await self._catalogs.prepare(
            script,
            requested_capabilities,
            deadline - connecting,
            lazy_budget_s=wait_s,
            # no await since `select`: out/ and the connections are as it saw them
            selected=selected if checked_by_run else None,
        )
        catalog = prepared.for_run()
        waited = time.monotonic() - connecting
        deadline += min(waited, wait_s)
        if typecheck is not None:
            catalog.diagnostics[:0] = typecheck_notes(await typecheck, limits)
        if time.monotonic() >= deadline:  # connecting (beyond the wait not counted) used it all
            return resp.not_started(
                *catalog.diagnostics,
                diag.prepare_limit(
                    run_limits.timeoutMs, round((time.monotonic() - started) * 1000)
                ),
            )
        observed: list[asyncio.Future[None]] = []  # this run's learning and recording work
        run_token = object()  # whose recorded calls are whose (their failures are its diagnostics)
        bridge = Bridge(
            catalog,
            self._connector,
            self.configs,
            max_tool_calls=run_limits.maxToolCalls,
            deadline=deadline,
            on_call_done=None if reporter is None else reporter.call_done,
            on_result=functools.partial(self._learning.on_result, run_token, observed),
            approval=self._approval,
            approve=gate[0],
            approval_session=gate[1],
            on_note=None if reporter is None else reporter.note,
            redact_patterns=self.settings.redact_patterns,
            skill_writer=self._skill_saver,
            journal=resumable,
        )
        modules = prepared.modules
        if resumable is not None:
            resumable.begin(deadline)
            # It may end to ask through input_required: its span and metrics say so, not "ok".
            telemetry.pause_when(lambda: resumable.suspension is not None)
        # The bridge closes after the sandbox, both to the end even if this task is cancelled.
        try:
            sandboxed = await telemetry.traced(
                bridge.serve(
                    sandbox.run(
                        script,
                        modules,
                        bridge.host_call,
                        run_limits,
                        deadline=deadline,
                        hooks=resumable,
                    )
                ),
                telemetry.SPAN_EXECUTE,
            )
        finally:
            # What the run kept to learn from is learned now, after its script, beside its
            # answer; the next run waits for it (`settled`, above).
            self._learning.release(run_token)
        # What the run records, and learns from large results, is done before it answers: its
        # calls are in fixtures/ (or it says why not), and the next run sees the types.
        if observed:
            await asyncio.gather(*observed, return_exceptions=True)
        if checked_by_run and refused_by_parse(sandboxed):
            return resp.not_started(*sandboxed["diagnostics"])  # as the separate check answers
        if resumable is not None and resumable.suspension is not None:
            return resp.not_started()  # the caller answers with the suspension instead
        diagnostics = sandboxed.get("diagnostics", [])
        if resumable is not None:
            diagnostics = [*diagnostics, *resumable.diagnostics(diagnostics)]
        if bridge.connecting:  # the script ran out of time waiting for a server to connect
            diagnostics = [
                diag.waiting_for_connect(d, sorted(bridge.connecting)) for d in diagnostics
            ]
        if hints.needs_explaining(diagnostics):  # a failed run only: off the event loop (a parse)
            diagnostics = await asyncio.to_thread(hints.explain, diagnostics, code, script, catalog)
        recording: list[diag.Diagnostic] = []
        if self._learning.recorder is not None:
            recording = [
                diag.diagnostic(
                    diag.DiagnosticCode.RECORDING_FAILED,
                    note,
                    severity="warning",
                    hint="the calls themselves succeeded; fix what the message names (fixtures/ writable,"
                    " the tool recorded with `codemode-gen record`) and run the script again to record them",
                )
                for note in await self._learning.flush(run_token)
            ]
        spent_ms = round(waited * 1000)
        timed_out = diag.hit_limit(sandboxed.get("diagnostics", []), "timeoutMs")
        if not timed_out:  # a slow connect the script then waited out explains nothing (§3.3.3)
            catalog.diagnostics[:] = [d for d in catalog.diagnostics if not is_slow_connect(d)]
        if spent_ms >= CONNECT_NOTICE_MS and timed_out:
            # Only when it explains something: the run ran out of time after a slow connect.
            uncounted = (
                "not counted"
                if waited <= wait_s
                else f"{round(wait_s * 1000)} ms of it not counted"
            )
            catalog.diagnostics.append(
                diag.diagnostic(
                    diag.DiagnosticCode.CONNECT_TIME,
                    f"connecting servers took {spent_ms} ms before the script started, {uncounted} in its "
                    f"timeoutMs ({run_limits.timeoutMs} ms)",
                    severity="info",
                    hint="run it again: the servers stay connected, so the next run has its whole timeoutMs "
                    "for the script (or raise limits.timeoutMs)",
                )
            )
        ended = diagnostics
        mode = run_limits.trace or self.trace
        tool_trace, tool_summary = tooltrace.shape_trace(bridge.trace, bridge.counts, mode)
        return await resp.build_response_async(
            sandboxed.get("logs", []),
            sandboxed.get("result"),
            [
                *catalog.diagnostics,
                *ended,
                *bridge.diagnostics(full_trace=mode == "full"),
                *recording,
            ],
            tool_trace,
            tool_summary=tool_summary,
            max_chars=run_limits.maxResponseChars
            if run_limits.maxResponseChars is not None
            else self.max_response_chars,
            result_checked=True,  # the sandbox's response is build_response's: UTF-8-safe
        )

    def _start_typecheck(
        self, code: str, limits: Limits, deadline: float
    ) -> asyncio.Task[list[diag.Diagnostic]] | None:
        """This run's type check (None when off), told which modules codemode.d.ts lacks."""
        if not self._typechecks.wanted(limits):
            return None
        # Servers out/ lacks are built in memory: importing one is no error, only unchecked.
        try:
            modules = {module_specifier(sid) for sid in self._capability_ids().values()}
        except UserError:  # an unreadable out/: prepare() reports it
            modules = set()
        if (
            self._skill_saver is not None
        ):  # @codemode/skills (saveSkill) is not in codemode.d.ts: unchecked
            modules.add(SKILLS_MODULE)
        return self._typechecks.start(code, limits, deadline, modules)

    def _expired(self, resumable: Resumable, limits: Limits) -> resp.Response:
        """A retry that came after its run's timeoutMs ran out: nothing runs, the calls that
        waited for the answer are denied, the earlier calls are in the trace."""
        waiting = resumable.expired_trace()
        timeout = diag.timeout_limit(limits.timeoutMs)
        timeout["message"] = (
            f"{timeout['message']} while waiting for the user's answer to the approval "
            "request: the calls that waited were not sent"
        )
        mode = limits.trace or self.trace
        tool_trace, tool_summary = tooltrace.shape_trace(waiting, counts(waiting), mode)
        return resp.build_response(
            [],
            None,
            [timeout],
            tool_trace,
            tool_summary=tool_summary,
            max_chars=limits.maxResponseChars
            if limits.maxResponseChars is not None
            else self.max_response_chars,
        )


async def erase(offload: Offload | None, code: str, deadline: float) -> Erased | None:
    """`erase_types(code)` without stalling the event loop: inline for a script of at most
    ERASE_INLINE_MAX_CHARS, else in a helper process until `deadline` (None when that passed).
    A helper that fails is a bug: the script then runs as written, as erase_types does."""
    if len(code) <= ERASE_INLINE_MAX_CHARS or offload is None:
        return tsinput.erase_types(code)
    try:
        return await offload.erase(code, deadline)
    except TimeoutError:
        return None
    except OffloadFailed as exc:
        log.error("erasing TypeScript types failed (%s); running the script as written", exc)
        return Erased(code)


def refused_by_parse(sandboxed: Mapping[str, Any]) -> bool:
    """A run the worker ended before it started: its script does not parse."""
    diagnostics = sandboxed.get("diagnostics") or []
    return len(diagnostics) == 1 and diagnostics[0].get("code") == diag.DiagnosticCode.SYNTAX_ERROR


def counts(entries: list[resp.TraceEntry]) -> tooltrace.CallCounts:
    counts = tooltrace.CallCounts()
    for entry in entries:
        counts.add(str(entry.get("serverId")), str(entry.get("toolName")), entry.get("ok") is True)
    return counts
