"""The host side of every tool call a script makes (the `host_call` of one run).

The generated bindings all funnel into `callTool(serverId, toolName, input)`; this is where
that request meets the live world: the server id is resolved through the run's catalog, the
tool is checked against the live tool list (not out/, which may be stale), input is validated
before anything is sent, the result is unwrapped by the one §5.3.2 implementation, and every
failure becomes an `@codemode/errors` class with a hint, so the script can catch it and carry on
(§10: only limits end a run). For a server with `unbox = true`, a tool whose declared
outputSchema boxes its value (x-dedalus-box, FastMCP's wrapping) returns the boxed field's value,
taken after the §5.3.2 rules; a result without that field goes to the script unchanged, with one
UNBOX_MISMATCH warning per tool and run.

Approval (issue 12, runtime/host/approval.py): after the input is valid and before anything is
sent, the host's `ApprovalGate` decides whether the call may go out (its policy from
codemode.toml and the tool's annotations; asking a person when it says so, the wait counted
within the run's timeoutMs, a progress note meanwhile). A call it denies is never sent: the
script gets a ToolCallError with code APPROVAL_DENIED and goes on (§10). Every call that reached
the gate has its decision in its trace entry (`"approval"`: allowed, approved,
approved-for-session, approved-for-run, denied), beside §3.3.2's fields; calls refused earlier
(unknown tool, invalid input) have none. The run's own approvals (a person's yes to every further
call of a tool in this run) live here, in `approved_for_run`, and end with the run.

The trace records which tool ran, how long, and whether it worked, never inputs or outputs
(§3.3.2): traces end up in logs and transcripts where tool data must not leak. A failed entry's
`error` is the error class and what went wrong: for a tool error (isError) or a JSON-RPC error
the server's own message, with the server's secrets and codemode.toml's `redact` patterns
replaced, cut to MAX_TRACE_ERROR_CHARS (`trace_error`). `counts` tallies every call per tool
(the `toolSummary` of a response that lists only the failed ones, tooltrace.shape_trace). Each finished
call is also told to `on_call_done` (the run's progress reporter, runtime/host/progress.py), by the
same sanitised names.

A run ends by `serve`: the sandbox's run and then `aclose` (cancel the calls still in flight,
§7.4) in a task of their own, which a cancelled caller cancels exactly once
(`mcp_session.cancel_once`), so the worker is killed and every call in flight gets its
notifications/cancelled upstream even when the caller is cancelled again and again, as the MCP
SDK's server does through an anyio cancel scope when its client cancels the codemode.run request.

Who does what: this module numbers the calls, resolves the server and tool, validates the
input, asks the approval gate and records the outcome; `upstream.Upstream` connects the servers
and sends the call (its failures become replies there); `call_replies` makes every reply and the
trace entry's `error` text; `tooltrace.CallLog` keeps the trace, counts and notices;
`skill_calls` serves `saveSkill`.

Everything here is untrusted from both sides. Script-chosen names are sanitised and cut before
they enter the trace or a message (`jsonsafe.safe_name`); the trace keeps MAX_TRACE_ENTRIES
entries. What crosses the boundary is bounded: an input over MAX_INPUT_BYTES or nested deeper
than MAX_JSON_DEPTH (refused by the worker, re-checked here) is a SchemaValidationError, a
result nested deeper is a ToolCallError, each also reported once per run as a BRIDGE_LIMIT
diagnostic. Validation of a large input runs in a thread with a time budget (validation.py), so
it never stalls the event loop, other runs or the run's deadline.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from codemode_gen.client.mcp_session import cancel_once
from codemode_gen.config import ServerConfig
from codemode_gen.generator.redact import Redactor
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host import telemetry_calls
from codemode_gen.runtime.host.approval import DENIED_CODE, ApprovalGate, denial_message
from codemode_gen.runtime.host.approval_request import ApprovalRequest, Approver
from codemode_gen.runtime.host.call_replies import error_reply, server_not_found, tool_not_found
from codemode_gen.runtime.host.catalog import Catalog, ServerView, ToolView
from codemode_gen.runtime.host.skill_calls import SKILLS_HOST_ID, SkillWriter, save_skill
from codemode_gen.runtime.host.tooltrace import CallCounts, CallLog
from codemode_gen.runtime.host.upstream import Connector, Upstream
from codemode_gen.runtime.host.validation import prepare_arguments, prepare_arguments_async
from codemode_gen.runtime.host.validation_errors import InputInvalid, rejected_input
from codemode_gen.runtime.limits import SandboxLimitExceeded
from codemode_gen.runtime.response import TraceEntry
from codemode_gen.runtime.sandbox.protocol import HostReply

__all__ = ["Bridge", "Journal", "Logged"]

# Bounds how long a cancelled run's caller waits for the run to wind down (kill the worker, cancel
# the calls in flight, send their notifications/cancelled: milliseconds) before it goes on; the
# rest goes on in the background.
TEARDOWN_WAIT = 2.0
log = logging.getLogger(__name__)
T = TypeVar("T")


class Journal(Protocol):
    """What the bridge uses of a resumable run (`runtime.resume.Resumable`)."""

    async def enter(self, seq: int, request: Mapping[str, Any]) -> Logged | None: ...

    def leave(self, seq: int, reply: HostReply, entry: Mapping[str, Any]) -> None: ...

    def approver_for(self, seq: int) -> Approver: ...

    #: (config id, tool name) approved for the rest of the run (approval.FOR_RUN), in earlier
    #: rounds too: the run's state carries it to whichever instance resumes the run.
    approved_for_run: set[tuple[str, str]]


class Logged(Protocol):
    """A call answered from a journal: the reply's JSON text and the trace entry of then."""

    @property
    def reply(self) -> str: ...

    @property
    def entry(self) -> dict[str, Any]: ...


class Bridge:
    """Serves `{"op": "call", ...}` requests for one run."""

    def __init__(
        self,
        catalog: Catalog,
        connector: Connector,
        configs: dict[str, ServerConfig],
        *,
        max_tool_calls: int | None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_call_done: Callable[[str, str], None] | None = None,
        on_result: Callable[[str, ToolView, Any, dict[str, Any], int, bool], Awaitable[None]]
        | None = None,
        approval: ApprovalGate | None = None,
        approve: Approver | None = None,
        approval_session: Hashable = None,
        on_note: Callable[[str], None] | None = None,
        redact_patterns: Iterable[str] = (),
        journal: Journal | None = None,
        skill_writer: SkillWriter | None = None,
    ) -> None:
        self.catalog = catalog
        # `serve --skills-writable`: writes a skill a person approved (runtime/host/skills.py
        # `save_skill_call`); None: `saveSkill` is not offered (a call is ServerNotFound).
        self.skill_writer = skill_writer
        self.connector = connector
        self.configs = configs
        self.max_tool_calls = max_tool_calls
        # When the run's timeoutMs runs out (`time.monotonic()` seconds): validation never
        # outlasts it.
        self.deadline = deadline
        self.calls = 0
        self._seq = 0  # calls received, numbered in the order the script made them
        # A run that may wait for answers between two requests (runtime/host/resume.py): answers
        # the calls an earlier round made, keeps the others' replies, and asks through itself.
        self.journal = journal
        # The trace entries, counts and notices of the run's calls (runtime/host/tooltrace.py).
        self.log = CallLog()
        self._clock = clock
        self._closed = False
        # Told (server id, tool name: sanitised) of every call that finished, whatever its
        # outcome; never of one cut short by the end of the run. Must not block or raise.
        self._on_call_done = on_call_done
        # The host's approvals (None: every call is sent, as for a bridge without a host); this
        # run's own approver, if any, replaces the host's; `approval_session` keys ask-once.
        self.approval = approval
        self.approve = approve
        self.approval_session = approval_session
        # (config id, tool name) a person approved for the rest of this run (approval.FOR_RUN);
        # a resumable run's is its journal's (kept in its sealed state across rounds/instances)
        self.approved_for_run: set[tuple[str, str]] = (
            journal.approved_for_run if journal is not None else set()
        )
        # Told an ad-hoc progress message (the run's reporter's `note`): must not block or raise.
        self._on_note = on_note
        # codemode.toml's `redact` regexes: with each server's own secrets, redacted from the
        # server's text in trace entries (`Upstream.server_text`); one Redactor per server, made on need.
        self.redact_patterns = tuple(redact_patterns)
        # Sends the calls to their servers (runtime/host/upstream.py), `on_result` told of each
        # successful one.
        self.upstream = Upstream(
            connector, configs, self.log, on_result=on_result, redact_patterns=self.redact_patterns
        )

    @property
    def trace(self) -> list[TraceEntry]:
        return self.log.trace

    @property
    def trace_dropped(self) -> int:
        return self.log.trace_dropped

    @property
    def counts(self) -> CallCounts:
        return self.log.counts

    @property
    def connecting(self) -> set[str]:
        """Servers a call was waiting for to connect when the run ended."""
        return self.upstream.connecting

    # ------------------------------------------------------------------ entry point

    async def host_call(self, request: dict[str, Any]) -> HostReply:
        """One call from the sandbox; returns the host reply (DESIGN.md, sandbox ⇄ host).

        Calls are numbered in the order they arrive, which is the order the script made them
        (one pipe, one task each, started in turn): with a `journal` (runtime/host/resume.py) a call
        an earlier round of the run made is answered from it, never sent again."""
        self._seq += 1
        seq = self._seq
        journal = self.journal
        if journal is None:
            return (await self._serve_call(seq, request))[0]
        logged = await journal.enter(
            seq, request if isinstance(request, dict) else {"request": str(request)}
        )
        if logged is not None:
            return self._replayed(logged.reply, logged.entry)
        reply, entry = await self._serve_call(seq, request)
        journal.leave(seq, reply, entry or {})
        return reply

    def _replayed(self, reply_text: str, entry: dict[str, Any]) -> HostReply:
        """A call answered from the journal: the reply the script got the first time, and the
        trace entry it made then."""
        self.calls += 1
        self.log.replayed(entry)
        reply: HostReply = json.loads(reply_text)
        return reply

    async def _serve_call(
        self, seq: int, request: dict[str, Any]
    ) -> tuple[HostReply, TraceEntry | None]:
        """`host_call` itself: the reply and the call's trace entry (None: the call made none)."""
        if not isinstance(request, dict) or request.get("op") != "call":
            op = request.get("op") if isinstance(request, dict) else request
            return error_reply(
                "ToolCallError",
                f"unsupported host request {jsonsafe.safe_name(op, 40)!r}",
                "call tools through the generated bindings of @codemode/servers/*",
            ), None
        raw_server, raw_tool = request.get("serverId", ""), request.get("toolName", "")
        # Lookups use the names as given; the trace and every message get them sanitised and
        # cut (a script chooses them: lone surrogates, escape sequences, megabytes).
        server_id = raw_server if isinstance(raw_server, str) else str(raw_server)
        tool_name = raw_tool if isinstance(raw_tool, str) else str(raw_tool)
        shown_server, shown_tool = jsonsafe.safe_name(server_id), jsonsafe.safe_name(tool_name)
        if self._closed:  # a call that raced the end of the run is never dispatched
            return error_reply(
                "ToolCallError",
                "the run has ended",
                "nothing to do",
                serverId=shown_server,
                toolName=shown_tool,
            ), None
        self.calls += 1
        if self.max_tool_calls is not None and self.calls > self.max_tool_calls:
            self._record(shown_server, shown_tool, None, "SandboxLimitError: maxToolCalls")
            raise SandboxLimitExceeded(
                "maxToolCalls",
                self.max_tool_calls,
                f"tool call limit reached: at most {self.max_tool_calls} tool calls per run (limits.maxToolCalls)",
            )
        started = self._clock()
        # What the approval gate decided for this call; "pending" while a person is asked.
        gate: dict[str, str] = {}
        try:
            reply = await telemetry_calls.traced_call(
                self._call(seq, server_id, tool_name, request, gate),
                shown_server,
                shown_tool,
                gate,
                request,
                lambda text: self.redact_text(server_id, text),
            )
        except (
            asyncio.CancelledError
        ):  # the run ended (timeout, limit) while the call was in flight
            if gate.get("approval") == "pending":  # never sent: the run ended before an answer
                self._record(
                    shown_server,
                    shown_tool,
                    started,
                    "ToolCallError: the run ended while waiting for approval",
                    approval="denied",
                )
            else:
                self._record(
                    shown_server,
                    shown_tool,
                    started,
                    "ToolCallError: cancelled when the run ended",
                    approval=gate.get("approval"),
                )
            raise
        error = reply.get("error") if not reply.get("ok") else None
        entry = self._record(
            shown_server,
            shown_tool,
            started,
            error.get("_summary") if error else None,
            approval=gate.get("approval"),
        )
        if error:
            error.pop("_summary", None)
        if self._on_call_done is not None:
            try:
                self._on_call_done(shown_server, shown_tool)
            except Exception as exc:  # progress is a courtesy: it never fails a call
                log.debug("on_call_done failed: %s: %s", type(exc).__name__, exc)
        return reply, entry

    async def serve(self, run: Awaitable[T]) -> T:
        """Await the sandbox's `run` of this bridge's script, then `aclose`, in a task of their
        own that a cancelled caller cancels exactly once: the teardown (killing the worker,
        cancelling the calls in flight, their notifications/cancelled) then runs to its end
        however often the caller is cancelled meanwhile (see `mcp_session.cancel_once`)."""

        async def whole() -> T:
            try:
                return await run
            finally:
                await self.aclose()

        return await cancel_once(whole(), grace=TEARDOWN_WAIT)

    async def aclose(self) -> None:
        """Cancel calls still running when the run ends (timeout, limit, script finished early)."""
        self._closed = True
        await self.upstream.cancel_inflight()

    def diagnostics(self, *, full_trace: bool = True) -> list[Diagnostic]:
        """What the run's response should say about the bridge (`CallLog.diagnostics`)."""
        return self.log.diagnostics(full_trace=full_trace)

    def _record(
        self,
        server_id: str,
        tool_name: str,
        started: float | None,
        error: str | None,
        *,
        approval: str | None = None,
    ) -> TraceEntry:
        duration = 0 if started is None else max(0, round((self._clock() - started) * 1000))
        return self.log.record(server_id, tool_name, duration, error, approval=approval)

    # ------------------------------------------------------------------ steps

    def redact_text(self, server_id: str, text: str) -> str:
        """`text` with the secrets of the server `server_id` names and codemode.toml's `redact`
        patterns replaced (tool inputs and outputs telemetry records when told to)."""
        view = self.catalog.servers.get(server_id)
        config = (
            self.configs.get(view.config_id)
            if view is not None and view.config_id is not None
            else None
        )
        redactor = (
            Redactor.for_server(config, self.redact_patterns)
            if config is not None
            else Redactor(None, self.redact_patterns)
        )
        return redactor.text(text) if redactor else text

    async def _call(
        self,
        seq: int,
        server_id: str,
        tool_name: str,
        request: dict[str, Any],
        gate: dict[str, str],
    ) -> HostReply:
        if (
            server_id == SKILLS_HOST_ID
            and self.skill_writer is not None
            and server_id not in self.catalog.servers
        ):
            approve = self.journal.approver_for(seq) if self.journal is not None else self.approve
            return await save_skill(
                self.skill_writer,
                self.approval,
                tool_name,
                request,
                gate,
                approve=approve,
                session=self.approval_session,
                deadline=self.deadline,
                on_wait=self._waiting,
            )
        view = self.catalog.servers.get(server_id)
        if view is None or view.config_id is None:
            return server_not_found(server_id, view, [v.server_id for v in self.catalog.visible()])
        config = self.configs[view.config_id]
        failure = await self.upstream.ensure_live(view)
        if failure is not None:
            return failure
        tool = view.tools.get(tool_name)
        if tool is None:
            return tool_not_found(view, tool_name, blocked=tool_name in config.blocklist)
        try:
            rejected = request.get("inputRejected")
            if rejected is not None:  # the worker refused to forward it (size or depth)
                raise rejected_input(tool.input_schema, tool_name, tool.export_name, rejected)
            if "input" in request:
                arguments = await prepare_arguments_async(
                    tool.input_schema,
                    tool_name,
                    tool.export_name,
                    request["input"],
                    deadline=self.deadline,
                )
            else:
                arguments = prepare_arguments(tool.input_schema, tool_name, tool.export_name)
        except InputInvalid as exc:
            error = exc.payload()
            if exc.refused:
                self.log.notice(
                    f"input:{exc.refused}",
                    f"a tool input was refused at the sandbox boundary: {exc.message}",
                    exc.hint,
                )
            error["serverId"] = view.server_id
            error["_summary"] = (
                f"SchemaValidationError at {exc.path or '(root)'}: expected {exc.expected}"
            )
            return {"ok": False, "error": error}
        if self.deadline is not None and time.monotonic() >= self.deadline:
            # Validation (or connecting) used up the run's time: the run is ending, send nothing.
            return error_reply(
                "ToolCallError",
                f"{view.server_id}.{jsonsafe.safe_name(tool_name)} was not sent: the run's timeoutMs ran out",
                "do less per run or raise limits.timeoutMs",
                serverId=view.server_id,
                toolName=jsonsafe.safe_name(tool_name),
                _summary="ToolCallError: not sent, the run's time ran out",
            )
        if self.approval is not None:
            denied = await self._approve(seq, view, config, tool_name, arguments, tool, gate)
            if denied is not None:
                return denied
        return await self.upstream.dispatch(view, config, tool_name, arguments, tool)

    async def _approve(
        self,
        seq: int,
        view: ServerView,
        config: ServerConfig,
        tool_name: str,
        arguments: Any,
        tool: ToolView,
        gate: dict[str, str],
    ) -> HostReply | None:
        """Consult the approval gate; None when the call may be sent, else the reply that says
        why it was not (a ToolCallError with code APPROVAL_DENIED: the script goes on). With a
        journal, a person is asked through it (runtime/host/resume.py: input_required)."""
        assert self.approval is not None
        gate["approval"] = "pending"
        approve = self.journal.approver_for(seq) if self.journal is not None else self.approve
        key = (config.id, tool_name)
        approved_before = key in self.approved_for_run
        outcome = await telemetry_calls.traced_approval(
            self.approval.decide(
                server_id=view.server_id,
                config=config,
                tool_name=tool_name,
                arguments=arguments,
                annotations=tool.annotations,
                approve=approve,
                session=self.approval_session,
                run=self.approved_for_run,
                deadline=self.deadline,
                on_wait=self._waiting,
            ),
            # The person's answer covered the rest of the run (approval.FOR_RUN): the wait's span says so.
            for_run=lambda: not approved_before and key in self.approved_for_run,
        )
        gate["approval"] = outcome.decision
        if outcome.sent:
            return None
        message, hint = denial_message(outcome, view.server_id, config.id, tool_name)
        return error_reply(
            "ToolCallError",
            message,
            hint,
            serverId=view.server_id,
            toolName=jsonsafe.safe_name(tool_name),
            code=DENIED_CODE,
            _summary=f"ToolCallError: {DENIED_CODE} ({outcome.reason})",
        )

    def _waiting(self, request: ApprovalRequest) -> None:
        """A person is about to be asked: the run's progress says what it waits for (the gate
        logs and ignores an exception from here: progress never fails a call)."""
        telemetry_calls.approval_asked()  # the call's approval wait begins (runtime/host/telemetry_calls.py)
        if self._on_note is not None:
            self._on_note(
                f"waiting for the user's approval of {request.server_id}.{request.tool_name}"
            )
