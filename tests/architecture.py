"""The architecture's figures, from the files as they are: anyone can run it and compare.

    python tests/architecture.py

prints the largest module (lines), the class with the most methods, how many `dict[str, Any]`
the package spells, the modules over `MAX_MODULE_LINES`, and the share of the package's modules
that have a test file in the folder mirroring theirs (the test-to-module mapping coverage).

The mirroring rule lives here too, because tests/test_layout.py enforces what this script
counts: the test of `codemode_gen.runtime.host.bridge` (runtime/host/bridge.py) is
tests/runtime/host/test_bridge.py, i.e. the package path below `codemode_gen`, with `test_`
before the module's name. A file may add a suffix after the module's name
(`test_serve_http_bounds.py` tests serve_http.py); a test that is about a spec section or about
several modules is listed in `ALLOWED`, with the module it mostly exercises and why it is there.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"

#: The issue's size rule: no module of the package over this many lines.
MAX_MODULE_LINES = 600

#: Source folders that are not Python packages but hold modules a test may mirror (the sandbox's
#: JavaScript, loaded into QuickJS): tests/runtime/js/test_prelude.py tests runtime/js/prelude.js.
EXTRA_SOURCE_DIRS = {"runtime/js": "runtime/js"}

#: Top-level folders of tests/ that are not mirrors: helpers and data other tests read (js/: the
#: tsconfig of the sandbox JavaScript's type check), and the hostile suite (spec §11), which
#: attacks the whole host through its front doors.
NOT_MIRRORS = ("servers", "data", "hostile", "js", "__pycache__")

#: Test files that do not carry the name of a module in their folder, each with the modules it
#: exercises (repository paths; none for a test of the repository itself) and why it is there.
ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    # Spec-section tests (docs/code-mode-spec.md §n) keep their names, inside the folder of the
    # module that owns the section.
    "runtime/test_s3_run.py": (
        ("runtime/codemode/__init__.py",),
        "§3: the codemode.run request and response",
    ),
    "runtime/test_s3_3_shapes.py": (
        ("runtime/response.py", "runtime/diagnostics.py", "runtime/sandbox/protocol.py"),
        "§3.3: the Response, Diagnostic and HostReply shapes built at run time",
    ),
    "runtime/test_s5_bindings.py": (
        ("runtime/codemode/__init__.py",),
        "§5: generated bindings run end to end",
    ),
    "runtime/host/test_s3_2_1_typescript.py": (
        ("runtime/host/tsinput.py",),
        "§3.2.1: TypeScript input",
    ),
    "runtime/host/test_s3_3_3_hints.py": (
        ("runtime/host/hints.py",),
        "§3.3.3: hints that name the fix",
    ),
    "runtime/host/test_s3_3_3_mistakes.py": (
        ("runtime/host/hints.py",),
        "§3.3.3: the mistake corpus",
    ),
    "runtime/host/test_s3_4_typecheck_isolation.py": (
        ("runtime/host/typecheck.py",),
        "§3.4, §11: the type checker shows a script nothing of the host",
    ),
    "runtime/host/test_s3_typecheck.py": (
        ("runtime/host/typecheck.py",),
        "type checking before a run",
    ),
    "runtime/host/test_s4_discovery.py": (
        ("runtime/host/discovery.py",),
        "§4: @codemode/discovery",
    ),
    "runtime/host/test_s7_errors.py": (
        ("runtime/host/bridge.py",),
        "§7: the error classes a call gets",
    ),
    "runtime/host/test_s7_3_revoked_credentials.py": (
        ("runtime/host/bridge.py",),
        "§7.3: a revoked credential mid-session",
    ),
    "runtime/host/test_s8_list_changed.py": (
        ("runtime/host/catalog.py",),
        "§8: tools/list_changed",
    ),
    "runtime/host/test_s10_concurrency.py": (
        ("runtime/host/bridge.py",),
        "§10.1, §7.4: the call cap",
    ),
    "generator/test_s5_3_2_boxed.py": (("generator/unwrap.py",), "§5.3.2: boxed results"),
    "generator/test_s6_1_module_names.py": (
        ("generator/names.py",),
        "§6.1: names that change a module",
    ),
    "generator/test_s11_secrets.py": (
        ("generator/redact.py",),
        "§11: credentials never reach fixtures/",
    ),
    # Cross-cutting tests of one sub-system.
    "runtime/sandbox/test_escapes.py": (("runtime/sandbox/worker.py",), "§3.4, §11: escape probes"),
    "runtime/native/test_conformance.py": (
        ("runtime/native/worker.c", "runtime/js/supervisor.js", "runtime/sandbox/worker.py"),
        "two workers, one protocol: the native worker says what the Python worker says",
    ),
    "runtime/native/test_arena.py": (
        ("runtime/native/arena.c", "runtime/native/realm.c"),
        "the native worker's realm heap and realm images (C: no Python module to mirror)",
    ),
    "runtime/host/test_observability.py": (
        ("runtime/host/telemetry.py", "runtime/host/metrics.py"),
        "spans and /metrics together",
    ),
    "runtime/js/test_js_checked.py": ((), "tsc --checkJs over every file of runtime/js/"),
    "runtime/test_codemode.py": (
        ("runtime/codemode/__init__.py",),
        "the CodeMode facade: the Python API as documented",
    ),
    "runtime/codemode/test_owners.py": (
        (
            "runtime/codemode/builds.py",
            "runtime/codemode/catalogs.py",
            "runtime/codemode/connections.py",
            "runtime/codemode/learning.py",
            "runtime/codemode/out_cache.py",
            "runtime/codemode/typechecks.py",
        ),
        "the owners behind the facade, each with fakes",
    ),
    "generator/typescript/test_api.py": (
        ("generator/typescript/__init__.py",),
        "the translator's public API (the package itself)",
    ),
    "generator/typescript/test_soundness.py": (
        ("generator/typescript/translator.py",),
        "§6.2: every stage at once, hypothesis and real tsc",
    ),
    # The repository itself, not a module of the package.
    "test_repo.py": ((), "ruff, mypy, generate --check, the README's commands"),
    "test_packaging.py": ((), "the wheel: one import package, data files, no stray top level"),
    "test_servers.py": ((), "the demo and test MCP servers (examples/servers, tests/servers)"),
    "test_catalog_server.py": ((), "tests/servers/catalog_server.py, the recorded catalogs"),
    "test_tsc_helper.py": ((), "tests/tsc.py, the batched tsc helper other tests use"),
    "test_layout.py": ((), "this rule and tests/architecture.py's figures"),
    "test_design_doc.py": ((), "docs/DESIGN.md names only paths and symbols that exist"),
}

_DICT_STR_ANY = re.compile(r"\bdict\[str,\s*Any\]")


def package_dirs() -> dict[str, Path]:
    """Import package -> source folder, as pyproject tells setuptools."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {package: REPO / folder for package, folder in mapping.items()}


def mirrors() -> dict[str, Path]:
    """Test folder (relative to tests/, "" for tests/ itself) -> the source folder it mirrors."""
    found = {
        package.removeprefix("codemode_gen").lstrip(".").replace(".", "/"): folder
        for package, folder in package_dirs().items()
    }
    found.update({test: REPO / source for test, source in EXTRA_SOURCE_DIRS.items()})
    return found


def package_modules() -> list[Path]:
    """Every Python module of the package, as files (sub-package folders are listed separately
    in pyproject, so each folder is read without recursing)."""
    return [path for folder in package_dirs().values() for path in sorted(folder.glob("*.py"))]


def measured_modules() -> list[Path]:
    """The modules the coverage figure counts: not `__main__.py`, not an `__init__.py` that
    defines nothing (a docstring and imports are not code worth a test file)."""

    def defines(path: Path) -> bool:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for node in tree.body
        )

    return [
        path
        for path in package_modules()
        if path.name != "__main__.py" and (path.name != "__init__.py" or defines(path))
    ]


def test_files() -> list[Path]:
    """Every test file of the mirrored tree (tests/**/test_*.py outside `NOT_MIRRORS`)."""
    return [
        path
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.relative_to(TESTS).parts[0] not in NOT_MIRRORS
    ]


def tested_module(test: Path) -> Path | None:
    """The module a test file mirrors by its name, or None: `test_<module>[_<more>].py` beside
    the mirror of `<module>`'s folder (the longest module name that fits wins)."""
    folder = test.relative_to(TESTS).parent.as_posix()
    source = mirrors().get("" if folder == "." else folder)
    if source is None:
        return None
    stem = test.stem.removeprefix("test_")
    candidates = [
        path
        for path in sorted(source.iterdir())
        if path.suffix in (".py", ".js")
        and path.stem not in ("__init__", "__main__")
        and (stem == path.stem or stem.startswith(path.stem + "_"))
    ]
    return max(candidates, key=lambda path: len(path.stem), default=None)


def misplaced(test: Path) -> str | None:
    """Why `test` breaks the mirroring rule, saying where it goes; None when it keeps it."""
    rel = test.relative_to(TESTS).as_posix()
    if rel in ALLOWED or tested_module(test) is not None:
        return None
    stem = test.stem.removeprefix("test_")
    matches = sorted(
        (-len(name), folder)
        for folder, source in mirrors().items()
        for name in _prefixes(stem)
        if (source / f"{name}.py").exists() or (source / f"{name}.js").exists()
    )
    homes = list(
        dict.fromkeys(f"tests/{folder + '/' if folder else ''}{test.name}" for _, folder in matches)
    )  # the module named most fully first
    where = (
        f"move it to {' or '.join(homes)}"
        if homes
        else "name it after the module it tests (test_<module>.py in the folder mirroring the "
        "module's), or list it in tests/architecture.py's ALLOWED with the module it "
        "exercises and why"
    )
    return f"tests/{rel}: no module {stem!r} in the folder it mirrors; {where}"


def _prefixes(stem: str) -> list[str]:
    """`serve_http_bounds` -> serve_http_bounds, serve_http, serve: module names it may test."""
    parts = stem.split("_")
    return ["_".join(parts[:n]) for n in range(len(parts), 0, -1)]


@dataclass(frozen=True)
class Figures:
    largest_module: tuple[str, int]
    largest_class: tuple[str, int]
    dict_str_any: int
    over_limit: list[tuple[str, int]]
    covered: list[str]
    uncovered: list[str]

    @property
    def coverage(self) -> float:
        return len(self.covered) / max(1, len(self.covered) + len(self.uncovered))


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def figures() -> Figures:
    lines: dict[str, int] = {}
    classes: dict[str, int] = {}
    dict_any = 0
    for path in package_modules():
        text = path.read_text(encoding="utf-8")
        lines[_rel(path)] = len(text.splitlines())
        dict_any += len(_DICT_STR_ANY.findall(text))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                methods = sum(
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body
                )
                classes[f"{_rel(path)}:{node.name}"] = methods
    tested = {_rel(module) for test in test_files() if (module := tested_module(test))}
    tested |= {
        module
        for test, (modules, _) in ALLOWED.items()
        if (TESTS / test).is_file()
        for module in modules
    }
    measured = [_rel(path) for path in measured_modules()]
    return Figures(
        largest_module=max(lines.items(), key=lambda item: item[1]),
        largest_class=max(classes.items(), key=lambda item: item[1]),
        dict_str_any=dict_any,
        over_limit=sorted(
            ((m, n) for m, n in lines.items() if n > MAX_MODULE_LINES), key=lambda item: -item[1]
        ),
        covered=[m for m in measured if m in tested],
        uncovered=[m for m in measured if m not in tested],
    )


def main() -> int:
    f = figures()
    print(f"largest module: {f.largest_module[0]} ({f.largest_module[1]} lines)")
    print(f"class with the most methods: {f.largest_class[0]} ({f.largest_class[1]} methods)")
    print(f"dict[str, Any] in the package: {f.dict_str_any}")
    print(f"modules over {MAX_MODULE_LINES} lines: {len(f.over_limit)}")
    for module, count in f.over_limit:
        print(f"  {module}: {count}")
    total = len(f.covered) + len(f.uncovered)
    print(
        f"test-to-module mapping coverage: {len(f.covered)}/{total} modules "
        f"({f.coverage:.0%}) have a mirrored test file"
    )
    for module in f.uncovered:
        print(f"  no mirrored test: {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
