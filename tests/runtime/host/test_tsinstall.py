"""Type checking after `pip install` alone: no node, no npm, no node_modules (§3.3.3 diagnostics).

`codemode-gen check`, a `typecheck: true` run and `serve --typecheck` find no TypeScript in the
usual places, download the pinned one into the user's cache once (runtime/host/tsinstall.py: the npm
registry's tarball, verified against package-lock.json's sha512) and run it on QuickJS
(runtime/sandbox/typecheck_worker.py). Real processes, a PATH without node, real files; the registry is
either the real one (one slow test, which CI can reach), a local HTTP server on 127.0.0.1
(`CODEMODE_NPM_REGISTRY`), or none: the cache is seeded from the repository's
node_modules/typescript.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.runtime.host import tsinstall
from codemode_gen.runtime.host.tsinstall import (
    CACHE_ENV,
    DEFAULT_REGISTRY,
    REGISTRY_ENV,
    TYPESCRIPT_INTEGRITY,
    TYPESCRIPT_VERSION,
    InstallFailed,
    install_typescript,
    integrity_of,
)
from codemode_gen.runtime.response import Response
from tests.conftest import UNREACHABLE_REGISTRY
from tests.runtime_support import PYTHON, REPO, path_without_node
from tests.tsc import at, require_tsc

pytestmark = [pytest.mark.timeout(300)]

# Bounds one codemode-gen command (a download of 4.4 MB included).
COMMAND_TIMEOUT = 240
# Bounds waiting for the background download of a test's local registry to end.
INSTALL_WAIT_S = 60.0

WRONG_PROPERTY = """import * as notes from "@codemode/servers/notes";
const note = await notes.get_note({ id: 2 });
globalThis.__codemode_result__ = note.titel ?? note.title;
"""
PROGRESS = re.compile(
    rf"codemode-gen: downloading TypeScript {re.escape(TYPESCRIPT_VERSION)} \(\d+\.\d MB\) for type checking, once"
)
PACKAGE = REPO / "node_modules" / "typescript"
LIB_FILE = re.compile(r"lib(\.[a-z0-9]+)*\.d\.ts")


# ------------------------------------------------------------------ a fresh install


@dataclass
class Fresh:
    """A project (the demo's out/ and servers, no node_modules) and the environment of a machine
    after `pip install codemode-gen` only: PATH without node, npm or tsc; an empty cache."""

    base: Path

    @property
    def project(self) -> Path:
        return self.base / "project"

    @property
    def cache(self) -> Path:
        return self.base / "cache"

    @property
    def typescript(self) -> Path:
        return self.cache / f"typescript-{TYPESCRIPT_VERSION}"

    def env(self, registry: str | None = UNREACHABLE_REGISTRY) -> dict[str, str]:
        env = {
            "PATH": path_without_node(self.base / "bin"),
            "HOME": str(self.base),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            CACHE_ENV: str(self.cache),
        }
        if registry is not None:
            env[REGISTRY_ENV] = registry
        return env

    def codemode_gen(
        self, *args: str, registry: str | None = UNREACHABLE_REGISTRY
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "codemode_gen", *args],
            cwd=self.project,
            env=self.env(registry),
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )

    def check(
        self, registry: str | None = UNREACHABLE_REGISTRY
    ) -> subprocess.CompletedProcess[str]:
        return self.codemode_gen("check", "agent.ts", registry=registry)

    def run_typechecked(
        self, registry: str | None = UNREACHABLE_REGISTRY
    ) -> subprocess.CompletedProcess[str]:
        return self.codemode_gen(
            "run", "--limits", '{"typecheck": true}', "agent.ts", registry=registry
        )


def make_fresh(base: Path) -> Fresh:
    fresh = Fresh(base)
    shutil.copytree(REPO / "out", fresh.project / "out")
    servers = REPO / "examples" / "servers"
    (fresh.project / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": PYTHON, "args": [str(servers / "notes_server.py")]},
                }
            }
        )
    )
    (fresh.project / "agent.ts").write_text(WRONG_PROPERTY)
    for folder in (fresh.project, *fresh.project.parents):  # nothing up the tree either
        assert not (folder / "node_modules").exists(), folder
    return fresh


@pytest.fixture
def fresh(tmp_path: Path) -> Fresh:
    return make_fresh(tmp_path)


def seed_cache(target: Path) -> None:
    """The cache as a download leaves it, copied from the repository's node_modules/typescript."""
    require_tsc()
    (target / "lib").mkdir(parents=True)
    for name in ("package.json", "LICENSE.txt", "ThirdPartyNoticeText.txt"):
        shutil.copy2(PACKAGE / name, target / name)
    for lib in (PACKAGE / "lib").iterdir():
        if lib.name == "typescript.js" or LIB_FILE.fullmatch(lib.name):
            shutil.copy2(lib, target / "lib" / lib.name)


def expected_layout() -> set[str]:
    """The files a download keeps: the compiler, its standard library, its licence and manifest."""
    libs = {f"lib/{p.name}" for p in (PACKAGE / "lib").iterdir() if LIB_FILE.fullmatch(p.name)}
    return {"package.json", "LICENSE.txt", "ThirdPartyNoticeText.txt", "lib/typescript.js", *libs}


def layout_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def type_notes(response: Response) -> list[tuple[str, str, str]]:
    return [
        (d["severity"], d["code"], d.get("path", ""))
        for d in response["diagnostics"]
        if d["code"].startswith(("TS", "TYPECHECK_"))
    ]


def assert_checked(
    check: subprocess.CompletedProcess[str], run: subprocess.CompletedProcess[str]
) -> None:
    """`check` and a typecheck run of agent.ts both found the misspelt property."""
    assert check.returncode == 1, check.stderr
    [found] = json.loads(check.stdout)
    assert (found["code"], found["path"]) == ("TS4111", at(WRONG_PROPERTY, "titel", 3))
    assert found["hint"].startswith("did you mean `.title`?")
    assert run.returncode == 0, run.stderr
    response = json.loads(run.stdout)
    assert type_notes(response) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))]
    assert response["result"] == "Groceries"


# ------------------------------------------------------------------ the pin


def test_the_pin_is_package_lock_s_typescript() -> None:
    """The version and checksum downloaded are the ones the repository's own tests run."""
    lock = json.loads((REPO / "package-lock.json").read_text())["packages"][
        "node_modules/typescript"
    ]
    assert (lock["version"], lock["integrity"]) == (TYPESCRIPT_VERSION, TYPESCRIPT_INTEGRITY)


def test_the_cache_folder_follows_xdg_and_its_override(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert (
        tsinstall.typescript_dir()
        == tmp_path / "xdg" / "codemode-gen" / f"typescript-{TYPESCRIPT_VERSION}"
    )
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tsinstall.cache_dir() == tmp_path / "home" / ".cache" / "codemode-gen"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert tsinstall.typescript_dir() == tmp_path / "mine" / f"typescript-{TYPESCRIPT_VERSION}"


# ------------------------------------------------------------------ fresh install, cache seeded (offline)


@pytest.mark.slow
def test_fresh_install_checks_on_quickjs_from_the_cache(fresh: Fresh) -> None:
    """No node, no node_modules, the pinned TypeScript in the cache, no registry: `check` and a
    `typecheck: true` run both type-check (on QuickJS), and nothing is downloaded."""
    seed_cache(fresh.typescript)
    before = layout_of(fresh.cache)
    check, run = fresh.check(), fresh.run_typechecked()
    assert_checked(check, run)
    assert "downloading" not in check.stderr + run.stderr
    assert layout_of(fresh.cache) == before


def test_check_install_typescript_only_installs(fresh: Fresh) -> None:
    """`codemode-gen check --install-typescript` (an image built ahead of use, a machine about
    to go offline) downloads into the cache if needed, prints where it is, and exits."""
    offline = fresh.codemode_gen("check", "--install-typescript")
    assert offline.returncode == 2 and "cannot download TypeScript" in offline.stderr, (
        offline.stderr
    )
    seed_cache(fresh.typescript)
    there = fresh.codemode_gen("check", "--install-typescript")
    assert (there.returncode, there.stdout.strip(), there.stderr) == (0, str(fresh.typescript), "")
    no_script = fresh.codemode_gen("check")
    assert no_script.returncode == 2 and "missing SCRIPT" in no_script.stderr


def test_a_damaged_cache_is_a_clear_error(fresh: Fresh) -> None:
    """A typescript.js in the cache that does not load (a disk error, a hand edit): `check` says
    which file, and how to get a good one, instead of a traceback."""
    (fresh.typescript / "lib").mkdir(parents=True)
    (fresh.typescript / "lib" / "typescript.js").write_text("this is not (JavaScript\n")
    proc = fresh.check()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"cannot load TypeScript from {fresh.typescript / 'lib' / 'typescript.js'}: SyntaxError"
        in proc.stderr
    )
    assert "delete its folder" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ the real registry


def registry_reachable() -> bool:
    try:
        url = f"{DEFAULT_REGISTRY}/typescript/-/typescript-{TYPESCRIPT_VERSION}.tgz"
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=10):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_fresh_install_downloads_typescript_once_from_the_npm_registry(fresh: Fresh) -> None:
    """The first use, a `typecheck: true` run, downloads TypeScript from registry.npmjs.org with
    a progress line before the run starts (its check is made, not skipped), verified and unpacked
    into the cache (only what the checker needs); later uses download nothing, even with no
    registry at all."""
    if not os.environ.get("CI") and not registry_reachable():
        pytest.skip("registry.npmjs.org is not reachable from here (CI reaches it)")
    run = fresh.run_typechecked(registry=None)  # the default registry
    assert PROGRESS.search(run.stderr), run.stderr
    assert f"TypeScript {TYPESCRIPT_VERSION} is in {fresh.typescript}" in run.stderr
    assert [p.name for p in fresh.cache.iterdir()] == [
        fresh.typescript.name
    ]  # no staging folder left
    assert layout_of(fresh.typescript) == expected_layout()
    if PACKAGE.is_dir():  # the very files npm installed for the repository's tests
        for name in ("lib/typescript.js", "lib/lib.es2022.d.ts", "LICENSE.txt"):
            assert (fresh.typescript / name).read_bytes() == (PACKAGE / name).read_bytes(), name
    check, again = fresh.check(), fresh.run_typechecked()
    assert_checked(check, run)
    assert_checked(check, again)
    assert "downloading" not in check.stderr + again.stderr


# ------------------------------------------------------------------ a local registry


@dataclass
class Registry:
    """An npm registry on 127.0.0.1 answering the TypeScript tarball's path with `body` (or
    `status`), after `release` is set."""

    body: bytes = b""
    status: int = 200
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def registry() -> Iterator[Registry]:
    state = Registry()
    state.release.set()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            state.release.wait(INSTALL_WAIT_S)
            expected = f"/typescript/-/typescript-{TYPESCRIPT_VERSION}.tgz"
            status = state.status if self.path == expected else 404
            body = state.body if status == 200 else b"not found"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def tarball(files: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    """A gzipped npm package tarball of `files` (names under package/)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


def typescript_tarball() -> bytes:
    """The repository's TypeScript as a package tarball, with what a download does not keep."""
    require_tsc()
    files = {f"package/{name}": (PACKAGE / name).read_bytes() for name in expected_layout()}
    files["package/lib/_tsc.js"] = (PACKAGE / "lib" / "_tsc.js").read_bytes()
    files["package/bin/tsc"] = b"#!/usr/bin/env node\n"
    files["package/../escaped.d.ts"] = b"declare const x: 1;\n"
    return tarball(files, symlinks={"package/lib/lib.secret.d.ts": "/etc/passwd"})


@pytest.mark.slow
def test_a_download_that_is_not_typescript_is_refused(fresh: Fresh, registry: Registry) -> None:
    """A registry (or proxy) serving other bytes than npm's own tarball: `check` says the checksum
    does not match, installs nothing, exits 2; a missing tarball is its HTTP status."""
    registry.body = tarball(
        {"package/lib/typescript.js": b"globalThis.ts = { version: '6.6.6' };\n"}
    )
    refused = fresh.check(registry=registry.url)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert PROGRESS.search(refused.stderr)  # downloaded, then refused
    assert "refused the download" in refused.stderr and "sha512" in refused.stderr
    assert f"published integrity ({TYPESCRIPT_INTEGRITY[:27]}" in refused.stderr
    assert "nothing was installed" in refused.stderr and REGISTRY_ENV in refused.stderr
    assert (
        not fresh.cache.exists() or list(fresh.cache.iterdir()) == []
    )  # no package, no staging folder
    assert registry.requests == [f"/typescript/-/typescript-{TYPESCRIPT_VERSION}.tgz"]
    registry.status = 404
    missing = fresh.check(registry=registry.url)
    assert missing.returncode == 2 and "HTTP 404" in missing.stderr, missing.stderr
    assert "npm i -g typescript" in missing.stderr and "--tsc PATH" in missing.stderr


def test_concurrent_first_uses_install_one_whole_copy(
    tmp_path: Path, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several first uses at once (threads; processes race the same way, on the rename): each
    gets the same complete folder, holding only the kept files; no staging folder is left.
    The checksum is the tarball's here (the real one is the subject of the tests above)."""
    registry.body = typescript_tarball()
    monkeypatch.setattr(tsinstall, "TYPESCRIPT_INTEGRITY", integrity_of(registry.body))
    monkeypatch.setenv(REGISTRY_ENV, registry.url)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    registry.release.clear()  # every request waits until all have started
    lines: list[str] = []
    found: list[Path | BaseException] = []

    def first_use() -> None:
        try:
            found.append(install_typescript(lines.append))
        except BaseException as exc:
            found.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + INSTALL_WAIT_S
    while len(registry.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    registry.release.set()
    for thread in threads:
        thread.join(INSTALL_WAIT_S)
    target = tmp_path / "cache" / f"typescript-{TYPESCRIPT_VERSION}"
    assert found == [target / "lib" / "typescript.js"] * 3
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [target.name]
    assert (
        layout_of(target) == expected_layout()
    )  # not _tsc.js, bin/, the symlink or ../escaped.d.ts
    assert not (tmp_path / "cache" / "escaped.d.ts").exists()
    assert sum(bool(PROGRESS.match(line)) for line in lines) == 3
    # Installed: the next use neither downloads nor prints anything.
    lines.clear()
    assert install_typescript(lines.append) == target / "lib" / "typescript.js" and lines == []


# ------------------------------------------------------------------ the download is no run's time


@pytest.mark.slow
def test_a_one_shot_host_downloads_before_the_run_not_during_it(
    fresh: Fresh, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`codemode-gen run` asks `CodeMode.prepare_typecheck(limits)` first: a run that is
    type-checked gets TypeScript downloaded (and the checker started) before its timeoutMs
    starts, so its check is made; one that is not downloads nothing."""
    registry.body = typescript_tarball()
    monkeypatch.setattr(tsinstall, "TYPESCRIPT_INTEGRITY", integrity_of(registry.body))
    monkeypatch.setenv("PATH", fresh.env()["PATH"])
    monkeypatch.setenv(CACHE_ENV, str(fresh.cache))
    monkeypatch.setenv(REGISTRY_ENV, registry.url)

    async def main() -> tuple[int, Response]:
        async with CodeMode.from_config(fresh.project / ".mcp.json") as cm:
            await cm.prepare_typecheck({"timeoutMs": 5000})  # not type-checked: nothing to do
            untouched = len(registry.requests)
            await cm.prepare_typecheck({"typecheck": True})
            return untouched, await cm.run(WRONG_PROPERTY, limits={"typecheck": True})

    untouched, response = anyio.run(main)
    assert untouched == 0 and len(registry.requests) == 1
    assert type_notes(response) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))], (
        response["diagnostics"]
    )
    assert type_notes(response) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))]


# ------------------------------------------------------------------ serve


def fresh_host(fresh: Fresh, monkeypatch: pytest.MonkeyPatch, registry: Registry) -> CodeMode:
    """A `serve --typecheck` host (in this process) on a fresh install: no node on PATH."""
    monkeypatch.setenv("PATH", fresh.env()["PATH"])
    monkeypatch.setenv(CACHE_ENV, str(fresh.cache))
    monkeypatch.setenv(REGISTRY_ENV, registry.url)
    return CodeMode.from_config(fresh.project / ".mcp.json", typecheck=True)


async def installed(cm: CodeMode) -> None:
    """Until the host's background download has ended (either way)."""
    with anyio.fail_after(INSTALL_WAIT_S):
        while cm.typechecker().installing:
            await anyio.sleep(0.02)


@pytest.mark.slow
def test_serve_downloads_at_startup_and_runs_meanwhile_are_not_held_up(
    fresh: Fresh,
    registry: Registry,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """`serve --typecheck` starts the download with the host; a run while it goes on skips its
    check at once (TYPECHECK_SKIPPED says why) and runs; once TypeScript is there (downloaded
    once, however many wait for it), runs are checked (on QuickJS: there is no node)."""
    registry.body = typescript_tarball()
    monkeypatch.setattr(tsinstall, "TYPESCRIPT_INTEGRITY", integrity_of(registry.body))
    registry.release.clear()  # the registry answers only once the first run is done

    async def main() -> tuple[Response, Response, str | None]:
        async with fresh_host(fresh, monkeypatch, registry) as cm:
            with anyio.fail_after(INSTALL_WAIT_S):
                while not registry.requests:  # the download started with the host
                    await anyio.sleep(0.02)
            during = await cm.run(
                WRONG_PROPERTY, limits={"typecheck": True}
            )  # a run that asked is told
            async with anyio.create_task_group() as tasks:  # another waiter shares the one download
                tasks.start_soon(cm.typechecker().install)
                await anyio.sleep(0.1)
                registry.release.set()
            await installed(cm)
            await cm.typechecker().warm()
            after = await cm.run(WRONG_PROPERTY)
            compiler = cm.typechecker().compiler
            return during, after, compiler.backend if compiler else None

    during, after, backend = anyio.run(main)
    [skipped] = [d for d in during["diagnostics"] if d["code"].startswith("TYPECHECK_")]
    assert (skipped["code"], skipped["severity"]) == ("TYPECHECK_SKIPPED", "info")
    assert f"TypeScript {TYPESCRIPT_VERSION} is being downloaded" in skipped["message"]
    assert "did not wait" in skipped["message"]
    assert during["result"] == "Groceries"
    assert type_notes(after) == [("warning", "TS4111", at(WRONG_PROPERTY, "titel", 3))]
    assert backend == "quickjs" and registry.requests == [
        f"/typescript/-/typescript-{TYPESCRIPT_VERSION}.tgz"
    ]
    assert PROGRESS.search(capfd.readouterr().err)


@pytest.mark.slow
def test_serve_reports_a_failed_download_and_does_not_retry_on_every_run(
    fresh: Fresh, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.body = b"not a tarball"

    async def main() -> list[Response]:
        async with fresh_host(fresh, monkeypatch, registry) as cm:
            with anyio.fail_after(INSTALL_WAIT_S):
                while not registry.requests:
                    await anyio.sleep(0.02)
            await installed(cm)
            asked = {
                "typecheck": True
            }  # a run that asked for the check is told why it did not happen
            return [
                await cm.run(WRONG_PROPERTY, limits=asked),
                await cm.run(WRONG_PROPERTY, limits=asked),
            ]

    for response in anyio.run(main):
        [info] = [d for d in response["diagnostics"] if d["code"].startswith("TYPECHECK_")]
        assert (info["code"], info["severity"]) == ("TYPECHECK_UNAVAILABLE", "info")
        assert (
            "no TypeScript compiler found" in info["message"]
            and "refused the download" in info["message"]
        )
        assert (
            "start serve with --tsc PATH" in info["hint"] and "npm i -g typescript" in info["hint"]
        )
        assert response["result"] == "Groceries"
    assert len(registry.requests) == 1  # remembered: no new attempt per run


def test_install_failed_is_a_user_error_naming_the_ways_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    lines: list[str] = []
    with pytest.raises(InstallFailed) as info:
        install_typescript(lines.append)  # conftest: no registry
    assert info.value.exit_code == 2 and "cannot download TypeScript" in info.value.message
    assert info.value.hint is not None and "--install-typescript" in info.value.hint
    assert lines == [] and not (tmp_path / "cache" / f"typescript-{TYPESCRIPT_VERSION}").exists()
