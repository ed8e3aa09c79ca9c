"""What a model receives from `serve`, read through a real MCP client (spec §4.4, §2).

The description of the one tool is the model's whole Code Mode prompt. These tests launch the
real console script as a client does (its own cwd, no venv) over catalogs of real tool
definitions, and check the budget, that the demo lists every export, that the budget goes to
descriptions tool by tool (neediest first), that what the prompt leaves out is one discovery
call away in the first run (§4.4 deferral), and that every example it prints runs as printed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.runtime.frontends.prompt import DEFAULT_PROMPT_BUDGET, render_prompt
from codemode_gen.runtime.frontends.prompt_need import need
from tests.catalogs import catalog_ids, load_catalog, tools_list_bytes
from tests.runtime.frontends.test_prompt import DEMO_PROMPT_RATIO  # the §4.4 target, in one place
from tests.runtime.frontends.test_serve_launch import elsewhere, project_with, serve_session
from tests.runtime_support import REPO, fixture_set, write_out

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

# Discovery in the first run of a big catalog (a cold 5,000-tool catalog takes a few seconds).
RUN_LIMITS = {"timeoutMs": 60_000}

SEARCH_SCRIPT = """
import { searchTools, getTool } from "@codemode/discovery";
const { results } = await searchTools("current time in a timezone", { detail: "full", limit: 3 });
const top = results[0];
globalThis.__codemode_result__ = {
  top: `${top.serverId}/${top.toolName}`,
  declaration: top.declaration,
  again: (await getTool(top.serverId, top.toolName)).declaration,
};
"""


def catalog_project(tmp_path: Path, sets: dict[str, list[dict[str, Any]]]) -> Path:
    """A project whose out/ holds these servers (real tool definitions); each is configured as
    the replay server, which is never started unless a script calls it."""
    servers = {
        cid: {
            "command": "${CODEMODE_PYTHON:-python}",
            "args": ["test_servers/catalog_server.py", "stdio", "--catalog", "time"],
        }
        for cid in sets
    }
    return project_with(tmp_path, servers, out_tools=sets)


def listed_and_searched(proj: Path, cwd: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    async def body(client: Any) -> Any:
        description = (await client.list_tools()).tools[0].description
        run = await client.call_tool("codemode.run", {"code": SEARCH_SCRIPT, "limits": RUN_LIMITS})
        return description, run.structured_content

    (description, response), _ = serve_session(
        ["--config", str(proj / ".mcp.json"), *extra], cwd, body
    )
    return description, response


def test_s4_4_demo_prompt_lists_every_export_within_its_share_of_tools_list(tmp_path: Path) -> None:
    manifest = json.loads((REPO / "out" / "manifest.json").read_text())
    raw = sum(
        tools_list_bytes(json.loads((REPO / "fixtures" / s["configId"] / "tools.json").read_text()))
        for s in manifest["servers"]
    )

    async def body(client: Any) -> Any:
        return (await client.list_tools()).tools[0].description

    description, _ = serve_session(["--config", str(REPO / ".mcp.json")], elsewhere(tmp_path), body)
    # The demo's skills are listed after the servers, in their own share of the budget
    # (runtime/frontends/prompt.py MAX_SKILLS_SHARE): not part of what tools/list carries.
    servers_part, skills_head, skills_part = description.partition("\nSkills: ")
    assert skills_head and all(
        f'"@codemode/skills/{s["name"]}"' in skills_part for s in manifest["skills"]
    )
    assert len(servers_part) <= DEMO_PROMPT_RATIO * raw, (len(servers_part), raw)
    for server in manifest["servers"]:
        for tool in server["tools"]:
            assert f"function {tool['exportName']}(" in description, tool["exportName"]


def test_s4_4_many_servers_stay_within_the_budget_and_the_rest_is_discoverable(
    tmp_path: Path,
) -> None:
    sets = {
        f"{cid}-{n}": load_catalog(cid)[1] for cid in catalog_ids() for n in (1, 2, 3)
    }  # 48 servers
    proj = catalog_project(tmp_path, sets)
    description, response = listed_and_searched(proj, elsewhere(tmp_path))
    assert len(description) <= DEFAULT_PROMPT_BUDGET
    assert 'searchTools("what you need", { detail: "full" })' in description
    assert response["diagnostics"] == [] or all(
        d["severity"] != "error" for d in response["diagnostics"]
    )
    assert response["result"]["top"].endswith("/get_current_time"), response
    assert "export function get_current_time(" in response["result"]["declaration"]
    assert response["result"]["again"] == response["result"]["declaration"]

    small, _ = listed_and_searched(proj, elsewhere(tmp_path / "again"), "--prompt-budget", "6000")
    assert len(small) <= 6000


def test_s4_4_five_thousand_tools_stay_within_the_budget(tmp_path: Path) -> None:
    pool = [t for cid in catalog_ids() for t in load_catalog(cid)[1]]
    tools = [
        {**pool[i % len(pool)], "name": f"{pool[i % len(pool)]['name']}_{i}"} for i in range(5000)
    ]
    proj = project_with(
        tmp_path,
        {
            "big": {
                "command": "${CODEMODE_PYTHON:-python}",
                "args": ["test_servers/catalog_server.py", "stdio"],
            },
        },
    )
    write_out(proj / "out", [fixture_set("big", tools)])
    description, response = listed_and_searched(proj, elsewhere(tmp_path))
    assert len(description) <= DEFAULT_PROMPT_BUDGET
    assert "- big (5000 tools)" in description
    assert response["result"]["top"].startswith("big/get_current_time_"), response
    assert "export function get_current_time_" in response["result"]["declaration"]


# ---------------------------------------------------------------------------------- the ladder


def descriptions_served(tmp_path: Path, ids: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The served description for a project of these recorded catalogs, and its manifest."""
    proj = catalog_project(tmp_path, {cid: load_catalog(cid)[1] for cid in ids})

    async def body(client: Any) -> Any:
        return (await client.list_tools()).tools[0].description

    description, _ = serve_session(["--config", str(proj / ".mcp.json")], elsewhere(tmp_path), body)
    return description, json.loads((proj / "out" / "manifest.json").read_text())


def test_s4_4_served_prompt_keeps_every_description_when_only_notes_do_not_fit(
    tmp_path: Path,
) -> None:
    """github + playwright (51 tools): with every field note the prompt would not fit; served
    through a real client, it has every tool's description and notes for as many as fit."""
    description, manifest = descriptions_served(tmp_path, ("github", "playwright"))
    assert len(description) <= DEFAULT_PROMPT_BUDGET
    tools = [t for s in manifest["servers"] for t in s["tools"]]
    assert len(render_prompt(manifest["servers"], budget=10**6)) > DEFAULT_PROMPT_BUDGET
    for tool in tools:
        assert f"/** {tool['agent']['summary']}" in description, tool["toolName"]
    noted = [t for t in tools if "noted" in t["agent"]]
    assert 0 < sum(t["agent"]["noted"] in description for t in noted) < len(noted)
    assert "description */" not in description and "Not shown here" not in description


def test_s4_4_served_prompt_describes_the_neediest_tools_first(tmp_path: Path) -> None:
    """github + notion + playwright (75 tools): not every description fits; the served prompt
    gives them to the tools whose names and types say least, and counts the others."""
    description, manifest = descriptions_served(tmp_path, ("github", "notion", "playwright"))
    assert len(description) <= DEFAULT_PROMPT_BUDGET
    tools = [t for s in manifest["servers"] for t in s["tools"]]
    described = [need(t) for t in tools if f"/** {t['agent']['summary']}" in description]
    bare = [need(t) for t in tools if f"/** {t['agent']['summary']}" not in description]
    assert described and bare and max(described) == max(need(t) for t in tools)
    assert sum(described) / len(described) > sum(bare) / len(bare) + 1
    assert f"Not shown here: {len(bare)} signatures without a /** description */." in description
    for tool in tools:
        assert f"function {tool['exportName']}(" in description


# ---------------------------------------------------------------------------------- examples

# A code span of the prompt that is code to run (an import or a call), not a name.
CODE = re.compile(r"\bimport\b|\w\(")
# Runs an expression example and prints its value, undefined included (JSON would hide it).
SHOW = "const value = await ({});\nconsole.log(JSON.stringify(value, (k, v) => (v === undefined ? 'undefined' : v)));\n"


def prompt_examples(description: str) -> list[str]:
    """Every code example in a prompt: its inline code spans that import or call something
    (the declarations' fence is not an example). An expression runs after the prompt's own
    `@codemode/discovery` import, printed."""
    text = re.sub(r"```ts\n.*?\n```\n", "", description, flags=re.S)
    spans = [s for s in re.findall(r"`([^`\n]+)`", text) if CODE.search(s)]
    discovery = next(s for s in spans if s.startswith("import {") and '"@codemode/discovery"' in s)
    return [s if s.startswith("import ") else f"{discovery};\n" + SHOW.format(s) for s in spans]


def dts_examples(dts: str) -> list[str]:
    """The `@example` blocks of out/codemode.d.ts's doc comments, as the lines they print."""
    examples = []
    for block in re.findall(r"/\*\*(.*?)\*/", dts, flags=re.S):
        lines = [re.sub(r"^\s*\* ?", "", line) for line in block.splitlines()]
        if "@example" in lines:
            body = lines[lines.index("@example") + 1 :]
            examples.append("\n".join(line for line in body if line.strip()))
    return examples


def test_every_example_of_the_prompt_and_the_discovery_docs_runs_as_printed(tmp_path: Path) -> None:
    """The demo served as a client sees it, at the default budget and at one that leaves
    declarations out (so the prompt says how to read them): every example in the description
    and in out/codemode.d.ts's discovery docs runs through `codemode.run` with no error and
    prints no `undefined` (a wrong field name would: `sqlite.undefined`)."""
    dts = dts_examples((REPO / "out" / "codemode.d.ts").read_text())
    assert len(dts) == 3

    async def body(client: Any) -> Any:
        description = (await client.list_tools()).tools[0].description
        runs = []
        for code in [*prompt_examples(description), *dts]:
            run = await client.call_tool("codemode.run", {"code": code})
            runs.append((code, run.structured_content))
        return description, runs

    for budget in (DEFAULT_PROMPT_BUDGET, 5_000):
        cwd = elsewhere(tmp_path / str(budget))
        (description, runs), _ = serve_session(
            ["--config", str(REPO / ".mcp.json"), "--prompt-budget", str(budget)], cwd, body
        )
        assert ("Not shown here" in description) == (budget < DEFAULT_PROMPT_BUDGET)
        assert len(runs) >= (8 if "Not shown here" in description else 5), [
            code for code, _ in runs
        ]
        for code, response in runs:
            assert not [d for d in response["diagnostics"] if d["severity"] == "error"], (
                code,
                response,
            )
            printed = json.dumps([response["logs"], response["result"]])
            assert "undefined" not in printed, (code, printed)
        # the examples really ran: they printed tools' declarations
        assert any("export function " in json.dumps(r["logs"]) for _, r in runs)
