"""Test server: OpenMCP/Dedalus-style scalar boxing, marked with `x-dedalus-box`, as raw JSON-RPC.

`python boxed_server.py [stdio|http|sse] [--port N]`. MCP structured content must be an object,
so a tool returning a scalar or a list answers `{"result": value}` and marks its outputSchema
with `"x-dedalus-box": {"field": "result"}` (the examples of "Scalar Boxing" in
schema-inference-from-annotations.md). Raw JSON-RPC, because the SDK's server would refuse to
send `broken`'s result, which does not match its own schema. Tools (all read-only):

- `greet` {name} -> str: `{"result": "Hello <name>"}`;
- `answer` {} -> int: `{"result": 7}`;
- `find` {query, limit?} -> list[str]: `{"result": [...]}` (titles containing `query`);
- `broken` {shape?}: declares the same box as `answer` but its result lacks the field:
  `{"value": 42}` (shape "object", the default), or no structuredContent at all, only the text
  "42" (shape "text").
"""

from __future__ import annotations

import json
from typing import Any

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
TITLES = ["milk and eggs", "buy milk", "call mom", "tea"]


def boxed(schema: dict[str, Any]) -> dict[str, Any]:
    """The output schema OpenMCP infers for a non-object return type."""
    return {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "x-dedalus-box": {"field": "result"},
    }


TOOLS: list[dict[str, Any]] = [
    {
        "name": "answer",
        "description": "The answer, as an integer.",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "outputSchema": boxed({"type": "integer"}),
        "annotations": READ_ONLY,
    },
    {
        "name": "broken",
        "description": "Claims a boxed integer but answers without the boxed field.",
        "inputSchema": {
            "type": "object",
            "properties": {"shape": {"enum": ["object", "text"], "default": "object"}},
            "additionalProperties": False,
        },
        "outputSchema": boxed({"type": "integer"}),
        "annotations": READ_ONLY,
    },
    {
        "name": "find",
        "description": "Titles containing the query.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        "outputSchema": boxed({"type": "array", "items": {"type": "string"}}),
        "annotations": READ_ONLY,
    },
    {
        "name": "greet",
        "description": "Greet someone by name.",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        "outputSchema": boxed({"type": "string"}),
        "annotations": READ_ONLY,
    },
]


def _structured(value: Any) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(value)}],
        "structuredContent": value,
        "isError": False,
    }


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def call_tool(name: str, arguments: Any) -> dict[str, Any]:
    args = arguments if isinstance(arguments, dict) else {}
    if name == "greet":
        if not isinstance(args.get("name"), str):
            return _error("greet: expected {name: string}")
        return _structured({"result": f"Hello {args['name']}"})
    if name == "answer":
        return _structured({"result": 7})
    if name == "find":
        if not isinstance(args.get("query"), str):
            return _error("find: expected {query: string}")
        found = [t for t in TITLES if args["query"] in t]
        limit = args.get("limit")
        return _structured({"result": found[:limit] if isinstance(limit, int) else found})
    if name == "broken":
        if args.get("shape") == "text":
            return {"content": [{"type": "text", "text": "42"}], "isError": False}
        return _structured({"value": 42})
    raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")


def build_server() -> RawServer:
    return RawServer(
        name="boxed",
        version="1.0.0",
        instructions="Scalar results boxed the OpenMCP way.",
        tools=TOOLS,
        call_tool=call_tool,
    )


if __name__ == "__main__":
    args = parse_args()
    run(build_server(), args.transport, args.host, args.port)
