"""Test server that replays recorded tool catalogs of real MCP servers (tests/data/catalogs/).

`python catalog_server.py [stdio|http|sse] [--port N] [--catalog ID_OR_PATH ...] [--copies N]
[--max-tools N] [--page-size N] [--instructions TEXT]`

- `--catalog` (repeatable): a catalog id under tests/data/catalogs (e.g. `github`), a folder
  holding a tools.json, or a path to a tools.json. Default: every catalog there, sorted by id.
- `--copies N` (default 1): the catalogs N times over; copy k > 1 suffixes every tool name with
  `_k`. Tools are ordered copy by copy (copy 1 of every catalog, then copy 2, ...), so
  `--max-tools` keeps a mix of every catalog. 5,000 tools: `--copies 31 --max-tools 5000`.
- `--max-tools N`: keep the first N tools.
- `--page-size N` (default 0 = everything in one page): tools/list pages of N tools, with opaque
  cursors; an unknown cursor is a JSON-RPC error (-32602).
- `--instructions TEXT`: the server's instructions (none by default).

Tools are served verbatim (schemas, descriptions, annotations, outputSchema) except for the
name. Names are made unique: a tool whose name is already taken (github and gitlab share
several) gets `_<catalog id>` appended, then `_2`, `_3`, ... if that is taken too.
Every tools/call answers one text block, `<tool> called with <compact JSON arguments>`; no
structuredContent, even for tools that declare an outputSchema (the project's raw sessions
accept that; the SDK's strict client rejects it). An unknown tool is a JSON-RPC error (-32602).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import mcp_types as types
from _serve import run_lowlevel, tools_page
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

CATALOGS_DIR = Path(__file__).resolve().parent.parent / "data" / "catalogs"
MAX_TOOLS = 100_000  # bounds the memory a --copies typo can ask for
MAX_COPIES = 10_000
ARGS_ECHO_MAX = 2_000  # characters of the arguments echoed back by tools/call
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def catalog_ids() -> list[str]:
    return sorted(p.parent.name for p in CATALOGS_DIR.glob("*/tools.json"))


def resolve_catalog(spec: str) -> tuple[str, Path]:
    """(label, tools.json path) of an id, a folder holding tools.json, or a tools.json path."""
    path = Path(spec)
    if "/" not in spec and "\\" not in spec and (CATALOGS_DIR / spec / "tools.json").is_file():
        return spec, CATALOGS_DIR / spec / "tools.json"
    if path.is_dir() and (path / "tools.json").is_file():
        return path.resolve().name, path / "tools.json"
    if path.is_file():
        return (path.resolve().parent.name if path.name == "tools.json" else path.stem), path
    raise SystemExit(
        f"catalog_server: no catalog {spec!r}: give an id ({', '.join(catalog_ids())}), "
        "a folder holding tools.json, or a path to a tools.json"
    )


def load_tools(path: Path) -> list[types.Tool]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):  # a raw tools/list result {"tools": [...]} works too
        data = data.get("tools")
    if not isinstance(data, list):
        raise SystemExit(f"catalog_server: {path} is not a JSON list of tools")
    return [types.Tool.model_validate(tool) for tool in data]


def build_tools(
    catalogs: list[str], copies: int = 1, max_tools: int | None = None
) -> list[types.Tool]:
    """The tool list served: catalogs x copies, names made unique, truncated to max_tools."""
    limit = MAX_TOOLS if max_tools is None else min(max_tools, MAX_TOOLS)
    loaded = [
        (_UNSAFE.sub("_", label), load_tools(path))
        for label, path in map(resolve_catalog, catalogs)
    ]
    tools: list[types.Tool] = []
    taken: set[str] = set()
    for copy in range(1, copies + 1):
        for label, catalog in loaded:
            for tool in catalog:
                if len(tools) >= limit:
                    return tools
                base = tool.name if copy == 1 else f"{tool.name}_{copy}"
                name = base if base not in taken else f"{base}_{label}"
                n = 2
                while name in taken:
                    name, n = f"{base}_{label}_{n}", n + 1
                taken.add(name)
                tools.append(tool if name == tool.name else tool.model_copy(update={"name": name}))
    return tools


def build_server(
    tools: list[types.Tool], *, page_size: int = 0, instructions: str | None = None
) -> Server[Any]:
    names = {t.name for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return (
            tools_page(tools, params, page_size)
            if page_size
            else types.ListToolsResult(tools=tools)
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        args = json.dumps(params.arguments or {}, separators=(",", ":"), ensure_ascii=False)
        if len(args) > ARGS_ECHO_MAX:
            args = args[:ARGS_ECHO_MAX] + "..."
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{params.name} called with {args}")]
        )

    return Server(
        "catalog",
        version="1.0.0",
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--catalog", action="append", metavar="ID_OR_PATH")
    parser.add_argument("--copies", type=positive, default=1, metavar="N")
    parser.add_argument("--max-tools", type=positive, default=None, metavar="N")
    parser.add_argument("--page-size", type=non_negative, default=0, metavar="N")
    parser.add_argument("--instructions", default=None, metavar="TEXT")
    known, rest = parser.parse_known_args()
    if known.copies > MAX_COPIES:
        parser.error(f"--copies: at most {MAX_COPIES}")
    tools = build_tools(known.catalog or catalog_ids(), known.copies, known.max_tools)
    server = build_server(tools, page_size=known.page_size, instructions=known.instructions)
    run_lowlevel(server, rest)


if __name__ == "__main__":
    main()
