"""Finding the TypeScript compiler a type check runs with, and the command that runs it.

Why its own module: where TypeScript comes from (an explicit `--tsc`, the project's
node_modules, PATH, the pinned copy in the user's cache: runtime/host/tsinstall.py) and which
engine runs it (node or QuickJS) is a question of its own, asked by the checker (typecheck.py)
and by the skills' declarations check (skills.py) alike, and answered with the messages a user
needs when nothing is found.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from codemode_gen.children import python_module_command
from codemode_gen.errors import UserError
from codemode_gen.runtime.host.tsinstall import (
    TYPESCRIPT_VERSION,
    cached_typescript,
    typescript_dir,
)

#: Which engine runs the compiler: node when found ("auto"), else QuickJS; or exactly one.
Backend = Literal["auto", "node", "quickjs"]

SERVER_JS = Path(__file__).resolve().parent.parent / "js" / "typecheck_server.js"
CORE_JS = Path(__file__).resolve().parent.parent / "js" / "typecheck_core.js"
WORKER_MODULE = "codemode_gen.runtime.sandbox.typecheck_worker"
INSTALL_HINT = (
    "install TypeScript: `npm i -g typescript` (or `npm i -D typescript` in the project), "
    "or pass --tsc PATH to a tsc, a typescript package folder or its lib/typescript.js"
)


class CompilerNotFound(UserError):
    """No usable TypeScript compiler (tsc with its `typescript` package, plus node)."""


class TypeScriptNotFound(CompilerNotFound):
    """None of the usual places has TypeScript, nor the cache: the pinned one can be downloaded."""

    def __init__(self, looked: str) -> None:
        super().__init__(
            f"no TypeScript compiler found (looked for {looked}, and TypeScript {TYPESCRIPT_VERSION} "
            f"in {typescript_dir()}, where codemode-gen downloads it once)",
            hint=f"{INSTALL_HINT}; or download TypeScript {TYPESCRIPT_VERSION} now: "
            "`codemode-gen check --install-typescript`",
        )
        self.looked = looked


@dataclass(frozen=True)
class Compiler:
    node: str | None  # the node executable; None: the compiler runs on QuickJS
    typescript: Path  # the package's lib/typescript.js
    found: (
        str  # where, for messages: "--tsc", "<dir>/node_modules/.bin/tsc", "PATH", the cache folder
    )

    @property
    def backend(self) -> Literal["node", "quickjs"]:
        return "quickjs" if self.node is None else "node"

    def command(self, out_dir: Path) -> list[str]:
        """The checker process's command line."""
        if self.node is None:
            return python_module_command(
                WORKER_MODULE, str(self.typescript), str(out_dir), isolation="isolated"
            )
        return [self.node, str(SERVER_JS), str(self.typescript), str(out_dir)]


def _typescript_js(candidate: Path) -> Path | None:
    """lib/typescript.js for a tsc executable, a `typescript` package folder or the file itself."""
    try:
        real = candidate.resolve()
    except (OSError, RuntimeError):
        return None
    options: list[Path] = []
    if real.is_dir():
        options.append(real / "lib" / "typescript.js")
    elif real.name == "typescript.js":
        options.append(real)
    else:
        # node_modules/.bin/tsc -> ../typescript/bin/tsc: the package is two folders up
        options.append(real.parent.parent / "lib" / "typescript.js")
        # a copied launcher in npm's global layout: <prefix>/bin/tsc, <prefix>/lib/node_modules/typescript
        options.append(
            candidate.parent.parent
            / "lib"
            / "node_modules"
            / "typescript"
            / "lib"
            / "typescript.js"
        )
        options.append(
            candidate.parent / "node_modules" / "typescript" / "lib" / "typescript.js"
        )  # Windows
    return next((p for p in options if p.is_file()), None)


def _node_for(candidate: Path | None, path_env: str | None) -> str | None:
    """node next to the tsc (nvm and npm prefixes put both in one bin/), else on PATH."""
    if candidate is not None:
        for name in ("node", "node.exe"):
            beside = candidate.parent / name
            if beside.is_file() and os.access(beside, os.X_OK):
                return str(beside)
    return shutil.which("node", path=path_env)


def _search_roots(roots: Iterable[Path]) -> list[Path]:
    seen: list[Path] = []
    for root in roots:
        for folder in (Path(os.path.abspath(root)), *Path(os.path.abspath(root)).parents):
            if folder not in seen:
                seen.append(folder)
    return seen


def find_compiler(
    tsc: str | Path | None = None,
    roots: Iterable[Path] = (),
    *,
    path_env: str | None = None,
    backend: Backend = "auto",
) -> Compiler:
    """The TypeScript compiler to check with, looked for in order: `tsc` (a tsc executable, a
    `typescript` package folder or its lib/typescript.js), `node_modules/.bin/tsc` in each of
    `roots` and their parents, `tsc` on PATH, then the pinned TypeScript in the user's cache
    (runtime/host/tsinstall.py; `TypeChecker` downloads it there when nothing is found). It runs on
    node (beside that tsc, else on PATH) when there is one, else on QuickJS; `backend` picks one.

    Raises CompilerNotFound (exit 2) saying how to get one; TypeScriptNotFound when only the
    download could help."""
    if tsc is not None:
        given = Path(tsc).expanduser()
        if not given.exists():
            raise CompilerNotFound(f"--tsc {tsc}: no such file", hint=INSTALL_HINT)
        package = _typescript_js(given)
        if package is None:
            raise CompilerNotFound(
                f"--tsc {tsc}: not a TypeScript compiler (found no typescript/lib/typescript.js for it)",
                hint="pass the tsc of an npm-installed typescript package, the package folder or its lib/typescript.js",
            )
        return _with_node(given, package, "--tsc", path_env, backend)
    for folder in _search_roots(roots):
        candidate = folder / "node_modules" / ".bin" / "tsc"
        package = _typescript_js(candidate) if candidate.exists() else None
        if package is None:
            direct = folder / "node_modules" / "typescript"
            package = _typescript_js(direct) if direct.is_dir() else None
        if package is not None:
            return _with_node(
                candidate if candidate.exists() else None,
                package,
                str(candidate),
                path_env,
                backend,
            )
    on_path = shutil.which("tsc", path=path_env)
    if on_path is not None:
        package = _typescript_js(Path(on_path))
        if package is not None:
            return _with_node(Path(on_path), package, "PATH", path_env, backend)
    cached = cached_typescript()
    if cached is not None:
        return _with_node(None, cached, str(typescript_dir()), path_env, backend)
    tops = list(dict.fromkeys(os.path.abspath(r) for r in roots))
    their = "its" if len(tops) == 1 else "their"
    where = (
        f"node_modules/.bin/tsc in {' and '.join(tops)} and {their} parent folders, "
        if tops
        else ""
    )
    path_note = (
        f"{on_path} on PATH (its typescript package was not found)" if on_path else "tsc on PATH"
    )
    raise TypeScriptNotFound(where + path_note)


def _with_node(
    candidate: Path | None, package: Path, found: str, path_env: str | None, backend: Backend
) -> Compiler:
    if backend == "quickjs":
        return Compiler(node=None, typescript=package, found=found)
    node = _node_for(candidate, path_env)
    if node is None and backend == "node":
        raise CompilerNotFound(
            f"found TypeScript ({package.parent.parent}) but no `node` to run it",
            hint="install Node.js (https://nodejs.org) and put `node` on PATH",
        )
    return Compiler(node=node, typescript=package, found=found)
