"""Type-check agent scripts against out/'s declarations with the TypeScript compiler (§3.3.3 diagnostics).

`codemode-gen check` reports type errors as §3.3.3 diagnostics and exits; `serve --typecheck`,
`CodeMode(typecheck=True)` and `limits.typecheck` do the same before a run, as warnings, and the
run goes ahead whatever the check says (a failing or unavailable check never blocks a script).

The compiler is the `typescript` package found in the usual places (`find_compiler`: an explicit
path, `node_modules/.bin/tsc` in the project's folder or its parents, PATH), else the pinned
TypeScript in the user's cache, downloaded there once (runtime/host/tsinstall.py: `pip install` brings
no node and no TypeScript). It runs in a long-lived process speaking one JSON object a line, on
one of two engines that evaluate the same js/typecheck_core.js (a LanguageService that parses
lib.*.d.ts and out/codemode.d.ts once), so their diagnostics are the same:
- node (js/typecheck_server.js) when `node` is found: V8 is the faster engine;
- QuickJS (runtime/sandbox/typecheck_worker.py, the sandbox's engine, in a Python process of its own)
  otherwise: nothing to install but TypeScript itself.
`TypeChecker` owns that process: started on first use (or ahead of need, `warm`), shared by
concurrent runs, restarted when it dies. The first check costs the process start plus loading
the declarations (~1 s with node, ~1.5 s with QuickJS); later ones parse and check only the
script (a 20-line script: ~10 ms with node, ~30 ms with QuickJS; `bench/typescript.py`).

What is checked (documented in README "Type checking"): the script as an ES module with
top-level await, against nothing but out/codemode.d.ts and TypeScript's standard library (the
checker's file system is closed and virtual: no host file, path or existence shows in a diagnostic,
§3.4), under out/tsconfig.json's strictness, target and lib (strict, ES2022, no DOM), plus
`noPropertyAccessFromIndexSignature` (generated object types are open, so a misspelt property
would otherwise be a silent `unknown`) and `erasableSyntaxOnly` (the sandbox runs TypeScript by
erasing its types: runtime/host/tsinput.py). TypeScript when the language says so (`.ts` files,
`--lang ts`) or the script uses TypeScript syntax; otherwise JavaScript (checkJs), without the
two strict checks only JSDoc could satisfy there (implicit `any` parameters, `unknown` catch
variables).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from codemode_gen import MODULE_PREFIX
from codemode_gen.children import python_module_command
from codemode_gen.errors import UserError
from codemode_gen.runtime.diagnostics import DiagnosticCode, diagnostic, ts_code
from codemode_gen.runtime.host.tsinstall import (
    TYPESCRIPT_VERSION,
    InstallFailed,
    Progress,
    cached_typescript,
    install_typescript,
    typescript_dir,
)

__all__ = [
    "INSTALL_HINT", "NOT_CHECKED", "CheckResult", "Compiler", "CompilerNotFound", "TypeCheckUnavailable", "TypeChecker",
    "TypeScriptDownloading", "TypeScriptNotFound", "check_sync", "find_compiler", "hint_for", "lang_of",
    "run_diagnostics", "to_diagnostics",
]

Lang = Literal["auto", "ts", "js"]
#: Which engine runs the compiler: node when found ("auto"), else QuickJS; or exactly one.
Backend = Literal["auto", "node", "quickjs"]

SERVER_JS = Path(__file__).resolve().parent.parent / "js" / "typecheck_server.js"
CORE_JS = Path(__file__).resolve().parent.parent / "js" / "typecheck_core.js"
WORKER_MODULE = "codemode_gen.runtime.sandbox.typecheck_worker"
INSTALL_HINT = (
    "install TypeScript: `npm i -g typescript` (or `npm i -D typescript` in the project), "
    "or pass --tsc PATH to a tsc, a typescript package folder or its lib/typescript.js"
)
# Bounds the checker's start: loading typescript.js (~9 MB of JS) takes 0.1-0.3 s under node,
# 0.4-0.7 s under QuickJS, on a warm disk.
START_TIMEOUT_S = 30.0
# After a failed download of the pinned TypeScript, runs report that failure (no new attempt)
# for this long: an offline host does not try again, and wait, on every run.
INSTALL_RETRY_S = 600.0
# Bounds one protocol line (a reply with every diagnostic of a very broken script).
MAX_LINE_BYTES = 16 * 1024 * 1024
# Scripts larger than this are not sent to the checker (a run would spend its time parsing).
MAX_SCRIPT_CHARS = 1024 * 1024
# A check still unanswered after this long is stuck (a pathological type): the process is
# killed at the next timeout and started afresh by the next check.
STUCK_CHECK_S = 10.0
# The same on QuickJS, which runs the compiler 3-10 times slower than node on agent-sized scripts
# and worse beyond (bench/typescript.py: a 2,000-line script takes 6-25 s there).
STUCK_CHECK_QUICKJS_S = 60.0
# Of the time a run has left when its check starts, the check may use this share: the script
# always keeps the rest, however slow the compiler's first start is.
RUN_SHARE = 0.5
# Type warnings one run reports (then an info line with the count): a response is read by a
# model, and the first errors are the ones to fix.
MAX_RUN_DIAGNOSTICS = 20
# Server modules a "Cannot find module" hint names (then a count): a hint is one line to read.
MAX_HINT_MODULES = 8
# How much of the checker's stderr a failure message quotes.
STDERR_TAIL_CHARS = 1000

#: Codes of the info diagnostics saying a run was not type-checked (no compiler, over its time
#: share, a failure of the checker, a script too large): reported to a run that asked for the
#: check itself (runtime/codemode.py).
NOT_CHECKED = frozenset({DiagnosticCode.TYPECHECK_SKIPPED, DiagnosticCode.TYPECHECK_UNAVAILABLE})
_TS_SUFFIXES = {".ts", ".mts", ".cts", ".tsx"}
_JS_SUFFIXES = {".js", ".mjs", ".cjs", ".jsx"}


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


class TypeCheckUnavailable(Exception):
    """The checker process could not start, died, or answered something unusable."""


class TypeScriptDownloading(Exception):
    """The pinned TypeScript is being downloaded (runs are not held up for it)."""


@dataclass(frozen=True)
class Compiler:
    node: str | None  # the node executable; None: the compiler runs on QuickJS
    typescript: Path  # the package's lib/typescript.js
    found: str  # where, for messages: "--tsc", "<dir>/node_modules/.bin/tsc", "PATH", the cache folder

    @property
    def backend(self) -> Literal["node", "quickjs"]:
        return "quickjs" if self.node is None else "node"

    def command(self, out_dir: Path) -> list[str]:
        """The checker process's command line."""
        if self.node is None:
            return python_module_command(WORKER_MODULE, str(self.typescript), str(out_dir), isolation="isolated")
        return [self.node, str(SERVER_JS), str(self.typescript), str(out_dir)]


@dataclass(frozen=True)
class CheckResult:
    lang: Literal["ts", "js"]
    diagnostics: list[dict[str, Any]]  # the server's: category, code (int), message, line, column, …
    ms: float  # time the check took inside the checker


# ------------------------------------------------------------------------------ finding tsc


def lang_of(script: str, lang: str | None = None) -> Lang:
    """The language to check `script` (a path or "-") as: `lang` if given, else by extension
    (.ts/.mts/.cts → ts, .js/.mjs/.cjs → js), else "auto" (TypeScript if it uses TS syntax)."""
    if lang in ("ts", "js", "auto"):
        return lang  # type: ignore[return-value]
    suffix = Path(script).suffix.lower() if script != "-" else ""
    if suffix in _TS_SUFFIXES:
        return "ts"
    if suffix in _JS_SUFFIXES:
        return "js"
    return "auto"


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
        options.append(candidate.parent.parent / "lib" / "node_modules" / "typescript" / "lib" / "typescript.js")
        options.append(candidate.parent / "node_modules" / "typescript" / "lib" / "typescript.js")  # Windows
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
            return _with_node(candidate if candidate.exists() else None, package, str(candidate), path_env, backend)
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
    where = f"node_modules/.bin/tsc in {' and '.join(tops)} and {their} parent folders, " if tops else ""
    path_note = f"{on_path} on PATH (its typescript package was not found)" if on_path else "tsc on PATH"
    raise TypeScriptNotFound(where + path_note)


def _with_node(candidate: Path | None, package: Path, found: str, path_env: str | None, backend: Backend) -> Compiler:
    if backend == "quickjs":
        return Compiler(node=None, typescript=package, found=found)
    node = _node_for(candidate, path_env)
    if node is None and backend == "node":
        raise CompilerNotFound(
            f"found TypeScript ({package.parent.parent}) but no `node` to run it",
            hint="install Node.js (https://nodejs.org) and put `node` on PATH",
        )
    return Compiler(node=node, typescript=package, found=found)


# ------------------------------------------------------------------------------ the checker


class TypeChecker:
    """One long-lived type-check server for one out/ folder; `check()` many scripts.

    Use it from one event loop. `check` starts the server when needed (the first call pays for
    it; `warm()` pays ahead); a server that died is started again by the next check.

    `install`: when no TypeScript is found, download the pinned one into the user's cache
    (runtime/host/tsinstall.py; one `progress` line before and after, stderr by default) in the
    background. `warm()` waits for that download; `check()` does not: while it goes on, checks
    raise TypeScriptDownloading at once (a run's time is never spent on it), and once it failed
    they raise its InstallFailed for INSTALL_RETRY_S before the next attempt.
    """

    def __init__(
        self, out_dir: Path, *, tsc: str | Path | None = None, roots: Sequence[Path] = (),
        backend: Backend = "auto", install: bool = True, progress: Progress | None = None,
    ) -> None:
        self.out_dir = Path(os.path.abspath(out_dir))
        self.tsc = tsc
        self.roots = tuple(roots) or (self.out_dir.parent,)
        self.backend = backend
        self.auto_install = install
        self.progress = progress
        self.starts = 0  # server processes started (tests and the bench read it)
        self.compiler: Compiler | None = None
        self.version: str | None = None
        self.installing = False  # the pinned TypeScript is being downloaded
        self._install_failed: tuple[float, InstallFailed] | None = None
        self._download: asyncio.Task[None] | None = None
        self._looked = ""  # where find_compiler looked, for the message of a failed download
        self._proc: asyncio.subprocess.Process | None = None
        self._start_task: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stderr: asyncio.Task[None] | None = None
        self._stderr_tail = ""
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], float]] = {}
        self._next_id = 0

    # -------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def warm(self, timeout: float | None = None) -> None:
        """Start the server and load the declarations now, so that the next check is fast
        (downloading the pinned TypeScript first if that is needed: `timeout` None waits for it)."""
        await self._started(timeout, wait_install=True)

    async def aclose(self) -> None:
        task, self._start_task = self._start_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await self._stop()

    async def __aenter__(self) -> TypeChecker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _started(self, timeout: float | None, *, wait_install: bool = False) -> None:
        task = self._start_task
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None or not self.running)):
            compiler = self._find()  # on the loop (a few stat calls): raises now, or says to install
            if compiler is None:
                self.installing = True  # from now: a check that comes meanwhile does not wait
            task = self._start_task = asyncio.ensure_future(self._start(compiler))
            task.add_done_callback(_retrieve)
        if self.installing and not wait_install:
            raise TypeScriptDownloading(f"TypeScript {TYPESCRIPT_VERSION} is being downloaded")
        # Shielded: a run that gives up waiting leaves the start going for the next one.
        await asyncio.wait_for(asyncio.shield(task), timeout)

    def _find(self) -> Compiler | None:
        """The compiler, or None when the pinned TypeScript is to be downloaded first."""
        try:
            return find_compiler(self.tsc, self.roots, backend=self.backend)
        except TypeScriptNotFound as exc:
            if not self.auto_install:
                raise
            self._looked = exc.looked
        failed = self._install_failed
        if failed is not None and time.monotonic() - failed[0] < INSTALL_RETRY_S:
            raise failed[1]
        return None

    async def install(self) -> None:
        """Download the pinned TypeScript now if the check will need it (no other is found), and
        wait for that; the checker is not started. Raises as `check` would (CompilerNotFound,
        InstallFailed). For a host that can wait before its run's time starts (`codemode-gen run`)."""
        if self.running or self._find() is not None:
            return
        await self._install()

    async def _install(self) -> Compiler:
        """The compiler once the pinned TypeScript is downloaded: one download at a time, which
        every caller waits for (and which goes on when one of them gives up)."""
        task = self._download
        if task is None or task.done():
            self.installing = True
            task = self._download = asyncio.ensure_future(self._download_typescript())
            task.add_done_callback(_retrieve)
        await asyncio.shield(task)
        return find_compiler(self.tsc, self.roots, backend=self.backend)

    async def _download_typescript(self) -> None:
        self.installing = True
        try:
            progress = self.progress
            await asyncio.to_thread(install_typescript, *([progress] if progress is not None else []))
        except InstallFailed as exc:
            failed = InstallFailed(f"no TypeScript compiler found (looked for {self._looked}); {exc.message}",
                                   hint=exc.hint)
            self._install_failed = (time.monotonic(), failed)
            raise failed from None
        finally:
            self.installing = False
        self._install_failed = None

    async def _start(self, compiler: Compiler | None) -> None:
        await self._stop()
        if compiler is None:
            compiler = await self._install()
        self.compiler = compiler
        try:
            proc = await asyncio.create_subprocess_exec(
                *compiler.command(self.out_dir),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=MAX_LINE_BYTES,
            )
        except OSError as exc:
            raise TypeCheckUnavailable(f"cannot start {compiler.command(self.out_dir)[0]}: {exc.strerror or exc}") from None
        self._proc = proc
        self.starts += 1
        self._stderr_tail = ""
        self._stderr = asyncio.ensure_future(self._drain_stderr(proc))
        assert proc.stdout is not None
        try:
            first = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT_S)
            hello = json.loads(first) if first else {}
        except (TimeoutError, ValueError) as exc:
            await self._stop()
            raise TypeCheckUnavailable(f"the type checker did not start: {exc or 'timeout'}") from None
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            detail = hello.get("error") if isinstance(hello, dict) and hello.get("error") else self._stderr_tail.strip()
            await self._stop()
            raise TypeCheckUnavailable(f"the type checker did not start: {detail or 'it exited'}")
        self.version = str(hello.get("typescript") or "")
        self._reader = asyncio.ensure_future(self._read(proc))
        await self._request({"op": "warm"}, START_TIMEOUT_S)

    async def _stop(self) -> None:
        proc, self._proc = self._proc, None
        reader, self._reader = self._reader, None
        stderr, self._stderr = self._stderr, None
        if proc is not None and proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 1.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await proc.wait()
        for task in (reader, stderr):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._fail_pending("the type checker was stopped")

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(4096):
            self._stderr_tail = (self._stderr_tail + chunk.decode("utf-8", "replace"))[-STDERR_TAIL_CHARS:]

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        try:
            while line := await proc.stdout.readline():
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(reply, dict):
                    continue
                entry = self._pending.pop(reply.get("id"), None)  # type: ignore[arg-type]
                if entry is not None and not entry[0].done():
                    entry[0].set_result(reply)
        except (ValueError, asyncio.LimitOverrunError) as exc:  # a line over MAX_LINE_BYTES
            reason = f"the type checker's answer was unusable: {exc}"
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        else:
            tail = self._stderr_tail.strip().splitlines()
            reason = "the type checker exited" + (f": {tail[-1]}" if tail else "")
        if self._proc is proc and self._start_task is not None and self._start_task.done():
            self._start_task = None  # nobody reads this process any more: the next check restarts
        self._fail_pending(reason)

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(TypeCheckUnavailable(reason))

    async def _request(self, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            raise TypeCheckUnavailable("the type checker is not running")
        self._next_id += 1
        ident = self._next_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = (future, time.monotonic())
        try:
            proc.stdin.write(json.dumps({**message, "id": ident}).encode("utf-8") + b"\n")
            await proc.stdin.drain()
            reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            # Left in _pending: the server is still at it (its late answer is dropped), and the
            # age of the oldest unanswered request tells a stuck server.
            self._kill_if_stuck()
            raise
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._pending.pop(ident, None)
            raise TypeCheckUnavailable(f"the type checker exited ({exc})") from None
        except BaseException:
            self._pending.pop(ident, None)
            raise
        self._pending.pop(ident, None)
        if reply.get("ok") is not True:
            raise TypeCheckUnavailable(f"the type checker failed: {str(reply.get('error'))[:500]}")
        return reply

    def _kill_if_stuck(self) -> None:
        """A request unanswered for STUCK_CHECK_S (STUCK_CHECK_QUICKJS_S on QuickJS: a pathological
        script) holds up every later one (the server checks one at a time): kill the server; the
        next check starts afresh."""
        now = time.monotonic()
        stuck = STUCK_CHECK_QUICKJS_S if self.compiler is not None and self.compiler.backend == "quickjs" else STUCK_CHECK_S
        if self._proc is not None and any(now - since > stuck for _, since in self._pending.values()):
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            if self._start_task is not None and self._start_task.done():
                self._start_task = None  # the next check starts a new server (after reaping this one)

    # -------------------------------------------------------------- checking

    async def check(self, code: str, *, lang: Lang = "auto", timeout: float | None = None) -> CheckResult:
        """Type-check `code`; raises CompilerNotFound, InstallFailed, TypeScriptDownloading,
        TypeCheckUnavailable or TimeoutError (after `timeout` seconds, start-up included)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        await self._started(timeout)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        reply = await self._request({"op": "check", "code": code, "lang": lang}, left)
        diagnostics = reply.get("diagnostics")
        if not isinstance(diagnostics, list):
            raise TypeCheckUnavailable("the type checker answered without diagnostics")
        found = reply.get("lang")
        return CheckResult(
            lang="ts" if found == "ts" else "js",
            diagnostics=[d for d in diagnostics if isinstance(d, dict)],
            ms=float(reply.get("ms") or 0.0),
        )


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A start that failed is reported by the check waiting on it (or the next): never logged."""
    if not task.cancelled():
        task.exception()


# ------------------------------------------------------------------------------ diagnostics

_SEVERITY = {"error": "error", "warning": "warning", "suggestion": "info", "message": "info"}
_DID_YOU_MEAN = re.compile(r"Did you mean '([^']+)'\?")
_MISSING = re.compile(r"Property '([^']+)' is missing in type")
_NOT_ASSIGNABLE = re.compile(r"^Type '([^']+)' is not assignable to type '([^']+)'\.")
_EXTRA = re.compile(r"Object literal may only specify known properties, and '([^']+)' does not exist")
_NO_MODULE = re.compile(r"Cannot find module '([^']+)'")
_NO_NAME = re.compile(r"Cannot find name '([^']+)'")
_ON_STRING = re.compile(r"Property '[^']+' does not exist on type 'string'")
_SANDBOX_MISSING = {
    "fetch": "the sandbox has no network: call a tool of a server instead",
    "XMLHttpRequest": "the sandbox has no network: call a tool of a server instead",
    "require": 'scripts are ES modules: `import * as x from "@codemode/servers/<id>"`',
    "process": "the sandbox has no process object; nothing of the host is reachable",
    "setInterval": "the sandbox has no setInterval: loop with `await new Promise((r) => setTimeout(r, ms))`",
    "window": "the sandbox is not a browser: globalThis holds the standard built-ins only",
    "document": "the sandbox is not a browser: there is no DOM",
}


def hint_for(d: Mapping[str, Any]) -> str | None:
    """A single corrective action for the common type errors of agent scripts, else None."""
    code = d.get("code")
    message = str(d.get("message") or "")
    if code == 4111:  # a property only the open type's index signature allows
        prop = str(d.get("property") or "")
        declared = [str(n) for n in d.get("declared") or []]
        if d.get("suggestion"):
            return f"did you mean `.{d['suggestion']}`? Declared: {', '.join(declared)}"
        if declared == ["result"]:
            return f"the value is boxed: it is in `.result` (e.g. `.result.{prop}`)"
        if declared:
            return (f"`{prop}` is not declared on this type (declared: {', '.join(declared)}); "
                    f'if the server does send it, read it as `["{prop}"]`')
        return f'this value declares no properties; if the server does send `{prop}`, read it as `["{prop}"]`'
    if code in (2554, 2555) and message.startswith("Expected 1 argument"):
        return "pass what the declaration lists; a tool takes one input object: `tool({ ... })` with its required fields"
    missing = _MISSING.search(message)
    if missing:
        return f"add the required property `{missing[1]}`"
    extra = _EXTRA.search(message)
    if extra and not _DID_YOU_MEAN.search(message):
        return f"remove `{extra[1]}`: the input type does not declare it (read the tool's declaration)"
    suggestion = _DID_YOU_MEAN.search(message)
    if suggestion:
        return f"use `{suggestion[1]}`"
    wrong = _NOT_ASSIGNABLE.search(message)
    if wrong:
        got, wanted = wrong[1], wrong[2]
        if wanted == "number" and (got == "string" or got.startswith('"')):
            return "pass a number: `Number(value)` converts a numeric string"
        if wanted == "string" and (got == "number" or got[:1].isdigit()):
            return "pass a string: `String(value)`"
    module = _NO_MODULE.search(message)
    if module:
        if module[1].startswith(MODULE_PREFIX):
            return ("import a configured server (listServers() from \"@codemode/discovery\" lists them); "
                    "a server added since `codemode-gen generate` has no declarations yet")
        return _only_codemode(d)
    if code in (6053, 6231, 2688) and d.get("specifier") is not None:  # `/// <reference path|types>`
        return "remove the `/// <reference>` (types come from imports): " + _only_codemode(d)
    name = _NO_NAME.search(message)
    if name and name[1] in _SANDBOX_MISSING:
        return _SANDBOX_MISSING[name[1]]
    if code in (18047, 18048, 18049, 2531, 2532, 2533):
        return "check the value first (`if (x) …`), or use `?.` and `??`"
    if code == 18046:
        return "narrow it first (`typeof`, `instanceof Error`, `Array.isArray`), or cast a parsed value: `JSON.parse(s) as T`"
    if _ON_STRING.search(message):
        return "this value is a string; a tool that returns a JSON string needs `JSON.parse(result)` first"
    if code in (7006, 7031):
        return "annotate it, e.g. `(note: Note) => …` with a type the server module exports"
    return None


def _only_codemode(d: Mapping[str, Any]) -> str:
    """What a script can import instead: the modules out/ declares (the checker lists them)."""
    declared = [str(m) for m in d.get("modules") or [] if isinstance(m, str)]
    servers = [m for m in declared if m.startswith(MODULE_PREFIX)]
    shown = servers[:MAX_HINT_MODULES] + [m for m in declared if not m.startswith(MODULE_PREFIX)]
    if not shown:
        return f'import a server as "{MODULE_PREFIX}<id>" (listServers() from "@codemode/discovery" lists them)'
    more = f" and {len(servers) - MAX_HINT_MODULES} more servers" if len(servers) > MAX_HINT_MODULES else ""
    return "import one of " + ", ".join(f'"{m}"' for m in shown) + more


def to_diagnostics(result: CheckResult, *, severity: str | None = None) -> list[dict[str, str]]:
    """The checker's diagnostics in the §3.3.3 shape: code `TS<n>`, path `line:column`, a hint
    where the fix is obvious; `severity` overrides the compiler's (runs report warnings)."""
    out = []
    for d in result.diagnostics:
        message = str(d.get("message") or "")
        if d.get("code") == 4111 and d.get("property") and d.get("typeName"):
            # tsc's own text ("must be accessed with ['x']") suggests the wrong fix for a typo
            message = (f"Property '{d['property']}' is not declared on type '{d['typeName']}' "
                       "(only its index signature allows it).")
        out.append(diagnostic(
            ts_code(d.get('code')),
            message,
            severity=severity or _SEVERITY.get(str(d.get("category")), "error"),
            hint=hint_for(d),
            path=f"{d.get('line', 1)}:{d.get('column', 1)}",
        ))
    return out


async def run_diagnostics(
    checker: TypeChecker, code: str, *, deadline: float, modules: Collection[str] = ()
) -> list[dict[str, str]]:
    """A run's type-check diagnostics: type errors as warnings, or one info line saying why the
    check was skipped. Never raises (but CancelledError): the run goes ahead regardless.

    `modules`: specifiers the run can import although out/ does not declare them (servers built
    in memory): "Cannot find module" about one of them is not reported."""
    if len(code) > MAX_SCRIPT_CHARS:
        return [diagnostic(
            DiagnosticCode.TYPECHECK_SKIPPED, f"the script is over {MAX_SCRIPT_CHARS} characters; it was not type-checked",
            severity="info",
        )]
    budget = max(0.0, (deadline - time.monotonic()) * RUN_SHARE)
    try:
        result = await checker.check(code, timeout=budget)
    except (CompilerNotFound, InstallFailed) as exc:
        return [diagnostic(
            DiagnosticCode.TYPECHECK_UNAVAILABLE, f"not type-checked: {exc.message}", severity="info",
            hint=(exc.hint or INSTALL_HINT).replace("pass --tsc PATH", "start serve with --tsc PATH"),
        )]
    except TypeScriptDownloading as exc:
        return [diagnostic(
            DiagnosticCode.TYPECHECK_SKIPPED, f"not type-checked: {exc} for type checking (once; this run did not wait for it)",
            severity="info",
            hint="nothing to do; runs are checked once it is there (a host with TypeScript installed, "
                 "`npm i -g typescript`, or started with --tsc PATH, downloads nothing)",
        )]
    except TimeoutError:
        return [diagnostic(
            DiagnosticCode.TYPECHECK_SKIPPED,
            f"not type-checked: the check took longer than {round(budget * 1000)} ms "
            f"(half the time the run had left){'; the compiler is still starting' if checker.starts <= 1 else ''}",
            severity="info",
            hint="the run went ahead unchecked; a later run asking for limits.typecheck is checked once the "
            "compiler is warm",
        )]
    except Exception as exc:  # TypeCheckUnavailable or a bug: never block a valid script
        return [diagnostic(
            DiagnosticCode.TYPECHECK_UNAVAILABLE, f"not type-checked: {exc}", severity="info",
            hint="the run went ahead unchecked; the next run asking for limits.typecheck starts the type "
            "checker again",
        )]
    if modules:
        kept = [d for d in result.diagnostics if not _undeclared_module(d, modules)]
        result = CheckResult(result.lang, kept, result.ms)
    found = to_diagnostics(result, severity="warning")
    if len(found) > MAX_RUN_DIAGNOSTICS:
        more = len(found) - MAX_RUN_DIAGNOSTICS
        found = [*found[:MAX_RUN_DIAGNOSTICS], diagnostic(
            DiagnosticCode.TYPECHECK_TRUNCATED, f"{more} more type error{'s' * (more != 1)} not shown", severity="info",
            hint="run `codemode-gen check` on the script to see them all",
        )]
    return found


def _undeclared_module(d: Mapping[str, Any], modules: Collection[str]) -> bool:
    found = _NO_MODULE.search(str(d.get("message") or "")) if d.get("code") in (2307, 2792) else None
    return found is not None and found[1] in modules


def check_sync(
    code: str, out_dir: Path, *, lang: Lang = "auto", tsc: str | Path | None = None,
    roots: Sequence[Path] = (), timeout: float | None = None,
) -> CheckResult:
    """One check from synchronous code (`codemode-gen check`): start (downloading the pinned
    TypeScript first when no other is found), check, stop. `timeout` bounds the check, not the
    download."""

    async def once() -> CheckResult:
        async with TypeChecker(out_dir, tsc=tsc, roots=roots) as checker:
            await checker.warm()  # the download if needed (its own timeouts), the start (START_TIMEOUT_S)
            return await checker.check(code, lang=lang, timeout=timeout)

    return asyncio.run(once())

