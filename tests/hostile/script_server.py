"""MCP test server for the hostile-script tests (tests/hostile/test_scripts_*.py).

`python script_server.py [stdio|http|sse] [--port N]`, on the raw JSON-RPC core of
tests/servers/_rawrpc.py (no SDK), so it can answer with shapes the SDK would refuse. It
behaves well itself: what is hostile here is the script that calls it. Tools:

- `tick`: counts calls (`{"ticks": n}`); `ticks`: the count so far without counting, so a test
  can see whether a call the script made ever reached the server;
- `echo` {value}: structured `{"value": value}`;
- `deep` {depth, shape}: a result nested `depth` levels: `shape` "structured" (structuredContent),
  "text" (one text block holding JSON text nested that deep, a string on the wire) or "error"
  (an isError result whose content block carries the nesting);
- `records` {items: [{id: integer, tags: [string]}], mode?}: a schema whose errors are costly to
  rank (objects in an array, `anyOf`, `additionalProperties: false`), for validation bombs;
- `bag` {items: unique objects, each `{id}` or `{a}`}: `uniqueItems` over objects (quadratic in
  jsonschema's own check) and an `anyOf` per item: costly to validate even when valid;
- `sleep` {ms}: waits, then `{"slept": ms}`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

# Bounds what one `deep` call builds: deeper than any limit under test, small enough to be quick.
DEEP_MAX = 5_000
# Bounds how long one `sleep` call can pin a task.
SLEEP_MAX_MS = 60_000

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


def _obj(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = required
    return schema


RECORD = _obj(
    {
        "id": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}},
        "ref": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "integer"}]},
    },
    ["id"],
    additionalProperties=False,
)

TOOLS: list[dict[str, Any]] = [
    {
        "name": "tick",
        "description": "Count calls.",
        "inputSchema": _obj({}),
        "annotations": {"readOnlyHint": False, "destructiveHint": False},
    },
    {
        "name": "ticks",
        "description": "Calls of tick so far.",
        "inputSchema": _obj({}),
        "annotations": READ_ONLY,
    },
    {
        "name": "echo",
        "description": "Answer {value}.",
        "inputSchema": _obj({"value": {}}, ["value"]),
        "annotations": READ_ONLY,
    },
    {
        "name": "deep",
        "description": "A result nested `depth` levels.",
        "inputSchema": _obj(
            {
                "depth": {"type": "integer", "minimum": 0, "maximum": DEEP_MAX},
                "shape": {"enum": ["structured", "text", "error"]},
            },
            ["depth"],
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "records",
        "description": "Store records.",
        "inputSchema": _obj(
            {"items": {"type": "array", "items": RECORD, "maxItems": 1000}}, ["items"]
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "bag",
        "description": "Store distinct items.",
        "inputSchema": _obj(
            {
                "items": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {
                        "anyOf": [
                            _obj({"a": {"type": "string"}}, ["a"]),
                            _obj({"id": {"type": "integer", "minimum": 0}}, ["id"]),
                        ]
                    },
                }
            },
            ["items"],
        ),
        "annotations": READ_ONLY,
    },
    {
        "name": "sleep",
        "description": "Wait ms milliseconds.",
        "inputSchema": _obj(
            {"ms": {"type": "integer", "minimum": 0, "maximum": SLEEP_MAX_MS}}, ["ms"]
        ),
        "annotations": READ_ONLY,
    },
]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def structured(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": "ok"}],
        "structuredContent": value,
        "isError": False,
    }


def build_server() -> RawServer:
    counts = {"ticks": 0}

    async def call_tool(name: str, args: Any) -> dict[str, Any]:
        args = args if isinstance(args, dict) else {}
        if name == "tick":
            counts["ticks"] += 1
            return structured({"ticks": counts["ticks"]})
        if name == "ticks":
            return structured({"ticks": counts["ticks"]})
        if name == "echo":
            return structured({"value": args.get("value")})
        if name == "deep":
            depth = min(int(args.get("depth", 0)), DEEP_MAX)
            shape = args.get("shape", "structured")
            if shape == "text":
                text = "[" * depth + "]" * depth
                return {"content": [{"type": "text", "text": text}], "isError": False}
            if shape == "error":
                return {
                    "content": [{"type": "text", "text": "failed", "_meta": nested(depth)}],
                    "isError": True,
                }
            return structured(nested(depth))
        if name in ("records", "bag"):
            return structured({"stored": len(args.get("items") or [])})
        if name == "sleep":
            ms = min(int(args.get("ms", 0)), SLEEP_MAX_MS)
            await asyncio.sleep(ms / 1000)
            return structured({"slept": ms})
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")

    return RawServer(
        name="script-server",
        version="1.0.0",
        tools=TOOLS,
        call_tool=call_tool,
        instructions="Well-behaved tools for hostile-script tests.",
    )


if __name__ == "__main__":
    ns = parse_args()
    run(build_server(), ns.transport, ns.host, ns.port)
