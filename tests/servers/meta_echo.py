"""Test server that records the `_meta` of every tools/call it receives (trace propagation).

`python meta_echo.py [stdio|http] [--port N] [--record FILE]`: each tools/call appends one JSON
line `{"tool": name, "meta": <the request's _meta>}` to FILE (when given) before it answers, so a
test can read what a client sent upstream (a W3C `traceparent`) whatever the script did with the
answer. Tools:

- `meta` (read-only): structured {"meta": <this request's _meta>};
- `reject` (read-only): a JSON-RPC error whose message quotes the server's secret (the
  environment variable META_SECRET): what a trace must show redacted;
- `publish` {text} (no annotations: approval "auto" asks first): structured {"published": text};
- `wait` {ms} (read-only): sleeps ms milliseconds (at most WAIT_MAX_MS), then {"waited": ms}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

import mcp_types as types
from _serve import run_lowlevel
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

WAIT_MAX_MS = 120_000  # bounds how long one call can hold a task
REJECT_CODE = -32010  # implementation-defined server error


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--record", default=None)
    own, rest = parser.parse_known_args()
    secret = os.environ.get("META_SECRET", "")
    read_only = types.ToolAnnotations(read_only_hint=True)

    def record(name: str, meta: Any) -> None:
        if own.record:
            with open(own.record, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"tool": name, "meta": meta}) + "\n")

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        empty = {"type": "object", "properties": {}}
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="meta",
                    description="The _meta this call arrived with.",
                    input_schema=empty,
                    annotations=read_only,
                ),
                types.Tool(
                    name="reject",
                    description="Always fails with a JSON-RPC error.",
                    input_schema=empty,
                    annotations=read_only,
                ),
                types.Tool(
                    name="publish",
                    description="Publish a text (changes things: asks first).",
                    input_schema={
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    },
                ),
                types.Tool(
                    name="wait",
                    description="Sleep ms milliseconds.",
                    annotations=read_only,
                    input_schema={
                        "type": "object",
                        "properties": {
                            "ms": {"type": "integer", "minimum": 0, "maximum": WAIT_MAX_MS}
                        },
                        "required": ["ms"],
                    },
                ),
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        meta = dict(ctx.meta or {})
        record(params.name, meta)
        args = params.arguments or {}
        if params.name == "meta":
            value: dict[str, Any] = {"meta": meta}
        elif params.name == "reject":
            raise MCPError(REJECT_CODE, f"upstream refused token {secret} for this request")
        elif params.name == "publish":
            value = {"published": args.get("text")}
        elif params.name == "wait":
            ms = args.get("ms")
            if not isinstance(ms, int) or not 0 <= ms <= WAIT_MAX_MS:
                raise MCPError(
                    types.INVALID_PARAMS, f"wait: ms must be an integer from 0 to {WAIT_MAX_MS}"
                )
            await asyncio.sleep(ms / 1000)
            value = {"waited": ms}
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(value))],
            structured_content=value,
        )

    server: Server[Any] = Server(
        "meta-echo", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    run_lowlevel(server, rest)


if __name__ == "__main__":
    main()
