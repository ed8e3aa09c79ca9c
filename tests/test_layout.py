"""tests/ mirrors the package, and the package keeps its size rule (tests/architecture.py).

A test file lives in the folder mirroring the module it tests (runtime/host/bridge.py ->
tests/runtime/host/test_bridge.py), so whoever changes a module finds its tests, and whoever adds
a test file is told where it goes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import architecture
from tests.architecture import ALLOWED, MAX_MODULE_LINES, REPO, TESTS


def test_every_test_file_lives_in_the_folder_mirroring_its_module() -> None:
    problems = [
        problem for test in architecture.test_files() if (problem := architecture.misplaced(test))
    ]
    assert not problems, "\n".join(problems)


def test_every_folder_of_tests_mirrors_a_folder_of_the_package() -> None:
    mirrors = architecture.mirrors()
    folders = {path.relative_to(TESTS).as_posix() for path in TESTS.rglob("*") if path.is_dir()}
    strays = sorted(
        folder
        for folder in folders
        if folder not in mirrors
        and Path(folder).parts[0] not in architecture.NOT_MIRRORS
        and Path(folder).name != "__pycache__"
    )
    assert not strays, f"folders of tests/ that mirror no package folder: {strays}"


def test_the_allow_list_names_only_files_and_modules_that_exist() -> None:
    """An entry outliving its file (moved, renamed) would let a new file of that name in unseen."""
    missing = [f"tests/{test}" for test in ALLOWED if not (TESTS / test).is_file()]
    missing += [
        module
        for modules, _ in ALLOWED.values()
        for module in modules
        if not (REPO / module).is_file()
    ]
    assert not missing, missing


def test_a_flat_test_file_is_told_where_it_goes() -> None:
    """The rule's message, on files that are not in the repository: the mirror it belongs in, or
    how to name it."""
    flat = TESTS / "test_bridge.py"
    assert architecture.misplaced(flat) == (
        "tests/test_bridge.py: no module 'bridge' in the folder it mirrors; "
        "move it to tests/runtime/host/test_bridge.py"
    )
    assert architecture.tested_module(TESTS / "runtime/host/test_bridge_replies.py") == (
        REPO / "runtime/host/bridge.py"
    )
    assert architecture.tested_module(TESTS / "runtime/frontends/test_serve_http_bounds.py") == (
        REPO / "runtime/frontends/serve_http.py"
    )
    unknown = architecture.misplaced(TESTS / "runtime/test_no_such_thing.py")
    assert unknown is not None and "ALLOWED" in unknown


def test_no_module_of_the_package_is_over_the_limit() -> None:
    over = architecture.figures().over_limit
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_the_figures_script_runs_as_documented() -> None:
    """`python tests/architecture.py` (CONTRIBUTING.md) from any directory."""
    proc = subprocess.run(
        [sys.executable, str(TESTS / "architecture.py")],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for line in (
        "largest module:",
        "class with the most methods:",
        "dict[str, Any] in the package:",
        f"modules over {MAX_MODULE_LINES} lines:",
        "test-to-module mapping coverage:",
    ):
        assert line in proc.stdout
