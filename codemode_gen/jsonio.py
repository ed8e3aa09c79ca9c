"""Deterministic JSON and atomic file writes, shared by every writer in the project.

Committed artefacts (fixtures/, out/) must be byte-identical for identical inputs, and a
failed or interrupted write must never leave a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
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


def json_type(value: Any, *, integer: bool = True) -> str | None:
    """JSON Schema type name of a decoded JSON value; None for anything JSON cannot hold.

    `integer=True` names whole numbers "integer" (what validation messages and drift lines
    say); `integer=False` gives the six JSON kinds only (what TypeScript can tell apart).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if integer else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def iter_jsonl(text: str, path: Path, *, what: str, hint: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a bad line is a UserError at path:line:col."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}:{exc.colno}: invalid JSON in {what}: {exc.msg}", hint=hint) from None



def resolve_pointer(document: Any, pointer: str, default: Any = None) -> Any:
    """The value at a JSON Pointer (RFC 6901, "" = the whole document), or `default`."""
    node = document
    if pointer:
        if not pointer.startswith("/"):
            return default
        for token in pointer[1:].split("/"):
            key = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return default
    return node
