"""Replace a whole folder with rollback: the one swap routine behind fixtures/<server> and out/.

`record` replaces a server's recording and `generate` replaces out/ as a whole, so a failed or
interrupted write must leave the previous version in place, and must never leave it hidden
where readers do not look (a "lost" server). Protocol for a target T in its parent P (staging
and target on one filesystem, so every step is a rename):

1. Under an exclusive lock on P (`flock` on the folder itself: no lock file to leave behind),
   `recover` what an interrupted earlier swap of T left (see below).
2. The caller writes the new tree into the staging folder `P/.T.new-XXXXXXXX`.
3. T is moved to `P/.T.old-XXXXXXXX/T` (retired) and staging is moved to T. If that second
   rename fails, the retired T is moved back (rollback) and the error is raised; if even that
   fails, the error names where the previous version is and the next run restores it.
4. The retired copy is deleted.

A crash (SIGKILL, power loss) at any point leaves at most: a staging folder (steps 2-3), a
retired copy while T is missing (between the two renames of step 3), or a retired copy next
to the new T (before step 4). `recover(T)` restores the retired copy when T is missing and
deletes the rest, one note each; readers that must not write (`generate` reading fixtures/)
call `leftovers()` and report them instead. The `.T.new-`/`.T.old-` names are the ones earlier
versions used, so their leftovers are recovered too.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from codemode_gen.errors import UserError

__all__ = ["LOCK_TIMEOUT_S", "Leftover", "Swap", "leftovers", "locked", "recover", "replace_dir"]

# Bounds how long a writer waits for another process swapping a folder in the same parent
# (two `record` runs at once): a stuck or stopped process must not block the next one forever.
LOCK_TIMEOUT_S = 60.0
# Poll interval while waiting for that lock (the lock is non-blocking so the wait is bounded).
_LOCK_POLL_S = 0.05
# tempfile.mkdtemp's random part: 8 characters of [a-z0-9_]; never contains a dot, so
# `.T.new-XXXXXXXX` belongs to exactly one target name T.
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>new|old)-[a-z0-9_]{8}\Z")

# flock is per open file description: two threads of one process would each get their own
# and deadlock (or pass); they are serialised here first. Reentrant, with the parents a thread
# already holds (`_held`), so a read-merge-write under `locked(P)` can call `replace_dir(P/x)`.
_THREAD_LOCK = threading.RLock()
_held = threading.local()


@dataclass(frozen=True)
class Leftover:
    """A hidden folder an interrupted swap left in a parent folder."""

    path: Path
    name: str  # the target's name (a server id, "out")
    kind: Literal["new", "old"]  # unfinished staging, or a retired previous version

    @property
    def retired_tree(self) -> Path | None:
        """The previous version kept inside an `old` leftover, if it is still there."""
        tree = self.path / self.name
        return tree if self.kind == "old" and tree.is_dir() and not tree.is_symlink() else None

    def describe(self) -> str:
        if self.kind == "new":
            return f"{self.path}: an unfinished new version of {self.name} (left by an interrupted run)"
        if self.retired_tree is None:
            return f"{self.path}: an empty folder left by an interrupted run"
        return f"{self.path}: the previous version of {self.name} (left by an interrupted run)"


@dataclass
class Swap:
    """What `replace_dir` hands the caller: where to write, and notes to report."""

    target: Path
    staging: Path
    notes: list[str] = field(default_factory=list)


def leftovers(parent: Path, name: str | None = None) -> list[Leftover]:
    """Hidden swap leftovers in `parent` (of target `name` only, if given), sorted by path."""
    found: list[Leftover] = []
    try:
        children = sorted(parent.iterdir())
    except OSError:
        return []
    for child in children:
        m = _LEFTOVER.match(child.name)
        if m is None or (name is not None and m.group("name") != name):
            continue
        if child.is_dir() and not child.is_symlink():
            kind: Literal["new", "old"] = "new" if m.group("kind") == "new" else "old"
            found.append(Leftover(child, m.group("name"), kind))
    return found


@contextmanager
def locked(parent: Path) -> Iterator[None]:
    """Exclusive lock on `parent` (threads of this process and other processes), for a
    read-modify-write of a folder in it: read the current version, merge, `replace_dir`. A swap
    alone is atomic, but two writers that both read before either wrote lose one's changes (two
    `serve --record` flushes of one server). Reentrant within a thread."""
    parent.mkdir(parents=True, exist_ok=True)
    with _locked(parent):
        yield


@contextmanager
def _locked(parent: Path) -> Iterator[None]:
    """Exclusive lock on `parent` against other processes swapping folders in it."""
    key = os.path.abspath(parent)
    held: dict[str, int] = _held.__dict__.setdefault("parents", {})
    with _THREAD_LOCK:
        if held.get(key):  # this thread holds it already (`locked` around `replace_dir`)
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        held[key] = 1
        try:
            with _flocked(parent):
                yield
        finally:
            del held[key]


@contextmanager
def _flocked(parent: Path) -> Iterator[None]:
    """flock on the folder itself (no lock file to leave behind), waiting at most LOCK_TIMEOUT_S."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; swaps are still all-or-nothing, not serialised
        yield
        return
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UserError(
                        f"{parent}: another codemode-gen process has been writing here for"
                        f" {LOCK_TIMEOUT_S:g}s",
                        hint="wait for it to finish (or stop it) and run the command again",
                    ) from None
                time.sleep(_LOCK_POLL_S)
            except OSError:  # a filesystem without flock (some network mounts): go on
                break
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove(path: Path) -> bool:
    """Delete a folder tree; True when it is gone."""
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


def _recover_locked(target: Path) -> list[str]:
    notes: list[str] = []
    found = leftovers(target.parent, target.name)
    if not os.path.lexists(target):
        retired = [each for each in found if each.retired_tree is not None]
        if retired:
            # Several retired copies only come from older versions without recovery: the
            # most recently modified one is the last good version.
            newest = max(retired, key=lambda each: (each.path.stat().st_mtime_ns, each.path.name))
            tree = newest.retired_tree
            assert tree is not None
            try:
                os.replace(tree, target)
            except OSError as exc:
                raise UserError(
                    f"{target}: missing; its previous version is in {tree} (an interrupted run"
                    f" left it there), and moving it back failed: {_reason(exc)}",
                    hint=f"move {tree} back to {target} by hand",
                ) from None
            notes.append(f"restored {target} from {newest.path.name} (left by an interrupted run)")
    for each in found:
        if not os.path.lexists(each.path):
            continue
        what = "an unfinished new version" if each.kind == "new" else "a superseded old version"
        if _remove(each.path):
            notes.append(f"removed {each.path.name}: {what} left by an interrupted run")
        else:
            notes.append(f"could not remove {each.path} ({what}); delete it by hand")
    return notes


def recover(target: Path) -> list[str]:
    """Finish or undo an interrupted swap of `target`; one note per action taken.

    A missing target whose retired copy survived is restored from it (the interrupted run
    failed, so its previous version stays, as for any failed write); every other leftover is
    deleted. Raises UserError only when a retired copy cannot be moved back.
    """
    parent = target.parent
    if not parent.is_dir():
        return []
    with _locked(parent):
        return _recover_locked(target)


@contextmanager
def replace_dir(target: Path, *, mode: int = 0o755) -> Iterator[Swap]:
    """Write a new version of `target` into `swap.staging`; on a clean exit it replaces target.

    On an exception in the body the staging folder is deleted and `target` is untouched. The
    swap itself rolls back when its last rename fails. `swap.notes` collects what recovery and
    cleanup did (read them after the `with` block).
    """
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    with _locked(parent):
        notes = _recover_locked(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=parent))
        swap = Swap(target, staging, notes)
        try:
            yield swap
            os.chmod(staging, mode)
            _swap_in(staging, target, notes)
        except BaseException:
            _remove(staging)
            raise


def _swap_in(staging: Path, target: Path, notes: list[str]) -> None:
    if not os.path.lexists(target):
        os.replace(staging, target)
        return
    holder = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    retired = holder / target.name
    try:
        os.replace(target, retired)
    except BaseException:
        _remove(holder)
        raise
    try:
        os.replace(staging, target)
    except BaseException as exc:
        try:
            os.replace(retired, target)
        except OSError as back:
            raise UserError(
                f"{target}: the new version could not be moved in ({_reason(exc)}), nor the"
                f" previous one back ({_reason(back)}); it is kept in {retired}",
                hint="the next `codemode-gen record` or `generate` moves it back; or move it by hand",
            ) from exc
        _remove(holder)
        raise
    if not _remove(holder):
        notes.append(f"could not remove {holder} (the previous version); the next run removes it")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
