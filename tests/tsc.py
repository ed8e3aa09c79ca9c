"""Type-check many TypeScript snippets in ONE real `tsc` run (tsc start-up costs ~1 s).

Each snippet becomes its own module file (`export {}` appended, so names never collide);
diagnostics are mapped back to (snippet, line). Settings are the ones generated declarations
must pass (spec §6.2): `--strict`, `--noEmit`, `skipLibCheck: false` (with skipLibCheck a broken
.d.ts passes silently). A missing compiler fails the test under CI and skips it elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TSC = REPO / "node_modules" / ".bin" / "tsc"
# Bounds one batched compile (hundreds of snippets take a few seconds; a hang is a bug).
TSC_TIMEOUT = 300

_SYNTAX = re.compile(r"^TS1\d{3}$")  # TS1000-TS1999: syntactic diagnostics
_DIAG = re.compile(
    r"^(?P<file>[^(\n]+)\((?P<line>\d+),(?P<col>\d+)\): error (?P<code>TS\d+): (?P<msg>.*)$"
)


@dataclass(frozen=True)
class Diagnostic:
    line: int  # 1-based, in the snippet as given
    code: str
    message: str


def require_tsc() -> Path:
    """The compiler, or skip (fail when the CI env var is set: CI must never skip tsc)."""
    if TSC.exists():
        return TSC
    message = f"TypeScript compiler not found at {TSC}; run `npm ci` in the repository root"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def check(snippets: dict[str, str]) -> dict[str, list[Diagnostic]]:
    """Compile every snippet (name -> TS source) in one run; returns name -> its errors.

    Snippets whose name ends in `.d.ts` are written as declaration files.
    """
    tsc = require_tsc()
    names = sorted(snippets)
    with tempfile.TemporaryDirectory(prefix="tsc-") as tmp:
        root = Path(tmp)
        files = {}
        for i, name in enumerate(names):
            # A name ending in .d.ts is compiled as a declaration file (ambient context).
            fname = f"s{i}.d.ts" if name.endswith(".d.ts") else f"s{i}.ts"
            files[fname] = name
            (root / fname).write_text(snippets[name] + "\nexport {};\n", encoding="utf-8")
        config = {
            "compilerOptions": {
                "strict": True,
                "noEmit": True,
                "skipLibCheck": False,
                "target": "ES2022",
                "module": "ES2022",
                "moduleResolution": "bundler",
                "types": [],
                "noErrorTruncation": True,
            },
            "files": sorted(files),
        }
        (root / "tsconfig.json").write_text(json.dumps(config), encoding="utf-8")
        proc = subprocess.run(
            [str(tsc), "-p", str(root / "tsconfig.json"), "--pretty", "false"],
            capture_output=True,
            text=True,
            timeout=TSC_TIMEOUT,
            cwd=root,
        )
    out: dict[str, list[Diagnostic]] = {name: [] for name in names}
    unparsed = []
    for line in proc.stdout.splitlines():
        match = _DIAG.match(line)
        if match:
            owner = files.get(Path(match["file"]).name)
            if owner is None:
                unparsed.append(line)
                continue
            out[owner].append(Diagnostic(int(match["line"]), match["code"], match["msg"]))
        elif line and not line.startswith(" "):
            unparsed.append(line)
    if unparsed or (proc.returncode not in (0, 1, 2)):
        raise AssertionError(
            f"tsc failed (exit {proc.returncode}):\n" + "\n".join(unparsed) + proc.stderr
        )
    syntax = [(name, d) for name, diags in out.items() for d in diags if _SYNTAX.match(d.code)]
    if syntax:
        # tsc skips every semantic check once any file has a syntax error, so nothing else
        # in this batch was really checked: never let that pass as "no errors".
        raise AssertionError(
            f"syntax errors in generated TypeScript (batch not type-checked): {syntax[:5]}"
        )
    return out


def check_one(source: str) -> list[Diagnostic]:
    return check({"snippet": source})["snippet"]


def at(source: str, needle: str, line: int) -> str:
    """`line:column` (1-based) of `needle` in line `line` of `source`: where a diagnostic points."""
    return f"{line}:{source.splitlines()[line - 1].index(needle) + 1}"


def as_namespace(block: str) -> str:
    """An agent rendering's `declare module "…" { … }` block as a namespace, so it compiles in a
    snippet module (inside a module file `declare module` would be an augmentation of a missing
    module)."""
    lines = block.split("\n")
    while lines and lines[0].startswith("//"):  # the prompt's header comment of the server
        lines.pop(0)
    head, body = lines[0], "\n".join(lines[1:])
    assert head.startswith('declare module "@codemode/servers/') and head.endswith("{")
    return "declare namespace Server {\n" + body
