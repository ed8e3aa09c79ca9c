"""The host's type checking of scripts: one TypeScript server, reused by every run.

Starting tsc costs seconds, so the host keeps one checker (runtime/host/typecheck.py) for its
lifetime, warms it at start-up when checking is the default, and lets a run's check go on while
its servers connect; a check still running when the host closes is cancelled, not leaked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.runtime.codemode.connections import cancel_all, retrieve
from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host import telemetry
from codemode_gen.runtime.limits import Limits, LimitsError

if TYPE_CHECKING:
    from codemode_gen.runtime.host.typecheck import TypeChecker

# The checker and its diagnostics (tsc's finder and installer with them) are imported when a
# run is checked: a host whose runs are not never holds them.

log = logging.getLogger(__name__)


class TypeCheckService:
    """When runs are type-checked, and the one checker that does it."""

    def __init__(
        self, out_dir: Path, *, default: bool, tsc: str | Path | None, project_dir: Path
    ) -> None:
        """`default`: the default of limits.typecheck (serve --typecheck); tsc is looked for
        from `project_dir` (and out/'s folder) up."""
        self.out_dir = out_dir
        self.default = default
        self.tsc = tsc
        self.project_dir = project_dir
        self._checker: TypeChecker | None = None
        self._tasks: set[asyncio.Task[Any]] = set()  # checks in flight (and the warm-up)

    def checker(self) -> TypeChecker:
        """The one type-check server of this host (started on first use, reused by every run)."""
        if self._checker is None:
            from codemode_gen.runtime.host.typecheck import TypeChecker

            self._checker = TypeChecker(
                self.out_dir, tsc=self.tsc, roots=(self.project_dir, self.out_dir.parent)
            )
        return self._checker

    def warm(self) -> None:
        """Start the compiler now if runs are checked by default: the first run should not wait."""
        if self.default:
            self._track(asyncio.ensure_future(self.checker().warm()))

    def wanted(self, limits: Limits) -> bool:
        return self.default if limits.typecheck is None else limits.typecheck

    async def prepare(
        self, host_limits: Mapping[str, Any], limits: Mapping[str, Any] | None = None
    ) -> None:
        """If a run with `limits` (over the host's `host_limits`) is type-checked and no
        TypeScript is found, download the pinned one now (runtime/host/tsinstall.py, a line on
        stderr). A failure is not raised: the run reports it (TYPECHECK_UNAVAILABLE)."""
        try:
            merged = Limits.from_json({**dict(host_limits), **dict(limits or {})})
        except LimitsError:
            return  # the run reports it
        if not self.wanted(merged):
            return
        with contextlib.suppress(Exception):
            await self.checker().install()

    def start(
        self, code: str, limits: Limits, deadline: float, modules: set[str]
    ) -> asyncio.Task[list[Diagnostic]] | None:
        """This run's type check (None when off): warnings, or an info line when it was skipped.
        `modules`: the specifiers a script may import that codemode.d.ts does not declare."""
        if not self.wanted(limits):
            return None
        from codemode_gen.runtime.host.tsdiagnostics import run_diagnostics

        return self._track(
            asyncio.ensure_future(
                telemetry.traced(
                    run_diagnostics(self.checker(), code, deadline=deadline, modules=modules),
                    telemetry.SPAN_TYPECHECK,
                )
            )
        )

    def _track(self, task: asyncio.Task[Any]) -> asyncio.Task[Any]:
        """Keep a check until it ends (a run that failed before awaiting it leaves it to aclose)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(retrieve)
        return task

    async def aclose(self) -> None:
        await cancel_all(list(self._tasks))
        checker, self._checker = self._checker, None
        if checker is not None:
            await checker.aclose()


def typecheck_notes(found: list[Diagnostic], limits: Mapping[str, Any] | None) -> list[Diagnostic]:
    """A run's type-check diagnostics as its response carries them: a check that did not
    happen (TYPECHECK_SKIPPED, TYPECHECK_UNAVAILABLE) is said to a run that asked for it in
    its own limits, whose reader would otherwise take no warnings for a clean check; when
    the check is the host's default (`serve --typecheck`, codemode.toml) there is nothing
    the run can do about it, and the host's log says it instead."""
    asked = isinstance(limits, Mapping) and limits.get("typecheck") is True
    if asked:
        return found
    from codemode_gen.runtime.host.tsdiagnostics import NOT_CHECKED

    for note in found:
        if note.get("code") in NOT_CHECKED:
            log.info("type check: %s", note.get("message"))
    return [note for note in found if note.get("code") not in NOT_CHECKED]
