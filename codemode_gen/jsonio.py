"""Deterministic JSON and atomic file writes, shared by every writer in the project.

Committed artefacts (fixtures/, out/) must be byte-identical for identical inputs, and a
failed or interrupted write must never leave a half-written file behind.

Written JSON is always UTF-8 text: a lone surrogate (JSON text may hold `"\\ud800"`, Python
decodes it as is) is written as its `\\uXXXX` escape. A JSON Lines file is split on "\\n" only
(`iter_jsonl`), and `dumps_line` escapes every other character `str.splitlines` splits on, so
a line stays one line for any reader. Files a pull request can change (fixtures/) are read
with `read_untrusted_file` and `parse_json_bytes`: regular files only, bounded, and every
failure a `UserError` naming the file (and line).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from codemode_gen.errors import UserError

# Lone surrogates: `json.dumps(ensure_ascii=False)` writes them raw, and they have no UTF-8
# encoding (the write fails). Escaped, they read back as the same string.
_SURROGATES = re.compile("[\ud800-\udfff]")
# What `dumps_line` escapes besides: every character `str.splitlines` splits on that JSON leaves
# raw (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR: the Unicode line/paragraph separators; the
# other ones are controls below U+0020, which JSON always escapes), so no line-based reader
# (an editor, `git diff`, a script's `splitlines`) sees one recorded call as two.
_LINE_UNSAFE = re.compile("[\x85\u2028\u2029\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps_stable(value: Any) -> str:
    """Sorted keys, 2-space indent, UTF-8 kept (lone surrogates escaped), trailing newline."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
    return _SURROGATES.sub(_escaped, text) + "\n"


def dumps_line(value: Any) -> str:
    """One compact, sorted JSON line (for .jsonl files), with trailing newline. UTF-8 is kept
    except for lone surrogates and line separators other than "\\n" (`_LINE_UNSAFE`), which
    are written as `\\uXXXX` escapes: a JSON string may hold them, a line may not."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return _LINE_UNSAFE.sub(_escaped, text) + "\n"


def canonical_json(value: Any) -> str:
    """The text two JSON values are compared by: sorted keys, compact, integral numbers written
    as integers (JSON and JavaScript do not tell 1 from 1.0; Python's json does), `true` never
    `1`. Shared by `record --check` (drift.py) and replay (runtime/frontends/replay.py)."""
    return json.dumps(_integral(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def without_lone_surrogates(value: Any) -> Any:
    """The JSON value `value` with each lone surrogate in its strings and keys replaced by
    U+FFFD; the very same object when it holds none. For a value that must be sent where only
    Unicode text goes (the MCP SDK's JSON writer and readers refuse lone surrogates). Through
    JSON text, so in C: a few ms per MB, where a walk in Python took a second for 4 MB."""
    text = json.dumps(value, ensure_ascii=False)  # lone surrogates stay raw characters
    if _SURROGATES.search(text) is None:
        return value
    return json.loads(_SURROGATES.sub("\ufffd", text))


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same directory and rename over the target."""
    import tempfile  # here: the sandbox worker imports this module and never writes files

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
    server frames (client/stdio.py) and of what crosses the sandbox boundary (runtime/screen.py).

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
        if (
            depth + opens > limit
            and max(itertools.accumulate(view[start:end], initial=depth)) > limit
        ):
            return True
        depth += 2 * opens - (end - start)
        if depth < 0:  # a stray closer: the parser stops there
            return False
    return False


def iter_jsonl(
    data: str | bytes,
    path: Path,
    *,
    what: str,
    hint: str,
    max_depth: int | None = None,
    max_line_bytes: int | None = None,
) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line; a bad line is a UserError at path:line.

    Lines end at "\\n" only (JSON Lines): never `str.splitlines`, which also splits inside a
    JSON string holding U+2028, U+0085 and the like, so a valid line read as two broken ones.
    Bytes (a file read as is) are decoded line by line through `parse_json_bytes`, with its
    bounds: `max_line_bytes` per line, `max_depth` nesting.
    """
    if isinstance(data, bytes):
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            if max_line_bytes is not None and len(raw) > max_line_bytes:
                raise UserError(
                    f"{path}:{lineno}: a line of {len(raw):,} bytes; a {what} may have at most"
                    f" {max_line_bytes:,}",
                    hint=hint,
                )
            yield (
                lineno,
                parse_json_bytes(raw, path, what=what, hint=hint, max_depth=max_depth, line=lineno),
            )
        return
    for lineno, line in enumerate(data.split("\n"), start=1):
        if not line.strip():
            continue
        if max_depth is not None and json_text_depth_exceeds(line, max_depth):
            raise UserError(
                f"{path}:{lineno}: {what} nested deeper than {max_depth} levels", hint=hint
            )
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(
                f"{path}:{lineno}:{exc.colno}: invalid JSON in {what}: {exc.msg}", hint=hint
            ) from None
        except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits, deep nesting
            raise UserError(
                f"{path}:{lineno}: invalid JSON in {what}: {_value_error(exc)}", hint=hint
            ) from None


# --------------------------------------------------------------------------- untrusted files

# Bytes `read_untrusted_file` asks the kernel for at a time (the cap is checked between reads).
_READ_CHUNK_BYTES = 1024 * 1024
# What a file that is not a regular one is, for the message.
_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")


def read_untrusted_file(path: Path, max_bytes: int, *, what: str, hint: str) -> bytes:
    """The bytes of a file anyone may have put there (fixtures/ comes from pull requests).

    Only a regular file that is not a symbolic link is read (a link could serve any file of
    this machine, `/dev/zero` or a FIFO would be read forever or block), and at most
    `max_bytes` of it: checked on `lstat`, opened with O_NOFOLLOW | O_NONBLOCK (a FIFO put there
    after the check does not block the open), checked again on the open file, and read in
    chunks that stop past the cap (a file growing meanwhile). Every refusal is a UserError
    naming the file, what it is and the cap; `hint` says how to repair it.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found", hint=hint) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what}: {exc.strerror}", hint=hint) from None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = f" to {os.readlink(path)!r}"
        except OSError:
            target = ""
        raise UserError(
            f"{path}: {what} is a symbolic link{target}; only regular files are read here"
            " (a link could make this read any file of the machine)",
            hint=f"replace the link with a copy of the file, or {hint}",
        )
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{path}: {what} is {_kind(info.st_mode)}, not a regular file", hint=hint)
    if info.st_size > max_bytes:
        raise UserError(
            f"{path}: {what} is {info.st_size:,} bytes; at most {max_bytes:,} are read", hint=hint
        )
    flags = os.O_RDONLY
    for name in ("O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "O_BINARY"):
        flags |= getattr(os, name, 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # e.g. ELOOP: replaced by a link since the lstat
        raise UserError(f"{path}: cannot read {what}: {exc.strerror}", hint=hint) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):  # swapped since the lstat
            raise UserError(
                f"{path}: {what} is {_kind(opened.st_mode)}, not a regular file", hint=hint
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                chunk = os.read(fd, min(_READ_CHUNK_BYTES, max_bytes + 1 - total))
            except OSError as exc:
                raise UserError(f"{path}: cannot read {what}: {exc.strerror}", hint=hint) from None
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise UserError(
                    f"{path}: {what} is over {max_bytes:,} bytes; at most {max_bytes:,} are read",
                    hint=hint,
                )
    finally:
        os.close(fd)


def _value_error(exc: ValueError | RecursionError) -> str:
    """What `json.loads` refused past its syntax, in words (not Python's advice)."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to parse"
    if "integer string conversion" in str(exc):
        return f"a number of more than {sys.get_int_max_str_digits():,} digits"
    return str(exc)


# Numbers that may overflow a float (json.loads would make them inf, which is not JSON) have a
# 3-digit exponent or 309+ integer digits: looked for in a skeleton of the text where digits
# are "0", e/E "e", signs "+" and all else " " (translate + substring search run in C).
_NUMBER_SKELETON = bytes.maketrans(
    bytes(range(256)),
    bytes(
        48 if chr(b).isdigit() and b < 128 else 101 if b in b"eE" else 43 if b in b"+-" else 32
        for b in range(256)
    ),
)
_MANY_DIGITS = b"0" * 309


def number_may_overflow(raw: bytes | bytearray) -> bool:
    """Whether JSON text may hold a number that overflows a float (False: it holds none).
    Linear and in C; shared by the stdio client's frames and the fixture readers."""
    skeleton = raw.translate(_NUMBER_SKELETON)
    return b"e000" in skeleton or b"e+000" in skeleton or _MANY_DIGITS in skeleton


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} overflows a float")
    return number


def _position(data: bytes, offset: int, line: int | None) -> str:
    """`line:column` (1-based, the column in bytes) of a byte offset in `data`."""
    start = data.rfind(b"\n", 0, offset) + 1
    row = data.count(b"\n", 0, offset) + (line or 1)
    return f"{row}:{offset - start + 1}"


def parse_json_bytes(
    data: bytes, path: Path, *, what: str, hint: str, max_depth: int | None, line: int | None = None
) -> Any:
    """The JSON value in `data` (a file, or its line `line`), for text anyone may have written.

    Strict UTF-8; nesting measured before parsing (`json_text_depth_exceeds`, linear) so a
    100,000-deep file is refused instead of crashing the parser; RFC 8259 numbers only (no
    NaN/Infinity, no float overflow). Every failure is a UserError at path:line:column.
    """
    at = f"{path}:{line}" if line is not None else str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}:{_position(data, exc.start, line)}: {what} is not UTF-8 text"
            f" (byte 0x{data[exc.start]:02x})",
            hint=hint,
        ) from None
    if max_depth is not None and json_text_depth_exceeds(data, max_depth):
        raise UserError(f"{at}: {what} nested deeper than {max_depth} levels", hint=hint)
    # a float is checked one by one (in Python) only where one could overflow
    parse_float = _finite_float if number_may_overflow(data) else float
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        row = exc.lineno + (line - 1 if line is not None else 0)
        raise UserError(
            f"{path}:{row}:{exc.colno}: invalid JSON in {what}: {exc.msg}", hint=hint
        ) from None
    except (ValueError, RecursionError) as exc:  # NaN, 1e999, an integer of 5,000 digits
        raise UserError(f"{at}: invalid JSON in {what}: {_value_error(exc)}", hint=hint) from None


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
