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
(`sessions.cancel_once`), so the worker is killed and every call in flight gets its
notifications/cancelled upstream even when the caller is cancelled again and again, as the MCP
SDK's server does through an anyio cancel scope when its client cancels the codemode.run request.

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
import difflib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from codemode_gen import payload
from codemode_gen.client.sessions import (
    AuthError,
    CallAuthError,
    CallError,
    CallTimeout,
    ConnectError,
    SessionLost,
    cancel_once,
)
from codemode_gen.config import ServerConfig
from codemode_gen.errors import UserError
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.unwrap import Box, UnwrapMode, unbox_value, unwrap_result
from codemode_gen.jsonio import json_type
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host import telemetry_calls, tooltrace
from codemode_gen.runtime.host.approval import (
    DENIED_CODE,
    ApprovalGate,
    ApprovalRequest,
    Approver,
    denial_message,
)
from codemode_gen.runtime.host.catalog import (
    Catalog,
    LiveServer,
    ServerView,
    ToolView,
    live_tools,
)
from codemode_gen.runtime.host.validation import (
    InputInvalid,
    prepare_arguments,
    prepare_arguments_async,
    rejected_input,
)
from codemode_gen.runtime.limits import (
    MAX_JSON_DEPTH,
    MAX_NAME_CHARS,
    MAX_TRACE_ENTRIES,
    MAX_TRACE_ERROR_CHARS,
    SandboxLimitExceeded,
)

__all__ = ["MAX_ERROR_TEXT_CHARS", "Bridge", "CallSession", "Connector", "trace_error"]

# Bounds how much of a server's error text is copied into an exception message: a server can
# answer with megabytes, and the message lands in the agent's context.
MAX_ERROR_TEXT_CHARS = 2000
# UNBOX_MISMATCH warnings (one per tool) a run reports at most, so a script calling hundreds of
# misbehaving tools does not flood its response.
MAX_BOX_NOTICES = 20
# Bounds how long a cancelled run's caller waits for the run to wind down (kill the worker, cancel
# the calls in flight, send their notifications/cancelled: milliseconds) before it goes on; the
# rest goes on in the background.
TEARDOWN_WAIT = 2.0

# `@codemode/skills` (serve --skills-writable): the server id its `saveSkill` calls the host
# with (no configured server can have it: a module path has no `@`), and the function's name.
SKILLS_HOST_ID = "@skills"
SAVE_SKILL_TOOL = "saveSkill"
# What a person is told of a proposal: it adds a file (nothing is overwritten), no world outside.
SAVE_SKILL_ANNOTATIONS = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}

log = logging.getLogger(__name__)
T = TypeVar("T")


class SkillWriter(Protocol):
    """Checks and writes a proposed skill (runtime/host/skills.py `SkillSaver`)."""

    config: ServerConfig  # the pseudo-server the approval request names

    def check(self, proposal: Any) -> tuple[tuple[str, str] | None, dict[str, Any]]: ...

    def write(self, arguments: dict[str, Any]) -> dict[str, Any]: ...


class CallSession(Protocol):
    """What the bridge uses of an MCP session (`codemode_gen.client.sessions.McpSession`)."""

    @property
    def closed(self) -> bool: ...

    async def call_tool(self, name: str, arguments: Any, *, timeout: float | None = None) -> dict[str, Any]: ...


class Journal(Protocol):
    """What the bridge uses of a resumable run (`runtime.resume.Resumable`)."""

    async def enter(self, seq: int, request: Mapping[str, Any]) -> Logged | None: ...

    def leave(self, seq: int, reply: dict[str, Any], entry: Mapping[str, Any]) -> None: ...

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


class Connector(Protocol):
    """What the bridge needs from the host that owns the sessions (CodeMode)."""

    async def session(self, config_id: str) -> CallSession: ...

    async def live(self, config_id: str) -> LiveServer: ...


def _error(error_class: str, message: str, hint: str, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"errorClass": error_class, "message": message, "hint": hint}
    body.update({k: v for k, v in fields.items() if v is not None})
    return {"ok": False, "error": body}


def _clip(text: str) -> str:
    return jsonsafe.clip(text, MAX_ERROR_TEXT_CHARS)


def trace_error(text: str) -> str:
    """A trace entry's `error` (§3.3.2 "string summary": the error class and the server's own
    message): on one line (white space folded), cut to MAX_TRACE_ERROR_CHARS with a marker,
    UTF-8- and terminal-safe (`jsonsafe.safe_name`)."""
    folded = " ".join(text.split())
    if len(folded) > MAX_TRACE_ERROR_CHARS:
        folded = folded[:MAX_TRACE_ERROR_CHARS] + f"…[+{len(folded) - MAX_TRACE_ERROR_CHARS} chars]"
    return jsonsafe.safe_name(folded, len(folded))


def _near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one, if any is close."""
    if len(name) > MAX_NAME_CHARS:  # difflib is quadratic in the name's length: no near miss
        return None
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def _content_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    texts = [
        b["text"]
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts)


def _examine(result: dict[str, Any], mode: UnwrapMode, tool: ToolView) -> tuple[str, Any]:
    """What a successful call's wire result gives the script (pure: may run in a thread):
    ("deep", None) for one nested past MAX_JSON_DEPTH, ("error", (message text, content)) for an
    isError result, else ("value", (the §5.3.2 value, whether a boxed tool's box was missing))."""
    # Nothing nested deeper than MAX_JSON_DEPTH reaches the script (which would pass it on
    # to its result, a log or another tool): the result object adds one level.
    if jsonsafe.json_depth_exceeds(result, MAX_JSON_DEPTH + 1):
        return "deep", None
    if result.get("isError"):
        text = _content_text(result) or "the tool reported an error without a message"
        content = result.get("content") if isinstance(result.get("content"), list) else []
        return "error", (_clip(text), content)
    value = unwrap_result(result, mode)
    parsed_text = mode == "json" and value is not result and value is not result.get("structuredContent")
    if parsed_text and jsonsafe.json_depth_exceeds(value, MAX_JSON_DEPTH):
        return "deep", None
    mismatch = False
    if tool.unboxed and tool.box is not None:  # after §5.3.2, as documented (unbox = true)
        unboxed, value = unbox_value(value, tool.box)
        mismatch = not unboxed
    return "value", (value, mismatch)


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
        on_result: Callable[[str, ToolView, Any, dict[str, Any], int], Awaitable[None]] | None = None,
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
        self.trace: list[dict[str, Any]] = []
        self.trace_dropped = 0  # calls past MAX_TRACE_ENTRIES, counted instead of listed
        self.counts = tooltrace.CallCounts()  # every call by tool, and the failed ones: toolSummary
        self._notices: dict[str, dict[str, Any]] = {}  # BRIDGE_LIMIT diagnostics, one per kind
        self._clock = clock
        self._inflight: set[asyncio.Task[Any]] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        # Sessions this run already obtained, by config id: asking the session manager again
        # costs two event-loop turns (its lock and ready event) on every call.
        self._sessions: dict[str, CallSession] = {}
        self._closed = False
        # Servers a call of this run was waiting for to connect when the run ended (a timeout
        # then says so: response.waiting_for_connect).
        self.connecting: set[str] = set()
        # Told (server id, tool name: sanitised) of every call that finished, whatever its
        # outcome; never of one cut short by the end of the run. Must not block or raise.
        self._on_call_done = on_call_done
        # Told (config id, tool view, the arguments sent, the wire result, ms) of every successful
        # call, before the script gets its value: the host learns output types and records
        # calls from it (runtime/host/learn.py), off the event loop; awaited (it may make the call
        # wait while the host is behind). An exception is logged, not raised.
        self._on_result = on_result
        # The host's approvals (None: every call is sent, as for a bridge without a host); this
        # run's own approver, if any, replaces the host's; `approval_session` keys ask-once.
        self.approval = approval
        self.approve = approve
        self.approval_session = approval_session
        # (config id, tool name) a person approved for the rest of this run (approval.FOR_RUN);
        # a resumable run's is its journal's (kept in its sealed state across rounds/instances)
        self.approved_for_run: set[tuple[str, str]] = journal.approved_for_run if journal is not None else set()
        # Told an ad-hoc progress message (the run's reporter's `note`): must not block or raise.
        self._on_note = on_note
        # codemode.toml's `redact` regexes: with each server's own secrets, redacted from the
        # server's text in trace entries (`_server_text`); one Redactor per server, made on need.
        self.redact_patterns = tuple(redact_patterns)
        self._redactors: dict[str, Redactor] = {}

    # ------------------------------------------------------------------ entry point

    async def host_call(self, request: dict[str, Any]) -> dict[str, Any]:
        """One call from the sandbox; returns the host reply (DESIGN.md, sandbox ⇄ host).

        Calls are numbered in the order they arrive, which is the order the script made them
        (one pipe, one task each, started in turn): with a `journal` (runtime/host/resume.py) a call
        an earlier round of the run made is answered from it, never sent again."""
        self._seq += 1
        seq = self._seq
        journal = self.journal
        if journal is None:
            return (await self._serve_call(seq, request))[0]
        logged = await journal.enter(seq, request if isinstance(request, dict) else {"request": str(request)})
        if logged is not None:
            return self._replayed(logged.reply, logged.entry)
        reply, entry = await self._serve_call(seq, request)
        journal.leave(seq, reply, entry or {})
        return reply

    def _replayed(self, reply_text: str, entry: dict[str, Any]) -> dict[str, Any]:
        """A call answered from the journal: the reply the script got the first time, and the
        trace entry it made then."""
        self.calls += 1
        self.counts.add(str(entry.get("serverId")), str(entry.get("toolName")), entry.get("ok") is True)
        if len(self.trace) >= MAX_TRACE_ENTRIES:
            self.trace_dropped += 1
        else:
            self.trace.append(dict(entry))
        reply: dict[str, Any] = json.loads(reply_text)
        return reply

    async def _serve_call(self, seq: int, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """`host_call` itself: the reply and the call's trace entry (None: the call made none)."""
        if not isinstance(request, dict) or request.get("op") != "call":
            op = request.get("op") if isinstance(request, dict) else request
            return _error(
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
            return _error(
                "ToolCallError", "the run has ended", "nothing to do", serverId=shown_server, toolName=shown_tool
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
            reply = await telemetry_calls.traced_call(self._call(seq, server_id, tool_name, request, gate), shown_server,
                                                shown_tool, gate, request, lambda text: self.redact_text(server_id, text))
        except asyncio.CancelledError:  # the run ended (timeout, limit) while the call was in flight
            if gate.get("approval") == "pending":  # never sent: the run ended before an answer
                self._record(shown_server, shown_tool, started,
                             "ToolCallError: the run ended while waiting for approval", approval="denied")
            else:
                self._record(shown_server, shown_tool, started, "ToolCallError: cancelled when the run ended",
                             approval=gate.get("approval"))
            raise
        error = reply.get("error") if not reply.get("ok") else None
        entry = self._record(shown_server, shown_tool, started, error.get("_summary") if error else None,
                             approval=gate.get("approval"))
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
        however often the caller is cancelled meanwhile (see `sessions.cancel_once`)."""

        async def whole() -> T:
            try:
                return await run
            finally:
                await self.aclose()

        return await cancel_once(whole(), grace=TEARDOWN_WAIT)

    async def aclose(self) -> None:
        """Cancel calls still running when the run ends (timeout, limit, script finished early)."""
        self._closed = True
        tasks = [t for t in self._inflight if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def diagnostics(self, *, full_trace: bool = True) -> list[dict[str, Any]]:
        """What the run's response should say about the bridge: limits it enforced at the
        boundary (BRIDGE_LIMIT, once per kind) and, when the response lists every call
        (`full_trace`), a trace cut at MAX_TRACE_ENTRIES."""
        out = list(self._notices.values())
        if self.trace_dropped and full_trace:
            out.append(diag.diagnostic(
                "TOOL_TRACE_TRUNCATED",
                f"toolTrace lists the first {len(self.trace)} tool calls; {self.trace_dropped} later "
                f"calls are not listed (at most {MAX_TRACE_ENTRIES} entries)",
                severity="warning",
                hint="make fewer tool calls per run, or log a summary of them from the script",
            ))
        return out

    def _notice(self, kind: str, message: str, hint: str) -> None:
        if kind not in self._notices:
            self._notices[kind] = diag.diagnostic("BRIDGE_LIMIT", message, severity="warning", hint=hint)

    # ------------------------------------------------------------------ steps

    def _record(
        self, server_id: str, tool_name: str, started: float | None, error: str | None, *, approval: str | None = None
    ) -> dict[str, Any]:
        """Count the call and list its trace entry (past MAX_TRACE_ENTRIES only counted); the
        entry either way."""
        self.counts.add(server_id, tool_name, error is None)
        duration = 0 if started is None else max(0, round((self._clock() - started) * 1000))
        entry: dict[str, Any] = {
            "serverId": server_id,
            "toolName": tool_name,
            "durationMs": duration,
            "ok": error is None,
        }
        if error is not None:
            entry["error"] = trace_error(error)
        if approval is not None:
            entry["approval"] = approval
        if len(self.trace) >= MAX_TRACE_ENTRIES:
            self.trace_dropped += 1
        else:
            self.trace.append(entry)
        return entry

    def redact_text(self, server_id: str, text: str) -> str:
        """`text` with the secrets of the server `server_id` names and codemode.toml's `redact`
        patterns replaced (tool inputs and outputs telemetry records when told to)."""
        view = self.catalog.servers.get(server_id)
        config = self.configs.get(view.config_id) if view is not None and view.config_id is not None else None
        redactor = Redactor.for_server(config, self.redact_patterns) if config is not None else Redactor(
            None, self.redact_patterns)
        return redactor.text(text) if redactor else text

    def _server_text(self, config_id: str | None, text: str) -> str:
        """A server's own words (an error message, a connect failure) for a trace entry: its
        secrets and codemode.toml's `redact` patterns replaced, as `record` does in fixtures/
        (redacted before `trace_error` cuts it, so no secret is left half-shown)."""
        text = text[:MAX_ERROR_TEXT_CHARS]
        config = self.configs.get(config_id) if config_id is not None else None
        if config is None:
            return text
        redactor = self._redactors.get(config.id)
        if redactor is None:
            redactor = self._redactors[config.id] = Redactor.for_server(config, self.redact_patterns)
        return redactor.text(text) if redactor else text

    async def _call(
        self, seq: int, server_id: str, tool_name: str, request: dict[str, Any], gate: dict[str, str]
    ) -> dict[str, Any]:
        if server_id == SKILLS_HOST_ID and self.skill_writer is not None and server_id not in self.catalog.servers:
            return await self._save_skill(seq, tool_name, request, gate)
        view = self.catalog.servers.get(server_id)
        if view is None or view.config_id is None:
            return self._server_not_found(server_id, view)
        config = self.configs[view.config_id]
        failure = await self._ensure_live(view)
        if failure is not None:
            return failure
        tool = view.tools.get(tool_name)
        if tool is None:
            return self._tool_not_found(view, tool_name, blocked=tool_name in config.blocklist)
        try:
            rejected = request.get("inputRejected")
            if rejected is not None:  # the worker refused to forward it (size or depth)
                raise rejected_input(tool.input_schema, tool_name, tool.export_name, rejected)
            if "input" in request:
                arguments = await prepare_arguments_async(
                    tool.input_schema, tool_name, tool.export_name, request["input"], deadline=self.deadline
                )
            else:
                arguments = prepare_arguments(tool.input_schema, tool_name, tool.export_name)
        except InputInvalid as exc:
            error = exc.payload()
            if exc.refused:
                self._notice(
                    f"input:{exc.refused}",
                    f"a tool input was refused at the sandbox boundary: {exc.message}",
                    exc.hint,
                )
            error["serverId"] = view.server_id
            error["_summary"] = f"SchemaValidationError at {exc.path or '(root)'}: expected {exc.expected}"
            return {"ok": False, "error": error}
        if self.deadline is not None and time.monotonic() >= self.deadline:
            # Validation (or connecting) used up the run's time: the run is ending, send nothing.
            return _error(
                "ToolCallError", f"{view.server_id}.{jsonsafe.safe_name(tool_name)} was not sent: the run's timeoutMs ran out",
                "do less per run or raise limits.timeoutMs", serverId=view.server_id, toolName=jsonsafe.safe_name(tool_name),
                _summary="ToolCallError: not sent, the run's time ran out",
            )
        if self.approval is not None:
            denied = await self._approve(seq, view, config, tool_name, arguments, tool, gate)
            if denied is not None:
                return denied
        return await self._dispatch(view, config, tool_name, arguments, tool)

    async def _approve(
        self, seq: int, view: ServerView, config: ServerConfig, tool_name: str, arguments: Any, tool: ToolView,
        gate: dict[str, str],
    ) -> dict[str, Any] | None:
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
                server_id=view.server_id, config=config, tool_name=tool_name, arguments=arguments,
                annotations=tool.annotations, approve=approve, session=self.approval_session,
                run=self.approved_for_run, deadline=self.deadline, on_wait=self._waiting,
            ),
            # The person's answer covered the rest of the run (approval.FOR_RUN): the wait's span says so.
            for_run=lambda: not approved_before and key in self.approved_for_run,
        )
        gate["approval"] = outcome.decision
        if outcome.sent:
            return None
        message, hint = denial_message(outcome, view.server_id, config.id, tool_name)
        return _error(
            "ToolCallError", message, hint, serverId=view.server_id, toolName=jsonsafe.safe_name(tool_name),
            code=DENIED_CODE, _summary=f"ToolCallError: {DENIED_CODE} ({outcome.reason})",
        )

    async def _save_skill(self, seq: int, tool_name: str, request: dict[str, Any], gate: dict[str, str]) -> dict[str, Any]:
        """`saveSkill` of `@codemode/skills`: the proposal is checked (name, size, one documented
        async function), then a person is asked through the run's approval channel (whatever
        the policies and --approve-all say), and only a yes writes skills/<name>.ts|js."""
        writer = self.skill_writer
        assert writer is not None
        shown = jsonsafe.safe_name(tool_name)
        if tool_name != SAVE_SKILL_TOOL or self.approval is None:
            return _error("ToolCallError", f"@codemode/skills has no function {shown!r}",
                          "call saveSkill({ name, source, lang? })", serverId=SKILLS_HOST_ID, toolName=shown)
        problem, arguments = writer.check(request.get("input"))
        if problem is not None:
            return _error("ToolCallError", f"saveSkill: {problem[0]}", problem[1], serverId=SKILLS_HOST_ID,
                          toolName=shown, _summary="ToolCallError: invalid skill")
        gate["approval"] = "pending"
        approve = self.journal.approver_for(seq) if self.journal is not None else self.approve
        outcome = await self.approval.decide(
            server_id=SKILLS_HOST_ID, config=writer.config, tool_name=SAVE_SKILL_TOOL, arguments=arguments,
            annotations=SAVE_SKILL_ANNOTATIONS, approve=approve, session=self.approval_session,
            deadline=self.deadline, on_wait=self._waiting, always_ask=True,
        )
        gate["approval"] = outcome.decision
        if not outcome.sent:
            message, hint = denial_message(outcome, SKILLS_HOST_ID, writer.config.id, SAVE_SKILL_TOOL)
            return _error("ToolCallError", message + " (nothing was written)", hint, serverId=SKILLS_HOST_ID,
                          toolName=shown, code=DENIED_CODE, _summary=f"ToolCallError: {DENIED_CODE} ({outcome.reason})")
        try:
            written = writer.write(arguments)
        except UserError as exc:
            return _error("ToolCallError", f"saveSkill: {exc.message}", exc.hint or "fix the proposal",
                          serverId=SKILLS_HOST_ID, toolName=shown, _summary="ToolCallError: not written")
        return {"ok": True, "value": written}

    def _waiting(self, request: ApprovalRequest) -> None:
        """A person is about to be asked: the run's progress says what it waits for (the gate
        logs and ignores an exception from here: progress never fails a call)."""
        telemetry_calls.approval_asked()  # the call's approval wait begins (runtime/host/telemetry.py)
        if self._on_note is not None:
            self._on_note(f"waiting for the user's approval of {request.server_id}.{request.tool_name}")

    async def _ensure_live(self, view: ServerView) -> dict[str, Any] | None:
        """Connect on first use and take this run's snapshot of the live tool list (§8.2)."""
        if view.live and view.unavailable is None:
            return None
        assert view.config_id is not None
        lock = self._locks.setdefault(view.server_id, asyncio.Lock())
        async with lock:
            if view.unavailable is None and not view.live:
                self.connecting.add(view.server_id)  # left there if the run ends meanwhile
                try:
                    live = await self.connector.live(view.config_id)
                except ConnectError as exc:  # AuthError too
                    view.unavailable = exc.reason or str(exc)
                    view.auth_failed = isinstance(exc, AuthError)
                    view.auth_hint = exc.hint if isinstance(exc, AuthError) else None
                except CallError as exc:  # connected, but tools/list failed
                    view.unavailable = f"tools/list failed: {exc}"
                else:
                    view.tools = live_tools(live, self.configs[view.config_id], known=view.tools)
                    view.live = True
                self.connecting.discard(view.server_id)
        if view.unavailable is not None:
            if view.auth_failed:
                return _error(
                    "AuthenticationError",
                    f"server '{view.server_id}' rejected the connection: {view.unavailable}",
                    view.auth_hint
                    or f"fix the credentials (headers/env) of '{view.config_id}' in the MCP config; the script cannot fix this",
                    serverId=view.server_id,
                    _summary=f"AuthenticationError: connection rejected: {self._server_text(view.config_id, view.unavailable)}",
                )
            return _error(
                "ServerNotFoundError",
                f"server '{view.server_id}' is not connected: {view.unavailable}",
                f"check the '{view.config_id}' entry of the MCP config; continue without this server meanwhile",
                serverId=view.server_id,
                _summary=f"ServerNotFoundError: not connected: {self._server_text(view.config_id, view.unavailable)}",
            )
        return None

    def _server_not_found(self, server_id: str, view: ServerView | None) -> dict[str, Any]:
        known = [v.server_id for v in self.catalog.visible()]
        shown = jsonsafe.safe_name(server_id)
        if view is not None:  # in out/ but not configured
            message = f"server '{shown}' is in out/ but not configured in the MCP config"
            hint = f"add '{shown}' to .mcp.json, or use one of: {', '.join(known) or 'no servers'}"
        else:
            message = f"no server '{shown}'"
            close = _near_miss(server_id, known)
            hint = (
                f"did you mean '{close}'? listServers() from @codemode/discovery lists every server"
                if close
                else "call listServers() from @codemode/discovery to see the available server ids"
            )
        # The summary names the kind, not the server again: serverId is beside it in the entry.
        kind = "not configured" if view is not None else "no such server"
        return _error("ServerNotFoundError", message, hint, serverId=shown,
                      _summary=f"ServerNotFoundError: {kind}")

    def _tool_not_found(self, view: ServerView, tool_name: str, *, blocked: bool) -> dict[str, Any]:
        shown = jsonsafe.safe_name(tool_name)
        if blocked:
            message = f"tool '{shown}' of server '{view.server_id}' is blocked by the host's configuration"
            hint = "do this another way: the host does not allow this tool"
        else:
            message = f"server '{view.server_id}' has no tool '{shown}'"
            close = _near_miss(tool_name, view.tools)
            hint = (
                f"did you mean '{close}'?"
                if close
                else f"call listTools('{view.server_id}') from @codemode/discovery to see its tools"
            )
        kind = "blocked by the host's configuration" if blocked else "no such tool"
        return _error("ToolNotFoundError", message, hint, serverId=view.server_id, toolName=shown,
                      _summary=f"ToolNotFoundError: {kind}")

    async def _dispatch(
        self, view: ServerView, config: ServerConfig, tool_name: str, arguments: Any, tool: ToolView
    ) -> dict[str, Any]:
        server_id = view.server_id
        tool_name_shown = jsonsafe.safe_name(tool_name)
        where = f"{server_id}.{tool_name_shown}"
        try:
            session = self._sessions.get(config.id)
            if session is None or session.closed:
                session = await self.connector.session(config.id)
                self._sessions[config.id] = session
            # The calling task itself is what aclose() cancels: no extra task per call.
            task = asyncio.current_task()
            if task is not None:
                self._inflight.add(task)
            sent = time.monotonic()  # not self._clock: the trace's clock counts its own readings
            try:
                try:
                    result = await session.call_tool(tool_name, arguments, timeout=config.call_timeout)
                except SessionLost:
                    # The server forgot the session and did not run the call (a restart, or a new
                    # login under another client): once more on a new session.
                    session = await self.connector.session(config.id)
                    self._sessions[config.id] = session
                    result = await session.call_tool(tool_name, arguments, timeout=config.call_timeout)
            finally:
                if task is not None:
                    self._inflight.discard(task)
        except CallTimeout:
            return _error(
                "ToolCallError",
                f"{where} did not answer within {config.call_timeout:g} s; the call was cancelled",
                "retry once with a smaller request, or skip this step",
                serverId=server_id, toolName=tool_name_shown, code="timeout",
                _summary=f"ToolCallError: timeout after {config.call_timeout:g} s",
            )
        except (AuthError, CallAuthError) as exc:
            # Rejected while connecting (AuthError) or on an established connection whose
            # credentials were revoked or expired (CallAuthError): the same fix either way.
            detail = exc.reason if isinstance(exc, AuthError) else _clip(exc.message)
            return _error(
                "AuthenticationError",
                f"{where}: the server rejected the credentials ({exc.status}): {detail}",
                exc.hint or f"fix the credentials (headers/env) of '{config.id}' in the MCP config; the script cannot fix this",
                serverId=server_id, toolName=tool_name_shown, code=exc.status,
                _summary=f"AuthenticationError ({exc.status}): {self._server_text(config.id, detail)}",
            )
        except CallError as exc:
            code = exc.code
            text = exc.message
            return _error(
                "ToolCallError",
                f"{where} failed with JSON-RPC error {code}: {_clip(text)}",
                "check the input against getTool() from @codemode/discovery, then retry",
                serverId=server_id, toolName=tool_name_shown, code=code,
                _summary=f"ToolCallError: JSON-RPC error {code}: {self._server_text(config.id, text)}",
            )
        except ConnectError as exc:
            return _error(
                "ToolCallError",
                f"{where}: connection to the server failed: {getattr(exc, 'reason', exc)}",
                "retry later or continue without this server",
                serverId=server_id, toolName=tool_name_shown,
                _summary=f"ToolCallError: connection failed: {self._server_text(config.id, str(getattr(exc, 'reason', exc)))}",
            )
        if not isinstance(result, dict):
            return _error(
                "ToolCallError", f"{where} returned a malformed result", "report this server as faulty",
                serverId=server_id, toolName=tool_name_shown, _summary="ToolCallError: malformed result",
            )
        # Checking and unwrapping walk the result: a large one is handled off the event loop.
        if payload.is_large(result):
            kind, got = await payload.offload(_examine, result, config.unwrap, tool)
        else:
            kind, got = _examine(result, config.unwrap, tool)
        if kind == "deep":
            return self._too_deep(server_id, tool_name_shown, where)
        if kind == "error":
            text, content = got
            return _error(
                "ToolCallError",
                f"{where} failed: {text}",
                f"the server's message says why {where} failed: fix the input or the precondition it names "
                "and retry once; if the script can do without it, catch the ToolCallError and go on",
                serverId=server_id, toolName=tool_name_shown, content=content,
                _summary=f"ToolCallError: {self._server_text(config.id, text)}",
            )
        value, mismatch = got
        if mismatch and tool.box is not None:
            self._box_mismatch(where, tool.box, value)
        if self._on_result is not None:
            try:
                await self._on_result(config.id, tool, arguments, result, round((time.monotonic() - sent) * 1000))
            except Exception as exc:  # learning and recording never fail a call
                log.warning("learning from %s failed: %s: %s", where, type(exc).__name__, exc)
        return {"ok": True, "value": value}

    def _box_mismatch(self, where: str, box: Box, value: Any) -> None:
        """A boxed tool answered with something else: the value goes to the script unchanged
        (never an exception) and the run says so, once per tool."""
        key = f"box:{where}"
        if key in self._notices or sum(k.startswith("box:") for k in self._notices) >= MAX_BOX_NOTICES:
            return
        got = "an object without it" if isinstance(value, dict) else f"{json_type(value) or 'a value'}, not an object"
        self._notices[key] = diag.diagnostic(
            "UNBOX_MISMATCH",
            f"{where} declares its value boxed in {json.dumps(box.field)} ({box.marker}) but returned {got};"
            " the result was returned unchanged, not unboxed",
            severity="warning",
            hint=f"check the value's shape before using it (for example `{json.dumps(box.field)} in value`)",
        )

    def _too_deep(self, server_id: str, tool_name: str, where: str) -> dict[str, Any]:
        message = f"{where} returned a result nested deeper than {MAX_JSON_DEPTH} levels; the host does not pass it on"
        hint = "ask the tool for less (a narrower query, fewer fields), or use another tool"
        self._notice("result:depth", f"a tool result was refused at the sandbox boundary: {message}", hint)
        return _error(
            "ToolCallError", message, hint, serverId=server_id, toolName=tool_name,
            _summary="ToolCallError: result nested too deep",
        )

