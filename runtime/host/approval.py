"""Approval of tool calls a script makes (issue 12): which calls need a person's yes, and asking.

A script runs unattended, but some tools change or destroy things. Every call goes through the
run's bridge (runtime/host/bridge.py), which asks this module's `ApprovalGate` after the input was
validated and before anything is sent; a call that is not approved is never sent, and the
script gets a `ToolCallError` with code `APPROVAL_DENIED` it can catch (§10: only limits end a
run).

Which calls need a yes is the tool's policy (runtime/host/approval_policy.py); what the person
asked sees and may answer is the approver's contract (runtime/host/approval_request.py). An
approver that cannot ask (no terminal, a client without elicitation) raises
`ApprovalUnavailable`; one that raises anything else counts as a no. No approver at all → no
(fail closed), unless the host was built with `approve_all` (`--approve-all` on `run`
and `serve`).

`ask-once` remembers an accept for the rest of the session (the host's lifetime, or the client
session `serve` names), by server config id and tool name; a decline is never remembered. Asks
of the same tool are serialised, so two calls in one `Promise.all` are asked in turn and an
ask-once accept of the first lets the second through without asking; an approver marked
`asks_in_batches` (serve's on MCP 2026-07-28 connections, runtime/host/resume.py: every call waiting
at once is asked in one input_required round) is not serialised. The wait counts within
the run's timeoutMs: a run still waiting when it runs out ends as any run that times out.

Every call that reached the gate carries its decision into toolTrace (`"approval"`): "allowed"
(by policy), "approved" (asked, accepted, or approved by `approve_all`), "approved-for-session"
(an ask-once accept remembered), "approved-for-run" (an earlier `FOR_RUN` answer of this run),
"denied". Arguments are shown to the person asked, never written to the trace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
    Mapping,
    MutableSet,
)
from dataclasses import dataclass
from typing import Any, Literal

from codemode_gen import payload
from codemode_gen.config import ApprovalSetting, ServerConfig
from codemode_gen.display import display_json
from codemode_gen.error_classes import ToolCallCode
from codemode_gen.generator.redact import Redactor
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.approval_policy import Policy, toml_line, tool_policy
from codemode_gen.runtime.host.approval_request import (
    FOR_RUN,
    MAX_ARGUMENTS_CHARS,
    ApprovalRequest,
    ApprovalUnavailable,
    Approver,
)

__all__ = [
    "DENIED_CODE",
    "ApprovalGate",
    "ApprovalOutcome",
    "Decision",
    "DenyReason",
    "denial_message",
]

log = logging.getLogger(__name__)

#: A call's outcome at the gate, as toolTrace's `approval` shows it.
Decision = Literal["allowed", "approved", "approved-for-session", "approved-for-run", "denied"]
#: Why a call was denied: the person said no; nobody could be asked; no answer before the run's
#: timeoutMs; a default `deny` policy; the approver failed.
DenyReason = Literal["declined", "unavailable", "timeout", "policy", "error"]
#: The `code` of the ToolCallError a denied call throws in the script.
DENIED_CODE = ToolCallCode.APPROVAL_DENIED

# Bounds the approval sessions remembered at once (ask-once accepts, by session key): a `serve`
# over HTTP with ever new clients cannot grow host memory; the oldest session is forgotten
# (its tools are asked again).
MAX_APPROVAL_SESSIONS = 256
# Bounds the tool names shown in a message or prompt (they come from the server).
MAX_SHOWN_NAME_CHARS = 200


@dataclass(frozen=True)
class ApprovalOutcome:
    """The gate's answer for one call: `decision` (for toolTrace), and for a denial why."""

    decision: Decision
    policy: Policy
    reason: DenyReason | None = None
    detail: str | None = None  # what the approver said when it could not ask or failed

    @property
    def sent(self) -> bool:
        return self.decision != "denied"


# --------------------------------------------------------------------------- the gate


class ApprovalGate:
    """One host's approvals: policies, the ask-once memory, and the asking itself.

    `approve` is the host's approver (a run may bring its own, `decide(approve=...)`);
    `approve_all` approves every ask without asking anyone (and wins over any approver);
    `project_default` applies to configs without a default of their own; `redact_patterns`
    are codemode.toml's `redact` regexes, applied to the arguments shown.
    """

    def __init__(
        self,
        *,
        approve: Approver | None = None,
        approve_all: bool = False,
        project_default: ApprovalSetting = "auto",
        redact_patterns: Iterable[str] = (),
    ) -> None:
        self.approve = approve
        self.approve_all = approve_all
        self.project_default = project_default
        self.redact_patterns = tuple(redact_patterns)
        # session key -> (config id, tool name) approved for the rest of that session
        self._remembered: OrderedDict[Hashable, set[tuple[str, str]]] = OrderedDict()
        # (session key, config id, tool name) -> the lock that serialises asking it and how many
        # calls hold or wait for it (dropped at 0: ever new sessions cannot grow this)
        self._locks: dict[tuple[Hashable, str, str], tuple[asyncio.Lock, int]] = {}
        self._redactors: dict[str, tuple[ServerConfig, Redactor]] = {}

    def policy(
        self, config: ServerConfig, tool_name: str, annotations: Mapping[str, Any] | None
    ) -> Policy:
        return tool_policy(config, tool_name, annotations, self.project_default)

    def remembered(self, config_id: str, tool_name: str, session: Hashable = None) -> bool:
        """Whether an ask-once accept of this tool holds for `session`."""
        return (config_id, tool_name) in self._remembered.get(session, ())

    def forget(self, session: Hashable = None) -> None:
        """Drop what `session` approved (a client session that ended)."""
        self._remembered.pop(session, None)

    def request(
        self,
        server_id: str,
        config: ServerConfig,
        tool_name: str,
        arguments: Any,
        annotations: Mapping[str, Any] | None,
        policy: Policy,
    ) -> ApprovalRequest:
        """The request shown for one call: names sanitised, arguments redacted and cut."""
        return ApprovalRequest(
            server_id=jsonsafe.safe_name(server_id, MAX_SHOWN_NAME_CHARS),
            config_id=jsonsafe.safe_name(config.id, MAX_SHOWN_NAME_CHARS),
            tool_name=jsonsafe.safe_name(tool_name, MAX_SHOWN_NAME_CHARS),
            arguments_text=self.arguments_text(config, arguments),
            annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
            policy=policy,
        )

    def arguments_text(self, config: ServerConfig, arguments: Any) -> str:
        """`arguments` as JSON for a person: secrets redacted, cut, printable."""
        cached = self._redactors.get(config.id)
        if cached is None or cached[0] is not config:
            cached = (config, Redactor.for_server(config, self.redact_patterns))
            self._redactors[config.id] = cached
        # One line whatever the script put in it: JSON escapes the controls, display_json the
        # separators, format characters and the rest that JSON leaves raw.
        return display_json(cached[1].value(arguments), MAX_ARGUMENTS_CHARS)

    async def decide(
        self,
        *,
        server_id: str,
        config: ServerConfig,
        tool_name: str,
        arguments: Any,
        annotations: Mapping[str, Any] | None,
        approve: Approver | None = None,
        session: Hashable = None,
        run: MutableSet[tuple[str, str]] | None = None,
        deadline: float | None = None,
        on_wait: Callable[[ApprovalRequest], None] | None = None,
        always_ask: bool = False,
    ) -> ApprovalOutcome:
        """Whether this call may be sent; asks when the policy says so.

        `always_ask`: a person is asked whatever the policies, `--approve-all` and earlier
        answers say (a run proposing a skill for the repository: never written silently).

        `approve` (a run's own approver) replaces the host's; `session` keys the ask-once
        memory; `run` is the run's own memory of (config id, tool name) approved `FOR_RUN`
        (the bridge's: it ends with the run; None: such answers count as a plain yes);
        `deadline` (`time.monotonic()` seconds, the run's timeoutMs) bounds the wait for the
        lock and the answer; `on_wait` is told just before a person is asked (progress)."""
        policy: Policy = "ask" if always_ask else self.policy(config, tool_name, annotations)
        if always_ask:
            run = None  # a yes "for the rest of the run" covers this one proposal only
        if policy == "allow":
            return ApprovalOutcome("allowed", policy)
        if policy == "deny":
            return ApprovalOutcome("denied", policy, "policy")
        key = (config.id, tool_name)
        if policy == "ask-once" and self.remembered(*key, session=session):
            return ApprovalOutcome("approved-for-session", policy)
        if run is not None and key in run:
            return ApprovalOutcome("approved-for-run", policy)
        if self.approve_all and not always_ask:
            if policy == "ask-once":
                self._remember(session, key)
            return ApprovalOutcome("approved", policy)
        approver = approve if approve is not None else self.approve
        if approver is None:
            return ApprovalOutcome(
                "denied", policy, "unavailable", "no approver was given to this host"
            )
        # Redacting and showing the arguments walks them: large ones off the event loop.
        if payload.is_large(arguments):
            request = await payload.offload(
                self.request, server_id, config, tool_name, arguments, annotations, policy
            )
        else:
            request = self.request(server_id, config, tool_name, arguments, annotations, policy)
        try:
            return await _within(deadline, self._ask(approver, request, key, session, run, on_wait))
        except TimeoutError:
            return ApprovalOutcome("denied", policy, "timeout")

    async def _ask(
        self,
        approver: Approver,
        request: ApprovalRequest,
        key: tuple[str, str],
        session: Hashable,
        run: MutableSet[tuple[str, str]] | None,
        on_wait: Callable[[ApprovalRequest], None] | None,
    ) -> ApprovalOutcome:
        """The asking itself, one call of this tool (in this session) at a time."""
        policy = request.policy
        # An approver that asks in batches (input_required: every call waiting is asked in one
        # round) must see them all at once, so no lock per tool there.
        batched = getattr(approver, "asks_in_batches", False) is True
        async with contextlib.nullcontext() if batched else self._tool_lock((session, *key)):
            # Asked while this call waited for the lock: an ask-once yes covers it too, and so
            # does a yes for the rest of this run (the other calls of a Promise.all).
            if policy == "ask-once" and self.remembered(*key, session=session):
                return ApprovalOutcome("approved-for-session", policy)
            if run is not None and key in run:
                return ApprovalOutcome("approved-for-run", policy)
            if on_wait is not None:
                try:
                    on_wait(request)
                except Exception as exc:  # progress is a courtesy
                    log.debug("approval on_wait failed: %s: %s", type(exc).__name__, exc)
            try:
                accepted = await approver(request)
            except ApprovalUnavailable as exc:
                return ApprovalOutcome("denied", policy, "unavailable", str(exc) or None)
            except Exception as exc:  # an approver that fails says no
                log.warning(
                    "approver failed for %s.%s: %s: %s",
                    request.config_id,
                    request.tool_name,
                    type(exc).__name__,
                    jsonsafe.clip(str(exc), 300),
                )
                return ApprovalOutcome(
                    "denied", policy, "error", jsonsafe.clip(f"{type(exc).__name__}: {exc}", 300)
                )
            # Only True and FOR_RUN approve: a truthy "yes" or 1 from a careless callback is no.
            for_run = isinstance(accepted, str) and accepted == FOR_RUN
            if accepted is not True and not for_run:
                return ApprovalOutcome("denied", policy, "declined")
            if for_run and run is not None:
                run.add(key)
            if policy == "ask-once":
                self._remember(session, key)
                # ... and for the rest of this run whatever the session: a run asked through
                # input_required resumes on any instance, in a session of its own (stateless
                # HTTP), and its run set travels in its sealed state (runtime/host/resume.py).
                if batched and run is not None:
                    run.add(key)
            return ApprovalOutcome("approved", policy)

    @contextlib.asynccontextmanager
    async def _tool_lock(self, slot: tuple[Hashable, str, str]) -> AsyncIterator[None]:
        """Hold the lock that serialises asking about one tool in one session; the lock is
        dropped once no call holds or waits for it."""
        lock, users = self._locks.get(slot) or (asyncio.Lock(), 0)
        self._locks[slot] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[slot]
            if users <= 1:
                del self._locks[slot]
            else:
                self._locks[slot] = (lock, users - 1)

    def _remember(self, session: Hashable, key: tuple[str, str]) -> None:
        tools = self._remembered.get(session)
        if tools is None:
            tools = self._remembered[session] = set()
            while len(self._remembered) > MAX_APPROVAL_SESSIONS:
                self._remembered.popitem(last=False)
        else:
            self._remembered.move_to_end(session)
        tools.add(key)


async def _within(deadline: float | None, awaitable: Awaitable[ApprovalOutcome]) -> ApprovalOutcome:
    if deadline is None:
        return await awaitable
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise TimeoutError
    return await asyncio.wait_for(awaitable, remaining)


def denial_message(
    outcome: ApprovalOutcome, server_id: str, config_id: str, tool_name: str
) -> tuple[str, str]:
    """The ToolCallError message and hint of a denied call (for the script and the agent):
    what happened, and what the user can change: the codemode.toml line that allows the tool
    and, where nobody could be asked, the host options that approve without asking."""
    where = f"{server_id}.{jsonsafe.safe_name(tool_name, MAX_SHOWN_NAME_CHARS)}"
    why = {
        "declined": "the user declined it",
        "unavailable": "it needs approval and there is no way to ask: "
        + (outcome.detail or "no approver"),
        "timeout": "no answer to the approval request before the run's timeoutMs ran out",
        "policy": "the host's approval policy denies it",
        "error": "asking for approval failed" + (f": {outcome.detail}" if outcome.detail else ""),
    }.get(outcome.reason or "", "it was not approved")
    message = f'{where} was not called: {why} (approval policy "{outcome.policy}")'
    line = toml_line(config_id, tool_name, "allow")
    change = {
        "declined": f"If such calls are fine, the user can allow them in codemode.toml: {line}",
        "timeout": f"A run with a larger limits.timeoutMs gives the user longer to answer; codemode.toml can allow"
        f" it: {line}",
        "policy": f"Only the user can allow it, in codemode.toml: {line}",
    }.get(
        outcome.reason or "",
        f"The user can allow it in codemode.toml ({line}), or start the host with"
        " serve --approve-all / run --yes to approve such calls without asking",
    )
    hint = f"do not retry this call in this run; continue without it or tell the user what it would do. {change}"
    return message, hint
