"""Benchmark: what `codemode-gen serve` sends back to the model, in characters and bytes. Not a test.

    .venv/bin/python bench/response.py [--limits JSON]

It spawns the real CLI, `codemode-gen serve --config .mcp.json` (the bundled demo: notes +
calendar, out/ as committed), drives it with the real `mcp` client and runs a few agent
scripts through the one tool, codemode.run. For each it prints the size of the text content
block (what Claude Code and most clients show the model) and of structuredContent as JSON (what
the rest show), in characters and UTF-8 bytes, and how much of the text is toolTrace,
toolSummary, diagnostics, logs and result.

Each script runs twice, on fresh demo servers each time (the servers keep state in memory):
with serve's defaults, and with `limits: {"trace": "full", "maxResponseChars": 16777216}` (the
whole trace, no budget: what serve sent before the response was made for the model). A host
that does not know those keys ignores them (spec §3.2.4), so the same bench measures an older
serve too. `--limits JSON` adds limits to both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TOOL = "codemode.run"
#: Bounds one request (a cold start takes seconds); a hung serve fails the bench.
REQUEST_TIMEOUT_S = 60.0
#: The limits of the "whole response" pass: the full trace, no budget (the response before).
WHOLE = {"trace": "full", "maxResponseChars": 16 * 1024 * 1024}

SCRIPTS: dict[str, str] = {
    "plan_week.js": (REPO / "examples" / "plan_week.js").read_text(),
    # A loop: one call per item (one of them fails), a small answer.
    "loop of 9 calls": """
import * as notes from "@codemode/servers/notes";
const titles = [];
for (const id of [1, 2, 3, 4, 5, 1, 2, 3, 99]) {
  try { titles.push((await notes.get_note({ id })).title); } catch (e) { titles.push(null); }
}
globalThis.__codemode_result__ = titles;
""",
    # A naive agent: dumps everything it read, logs every note.
    "dump everything": """
import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";
const all = await notes.list_notes();
for (const n of all.result) console.log(n);
const { events } = await calendar.list_events({ from: "2026-01-01", to: "2026-12-31" });
globalThis.__codemode_result__ = { notes: all.result, events,
  bodies: Array.from({ length: 400 }, (_, i) => all.result[i % all.result.length].body) };
""",
    # Failing calls, caught: the trace's errors are what the model needs.
    "failures caught": """
import * as notes from "@codemode/servers/notes";
let failed = 0;
for (let i = 0; i < 3; i++) { try { await notes.flaky_sync(); } catch (e) { failed++; } }
try { await notes.get_note({ id: 99 }); } catch (e) { failed++; }
globalThis.__codemode_result__ = { failed };
""",
}


async def run_all(extra: dict[str, Any]) -> list[tuple[str, str, dict[str, int], dict[str, int]]]:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    rows = []
    env = {**os.environ, "CODEMODE_PYTHON": PYTHON}
    for name, code in SCRIPTS.items():
        for label, limits in (("serve default", {}), ("whole (before)", WHOLE)):
            params = StdioServerParameters(
                command=PYTHON,
                args=["-m", "codemode_gen", "serve", "--config", str(REPO / ".mcp.json")],
                cwd=str(REPO),
                env=env,
            )
            with open(os.devnull, "w") as errlog:
                async with Client(
                    stdio_client(params, errlog=errlog),
                    mode="legacy",
                    read_timeout_seconds=REQUEST_TIMEOUT_S,
                ) as client:
                    got = await client.call_tool(
                        TOOL, {"code": code, "limits": {**limits, **extra}}
                    )
            block = got.content[0]
            text = block.text if isinstance(block, types.TextContent) else ""
            structured = json.dumps(
                got.structured_content, ensure_ascii=False, separators=(",", ":")
            )
            parts = {
                key: len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
                for key, value in json.loads(text).items()
            }
            sizes = {
                "text chars": len(text),
                "text bytes": len(text.encode()),
                "structured chars": len(structured),
            }
            rows.append((name, label, sizes, parts))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limits", default="{}", help="extra limits (JSON) for every run")
    args = parser.parse_args()
    rows = anyio.run(run_all, json.loads(args.limits))
    keys = ("logs", "result", "diagnostics", "toolTrace", "toolSummary")
    print(
        f"{'script':18} {'response':15} {'text chars':>10} {'bytes':>7} {'struct':>7}  "
        + " ".join(f"{k:>11}" for k in keys)
    )
    for name, label, sizes, parts in rows:
        print(
            f"{name:18} {label:15} {sizes['text chars']:>10} {sizes['text bytes']:>7} "
            f"{sizes['structured chars']:>7}  " + " ".join(f"{parts.get(k, 0):>11}" for k in keys)
        )


if __name__ == "__main__":
    main()
