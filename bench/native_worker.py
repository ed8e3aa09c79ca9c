"""Benchmark: what a sandbox worker without Python would pay, measured beside today's. Not a test.

    .venv/bin/python bench/native_worker.py [--repeat N] [--rounds N] [--cache DIR]

bench/runtime.py's targets (4) back to back and (6) footprint are not met, and the reason given
(bench/speed-footprint.md) is the worker's design: a Python process driving jsbox, which has no
bytecode cache or snapshot, to build a locked-down realm per run (spec §1.4). This bench measures
the alternative instead of estimating it: bench/native_realm.c builds the very same realm
(runtime/js/prelude.js phases A and A2, the @codemode modules) on QuickJS-ng's C API, with no
Python in the process. It downloads QuickJS-ng's sources from PyPI (the `quickjs-ng` sdist, which
vendors them) once into --cache, builds them with the system C compiler, and prints, taken in
turn in one run:

(a) Realm preparation, p50 / p90 and CPU: jsbox in process (`Realm.create`, as a worker builds
    each realm) vs the C build compiling the prelude and modules from text, vs reading them from
    bytecode (JS_ReadObject of what the first compile wrote, which jsbox cannot do), vs bytecode
    plus the lockdown's object walk in C (prelude.js lockGraph's walk, the largest step left).
(b) Each build's floor: a fresh runtime evaluating an empty module (jsbox's is bench/runtime.py
    (4)'s floor), and realm preparation as a multiple of it.
(c) Where phase A's time goes in the C build (bytecode), between marks patched into a copy of
    the prelude.
(d) RSS of an idle worker holding its next realm: the Python worker as the pool starts it (after
    its `ready`) vs the C build's process holding one realm.

Needs a C compiler (cc) and, the first time, PyPI; without either it exits 1, saying which.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # bench/ as the namespace package `bench`

from bench.runtime import (  # noqa: E402
    SETUP_TIMEOUT_S,
    RealmSamples,
    median,
    p90,
    print_table,
    realm_samples,
    rss_mb,
)

#: The QuickJS-ng release whose sources the C build uses (the `quickjs-ng` sdist vendors them in
#: upstream-quickjs/). jsbox 0.1.3 embeds QuickJS-ng through rquickjs; the versions may differ.
QUICKJS_NG_SDIST = "quickjs-ng==0.17.0.2"
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:")
QUICKJS_SOURCES = ("quickjs", "libregexp", "libunicode", "dtoa")
CFLAGS = ("-O2", "-D_GNU_SOURCE")
NATIVE_C = Path(__file__).resolve().parent / "native_realm.c"

#: Where the marks go in the copy of prelude.js for (c), and the hook that hands lockGraph's walk
#: to C for the "cwalk" variant: (anchor, replacement). A prelude that no longer has an anchor
#: skips that part, saying so.
MARKS = (
    (
        "  const g = globalThis;\n",
        "  const g = globalThis;\n"
        "  const benchMark = g.__bench_mark; delete g.__bench_mark; delete g.__bench_walk;\n"
        '  benchMark("start");\n',
    ),
    ("  // ---- phase A ends here", '  benchMark("definitions");\n  // ---- phase A ends here'),
    ("  tameCodeGeneration();\n", '  tameCodeGeneration(); benchMark("tameCodeGeneration");\n'),
    ("  removeGlobals();\n", '  removeGlobals(); benchMark("removeGlobals");\n'),
    (
        "    // Override-mistake accessors on every prototype reached",
        '    benchMark("lockGraph: walk");\n    // Override-mistake accessors on every prototype reached',
    ),
    (
        "    // Freeze (the accessor functions made just now",
        '    benchMark("lockGraph: override accessors");\n    // Freeze (the accessor functions made just now',
    ),
    ("  freezeIntrinsics();\n", '  freezeIntrinsics(); benchMark("lockGraph: freeze");\n'),
    ("  sealGlobals();\n  return", '  sealGlobals(); benchMark("sealGlobals");\n  return'),
)
CWALK = (
    (
        "  const g = globalThis;\n",
        "  const g = globalThis;\n"
        "  const benchWalk = g.__bench_walk; delete g.__bench_walk; delete g.__bench_mark;\n",
    ),
    (
        "  function lockGraph(roots, moreProtos) {\n",
        "  function lockGraph(roots, moreProtos) {\n"
        "    return lockFound(benchWalk(roots, moreProtos, [...locked]), moreProtos);\n"
        "  }\n"
        "  function lockGraphInJs(roots, moreProtos) {\n",
    ),
    (
        "    // Override-mistake accessors on every prototype reached",
        "    return lockFound(found, protos);\n"
        "  }\n"
        "  function lockFound(found, protos) {\n"
        "    for (let i = 0; i < found.length; i++) locked.add(found[i]);\n"
        "    // Override-mistake accessors on every prototype reached",
    ),
)


def patched(text: str, edits: tuple[tuple[str, str], ...]) -> str | None:
    for anchor, replacement in edits:
        if text.count(anchor) != 1:
            return None
        text = text.replace(anchor, replacement)
    return text


def build(cache: Path) -> Path:
    """The C build of native_realm.c against QuickJS-ng, made once per cache and source."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("native_worker: no C compiler (cc): install gcc to run this bench")
    src = cache / "upstream-quickjs"
    if not (src / "quickjs.c").exists():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"downloading {QUICKJS_NG_SDIST} sources into {cache} ...", file=sys.stderr)
        with tempfile.TemporaryDirectory() as tmp:
            got = subprocess.run(
                [*PIP_DOWNLOAD, "-d", tmp, QUICKJS_NG_SDIST],
                capture_output=True,
                text=True,
            )
            sdists = list(Path(tmp).glob("*.tar.gz"))
            if got.returncode != 0 or not sdists:
                raise SystemExit(
                    f"native_worker: could not download {QUICKJS_NG_SDIST} from PyPI:\n{got.stderr}"
                )
            with tarfile.open(sdists[0]) as archive:
                members = [m for m in archive.getmembers() if "/upstream-quickjs/" in m.name]
                for member in members:
                    member.name = (
                        "upstream-quickjs/" + member.name.split("/upstream-quickjs/", 1)[1]
                    )
                archive.extractall(cache, members=members, filter="data")
    objects = []
    for name in QUICKJS_SOURCES:
        obj = cache / f"{name}.o"
        if not obj.exists():
            print(f"compiling {name}.c ...", file=sys.stderr)
            subprocess.run(
                [cc, *CFLAGS, f"-I{src}", "-c", str(src / f"{name}.c"), "-o", str(obj)], check=True
            )
        objects.append(str(obj))
    exe = cache / "native_realm"
    if not exe.exists() or exe.stat().st_mtime < NATIVE_C.stat().st_mtime:
        subprocess.run(
            [cc, *CFLAGS, f"-I{src}", str(NATIVE_C), *objects, "-lm", "-lpthread", "-o", str(exe)],
            check=True,
        )
    return exe


def write_js(root: Path) -> list[str]:
    """The worker's JS (from the installed package) and the patched copies into `root`; what
    was skipped."""
    from codemode_gen.runtime.sandbox.protocol import js_source

    skipped = []
    for name in ("prelude.js", "errors.js", "host.js", "url.js"):
        (root / name).write_text(js_source(name))
    prelude = js_source("prelude.js")
    for name, edits in (("prelude_marks.js", MARKS), ("prelude_cwalk.js", CWALK)):
        text = patched(prelude, edits)
        if text is None:
            skipped.append(f"{name}: an anchor is no longer in prelude.js")
        else:
            (root / name).write_text(text)
    return skipped


async def idle_rss(argv: list[str]) -> float:
    """VmRSS (MB) of a process once it has said `ready` (and holds its next realm)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), SETUP_TIMEOUT_S)
        if b"ready" not in line:
            raise SystemExit(f"native_worker: {argv[0]} did not start: {line!r}")
        await asyncio.sleep(0.3)
        return rss_mb(proc.pid)
    finally:
        proc.kill()
        await proc.wait()


def summary(samples: list[float], floor: float) -> str:
    return (
        f"{median(samples):.2f} / {p90(samples):.2f} ms = {median(samples) / floor:.1f}x its floor"
    )


async def main_async(args: argparse.Namespace) -> int:
    from codemode_gen.children import python_module_command

    exe = build(Path(args.cache))
    with tempfile.TemporaryDirectory(prefix="codemode-native-") as tmp:
        js = Path(tmp)
        skipped = write_js(js)
        print("measuring ...", file=sys.stderr)
        native: dict[str, list[float]] = {}
        jsbox = RealmSamples([], [], [], [])
        await realm_samples(0)  # warm the caches
        for _ in range(args.rounds):
            got = json.loads(
                subprocess.run(
                    [str(exe), str(js), "times", str(args.repeat)], capture_output=True, check=True
                ).stdout
            )
            for key, values in got.items():
                if isinstance(values, list):
                    native.setdefault(key, []).extend(values)
            for mine, more in zip(jsbox, await realm_samples(args.repeat), strict=True):
                mine.extend(more)
        marks = {}
        if (js / "prelude_marks.js").exists():
            marks = json.loads(
                subprocess.run(
                    [str(exe), str(js), "marks", str(args.repeat * args.rounds)],
                    capture_output=True,
                    check=True,
                ).stdout
            )
        python_rss = await idle_rss(
            python_module_command("codemode_gen.runtime.sandbox.worker", isolation="isolated")
        )
        native_rss = {
            variant: await idle_rss([str(exe), str(js), "rss", variant])
            for variant in ("bytecode", "cwalk")
            if f"{variant}.total" in native
        }
    jsbox_floor, native_floor = median(jsbox.floor), median(native["floor"])
    made_and_closed = [
        made + closed for made, closed in zip(jsbox.prepare, jsbox.close, strict=True)
    ]
    rows = [
        (
            "(a) jsbox: Realm.create + close in process, p50 / p90",
            summary(made_and_closed, jsbox_floor),
            "-",
            "info",
        ),
        ("(a) jsbox: Realm.create's CPU, p50", f"{median(jsbox.cpu):.2f} ms", "-", "info"),
    ]
    for variant, label in (
        ("source", "prelude and modules compiled from text"),
        ("bytecode", "read from bytecode"),
        ("cwalk", "bytecode + lockGraph's walk in C"),
    ):
        if f"{variant}.total" in native:
            rows.append(
                (
                    f"(a) C: {label}, p50 / p90",
                    summary(native[f"{variant}.total"], native_floor),
                    "-",
                    "info",
                )
            )
            steps = ", ".join(
                f"{step} {median(native[f'{variant}.{step}']):.2f}"
                for step in ("new", "phase_a", "phase_a2", "free", "cpu")
            )
            rows.append((f"(a) C: {label}, steps p50 (ms)", steps, "-", "info"))
    rows += [
        (
            "(b) floors: a fresh runtime evaluating an empty module, jsbox vs C, p50",
            f"{jsbox_floor:.3f} vs {native_floor:.3f} ms",
            "-",
            "info",
        ),
        (
            "(b) best C realm vs jsbox's floor (bench/runtime.py (4)'s)",
            f"{min(median(native[f'{v}.total']) for v in ('bytecode', 'cwalk') if f'{v}.total' in native) / jsbox_floor:.2f}x",
            "-",
            "info",
        ),
    ]
    if marks:
        rows.append(
            (
                "(c) C phase A (bytecode), mean ms between marks",
                ", ".join(f"{name} {ms:.3f}" for name, ms in marks.items()),
                "-",
                "info",
            )
        )
    rows.append(
        (
            "(d) RSS of an idle worker holding its next realm: Python (pool's) vs C",
            f"{python_rss:.1f} vs "
            + ", ".join(f"{mb:.1f} ({variant})" for variant, mb in native_rss.items())
            + " MB",
            "-",
            "info",
        )
    )
    rows += [(f"skipped {reason}", "", "-", "info") for reason in skipped]
    print_table(rows)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=50, help="realms per variant per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, C and jsbox in turn")
    parser.add_argument(
        "--cache",
        default=str(
            Path.home() / ".cache" / "codemode-gen-bench" / QUICKJS_NG_SDIST.replace("==", "-")
        ),
        help="where QuickJS-ng's sources and the C build are kept",
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
