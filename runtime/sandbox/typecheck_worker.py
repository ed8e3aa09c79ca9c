"""The type checker on QuickJS: the TypeScript compiler where there is no node.

    python -I -m codemode_gen.runtime.sandbox.typecheck_worker <path of typescript.js> <out dir>

runtime/host/typecheck.py starts this process when no `node` is found (a fresh `pip install`), and
speaks to it exactly as to js/typecheck_server.js under node: one JSON object a line on stdin
and stdout, the first line written `{"ready": true, "typescript": "<version>"}`. Both evaluate
the same js/typecheck_core.js (the LanguageService, its closed file system, the diagnostics'
shape), so a script gets the same diagnostics from either.

Why a process of its own: QuickJS holds the GIL while it runs (a check takes tens to hundreds
of milliseconds), and a stuck check must be killable, as with node.

The compiler reaches the disk only through the functions bound below, which open
out/codemode.d.ts, out/tsconfig.json and the lib.*.d.ts beside typescript.js, nothing else
(spec §3.4: the checker shows a script nothing of the host). QuickJS itself has no file system,
network or process access in jsbox.

This module must stay cheap to import: no `mcp`, no generator.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from codemode_gen.runtime.sandbox.engine import EngineError, new_compiler_engine
from codemode_gen.runtime.sandbox.worker import _die_with_parent

#: Heap of the compiler's realm. Bounds a pathological script's types (the check fails with
#: "out of memory" instead of taking the machine's memory); the compiler with the ES2022 lib and
#: the demo's declarations holds 110-180 MB (a 2,000-line script: bench/typescript.py).
HEAP_BYTES = 1024 * 1024 * 1024
#: Bounds one request line (a script is at most runtime/host/typecheck.py's MAX_SCRIPT_CHARS, JSON-escaped).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
#: TypeScript's standard library files, as js/typecheck_core.js names them (checked here too).
LIB_FILE = re.compile(r"lib(\.[a-z0-9]+)*\.d\.ts", re.IGNORECASE)
CORE_JS = "typecheck_core.js"


class HostFiles:
    """The compiler's only way to the disk: three kinds of file, by fixed names."""

    def __init__(self, typescript_js: Path, out_dir: Path) -> None:
        self.lib_dir = typescript_js.parent
        self.declarations = out_dir / "codemode.d.ts"
        self.config = out_dir / "tsconfig.json"

    def read_declarations(self) -> str | None:
        return _read(self.declarations)

    def declarations_version(self) -> str:
        try:
            st = os.stat(self.declarations)
        except OSError:
            return "missing"
        return f"{st.st_mtime_ns}:{st.st_size}"

    def read_config(self) -> str | None:
        return _read(self.config)

    def read_lib(self, base: Any) -> str | None:
        return _read(self.lib_dir / base) if _is_lib(base) else None

    def lib_exists(self, base: Any) -> bool:
        return _is_lib(base) and (self.lib_dir / base).is_file()


def _is_lib(base: Any) -> bool:
    return isinstance(base, str) and LIB_FILE.fullmatch(base) is not None


def _read(path: Path) -> str | None:
    """The file's text as node's readFileSync(path, "utf8") gives it (invalid bytes become U+FFFD)."""
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


class Checker:
    """typescript.js and js/typecheck_core.js in one QuickJS realm."""

    def __init__(self, typescript_js: Path, out_dir: Path) -> None:
        self.files = files = HostFiles(typescript_js, out_dir)
        self._request = ""
        self.broken = False
        engine = self.engine = new_compiler_engine(memory_limit=HEAP_BYTES)
        bindings: dict[str, Callable[..., Any]] = {
            "readDeclarations": files.read_declarations,
            "declarationsVersion": files.declarations_version,
            "readConfig": files.read_config,
            "readLib": files.read_lib,
            "libExists": files.lib_exists,
            "now": lambda: time.perf_counter() * 1000,
        }
        for name, func in bindings.items():
            engine.bind_function(f"__codemode_host_{name}", func)
        engine.bind_function("__codemode_request", lambda: self._request)
        # typescript.js without `module` in scope defines a global `ts` (its own fallback).
        engine.evaluate(typescript_js.read_text(encoding="utf-8"))
        engine.evaluate(
            resources.files("codemode_gen.runtime")
            .joinpath("js", CORE_JS)
            .read_text(encoding="utf-8")
        )
        host = ", ".join(f"{name}: __codemode_host_{name}" for name in bindings)
        self.version = str(
            engine.evaluate(
                f"globalThis.__codemode_checker = codemodeTypecheck.createChecker(ts, {{ {host} }});\n"
                "__codemode_checker.version"
            )
        )

    def handle(self, line: str) -> str:
        """One request line → its reply line (JSON text; lone surrogates come back escaped).

        The compiler's own exceptions (a stack overflow on a deeply nested script) are replies of
        typecheck_core.js; one that escapes it (out of memory while handling that) leaves a realm
        not to be trusted: `broken`, and the process ends after replying."""
        self._request = line
        try:
            return str(
                self.engine.evaluate(
                    "JSON.stringify(__codemode_checker.handleLine(__codemode_request()))"
                )
            )
        except EngineError as exc:
            self.broken = True
            return json.dumps(
                {"id": _request_id(line), "ok": False, "error": f"{exc.name}: {exc.message}"[:500]}
            )
        finally:
            self._request = ""


def _request_id(line: str) -> Any:
    try:
        request = json.loads(line)
    except ValueError:
        return None
    return request.get("id") if isinstance(request, dict) else None


def serve(checker: Checker, out: Any, requests: Any) -> None:
    """Answer each request line until stdin closes."""
    while True:
        raw = requests.readline(MAX_REQUEST_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_REQUEST_BYTES and not raw.endswith(b"\n"):
            _send(out, json.dumps({"id": None, "ok": False, "error": "request line too long"}))
            while raw and not raw.endswith(b"\n"):  # skip the rest of that line
                raw = requests.readline(MAX_REQUEST_BYTES)
            continue
        line = raw.decode("utf-8", "replace").strip()
        if line:
            _send(out, checker.handle(line))
            if checker.broken:
                return  # the next check starts a fresh process


def _send(out: Any, text: str) -> None:
    out.write(text.encode("utf-8") + b"\n")
    out.flush()


def main() -> None:
    _die_with_parent()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    if len(sys.argv) != 3:
        _send(
            out,
            json.dumps(
                {"ready": False, "error": "usage: typecheck_worker <typescript.js> <out dir>"}
            ),
        )
        sys.exit(2)
    typescript_js, out_dir = Path(sys.argv[1]), Path(os.path.abspath(sys.argv[2]))
    try:
        checker = Checker(typescript_js, out_dir)
    except (OSError, ValueError, EngineError) as exc:  # unreadable, not UTF-8, not JavaScript
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _send(
            out,
            json.dumps(
                {"ready": False, "error": f"cannot load TypeScript from {typescript_js}: {detail}"}
            ),
        )
        sys.exit(1)
    _send(out, json.dumps({"ready": True, "typescript": checker.version}))
    serve(checker, out, sys.stdin.buffer)


if __name__ == "__main__":
    main()
