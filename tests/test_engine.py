"""runtime/engine.py: the engine interface on real jsbox, and that nothing else imports jsbox."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from codemode_gen.runtime.engine import Engine, EngineError, EngineTimeout, new_engine

RUNTIME = Path(__file__).resolve().parent.parent / "runtime"


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
        asyncio.run(e.run("globalThis.keep = []; for (;;) globalThis.keep.push(new Array(1000).fill(1));", 5.0))
    assert e.heap_exhausted() is True


def test_only_engine_module_imports_jsbox() -> None:
    offenders = [
        p.name for p in RUNTIME.glob("*.py")
        if p.name != "engine.py" and ("import jsbox" in p.read_text() or "from jsbox" in p.read_text())
    ]
    assert offenders == [], offenders


def test_worker_import_does_not_pull_in_mcp() -> None:
    code = "import sys, codemode_gen.runtime.worker; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
