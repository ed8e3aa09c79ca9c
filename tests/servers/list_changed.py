"""Test server whose tool list changes at runtime.

`python list_changed.py [stdio|http|sse] [--port N]`. `add_tool(name)` registers a new tool
`name` (answering "hello from <name>") and announces it both ways the SDK knows:
`notifications/tools/list_changed` on the session (handshake-era clients) and the
subscriptions bus (`subscriptions/listen`, 2026-07-28 clients). Like most MCPServer servers it
advertises `tools.listChanged: false` yet sends the notification; clients must not gate on it.
`ping` answers "pong".
"""

from __future__ import annotations

import re

from _serve import run_mcpserver
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

MAX_ADDED_TOOLS = 100  # bounds the tool list a looping client can grow
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def build_server() -> MCPServer:
    app = MCPServer("list-changed", version="1.0.0", log_level="WARNING")
    added: list[str] = []

    @app.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def ping() -> str:
        """Answer "pong"."""
        return "pong"

    @app.tool(
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False),
        structured_output=False,
    )
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a new tool called `name` and notify clients that the tool list changed."""
        if not TOOL_NAME.match(name):
            raise ToolError(f"invalid tool name {name!r}: use 1-64 of A-Z a-z 0-9 _ . -")
        if name in added or name in ("ping", "add_tool"):
            raise ToolError(f"tool {name!r} already exists")
        if len(added) >= MAX_ADDED_TOOLS:
            raise ToolError(f"at most {MAX_ADDED_TOOLS} tools can be added")

        def greet() -> str:
            return f"hello from {name}"

        app.add_tool(
            greet,
            name=name,
            description=f"Added at runtime by add_tool({name!r}).",
            structured_output=False,
        )
        added.append(name)
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return f"added {name}; {len(added) + 2} tools now"

    return app


if __name__ == "__main__":
    run_mcpserver(build_server())
