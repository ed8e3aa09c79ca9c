"""Test server whose tools/list is paginated: 25 tools over 3 pages (10, 10, 5).

`python paginated.py [stdio|http|sse] [--port N]`. Cursors are opaque strings; an unknown
cursor is a JSON-RPC error (-32602), as the spec asks. Clients must follow `nextCursor` to the
end (and must list every page before calling tools: the SDK re-fetches only page 1 for a tool
it has not seen). Every tool `item_NN` takes an optional integer `n` and answers with text.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import mcp_types as types
from _serve import run_lowlevel
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

TOOL_COUNT = 25
PAGE_SIZE = 10

TOOLS = [
    types.Tool(
        name=f"item_{i:02d}",
        description=f"Paginated tool number {i}.",
        input_schema={
            "type": "object",
            "properties": {"n": {"type": "integer", "description": "Any number, echoed back"}},
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    )
    for i in range(1, TOOL_COUNT + 1)
]
BY_NAME = {t.name: t for t in TOOLS}


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode()


def decode_cursor(cursor: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["offset"]
    except (ValueError, KeyError, TypeError):
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
    if not isinstance(offset, int) or not 0 <= offset < TOOL_COUNT:
        raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
    return offset


def build_server() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        offset = decode_cursor(params.cursor) if params and params.cursor else 0
        end = offset + PAGE_SIZE
        return types.ListToolsResult(
            tools=TOOLS[offset:end], next_cursor=encode_cursor(end) if end < TOOL_COUNT else None
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in BY_NAME:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        n = (params.arguments or {}).get("n")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{params.name} n={n}")]
        )

    return Server("paginated", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    run_lowlevel(build_server())
