"""Deterministic JSON and atomic file writes, shared by every writer in the project.

Committed artefacts (fixtures/, out/) must be byte-identical for identical inputs, and a
failed or interrupted write must never leave a half-written file behind.
"""

from __future__ import annotations

import itertools
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


def canonical_json(value: Any) -> str:
    """The text two JSON values are compared by: sorted keys, compact, integral numbers written
    as integers (JSON and JavaScript do not tell 1 from 1.0; Python's json does), `true` never
    `1`. Shared by `record --check` (drift.py) and replay (runtime/replay.py)."""
    return json.dumps(_integral(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


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


# Bytes the depth scan keeps: quotes and brackets (the rest is deleted in C).
_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_SIGNED = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as signed bytes: +1 / -1
# Brackets per step of the depth scan; a step is skipped in C when it cannot reach the limit.
_SCAN_STEP = 128


def json_text_depth_exceeds(text: str | bytes | bytearray, limit: int) -> bool:
    """Whether JSON text nests more than `limit` arrays/objects (`[]` is 1), brackets inside
    strings not counted. Linear, without parsing and mostly in C (about 10 ms per MiB of dense
    JSON), so it is safe on text that would crash a recursive parser: the one depth scan of
    server frames (client/stdio.py) and of what crosses the sandbox boundary (runtime/response.py).

    Exact for valid JSON. For any text, False means `json.loads` nests at most `limit` deep:
    up to its first error the parser pairs quotes and escapes exactly as this scan does (and a
    stray closer, where the scan stops, is such an error).
    """
    raw: bytes | bytearray
    if isinstance(text, str):
        if text.count("[") + text.count("{") <= limit:  # cannot be deeper (the common case)
            return False
        raw = text.encode("utf-8", "surrogatepass")
    else:
        raw = text
        if raw.count(b"[") + raw.count(b"{") <= limit:
            return False
    if b"\\" in raw:  # drop escaped backslashes and quotes, then every quote delimits a string
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = raw.translate(None, _STRUCTURE)
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[0::2])  # even pieces lie outside strings
    steps = kept.translate(_SIGNED)
    view = memoryview(steps).cast("b")
    depth = 0
    for start in range(0, len(steps), _SCAN_STEP):
        end = min(start + _SCAN_STEP, len(steps))
        opens = steps.count(b"\x01", start, end)
        if depth + opens > limit and max(itertools.accumulate(view[start:end], initial=depth)) > limit:
            return True
        depth += 2 * opens - (end - start)
        if depth < 0:  # a stray closer: the parser stops there
            return False
    return False


def iter_jsonl(text: str, path: Path, *, what: str, hint: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a bad line is a UserError at path:line:col."""
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}:{exc.colno}: invalid JSON in {what}: {exc.msg}", hint=hint) from None



def pointer_token(key: str) -> str:
    """`key` as one JSON Pointer reference token (RFC 6901: `~` -> `~0`, `/` -> `~1`)."""
    if "~" in key or "/" in key:
        return key.replace("~", "~0").replace("/", "~1")
    return key


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
