"""Type checking before a run: `serve --typecheck`, `limits.typecheck` (§3.2.4 host key).

Type errors come back as `warning` diagnostics at the agent's line:column and the run goes
ahead; a compiler that is missing or too slow is an `info` line, never a blocked script. The
compiler (one node process) is started once per host and reused by every run. Real tsc, real
QuickJS, the demo's servers and a copy of the committed out/.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.runtime.host.tscompiler import Backend
from codemode_gen.runtime.host.typecheck import TypeChecker
from codemode_gen.runtime.response import Response
from tests.runtime_support import PYTHON, REPO, against_serve, script
from tests.tsc import at, require_tsc

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

WRONG_PROPERTY = """import * as notes from "@codemode/servers/notes";
const note = await notes.get_note({ id: 2 });
globalThis.__codemode_result__ = note.titel ?? note.title;
"""
WRONG_TYPE = """import * as calendar from "@codemode/servers/calendar";
let failed = null;
try {
  await calendar.free_slots({ date: "2026-03-02", durationMinutes: "30" });
} catch (e) {
  failed = e.name;
}
globalThis.__codemode_result__ = failed;
"""


def type_notes(response: Response) -> list[tuple[str, str, str]]:
    return [
        (d["severity"], d["code"], d.get("path", ""))
        for d in response["diagnostics"]
        if d["code"].startswith(("TS", "TYPECHECK_"))
    ]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo project without node_modules: the compiler comes from --tsc / tsc=."""
    base = tmp_path_factory.mktemp("typecheck")
    shutil.copytree(REPO / "out", base / "out")
    servers = REPO / "examples" / "servers"
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": PYTHON, "args": [str(servers / "notes_server.py")]},
                    "calendar": {"command": PYTHON, "args": [str(servers / "calendar_server.py")]},
                }
            }
        )
    )
    return base


def test_limits_typecheck_warns_and_the_run_goes_ahead_with_one_compiler(project: Path) -> None:
    tsc = require_tsc()

    async def main() -> tuple[list[Response], int, Response]:
        async with CodeMode.from_config(project / ".mcp.json", tsc=tsc) as cm:
            responses = [await cm.run(WRONG_PROPERTY, limits={"typecheck": True}) for _ in range(3)]
            unchecked = await cm.run(WRONG_PROPERTY)  # off by default
            return responses, cm.typechecker().starts, unchecked

    responses, starts, unchecked = anyio.run(main)
    for response in responses:
        assert type_notes(response) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))]
        warning = response["diagnostics"][0]
        assert "`.title`" in warning["hint"]
        assert response["result"] == "Groceries"  # the script ran
        assert not [d for d in response["diagnostics"] if d["severity"] == "error"]
    assert starts == 1  # one compiler process for all runs (bench/typescript.py times them)
    assert type_notes(unchecked) == [] and unchecked["result"] == "Groceries"


def test_host_default_per_run_off_and_syntax_errors(project: Path) -> None:
    tsc = require_tsc()

    async def main() -> list[Response]:
        async with CodeMode.from_config(project / ".mcp.json", typecheck=True, tsc=tsc) as cm:
            return [
                await cm.run(WRONG_TYPE),
                await cm.run(WRONG_TYPE, limits={"typecheck": False}),
                await cm.run("const x = ;\n"),
            ]

    on, off, broken = anyio.run(main)
    assert type_notes(on) == [("warning", "TS2322", at(WRONG_TYPE, "durationMinutes", 4))]
    assert on["result"] == "SchemaValidationError"  # checked, then run: the host caught it too
    assert type_notes(off) == [] and off["result"] == "SchemaValidationError"
    # A script that cannot parse never runs, and the sandbox's SYNTAX_ERROR is the answer.
    assert [d["code"] for d in broken["diagnostics"]] == ["SYNTAX_ERROR"]


def test_missing_compiler_is_an_info_and_never_blocks(project: Path) -> None:
    """Said to a run that asked for the check (its reader would take no warnings for a clean
    check); a run checked by the host's default (serve --typecheck) cannot do anything about it
    and is not told on every run."""

    async def main() -> tuple[Response, Response]:
        async with CodeMode.from_config(
            project / ".mcp.json", tsc=project / "no-such-tsc", typecheck=True
        ) as cm:
            return await cm.run(WRONG_PROPERTY, limits={"typecheck": True}), await cm.run(
                WRONG_PROPERTY
            )

    response, by_default = anyio.run(main)
    (info,) = [d for d in response["diagnostics"] if d["code"] == "TYPECHECK_UNAVAILABLE"]
    assert info["severity"] == "info" and "no such file" in info["message"]
    assert "npm i -g typescript" in info["hint"]
    assert response["result"] == "Groceries"
    assert by_default["diagnostics"] == [] and by_default["result"] == "Groceries"


def test_check_time_counts_within_timeout_ms(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compiler that needs longer to start than the check's share of timeoutMs: that run skips
    the check (info) and still runs; the start goes on, so the next run is checked. The start is
    made SLOW_START_S long (a node preload), so the outcome does not depend on the machine."""
    tsc = require_tsc()
    slow_start_s, timeout_ms = 6.0, 4000  # the check may use half of 4 s: the start takes 6 s
    monkeypatch.setenv("NODE_OPTIONS", f"--require {REPO / 'tests' / 'data' / 'slow_start.js'}")
    monkeypatch.setenv("CODEMODE_TEST_SLOW_START_MS", str(int(slow_start_s * 1000)))

    async def main() -> tuple[Response, Response, int]:
        async with CodeMode.from_config(project / ".mcp.json", tsc=tsc) as cm:
            short = await cm.run(
                "globalThis.__codemode_result__ = 1;",
                limits={"typecheck": True, "timeoutMs": timeout_ms},
            )
            later = await cm.run(WRONG_PROPERTY, limits={"typecheck": True})
            return short, later, cm.typechecker().starts

    short, later, starts = anyio.run(main)
    # Skipped, not waited for: the script ran within its timeoutMs.
    assert type_notes(short) == [("info", "TYPECHECK_SKIPPED", "")]
    assert short["result"] == 1
    assert type_notes(later) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))]
    assert starts == 1


def test_servers_out_lacks_are_not_reported_missing(project: Path) -> None:
    """A configured server without declarations in out/ is built in memory at run time: importing
    it is unchecked, not an error; an unknown server is a TS2307 warning."""
    tsc = require_tsc()
    config = project / "with-slow.mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    code = 'import { tick } from "@codemode/servers/slow";\nimport * as nope from "@codemode/servers/nope";\n'

    async def main() -> Response:
        async with CodeMode.from_config(config, tsc=tsc) as cm:
            return await cm.run(code, limits={"typecheck": True})

    response = anyio.run(main)
    assert type_notes(response) == [("warning", "TS2307", at(code, '"@codemode/servers/nope"', 2))]


@pytest.mark.parametrize("backend", ["node", "quickjs"])
def test_checker_reloads_declarations_and_restarts_after_a_crash(
    tmp_path: Path, backend: Backend
) -> None:
    """`codemode-gen generate` while serving changes codemode.d.ts: the next check sees it. A
    checker process that died is started again by the next check. On both engines."""
    tsc = require_tsc()
    shutil.copytree(REPO / "out", tmp_path / "out")
    declarations = tmp_path / "out" / "codemode.d.ts"

    async def main() -> tuple[list[list[dict[str, Any]]], int]:
        found = []
        async with TypeChecker(tmp_path / "out", tsc=tsc, backend=backend) as checker:
            found.append((await checker.check(WRONG_PROPERTY, timeout=60)).diagnostics)
            declarations.write_text(
                declarations.read_text().replace(
                    "export function get_note(", "export function read_note("
                )
            )
            found.append((await checker.check(WRONG_PROPERTY, timeout=60)).diagnostics)
            assert checker._proc is not None
            checker._proc.kill()
            await checker._proc.wait()
            found.append((await checker.check(WRONG_PROPERTY, timeout=60)).diagnostics)
            return found, checker.starts

    (before, after, restarted), starts = anyio.run(main)
    assert [d["code"] for d in before] == [4111]
    assert [d["code"] for d in after] == [2339]
    assert "Property 'get_note' does not exist" in after[0]["message"]
    assert restarted == after and starts == 2


def test_a_check_over_its_time_is_skipped_and_a_stuck_checker_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode_gen.runtime.host import typecheck

    tsc = require_tsc()

    async def main() -> tuple[bool, list[dict[str, Any]], int]:
        async with typecheck.TypeChecker(REPO / "out", tsc=tsc) as checker:
            await checker.warm()
            monkeypatch.setattr(
                typecheck, "STUCK_CHECK_S", 0.0
            )  # every unanswered request is "stuck"
            try:
                await checker.check(WRONG_PROPERTY, timeout=0.0001)
                timed_out = False
            except TimeoutError:
                timed_out = True
            monkeypatch.setattr(typecheck, "STUCK_CHECK_S", 10.0)
            again = await checker.check(WRONG_PROPERTY, timeout=60)
            return timed_out, again.diagnostics, checker.starts

    timed_out, again, starts = anyio.run(main)
    assert timed_out and [d["code"] for d in again] == [4111]
    assert starts == 2  # the stuck process was killed, the next check started another


# Scripts with the mistakes models make, TypeScript the sandbox cannot erase, and JavaScript.
SAME_ON_BOTH = {
    "wrong property": WRONG_PROPERTY,
    "wrong type": WRONG_TYPE,
    "missing field": 'import { get_note } from "@codemode/servers/notes";\nconst n = await get_note({});\n',
    "no argument": 'import { get_note } from "@codemode/servers/notes";\nconst n = await get_note();\n',
    "unknown export": 'import * as notes from "@codemode/servers/notes";\nawait notes.get_nots({ id: 1 });\n',
    "unknown server": 'import * as x from "@codemode/servers/nope";\n',
    "host module": 'import * as fs from "node:fs";\nfs.readFileSync("/etc/passwd");\n',
    "sandbox globals": 'await fetch("https://example.com");\nconst p = process.env;\nrequire("fs");\n',
    "possibly undefined": 'const xs: number[] = [];\nconst m = new Map<string, number>();\nm.get("a").toFixed();\n',
    "unknown catch": 'try { JSON.parse("x"); } catch (e) { console.log(e.message); }\n',
    "implicit any": "export function f(x) { return x; }\n",
    "ts syntax as js": "const n: number = 1;\n",
    "syntax error": "const x = ;\n",
    "enum": "enum Color { Red, Green }\nexport {};\n",
    "namespace with values": "namespace Util { export const x = 1; }\n",
    "parameter property": "class Box {\n  constructor(private value: number) {}\n}\n",
    "prefix assertion": 'const n = <number>JSON.parse("1");\n',
    "import = require": 'import fs = require("fs");\n',
    "unicode": 'const s: number = "héllo 😀";\nconst t = "😀".toFixd();\n',
}
# TypeScript's own word on what cannot be erased (erasableSyntaxOnly): TS1294 at the construct.
NOT_ERASABLE = {
    "enum": (1, 6),
    "namespace with values": (1, 11),
    "parameter property": (2, 15),
    "prefix assertion": (1, 11),
    "import = require": (1, 1),
}


def test_node_and_quickjs_give_the_same_diagnostics() -> None:
    """The two engines run the same typecheck_core.js: the same diagnostics, byte for byte,
    for each language mode; TypeScript that cannot be erased is TS1294 on both."""
    tsc = require_tsc()

    async def all_on(backend: Backend) -> dict[str, Any]:
        found = {}
        async with TypeChecker(REPO / "out", tsc=tsc, backend=backend) as checker:
            for name, code in SAME_ON_BOTH.items():
                for lang in ("auto", "ts", "js"):
                    result = await checker.check(code, lang=lang, timeout=60)
                    found[f"{name} ({lang})"] = (result.lang, result.diagnostics)
            assert checker.compiler is not None and checker.compiler.backend == backend
        return found

    node, quickjs = anyio.run(all_on, "node"), anyio.run(all_on, "quickjs")
    assert json.dumps(quickjs, sort_keys=True) == json.dumps(node, sort_keys=True)
    for name, (line, column) in NOT_ERASABLE.items():
        _, diagnostics = quickjs[f"{name} (ts)"]
        assert (1294, line, column) in {(d["code"], d["line"], d["column"]) for d in diagnostics}, (
            name
        )
    assert {d["code"] for d in quickjs["wrong property (auto)"][1]} == {4111}


@pytest.mark.parametrize("backend", ["node", "quickjs"])
def test_a_script_too_deep_for_the_compiler_fails_that_check_only(backend: Backend) -> None:
    """A nesting deeper than the compiler's stack: that check is unavailable (one line, no host
    path from its stack), the same checker answers the next one."""
    from codemode_gen.runtime.host.typecheck import TypeCheckUnavailable

    deep = "const x = " + "[" * 5000 + "]" * 5000 + ";\n"

    async def main() -> tuple[str, list[dict[str, Any]], int]:
        async with TypeChecker(REPO / "out", tsc=require_tsc(), backend=backend) as checker:
            with pytest.raises(TypeCheckUnavailable) as failed:
                await checker.check(deep, lang="ts", timeout=60)
            return (
                str(failed.value),
                (await checker.check(WRONG_PROPERTY, timeout=60)).diagnostics,
                checker.starts,
            )

    message, after, starts = anyio.run(main)
    assert message == "the type checker failed: RangeError: Maximum call stack size exceeded"
    assert [d["code"] for d in after] == [4111] and starts == 1


# ------------------------------------------------------------------ serve --typecheck


def checker_pids(out_dir: Path) -> set[int]:
    """node processes running the type-check server for `out_dir`."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"typecheck_server.js") for a in argv) and str(out_dir).encode() in argv:
            found.add(int(entry))
    return found


def test_serve_typecheck_warns_over_mcp_and_reuses_the_compiler(project: Path) -> None:
    tsc = require_tsc()
    out_dir = project / "out"

    async def body(client: Any) -> Any:
        tool = (await client.list_tools()).tools[0]
        first = await client.call_tool("codemode.run", {"code": WRONG_PROPERTY})
        pids_first = checker_pids(out_dir)
        second = await client.call_tool("codemode.run", {"code": WRONG_TYPE})
        pids_second = checker_pids(out_dir)
        off = await client.call_tool(
            "codemode.run", {"code": WRONG_TYPE, "limits": {"typecheck": False}}
        )
        return tool, first, second, off, pids_first, pids_second

    tool, first, second, off, pids_first, pids_second = against_serve(
        project, body, "--out", str(out_dir), "--typecheck", "--tsc", str(tsc)
    )
    assert "typecheck on (type errors as warnings)" in tool.description
    assert tool.input_schema["properties"]["limits"]["properties"]["typecheck"]["type"] == "boolean"
    assert not first.is_error
    assert type_notes(first.structured_content) == [
        ("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))
    ]
    assert first.structured_content["result"] == "Groceries"
    assert type_notes(second.structured_content) == [
        ("warning", "TS2322", at(WRONG_TYPE, "durationMinutes", 4))
    ]
    assert second.structured_content["result"] == "SchemaValidationError"
    assert type_notes(off.structured_content) == []
    assert len(pids_first) == 1 and pids_second == pids_first  # started once, reused
    assert checker_pids(out_dir) == set()  # and stopped with serve
