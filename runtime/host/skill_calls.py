"""`saveSkill` of `@codemode/skills` (serve --skills-writable): a script proposes a skill, a
person approves it, and only then is skills/<name>.ts|js written.

The host side of that one pseudo-tool, apart from the calls that go to MCP servers: it is asked
through the run's approval channel whatever the policies and --approve-all say (`always_ask`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol

from codemode_gen.config import ServerConfig
from codemode_gen.errors import UserError
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.approval import (
    DENIED_CODE,
    ApprovalGate,
    ApprovalRequest,
    Approver,
    denial_message,
)
from codemode_gen.runtime.host.call_replies import error_reply
from codemode_gen.runtime.sandbox.protocol import HostReply

# `@codemode/skills` (serve --skills-writable): the server id its `saveSkill` calls the host
# with (no configured server can have it: a module path has no `@`), and the function's name.
SKILLS_HOST_ID = "@skills"
SAVE_SKILL_TOOL = "saveSkill"
# What a person is told of a proposal: it adds a file (nothing is overwritten), no world outside.
SAVE_SKILL_ANNOTATIONS = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "idempotentHint": False,
    "openWorldHint": False,
}


class SkillWriter(Protocol):
    """Checks and writes a proposed skill (runtime/host/skills.py `SkillSaver`)."""

    config: ServerConfig  # the pseudo-server the approval request names

    def check(self, proposal: Any) -> tuple[tuple[str, str] | None, dict[str, Any]]: ...

    def write(self, arguments: dict[str, Any]) -> dict[str, Any]: ...


async def save_skill(
    writer: SkillWriter,
    approval: ApprovalGate | None,
    tool_name: str,
    request: dict[str, Any],
    gate: dict[str, str],
    *,
    approve: Approver | None,
    session: Hashable,
    deadline: float | None,
    on_wait: Callable[[ApprovalRequest], None],
) -> HostReply:
    """`saveSkill` of `@codemode/skills`: the proposal is checked (name, size, one documented
    async function), then a person is asked through the run's approval channel (whatever
    the policies and --approve-all say), and only a yes writes skills/<name>.ts|js."""
    shown = jsonsafe.safe_name(tool_name)
    if tool_name != SAVE_SKILL_TOOL or approval is None:
        return error_reply(
            "ToolCallError",
            f"@codemode/skills has no function {shown!r}",
            "call saveSkill({ name, source, lang? })",
            serverId=SKILLS_HOST_ID,
            toolName=shown,
        )
    problem, arguments = writer.check(request.get("input"))
    if problem is not None:
        return error_reply(
            "ToolCallError",
            f"saveSkill: {problem[0]}",
            problem[1],
            serverId=SKILLS_HOST_ID,
            toolName=shown,
            _summary="ToolCallError: invalid skill",
        )
    gate["approval"] = "pending"
    outcome = await approval.decide(
        server_id=SKILLS_HOST_ID,
        config=writer.config,
        tool_name=SAVE_SKILL_TOOL,
        arguments=arguments,
        annotations=SAVE_SKILL_ANNOTATIONS,
        approve=approve,
        session=session,
        deadline=deadline,
        on_wait=on_wait,
        always_ask=True,
    )
    gate["approval"] = outcome.decision
    if not outcome.sent:
        message, hint = denial_message(outcome, SKILLS_HOST_ID, writer.config.id, SAVE_SKILL_TOOL)
        return error_reply(
            "ToolCallError",
            message + " (nothing was written)",
            hint,
            serverId=SKILLS_HOST_ID,
            toolName=shown,
            code=DENIED_CODE,
            _summary=f"ToolCallError: {DENIED_CODE} ({outcome.reason})",
        )
    try:
        written = writer.write(arguments)
    except UserError as exc:
        return error_reply(
            "ToolCallError",
            f"saveSkill: {exc.message}",
            exc.hint or "fix the proposal",
            serverId=SKILLS_HOST_ID,
            toolName=shown,
            _summary="ToolCallError: not written",
        )
    return {"ok": True, "value": written}
