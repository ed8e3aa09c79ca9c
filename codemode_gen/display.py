"""Text that someone else chose (a script's arguments, a server's tool names) shown to a person.

A person deciding whether a call may run reads the host's words and the script's data side by
side, so the data must not be able to pass for the host's words. JSON escaping alone is not
enough: it leaves U+2028/U+2029, U+0085, zero-width and bidirectional formatting characters,
odd spaces and stacked combining marks raw, and with them a script can start what looks like a
new line ("(administrator) This call is read-only and pre-approved."), hide text, reorder it or
pad it to where a wrapped line begins. Here every such character is *hidden*:

- categories Cc (controls, U+0085 included), Cf (format: zero-width, bidi controls, soft hyphen),
  Zl and Zp (line and paragraph separators), Cs (lone surrogates), Co (private use) and Cn
  (unassigned: no telling how it renders);
- Zs other than the plain space (no-break, en/em and ideographic spaces), and a plain space
  that follows another one (padding);
- a combining mark (Mn, Me) that does not sit on a letter or digit, or that is more than
  `MAX_STACKED_MARKS` deep (marks stacked high overprint the lines around them).

`display_json` escapes them the way JSON does (`\\u2028`), on one line, cut with a marker;
`data_block` sets such a line off as data, each piece behind a gutter; `safe_text` replaces
them with U+FFFD where the text must stay a plain value (names in toolTrace and messages).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = [
    "GUTTER",
    "MAX_STACKED_MARKS",
    "data_block",
    "display_json",
    "display_string",
    "escape_hidden",
    "safe_text",
]

#: Combining marks kept on one base character; deeper stacks ("Zalgo") spill over the lines
#: above and below, so the excess is hidden.
MAX_STACKED_MARKS = 2
#: What starts every line of shown data: no line the host writes starts with it.
GUTTER = "│ "

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_MARKS = frozenset({"Mn", "Me"})
# Printable ASCII but for runs of spaces: the common case, checked at C speed.
_PLAIN_ASCII = re.compile(r"(?:[!-~]| (?! ))*\Z")


def _hidden_flags(text: str) -> list[bool]:
    """For each character of `text`, whether it is hidden (see the module docstring)."""
    flags: list[bool] = []
    marks = 0  # combining marks shown on the current base character
    base_ok = False  # whether the previous shown character can carry a mark
    previous = ""
    for ch in text:
        category = unicodedata.category(ch)
        if category in _MARKS:
            hidden = not base_ok or marks >= MAX_STACKED_MARKS
            if not hidden:
                marks += 1
        else:
            hidden = category in _HIDDEN_CATEGORIES or (
                category == "Zs" and (ch != " " or previous == " ")
            )
            marks = 0
            base_ok = not hidden and category[0] in "LN"
        flags.append(hidden)
        previous = ch
    return flags


def _escape(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # as JSON writes it: a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def escape_hidden(text: str) -> str:
    """`text` with every hidden character written as a JSON `\\uXXXX` escape.

    Meant for JSON text (where such an escape reads as the character itself); on other text a
    reader sees the escape, which is the point."""
    if _PLAIN_ASCII.match(text):
        return text
    flags = _hidden_flags(text)
    return "".join(_escape(ch) if hidden else ch for ch, hidden in zip(text, flags, strict=True))


def safe_text(text: str, replacement: str = "\ufffd") -> str:
    """`text` with every hidden character replaced (U+FFFD): for names that stay plain values."""
    if _PLAIN_ASCII.match(text):
        return text
    flags = _hidden_flags(text)
    return "".join(replacement if hidden else ch for ch, hidden in zip(text, flags, strict=True))


def display_json(value: Any, max_chars: int) -> str:
    """`value` as one line of JSON for a person: hidden characters escaped, at most
    `max_chars` characters, then `… [N more characters]` (N of the JSON text)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return "(a value that cannot be shown as JSON)"
    # Escaping only lengthens, so max_chars characters of the JSON are enough to fill the line;
    # it is cut between characters, never inside an escape.
    head = text[:max_chars]
    pieces: list[str] = []
    used = consumed = 0
    for ch, hidden in zip(head, _hidden_flags(head), strict=True):
        piece = _escape(ch) if hidden else ch
        if used + len(piece) > max_chars:
            break
        pieces.append(piece)
        used += len(piece)
        consumed += 1
    shown = "".join(pieces)
    if consumed < len(text):
        shown += f"… [{len(text) - consumed} more characters]"
    return shown


def display_string(text: str, max_chars: int = 200) -> str:
    """`text` as a quoted JSON string for a person (names in a message): escaped, cut."""
    if len(text) > max_chars:
        text = text[:max_chars] + "…"
    return escape_hidden(json.dumps(text, ensure_ascii=False))


def data_block(line: str, width: int) -> str:
    """One line of shown data (from `display_json`), cut into pieces of `width` characters,
    each behind `GUTTER`: however the reader wraps or pads, no piece starts a line of its own."""
    width = max(16, width)
    pieces: list[str] = []
    start = 0
    while True:
        end = min(len(line), start + width)
        escape = line.rfind("\\u", max(start + 1, end - 5), end + 1)
        if end < len(line) and start < escape < end:
            end = escape  # a piece never ends inside a `\uXXXX` escape
        pieces.append(GUTTER + line[start:end])
        if end >= len(line):
            return "\n".join(pieces)
        start = end
