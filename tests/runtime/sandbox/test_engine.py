"""runtime/sandbox/engine.py: the engine interface on real jsbox, and the import rules of the package:
nothing but the engine imports jsbox, and imports go one way, CLI -> runtime -> generator ->
shared core (codemode_gen's own modules, client/, templates)."""

from __future__ import annotations

import ast
import asyncio
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from codemode_gen.runtime.sandbox import engine as engine_module
from codemode_gen.runtime.sandbox.engine import (
    RELEASE_THRESHOLD_BYTES,
    Engine,
    EngineError,
    EngineTimeout,
    new_engine,
    release_memory,
)
from tests import typecheck

REPO = typecheck.REPO
# Lower number = lower layer; a module may import its own layer and those below it only.
# Everything in codemode_gen not listed is the shared core (0): config, errors, jsonio,
# dirswap, client/ (MCP sessions), templates.
LAYERS = {"codemode_gen.cli": 3, "codemode_gen.runtime": 2, "codemode_gen.generator": 1}
# The package's front doors sit above every layer: `python -m codemode_gen` (the CLI) and the
# root package's lazily provided `CodeMode`.
ENTRY_MODULES = frozenset({"codemode_gen", "codemode_gen.__main__"})


def engine(**kw: int) -> Engine:
    return new_engine(memory_limit=kw.get("memory", 16 << 20), max_pending_calls=8)


def test_check_syntax_reports_line_and_column() -> None:
    with pytest.raises(EngineError) as info:
        engine().check_syntax("const a = 1;\nlet = = 2;")
    assert info.value.name == "SyntaxError" and ":2:" in info.value.stack
    engine().check_syntax("import x from 'y';\nawait 1;\nexport const z = 1;")


def test_modules_async_host_functions_and_top_level_await() -> None:
    e = engine()

    async def double(x: int) -> int:
        await asyncio.sleep(0.01)
        return x * 2

    e.bind_function("double", double)
    e.bind_object("cfg", {"n": 21})
    e.add_module("lib", "export const k = cfg.n;")
    e.add_module("main", "import { k } from 'lib'; globalThis.out = await double(k);")
    got = asyncio.run(e.run('import("main").then(() => globalThis.out)', 2.0))
    assert got == 42


def test_answered_calls_reach_js_without_loop_turns_and_the_loop_still_gets_its_turn() -> None:
    # A host call whose future is already done (a queued reply, the end-of-run tick) is settled
    # at once; after MAX_SETTLED_IN_A_ROW of them the event loop runs what it has queued.
    e = engine()
    calls: list[int] = []
    loop_ran_at: list[int] = []

    def ready() -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        if not calls:
            loop.call_soon(lambda: loop_ran_at.append(len(calls)))
        calls.append(1)
        future: asyncio.Future[int] = loop.create_future()
        future.set_result(len(calls))
        return future

    def failed() -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        future.set_exception(ValueError("no such note"))
        return future

    e.bind_function("ready", ready)
    e.bind_function("failed", failed)
    script = (
        "(async () => { let sum = 0; for (let i = 0; i < 500; i++) sum += await ready();"
        " let caught = ''; try { await failed(); } catch (err) { caught = String(err && err.message); }"
        " return [sum, caught]; })()"
    )
    total, caught = asyncio.run(e.run(script, 10.0))
    assert total == 500 * 501 // 2
    assert "ValueError" in caught  # as jsbox reports a host function's exception
    [ran_at] = loop_ran_at
    assert 1 < ran_at <= engine_module.MAX_SETTLED_IN_A_ROW + 1, ran_at


def test_js_error_and_timeout() -> None:
    with pytest.raises(EngineError) as info:
        asyncio.run(engine().run("null.x", 2.0))
    assert info.value.name == "TypeError"
    with pytest.raises(EngineTimeout):
        asyncio.run(engine().run("while (true) {}", 0.2))


def test_heap_probe() -> None:
    e = engine(memory=8 << 20)
    assert e.heap_exhausted() is False
    with pytest.raises(EngineError):
        asyncio.run(
            e.run(
                "globalThis.keep = []; for (;;) globalThis.keep.push(new Array(1000).fill(1));", 5.0
            )
        )
    assert e.heap_exhausted() is True


def test_release_memory_trims_only_what_a_large_run_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    free: list[int | None] = [RELEASE_THRESHOLD_BYTES - 1]
    monkeypatch.setattr(engine_module, "_malloc_trim", lambda: trims.append)
    monkeypatch.setattr(engine_module, "_free_heap_bytes", lambda: free[0])
    release_memory()  # a small run's free heap stays for the next realm
    assert trims == []
    free[0] = RELEASE_THRESHOLD_BYTES
    release_memory()
    assert trims == [0]
    free[0] = None  # the allocator cannot tell: trim as before
    release_memory()
    assert trims == [0, 0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_free_heap_is_read_from_the_allocator() -> None:
    free = engine_module._free_heap_bytes()
    assert free is None or free >= 0  # None on a libc without mallinfo2 (musl, glibc < 2.33)


def package_modules() -> dict[str, Path]:
    """Every module of the installed package (by pyproject's package-dir table) -> its file."""
    modules: dict[str, Path] = {}
    for package, folder in typecheck.package_dirs().items():
        for path in sorted(folder.glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules


def imports(module: str, path: Path, known: Mapping[str, str]) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in the file, wherever it stands (function
    level and `if TYPE_CHECKING:` included). `known` maps dotted names to the module they are:
    `from a import b` is `known["a.b"]` when listed (a submodule, a lazy root name), else `a`."""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                yield node.lineno, known.get(f"{base}.{alias.name}", base)


def layer(module: str) -> int:
    for prefix, number in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return number
    return 0


def resolvable() -> dict[str, str]:
    """Dotted name -> module: every module itself, plus the names the root package provides
    lazily (imported under `if TYPE_CHECKING:` there, and through `__getattr__` at run time),
    so `from codemode_gen import CodeMode` counts as importing the runtime."""
    names = {module: module for module in package_modules()}
    tree = ast.parse((REPO / "codemode_gen" / "__init__.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("codemode_gen.")
        ):
            names.update({f"codemode_gen.{a.asname or a.name}": node.module for a in node.names})
    return names


def test_only_engine_module_imports_jsbox() -> None:
    known = resolvable()
    offenders = [
        f"{path.relative_to(REPO)}:{line}"
        for module, path in package_modules().items()
        if module != "codemode_gen.runtime.sandbox.engine"
        for line, target in imports(module, path, known)
        if target == "jsbox" or target.startswith("jsbox.")
    ]
    assert offenders == [], offenders


def test_imports_go_one_way_cli_runtime_generator_core() -> None:
    modules, known = package_modules(), resolvable()
    assert {
        "codemode_gen.client.sessions",
        "codemode_gen.generator.record",
        "codemode_gen.cli.run",
    } <= set(modules)
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {module} imports {target}"
        for module, path in modules.items()
        if module not in ENTRY_MODULES
        for line, target in imports(module, path, known)
        if (target == "codemode_gen" or target.startswith("codemode_gen."))
        and layer(target) > layer(module)
    ]
    assert offenders == [], "imports against CLI -> runtime -> generator -> core:\n" + "\n".join(
        offenders
    )


def test_import_direction_check_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The check itself: imports inside functions and the root's lazy CodeMode count."""
    path = tmp_path / "record.py"
    path.write_text(
        "from codemode_gen import CodeMode, __version__\n"
        "def f():\n    from codemode_gen.runtime.host import bridge\n"
    )
    found = list(imports("codemode_gen.generator.record", path, resolvable()))
    assert found == [
        (1, "codemode_gen.runtime.codemode"),
        (1, "codemode_gen"),
        (3, "codemode_gen.runtime.host.bridge"),
    ]
    assert [layer(target) for _, target in found] == [2, 0, 2]


# runtime/'s sub-systems and the edges allowed between them: the MCP front-ends sit on the
# CodeMode facade, which drives the per-run host, which drives the sandbox; the sandbox (the worker
# process and its pool) sees only the runtime's shared contract modules (runtime/*.py that are
# not the facade). Everything else in the runtime imports nothing above itself.
RUNTIME_PARTS = {
    "frontends": {"frontends", "codemode", "host", "sandbox", "contract"},
    "codemode": {"codemode", "host", "sandbox", "contract"},
    "host": {"host", "sandbox", "contract"},
    "sandbox": {"sandbox", "contract"},
    "contract": {"contract"},
}
# Edges that break the rule today, each to be removed; the test fails when one is fixed and
# still listed, so the list only shrinks.
KNOWN_RUNTIME_EDGES: set[tuple[str, str]] = set()


def runtime_part(module: str) -> str | None:
    if module == "codemode_gen.runtime" or not module.startswith("codemode_gen.runtime."):
        return None
    first = module.split(".")[2]
    if first == "native":  # the native worker (runtime/native/): the sandbox, in C
        return "sandbox"
    if first in ("frontends", "host", "sandbox"):
        return first
    return "codemode" if first == "codemode" else "contract"


def test_runtime_sub_packages_import_along_the_allowed_edges() -> None:
    modules, known = package_modules(), resolvable()
    found: set[tuple[str, str]] = set()
    offenders = []
    for module, path in modules.items():
        part = runtime_part(module)
        if part is None:
            continue
        for line, target in imports(module, path, known):
            other = runtime_part(target)
            if other is not None and other not in RUNTIME_PARTS[part]:
                found.add((module, target))
                if (module, target) not in KNOWN_RUNTIME_EDGES:
                    offenders.append(
                        f"{path.relative_to(REPO)}:{line}: {part}/ imports {other}: {target}"
                    )
    assert offenders == [], "runtime sub-packages imported against their edges:\n" + "\n".join(
        offenders
    )
    assert found >= KNOWN_RUNTIME_EDGES, (
        f"fixed, remove from KNOWN_RUNTIME_EDGES: {KNOWN_RUNTIME_EDGES - found}"
    )


def test_sandbox_worker_imports_nothing_from_the_generator() -> None:
    # The worker process runs untrusted scripts: it loads the sandbox and the contract modules,
    # never the generator (its templates, genson, jsonschema) nor the MCP SDK.
    code = (
        "import sys, codemode_gen.runtime.sandbox.worker\n"
        "print(sorted(m for m in sys.modules if m.startswith(('codemode_gen.generator', 'mcp', \n"
        "      'codemode_gen.runtime.host', 'codemode_gen.runtime.frontends'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_worker_import_does_not_pull_in_mcp() -> None:
    code = "import sys, codemode_gen.runtime.sandbox.worker; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_worker_process_runs_without_ssl_and_a_host_import_keeps_it() -> None:
    # The worker, started as the pool starts it (-m, run as __main__), serves a run without
    # loading OpenSSL's ssl module (its RSS); importing the module in a host changes nothing.
    code = (
        "import runpy, sys\n"
        "runpy.run_module('codemode_gen.runtime.sandbox.worker', run_name='__main__')\n"
        "print('ssl', sys.modules.get('ssl') is not None, file=sys.stderr)\n"
    )
    run = b'{"op":"run","code":"globalThis.__codemode_result__ = 7","modules":{},"sources":{},"limits":{},"budgetMs":30000}\n'
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], input=run, capture_output=True, check=True
    )
    assert b'"status":"ok","result":"7"' in out.stdout, out
    assert b"ssl False" in out.stderr, out.stderr
    host = "import sys, codemode_gen.runtime.sandbox.worker, ssl; print(ssl.OPENSSL_VERSION != '')"
    assert (
        subprocess.run(
            [sys.executable, "-c", host], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "True"
    )
