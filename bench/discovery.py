"""Benchmark: `@codemode/discovery`'s searchTools over a big catalog, beside the scan a script
would write itself over listTools, in the same QuickJS sandbox and the same run.

    .venv/bin/python bench/discovery.py [--tools N] [--runs N] [--rounds N]

Not a test. The catalog is the recorded real catalogs (tests/data/catalogs), renamed copies
until there are `--tools` tools in one server (tests/catalogs.py `copies_catalog`), turned into
the discovery module `serve` and `run` import (runtime/host/discovery.py). Each run (a fresh
realm, spec §1.4) times `--rounds` rounds of five queries both ways:

- search: `searchTools(q, {detail: "name", limit: 3})`, the host-built inverted index;
- scan: `listTools` once, then for each query every tool's name and description lower-cased
  and tested for each query word, ranked by words matched (what an agent writes without search).

Prints per-search p50 and p90 over the runs (a run's mean, Date.now() has 1 ms resolution)
and their ratio. Target: search <= 0.2x the scan at 5,000 tools (a search reads only its own
terms' postings; a linear scan of every description was tens of ms per search).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/ as the namespace package `tests`

from codemode_gen.runtime.host.discovery import MODULE_NAME, discovery_module  # noqa: E402
from codemode_gen.runtime.limits import Limits  # noqa: E402
from codemode_gen.runtime.sandbox.pool import Sandbox  # noqa: E402
from codemode_gen.runtime.sandbox.protocol import HostReply  # noqa: E402
from tests.catalogs import copies_catalog  # noqa: E402

TARGET_RATIO = 0.2
QUERIES = ["current time", "delete a note", "create issues", "list files in a directory", "get"]

SCRIPT = """
import * as d from '@codemode/discovery';
const QUERIES = %(queries)s;
const ROUNDS = %(rounds)d;
let t = Date.now();
const searched = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const q of QUERIES) searched[q] = (await d.searchTools(q, {detail: 'name', limit: 3})).results.map((x) => x.toolName);
}
const search = (Date.now() - t) / (ROUNDS * QUERIES.length);
t = Date.now();
const tools = await d.listTools('catalog', {detail: 'description'});
const scanned = {};
for (let r = 0; r < ROUNDS; r++) {
  for (const q of QUERIES) {
    const words = q.toLowerCase().split(/\\s+/);
    const hits = [];
    for (const tool of tools) {
      const text = (tool.toolName + ' ' + (tool.description || '')).toLowerCase();
      let n = 0;
      for (const w of words) if (text.includes(w)) n++;
      if (n) hits.push([n, tool.toolName]);
    }
    hits.sort((a, b) => b[0] - a[0]);
    scanned[q] = hits.slice(0, 3).map((h) => h[1]);
  }
}
const scan = (Date.now() - t) / (ROUNDS * QUERIES.length);
globalThis.__codemode_result__ = {search, scan, searched, count: tools.length};
"""


async def no_tools(request: dict[str, Any]) -> HostReply:
    return {"ok": False, "error": {"errorClass": "ToolCallError", "message": "no tools here"}}


async def measure(tools: int, runs: int, rounds: int) -> tuple[list[float], list[float]]:
    modules = {MODULE_NAME: discovery_module(copies_catalog(tools))}
    code = SCRIPT % {"queries": repr(QUERIES), "rounds": rounds}
    searches: list[float] = []
    scans: list[float] = []
    async with Sandbox(pool_size=1) as sandbox:
        for _ in range(runs):
            limits = Limits.from_json({"timeoutMs": 120_000})
            response = await sandbox.run(code, modules, no_tools, limits)
            result = response.get("result")
            if not isinstance(result, dict) or result.get("count") != tools:
                raise SystemExit(f"the bench script failed: {response.get('diagnostics')}")
            searches.append(result["search"])
            scans.append(result["scan"])
    return searches, scans


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    searches, scans = asyncio.run(measure(args.tools, args.runs, args.rounds))
    search, scan = statistics.median(searches), statistics.median(scans)
    ratio = search / scan if scan else float("inf")
    print(
        f"discovery over {args.tools} tools, {args.runs} runs x {args.rounds} rounds x {len(QUERIES)} queries"
    )
    print(f"  searchTools per search  p50 {search:7.2f} ms  p90 {p90(searches):7.2f} ms")
    print(f"  scan of listTools       p50 {scan:7.2f} ms  p90 {p90(scans):7.2f} ms")
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(f"  search / scan           {ratio:.3f}x   target <= {TARGET_RATIO}x: {verdict}")


if __name__ == "__main__":
    main()
