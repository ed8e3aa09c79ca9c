"""§3.4 isolation, §11: the type checker shows a script nothing of the host.

`codemode-gen check`, `serve --typecheck` and `limits.typecheck` compile the script with the
real TypeScript compiler, whose diagnostics quote types: a script importing a host file would
read it back (`Type '"sk-live-…"' is not assignable to type '1'`), and "not found" for a missing
file against anything else for an existing one would tell which paths exist. The checker sees
only the script, out/codemode.d.ts and TypeScript's lib.*.d.ts, whatever the script or
out/tsconfig.json say. Every test plants secret files the ways a script could name them
(relative, absolute, symlinks in out/ and the project, node_modules, @types, JSON, reference
directives, type queries, JSDoc) and asserts that the secret never shows and that the same script
gets byte-identical diagnostics once the files are gone. Real tsc, real files, real processes,
on both engines the compiler runs on (node, and QuickJS for a machine without node): each test
runs once per backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host.tscompiler import (
    CORE_JS,
    SERVER_JS,
    Backend,
    find_compiler,
)
from codemode_gen.runtime.host.tsdiagnostics import to_diagnostics
from codemode_gen.runtime.host.typecheck import TypeChecker
from tests.runtime.frontends.test_serve_http import start_serve, with_client
from tests.runtime_support import PYTHON, REPO, path_without_node
from tests.tsc import require_tsc

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SECRET = "sk-live-7f3a9c0e5b21d4e8"
SPY = Path(__file__).resolve().parents[2] / "data" / "fs_spy.js"
# Bounds one `codemode-gen check` (node start, loading the declarations, the check).
CHECK_TIMEOUT = 120
CHECK_S = 60.0  # bounds one check of a warm checker (a hang fails the test, not the suite)

# A script per way of naming a host file. `BASE` is the folder holding proj/ and secret/.
VECTORS: dict[str, str] = {
    "relative": 'import { key } from "../secret/secret";\nconst x: 1 = key;\n',
    "relative .ts": 'import { key } from "../secret/secret.ts";\nconst x: 1 = key;\n',
    "relative .mjs": 'import { key } from "../secret/secret.mjs";\nconst x: 1 = key;\n',
    "relative .d.ts": 'import type { K } from "../secret/secret.d.ts";\nconst x: 1 = "" as K;\n',
    "absolute": 'import { key } from "BASE/secret/secret";\nconst x: 1 = key;\n',
    "json": 'import j from "../secret/secret.json";\nconst x: 1 = j;\n',
    "json with type": 'import j from "../secret/secret.json" with { type: "json" };\nconst x: 1 = j;\n',
    "arbitrary extension": 'import v from "../secret/secret.txt";\nconst x: 1 = v;\n',
    "symlink in out/": 'import { key } from "./out/link";\nconst x: 1 = key;\n',
    "symlinked folder in out/": 'import { key } from "./out/linkdir/secret";\nconst x: 1 = key;\n',
    "symlink in the project": 'import { key } from "./secret";\nconst x: 1 = key;\n',
    "out/'s other files": 'import { key } from "./out/servers/planted";\nconst x: 1 = key;\n',
    "reference path": '/// <reference path="../secret/global.d.ts" />\nconst x: 1 = LEAK;\n',
    "reference path absolute": '/// <reference path="BASE/secret/global.d.ts" />\nconst x: 1 = LEAK;\n',
    "reference types": '/// <reference types="leak" />\nconst x: 1 = LEAK2;\n',
    "@types auto-inclusion": "const x: 1 = LEAK2;\n",
    "node_modules package": 'import { key } from "leakpkg";\nconst x: 1 = key;\n',
    "tsconfig paths": 'import { key } from "@codemode/leak";\nconst x: 1 = key;\n',
    "tsconfig baseUrl": 'import { key } from "secret/secret";\nconst x: 1 = key;\n',
    "import type": 'import type { K } from "../secret/secret";\nconst x: 1 = "" as K;\n',
    "typeof import": 'type M = typeof import("../secret/secret");\nconst x: 1 = null! as M["key"];\n',
    "import type query": 'const x: 1 = null! as import("../secret/secret").K;\n',
    "dynamic import": 'const m = await import("../secret/secret");\nconst x: 1 = m.key;\n',
    "re-export": 'export * from "../secret/secret";\nexport { key as k2 } from "BASE/secret/secret";\n',
    "import = require": 'import s = require("../secret/secret");\nconst x: 1 = s.key;\n',
    "reference lib path": '/// <reference lib="../../../secret/global" />\nexport {};\n',
    "js require": 'const s = require("../secret/secret.json");\n/** @type {1} */\nconst x = s;\n',
    "jsdoc import type": '/** @type {import("../secret/secret").K} */\nconst k = null;\n/** @type {1} */\nconst x = k;\n',
    "jsdoc @import": '/** @import { K } from "../secret/secret" */\n/** @type {K} */\nconst k = null;\n',
}
JS_VECTORS = {"js require", "jsdoc import type", "jsdoc @import"}

# out/tsconfig.json as someone might widen it: every option that could make more files visible,
# plus one that only makes the check stricter (noUncheckedIndexedAccess: still honoured).
WIDENED_TSCONFIG = {
    "compilerOptions": {
        "target": "ES2022",
        "module": "ES2022",
        "moduleResolution": "bundler",
        "lib": ["ES2022"],
        "strict": True,
        "noEmit": True,
        "allowJs": True,
        "checkJs": True,
        "noUncheckedIndexedAccess": True,
        "baseUrl": "../..",
        "paths": {"@codemode/leak": ["secret/secret.ts"]},
        "typeRoots": ["../node_modules/@types", "../../secret"],
        "types": ["leak"],
        "rootDirs": ["..", "../../secret"],
        "resolveJsonModule": True,
        "allowArbitraryExtensions": True,
        "allowImportingTsExtensions": True,
        "preserveSymlinks": True,
        "moduleSuffixes": [".secret", ""],
        "customConditions": ["secret"],
    },
    "files": ["../../secret/global.d.ts"],
    "include": ["../../secret/**/*"],
}


@dataclass
class Layout:
    """BASE/proj (out/ with a widened tsconfig.json, .mcp.json of the demo's servers) and the
    host files a script must not see: BASE/secret/, symlinks into it from out/ and the project,
    a planted .d.ts in out/servers/, node_modules with @types and a package. `plant()` and
    `remove()` switch all of them at once; the project itself stays the same."""

    base: Path

    @property
    def proj(self) -> Path:
        return self.base / "proj"

    @property
    def out(self) -> Path:
        return self.proj / "out"

    def plant(self) -> None:
        secret = self.base / "secret"
        secret.mkdir()
        for ext in ("ts", "mts", "mjs", "js"):
            (secret / f"secret.{ext}").write_text(
                f'export const key = "{SECRET}";\nexport type K = "{SECRET}";\n'
            )
        (secret / "secret.d.ts").write_text(
            f'export declare const key: "{SECRET}";\nexport type K = "{SECRET}";\n'
        )
        (secret / "secret.json").write_text(json.dumps({"key": SECRET, SECRET: 1}))
        (secret / "global.d.ts").write_text(f'declare const LEAK: "{SECRET}";\n')
        (secret / "secret.d.txt.ts").write_text(
            f'declare const v: "{SECRET}";\nexport default v;\n'
        )
        (secret / "secret.txt").write_text(SECRET)
        (secret / "index.d.ts").write_text(f'declare const LEAK2: "{SECRET}";\n')
        types = self.proj / "node_modules" / "@types" / "leak"
        types.mkdir(parents=True)
        (types / "index.d.ts").write_text(f'declare const LEAK2: "{SECRET}";\n')
        package = self.proj / "node_modules" / "leakpkg"
        package.mkdir(parents=True)
        (package / "package.json").write_text(
            json.dumps({"name": "leakpkg", "types": "index.d.ts"})
        )
        (package / "index.d.ts").write_text(f'export declare const key: "{SECRET}";\n')
        (self.out / "servers" / "planted.d.ts").write_text(
            f'export declare const key: "{SECRET}";\n'
        )
        (self.out / "link.d.ts").symlink_to(secret / "secret.d.ts")
        (self.out / "linkdir").symlink_to(secret)
        (self.proj / "secret.ts").symlink_to(secret / "secret.ts")

    def remove(self) -> None:
        shutil.rmtree(self.base / "secret")
        shutil.rmtree(self.proj / "node_modules")
        for planted in (
            self.out / "servers" / "planted.d.ts",
            self.out / "link.d.ts",
            self.out / "linkdir",
            self.proj / "secret.ts",
        ):
            planted.unlink()


def make_layout(base: Path) -> Layout:
    layout = Layout(base)
    shutil.copytree(REPO / "out", layout.out)
    (layout.out / "tsconfig.json").write_text(json.dumps(WIDENED_TSCONFIG))
    servers = REPO / "examples" / "servers"
    (layout.proj / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": PYTHON, "args": [str(servers / "notes_server.py")]},
                    "calendar": {"command": PYTHON, "args": [str(servers / "calendar_server.py")]},
                }
            }
        )
    )
    return layout


def check_all(layout: Layout, tsc: Path, backend: Backend) -> dict[str, list[dict[str, Any]]]:
    """Every vector through one fresh checker: the checker's raw diagnostics."""

    async def main() -> dict[str, list[dict[str, Any]]]:
        found = {}
        async with TypeChecker(layout.out, tsc=tsc, backend=backend) as checker:
            await checker.warm()
            assert checker.compiler is not None and checker.compiler.backend == backend
            for name, code in VECTORS.items():
                result = await checker.check(
                    code.replace("BASE", str(layout.base)),
                    lang="js" if name in JS_VECTORS else "ts",
                    timeout=CHECK_S,
                )
                found[name] = result.diagnostics
        return found

    return anyio.run(main)


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    yield make_layout(tmp_path)


@pytest.fixture(scope="module", params=["node", "quickjs"])
def backend(request: pytest.FixtureRequest) -> Backend:
    """The engine the compiler runs on: node, or QuickJS (in a Python process) where there is none."""
    if request.param == "node" and shutil.which("node") is None and not os.environ.get("CI"):
        pytest.skip("no node on PATH")
    backend: Backend = request.param
    return backend


def backend_env(backend: Backend, base: Path) -> dict[str, str]:
    """Environment for a codemode-gen command on `backend`: without node on PATH for QuickJS."""
    return {"PATH": path_without_node(base / "empty-bin")} if backend == "quickjs" else {}


@pytest.fixture(scope="module")
def both(
    tmp_path_factory: pytest.TempPathFactory, backend: Backend
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each vector's diagnostics with the host files there, and once they are gone."""
    tsc = require_tsc()
    layout = make_layout(tmp_path_factory.mktemp("isolation"))
    layout.plant()
    present = check_all(layout, tsc, backend)
    layout.remove()
    absent = check_all(layout, tsc, backend)
    return present, absent


@pytest.mark.parametrize("vector", list(VECTORS))
def test_s3_4_a_host_file_is_never_read_and_its_existence_never_shows(
    both: tuple[dict[str, Any], dict[str, Any]], vector: str
) -> None:
    present, absent = both
    assert SECRET not in json.dumps(present[vector]), present[vector]
    assert json.dumps(present[vector]) == json.dumps(
        absent[vector]
    )  # byte-identical: no existence oracle
    assert present[vector], "every vector names something the checker cannot find"


def test_s3_4_an_import_of_a_host_path_says_what_a_script_can_import(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    present, _ = both
    (module,) = to_diagnostics_of(present["relative"])
    assert module == {
        "severity": "error",
        "code": "TS2307",
        "path": "1:21",
        "message": "Cannot find module '../secret/secret': a script can import only @codemode/ modules "
        "(@codemode/discovery, @codemode/errors, @codemode/servers/<id>, @codemode/skills/<id>).",
        "hint": 'import one of "@codemode/servers/calendar", "@codemode/servers/notes", '
        '"@codemode/discovery", "@codemode/errors", "@codemode/skills/open_todos", "@codemode/skills/plan_week"',
    }
    # The variants (a .json import without resolveJsonModule, an extension, a package) say the same.
    for vector in ("json", "relative .ts", "node_modules package", "js require", "dynamic import"):
        (first, *_) = present[vector]
        assert (
            first["code"] == 2307
            and "a script can import only @codemode/ modules" in first["message"]
        ), vector
    reference, _leak_undeclared = to_diagnostics_of(
        present["reference path"]
    )  # and TS2304 for LEAK
    assert reference["code"] == "TS6053"
    assert reference["message"].startswith(
        "Cannot find file '../secret/global.d.ts': a script sees no files"
    )
    assert reference["hint"].startswith("remove the `/// <reference>`")
    # No host path shows, not even the project's: the checker's names are virtual.
    assert not [
        d
        for ds in present.values()
        for d in ds
        if str(REPO) in d["message"] or "/proj/" in d["message"]
    ]


def test_s3_4_out_tsconfig_can_make_the_check_stricter_but_not_wider(
    both: tuple[dict[str, Any], dict[str, Any]],
    layout: Layout,
    backend: Backend,
) -> None:
    """noUncheckedIndexedAccess from out/tsconfig.json applies; its paths, baseUrl, typeRoots,
    types, files and include do not (the "tsconfig …" and "@types" vectors above)."""
    code = "const a: number[] = [1];\nconst n: number = a[0];\nexport {};\n"

    async def main() -> list[dict[str, Any]]:
        async with TypeChecker(layout.out, tsc=require_tsc(), backend=backend) as checker:
            return (await checker.check(code, lang="ts", timeout=CHECK_S)).diagnostics

    present, _ = both
    assert [d["code"] for d in present["tsconfig paths"]] == [
        2307
    ]  # @codemode/leak: unknown, not the mapped file
    assert [d["code"] for d in anyio.run(main)] == [
        2322
    ]  # 'number | undefined' is not assignable to 'number'


def to_diagnostics_of(raw: list[dict[str, Any]]) -> list[Diagnostic]:
    from codemode_gen.runtime.host.typecheck import CheckResult

    return to_diagnostics(CheckResult("ts", raw, 0.0))


def test_s3_4_the_checker_process_opens_nothing_but_typescript_and_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every path the node process hands to `fs` (logged by tests/data/fs_spy.js) is
    TypeScript's own package, out/codemode.d.ts or out/tsconfig.json: no lookup of a planted
    file, a node_modules folder, a package.json or a directory listing of the project."""
    tsc = require_tsc()
    layout = make_layout(tmp_path)
    layout.plant()
    log = tmp_path / "fs.log"
    monkeypatch.setenv("NODE_OPTIONS", f"--require {SPY}")
    monkeypatch.setenv("CODEMODE_FS_SPY_LOG", str(log))
    check_all(layout, tsc, "node")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    package = find_compiler(tsc).typescript.parent.parent
    allowed_files = {
        str(layout.out / "codemode.d.ts"),
        str(layout.out / "tsconfig.json"),
        str(SERVER_JS),
        str(CORE_JS),
    }
    # (casefold: ts.sys tells a case-sensitive file system by statting its own name upper-cased)
    inside = str(package).casefold() + os.sep
    outside = [
        c
        for c in calls
        if c["path"] not in allowed_files and not c["path"].casefold().startswith(inside)
    ]
    assert outside == []
    assert {"readFileSync"} <= {
        c["call"] for c in calls if c["path"] == str(layout.out / "codemode.d.ts")
    }
    assert any(
        c["path"].endswith("lib.es2022.d.ts") for c in calls
    )  # the spy did see the compiler's reads


# The QuickJS backend's process with an audit hook (PEP 578) that logs every file it opens or
# lists once its imports are done; then runtime/sandbox/typecheck_worker.py's own main.
AUDITED_WORKER = """
import json, os, sys
import codemode_gen.runtime.sandbox.typecheck_worker as worker
from codemode_gen.runtime.sandbox.engine import preload
preload()
log = open(sys.argv.pop(1), "a", encoding="utf-8")
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        log.write(json.dumps({"call": event, "path": os.fsdecode(args[0])}) + "\\n")
        log.flush()
sys.addaudithook(hook)
worker.main()
"""


def test_s3_4_the_quickjs_checker_opens_nothing_but_typescript_and_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The QuickJS backend (a Python process; QuickJS itself has no file system in jsbox) opens
    TypeScript's typescript.js and lib.*.d.ts, out/codemode.d.ts, out/tsconfig.json and
    js/typecheck_core.js, nothing else: the same closed file system as under node."""
    from codemode_gen.runtime.host import tscompiler

    tsc = require_tsc()
    layout = make_layout(tmp_path)
    layout.plant()
    log = tmp_path / "open.log"

    def audited(self: tscompiler.Compiler, out_dir: Path) -> list[str]:
        return [PYTHON, "-I", "-c", AUDITED_WORKER, str(log), str(self.typescript), str(out_dir)]

    monkeypatch.setattr(tscompiler.Compiler, "command", audited)
    check_all(layout, tsc, "quickjs")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    package = find_compiler(tsc).typescript.parent.parent
    allowed = {str(layout.out / "codemode.d.ts"), str(layout.out / "tsconfig.json"), str(CORE_JS)}
    # (and Python's own modules and their folders, which the process may import late: ctypes, importlib.readers)
    python = tuple(str(Path(p).resolve()) + os.sep for p in {sys.prefix, sys.base_prefix})

    def imported(c: dict[str, str]) -> bool:
        return c["path"].startswith(python) and (
            c["call"] != "open" or c["path"].endswith((".py", ".pyc", ".so"))
        )

    outside = [
        c
        for c in calls
        if c["path"] not in allowed
        and not c["path"].startswith(str(package) + os.sep)
        and not imported(c)
    ]
    assert outside == []
    assert [c["call"] for c in calls if c["path"] == str(layout.out / "codemode.d.ts")] == [
        "open"
    ]  # read once
    assert any(
        c["path"].endswith("lib.es2022.d.ts") for c in calls
    )  # the hook did see the compiler's reads


# ------------------------------------------------------------------ the commands, end to end

# One script naming host files several ways; it also runs (type-only imports and references
# are erased), so a run goes ahead after its check.
HOSTILE = """/// <reference path="../secret/global.d.ts" />
import type { K } from "../secret/secret";
import type { K as K2 } from "./out/link";
type J = typeof import("../secret/secret.json");
function leak(k: K, k2: K2, j: J): 1 { return k ?? k2 ?? j; }
globalThis.__codemode_result__ = typeof leak;
"""


def test_s3_4_codemode_gen_check_prints_the_same_whether_the_files_exist(
    layout: Layout, backend: Backend
) -> None:
    tsc = require_tsc()
    script = layout.proj / "agent.ts"
    script.write_text(HOSTILE)

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "codemode_gen",
                "check",
                "--config",
                str(layout.proj / ".mcp.json"),
                "--tsc",
                str(tsc),
                str(script),
            ],
            cwd=layout.proj,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            env={**os.environ, **backend_env(backend, layout.base)},
        )

    layout.plant()
    present = check()
    layout.remove()
    absent = check()
    assert present.returncode == absent.returncode == 1, present.stderr
    assert SECRET not in present.stdout + present.stderr
    assert present.stdout == absent.stdout
    assert [d["code"] for d in json.loads(present.stdout)] == [
        "TS6053",
        "TS2307",
        "TS2307",
        "TS2307",
    ]


def test_s3_4_serve_http_typecheck_gives_a_remote_client_nothing_of_the_host(
    layout: Layout, backend: Backend
) -> None:
    """The attack of a remote client: runs over `serve --http --typecheck` with the SDK's client."""
    tsc = require_tsc()
    served = start_serve(
        layout.proj, "--typecheck", "--tsc", str(tsc), extra_env=backend_env(backend, layout.base)
    )

    async def body(client: Any) -> list[Mapping[str, Any]]:
        found = []
        for toggle in (layout.plant, layout.remove):
            toggle()
            result = await client.call_tool("codemode.run", {"code": HOSTILE})
            assert not result.is_error
            assert SECRET not in json.dumps([block.model_dump() for block in result.content])
            found.append(result.structured_content)
        return found

    try:
        present, absent = with_client(served.url, body)
    finally:
        served.stop()
    assert SECRET not in json.dumps(present)
    assert json.dumps(present, sort_keys=True) == json.dumps(absent, sort_keys=True)
    assert present["result"] == "function"  # the check warned, the run went ahead
    warnings = [(d["severity"], d["code"]) for d in present["diagnostics"]]
    assert warnings == [
        ("warning", "TS6053"),
        ("warning", "TS2307"),
        ("warning", "TS2307"),
        ("warning", "TS2307"),
    ]
