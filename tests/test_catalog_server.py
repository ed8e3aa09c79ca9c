"""tests/servers/catalog_server.py replays recorded real catalogs, up to thousands of tools."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.sessions import SessionManager

from .catalogs import catalog_ids, load_catalog, tools_list_bytes
from .conftest import stdio_config


async def _listing(tmp_path: Path, *args: str) -> tuple[McpSession, list[dict], dict]:
    async with SessionManager(
        {"catalog": stdio_config("catalog", "catalog_server", *args)}, log_dir=tmp_path
    ) as manager:
        session = await manager.get("catalog")
        tools = await session.list_tools()
        result = await session.call_tool(tools[-1]["name"], {"q": "ü", "n": 2})
        return session, tools, result


def test_catalogs_are_recorded() -> None:
    ids = catalog_ids()
    assert len(ids) >= 10
    total = 0
    for catalog_id in ids:
        server_json, tools = load_catalog(catalog_id)
        assert set(server_json) >= {"serverInfo", "capabilities", "protocolVersion"}
        names = [t["name"] for t in tools]
        assert names == sorted(names) and len(set(names)) == len(names), catalog_id
        assert tools_list_bytes(tools) > 0
        total += len(tools)
    assert total >= 150


@pytest.mark.slow
def test_5000_tools_in_one_page_and_a_call(tmp_path: Path) -> None:
    session, tools, result = anyio.run(_listing, tmp_path, "--copies", "31", "--max-tools", "5000")
    names = [t["name"] for t in tools]
    assert len(names) == 5000 and len(set(names)) == 5000
    assert {"create_issue", "create_issue_gitlab", "get-sum_2", "get-sum_31"} <= set(names)
    assert "browser_click_30" in names and "browser_click_31" not in names  # cut at 5,000
    assert not session.warnings
    _, github = load_catalog("github")
    create_issue = next(t for t in github if t["name"] == "create_issue")
    assert next(t for t in tools if t["name"] == "create_issue_2") == {
        **create_issue,
        "name": "create_issue_2",
    }
    assert result["content"] == [
        {"type": "text", "text": f'{names[-1]} called with {{"q":"ü","n":2}}'}
    ]
    assert not result.get("isError")


@pytest.mark.slow
def test_pages_one_catalog_verbatim(tmp_path: Path) -> None:
    args = ("--catalog", "filesystem", "--page-size", "5", "--instructions", "Replayed.")
    session, tools, result = anyio.run(_listing, tmp_path, *args)
    assert tools == load_catalog("filesystem")[1]  # 3 pages, verbatim, sorted
    assert session.server_json["instructions"] == "Replayed."
    assert result["content"][0]["text"].startswith(f"{tools[-1]['name']} called with ")
