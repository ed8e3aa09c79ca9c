"""runtime/js/: the sandbox's JavaScript (and the type checker's, run under node or QuickJS)
type-checked by a real `tsc --noEmit --allowJs --checkJs` run.

tests/js/tsconfig.json names the files and maps `@codemode/errors` and `@codemode/host` to
their sources; tests/js/globals.d.ts declares what the files use beyond the ECMAScript library
(QuickJS's TextEncoder/TextDecoder, the discovery placeholder, node's `require`/`process`).
The check is `strict` but for two options: `noImplicitAny` (the files are plain JavaScript;
JSDoc types are written where a value's shape matters, not on every parameter) and
`useUnknownInCatchVariables` (sandbox code reads `e && e.message` of whatever was thrown).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.tsc import REPO, TSC_TIMEOUT, require_tsc

JS_DIR = REPO / "runtime" / "js"
PROJECT = REPO / "tests" / "js"


def _tsc(project: Path) -> subprocess.CompletedProcess[str]:
    tsc = require_tsc()
    return subprocess.run(
        [str(tsc), "-p", str(project), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=TSC_TIMEOUT,
        check=False,
    )


def _listed() -> set[str]:
    config = json.loads((PROJECT / "tsconfig.json").read_text(encoding="utf-8"))
    return {Path(f).name for f in config["files"] if f.endswith(".js")}


def test_every_runtime_js_file_is_in_the_checked_project_and_opts_in() -> None:
    # A new file under runtime/js/ must join the check, not escape it.
    shipped = {p.name for p in JS_DIR.glob("*.js")}
    assert _listed() == shipped
    for name in sorted(shipped):
        first = (JS_DIR / name).read_text(encoding="utf-8").splitlines()[0]
        # errors.js is checked too (checkJs), but its text is left as it is: it is the error
        # classes' contract, which another source generates (docs/code-mode-spec.md §7.1).
        if name != "errors.js":
            assert first == "// @ts-check", name


@pytest.mark.slow
def test_runtime_js_type_checks() -> None:
    done = _tsc(PROJECT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_check_fails_on_a_type_error(tmp_path: Path) -> None:
    # The same project plus one broken file: the run above cannot pass by checking nothing.
    config = json.loads((PROJECT / "tsconfig.json").read_text(encoding="utf-8"))
    files = [str((PROJECT / f).resolve()) for f in config["files"]]
    (tmp_path / "broken.js").write_text(
        '// @ts-check\nimport { ToolCallError } from "@codemode/errors";\n'
        "const n = Math.max(1, 2);\nn.toUpperCase();\nexport { ToolCallError };\n",
        encoding="utf-8",
    )
    (tmp_path / "tsconfig.json").write_text(
        json.dumps({"extends": str(PROJECT / "tsconfig.json"), "files": [*files, "broken.js"]}),
        encoding="utf-8",
    )
    done = _tsc(tmp_path)
    assert done.returncode != 0
    assert "broken.js(4,3): error TS2339" in done.stdout, done.stdout
