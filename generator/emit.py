"""Put generated files on disk all-or-nothing, and compare out/ with what generate would write.

out/ is committed and read by the runtime, so a generate that fails half-way must leave the
previous out/ exactly as it was: everything is staged in a sibling folder and swapped in with
renames by `codemode_gen.dirswap` (the same routine as fixtures/, with rollback and recovery of
an interrupted earlier run's leftovers). Files generate owns (out/servers/*, out/python/* and
the top-level files it writes) that are no longer produced are removed; anything else a user
keeps in out/ is carried over.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from codemode_gen import dirswap
from codemode_gen.errors import UserError
from codemode_gen.generator.build import TSCONFIG_FILE, Outputs
from codemode_gen.generator.manifest import (
    CODEMODE_DTS,
    MANIFEST_FILE,
    SERVERS_DIR,
    written_by_codemode_gen,
)

PYTHON_DIR = "python"
# Sub-folders whose whole content belongs to generate: stale files there are deleted.
OWNED_DIRS = (SERVERS_DIR, PYTHON_DIR)
# Top-level files generate writes; together with OWNED_DIRS, the set `--check` compares.
OWNED_FILES = (CODEMODE_DTS, MANIFEST_FILE, TSCONFIG_FILE)


def _owned_files_on_disk(out_dir: Path) -> set[str]:
    found: set[str] = set()
    for name in OWNED_FILES:
        if (out_dir / name).is_file():
            found.add(name)
    for sub in OWNED_DIRS:
        base = out_dir / sub
        if base.is_dir():
            for path in base.rglob("*"):
                if path.is_file() or path.is_symlink():
                    found.add(path.relative_to(out_dir).as_posix())
    return found


def _refuse_foreign_target(out_dir: Path) -> None:
    """Replacing a folder generate did not write (`--out .`, `--out src`) could clobber a user's
    tsconfig.json or move a whole project aside; refuse instead."""
    cwd = Path.cwd().absolute()
    if out_dir == cwd or out_dir in cwd.parents:
        raise UserError(
            f"{out_dir}: is the current folder or one of its parents; refusing to replace it",
            hint="pass a dedicated output folder, e.g. --out out",
        )
    if out_dir.is_dir() and any(out_dir.iterdir()) and not written_by_codemode_gen(out_dir):
        raise UserError(
            f"{out_dir}: exists, is not empty and was not written by codemode-gen"
            f" (no {MANIFEST_FILE} from it); refusing to replace it",
            hint="pass a new or empty --out folder, or delete this one if it is a broken earlier output",
        )


def _safe_relative(rel: str) -> Path:
    path = Path(rel)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"generated path escapes out/: {rel!r}")  # a bug in build, not user input
    return path


def check_outputs(out_dir: Path, outputs: Outputs) -> list[str]:
    """One line per difference between out/ and `outputs` (empty when out/ is up to date)."""
    problems: list[str] = []
    for rel, text in sorted(outputs.files.items()):
        path = out_dir / _safe_relative(rel)
        if not path.is_file():
            problems.append(f"missing: {rel}")
            continue
        try:
            current = path.read_bytes()
        except OSError as exc:
            problems.append(f"unreadable: {rel} ({exc.strerror})")
            continue
        if current != text.encode("utf-8"):
            problems.append(f"stale: {rel}")
    for rel in sorted(_owned_files_on_disk(out_dir) - set(outputs.files)):
        problems.append(f"extra: {rel}")
    return problems


def leftover_notes(out_dir: Path) -> list[str]:
    """One line per hidden folder an interrupted generate left next to out_dir."""
    out_dir = out_dir.absolute()
    return [
        f"{leftover.describe()}; the next `codemode-gen generate` removes it"
        + (" and restores out/ from it" if leftover.retired_tree and not out_dir.exists() else "")
        for leftover in dirswap.leftovers(out_dir.parent, out_dir.name)
    ]


def write_outputs(out_dir: Path, outputs: Outputs, *, notes: list[str] | None = None) -> list[str]:
    """Replace out/ with `outputs` atomically (as far as the filesystem allows); returns removed files.

    The new tree is built completely in a staging folder next to out/ (same filesystem, so the
    final renames cannot fail for lack of space half-way). Only then is the old out/ moved aside
    and the new one moved in; if that second rename fails, the old out/ is moved back. What an
    interrupted earlier generate left is recovered first; `notes` (if given) gets a line each.
    """
    out_dir = out_dir.absolute()
    if dirswap.leftovers(out_dir.parent, out_dir.name):
        recovered = dirswap.recover(out_dir)  # before reading out/: it may be the retired copy
        if notes is not None:
            notes.extend(recovered)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: exists and is not a folder", hint="pass another --out folder")
    _refuse_foreign_target(out_dir)
    with dirswap.replace_dir(out_dir) as swap:
        staging = swap.staging
        removed: list[str] = []
        if out_dir.is_dir():  # carry over what generate does not own (a README, scripts, ...)
            owned = _owned_files_on_disk(out_dir)
            for child in out_dir.iterdir():
                if child.name in OWNED_DIRS or child.name in OWNED_FILES:
                    continue
                target = staging / child.name
                if child.is_dir() and not child.is_symlink():
                    shutil.copytree(child, target, symlinks=True)
                else:
                    shutil.copy2(child, target, follow_symlinks=False)
            removed = sorted(owned - set(outputs.files))
        for rel, text in sorted(outputs.files.items()):
            path = staging / _safe_relative(rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
    if notes is not None:
        notes.extend(swap.notes)
    return removed
