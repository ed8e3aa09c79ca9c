"""`codemode-gen doctor`: what this installation runs scripts with, and how to fix what is missing.

Prints codemode-gen's version and Python, then which sandbox worker new runs start (the native
one, `codemode-worker`, built when the package was installed; or the Python one) and why: the
binary is missing (with the exact command that builds it and whether a C compiler is there), or
`CODEMODE_SANDBOX_WORKER` chose. Exit 0, or 1 when `CODEMODE_SANDBOX_WORKER` asks for a worker
that cannot start (runs would fail).
"""

from __future__ import annotations

import os
import sys

import click

from codemode_gen import __version__


def report() -> tuple[list[str], bool]:
    """The lines `doctor` prints, and whether a run can start a worker."""
    from codemode_gen.runtime.native import build, launch
    from codemode_gen.runtime.sandbox.worker_process import (
        WORKER_ENV,
        WorkerUnavailable,
        worker_kind,
    )

    lines = [f"codemode-gen {__version__} (Python {sys.version.split()[0]}, {sys.prefix})"]
    binary = launch.native_worker_path()
    chosen = os.environ.get(WORKER_ENV, "").strip()
    why = f"{WORKER_ENV}={chosen}" if chosen else f"{WORKER_ENV} unset: auto"
    try:
        kind = worker_kind()
    except WorkerUnavailable as exc:
        lines.append(f"sandbox worker: none can start: {exc}")
        return lines, False
    if kind == "native":
        lines.append(f"sandbox worker: native, {binary} ({why})")
        return lines, True
    if binary is not None:
        lines.append(f"sandbox worker: python ({why}; the native one is built: {binary})")
        return lines, True
    lines.append(f"sandbox worker: python (the native one is not built: {launch.DEFAULT_OUTPUT})")
    lines.append(f"  build the native one: {launch.build_command()}")
    try:
        lines.append(f"  C compiler: {' '.join(build.compiler())}")
    except build.BuildError as exc:
        lines.append(f"  C compiler: {exc}")
    return lines, True


@click.command(name="doctor")
def doctor() -> int:
    """Say which sandbox worker runs scripts (native or Python), and how to build the native one."""
    lines, ok = report()
    click.echo("\n".join(lines))
    return 0 if ok else 1
