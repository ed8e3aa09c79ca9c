"""Asking the person at the MCP client about a tool call that needs a yes (serve's side of
runtime/host/approval.py).

A call under policy "ask"/"ask-once" is put to the client's user as a form: accept or decline,
and for an "ask" tool one checkbox approving its further calls for the rest of the run
(`approval_form`). The same form and the same reading of its answer (`approval_answer`) serve
both protocol versions: on 2025-11-25 it is an `elicitation/create` request on the run's own
stream (`elicitation_approver`); on 2026-07-28 an input_required result
(runtime/frontends/input_required.py). A client that cannot show a form, or a connection with no
way to ask, is told why and the call is denied (fail closed). Kept apart from the transport
(runtime/frontends/serve.py) because these rules are the approval contract with the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codemode_gen.runtime.jsonsafe import safe_name

if TYPE_CHECKING:
    from codemode_gen.runtime.host.approval_request import (
        Answer,
        ApprovalRequest,
        Approver,
        Unusable,
    )

__all__ = [
    "APPROVAL_ACTIONS",
    "APPROVAL_ACTIONS_FOR_RUN",
    "APPROVAL_SCHEMA",
    "FOR_RUN_FIELD",
    "NO_ELICITATION",
    "approval_answer",
    "approval_form",
    "elicitation_approver",
    "elicits_forms",
    "form_answer",
    "is_modern",
]

# The form of an approval request (elicitation/create, form mode): the answer is the action
# itself (accept / decline / cancel). Claude Code and the SDKs' clients take an object schema
# with no properties; an "ask" tool's form (`approval_form`) adds one boolean, FOR_RUN_FIELD:
# accepted with it true, the tool's further calls in this run go through unasked (approval.FOR_RUN).
APPROVAL_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
APPROVAL_ACTIONS = (
    "Accept to let this one call run; decline to refuse it (the script is told and goes on)."
)
FOR_RUN_FIELD = "allowForRun"
APPROVAL_ACTIONS_FOR_RUN = (
    "Accept to let this call run (tick the box to let its further calls in this run through too);"
    " decline to refuse it (the script is told and goes on)."
)


def approval_form(request: ApprovalRequest) -> tuple[str, dict[str, Any]]:
    """The message and requestedSchema asking about `request`: a plain accept/decline, or for
    an "ask" tool (`offers_run`) with a checkbox to approve its calls for the rest of the run."""
    from codemode_gen.display import display_string

    if not request.offers_run:
        return request.describe(APPROVAL_ACTIONS), APPROVAL_SCHEMA
    field = {
        "type": "boolean",
        "title": f"Allow every call of {display_string(request.tool_name)} for the rest of this run",
        "description": "Unticked: only this call.",
        "default": False,
    }
    return request.describe(APPROVAL_ACTIONS_FOR_RUN), {
        "type": "object",
        "properties": {FOR_RUN_FIELD: field},
    }


def form_answer(action: str, content: Mapping[str, Any] | None) -> Answer:
    """The approver's answer from an elicitation result: accept → yes (FOR_RUN when the box
    was ticked: only a literal true counts), decline or cancel → no."""
    from codemode_gen.runtime.host.approval_request import FOR_RUN

    if action != "accept":
        return False
    return FOR_RUN if isinstance(content, Mapping) and content.get(FOR_RUN_FIELD) is True else True


def approval_answer(result: Any) -> Answer | Unusable:
    """The user's answer to `approval_form`, the same on every protocol version
    (elicitation/create's result, an input_required retry's inputResponses entry): `form_answer`'s,
    or why the client's response cannot count as an answer."""
    from codemode_gen.runtime.host.approval_request import Unusable

    if isinstance(result, Mapping):
        action, content = result.get("action"), result.get("content")
    else:
        action, content = getattr(result, "action", None), getattr(result, "content", None)
    if action in ("accept", "decline", "cancel"):
        return form_answer(action, content if isinstance(content, Mapping) else None)
    return Unusable(
        "the MCP client's response to the approval request was not an elicitation result"
    )


def elicitation_approver(session: Any, request_id: Any = None) -> Approver:
    """An approver (runtime/host/approval.py) that asks the person at the MCP client: one
    `elicitation/create` request in form mode, on the stream of request `request_id` (the
    codemode.run being served). Accept → True (FOR_RUN with the form's box ticked: `form_answer`);
    decline or cancel → False. A connection that
    cannot carry a server-to-client request, or a client without form elicitation, raises
    ApprovalUnavailable: the call is denied and the message says why."""
    from mcp.shared.exceptions import MCPError, NoBackChannelError

    from codemode_gen.runtime.host.approval_request import ApprovalUnavailable, Unusable

    async def approve(request: ApprovalRequest) -> Answer:
        channel = session is not None and getattr(session, "can_send_request", False)
        # A 2026-07-28 client is asked here only when it cannot show the form (input_required
        # otherwise): say that, not that the transport has no back-channel. A stateless HTTP
        # request on 2025-11-25 does not know the client's capabilities: the channel is why.
        if session is not None and (channel or is_modern(session)) and not elicits_forms(session):
            raise ApprovalUnavailable(NO_ELICITATION)
        if not channel:
            raise ApprovalUnavailable(_no_channel(session))
        message, schema = approval_form(request)
        try:
            result = await session.elicit_form(message, schema, related_request_id=request_id)
        except NoBackChannelError:
            raise ApprovalUnavailable(_no_channel(session)) from None
        except MCPError as exc:  # e.g. a client that declared elicitation and then refused it
            raise ApprovalUnavailable(
                f"the MCP client could not ask the user: {safe_name(exc.message, 300)}"
            ) from None
        answer = approval_answer(result)
        if isinstance(answer, Unusable):
            raise ApprovalUnavailable(answer)
        return answer

    return approve


def _no_channel(session: Any) -> str:
    """Why a 2025-11-25 connection without a back-channel cannot ask: stateless HTTP (a
    2026-07-28 connection is asked through input_required instead: `is_modern`)."""
    return (
        "serve --http is stateless and cannot send a client on MCP 2025-11-25 an elicitation request (a "
        "client on MCP 2026-07-28 is asked through input_required, a 2025-11-25 one over stdio; serve "
        "--approve-all approves such calls without asking)"
    )


def is_modern(session: Any) -> bool:
    """Whether the connection speaks MCP 2026-07-28 or later (no server-to-client requests)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return str(getattr(session, "protocol_version", "") or "") in MODERN_PROTOCOL_VERSIONS


NO_ELICITATION = (
    "the MCP client does not support elicitation, so the user cannot be asked "
    "(serve --approve-all approves such calls without asking)"
)


def elicits_forms(session: Any) -> bool:
    """Whether the client declared form-mode elicitation: `elicitation: {}` (2025-06-18, forms
    only) or `elicitation: {form: {}}`; a client that declared only `url` cannot show a form."""
    elicitation = getattr(getattr(session, "client_capabilities", None), "elicitation", None)
    if elicitation is None:
        return False
    return (
        getattr(elicitation, "form", None) is not None or getattr(elicitation, "url", None) is None
    )
