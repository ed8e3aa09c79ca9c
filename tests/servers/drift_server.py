"""Test server for `record --check`: one tool list, three behaviours, chosen on the command line.

`python drift_server.py [stdio|http|sse] [--port N] [--variant a|b|c] [--calls-log FILE]`.
A low-level SDK `Server`, so results carry structuredContent without a declared outputSchema
(the inferred-type case). Variant `a` is the baseline that gets recorded:

- `ping` (read-only, no arguments): the text "pong";
- `lookup` {id} (read-only): structured {"id": id, "name": "item <id>", "tags": ["t1"]},
  no outputSchema (its type is inferred from the recorded samples);
- `count` (read-only, no arguments): structured {"count": 3}, declared outputSchema
  (integer, minimum 0);
- `clock` (read-only, no arguments): a text that changes with every call (a value, never drift);
- `search` {query} (read-only): the text "found 1 for <query>";
- `tally` (read-only, no arguments): structured {"total": n, "byTag": {<tag>: count, ...},
  "byDay": {<YYYY-MM-DD>: count}}: two objects whose keys are data (inferred as maps);
- `delete_item` {id} (not read-only): the text "deleted <id>"; `record --check` must never call it.

Variant `b` drifts: `archive` is added; `ping`'s description changes; `search` requires a new
`limit` argument; `lookup` answers {"id": "<id>", "name": "renamed <id>"} (id a string, tags
gone: shape drift); `count` answers {"count": -2.5} (a value outside the declared integer >= 0,
but the same TypeScript type: not drift); `tally`'s counts per tag become strings (a map whose
value shape changed: drift). Variant `c` lists exactly what `a` lists, but `lookup` fails with a
JSON-RPC error (a sample that cannot be checked). Variant `d` is `a` with other tags, days and
counts in `tally` (only a map's keys and values changed: not drift).

`--calls-log FILE` appends each called tool's name to FILE, one a line (what a check called).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from _serve import run_lowlevel
from mcp import MCPError
from mcp.server import Server, ServerRequestContext

READ_ONLY = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
LOOKUP_ERROR = -32050  # implementation-defined server error range (-32099..-32000)


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def make_tools(variant: str) -> list[types.Tool]:
    search_input = _obj({"query": {"type": "string"}}, ["query"])
    if variant == "b":
        search_input = _obj(
            {"query": {"type": "string"}, "limit": {"type": "integer"}}, ["query", "limit"]
        )
    tools = [
        types.Tool(
            name="ping",
            description="Answer pong, politely." if variant == "b" else "Answer pong.",
            input_schema=_obj({}),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="lookup",
            description="Look an item up by id.",
            input_schema=_obj({"id": {"type": "integer"}}, ["id"]),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="count",
            description="How many items there are.",
            input_schema=_obj({}),
            output_schema=_obj({"count": {"type": "integer", "minimum": 0}}, ["count"]),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="clock",
            description="The current time, as text.",
            input_schema=_obj({}),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="search",
            description="Search the items.",
            input_schema=search_input,
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="tally",
            description="Items per tag and per day.",
            input_schema=_obj({}),
            annotations=READ_ONLY,
        ),
        types.Tool(
            name="delete_item",
            description="Delete an item.",
            input_schema=_obj({"id": {"type": "integer"}}, ["id"]),
            annotations=types.ToolAnnotations(destructive_hint=True),
        ),
    ]
    if variant == "b":
        tools.append(
            types.Tool(
                name="archive",
                description="Archive an item.",
                input_schema=_obj({"id": {"type": "integer"}}, ["id"]),
            )
        )
    return sorted(tools, key=lambda t: t.name)


def _text(value: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=value)], structured_content=structured
    )


TAGS = (
    "books",
    "home",
    "work",
    "garden",
    "music",
    "travel",
    "health",
    "school",
    "sport",
    "cooking",
)


def tally(variant: str) -> dict[str, Any]:
    """Counts per tag and per day: `a` (and `b`, `c`) the first nine tags, `d` others."""
    if variant == "d":
        by_tag: dict[str, Any] = {tag: 2 * n + 1 for n, tag in enumerate(TAGS[2:])}
        by_day: dict[str, Any] = {"2026-04-01": 5, "2026-04-02": 1, "2026-04-03": 7}
    else:
        by_tag = {tag: n + 1 for n, tag in enumerate(TAGS[:9])}
        by_day = {"2026-03-01": 2, "2026-03-02": 4}
    if variant == "b":
        by_tag = {tag: f"{count} items" for tag, count in by_tag.items()}
    return {"total": sum(by_day.values()), "byTag": by_tag, "byDay": by_day}


def build_server(variant: str, calls_log: Path | None) -> Server[Any]:
    tools = make_tools(variant)
    names = {t.name for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name = params.name
        if name not in names:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
        if calls_log is not None:
            with calls_log.open("a", encoding="utf-8") as log:
                log.write(name + "\n")
        args = params.arguments or {}
        if name == "ping":
            return _text("pong")
        if name == "lookup":
            item = args.get("id")
            if variant == "c":
                raise MCPError(LOOKUP_ERROR, "lookup backend unavailable")
            if variant == "b":
                value: dict[str, Any] = {"id": str(item), "name": f"renamed {item}"}
            else:
                value = {"id": item, "name": f"item {item}", "tags": ["t1"]}
            return _text(f"item {item}", value)
        if name == "count":
            value = {"count": -2.5} if variant == "b" else {"count": 3}
            return _text(str(value["count"]), value)
        if name == "clock":
            return _text(f"it is {time.time_ns()}")
        if name == "tally":
            return _text("tally", tally(variant))
        if name == "search":
            return _text(f"found 1 for {args.get('query')}")
        return _text(f"{name} {args.get('id')} done")

    return Server("drift", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--variant", choices=["a", "b", "c", "d"], default="a")
    parser.add_argument("--calls-log", type=Path, default=None)
    known, rest = parser.parse_known_args()
    run_lowlevel(build_server(known.variant, known.calls_log), rest)
