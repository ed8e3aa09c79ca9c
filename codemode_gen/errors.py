"""Errors that reach the user as one clear message instead of a traceback.

Every user mistake (bad config, missing file, stale out/) is raised as a `UserError`; the
CLI prints `error: <message>` (+ `hint: <hint>`) and exits with `exit_code`. Anything else
is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix: names the file/field and says what to do."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class CheckFailed(UserError):
    """A check that ran and found a problem (`generate --check`, a failed record): exit 1."""

    exit_code = 1


class CheckIncomplete(UserError):
    """A check that found no problem but could not look at everything (`record --check` with a
    server unreachable or a sample call failing): exit 3, so CI neither passes silently nor
    reports drift that was not seen."""

    exit_code = 3
