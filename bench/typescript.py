"""Benchmark: what TypeScript support costs (spec §3.2.1 scripts, §3.3.3 diagnostics). Not a test.

    .venv/bin/python bench/typescript.py [--section check] [--repeat N]

(1) Strip cost (`--section strip`): `erase_types` (runtime/host/tsinput.py), which every run, API, `run` and
    `serve`, calls once before the syntax check, on 20-, 200- and 2,000-line agent scripts in
    JavaScript (nothing to erase: the fast path, the same string back) and TypeScript, side by
    side (median and max over --repeat calls), plus the one-off cost of the first call in a process
    (importing tree-sitter, loading the grammar, compiling the query).
(2) Check latency (`codemode-gen check`, `serve --typecheck`, `limits.typecheck`), per engine the
    compiler runs on (`--backend`, default both): node, and QuickJS (runtime/sandbox/typecheck_worker.py,
    what a machine without node gets). The first check of a fresh checker (process start +
    loading typescript.js, lib.*.d.ts and out/codemode.d.ts + the check) and warm checks of the
    same long-lived process (median and max over --repeat checks; fewer for 2,000 lines), for
    20-, 200- and 2,000-line agent scripts in JavaScript and TypeScript, against the committed
    demo out/; the checker process's RSS (now and peak) after them; plus a whole
    `codemode-gen check` command (for QuickJS with no node on PATH). Target: warm ≤ 300 ms for
    the scripts agents write (tens of lines).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "out"
SIZES = (20, 200, 2000)

# ---------------------------------------------------------------------------------------------
# (1) Strip cost
# ---------------------------------------------------------------------------------------------


def bench_strip(repeat: int) -> None:
    started = time.perf_counter()
    from codemode_gen.runtime.host.tsinput import erase_types

    erase_types("const warm: number = 1;")
    first = time.perf_counter() - started
    print(f"(1) erase_types: first call in a process (import + grammar + query) {_ms(first)}")
    print(
        f"    {'lines':>6} {'JS median':>11} {'JS max':>11} {'TS median':>11} {'TS max':>11}  TS bytes erased"
    )
    for size in SIZES:
        cells = []
        erased_bytes = 0
        for lang in ("js", "ts"):
            code = agent_script(size, lang)
            times = []
            for _ in range(max(1, repeat)):
                t0 = time.perf_counter()
                out = erase_types(code)
                times.append(time.perf_counter() - t0)
            assert not out.diagnostics
            if lang == "js":
                assert out.code is code  # the fast path: plain JavaScript comes back as it was
            else:
                erased_bytes = sum(
                    a != b for a, b in zip(code.encode(), out.code.encode(), strict=True)
                )
            cells += [_ms(statistics.median(times)), _ms(max(times))]
        print(
            f"    {size:>6} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11} {cells[3]:>11}  {erased_bytes}"
        )


# ---------------------------------------------------------------------------------------------
# (2) Check latency
# ---------------------------------------------------------------------------------------------

_HEAD = {
    "js": 'import * as notes from "@codemode/servers/notes";\nimport * as calendar from "@codemode/servers/calendar";\n',
    "ts": 'import * as notes from "@codemode/servers/notes";\nimport * as calendar from "@codemode/servers/calendar";\n'
    "interface Busy { title: string; free: number }\n",
}
_BLOCK = {
    "js": """const note{i} = await notes.get_note({{ id: {i} }});
const day{i} = await calendar.free_slots({{ date: "2026-03-02", durationMinutes: 30 }});
const open{i} = (await notes.tasks_list()).result.filter((t) => !t.done);
if (note{i}.tags.includes("work")) {{
  console.log(note{i}.title, day{i}.slots.length, open{i}.length);
}}
const hits{i} = JSON.parse(await notes.search_notes({{ query: note{i}.title }}));
const busy{i} = {{ title: note{i}.title, free: day{i}.slots.length }};
console.log(hits{i}.length, busy{i}.free);
""",
    "ts": """const note{i}: notes.Note = await notes.get_note({{ id: {i} }});
const day{i}: calendar.FreeSlotsOutput = await calendar.free_slots({{ date: "2026-03-02", durationMinutes: 30 }});
const open{i} = (await notes.tasks_list()).result.filter((t: notes.Task) => !t.done);
if (note{i}.tags.includes("work")) {{
  console.log(note{i}.title, day{i}.slots.length, open{i}.length);
}}
const hits{i} = JSON.parse(await notes.search_notes({{ query: note{i}.title }})) as notes.SearchNotesJson;
const busy{i} = {{ title: note{i}.title, free: day{i}.slots.length }} satisfies Busy;
console.log(hits{i}.length, busy{i}.free);
""",
}


def agent_script(lines: int, lang: str) -> str:
    """An agent-style script of about `lines` lines that type-checks cleanly against the demo."""
    parts = [_HEAD[lang]]
    i = 1
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(_BLOCK[lang].format(i=i))
        i += 1
    return "".join(parts)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


async def _check_latency(
    repeat: int, backend: str
) -> list[tuple[str, float, float, float, int, str]]:
    from codemode_gen.runtime.host.typecheck import TypeChecker

    rows = []
    for lang in ("js", "ts"):
        for size in SIZES:
            code = agent_script(size, lang)
            async with TypeChecker(OUT, roots=(REPO,), backend=backend) as checker:  # type: ignore[arg-type]
                started = time.perf_counter()
                first = await checker.check(code, lang="auto")
                cold = time.perf_counter() - started
                assert first.diagnostics == [], first.diagnostics  # the script is clean
                warm = []
                for n in range(repeat if size <= 200 else max(3, repeat // 5)):
                    # a different script each time (nothing cached on its text)
                    started = time.perf_counter()
                    await checker.check(code + f"console.log({n});\n", lang="auto")
                    warm.append(time.perf_counter() - started)
                memory = _rss(checker._proc.pid if checker._proc is not None else None)
                rows.append(
                    (
                        f"{lang} {size:>5} lines",
                        cold,
                        statistics.median(warm),
                        max(warm),
                        checker.starts,
                        memory,
                    )
                )
    return rows


def _rss(pid: int | None) -> str:
    """The process's resident memory now and at its peak (Linux /proc), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, TypeError):
        return "?"
    kb = {
        line.split(":")[0]: int(line.split()[1])
        for line in status.splitlines()
        if line.startswith(("VmRSS", "VmHWM"))
    }
    return f"{kb.get('VmRSS', 0) / 1024:.0f} MB (peak {kb.get('VmHWM', 0) / 1024:.0f} MB)"


def bench_check(repeat: int, backends: tuple[str, ...] = ("node", "quickjs")) -> None:
    from codemode_gen.runtime.host.tscompiler import find_compiler

    compiler = find_compiler(roots=(REPO,))
    print(
        f"(2) type check against {OUT} with {compiler.typescript.parent.parent} ({compiler.found})"
    )
    for backend in backends:
        print(f"    on {backend}:")
        print(
            f"    {'script':<18} {'first':>11} {'warm median':>12} {'warm max':>11}  starts  checker RSS"
        )
        for name, cold, median, worst, starts, memory in asyncio.run(
            _check_latency(repeat, backend)
        ):
            print(
                f"    {name:<18} {_ms(cold):>11} {_ms(median):>12} {_ms(worst):>11}  {starts:>6}  {memory}"
            )
        with tempfile.TemporaryDirectory() as tmp:
            script = Path(tmp) / "agent.ts"
            script.write_text(agent_script(20, "ts"), encoding="utf-8")
            env = dict(os.environ)
            if backend == "quickjs":  # a machine without node: PATH holds nothing of it
                (Path(tmp) / "bin").mkdir()
                env["PATH"] = str(Path(tmp) / "bin")
            started = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "codemode_gen",
                    "check",
                    "--config",
                    str(REPO / ".mcp.json"),
                    str(script),
                ],
                capture_output=True,
                text=True,
                env=env,
            )
            took = time.perf_counter() - started
        print(
            f"    `codemode-gen check` of a 20-line script, whole command: {_ms(took)} (exit {proc.returncode})"
        )


SECTIONS: dict[str, Callable[[int], None]] = {
    "strip": bench_strip,
    "check": bench_check,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--section",
        choices=sorted(SECTIONS),
        action="append",
        help="run only this section (repeatable; default: all)",
    )
    parser.add_argument(
        "--repeat", type=int, default=20, help="warm checks per script (default 20)"
    )
    parser.add_argument(
        "--backend",
        choices=["node", "quickjs"],
        action="append",
        help="(2) only on this engine (repeatable; default: both)",
    )
    args = parser.parse_args()
    for name in args.section or list(SECTIONS):
        if name == "check" and args.backend:
            bench_check(args.repeat, tuple(args.backend))
        else:
            SECTIONS[name](args.repeat)


if __name__ == "__main__":
    main()
