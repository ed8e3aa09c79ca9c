"""`codemode-gen serve`: Code Mode as an MCP server with exactly one tool, `codemode.run` (§2).

An agent host connects to this over stdio and sees one tool whose description is the whole
system prompt Code Mode needs (§3.2.1, §3.2.3, §3.2.4, §3.5, §4.4, §5.3.2, §10.1): the
rules, the limits, the capability ids and the TypeScript declarations of every server. Runs
share one `CodeMode`, so MCP sessions stay open between runs (and are refreshed on
tools/list_changed, §8); each run still gets a fresh sandbox (§1.4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codemode_gen import __version__
from codemode_gen.runtime.codemode import CodeMode
from codemode_gen.runtime.prompt import DEFAULT_TOOL_NAME, system_prompt

__all__ = ["INPUT_SCHEMA", "OUTPUT_SCHEMA", "TOOL_NAME", "serve_stdio", "system_prompt"]

TOOL_NAME = DEFAULT_TOOL_NAME

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "JavaScript ES module source (top-level await allowed)."},
        "limits": {
            "type": "object",
            "description": "Optional execution limits; unknown keys are ignored.",
            "properties": {
                key: {"type": "integer", "minimum": 0}
                for key in ("timeoutMs", "maxMemoryBytes", "maxLogBytes", "maxToolCalls", "maxConcurrentCalls")
            },
        },
        "requestedCapabilities": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Server ids to connect before the script starts.",
        },
    },
    "required": ["code"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "object"}},
        "result": {},
        "diagnostics": {"type": "array", "items": {"type": "object"}},
        "toolTrace": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["logs", "result", "diagnostics"],
}


async def handle_run(cm: CodeMode, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """One codemode.run request → §3.3 response; a malformed request is a diagnostic, not a crash."""
    args = dict(arguments or {})
    code = args.get("code")
    problem = None
    if not isinstance(code, str):
        problem = ("/code", "`code` is required and must be a string of JavaScript")
    elif args.get("limits") is not None and not isinstance(args["limits"], dict):
        problem = ("/limits", "`limits` must be an object of integer limits")
    elif args.get("requestedCapabilities") is not None and not (
        isinstance(args["requestedCapabilities"], list)
        and all(isinstance(c, str) for c in args["requestedCapabilities"])
    ):
        problem = ("/requestedCapabilities", "`requestedCapabilities` must be an array of server ids")
    if problem is not None:
        return {
            "logs": [],
            "result": None,
            "diagnostics": [{
                "severity": "error", "code": "INVALID_REQUEST", "message": problem[1],
                "hint": "send {\"code\": \"<JavaScript>\"} with optional limits and requestedCapabilities",
                "path": problem[0],
            }],
            "toolTrace": [],
        }
    assert isinstance(code, str)
    return await cm.run(code, limits=args.get("limits"), requested_capabilities=args.get("requestedCapabilities"))


async def serve_stdio(config: Path, out: Path | None) -> None:
    """Serve codemode.run over stdio until the client disconnects."""
    import mcp_types as types
    from mcp.server import NotificationOptions, Server
    from mcp.server.stdio import stdio_server

    cm = CodeMode.from_config(config, out=out)
    async with cm:

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            await cm.prepare("", [])  # builds modules (and declarations) for servers out/ lacks
            return types.ListToolsResult(tools=[types.Tool(
                name=TOOL_NAME,
                title="Run Code Mode JavaScript",
                description=system_prompt(cm),
                input_schema=INPUT_SCHEMA,
                output_schema=OUTPUT_SCHEMA,
            )])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            if params.name != TOOL_NAME:
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"unknown tool {params.name!r}; the only tool is {TOOL_NAME}")],
                    is_error=True,
                )
            response = await handle_run(cm, params.arguments)
            text = json.dumps(response, ensure_ascii=False, sort_keys=True)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=response,
            )

        server: Any = Server(
            "codemode-gen",
            version=__version__,
            instructions="Use the codemode.run tool: write JavaScript that imports @codemode/servers/* modules.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions()))
