"""Benchmark: what learning output types keeps in `serve`'s memory. Not a test.

    .venv/bin/python bench/memory_learn.py [--calls N] [--kib N] [--record]

Spawns the real CLI, `codemode-gen serve` over stdio, on a project holding
tests/servers/payload.py (out/ empty: the server is built in memory, as for a server never
recorded), and drives it with the real `mcp` client. N runs each call `blob` (no outputSchema:
its output type is learned from every call) for about --kib KiB of JSON with a different seed
(odd seeds add an optional field, so the type changes as calls come); then the same N calls of
`typed_blob` (a declared outputSchema: nothing to learn) in a fresh serve. Reported: serve's
VmRSS after one warm-up call and after the N calls, and the growth, for each tool; and whether
the learned type shows the optional field (it reflects every call). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PAYLOAD = REPO / "tests" / "servers" / "payload.py"
MiB = 1024 * 1024
LIMITS = {"timeoutMs": 120_000, "maxMemoryBytes": 256 * 1024 * 1024}


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def serve_pid(client_pid: int) -> int:
    """The `codemode-gen serve` process among this process's children."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == client_pid and b"serve" in cmd:
            return int(entry)
    raise RuntimeError("serve process not found")


async def measure(project: Path, tool: str, calls: int, kib: int, record: bool) -> dict[str, Any]:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    args = ["-m", "codemode_gen", "serve", "--config", str(project / ".mcp.json")] + (
        ["--record"] if record else []
    )
    params = StdioServerParameters(
        command=PYTHON,
        args=args,
        cwd=str(project),
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )

    async def run(code: str) -> Any:
        response = await client.call_tool(
            "codemode.run", {"code": code, "limits": LIMITS, "requestedCapabilities": ["payload"]}
        )
        structured = response.structured_content
        assert structured is not None and not [
            d for d in structured["diagnostics"] if d["severity"] == "error"
        ], structured
        return structured["result"]

    def call(seed: int) -> str:
        return (
            "import * as p from '@codemode/servers/payload';\n"
            f"globalThis.__codemode_result__ = (await p.{tool}({{kib: {kib}, seed: {seed}}})).items.length;"
        )

    probe = (
        "import { getTool } from '@codemode/discovery';\n"
        f"const t = await getTool('payload', '{tool}');\n"
        "globalThis.__codemode_result__ = { learned: t.outputSchemaLearned ?? null, declaration: t.declaration };"
    )
    with open(project / "serve.stderr.log", "w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            mode="legacy",
            read_timeout_seconds=300,
            client_info=types.Implementation(name="bench", version="0"),
        ) as client:
            pid = serve_pid(os.getpid())
            await run(call(1000))  # warm: connected, module built, worker pool up
            before = rss_of(pid)
            for seed in range(calls):
                await run(call(seed))
            after = rss_of(pid)
            learned = await run(probe)
    return {"before": before, "after": after, "learned": learned}


async def main_async(args: argparse.Namespace) -> int:
    project = Path(tempfile.mkdtemp(prefix="memory-learn-"))
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"payload": {"command": PYTHON, "args": [str(PAYLOAD)]}}})
    )
    print(
        f"{args.calls} calls of ~{args.kib} KiB of JSON each through `codemode-gen serve`"
        f"{' --record' if args.record else ''} (VmRSS of the serve process)"
    )
    for tool in ("blob", "typed_blob"):
        got = await measure(project, tool, args.calls, args.kib, args.record)
        growth = (got["after"] - got["before"]) / MiB
        learned = got["learned"]["learned"]
        optional = "note?:" in (got["learned"]["declaration"] or "")
        print(
            f"  {tool:<11} before {got['before'] / MiB:7.1f} MiB  after {got['after'] / MiB:7.1f} MiB"
            f"  growth {growth:+7.1f} MiB  learned {learned}  optional field typed: {optional}"
        )
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--kib", type=int, default=900)
    parser.add_argument(
        "--record", action="store_true", help="serve --record (fixtures/ in a scratch project)"
    )
    sys.exit(anyio.run(main_async, parser.parse_args()))


if __name__ == "__main__":
    main()
