"""Test server for payloads within the caps but large (event-loop stalls, learning's memory).

`python payload.py [stdio|http|sse] [--port N]`, on the raw JSON-RPC core (`_rawrpc.py`) with
requests of up to MAX_REQUEST_BYTES accepted. Every tool is read-only and declares no
outputSchema unless its name says `typed`, so the host learns the others' output types. Tools:

- `blob` {kib, seed?, shape?}: about `kib` KiB of JSON, `{"items": [...]}` (structuredContent,
  or with shape "text" one text block holding the JSON text). Items differ with `seed`: an
  odd seed adds an optional `note` field to every item, so merged samples show it optional;
- `typed_blob` {kib, seed?}: the same, with a declared outputSchema;
- `take` {name?}: any extra properties allowed; answers `{"keys": <number of input keys>}`;
- `take_strict` {name?}: `additionalProperties: false`, else as `take`.
"""

from __future__ import annotations

from typing import Any

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

# Bounds the request this server reads (a 400,000-key input is ~8 MB of JSON).
MAX_REQUEST_BYTES = 64 * 1024 * 1024
# Bounds what one `blob` call builds.
MAX_KIB = 48 * 1024
# Bytes of JSON one `blob` item takes, about (used to size a result).
ITEM_BYTES = 180

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}

BLOB_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kib": {"type": "integer", "minimum": 0, "maximum": MAX_KIB},
        "seed": {"type": "integer"},
        "shape": {"enum": ["structured", "text"]},
    },
    "required": ["kib"],
}
ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "owner": {
            "type": "object",
            "properties": {"login": {"type": "string"}, "active": {"type": "boolean"}},
        },
        "note": {"type": "string"},
    },
    "required": ["id", "name", "score", "tags", "owner"],
}
TAKE_INPUT: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "blob",
        "description": "About `kib` KiB of JSON items.",
        "inputSchema": BLOB_INPUT,
        "annotations": READ_ONLY,
    },
    {
        "name": "typed_blob",
        "description": "About `kib` KiB of JSON items (declared output).",
        "inputSchema": BLOB_INPUT,
        "annotations": READ_ONLY,
        "outputSchema": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": ITEM_SCHEMA}},
            "required": ["items"],
        },
    },
    {
        "name": "take",
        "description": "Count the input's keys.",
        "inputSchema": TAKE_INPUT,
        "annotations": READ_ONLY,
    },
    {
        "name": "take_strict",
        "description": "Count the input's keys (no extra keys allowed).",
        "inputSchema": {**TAKE_INPUT, "additionalProperties": False},
        "annotations": READ_ONLY,
    },
]


def items(kib: int, seed: int) -> list[dict[str, Any]]:
    """About `kib` KiB of JSON items, different for every seed."""
    out: list[dict[str, Any]] = []
    for i in range(max(1, kib * 1024 // ITEM_BYTES)):
        item: dict[str, Any] = {
            "id": seed * 1_000_000 + i,
            "name": f"item {seed}-{i} " + "x" * (i % 40),
            "score": (i * 7 + seed) % 1000 / 10,
            "tags": [f"t{(i + k) % 17}" for k in range(i % 4)],
            "owner": {"login": f"user{(i + seed) % 97}", "active": (i + seed) % 3 == 0},
        }
        if seed % 2:
            item["note"] = f"note {i}"
        out.append(item)
    return out


def build_server() -> RawServer:
    import json

    async def call_tool(name: str, args: Any) -> dict[str, Any]:
        args = args if isinstance(args, dict) else {}
        if name in ("blob", "typed_blob"):
            kib, seed = args.get("kib"), args.get("seed", 0)
            if not isinstance(kib, int) or not 0 <= kib <= MAX_KIB or not isinstance(seed, int):
                raise RpcError(INVALID_PARAMS, f"kib must be an integer from 0 to {MAX_KIB}")
            blob = {"items": items(kib, seed)}
            if args.get("shape") == "text":
                return {"content": [{"type": "text", "text": json.dumps(blob)}], "isError": False}
            return {
                "content": [{"type": "text", "text": "ok"}],
                "structuredContent": blob,
                "isError": False,
            }
        if name in ("take", "take_strict"):
            keys = {"keys": len(args)}
            return {
                "content": [{"type": "text", "text": json.dumps(keys)}],
                "structuredContent": keys,
                "isError": False,
            }
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")

    return RawServer(
        name="payload",
        version="1.0.0",
        tools=TOOLS,
        call_tool=call_tool,
        max_message_bytes=MAX_REQUEST_BYTES,
    )


if __name__ == "__main__":
    ns = parse_args()
    run(build_server(), ns.transport, ns.host, ns.port)
