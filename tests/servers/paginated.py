"""Test server whose tools/list is paginated: 25 tools over 3 pages (10, 10, 5).

`python paginated.py [stdio|http|sse] [--port N]`. Cursors are opaque strings; an unknown
cursor is a JSON-RPC error (-32602), as the spec asks. Clients must follow `nextCursor` to the
end (and must list every page before calling tools: the SDK re-fetches only page 1 for a tool
it has not seen). Every tool `item_NN` takes an optional integer `n` and answers with text.
`--tools N` serves N tools instead of 25 (bench/runtime.py uses it for many-server setups).
"""

from __future__ import annotations

import argparse
from typing import Any

import mcp_types as types
from _serve import run_lowlevel, tools_page
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

TOOL_COUNT = 25
PAGE_SIZE = 10
MAX_TOOLS = 10_000  # bounds the tool list (and memory) a --tools typo can ask for


def make_tools(count: int) -> list[types.Tool]:
    return [
        types.Tool(
            name=f"item_{i:02d}",
            description=f"Paginated tool number {i}.",
            input_schema={
                "type": "object",
                "properties": {"n": {"type": "integer", "description": "Any number, echoed back"}},
            },
            annotations=types.ToolAnnotations(read_only_hint=True),
        )
        for i in range(1, count + 1)
    ]


def tool_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_TOOLS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_TOOLS}")
    return count


def build_server(count: int = TOOL_COUNT) -> Server[Any]:
    tools = make_tools(count)
    names = {t.name for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return tools_page(tools, params, PAGE_SIZE)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        n = (params.arguments or {}).get("n")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{params.name} n={n}")]
        )

    return Server("paginated", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--tools", type=tool_count, default=TOOL_COUNT, metavar="N")
    known, rest = parser.parse_known_args()
    run_lowlevel(build_server(known.tools), rest)
