"""Test server that echoes the credentials it was given back everywhere a client records from.

`python echo_secrets.py [stdio|http] [--port N] [--api-key K] [--marker FILE] [--crash]`: the api key of
its command line, the environment variable ECHO_SECRET and the query string of the last HTTP
request (`?api_key=…` in a client's url) come back in the initialize result (instructions,
serverInfo title), in a tool description and an inputSchema property name, and in results
(text, structured values and object keys) and tool errors. With `--marker FILE` it appends its
pid to FILE when it starts, so a test can tell that no server was started at all. With
`--crash` it prints its command line to stderr and exits at once (a client quotes that). Tools:

- `whoami` (read-only, no arguments): everything it was given, as text and structured content;
- `echo` {message: string}: structured {"message": message};
- `fail`: a tool error (isError) whose text quotes the api key;
- `count` {n: integer ≥ 1}: structured {"n": n}, declared outputSchema {n: integer}; n = 13
  answers {"n": "13"} instead, which breaks that schema.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import unquote

import mcp_types as types
from _serve import run_lowlevel
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

DRIFTING_COUNT = 13  # `count` breaks its own outputSchema for this n

_SEEN: dict[str, str] = {"query": ""}  # the query string of the last HTTP request


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--marker", default=None)
    parser.add_argument("--crash", action="store_true")
    own, rest = parser.parse_known_args()
    if own.marker:
        with open(own.marker, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    if own.crash:
        print(f"echo_secrets: refusing to start with {sys.argv[1:]}", file=sys.stderr)
        sys.exit(1)
    api_key: str = own.api_key
    env_secret = os.environ.get("ECHO_SECRET", "")

    def given() -> dict[str, Any]:
        return {"argv": sys.argv[1:], "apiKey": api_key, "env": env_secret, "query": _SEEN["query"]}

    def instructions() -> str:
        return f"Started with api key {api_key}, ECHO_SECRET={env_secret}, url query {_SEEN['query']!r}."

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        read_only = types.ToolAnnotations(read_only_hint=True)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="whoami",
                    description=f"Who am I? Key {api_key}, env {env_secret}, query {_SEEN['query']}.",
                    input_schema={"type": "object", "properties": {}},
                    annotations=read_only,
                ),
                types.Tool(
                    name="echo",
                    description="Echo a message back.",
                    input_schema={
                        "type": "object",
                        "properties": {
                            "message": {"type": "string"},
                            **({api_key: {"type": "string"}} if api_key else {}),
                        },
                        "required": ["message"],
                    },
                    annotations=read_only,
                ),
                types.Tool(
                    name="fail",
                    description="Always fails with a tool error.",
                    input_schema={"type": "object", "properties": {}},
                ),
                types.Tool(
                    name="count",
                    description="Answer {n}.",
                    input_schema={
                        "type": "object",
                        "properties": {"n": {"type": "integer", "minimum": 1}},
                        "required": ["n"],
                    },
                    output_schema={
                        "type": "object",
                        "properties": {"n": {"type": "integer"}},
                        "required": ["n"],
                    },
                ),
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "whoami":
            value = {**given(), "byKey": {api_key or "none": env_secret}}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(value))],
                structured_content=value,
            )
        if params.name == "echo":
            value = {"message": args.get("message")}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(value))],
                structured_content=value,
            )
        if params.name == "fail":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"backend refused key {api_key}")],
                is_error=True,
            )
        if params.name == "count":
            n = args.get("n")
            value = {"n": str(n) if n == DRIFTING_COUNT else n}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps(value))],
                structured_content=value,
            )
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")

    server: Server[Any] = Server(
        "echo-secrets",
        version="1.0.0",
        title=f"echo secrets ({api_key})",
        instructions=instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )

    def remember_query(app: Any) -> Any:
        async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                _SEEN["query"] = unquote(scope.get("query_string", b"").decode("latin-1"))
                server.instructions = instructions()
            await app(scope, receive, send)

        return wrapped

    run_lowlevel(server, rest, wrap=remember_query)


if __name__ == "__main__":
    main()
