"""Runs that wait for a person's answer between two MCP requests, and resume on any instance.

MCP 2026-07-28 has no server-to-client request in the middle of a call: a server that needs the
client's user answers the call with an `input_required` result (SEP-2322) carrying the questions
and an opaque `requestState`, and the client calls again with the answers and that state. So a
run whose script makes a call that needs approval (runtime/host/approval.py, policy "ask") cannot
wait on a connection of that version: it ends, and the client's retry runs it again. This
module makes that second run continue the first one exactly, on whichever `serve` instance the
retry reaches (a load balancer's round robin), with nothing shared between instances but the
key that seals the state (runtime/frontends/input_required.py).

How: every run that may ask this way keeps a journal (`Resumable`). The host writes down each
call the script made that was answered (its number, a digest of what was asked, the reply the
script got, its trace entry); the sandbox worker writes down every event the script took
(replies and timer alarms, in the order it saw them) and every clock value it read, and seeds
Math.random and Date's base (runtime/sandbox/worker.py; docs/DESIGN.md, "Deterministic runs"). When the
script waits for nothing but approvals (every call it made is answered or waiting at the gate),
the worker is paused, and the journal, the calls waiting for an answer and the run's deadline
become the state (`RunState`, compressed, then sealed) the input_required result carries; the
run ends there. The retry runs the same script again from that state: the worker hands it the
journal's events and clock values first, the host answers its calls from the journal (the reply
it got before, never sent upstream again) and checks each is the call it was (same number, same
digest); a script that does something else is stopped with RESUME_DIVERGED before anything is
sent. The calls that waited get the retry's answers (accept: sent now, once; decline or cancel:
APPROVAL_DENIED) and the script goes on live, maybe to ask again (another round).

So a call sent upstream is sent once: its result is in every later state, and the run is
sealed only when no call is in flight. Limits, and what happens past them (the calls waiting
are denied with APPROVAL_DENIED and a message naming the limit, and the run goes on): the sealed
state is at most MAX_STATE_CHARS (results of earlier calls make it up), a run asks in at most
MAX_ROUNDS rounds, the worker's journal holds at most run_state.MAX_JOURNAL_EVENTS events and
MAX_JOURNAL_CLOCK_RUNS clock runs. The run's timeoutMs counts from its first round: the wait for
the user's answer is part of it, and a retry after it gets the timeout (nothing sent).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from codemode_gen import payload
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.approval_request import (
    Answer,
    ApprovalRequest,
    ApprovalUnavailable,
    Approver,
    Unusable,
)
from codemode_gen.runtime.host.resume_state import (
    LoggedCall,
    PendingAsk,
    RunState,
    call_ident,
    encode_state,
    urlsafe_b64,
)
from codemode_gen.runtime.limits import RunStopped
from codemode_gen.runtime.response import TraceEntry
from codemode_gen.runtime.sandbox.protocol import HostReply
from codemode_gen.runtime.sandbox.run import RunHandle

__all__ = [
    "ASK_KEY_PREFIX",
    "MAX_ROUNDS",
    "MAX_STATE_CHARS",
    "Resumable",
    "Suspension",
]

# Bounds the sealed requestState (characters): the client holds it and sends it back with the
# retry, whose whole body serve --http caps at 4 MiB (http_gate.MAX_REQUEST_BYTES) with the
# script in it. Results of the calls made before the ask make it up (compressed); a run whose
# state would be bigger cannot wait for an answer: its asks are denied, naming this limit.
MAX_STATE_CHARS = 512 * 1024
# Bounds the input_required rounds of one run: each round runs the script again from its start,
# replaying every earlier call, so a script asking one call at a time in a loop would cost
# rounds x calls; past it the run's further asks are denied (the MCP SDK's client stops after 10
# rounds by default: `input_required_max_rounds`).
MAX_ROUNDS = 32
# Bounds the answers of one retry that are looked at (keys of inputResponses).
MAX_ANSWERS = 1024
# Bounds the event-loop turns a paused run waits for the calls its worker made before pausing to
# reach the host (their messages are read; their tasks start within a turn or two).
MAX_ARRIVAL_TURNS = 100
#: The keys of the elicitations an input_required result asks (then of the retry's answers).
ASK_KEY_PREFIX = "approve-"
DIVERGED_HINT = (
    "a run that asked for approval is resumed by running the script again with the results, clock "
    "values and random numbers of its first round; this script did something else (it depends on "
    "something that changed, e.g. the servers' tools, or on garbage collection through WeakRef or "
    "FinalizationRegistry). Nothing more was sent; run it again from the start"
)


@dataclass(frozen=True)
class Suspension:
    """A run that ended to wait for answers: the sealed state and what to ask (key, request)."""

    token: str
    asks: list[tuple[str, ApprovalRequest]]


@dataclass
class _Parked:
    request: ApprovalRequest
    answer: asyncio.Future[bool]


class Resumable:
    """One codemode.run request whose asks are answered through input_required: the journal of
    its run (the bridge's `enter`/`leave`/`approver_for`, the sandbox's hooks) and, once the run
    waits only for answers, its `suspension`.

    `tool` / `args`: the call's name and `arguments_digest`; `seal`: seals a state's bytes into
    requestState; `prior`: the state of the earlier round this request resumes (None: a first
    round); `answers`: the retry's answers by call number (True: accept; FOR_RUN: accept, and
    the tool's later calls in this run too; False: decline or cancel; Unusable: why the answer
    cannot be used, which the denial says); `approved_for_run`: the run's FOR_RUN set (the
    bridge's), carried from round to round in the state; `cannot_ask`: set
    when a call without an answer may not wait for one (the client declared no form
    elicitation): it is denied, saying this."""

    def __init__(
        self,
        *,
        tool: str,
        args: str,
        seal: Callable[[bytes], str],
        prior: RunState | None = None,
        answers: Mapping[int, Answer | Unusable] | None = None,
        cannot_ask: str | None = None,
    ) -> None:
        self.tool = tool
        self.args = args
        self.seal = seal
        self.prior = prior
        self.answers: dict[int, Answer | Unusable] = dict(answers or {})
        self.approved_for_run: set[tuple[str, str]] = (
            set(prior.for_run) if prior is not None else set()
        )
        self.cannot_ask = cannot_ask
        self.suspension: Suspension | None = None
        self._replayed = {c.seq: c for c in prior.calls} if prior is not None else {}
        self._pending = {p.seq: p for p in prior.pending} if prior is not None else {}
        self._calls: dict[int, LoggedCall] = dict(
            self._replayed
        )  # every answered call, for the state
        self._idents: dict[int, str] = {}  # live calls' digests
        self._open: set[int] = set()  # calls the host has and has not answered
        self._parked: dict[int, _Parked] = {}  # ... of which these wait for an answer
        self._entered: set[int] = set()
        self._received = 0
        self._handle: RunHandle | None = None
        self._deadline: float | None = None
        self._pausing = False
        self._unresumable: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._changes = (
            0  # calls entered, answered or parked: a pause decided on older news is redone
        )

    # ------------------------------------------------------------------ timing

    def deadline(self, default: float) -> float:
        """The run's deadline (`time.monotonic()` seconds): its first round's, else `default`."""
        if self.prior is None:
            return default
        return time.monotonic() + (self.prior.deadline - time.time())

    def expired(self) -> bool:
        """Whether the run's timeoutMs ran out before this retry came (it is not run)."""
        return self.prior is not None and time.time() >= self.prior.deadline

    def begin(self, deadline: float) -> None:
        """The run starts; `deadline` (monotonic) is what a state of it carries on."""
        self._deadline = deadline

    # ------------------------------------------------------------------ sandbox hooks

    def run_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"journal": True}
        if self.prior is not None:
            journal = self.prior.journal
            fields.update(
                seed=journal.get("seed"),
                clockBase=journal.get("clockBase"),
                replay={"events": journal.get("events", []), "clock": journal.get("clock", [])},
            )
        return fields

    def started(self, handle: RunHandle) -> None:
        self._handle = handle

    def on_message(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "diverged":
            if self._handle is not None:
                self._handle.stop([_diverged(jsonsafe.clip(str(message.get("message")), 300))])
        elif op == "paused":
            task = asyncio.ensure_future(self._decide(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ bridge

    async def enter(self, seq: int, request: Mapping[str, Any]) -> LoggedCall | None:
        """Call `seq` reached the host: its logged reply when an earlier round made it (RunStopped
        when it is not the same call: the script diverged), else None (it runs live; `leave`)."""
        self._received += 1
        self._changes += 1
        self._entered.add(seq)
        self._open.add(seq)  # busy from here: no state is made while its digest is computed
        try:
            ident = (
                await payload.offload(call_ident, request)
                if payload.is_large(request)
                else call_ident(request)
            )
        except BaseException:
            self._open.discard(seq)
            raise
        logged = self._replayed.get(seq)
        pending = self._pending.get(seq)
        expected = (
            logged.ident if logged is not None else pending.ident if pending is not None else None
        )
        if expected is None and self.prior is not None and seq <= self.prior.issued:
            expected = "?"  # made then, but neither answered nor waiting: not this script's run
        if expected is not None and expected != ident:
            self._open.discard(seq)
            raise RunStopped(
                [
                    _diverged(
                        f"call #{seq} of the resumed script is not the call #{seq} of the "
                        "earlier round (another tool or other input)"
                    )
                ]
            )
        if logged is not None:
            self._open.discard(seq)
            self._check()
            return logged
        self._idents[seq] = ident
        return None

    def leave(self, seq: int, reply: HostReply, entry: Mapping[str, Any]) -> None:
        """Call `seq` was answered live: its reply goes into every later state."""
        ident = self._idents.pop(seq, None)
        self._open.discard(seq)
        self._changes += 1
        if ident is not None:
            text = json.dumps(reply, ensure_ascii=True, separators=(",", ":"))
            self._calls[seq] = LoggedCall(seq, ident, text, dict(entry))
        self._check()

    def approver_for(self, seq: int) -> Approver:
        """The approver of call `seq`: the retry's answer to it, else wait for one (the run is
        suspended once nothing else is in flight: `suspension`)."""

        async def approve(request: ApprovalRequest) -> Answer:
            answer = self.answers.pop(seq, None)
            if isinstance(answer, Unusable):
                raise ApprovalUnavailable(answer)
            if answer is not None:
                return answer
            if self._unresumable is not None:
                raise ApprovalUnavailable(self._unresumable)
            if self.cannot_ask is not None:
                raise ApprovalUnavailable(self.cannot_ask)
            if self._handle is None:
                raise ApprovalUnavailable("the run cannot be paused to ask (no sandbox run)")
            waiting: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self._parked[seq] = _Parked(request, waiting)
            self._changes += 1
            try:
                self._check()
                return await waiting
            finally:
                self._parked.pop(seq, None)

        # Several calls waiting at once are asked together, in one input_required round: the
        # gate does not ask them one after another (ApprovalGate._ask).
        approve.asks_in_batches = True  # type: ignore[attr-defined]
        return approve

    # ------------------------------------------------------------------ end of the run

    def diagnostics(self, ended: list[diag.Diagnostic]) -> list[diag.Diagnostic]:
        """What the response says about the resume: the script ended before it made again the
        calls of the earlier round (unless a limit or a divergence already ended it)."""
        if self.prior is None or self.suspension is not None:
            return []
        missing = (set(self._replayed) | set(self._pending)) - self._entered
        if not missing or any(
            d.get("code")
            in (diag.DiagnosticCode.SANDBOX_LIMIT, diag.DiagnosticCode.RESUME_DIVERGED)
            for d in ended
        ):
            return []
        return [
            _diverged(
                f"the resumed script ended without making {len(missing)} of the calls the earlier "
                f"round made (the first: #{min(missing)})"
            )
        ]

    def expired_trace(self) -> list[TraceEntry]:
        """A late retry's toolTrace: the calls made, then the ones that waited, denied."""
        assert self.prior is not None
        entries = [cast(TraceEntry, dict(c.entry)) for c in self.prior.calls]
        for ask in self.prior.pending:
            entries.append(
                {
                    "serverId": ask.server,
                    "toolName": ask.tool,
                    "durationMs": 0,
                    "ok": False,
                    "error": "ToolCallError: APPROVAL_DENIED (timeout)",
                    "approval": "denied",
                }
            )
        return entries

    # ------------------------------------------------------------------ pausing

    def _check(self) -> None:
        """Pause the worker when every call the host has is answered or waits for an answer."""
        if (
            self._parked
            and not self._pausing
            and self.suspension is None
            and self._handle is not None
            and self._quiescent()
        ):
            self._pausing = True
            self._handle.pause()

    def _quiescent(self) -> bool:
        return self._open <= self._parked.keys()

    async def _decide(self, paused: dict[str, Any]) -> None:
        """The worker is paused (JS waits): suspend the run if it still waits only for answers,
        else let it go on (and pause it again if the calls changed meanwhile)."""
        seen = self._changes
        try:
            issued = paused.get("issued")
            issued = issued if isinstance(issued, int) and not isinstance(issued, bool) else 0
            # The calls the script made before the worker paused are read; their tasks start now.
            for _ in range(MAX_ARRIVAL_TURNS):
                if self._received >= issued:
                    break
                await asyncio.sleep(0)
            handle = self._handle
            if handle is None or self.suspension is not None:
                return
            if not (self._parked and self._received >= issued and self._quiescent()):
                handle.resume()
                return
            journal = paused.get("journal")
            reason = self._why_not_resumable(journal)
            token = None
            if reason is None:
                assert isinstance(journal, dict)
                state = self._state(issued, journal)
                data = (
                    await payload.offload(encode_state, state)
                    if len(self._calls) > 16
                    else encode_state(state)
                )
                token = self.seal(data)
                if len(token) > MAX_STATE_CHARS:
                    reason = (
                        f"a run waiting for an answer is carried by the client as a state of at most "
                        f"{MAX_STATE_CHARS // 1024} KiB (MAX_STATE_CHARS), and this one's would be "
                        f"{len(token) // 1024} KiB: the results of the calls made before it take that much"
                    )
            if reason is not None:
                self._give_up(reason)
                handle.resume()
                return
            assert token is not None
            if not (self._parked and self._quiescent()):  # changed while the state was sealed
                handle.resume()
                return
            self.suspension = Suspension(
                token,
                [
                    (f"{ASK_KEY_PREFIX}{seq}", parked.request)
                    for seq, parked in sorted(self._parked.items())
                ],
            )
            handle.stop([])
        finally:
            self._pausing = False
        if self.suspension is None and self._changes != seen:
            self._check()

    def _why_not_resumable(self, journal: Any) -> str | None:
        if not isinstance(journal, dict):
            return "the run keeps no journal to be resumed from"
        if journal.get("overflow"):
            return (
                "the script read the clock or took replies and timers more often than a run waiting for an "
                "answer can write down (MAX_JOURNAL_EVENTS / MAX_JOURNAL_CLOCK_RUNS of the sandbox worker)"
            )
        if self.prior is not None and self.prior.round >= MAX_ROUNDS:
            return (
                f"this run already waited for answers {MAX_ROUNDS} times (MAX_ROUNDS): have the script ask "
                "for several calls at once (Promise.all) rather than one after another"
            )
        return None

    def _give_up(self, reason: str) -> None:
        """The run cannot be suspended: its asks now, and any later one, are denied."""
        self._unresumable = reason
        for parked in list(self._parked.values()):
            if not parked.answer.done():
                parked.answer.set_exception(ApprovalUnavailable(reason))

    def _state(self, issued: int, journal: dict[str, Any]) -> RunState:
        deadline = self._deadline if self._deadline is not None else time.monotonic()
        pending = []
        for seq, parked in sorted(self._parked.items()):
            ident = self._idents.get(seq) or self._pending[seq].ident
            pending.append(
                PendingAsk(seq, ident, parked.request.server_id, parked.request.tool_name)
            )
        return RunState(
            tool=self.tool,
            args=self.args,
            deadline=time.time() + (deadline - time.monotonic()),
            nonce=urlsafe_b64(os.urandom(12)),
            round=(self.prior.round + 1) if self.prior is not None else 1,
            issued=max(issued, self.prior.issued if self.prior is not None else 0),
            calls=[self._calls[seq] for seq in sorted(self._calls)],
            pending=pending,
            journal={k: journal.get(k) for k in ("events", "clock", "seed", "clockBase")},
            for_run=sorted(self.approved_for_run),
        )


def _diverged(detail: str) -> diag.Diagnostic:
    return diag.diagnostic(
        diag.DiagnosticCode.RESUME_DIVERGED,
        f"the run could not be resumed: {detail}",
        hint=DIVERGED_HINT,
    )
