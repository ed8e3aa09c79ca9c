"""Recorded tool catalogs of real third-party MCP servers (tests/data/catalogs/<id>/).

Each catalog is what `codemode-gen record --no-probe` wrote for one server: `server.json` (the
initialize result) and `tools.json` (tools/list, all pages, sorted by name, verbatim); `git`,
`sqlite` and `time` also have `calls/`, real calls recorded with samples and probes
(`catalog_fixture_sets`). The README.md next to them names the package and version each was
recorded from. Used by tests and
by bench/ scripts that compare generated TypeScript and prompts with the raw tools/list JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CATALOGS_DIR = Path(__file__).resolve().parent / "data" / "catalogs"


def catalog_ids() -> list[str]:
    """Ids of every recorded catalog (folders holding a tools.json), sorted."""
    return sorted(p.parent.name for p in CATALOGS_DIR.glob("*/tools.json"))


def load_catalog(catalog_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(server_json, tools) of one catalog; raises KeyError naming the known ids if unknown."""
    folder = CATALOGS_DIR / catalog_id
    if "/" in catalog_id or "\\" in catalog_id or not (folder / "tools.json").is_file():
        raise KeyError(f"unknown catalog {catalog_id!r}; known: {', '.join(catalog_ids())}")
    server_json = json.loads((folder / "server.json").read_text(encoding="utf-8"))
    tools = json.loads((folder / "tools.json").read_text(encoding="utf-8"))
    return server_json, tools


def catalog_fixture_sets() -> list[Any]:
    """Every catalog as `generate` reads a recording (generator/fixtures.py): with its recorded
    calls where it has some."""
    from codemode_gen.generator.fixtures import load_fixture_set

    return [load_fixture_set(CATALOGS_DIR / cid) for cid in catalog_ids()]


def tools_list_bytes(tools: list[dict[str, Any]]) -> int:
    """Size of the tools as compact JSON in UTF-8: what a tools/list result costs on the wire."""
    return len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def copies_catalog(count: int) -> Any:
    """A host catalog of one server, "catalog", holding `count` real tools: the recordings, then
    renamed copies of them (`name_2`, `name_3`, ...) until there are `count`. For discovery's
    search at scale (tests and bench/discovery.py) without an MCP server that would take
    seconds to list 5,000 tools."""
    from codemode_gen.runtime.host.catalog import Catalog, ServerView, ToolView

    originals = [tool for cid in catalog_ids() for tool in load_catalog(cid)[1]]
    tools: dict[str, ToolView] = {}
    copy = 1
    while len(tools) < count:
        for tool in originals[: count - len(tools)]:
            name = tool["name"] if copy == 1 else f"{tool['name']}_{copy}"
            while name in tools:
                name += "_"
            tools[name] = ToolView(
                name,
                name,
                description=tool.get("description"),
                title=tool.get("title"),
                input_schema=tool.get("inputSchema"),
            )
        copy += 1
    server = ServerView("catalog", "catalog", "catalog", tools=dict(sorted(tools.items())))
    return Catalog(servers={"catalog": server})
