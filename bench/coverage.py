"""Benchmark: how many tools have an output type, and from where, before and after one scripted
`serve --record` session. Not a test.

    .venv/bin/python bench/coverage.py [--workdir DIR]

A tool without a type is `Promise<unknown>` to the model, which then prints results to learn
their shape. For two projects, each built in a scratch folder:

- "demo": the bundled demo servers (examples/servers) with only what `record --no-probe`
  writes (server.json and tools.json, no calls): declared types only;
- "real catalog": the 16 recorded real servers of tests/data/catalogs (git, sqlite and time
  with their real recorded calls), each served by tests/servers/catalog_server.py as a
  stand-in (their packages are not installed here; the stand-in answers every call with one
  text block, so what a session learns of them is `string`).

Per project, three columns of the share of tools with an output type, by origin (declared /
inferred from recorded samples / learned in a session / unknown):

1. before: `generate` from the fixtures (the counts `generate` prints);
2. in session: the real CLI, `codemode-gen serve --record --approve-all` over stdio, driven by
   the real `mcp` client: one `codemode.run` calls every untyped tool once, with `{}` or the
   required arguments its schema offers (examples, default, const, enum: `probe.fill_input`'s
   rule, read-only or not: the stand-ins change nothing) or a sample of SCRIPTED_INPUTS; a
   second run reads every tool's definition from `@codemode/discovery` (outputSchemaLearned:
   learned in this session);
3. after: `generate` again from the fixtures the session recorded (`"live": true` lines: the
   origin `learned`).

Every process the bench starts is gone when it exits (bench/serve.py's session and Reaper).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # bench/ as the namespace package `bench`, tests/ for the catalogs

from bench.serve import TOOL, Reaper, serve_command, session  # noqa: E402
from codemode_gen.cli.generate import ORIGINS, coverage  # noqa: E402
from codemode_gen.generator.build import build_outputs  # noqa: E402
from codemode_gen.generator.emit import write_outputs  # noqa: E402
from codemode_gen.generator.fixtures import load_fixtures  # noqa: E402
from codemode_gen.generator.project import load_project_settings  # noqa: E402
from tests.catalogs import CATALOGS_DIR, catalog_ids  # noqa: E402

PYTHON = sys.executable
CATALOG_SERVER = REPO / "tests" / "servers" / "catalog_server.py"
# Inputs the script gives tools whose required arguments no schema fills (what an agent asks).
SCRIPTED_INPUTS: dict[str, dict[str, Any]] = {
    "search_notes": {"query": "milk"},
    "free_slots": {"date": "2026-03-02", "durationMinutes": 30},
}
# Limits of the session's runs: one run calls every untyped tool of 16 servers.
RUN_LIMITS = {"timeoutMs": 120_000, "maxToolCalls": 1000}
# Bounds the whole session (spawn, two runs, shutdown).
SESSION_TIMEOUT_S = 300.0


def demo_project(root: Path) -> Path:
    """The demo's servers and configuration; fixtures as `record --no-probe` writes them."""
    shutil.copy(REPO / ".mcp.json", root / ".mcp.json")
    shutil.copytree(REPO / "examples", root / "examples")
    for server in (REPO / "fixtures").iterdir():
        if server.is_dir() and not server.name.startswith("."):
            (root / "fixtures" / server.name).mkdir(parents=True)
            for name in ("server.json", "tools.json"):
                shutil.copy(server / name, root / "fixtures" / server.name / name)
    return root / ".mcp.json"


def catalog_project(root: Path) -> Path:
    """The recorded real catalog, each server a catalog_server.py stand-in."""
    servers = {
        cid: {"command": PYTHON, "args": [str(CATALOG_SERVER), "stdio", "--catalog", cid]}
        for cid in catalog_ids()
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
    shutil.copytree(CATALOGS_DIR, root / "fixtures", ignore=shutil.ignore_patterns("README.md"))
    return root / ".mcp.json"


def generate(config: Path) -> Sequence[Mapping[str, Any]]:
    """`codemode-gen generate` for the project (in process): its manifest's servers."""
    settings = load_project_settings(config, None)
    outputs = build_outputs(load_fixtures(settings.fixtures_dir), settings)
    write_outputs(settings.out_dir, outputs, notes=[])
    return outputs.manifest["servers"]


def script_input(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """The input the session's script gives a tool (module docstring), or None: none it can."""
    from codemode_gen.generator.probe import fill_input

    name = str(tool["toolName"])
    if name in SCRIPTED_INPUTS:
        return SCRIPTED_INPUTS[name]
    schema = tool.get("inputSchema") or {}
    if not schema.get("required"):
        return {}
    return fill_input({**tool, "name": name, "annotations": {"readOnlyHint": True}}, [])


def session_script(servers: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """The run that calls every untyped tool once; how many calls it makes."""
    lines = ["const failed = [];"]
    calls = 0
    for i, server in enumerate(servers):
        untyped = [t for t in server["tools"] if t["output"]["source"] == "none"]
        inputs = [(t, script_input(t)) for t in untyped]
        inputs = [(t, args) for t, args in inputs if args is not None]
        if not inputs:
            continue
        lines.append(
            f"import * as s{i} from {json.dumps('@codemode/servers/' + server['serverId'])};"
        )
        for tool, args in inputs:
            calls += 1
            lines.append(
                f"try {{ await s{i}.{tool['exportName']}({json.dumps(args)}); }}"
                f" catch (e) {{ failed.push({json.dumps(tool['toolName'])} + ': ' + e.message); }}"
            )
    lines.append("globalThis.__codemode_result__ = failed;")
    imports = [line for line in lines if line.startswith("import ")]
    return "\n".join(imports + [line for line in lines if not line.startswith("import ")]), calls


DISCOVERY = """
import { listServers, listTools } from "@codemode/discovery";
const out = [];
for (const server of await listServers()) {
  for (const t of await listTools(server.serverId, { detail: "full" })) {
    out.push({ serverId: server.serverId, toolName: t.toolName, typed: t.outputSchema !== undefined,
               learned: t.outputSchemaLearned !== undefined });
  }
}
globalThis.__codemode_result__ = out;
"""


async def serve_session(
    config: Path, servers: Sequence[Mapping[str, Any]], logs: Path
) -> tuple[Counter[str], int, list[str]]:
    """The scripted session: (origin counts as discovery reports them, calls made, failures)."""
    code, calls = session_script(servers)
    argv = [*serve_command(), "serve", "--config", str(config), "--record", "--approve-all"]
    reaper = Reaper()
    before = {
        (s["serverId"], t["toolName"]): origin
        for origin, names in _origins(servers).items()
        for s, t in names
    }
    async with session(argv, config.parent, logs / "serve.log", reaper, SESSION_TIMEOUT_S) as s:
        ran = await s.client.call_tool(TOOL, {"code": code, "limits": RUN_LIMITS})
        failures = _result(ran, "session script")
        seen = await s.client.call_tool(TOOL, {"code": DISCOVERY, "limits": RUN_LIMITS})
        tools = _result(seen, "discovery")
    counts: Counter[str] = Counter()
    for tool in tools:
        if tool["learned"]:
            counts["learned"] += 1
        elif tool["typed"]:
            counts[before.get((tool["serverId"], tool["toolName"]), "inferred")] += 1
        else:
            counts["unknown"] += 1
    return counts, calls, failures


def _result(result: Any, what: str) -> Any:
    response = result.structured_content
    if result.is_error or not isinstance(response, dict) or response.get("diagnostics"):
        raise SystemExit(f"{what}: codemode.run failed: {response or result.content}")
    return response["result"]


def _origins(
    servers: Sequence[Mapping[str, Any]],
) -> dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]]:
    out: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {o: [] for o in ORIGINS}
    for server in servers:
        for tool in server["tools"]:
            (origin,) = [o for o, names in coverage([{"tools": [tool]}]).items() if names]
            out[origin].append((server, tool))
    return out


def counts_of(servers: Sequence[Mapping[str, Any]]) -> Counter[str]:
    return Counter({origin: len(names) for origin, names in coverage(servers).items()})


def row(counts: Counter[str]) -> str:
    total = sum(counts.values())
    typed = total - counts["unknown"]
    parts = " ".join(f"{counts[o]:>4}" for o in ORIGINS)
    return f"{typed:>4}/{total:<4} {100 * typed / total if total else 0:>5.1f}%  {parts}"


async def measure(name: str, make: Any, workdir: Path) -> list[str]:
    root = workdir / name.replace(" ", "-")
    root.mkdir(parents=True)
    config = make(root)
    servers = generate(config)
    before = counts_of(servers)
    during, calls, failures = await serve_session(config, servers, root)
    after = counts_of(generate(config))
    lines = [
        f"{name:<13} before      {row(before)}",
        f"{'':<13} in session  {row(during)}   ({calls} calls in one run, {len(failures)} failed)",
        f"{'':<13} after       {row(after)}",
    ]
    lines += [f"{'':<13}   failed: {f}" for f in failures[:5]]
    return lines


async def main_async(workdir: Path) -> None:
    head = f"{'project':<13} {'when':<11} {'typed':>9} {'share':>6}  " + " ".join(
        f"{o[:4]:>4}" for o in ORIGINS
    )
    print(
        "tools with an output type, by origin: declared, inferred (from recorded samples),"
        " learned (in a session), unknown"
    )
    print(head)
    print("-" * len(head))
    for name, make in (("demo", demo_project), ("real catalog", catalog_project)):
        for line in await measure(name, make, workdir):
            print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="keep the scratch projects here")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        asyncio.run(main_async(args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix="codemode-coverage-") as tmp:
            asyncio.run(main_async(Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
