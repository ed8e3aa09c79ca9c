"""A stdio MCP server that answers some calls with frames a client cannot use (no SDK).

`python bad_frames_server.py [stdio] [--deep-tool]`. It writes every frame as raw bytes, so it
can send what no JSON library would: invalid UTF-8, lone-surrogate escapes, JSON nested far
too deeply, lines that are not JSON, responses with both `result` and `error`. Each tool sends
one kind of bad frame *for its own call*; `good` always answers well, so a test can check
that the session still serves the next call. Every tool without required arguments is
read-only, so `record` probes them all.

- `good`: `{"calls": n}` (n counts every tools/call);
- `invalid_utf8` / `lone_surrogate`: a text result with invalid UTF-8 bytes / `\\ud800`-style
  escapes (usable once repaired: U+FFFD);
- `deep_result`: structuredContent nested DEEP levels; `deep_id_last`: the same with `"id"`
  as the last member, after the nesting;
- `not_json`: a truncated, unparseable answer that still starts with its id;
- `garbage_then_good`: a line of plain text (no id to blame), then a good answer;
- `both`: `result` and `error` together; `neither`: just the id;
- `non_json_number`: `NaN` in structuredContent;
- `bad_notification`: a notifications/message nested DEEP levels, then a good answer;
- `huge` {bytes}: a text result about that many bytes long;
- `echo` {value}: structuredContent `{"value": value}`.

`--deep-tool` adds `deep_schema`, whose inputSchema nests DEEP levels, and `odd_text`, whose
description holds invalid UTF-8 and a lone surrogate, to tools/list (both answer well).
"""

from __future__ import annotations

import json
import sys
from typing import Any

# Deeper than the client's frame limit (200 levels, envelope included), by a wide margin.
DEEP = 300
# Bounds the `huge` tool's answer (the test lowers the client's frame limit instead).
HUGE_MAX = 16 * 1024 * 1024

READ_ONLY = {"readOnlyHint": True}
NO_ARGS = {"type": "object", "properties": {}}


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def deep_schema_text(depth: int) -> str:
    inner = '{"type":"string"}'
    for _ in range(depth // 2):
        inner = '{"type":"object","properties":{"x":' + inner + "}}"
    return inner


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": schema or NO_ARGS,
        "annotations": READ_ONLY,
    }


TOOLS = [
    tool("good", "Answers well: {calls}."),
    tool("invalid_utf8", "A text result with invalid UTF-8 bytes."),
    tool("lone_surrogate", "A text result with lone-surrogate escapes."),
    tool("deep_result", "structuredContent nested far too deeply."),
    tool("deep_id_last", "structuredContent nested far too deeply, id last."),
    tool("not_json", "An answer that is not JSON."),
    tool("garbage_then_good", "A line of plain text, then a good answer."),
    tool("both", "A response with both result and error."),
    tool("neither", "A response with neither result nor error."),
    tool("non_json_number", "NaN in structuredContent."),
    tool("bad_notification", "A too-deep notification, then a good answer."),
    {
        "name": "huge",
        "description": "A text result about `bytes` long.",
        "inputSchema": {
            "type": "object",
            "properties": {"bytes": {"type": "integer", "minimum": 0}},
            "required": ["bytes"],
        },
    },
    {
        "name": "echo",
        "description": "structuredContent {value}.",
        "inputSchema": {"type": "object", "properties": {"value": {}}, "required": ["value"]},
    },
]


def write(raw: bytes) -> None:
    sys.stdout.buffer.write(raw + b"\n")
    sys.stdout.buffer.flush()


def envelope(rid: Any) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b","


def reply(rid: Any, result: dict[str, Any]) -> None:
    write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode())


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def tools_list_bytes(rid: Any, deep_tool: bool) -> bytes:
    items = [json.dumps(t).encode() for t in TOOLS]
    if deep_tool:
        items.append(
            b'{"name":"deep_schema","description":"Its schema is nested far too deeply.",'
            b'"inputSchema":'
            + deep_schema_text(DEEP).encode()
            + b',"annotations":{"readOnlyHint":true}}'
        )
        items.append(
            b'{"name":"odd_text","description":"caf\xc3\xa9 \xff bytes \\ud800 escape",'
            b'"inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}'
        )
    return envelope(rid) + b'"result":{"tools":[' + b",".join(items) + b"]}}"


def call(rid: Any, name: Any, args: Any, calls: int) -> None:
    args = args if isinstance(args, dict) else {}
    head = envelope(rid)
    if name == "good":
        reply(
            rid,
            {
                "content": [{"type": "text", "text": f"ok {calls}"}],
                "structuredContent": {"calls": calls},
                "isError": False,
            },
        )
    elif name == "invalid_utf8":
        write(
            head
            + b'"result":{"content":[{"type":"text","text":"caf\xc3\xa9 \xff\xfe end"}],"isError":false}}'
        )
    elif name == "lone_surrogate":
        write(
            head
            + b'"result":{"content":[{"type":"text","text":"a\\ud800b \\udc00 \\ud83d\\ude00 \\\\ud800"}],'
            b'"isError":false}}'
        )
    elif name == "deep_result":
        write(
            head
            + b'"result":{"content":[],"structuredContent":'
            + nested_text(DEEP).encode()
            + b"}}"
        )
    elif name == "deep_id_last":
        write(
            b'{"jsonrpc":"2.0","result":{"content":[],"structuredContent":'
            + nested_text(DEEP).encode()
            + b'},"id":'
            + json.dumps(rid).encode()
            + b"}"
        )
    elif name == "not_json":
        write(head + b'"result":{"content":[{"type":"text" "oops"')
    elif name == "garbage_then_good":
        write(b"this line is not JSON at all")
        reply(rid, text_result("after the garbage"))
    elif name == "both":
        write(
            head
            + b'"result":'
            + json.dumps(text_result("x")).encode()
            + b',"error":{"code":-32000,"message":"also an error"}}'
        )
    elif name == "neither":
        write(head[:-1] + b"}")
    elif name == "non_json_number":
        write(head + b'"result":{"content":[],"structuredContent":{"x":NaN}}}')
    elif name == "bad_notification":
        write(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":'
            + nested_text(DEEP).encode()
            + b"}}"
        )
        reply(rid, text_result("after the notification"))
    elif name == "huge":
        size = min(max(int(args.get("bytes", 0)), 0), HUGE_MAX)
        write(
            head
            + b'"result":{"content":[{"type":"text","text":"'
            + b"x" * size
            + b'"}],"isError":false}}'
        )
    elif name in ("deep_schema", "odd_text"):  # listed with --deep-tool; they answer well
        reply(rid, text_result(f"{name} ok"))
    elif name == "echo":
        reply(
            rid,
            {"content": [], "structuredContent": {"value": args.get("value")}, "isError": False},
        )
    else:
        write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32602, "message": f"Unknown tool: {name}"},
                }
            ).encode()
        )


def main() -> None:
    deep_tool = "--deep-tool" in sys.argv[1:]
    calls = 0
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message:
            continue  # notifications (initialized, cancelled)
        rid, method, params = message["id"], message.get("method"), message.get("params") or {}
        if method == "initialize":
            reply(
                rid,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bad-frames", "version": "1.0.0"},
                },
            )
        elif method == "ping":
            reply(rid, {})
        elif method == "tools/list":
            write(tools_list_bytes(rid, deep_tool))
        elif method == "tools/call":
            calls += 1
            call(rid, params.get("name"), params.get("arguments"), calls)
        else:
            write(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32601, "message": f"Method not found: {method}"},
                    }
                ).encode()
            )


if __name__ == "__main__":
    main()
