"""serve's side of approvals on MCP 2026-07-28 connections: `input_required` results (SEP-2322).

On such a connection serve cannot send the client an elicitation/create request during a call.
A codemode.run whose script makes a call that needs approval answers instead with an
`InputRequiredResult`: one form elicitation per call waiting (all the calls waiting at once,
e.g. in one Promise.all, in one round), naming server, tool and redacted arguments as the
2025-11-25 elicitation does (serve.approval_form), and a `requestState` that carries the run
(runtime/host/resume.py) sealed with AES-256-GCM (the MCP SDK's `AESGCMRequestStateCodec`): the
client cannot read or alter it. The client's retry (the same call, the answers keyed as asked,
the state echoed) resumes the run on whichever instance it reaches, if that instance holds the
same key:

- `--state-secret` / CODEMODE_STATE_SECRET (at least MIN_SECRET_CHARS characters) is the key's
  secret: every instance behind a load balancer needs the same one. Without it each process
  makes a random key of its own, which suits one instance (stdio, one `--http` process); a
  state sealed by another key (another instance, or before a restart) is refused with a
  diagnostic that says to configure the shared secret.
- A state is bound to its call (tool name and a digest of its arguments), is used once per
  instance (MAX_REMEMBERED_STATES, a retry sent twice to one instance cannot send an approved
  call twice; across instances nothing is shared, so a client that sends one retry to two
  instances could), and carries the run's deadline (the run's timeoutMs counts the wait: a retry
  after it gets the timeout and nothing is sent).

A state that is refused runs nothing: the response is a §3.3 `APPROVAL_STATE_REJECTED` error
saying why (another key, altered, another call, used already) and what to do.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import response as resp

# The CLI resolves the secret before serving: the runtime (runtime/host/resume.py and what it
# imports) is imported by the functions that use it.
if TYPE_CHECKING:
    import mcp_types as types

    from codemode_gen.runtime.host.approval_request import Answer, ApprovalRequest, Unusable
    from codemode_gen.runtime.host.resume import Resumable, Suspension
    from codemode_gen.runtime.host.resume_state import RunState

__all__ = [
    "MIN_SECRET_CHARS",
    "STATE_SECRET_ENV",
    "StateRejected",
    "StateSealer",
    "input_required_result",
    "resolve_state_secret",
    "resumable_call",
]

#: The environment variable that carries the sealing secret (keeps it out of `ps`).
STATE_SECRET_ENV = "CODEMODE_STATE_SECRET"
#: Shortest secret accepted: the SDK's codec wants 32 bytes of secret randomness.
MIN_SECRET_CHARS = 32
#: Bounds the states remembered as used (their nonces), oldest forgotten first: a retry is
#: refused when its state was used on this instance already.
MAX_REMEMBERED_STATES = 4096
SECRET_HINT = (
    f"give every serve instance the same secret: serve --state-secret SECRET or {STATE_SECRET_ENV}=SECRET "
    "(at least 32 characters, e.g. `openssl rand -hex 32`; docs/deploy.md), then run the script again"
)


class StateRejected(Exception):
    """A requestState that cannot be used: `message` and `hint` for the diagnostic."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def resolve_state_secret(option: str | None, environ: Mapping[str, str]) -> str | None:
    """The sealing secret: `--state-secret`, else CODEMODE_STATE_SECRET; None when neither is
    set (a random key per process). One that is set but short is refused, not weakened."""
    if option is not None:
        source, value = "--state-secret", option
    elif STATE_SECRET_ENV in environ:  # set but empty is a mistake too (an unset shell variable)
        source, value = f"the environment variable {STATE_SECRET_ENV}", environ[STATE_SECRET_ENV]
    else:
        return None
    if len(value.strip()) < MIN_SECRET_CHARS:
        raise UserError(
            f"{source} is shorter than {MIN_SECRET_CHARS} characters: too weak to seal the state of runs that "
            "wait for approval",
            hint=f"use a random secret of at least {MIN_SECRET_CHARS} characters, e.g. "
            f"`export {STATE_SECRET_ENV}=$(openssl rand -hex 32)`, the same on every instance",
        )
    return value.strip()


class StateSealer:
    """Seals and opens requestState with one key: from `secret`, else random (this process)."""

    def __init__(self, secret: str | None = None) -> None:
        from mcp.server.request_state import AESGCMRequestStateCodec

        self.shared = secret is not None
        self._codec = AESGCMRequestStateCodec(
            [secret.encode("utf-8") if secret is not None else os.urandom(32)]
        )
        self._used: OrderedDict[str, None] = OrderedDict()

    def seal(self, data: bytes) -> str:
        token: str = self._codec.seal(data)
        return token

    def open(self, token: Any) -> RunState:
        """The state `token` seals; StateRejected when it was sealed with another key, altered,
        or is not a state of this version."""
        from mcp.server.request_state import InvalidRequestState

        from codemode_gen.runtime.host.resume_state import StateError, decode_state

        if not isinstance(token, str):
            raise StateRejected(
                "the requestState is not a string: it was not made by this server",
                "send requestState back exactly as it came, or run the script again",
            )
        try:
            data = self._codec.unseal(token)
        except InvalidRequestState as exc:
            if str(exc) == "unknown key":
                where = (
                    "another serve instance or an earlier process with another --state-secret"
                    if self.shared
                    else "another serve process (another instance behind a load balancer, or this one before a "
                    "restart): this instance has no --state-secret and seals with a random key of its own"
                )
                raise StateRejected(
                    f"the requestState of this approval was sealed with another key than this instance's: it comes "
                    f"from {where}. Nothing was run",
                    SECRET_HINT,
                ) from None
            raise StateRejected(
                "the requestState of this approval was altered or damaged (it fails authentication): nothing was run",
                "send requestState back exactly as it came; run the script again to be asked again",
            ) from None
        try:
            return decode_state(data)
        except StateError:
            raise StateRejected(
                "the requestState of this approval was made by another version of codemode-gen: nothing was run",
                "run the script again (every instance should run the same version)",
            ) from None

    def use(self, state: RunState) -> None:
        """Mark `state` used (a retry runs it); StateRejected when it was used already here."""
        if state.nonce in self._used:
            raise StateRejected(
                "this requestState was used already: the answers it carried were acted on by an earlier retry, "
                "and acting again could send an approved call twice. Nothing was run",
                "retry with the requestState of the latest result, or run the script again",
            )
        self._used[state.nonce] = None
        while len(self._used) > MAX_REMEMBERED_STATES:
            self._used.popitem(last=False)


def resumable_call(
    name: str,
    arguments: Mapping[str, Any] | None,
    request_state: Any,
    input_responses: Mapping[str, Any] | None,
    sealer: StateSealer,
    *,
    answer: Callable[[Any], Answer | Unusable],
    cannot_ask: str | None,
) -> Resumable | resp.Response:
    """The Resumable for a codemode.run call on a 2026-07-28 connection, or the §3.3 response
    refusing its requestState. `answer` turns one input response into True (accept), FOR_RUN
    (accept with the form's box ticked), False (decline, cancel) or why it cannot be used (Unusable); `cannot_ask`: why a call without an answer may
    not wait for one (None: it may)."""
    from codemode_gen.runtime.host.resume import ASK_KEY_PREFIX, MAX_ANSWERS, Resumable
    from codemode_gen.runtime.host.resume_state import arguments_digest

    args = arguments_digest(dict(arguments or {}))
    prior: RunState | None = None
    answers: dict[int, Answer | Unusable] = {}
    if request_state is not None:
        try:
            prior = sealer.open(request_state)
            if prior.tool != name or prior.args != args:
                raise StateRejected(
                    "the requestState belongs to another codemode.run call (its code, limits or "
                    "requestedCapabilities differ): nothing was run",
                    "retry with exactly the arguments of the call that returned this requestState",
                )
            sealer.use(prior)
        except StateRejected as exc:
            return resp.not_started(
                diag.diagnostic(
                    diag.DiagnosticCode.APPROVAL_STATE_REJECTED, exc.message, hint=exc.hint
                )
            )
        waiting = {f"{ASK_KEY_PREFIX}{ask.seq}": ask.seq for ask in prior.pending}
        for key, value in list((input_responses or {}).items())[:MAX_ANSWERS]:
            seq = waiting.get(key)
            if seq is not None:
                answers[seq] = answer(value)
    return Resumable(
        tool=name, args=args, seal=sealer.seal, prior=prior, answers=answers, cannot_ask=cannot_ask
    )


def input_required_result(
    suspension: Suspension, form: Callable[[ApprovalRequest], tuple[str, dict[str, Any]]]
) -> types.InputRequiredResult:
    """The result that asks the client's user about each call waiting (one form elicitation
    each, `form` giving message and schema) and carries the run's sealed state."""
    import mcp_types as types

    requests: dict[str, types.InputRequest] = {}
    for key, request in suspension.asks:
        message, schema = form(request)
        requests[key] = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
    return types.InputRequiredResult(input_requests=requests, request_state=suspension.token)
