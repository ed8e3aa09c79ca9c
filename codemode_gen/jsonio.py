"""Deterministic JSON and atomic file writes, shared by every writer in the project.

Committed artefacts (fixtures/, out/) must be byte-identical for identical inputs, and a
failed or interrupted write must never leave a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from codemode_gen.errors import UserError


def dumps_stable(value: Any) -> str:
    """Sorted keys, 2-space indent, UTF-8 kept, trailing newline."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def dumps_line(value: Any) -> str:
    """One compact, sorted JSON line (for .jsonl files), with trailing newline."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory and rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path, *, what: str = "JSON file") -> Any:
    """Parse a JSON file, turning every failure into a UserError naming file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON in {what}: {exc.msg}",
            hint="fix the syntax at that position (trailing commas and comments are not JSON)",
        ) from None
