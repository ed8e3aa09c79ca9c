"""Type-check agent scripts against out/'s declarations with the TypeScript compiler (§3.3.3 diagnostics).

`codemode-gen check` reports type errors as §3.3.3 diagnostics and exits; `serve --typecheck`,
`CodeMode(typecheck=True)` and `limits.typecheck` do the same before a run, as warnings, and the
run goes ahead whatever the check says (a failing or unavailable check never blocks a script).

The compiler is the `typescript` package found in the usual places (`tscompiler.find_compiler`: an explicit
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

This module owns the checker process and the language a script is checked as; finding the
compiler is tscompiler.py, turning its answers into §3.3.3 diagnostics (hints, a run's warnings)
tsdiagnostics.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from codemode_gen.runtime.host.tscompiler import (
    Backend,
    Compiler,
    TypeScriptNotFound,
    find_compiler,
)
from codemode_gen.runtime.host.tsinstall import (
    TYPESCRIPT_VERSION,
    InstallFailed,
    Progress,
    install_typescript,
)

__all__ = [
    "CheckResult",
    "Lang",
    "TypeCheckUnavailable",
    "TypeChecker",
    "TypeScriptDownloading",
    "check_sync",
    "lang_of",
]

Lang = Literal["auto", "ts", "js"]
# Bounds the checker's start: loading typescript.js (~9 MB of JS) takes 0.1-0.3 s under node,
# 0.4-0.7 s under QuickJS, on a warm disk.
START_TIMEOUT_S = 30.0
# After a failed download of the pinned TypeScript, runs report that failure (no new attempt)
# for this long: an offline host does not try again, and wait, on every run.
INSTALL_RETRY_S = 600.0
# Bounds one protocol line (a reply with every diagnostic of a very broken script).
MAX_LINE_BYTES = 16 * 1024 * 1024
# A check still unanswered after this long is stuck (a pathological type): the process is
# killed at the next timeout and started afresh by the next check.
STUCK_CHECK_S = 10.0
# The same on QuickJS, which runs the compiler 3-10 times slower than node on agent-sized scripts
# and worse beyond (bench/typescript.py: a 2,000-line script takes 6-25 s there).
STUCK_CHECK_QUICKJS_S = 60.0
# How much of the checker's stderr a failure message quotes.
STDERR_TAIL_CHARS = 1000
_TS_SUFFIXES = {".ts", ".mts", ".cts", ".tsx"}
_JS_SUFFIXES = {".js", ".mjs", ".cjs", ".jsx"}


class TypeCheckUnavailable(Exception):
    """The checker process could not start, died, or answered something unusable."""


class TypeScriptDownloading(Exception):
    """The pinned TypeScript is being downloaded (runs are not held up for it)."""


@dataclass(frozen=True)
class CheckResult:
    lang: Literal["ts", "js"]
    diagnostics: list[
        dict[str, Any]
    ]  # the server's: category, code (int), message, line, column, …
    ms: float  # time the check took inside the checker


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
        self,
        out_dir: Path,
        *,
        tsc: str | Path | None = None,
        roots: Sequence[Path] = (),
        backend: Backend = "auto",
        install: bool = True,
        progress: Progress | None = None,
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
        if task is None or (
            task.done() and (task.cancelled() or task.exception() is not None or not self.running)
        ):
            compiler = (
                self._find()
            )  # on the loop (a few stat calls): raises now, or says to install
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
            await asyncio.to_thread(
                install_typescript, *([progress] if progress is not None else [])
            )
        except InstallFailed as exc:
            failed = InstallFailed(
                f"no TypeScript compiler found (looked for {self._looked}); {exc.message}",
                hint=exc.hint,
            )
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
            raise TypeCheckUnavailable(
                f"cannot start {compiler.command(self.out_dir)[0]}: {exc.strerror or exc}"
            ) from None
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
            raise TypeCheckUnavailable(
                f"the type checker did not start: {exc or 'timeout'}"
            ) from None
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            detail = (
                hello.get("error")
                if isinstance(hello, dict) and hello.get("error")
                else self._stderr_tail.strip()
            )
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
            self._stderr_tail = (self._stderr_tail + chunk.decode("utf-8", "replace"))[
                -STDERR_TAIL_CHARS:
            ]

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
        stuck = (
            STUCK_CHECK_QUICKJS_S
            if self.compiler is not None and self.compiler.backend == "quickjs"
            else STUCK_CHECK_S
        )
        if self._proc is not None and any(
            now - since > stuck for _, since in self._pending.values()
        ):
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            if self._start_task is not None and self._start_task.done():
                self._start_task = (
                    None  # the next check starts a new server (after reaping this one)
                )

    # -------------------------------------------------------------- checking

    async def check(
        self, code: str, *, lang: Lang = "auto", timeout: float | None = None
    ) -> CheckResult:
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


def check_sync(
    code: str,
    out_dir: Path,
    *,
    lang: Lang = "auto",
    tsc: str | Path | None = None,
    roots: Sequence[Path] = (),
    timeout: float | None = None,
) -> CheckResult:
    """One check from synchronous code (`codemode-gen check`): start (downloading the pinned
    TypeScript first when no other is found), check, stop. `timeout` bounds the check, not the
    download."""

    async def once() -> CheckResult:
        async with TypeChecker(out_dir, tsc=tsc, roots=roots) as checker:
            await (
                checker.warm()
            )  # the download if needed (its own timeouts), the start (START_TIMEOUT_S)
            return await checker.check(code, lang=lang, timeout=timeout)

    return asyncio.run(once())
