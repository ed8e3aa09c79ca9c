"""`codemode-gen check`: type-check agent scripts against out/ with the real TypeScript compiler.

The scripts are checked against the repository's committed out/ (the demo's notes and calendar
servers), each error at the line:column of the agent's own text. Where the compiler is looked
for (`find_compiler`) and the hints are tested without node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemode_gen.runtime.host.tscompiler import (
    INSTALL_HINT,
    CompilerNotFound,
    TypeScriptNotFound,
    find_compiler,
)
from codemode_gen.runtime.host.tsdiagnostics import hint_for, to_diagnostics
from codemode_gen.runtime.host.tsinstall import (
    CACHE_ENV,
    REGISTRY_ENV,
    TYPESCRIPT_VERSION,
    typescript_dir,
)
from codemode_gen.runtime.host.typecheck import CheckResult, lang_of
from tests.conftest import UNREACHABLE_REGISTRY
from tests.tsc import at, require_tsc

REPO = Path(__file__).resolve().parents[2]
# Bounds one `check` (node start + loading the declarations: about a second).
CHECK_TIMEOUT = 120

WRONG_PROPERTY = """import * as notes from "@codemode/servers/notes";
const note = await notes.get_note({ id: 2 });
globalThis.__codemode_result__ = note.titel;
"""
MISSING_PROPERTY = """import { get_note } from "@codemode/servers/notes";
const note = await get_note({});
"""
MISSING_ARGUMENT = """import { get_note } from "@codemode/servers/notes";
const note = await get_note();
"""
WRONG_TYPE = """import * as calendar from "@codemode/servers/calendar";
const { slots } = await calendar.free_slots({ date: "2026-03-02", durationMinutes: "30" });
"""
CORRECT = """import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";
const note = await notes.get_note({ id: 2 });
const { slots } = await calendar.free_slots({ date: "2026-03-02", durationMinutes: 30 });
globalThis.__codemode_result__ = { title: note.title, free: slots.length };
"""
CORRECT_TS = """import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";
interface Summary { title: string; free: number }
const note: notes.Note = await notes.get_note({ id: 2 });
const day = { date: "2026-03-02", durationMinutes: 30 } satisfies Parameters<typeof calendar.free_slots>[0];
const { slots } = await calendar.free_slots(day);
const first = slots[0]!;
globalThis.__codemode_result__ = { title: note.title as string, free: slots.length } satisfies Summary;
console.log(first?.start);
"""


def run_check(
    *args: str, cwd: Path = REPO, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode_gen", "check", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=CHECK_TIMEOUT,
    )


def checked(
    tmp_path: Path, source: str, name: str = "agent.js", *args: str
) -> tuple[int, list[dict[str, str]]]:
    require_tsc()
    script = tmp_path / name
    script.write_text(source, encoding="utf-8")
    proc = run_check("--config", str(REPO / ".mcp.json"), *args, str(script))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


# ------------------------------------------------------------------ the compiler, for real


@pytest.mark.slow
def test_wrong_property_of_a_typed_result_is_reported_at_its_column(tmp_path: Path) -> None:
    code, found = checked(tmp_path, WRONG_PROPERTY)
    assert code == 1
    assert [(d["severity"], d["code"], d["path"]) for d in found] == [
        ("error", "TS4111", at(WRONG_PROPERTY, "titel", 3))
    ]
    assert "'titel' is not declared on type 'Note'" in found[0]["message"]
    assert "`.title`" in found[0]["hint"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "code", "needle", "hint"),
    [
        (MISSING_PROPERTY, "TS2345", "{}", "add the required property `id`"),
        (MISSING_ARGUMENT, "TS2554", "get_note()", "one input object"),
    ],
    ids=["missing property", "no argument"],
)
def test_missing_required_argument_is_reported_at_the_call(
    tmp_path: Path, source: str, code: str, needle: str, hint: str
) -> None:
    exit_code, found = checked(tmp_path, source)
    assert exit_code == 1
    assert [(d["code"], d["path"]) for d in found] == [(code, at(source, needle, 2))]
    assert hint in found[0]["hint"]


@pytest.mark.slow
def test_wrong_argument_type_is_reported_at_the_property(tmp_path: Path) -> None:
    exit_code, found = checked(tmp_path, WRONG_TYPE)
    assert exit_code == 1
    assert [(d["code"], d["path"]) for d in found] == [
        ("TS2322", at(WRONG_TYPE, "durationMinutes", 2))
    ]
    assert found[0]["message"] == "Type 'string' is not assignable to type 'number'."
    assert "Number(" in found[0]["hint"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "name"), [(CORRECT, "agent.js"), (CORRECT_TS, "agent.ts")], ids=["js", "ts"]
)
def test_correct_script_gives_no_diagnostics_and_exit_0(
    tmp_path: Path, source: str, name: str
) -> None:
    assert checked(tmp_path, source, name) == (0, [])


# The demo's `stats` counts notes per tag: the tag names are data, so `byTag` is a map
# (generator/infer.py) and any tag indexes it, one that no recording holds too.
MAP_BY_TAG = """import * as notes from "@codemode/servers/notes";
const stats = JSON.parse(await notes.stats()) as notes.StatsJson;
const tag: string = "garden";
const garden: number = stats.byTag[tag] ?? 0;
const biggest = Object.entries(stats.byTag).sort((a, b) => b[1] - a[1])[0];
globalThis.__codemode_result__ = { garden, biggest, open: stats.tasks.open };
"""


@pytest.mark.slow
def test_a_map_of_data_keys_is_indexed_by_any_key(tmp_path: Path) -> None:
    assert checked(tmp_path, MAP_BY_TAG, "agent.ts") == (0, [])
    code, found = checked(
        tmp_path, MAP_BY_TAG.replace("stats.tasks.open", "stats.tasks.opened"), "agent.ts"
    )
    # the record around the map keeps its fields: one it does not have is still reported
    assert (
        code == 1 and [d["code"] for d in found] == ["TS4111"] and "'opened'" in found[0]["message"]
    )


@pytest.mark.slow
def test_dash_reads_stdin_and_detects_typescript(tmp_path: Path) -> None:
    require_tsc()
    config = ("--config", str(REPO / ".mcp.json"))
    wrong = run_check(*config, "-", stdin=WRONG_TYPE)
    assert wrong.returncode == 1, wrong.stderr
    assert [(d["code"], d["path"]) for d in json.loads(wrong.stdout)] == [
        ("TS2322", at(WRONG_TYPE, "durationMinutes", 2))
    ]
    # No extension: TypeScript syntax makes it TypeScript; --lang js checks it as JavaScript.
    auto = run_check(*config, "-", stdin=CORRECT_TS)
    assert (auto.returncode, json.loads(auto.stdout)) == (0, [])
    as_js = run_check(*config, "--lang", "js", "-", stdin=CORRECT_TS)
    assert as_js.returncode == 1
    assert {d["code"] for d in json.loads(as_js.stdout)} >= {
        "TS8010"
    }  # type annotations in a .js file


@pytest.mark.slow
def test_no_compiler_and_no_download_exits_2_with_the_ways_out(tmp_path: Path) -> None:
    """A project without node_modules, PATH with node only, no --tsc, an empty cache and no
    registry to download TypeScript from: exit 2 saying what was looked for, why the download
    failed and what to do."""
    project = tmp_path / "project"
    shutil.copytree(REPO / "out", project / "out")
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    (project / "agent.js").write_text(CORRECT)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = shutil.which("node")
    if node:
        (bin_dir / "node").symlink_to(node)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        CACHE_ENV: str(tmp_path / "cache"),
        REGISTRY_ENV: UNREACHABLE_REGISTRY,
    }
    proc = run_check("agent.js", cwd=project, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert (
        "no TypeScript compiler found" in proc.stderr
        and "cannot download TypeScript" in proc.stderr
    )
    assert "npm i -g typescript" in proc.stderr and "--tsc PATH" in proc.stderr
    assert "codemode-gen check --install-typescript" in proc.stderr and REGISTRY_ENV in proc.stderr
    assert not (tmp_path / "cache" / f"typescript-{TYPESCRIPT_VERSION}").exists()
    # The same project with --tsc pointing at one works (on node, or QuickJS without it).
    tsc = require_tsc()
    found = run_check("--tsc", str(tsc), "agent.js", cwd=project, env=env)
    assert (found.returncode, found.stdout.strip()) == (0, "[]"), found.stderr


# TypeScript that `run` cannot run (runtime/host/tsinput.py cannot erase it, or QuickJS cannot parse
# what is left: decorators), with where `run` reports it.
NOT_RUNNABLE = {
    "enum": ("enum Color { Red, Green }\nglobalThis.__codemode_result__ = Color.Red;\n", "1:1"),
    "const enum": (
        "const enum Flag { On = 1 }\nglobalThis.__codemode_result__ = Flag.On;\n",
        "1:1",
    ),
    "namespace with values": (
        "namespace Util {\n  export const x = 1;\n}\nconsole.log(Util.x);\n",
        "1:1",
    ),
    "parameter property": ("class Box {\n  constructor(private value: number) {}\n}\n", "2:15"),
    "readonly parameter property": (
        "class Box {\n  constructor(readonly value: number) {}\n}\n",
        "2:15",
    ),
    "prefix assertion": ('const n = <number>JSON.parse("1");\n', "1:11"),
    "import = require": ('import fs = require("fs");\n', "1:1"),
    "export =": ("const x = 1;\nexport = x;\n", "2:1"),
    "decorator": (
        "function logged(value: any, context: any) { return value; }\nclass C {\n  @logged\n  m() {}\n}\n",
        "3:3",
    ),
    "as that would regroup": ("const a = 1, b = 2;\nconst c = a + b as number / 2;\n", "2:11"),
}


@pytest.mark.slow
@pytest.mark.parametrize("construct", list(NOT_RUNNABLE))
def test_s3_2_1_check_refuses_what_run_cannot_run_with_run_s_diagnostic(
    tmp_path: Path, construct: str
) -> None:
    """`codemode-gen check` prints exactly the SYNTAX_ERROR diagnostics `codemode-gen run` answers
    for TypeScript it cannot erase (same code, message, hint, path), exits 1, and does not go
    on to type-check a script that cannot run."""
    source, path = NOT_RUNNABLE[construct]
    script = tmp_path / "agent.ts"
    script.write_text(source, encoding="utf-8")
    checked = run_check("--config", str(REPO / ".mcp.json"), str(script))
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode_gen",
            "run",
            "--config",
            str(REPO / ".mcp.json"),
            str(script),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT,
    )
    assert (checked.returncode, ran.returncode) == (1, 1), checked.stderr + ran.stderr
    response = json.loads(ran.stdout)
    assert response["result"] is None and response["toolTrace"] == []
    assert json.loads(checked.stdout) == response["diagnostics"]
    [refused] = response["diagnostics"]
    assert (refused["code"], refused["severity"], refused["path"]) == (
        "SYNTAX_ERROR",
        "error",
        path,
    )
    assert refused["message"].startswith("SyntaxError: ") and refused["hint"]


def test_missing_declarations_and_script_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}}')
    (tmp_path / "agent.js").write_text("1;\n")
    proc = run_check("agent.js", cwd=tmp_path)
    assert (
        proc.returncode == 2
        and "codemode.d.ts: not found" in proc.stderr
        and "generate" in proc.stderr
    )
    proc = run_check("--out", str(REPO / "out"), "missing.js", cwd=tmp_path)
    assert proc.returncode == 2 and "missing.js: script not found" in proc.stderr


# ------------------------------------------------------------------ finding the compiler (no node)


def fake_typescript(root: Path) -> Path:
    """An npm layout: node_modules/typescript/{bin/tsc, lib/typescript.js} and the .bin link."""
    package = root / "node_modules" / "typescript"
    (package / "bin").mkdir(parents=True)
    (package / "lib").mkdir()
    (package / "bin" / "tsc").write_text("#!/usr/bin/env node\n")
    (package / "bin" / "tsc").chmod(0o755)
    (package / "lib" / "typescript.js").write_text("module.exports = {};\n")
    (root / "node_modules" / ".bin").mkdir()
    (root / "node_modules" / ".bin" / "tsc").symlink_to("../typescript/bin/tsc")
    return package / "lib" / "typescript.js"


def fake_node(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    node = folder / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    return str(folder)


def test_compiler_is_found_in_the_project_or_a_parent_folder(tmp_path: Path) -> None:
    package = fake_typescript(tmp_path)
    path_env = fake_node(tmp_path / "bin")
    found = find_compiler(roots=[tmp_path / "a" / "b"], path_env=path_env)
    assert found.typescript == package.resolve()
    assert found.node == str(tmp_path / "bin" / "node")
    assert found.found.endswith("node_modules/.bin/tsc")


def test_explicit_tsc_and_path_lookup(tmp_path: Path) -> None:
    package = fake_typescript(tmp_path / "global" / "lib")
    path_env = fake_node(tmp_path / "bin")
    tsc = tmp_path / "global" / "lib" / "node_modules" / "typescript" / "bin" / "tsc"
    assert find_compiler(tsc, path_env=path_env).typescript == package.resolve()
    assert (
        find_compiler(tsc.parent.parent, path_env=path_env).typescript == package.resolve()
    )  # the package folder
    # tsc on PATH (a link into the package, as npm -g makes it)
    (tmp_path / "bin" / "tsc").symlink_to(tsc)
    assert find_compiler(roots=[tmp_path / "elsewhere"], path_env=path_env).found == "PATH"


def test_no_compiler_and_a_bad_tsc_raise_with_the_install_hint(tmp_path: Path) -> None:
    path_env = fake_node(tmp_path / "bin")
    with pytest.raises(TypeScriptNotFound) as info:  # (without install=True: nothing is downloaded)
        find_compiler(roots=[tmp_path], path_env=path_env)
    assert info.value.exit_code == 2 and info.value.hint is not None
    assert info.value.hint.startswith(INSTALL_HINT) and "--install-typescript" in info.value.hint
    assert str(tmp_path) in info.value.message and "tsc on PATH" in info.value.message
    assert str(typescript_dir()) in info.value.message
    with pytest.raises(CompilerNotFound, match="no such file"):
        find_compiler(tmp_path / "nope", path_env=path_env)
    not_tsc = tmp_path / "tsc"
    not_tsc.write_text("")
    with pytest.raises(CompilerNotFound, match="not a TypeScript compiler"):
        find_compiler(not_tsc, path_env=path_env)


def test_without_node_the_compiler_runs_on_quickjs(tmp_path: Path) -> None:
    package = fake_typescript(tmp_path)
    found = find_compiler(roots=[tmp_path], path_env=str(tmp_path / "empty"))
    assert (found.backend, found.node, found.typescript) == ("quickjs", None, package.resolve())
    assert found.command(tmp_path / "out")[1:] == [
        "-I",
        "-m",
        "codemode_gen.runtime.sandbox.typecheck_worker",
        str(package.resolve()),
        str(tmp_path / "out"),
    ]
    # node beside it or on PATH is preferred; either engine can be asked for
    path_env = fake_node(tmp_path / "bin")
    assert find_compiler(roots=[tmp_path], path_env=path_env).backend == "node"
    assert (
        find_compiler(roots=[tmp_path], path_env=path_env, backend="quickjs").backend == "quickjs"
    )
    with pytest.raises(CompilerNotFound, match="no `node`"):
        find_compiler(roots=[tmp_path], path_env=str(tmp_path / "empty"), backend="node")


@pytest.mark.parametrize(
    ("script", "lang", "expected"),
    [
        ("a.ts", None, "ts"),
        ("a.mts", None, "ts"),
        ("a.js", None, "js"),
        ("a.mjs", None, "js"),
        ("-", None, "auto"),
        ("script", None, "auto"),
        ("a.js", "ts", "ts"),
        ("-", "js", "js"),
    ],
)
def test_language_is_the_extension_unless_given(
    script: str, lang: str | None, expected: str
) -> None:
    assert lang_of(script, lang) == expected


# ------------------------------------------------------------------ hints (no node)


@pytest.mark.parametrize(
    ("diag", "fragment"),
    [
        ({"code": 4111, "property": "map", "declared": ["result"]}, "boxed: it is in `.result`"),
        ({"code": 4111, "property": "x", "declared": ["a", "b"]}, 'read it as `["x"]`'),
        (
            {
                "code": 2551,
                "message": "Property 'lenght' does not exist on type 'string'. Did you mean 'length'?",
            },
            "use `length`",
        ),
        (
            {
                "code": 2307,
                "message": "Cannot find module '@codemode/servers/nope' or its corresponding type declarations.",
            },
            "listServers()",
        ),
        (
            {
                "code": 2307,
                "message": "Cannot find module '../x': a script can import only @codemode/ modules.",
                "modules": ["@codemode/discovery", "@codemode/servers/notes"],
            },
            'import one of "@codemode/servers/notes", "@codemode/discovery"',
        ),
        (
            {
                "code": 2307,
                "message": "Cannot find module 'fs': a script can import only @codemode/ modules.",
                "modules": [f"@codemode/servers/s{i}" for i in range(12)],
            },
            '"@codemode/servers/s7" and 4 more servers',
        ),
        (
            {
                "code": 2307,
                "message": "Cannot find module 'fs': a script can import only @codemode/ modules.",
            },
            '"@codemode/servers/<id>"',
        ),
        (
            {
                "code": 6053,
                "message": "Cannot find file '/etc/x': a script sees no files.",
                "specifier": "/etc/x",
                "modules": ["@codemode/errors"],
            },
            'remove the `/// <reference>` (types come from imports): import one of "@codemode/errors"',
        ),
        ({"code": 2304, "message": "Cannot find name 'fetch'."}, "no network"),
        ({"code": 18048, "message": "'first' is possibly 'undefined'."}, "`?.`"),
        (
            {
                "code": 2353,
                "message": "Object literal may only specify known properties, and 'ids' does not exist in type '{ id: number; }'.",
            },
            "remove `ids`",
        ),
        (
            {"code": 2339, "message": "Property 'map' does not exist on type 'string'."},
            "JSON.parse",
        ),
    ],
)
def test_common_errors_get_a_hint(diag: dict[str, object], fragment: str) -> None:
    assert fragment in (hint_for(diag) or "")


def test_diagnostics_have_the_s3_3_3_shape() -> None:
    result = CheckResult(
        "js",
        [
            {
                "category": "error",
                "code": 2322,
                "message": "Type 'string' is not assignable to type 'number'.",
                "line": 2,
                "column": 5,
            },
            {"category": "suggestion", "code": 80001, "message": "x", "line": 1, "column": 1},
            {"category": "error", "code": 1234, "message": "other", "line": 3, "column": 9},
        ],
        1.0,
    )
    first, second, third = to_diagnostics(result)
    assert first == {
        "severity": "error",
        "code": "TS2322",
        "message": "Type 'string' is not assignable to type 'number'.",
        "path": "2:5",
        "hint": "pass a number: `Number(value)` converts a numeric string",
    }
    assert second["severity"] == "info" and "hint" not in third
    assert {d["severity"] for d in to_diagnostics(result, severity="warning")} == {"warning"}


# ------------------------------------------------------------------ serve's side (no node)


def test_serve_registration_and_prompt_carry_the_typecheck_default(tmp_path: Path) -> None:
    from codemode_gen.cli.serve import serve_command
    from codemode_gen.host_options import HostOptions
    from codemode_gen.runtime.frontends.prompt import render_prompt

    argv = serve_command(
        tmp_path / ".mcp.json",
        None,
        "codemode.run",
        16_000,
        HostOptions(typecheck=True, tsc="node_modules/.bin/tsc"),
    )
    assert argv[-3:] == ["--typecheck", "--tsc", os.path.abspath("node_modules/.bin/tsc")]
    assert "--typecheck" not in serve_command(tmp_path / ".mcp.json", None, "codemode.run", 16_000)
    assert "typecheck true (type errors as warnings)" in render_prompt([])
    assert "typecheck on (type errors as warnings)" in render_prompt(
        [], host_limits={"typecheck": True}
    )
