"""Test server that sends what the SDK's strict client models reject, written as raw JSON-RPC.

`python bad_schema.py [stdio|http|sse] [--port N]`. No SDK on the server side: the SDK would
refuse to send these messages. Tools:

- `good_echo` {text}: an ordinary tool, so a lenient client can still use the server;
- `shout`: `inputSchema` is `{"type": "string"}` (non-object root): the arguments ARE the
  string, and it answers with the upper-cased text;
- `widget`: answers with an unknown content block type (`{"type": "widget", ...}`) next to a
  text block.

One bad tool makes `ClientSession.list_tools()` raise for the whole server; codemode-gen must
fall back to raw JSON-RPC instead of losing the server. http serves a minimal Streamable HTTP
endpoint at /mcp that answers every POST with one JSON body (no SSE, no session id); sse
serves the legacy HTTP+SSE transport at /sse (see `_rawrpc.py`).
"""

from __future__ import annotations

from typing import Any

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

TOOLS: list[dict[str, Any]] = [
    {
        "name": "good_echo",
        "description": "Echo a text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "shout",
        "description": "Upper-case a string. The arguments are the string itself.",
        "inputSchema": {"type": "string", "minLength": 1},
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "widget",
        "description": "Render a gauge widget (a content type only this server's UI knows).",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
]


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


async def call_tool(name: str, arguments: Any) -> dict[str, Any]:
    if name == "good_echo":
        if not isinstance(arguments, dict) or not isinstance(arguments.get("text"), str):
            return _text("good_echo: expected {text: string}", error=True)
        return _text(arguments["text"])
    if name == "shout":
        if not isinstance(arguments, str):
            kind = type(arguments).__name__
            return _text(f"shout: arguments must be a string, got {kind}", error=True)
        return _text(arguments.upper())
    if name == "widget":
        return {
            "content": [
                {"type": "widget", "widget": {"kind": "gauge", "value": 42, "max": 100}},
                {"type": "text", "text": "gauge at 42%"},
            ],
            "isError": False,
        }
    raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")


def build_server() -> RawServer:
    return RawServer(
        name="bad-schema",
        version="0.0.1",
        instructions="A server whose tool list breaks strict clients.",
        tools=TOOLS,
        call_tool=call_tool,
    )


if __name__ == "__main__":
    args = parse_args()
    run(build_server(), args.transport, args.host, args.port)
