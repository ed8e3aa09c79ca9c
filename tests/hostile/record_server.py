"""MCP test server for the hostile-record tests (tests/hostile/test_record_*.py).

`python record_server.py [stdio|http|sse] [--port N]`, on the raw JSON-RPC core of
tests/servers/_rawrpc.py (no SDK: the SDK's server would refuse to send NaN). Every tool is
read-only without required arguments, so `record` probes each one unasked, except `inf_sample`,
which a test calls through `--samples`.

- `good_00` … `good_27`: ordinary tools, `{"tool": <its name>}`;
- tools whose *names* are hostile as file names (NAMES): 300 characters, `/`, `../`, NUL,
  control characters and a terminal escape, non-ASCII, a leading dot, two names that differ
  only in case, a Windows device name; each answers `{"tool": <its name>}`;
- `big_text`: one text block of `--big-bytes N` characters (default 50 MiB);
- `nan_result`: structuredContent `{"value": NaN}` (written as the bare token NaN: not JSON);
- `inf_sample`: structuredContent `{"value": Infinity}` (not read-only: only asked for).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))

from _cli import parse_args
from _rawrpc import INVALID_PARAMS, RawServer, RpcError, run

# Default size of `big_text`'s text, in characters (ASCII, so also bytes).
BIG_BYTES = 50 * 1024 * 1024

GOOD = [f"good_{i:02d}" for i in range(28)]
NAMES = [
    "long_" + "x" * 295,  # 300 characters: "File name too long" when percent-encoded as is
    "a/b",
    "../escape",
    "nul\x00byte",
    "ctl\x01\x1b[31mred\x7f",
    "ünïcødé-名前",
    ".hidden",
    "Case",
    "case",
    "con",
]
READ_ONLY = {"readOnlyHint": True}
EMPTY = {"type": "object", "properties": {}}


def _tool(name: str, read_only: bool = True) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name, "description": f"Tool {name!r}.", "inputSchema": EMPTY}
    if read_only:
        tool["annotations"] = READ_ONLY
    return tool


TOOLS = [
    *(_tool(name) for name in GOOD + NAMES),
    _tool("big_text"),
    _tool("nan_result"),
    _tool("inf_sample", read_only=False),
]


async def call_tool(name: str, arguments: Any) -> dict[str, Any]:
    if name in GOOD or name in NAMES:
        return {"content": [{"type": "text", "text": "ok"}], "structuredContent": {"tool": name}}
    if name == "big_text":
        return {"content": [{"type": "text", "text": "b" * BIG_BYTES}]}
    if name == "nan_result":
        return {
            "content": [{"type": "text", "text": "NaN"}],
            "structuredContent": {"value": float("nan")},
        }
    if name == "inf_sample":
        return {
            "content": [{"type": "text", "text": "inf"}],
            "structuredContent": {"value": float("inf")},
        }
    raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--big-bytes", type=int, default=BIG_BYTES, help="size of big_text's text")


def main() -> None:
    global BIG_BYTES
    args = parse_args(extra=_options)
    BIG_BYTES = args.big_bytes
    run(
        RawServer("hostile-record", "1.0.0", TOOLS, call_tool), args.transport, args.host, args.port
    )


if __name__ == "__main__":
    main()
