"""The host's replies to a script's tool call (DESIGN.md, sandbox ⇄ host): the `@codemode/errors`
class and fields a failure becomes, the trace entry's one-line `error`, and what a successful
call's wire result gives the script (§5.3.2 unwrapping, the depth bound).

Pure functions over untrusted text (a server's messages, a script's names): each reply's texts
are cut and sanitised here, so whatever the bridge sends back is bounded and safe to show.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemode_gen.generator.unwrap import UnwrapMode, unbox_value, unwrap_result
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.host.catalog import ServerView, ToolView
from codemode_gen.runtime.limits import MAX_JSON_DEPTH, MAX_NAME_CHARS, MAX_TRACE_ERROR_CHARS
from codemode_gen.runtime.sandbox.protocol import HostReply

# Bounds how much of a server's error text is copied into an exception message: a server can
# answer with megabytes, and the message lands in the agent's context.
MAX_ERROR_TEXT_CHARS = 2000


def error_reply(error_class: str, message: str, hint: str, **fields: Any) -> HostReply:
    body: dict[str, Any] = {"errorClass": error_class, "message": message, "hint": hint}
    body.update({k: v for k, v in fields.items() if v is not None})
    return {"ok": False, "error": body}


def clip_server_text(text: str) -> str:
    return jsonsafe.clip(text, MAX_ERROR_TEXT_CHARS)


def trace_error(text: str) -> str:
    """A trace entry's `error` (§3.3.2 "string summary": the error class and the server's own
    message): on one line (white space folded), cut to MAX_TRACE_ERROR_CHARS with a marker,
    UTF-8- and terminal-safe (`jsonsafe.safe_name`)."""
    folded = " ".join(text.split())
    if len(folded) > MAX_TRACE_ERROR_CHARS:
        folded = folded[:MAX_TRACE_ERROR_CHARS] + f"…[+{len(folded) - MAX_TRACE_ERROR_CHARS} chars]"
    return jsonsafe.safe_name(folded, len(folded))


def near_miss(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one, if any is close."""
    if len(name) > MAX_NAME_CHARS:  # difflib is quadratic in the name's length: no near miss
        return None
    import difflib  # here: only a mistyped name asks

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


def examine(
    result: dict[str, Any], mode: UnwrapMode, tool: ToolView, depth: int | None = None
) -> tuple[str, Any]:
    """What a successful call's wire result gives the script (pure: may run in a thread):
    ("deep", None) for one nested past MAX_JSON_DEPTH, ("error", (message text, content)) for an
    isError result, else ("value", (the §5.3.2 value, whether a boxed tool's box was missing,
    whether the value was parsed from the result's text)). `depth`: the result's, when the
    caller has measured it (payload.depth_if_small)."""
    # Nothing nested deeper than MAX_JSON_DEPTH reaches the script (which would pass it on
    # to its result, a log or another tool): the result object adds one level.
    if (
        depth > MAX_JSON_DEPTH + 1
        if depth is not None
        else jsonsafe.json_depth_exceeds(result, MAX_JSON_DEPTH + 1)
    ):
        return "deep", None
    if result.get("isError"):
        text = _content_text(result) or "the tool reported an error without a message"
        content = result.get("content") if isinstance(result.get("content"), list) else []
        return "error", (clip_server_text(text), content)
    value = unwrap_result(result, mode)
    parsed_text = (
        mode == "json" and value is not result and value is not result.get("structuredContent")
    )
    if parsed_text and jsonsafe.json_depth_exceeds(value, MAX_JSON_DEPTH):
        return "deep", None
    mismatch = False
    if tool.unboxed and tool.box is not None:  # after §5.3.2, as documented (unbox = true)
        unboxed, value = unbox_value(value, tool.box)
        mismatch = not unboxed
    return "value", (value, mismatch, parsed_text)


def server_not_found(server_id: str, view: ServerView | None, known: list[str]) -> HostReply:
    """The reply to a call of a server the run does not have (`known`: the ones it has)."""
    shown = jsonsafe.safe_name(server_id)
    if view is not None:  # in out/ but not configured
        message = f"server '{shown}' is in out/ but not configured in the MCP config"
        hint = f"add '{shown}' to .mcp.json, or use one of: {', '.join(known) or 'no servers'}"
    else:
        message = f"no server '{shown}'"
        close = near_miss(server_id, known)
        hint = (
            f"did you mean '{close}'? listServers() from @codemode/discovery lists every server"
            if close
            else "call listServers() from @codemode/discovery to see the available server ids"
        )
    # The summary names the kind, not the server again: serverId is beside it in the entry.
    kind = "not configured" if view is not None else "no such server"
    return error_reply(
        "ServerNotFoundError",
        message,
        hint,
        serverId=shown,
        _summary=f"ServerNotFoundError: {kind}",
    )


def tool_not_found(view: ServerView, tool_name: str, *, blocked: bool) -> HostReply:
    """The reply to a call of a tool the server does not have (or the host blocks)."""
    shown = jsonsafe.safe_name(tool_name)
    if blocked:
        message = (
            f"tool '{shown}' of server '{view.server_id}' is blocked by the host's configuration"
        )
        hint = "do this another way: the host does not allow this tool"
    else:
        message = f"server '{view.server_id}' has no tool '{shown}'"
        close = near_miss(tool_name, view.tools)
        hint = (
            f"did you mean '{close}'?"
            if close
            else f"call listTools('{view.server_id}') from @codemode/discovery to see its tools"
        )
    kind = "blocked by the host's configuration" if blocked else "no such tool"
    return error_reply(
        "ToolNotFoundError",
        message,
        hint,
        serverId=view.server_id,
        toolName=shown,
        _summary=f"ToolNotFoundError: {kind}",
    )
