"""runtime/native/build.py: the native worker built with the real C compiler, atomically, with
cached objects; a missing compiler or a broken unit fails with one clear line and leaves nothing.

QuickJS's objects come from the package's object cache (`.objects/` beside the sources, filled
by `pip install`), so after an install these builds compile little: the build of the package's
sources uses that cache itself (content-addressed, written by rename: parallel test processes
share it); the builds of test programs use a copy, so nothing of theirs lands in the package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemode_gen.runtime.native import build
from codemode_gen.runtime.native.build import NATIVE_DIR, BuildError, BuildResult

pytestmark = pytest.mark.timeout(900)  # a cold cache compiles quickjs.c (~20 s idle, more loaded)


def _has_cc() -> bool:
    try:
        build.compiler()
    except BuildError:
        return False
    return True


HAS_CC = _has_cc()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="no C compiler (cc) on this machine")

#: A program of two units on the vendored QuickJS: every *.c of the folder is compiled and linked.
MAIN_C = r"""
#include <stdio.h>
#include <string.h>
#include "quickjs.h"
int answer(void);
int main(void) {
    JSRuntime *rt = JS_NewRuntime();
    JSContext *ctx = JS_NewContext(rt);
    const char *code = "[1, 2, 3].map(x => x * 2).join('+')";
    JSValue v = JS_Eval(ctx, code, strlen(code), "<probe>", 0);
    const char *s = JS_ToCString(ctx, v);
    printf("%s=%d\n", s, answer());
    JS_FreeCString(ctx, s);
    JS_FreeValue(ctx, v);
    JS_FreeContext(ctx);
    JS_FreeRuntime(rt);
    return 0;
}
"""
OTHER_C = "int answer(void) { return 12; }\n"


def source_folder(tmp_path: Path, **units: str) -> Path:
    """A folder laid out like runtime/native/: the vendored QuickJS and `units` (name -> C)."""
    folder = tmp_path / "native"
    folder.mkdir()
    (folder / "quickjs").symlink_to(NATIVE_DIR / "quickjs")
    for name, text in units.items():
        (folder / f"{name}.c").write_text(text)
    return folder


def leftovers(*folders: Path | None) -> list[Path]:
    return [p for f in folders if f is not None for p in f.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture(scope="session")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An object cache for test programs: a copy of the package's (QuickJS's objects)."""
    cache = tmp_path_factory.mktemp("objects")
    shared = build.default_objects()
    for obj in sorted(shared.glob("*.o")) if shared is not None else ():
        shutil.copyfile(obj, cache / obj.name)
    return cache


@pytest.fixture(scope="session")
def probe(tmp_path_factory: pytest.TempPathFactory, objects: Path) -> tuple[Path, BuildResult]:
    """The two-unit program, built once per test process."""
    if not HAS_CC:
        pytest.skip("no C compiler (cc) on this machine")
    tmp = tmp_path_factory.mktemp("probe")
    folder = source_folder(tmp, main=MAIN_C, other=OTHER_C)
    return folder, build.build(tmp / "out" / "probe", native_dir=folder, objects=objects)


@needs_cc
def test_every_unit_of_the_folder_is_compiled_and_linked_into_an_executable(
    probe: tuple[Path, BuildResult],
) -> None:
    _, result = probe
    assert os.access(result.output, os.X_OK)
    assert sorted(result.compiled + result.reused) == sorted(
        ["main.c", "other.c", *(f"{unit}.c" for unit in build.QUICKJS_UNITS)]
    )
    run = subprocess.run([result.output], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (0, "2+4+6=12\n")
    assert leftovers(result.output.parent) == []


@needs_cc
def test_a_second_build_reuses_every_object_and_replaces_the_binary(
    probe: tuple[Path, BuildResult], objects: Path, tmp_path: Path
) -> None:
    folder, first = probe
    target = tmp_path / "probe"
    target.write_text("an older binary")
    again = build.build(target, native_dir=folder, objects=objects)
    assert again.compiled == () and len(again.reused) == len(first.compiled + first.reused)
    assert target.read_bytes() == first.output.read_bytes()
    assert os.access(target, os.X_OK)


@needs_cc
def test_a_unit_that_does_not_compile_fails_naming_it_and_leaves_nothing(
    probe: tuple[Path, BuildResult], objects: Path, tmp_path: Path
) -> None:
    folder = source_folder(tmp_path, main=MAIN_C, other="int answer(void) { return x; }\n")
    target = tmp_path / "out" / "probe"
    target.parent.mkdir()
    with pytest.raises(BuildError) as failed:
        build.build(target, native_dir=folder, objects=objects)
    assert str(failed.value).startswith("other.c: ") and "\n" not in str(failed.value)
    assert "error" in str(failed.value) and "error" in failed.value.details
    assert list(target.parent.iterdir()) == []
    assert leftovers(objects) == []


def test_without_a_compiler_the_build_fails_in_one_line_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    target = tmp_path / "codemode-worker"
    with pytest.raises(BuildError) as failed:
        build.build(target)
    assert str(failed.value) == (
        "no C compiler: CC=/nonexistent/cc not found (install gcc or clang, or set CC to one)"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_command_without_a_compiler_exits_1_with_the_reason_and_keeps_the_binary() -> None:
    before = NATIVE_DIR.joinpath(build.BINARY_NAME)
    state = before.stat().st_mtime_ns if before.exists() else None
    proc = subprocess.run(
        [sys.executable, "-m", "codemode_gen.runtime.native.build"],
        env={**os.environ, "CC": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "codemode-worker: not built: no C compiler: CC=/nonexistent not found "
        "(install gcc or clang, or set CC to one)\n"
    )
    assert (before.stat().st_mtime_ns if before.exists() else None) == state


@needs_cc
def test_the_worker_builds_from_the_package_sources(tmp_path: Path) -> None:
    """The real thing: runtime/native/*.c and QuickJS, into a folder of the test's."""
    result = build.build(tmp_path / build.BINARY_NAME)
    assert os.access(result.output, os.X_OK)
    assert {"quickjs.c", "worker.c"} <= set(result.compiled + result.reused)
    assert [p.name for p in tmp_path.iterdir()] == [build.BINARY_NAME]
