"""Build the native sandbox worker (`codemode-worker`) from the sources beside this file.

    python -m codemode_gen.runtime.native.build        # what `pip install` does; prints the result

The worker is one C program: every runtime/native/*.c (the shell, INTERFACE.md) and the vendored
QuickJS-ng units (quickjs/README.md), compiled with the system C compiler (`CC`, else `cc`) and
linked into `codemode-worker` beside this file, written atomically (a temporary file renamed
over it): a worker starting meanwhile runs the old binary or the new one, never half of one.
Without a working compiler the host uses the Python worker (runtime/sandbox/worker_process.py);
the error says why in one line.

In a source tree (a checkout), object files are kept in `.objects/` beside the sources under a
name made from a digest of what made them (compiler, flags, the unit and every header), so a
rebuild after editing worker.c compiles only worker.c, and the tests' builds reuse the
install's objects (`default_objects`).

setup.py imports this file by path, before the package exists: standard library only, and no
import of the package.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

#: The folder of the C sources (this file's): runtime/native/ in a checkout, the installed
#: package's codemode_gen/runtime/native/ otherwise.
NATIVE_DIR = Path(__file__).resolve().parent
#: The binary's name: the host recognises its workers by it (tests find them by command line).
BINARY_NAME = "codemode-worker"
DEFAULT_OUTPUT = NATIVE_DIR / BINARY_NAME
#: The vendored QuickJS-ng units the worker links (the folder holds only what it needs).
QUICKJS_UNITS = ("quickjs", "libregexp", "libunicode", "dtoa")
CFLAGS = ("-O2", "-D_GNU_SOURCE")
LIBS = ("-lm", "-lpthread")
#: The command that builds the worker, as messages tell a person to run it.
BUILD_COMMAND = "python -m codemode_gen.runtime.native.build"
#: Bounds one compiler run (quickjs.c: ~20 s at -O2 on an idle core); a hung compiler fails.
COMPILE_TIMEOUT_S = 900


class BuildError(Exception):
    """The worker could not be built: `str()` is one line saying why; `details` the compiler's
    own output, if any."""

    def __init__(self, reason: str, details: str = "") -> None:
        super().__init__(reason)
        self.details = details


@dataclass(frozen=True)
class BuildResult:
    output: Path
    compiled: tuple[str, ...]  # units compiled now
    reused: tuple[str, ...]  # units whose cached object was used


def sources(native_dir: Path = NATIVE_DIR) -> list[Path]:
    """The translation units, largest first (quickjs.c dominates: started first in parallel)."""
    units = sorted(native_dir.glob("*.c")) + [
        native_dir / "quickjs" / f"{name}.c" for name in QUICKJS_UNITS
    ]
    return sorted(units, key=lambda path: -path.stat().st_size)


def compiler() -> list[str]:
    """The C compiler's command: `CC` (may hold arguments, e.g. `ccache gcc`), else `cc`.
    Raises `BuildError` when it is not there."""
    given = os.environ.get("CC", "").strip()
    argv = shlex.split(given) if given else ["cc"]
    found = shutil.which(argv[0])
    if found is None:
        where = f"CC={given}" if given else "cc"
        raise BuildError(
            f"no C compiler: {where} not found (install gcc or clang, or set CC to one)"
        )
    return [found, *argv[1:]]


def _digest(cc: Sequence[str], unit: Path, headers: Sequence[Path]) -> str:
    """What an object file depends on: the compiler (path, size, mtime), the flags, the unit
    and every header it may include."""
    h = hashlib.sha256()
    stat = os.stat(cc[0])
    h.update(repr((list(cc), stat.st_size, stat.st_mtime_ns, CFLAGS)).encode())
    for path in (unit, *headers):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def default_objects(native_dir: Path = NATIVE_DIR) -> Path | None:
    """Where builds cache object files: `.objects/` beside the sources in a source tree (a
    checkout or an unpacked sdist: runtime/native/ under pyproject.toml) where it can be written;
    None in an installed package (nothing left behind in site-packages) or a read-only tree."""
    if not (native_dir.parent.parent / "pyproject.toml").is_file():
        return None
    cache = native_dir / ".objects"
    try:
        cache.mkdir(exist_ok=True)
    except OSError:
        return None
    return cache if os.access(cache, os.W_OK) else None


def _run(argv: Sequence[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S
        )
    except OSError as exc:
        raise BuildError(f"cannot run the C compiler {argv[0]}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"the C compiler took over {COMPILE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        output = (proc.stderr or proc.stdout).strip()
        lines = output.splitlines()
        first = next(
            (line for line in lines if "error" in line or "undefined reference" in line),
            lines[0] if lines else f"exit status {proc.returncode}",
        )
        raise BuildError(f"{what}: {first.strip()}", output)


def build(
    output: Path = DEFAULT_OUTPUT,
    *,
    native_dir: Path = NATIVE_DIR,
    objects: Path | None = None,
    jobs: int | None = None,
) -> BuildResult:
    """Compile every unit (reusing cached objects) and link `output` atomically.

    `objects`: where object files are cached (default: `default_objects()`, else a throw-away
    folder); `jobs`: compilers run at once (default: the CPUs). Raises `BuildError`;
    `output` is then untouched and no temporary file is left."""
    cc = compiler()
    try:
        units = sources(native_dir)
    except FileNotFoundError as exc:
        raise BuildError(f"a source file is missing: {exc.filename}") from None
    quickjs = native_dir / "quickjs"
    quickjs_headers = sorted(quickjs.glob("*.h"))
    # The worker's own units may include its headers and QuickJS's; QuickJS's only its own.
    own_headers = sorted(native_dir.glob("*.h")) + quickjs_headers
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codemode-worker-build-") as scratch:
        cache = objects if objects is not None else default_objects(native_dir) or Path(scratch)
        cache.mkdir(parents=True, exist_ok=True)
        planned = []
        for unit in units:
            deps = own_headers if unit.parent == native_dir else quickjs_headers
            planned.append((unit, cache / f"{unit.stem}-{_digest(cc, unit, deps)}.o"))
        todo = [(unit, obj) for unit, obj in planned if not obj.is_file()]

        def compile_one(item: tuple[Path, Path]) -> None:
            unit, obj = item
            # Each object is written under a private name, then renamed: builds running at
            # once (parallel tests) never see, or leave, half an object.
            fd, tmp = tempfile.mkstemp(prefix=f".{obj.stem}.", suffix=".o.tmp", dir=cache)
            os.close(fd)
            try:
                # Compiled from its own folder by relative names: __FILE__ (assert messages) is
                # then the same wherever the sources are, and so are the objects.
                include = "-I" + os.path.relpath(quickjs, unit.parent)
                _run([*cc, *CFLAGS, include, "-c", "-o", tmp, unit.name], unit.parent, unit.name)
                os.replace(tmp, obj)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)

        workers = max(1, min(len(todo), jobs or os.cpu_count() or 1))
        if todo:
            with ThreadPoolExecutor(workers) as pool:
                futures = [pool.submit(compile_one, item) for item in todo]
                try:
                    for future in futures:
                        future.result()  # the first failure, in unit order
                except BaseException:
                    pool.shutdown(cancel_futures=True)  # what has not started, does not
                    raise
        if objects is None and cache != Path(scratch):
            _prune(cache, {obj for _, obj in planned}, units)
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
        os.close(fd)
        try:
            objs = [str(obj) for _, obj in planned]
            _run([*cc, *CFLAGS, "-o", tmp, *objs, *LIBS], cache, f"linking {output.name}")
            os.chmod(tmp, 0o755)
            os.replace(tmp, output)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    compiled = tuple(unit.name for unit, _ in todo)
    reused = tuple(unit.name for unit, obj in planned if (unit, obj) not in todo)
    return BuildResult(output, compiled, reused)


def _prune(cache: Path, keep: set[Path], units: Sequence[Path]) -> None:
    """Drop the objects of older versions of these units: one object per unit stays."""
    stems = {unit.stem for unit in units}
    for path in cache.glob("*.o"):
        if path not in keep and path.stem.rpartition("-")[0] in stems:
            with contextlib.suppress(OSError):
                path.unlink()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        print(f"usage: {BUILD_COMMAND}  (builds {DEFAULT_OUTPUT})", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        result = build()
    except BuildError as exc:
        if exc.details:
            print(exc.details, file=sys.stderr)
        print(f"codemode-worker: not built: {exc}", file=sys.stderr)
        return 1
    done = f"compiled {', '.join(result.compiled)}" if result.compiled else "nothing to compile"
    if result.reused:
        done += f"; reused the objects of {', '.join(result.reused)}"
    print(f"built {result.output} in {time.monotonic() - start:.1f} s ({done})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
