"""A ledger whose every call is written down: for tests of approvals that must never send a call
twice, across rounds and instances (tests/runtime/frontends/test_serve_input_required.py).

`python ledger_server.py [stdio|http] [--port N] --calls-log FILE`: each tools/call appends one
JSON line `{"tool", "arguments"}` to FILE before it is answered, so a test reads what the
server itself received. Over http one process (one ledger) serves every instance of serve.

Tools: `balance` (read-only: allowed), `record` (destructiveHint: true, the tests' codemode.toml
allows it: sent without asking, and must still never be sent twice), `transfer` and `close`
(destructive: asked), `blob` (read-only: `n` random hex characters, for states too big to
carry), `wait` (read-only: answers after `ms`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import Any

import mcp_types as types
from _serve import run_lowlevel
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

READ_ONLY = types.ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
# Bounds what one call can make the server hold: blob's size and wait's delay.
MAX_BLOB_CHARS = 4 * 1024 * 1024
MAX_WAIT_MS = 60_000


def _tool(name: str, properties: dict[str, Any], annotations: types.ToolAnnotations) -> types.Tool:
    return types.Tool(
        name=name,
        description=f"ledger {name}",
        annotations=annotations,
        input_schema={"type": "object", "properties": properties, "required": sorted(properties)},
    )


TOOLS = [
    _tool("balance", {}, READ_ONLY),
    _tool("record", {"text": {"type": "string"}}, DESTRUCTIVE),
    _tool("transfer", {"to": {"type": "string"}, "amount": {"type": "integer"}}, DESTRUCTIVE),
    _tool("close", {"account": {"type": "string"}}, DESTRUCTIVE),
    _tool("blob", {"n": {"type": "integer"}}, READ_ONLY),
    _tool("wait", {"ms": {"type": "integer"}}, READ_ONLY),
]


def build_server(calls_log: Path) -> Server[Any]:
    state = {"balance": 100}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = dict(params.arguments or {})
        with calls_log.open("a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": params.name, "arguments": args}) + "\n")
        if params.name == "balance":
            value: Any = {"balance": state["balance"]}
        elif params.name == "record":
            value = {"recorded": str(args.get("text"))}
        elif params.name == "transfer":
            state["balance"] -= int(args.get("amount", 0))
            value = {"to": args.get("to"), "balance": state["balance"]}
        elif params.name == "close":
            value = {"closed": args.get("account")}
        elif params.name == "blob":
            value = {"hex": os.urandom(min(int(args.get("n", 0)), MAX_BLOB_CHARS) // 2).hex()}
        elif params.name == "wait":
            await asyncio.sleep(min(int(args.get("ms", 0)), MAX_WAIT_MS) / 1000)
            value = {"waited": args.get("ms")}
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(value))],
            structured_content=value,
        )

    return Server("ledger", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--calls-log", type=Path, required=True)
    known, rest = parser.parse_known_args()
    run_lowlevel(build_server(known.calls_log), rest)
