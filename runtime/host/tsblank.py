"""Blanking erased TypeScript: whitespace of the same UTF-8 length, line breaks kept.

Why its own module: this is what keeps every position of the agent's source (ts-blank-space's
technique, runtime/host/tsinput.py's docstring): QuickJS counts columns in UTF-8 bytes, so an
erased character becomes whitespace of its own UTF-8 length, and where erasing alone would
change the parse one character becomes `;`, `(` or `)`. Which ranges to erase is tserase.py's.
"""

from __future__ import annotations

LINE_BREAKS = frozenset("\n\r\u2028\u2029")

# ASCII text blanks byte by byte: everything but line breaks becomes a space.
_BLANK_ASCII = bytes(b if b in (10, 13) else 32 for b in range(256))


def blank(segment: bytes, mark: str) -> bytes:
    """Whitespace of the same UTF-8 length, line breaks kept; `mark` as described in tserase.Eraser._erase."""
    if segment.isascii():
        out = segment.translate(_BLANK_ASCII)
        if not mark:
            return out
        at = _mark_position(segment.decode("ascii"), mark)
        return out[:at] + mark.encode() + out[at + 1 :]
    text = segment.decode("utf-8", "surrogatepass")
    pieces = [_blank_char(ch) for ch in text]
    if mark:
        at = _mark_position(text, mark)
        pieces[at] = _with_mark(pieces[at], mark)
    return "".join(pieces).encode("utf-8", "surrogatepass")


def _mark_position(text: str, mark: str) -> int:
    """The character `mark` replaces: the first (`;`, `(`) or last (`)`) that is no line break."""
    order = range(len(text) - 1, -1, -1) if mark == ")" else range(len(text))
    return next((i for i in order if text[i] not in LINE_BREAKS), 0)


def _with_mark(blank: str, mark: str) -> str:
    """`blank` (one erased character's whitespace) with `mark` in it, same UTF-8 length."""
    pad = " " * (len(blank.encode("utf-8", "surrogatepass")) - 1)
    return pad + mark if mark == ")" else mark + pad


def _blank_char(ch: str) -> str:
    if ch in LINE_BREAKS:
        return ch
    size = len(ch.encode("utf-8", "surrogatepass"))
    return (" ", " ", "\u00a0", "\u2002", "\u00a0\u00a0")[size]
