"""ECMA-262 regular expressions rewritten into the `regex` package's syntax, same meaning.

JSON Schema `pattern`s are written for JavaScript's RegExp; Python reads the same text
differently (`\\d` is Unicode, `$` matches before a final newline, `[]`/`[^]` are errors,
`(?i)` is a flag). This module owns that translation - one syntax to another, nothing else -
so that safe_jsonschema.py, which runs the translated pattern with a timeout and a budget
(spec §11), is about bounding the evaluation, not about parsing regular expressions.
"""

from __future__ import annotations

import regex

__all__ = ["FLAGS", "PatternError", "translate"]

# ECMA-262 WhiteSpace and LineTerminator code points (what `\s` means in JavaScript).
_ECMA_SPACE = (
    "\\t\\n\\x0b\\f\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
# JavaScript's `.` (without the `s` flag) excludes every LineTerminator, not only "\n".
_ECMA_DOT = "[^\\n\\r\\u2028\\u2029]"
_ANY = "(?s:.)"
# V0: re-compatible behaviour, no nested sets or set operations inside `[…]`.
FLAGS = regex.V0
# In ECMA-262 `\d`, `\w` and `\b` are ASCII-only, unlike Python's Unicode defaults: `\d \w \s`
# become explicit sets, `\b \B` get a scoped ASCII flag (a global one would make `\p{…}` ASCII).
_CLASS_SETS = {"d": "0-9", "w": "A-Za-z0-9_", "s": _ECMA_SPACE}
_HEX = frozenset("0123456789abcdefABCDEF")
_DIGITS = frozenset("0123456789")
_OCTAL = frozenset("01234567")
_QUANTIFIER = regex.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_GROUP_NAME = regex.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")


class PatternError(ValueError):
    """The pattern is not valid ECMA-262 syntax (or uses a construct this module refuses)."""


def translate(pattern: str) -> str:
    """Rewrite an ECMA-262 pattern into `regex` (V0) syntax with the same meaning.

    Covers what differs in practice: `\\d \\w \\b` are ASCII, `\\s` and `.` use the JS code point
    sets, `$` is end of input only, `[]`/`[^]`, `(?<name>…)`/`\\k<name>`, `\\cX`, `\\u{…}` and
    surrogate pairs, Annex B identity escapes and literal braces. Python-only syntax (inline
    flags, possessive quantifiers, `(?P…)`, fuzzy matching) is refused with PatternError
    rather than given a meaning JavaScript would not.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    after_quantifier = False
    while i < n:
        c = pattern[i]
        quantifier = ""
        if c in "*+?":
            quantifier = c
        elif c == "{" and (m := _QUANTIFIER.match(pattern, i)):
            quantifier = m.group(0)
        if quantifier:
            if after_quantifier:
                raise PatternError(f"nothing to repeat at position {i}")
            i += len(quantifier)
            if i < n and pattern[i] == "?":  # lazy
                quantifier += "?"
                i += 1
            out.append(quantifier)
            after_quantifier = True
            continue
        after_quantifier = False
        if c == "\\":
            piece, i = _escape(pattern, i, in_class=False)
            out.append(piece)
        elif c == "[":
            piece, i = _char_class(pattern, i)
            out.append(piece)
        elif c == "(":
            piece, i = _group_open(pattern, i)
            out.append(piece)
        elif c == ".":
            out.append(_ECMA_DOT)
            i += 1
        elif c == "$":
            out.append("\\Z")
            i += 1
        elif c in "{}":
            out.append("\\" + c)  # Annex B: a brace that is not a quantifier is a literal
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _group_open(p: str, i: int) -> tuple[str, int]:
    if not p.startswith("(?", i):
        return "(", i + 1
    for prefix in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
        if p.startswith(prefix, i):
            return prefix, i + len(prefix)
    m = _GROUP_NAME.match(p, i + 2)
    if m:
        return f"(?P<{m.group(1)}>", m.end()
    raise PatternError(f"unsupported group syntax at position {i}")


def _escape(p: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """Translate the escape at p[i] == "\\"; returns (text, next index)."""
    if i + 1 >= len(p):
        raise PatternError("pattern ends with a lone backslash")
    c = p[i + 1]
    j = i + 2
    if c in "dws":
        return (_CLASS_SETS[c] if in_class else f"[{_CLASS_SETS[c]}]"), j
    if c in "DWS":
        return f"[^{_CLASS_SETS[c.lower()]}]", j  # inside a class handled by _char_class
    if c in "bB":
        if in_class:
            return ("\\x08" if c == "b" else "B"), j
        return f"(?a:\\{c})", j
    if c in "fnrtv":
        return "\\" + c, j
    if c == "0" and not (j < len(p) and p[j] in _DIGITS):
        return "\\x00", j
    if c in _DIGITS:
        if in_class:  # Annex B: a legacy octal escape inside a class; `\8`, `\9` are "8", "9"
            if c not in _OCTAL:
                return c, j
            digits = c
            while j < len(p) and p[j] in _OCTAL and len(digits) < 3:
                digits += p[j]
                j += 1
            return _literal(chr(int(digits, 8))), j
        while j < len(p) and p[j] in _DIGITS:
            j += 1
        return "\\" + p[i + 1 : j], j  # backreference
    if c == "c":
        if j < len(p) and p[j].isascii() and p[j].isalpha():
            return f"\\x{ord(p[j]) % 32:02x}", j + 1
        return "\\\\c", j  # Annex B: `\c` not followed by a letter is a backslash and "c"
    if c == "x":
        if p[j : j + 2] and len(p[j : j + 2]) == 2 and set(p[j : j + 2]) <= _HEX:
            return "\\x" + p[j : j + 2], j + 2
        return "x", j
    if c == "u":
        return _unicode_escape(p, i)
    if c in "pP":
        if j < len(p) and p[j] == "{":
            end = p.find("}", j)
            if end < 0:
                raise PatternError(f"unterminated \\{c}{{…}} at position {i}")
            return p[i : end + 1], end + 1
        return c, j
    if c == "k":
        m = _GROUP_NAME.match(p, j)
        if m and not in_class:
            return f"(?P={m.group(1)})", m.end()
        return "k", j
    if c.isascii() and c.isalpha():
        return c, j  # Annex B identity escape: `\A`, `\Z`, `\G` … are plain letters in JS
    return regex.escape(c), j


def _unicode_escape(p: str, i: int) -> tuple[str, int]:
    j = i + 2
    if j < len(p) and p[j] == "{":
        end = p.find("}", j)
        digits = p[j + 1 : end] if end > 0 else ""
        if digits and set(digits) <= _HEX and int(digits, 16) <= 0x10FFFF:
            return _literal(chr(int(digits, 16))), end + 1
        return "u", j
    digits = p[j : j + 4]
    if len(digits) != 4 or not set(digits) <= _HEX:
        return "u", j
    code = int(digits, 16)
    j += 4
    if 0xD800 <= code <= 0xDBFF and p[j : j + 2] == "\\u":  # a surrogate pair is one code point
        low = p[j + 2 : j + 6]
        if len(low) == 4 and set(low) <= _HEX and 0xDC00 <= int(low, 16) <= 0xDFFF:
            code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
            j += 6
    return _literal(chr(code)), j


def _literal(ch: str) -> str:
    return f"\\U{ord(ch):08x}"


def _char_class(p: str, i: int) -> tuple[str, int]:
    """Translate `[…]` at p[i]; JS rules: `[]` matches nothing, `[^]` anything, `[` is literal."""
    j = i + 1
    negated = j < len(p) and p[j] == "^"
    if negated:
        j += 1
    body: list[str] = []
    negated_sets: list[str] = []  # `\D \W \S` inside a class: added as alternatives below
    while True:
        if j >= len(p):
            raise PatternError(f"unterminated character class at position {i}")
        c = p[j]
        if c == "]":
            j += 1
            break
        if c == "\\":
            if p[j + 1 : j + 2] in ("D", "W", "S"):
                negated_sets.append(f"[^{_CLASS_SETS[p[j + 1].lower()]}]")
                j += 2
                continue
            piece, j = _escape(p, j, in_class=True)
            body.append(piece)
        elif c in "[]\\^&~|":
            body.append("\\" + c)
            j += 1
        else:
            body.append(c)
            j += 1
    inner = "".join(body)
    parts = ([f"[{inner}]"] if inner else []) + negated_sets
    if not parts:
        return ("(?!)" if not negated else _ANY), j
    union = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    if not negated:
        return union, j
    if not negated_sets:
        return f"[^{inner}]", j
    return f"(?:(?!{union}){_ANY})", j
