"""Test server for concurrency, cancellation and the call-shape edge cases of spec §5.3.

`python slow.py [stdio|http|sse] [--port N]`. Written on raw JSON-RPC (`_rawrpc.py`), not the
SDK: the SDK server refuses both to list a non-object `inputSchema` and to accept a bare array
as `arguments`, and `total` needs both (§5.3.1). So strict SDK clients cannot list this server
either: use a lenient/raw client. Requests run concurrently; `notifications/cancelled` cancels
the request it names. Tools:

- `sleep` {ms}: waits ms milliseconds, returns structured {"slept": ms} (declared outputSchema);
- `cancelled_count`: {"cancelled": notifications/cancelled seen, "interrupted": sleeps cut short,
  "sleeping": sleeps under way} (a test waits for its calls to be in flight, then cancels them);
- `peak`: {"peak": the most sleeps under way at once since the last `peak` call} (concurrency
  proven by overlap, whatever the machine's load, instead of by timing);
- `echo` {value: any JSON}: structured {"value": value};
- `total` (inputSchema `{"type": "array", "items": {"type": "number"}}`): the arguments ARE the
  array; structured {"total", "count"};
- `tick` (inputSchema `{"type": "object"}`, no properties): structured {"ticks": n}, n counts calls;
- `book_room` {room, minutes}: inputSchema carries `examples`; answers with one text block;
- `beep`: one audio block (a short WAV, base64) and a text caption;
- `lines` {count?}: `count` text blocks;
- `rpc_error`: fails with a JSON-RPC error (code -32050, data {"retryAfterMs": 1500});
- `tool_error`: fails with a tool error (isError: true);
- `env` {name}: structured {"name", "value": os.environ.get(name)}, to check env passing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from typing import Any

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

SLEEP_MAX_MS = 60_000  # a test asking for longer is a bug; bounds how long a call can pin a task
LINES_MAX = 20  # bounds the number of content blocks one call can produce
TOTAL_MAX_ITEMS = 10_000  # bounds the work one `total` call can ask for
RPC_ERROR_CODE = -32050  # implementation-defined server error range (-32099..-32000)

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _tool(
    name: str, description: str, input_schema: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": input_schema,
        "annotations": extra.pop("annotations", READ_ONLY),
        **extra,
    }


TOOLS: list[dict[str, Any]] = [
    _tool(
        "sleep",
        "Wait `ms` milliseconds, then answer {slept: ms}.",
        _obj({"ms": {"type": "integer", "minimum": 0, "maximum": SLEEP_MAX_MS}}, ["ms"]),
        outputSchema=_obj({"slept": {"type": "integer"}}, ["slept"]),
    ),
    _tool(
        "cancelled_count",
        "How many notifications/cancelled arrived, how many sleeps they cut short, how many sleep now.",
        _obj({}),
        outputSchema=_obj(
            {
                "cancelled": {"type": "integer"},
                "interrupted": {"type": "integer"},
                "sleeping": {"type": "integer"},
            },
            ["cancelled", "interrupted", "sleeping"],
        ),
    ),
    _tool(
        "peak",
        "The most sleeps under way at once since the last call of peak.",
        _obj({}),
        outputSchema=_obj({"peak": {"type": "integer"}}, ["peak"]),
    ),
    _tool(
        "echo",
        "Answer {value} with the value given, whatever JSON it is.",
        _obj({"value": {"description": "Any JSON value"}}, ["value"]),
    ),
    _tool(
        "total",
        "Sum of a list of numbers. The arguments are the array itself.",
        {"type": "array", "items": {"type": "number"}, "maxItems": TOTAL_MAX_ITEMS},
        outputSchema=_obj({"total": {"type": "number"}, "count": {"type": "integer"}}),
    ),
    _tool(
        "tick",
        "Count calls (no arguments).",
        {"type": "object"},
        # It only counts: not read-only, not destructive (so approval's "auto" lets it through).
        annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    ),
    _tool(
        "book_room",
        "Book a meeting room.",
        {
            **_obj(
                {
                    "room": {"type": "string", "pattern": "^[A-Z][0-9]$"},
                    "minutes": {"type": "integer", "minimum": 15, "maximum": 240},
                },
                ["room", "minutes"],
            ),
            "additionalProperties": False,
            "examples": [{"room": "A1", "minutes": 30}],
        },
        annotations={"destructiveHint": False, "idempotentHint": False},
    ),
    _tool("beep", "A short beep as WAV audio, with a caption.", _obj({})),
    _tool(
        "lines",
        "Answer with `count` separate text blocks.",
        _obj({"count": {"type": "integer", "minimum": 1, "maximum": LINES_MAX, "default": 3}}),
    ),
    _tool("rpc_error", f"Always fails with JSON-RPC error {RPC_ERROR_CODE}.", _obj({})),
    _tool("tool_error", "Always fails with a tool error (isError).", _obj({})),
    _tool(
        "env",
        "Value of an environment variable of the server process (null if unset).",
        _obj({"name": {"type": "string", "minLength": 1}}, ["name"]),
        outputSchema=_obj(
            {"name": {"type": "string"}, "value": {"type": ["string", "null"]}}, ["name", "value"]
        ),
    ),
]
NAMES = {t["name"] for t in TOOLS}


def wav_beep(*, rate: int = 8000, millis: int = 100, hz: int = 440) -> bytes:
    """8-bit mono PCM square wave in a RIFF/WAVE container."""
    count = rate * millis // 1000
    period = rate // hz
    samples = bytes(200 if (i % period) < period // 2 else 56 for i in range(count))
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate, 1, 8)
    chunks = (
        b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", count) + samples
    )
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def structured(value: dict[str, Any]) -> dict[str, Any]:
    return {"content": [text(json.dumps(value))], "structuredContent": value, "isError": False}


def failed(message: str) -> dict[str, Any]:
    return {"content": [text(message)], "isError": True}


def build_server() -> RawServer:
    counts = {"cancelled": 0, "interrupted": 0, "sleeping": 0, "ticks": 0, "peak": 0}

    def on_cancelled(request_id: Any) -> None:
        counts["cancelled"] += 1

    async def call_tool(name: str, args: Any) -> dict[str, Any]:
        if name not in NAMES:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        if name == "total":
            if not isinstance(args, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in args
            ):
                return failed("total: the arguments must be an array of numbers")
            if len(args) > TOTAL_MAX_ITEMS:
                return failed(f"total: at most {TOTAL_MAX_ITEMS} numbers")
            return structured({"total": sum(args), "count": len(args)})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return failed(f"{name}: the arguments must be an object")
        if name == "sleep":
            ms = args.get("ms")
            if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= SLEEP_MAX_MS:
                return failed(f"sleep: ms must be an integer between 0 and {SLEEP_MAX_MS}")
            counts["sleeping"] += 1
            counts["peak"] = max(counts["peak"], counts["sleeping"])
            try:
                await asyncio.sleep(ms / 1000)
            except asyncio.CancelledError:
                counts["interrupted"] += 1
                raise
            finally:
                counts["sleeping"] -= 1
            return structured({"slept": ms})
        if name == "cancelled_count":
            return structured(
                {
                    "cancelled": counts["cancelled"],
                    "interrupted": counts["interrupted"],
                    "sleeping": counts["sleeping"],
                }
            )
        if name == "peak":
            peak, counts["peak"] = counts["peak"], counts["sleeping"]
            return structured({"peak": peak})
        if name == "echo":
            if "value" not in args:
                return failed("echo: value is required")
            return {
                "content": [text(json.dumps(args["value"]))],
                "structuredContent": {"value": args["value"]},
                "isError": False,
            }
        if name == "tick":
            counts["ticks"] += 1
            return structured({"ticks": counts["ticks"]})
        if name == "book_room":
            room, minutes = args.get("room"), args.get("minutes")
            if not isinstance(room, str) or not isinstance(minutes, int):
                return failed('book_room: expected {"room": "A1", "minutes": 30}')
            return {"content": [text(f"booked {room} for {minutes} minutes")], "isError": False}
        if name == "beep":
            audio = {
                "type": "audio",
                "data": base64.b64encode(wav_beep()).decode(),
                "mimeType": "audio/wav",
            }
            return {"content": [audio, text("a 100 ms beep at 440 Hz")], "isError": False}
        if name == "lines":
            count = args.get("count", 3)
            if not isinstance(count, int) or not 1 <= count <= LINES_MAX:
                return failed(f"lines: count must be an integer between 1 and {LINES_MAX}")
            return {"content": [text(f"line {i}") for i in range(1, count + 1)], "isError": False}
        if name == "rpc_error":
            raise RpcError(RPC_ERROR_CODE, "quota exceeded for tenant demo", {"retryAfterMs": 1500})
        if name == "tool_error":
            return failed("disk full: cannot write /var/tmp/report.bin (0 bytes free)")
        variable = args.get("name")  # env
        if not isinstance(variable, str) or not variable:
            return failed("env: name must be a non-empty string")
        return structured({"name": variable, "value": os.environ.get(variable)})

    return RawServer(
        name="slow",
        version="1.0.0",
        instructions="Slow and odd tools for concurrency, cancellation and call-shape tests.",
        tools=TOOLS,
        call_tool=call_tool,
        on_cancelled=on_cancelled,
    )


if __name__ == "__main__":
    args = parse_args()
    run(build_server(), args.transport, args.host, args.port)
