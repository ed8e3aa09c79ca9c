"""Type-check the code as it is installed: one import package, `codemode_gen`.

setuptools assembles the package from top-level folders (pyproject's
`[tool.setuptools.package-dir]`: generator/ -> codemode_gen.generator, runtime/ ->
codemode_gen.runtime, templates/ -> codemode_gen.templates). Run on those folders, mypy would
see `generator/build.py` as a module `generator.build` while every import names
`codemode_gen.generator.build`, so no call between layers would be checked. Here mypy runs on a
throw-away tree of symlinks with the installed layout instead:

    <tree>/codemode_gen/…          codemode_gen/*  (codemode_gen/cli/ included)
    <tree>/codemode_gen/generator  generator/*     (and so on, from the package-dir table)
    <tree>/tests/…, <tree>/bench/… tests/ and bench/ as namespace packages (`tests.tsc`)
    <tree>/scripts/…               tests/servers/*.py and examples/servers/*.py: scripts that
                                   import their neighbours by bare name (`from _cli import …`),
                                   so they are top-level modules here

Only `.py`/`.pyi` files and `py.typed` are linked, one symlink each, so a test can swap one file
for other text (`replace=`) without touching the repository. mypy's messages name the
repository's files again. The settings are pyproject's `[tool.mypy]`; imports of our own
package are never ignored (only the third-party modules without types listed there are).

    python tests/typecheck.py            # what tests/test_repo.py runs; exit status of mypy
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Folders whose scripts import each other by bare module name (the script's folder is sys.path[0]).
SCRIPT_DIRS = ("tests/servers", "examples/servers")
# Folders type-checked besides the package (namespace packages under their own name).
EXTRA_PACKAGES = ("tests", "bench")
# Bounds one mypy run (a cold cache checks everything, mcp and pydantic included).
MYPY_TIMEOUT = 600

_LINKED = re.compile(r".*\.pyi?$|^py\.typed$")
_LOCATION = re.compile(r"^(?P<path>[^:\n]+\.pyi?)(?=:)", re.MULTILINE)


def package_dirs() -> dict[str, Path]:
    """Import package -> source folder, as pyproject tells setuptools."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {package: REPO / folder for package, folder in mapping.items()}


def tree_files() -> Iterator[tuple[str, Path]]:
    """(path inside the tree, repository file) for every file mypy reads."""
    for package, folder in package_dirs().items():
        for name in sorted(os.listdir(folder)):
            if _LINKED.match(name) and (folder / name).is_file():
                yield f"{package.replace('.', '/')}/{name}", folder / name
    for top in EXTRA_PACKAGES:
        for path in sorted((REPO / top).rglob("*")):
            rel = path.relative_to(REPO)
            if (
                _LINKED.match(path.name)
                and path.is_file()
                and not any(rel.is_relative_to(d) for d in SCRIPT_DIRS)
            ):
                yield rel.as_posix(), path
    for scripts in SCRIPT_DIRS:
        for path in sorted((REPO / scripts).glob("*.py")):
            yield f"scripts/{path.name}", path


def build_tree(root: Path, replace: Mapping[str, str] | None = None) -> dict[str, str]:
    """Link every file of `tree_files()` under `root`; `replace` maps a repository path
    (`"runtime/codemode.py"`) to the text its tree file gets instead (a real file, not a link).
    Returns tree path -> repository path."""
    replace = dict(replace or {})
    origin: dict[str, str] = {}
    for inside, source in tree_files():
        repo_path = source.relative_to(REPO).as_posix()
        if origin.setdefault(inside, repo_path) != repo_path:
            raise RuntimeError(f"{inside}: both {origin[inside]} and {repo_path}")
        target = root / inside
        if target.is_symlink() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        text = replace.pop(repo_path, None)
        if text is None:
            target.symlink_to(source)
        else:
            target.write_text(text, encoding="utf-8")
    if replace:
        raise KeyError(f"not in the type-checked tree: {', '.join(sorted(replace))}")
    return origin


def run_mypy(
    replace: Mapping[str, str] | None = None, *, cache_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """mypy over the installed layout (package, tests, bench, scripts); stdout names repository
    files. `cache_dir` defaults to the repository's .mypy_cache."""
    with tempfile.TemporaryDirectory(prefix="codemode-typecheck-") as tmp:
        root = Path(tmp)
        origin = build_tree(root, replace)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(REPO / "pyproject.toml"),
                "--cache-dir",
                str(cache_dir or REPO / ".mypy_cache"),
                "codemode_gen",
                *EXTRA_PACKAGES,
                "scripts",
            ],
            cwd=root,
            env={**os.environ, "MYPYPATH": str(root / "scripts")},
            capture_output=True,
            text=True,
            timeout=MYPY_TIMEOUT,
        )

        proc.stdout = _LOCATION.sub(lambda m: origin.get(m["path"], m["path"]), proc.stdout)
        return proc


def main() -> int:
    proc = run_mypy()
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
