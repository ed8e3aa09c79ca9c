"""Server answers as untrusted input (spec §11): checked, bounded and cut before they are kept or shown.

`record`, live recording (runtime/host/learn.py) and `drift` all take values a server chose —
results, tool definitions, tool names — and either write them as JSON fixtures or quote them in a
report line. This module owns the three checks that make that safe, so every path applies the same
bounds: `json_problem` (is it JSON at all: no NaN/Infinity, no nesting past MAX_RECORDED_DEPTH, no
lone surrogates where text is needed), `cap_result` (cut a result to `max_result_bytes` and keep
its shape) and `shown` (a server-chosen string made printable and bounded for one report line).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from codemode_gen.jsonio import pointer_token

__all__ = [
    "CUT_ARRAY_ITEMS",
    "MAX_CUT_ROUNDS",
    "MAX_RECORDED_DEPTH",
    "MAX_SHOWN_CHARS",
    "MIN_CUT_STRING_CHARS",
    "TRUNCATION_MARK",
    "cap_result",
    "json_bytes",
    "json_problem",
    "shown",
]

# Bounds the nesting of a result or tool definition `record` keeps: the redactor, json.dumps
# and generate's readers recurse per level, and a few hundred levels from a hostile server
# would end in RecursionError (a traceback) instead of a clear error for that call or tool.
MAX_RECORDED_DEPTH = 200
# Shortest string `cap_result` cuts: type tags, ids and MIME types stay whole, so a cut result
# keeps its shape (content block kinds) for inference and readers.
MIN_CUT_STRING_CHARS = 64
# Bounds the serialisations `cap_result` spends lowering the string length (each one is at
# most the size of the result); halving alone reaches MIN_CUT_STRING_CHARS in under 20.
MAX_CUT_ROUNDS = 24
# Array lengths `cap_result` tries, after cutting strings alone was not enough (a result of a
# million small items); an array keeps its first N items.
CUT_ARRAY_ITEMS = (1024, 256, 64, 16, 4, 1)
# Appended to a string `cap_result` cut: visible to anyone reading the fixture or the types.
TRUNCATION_MARK = " [... cut by codemode-gen record: {total} characters in all]"
# Bounds how much of a server-chosen name (a 300-character tool name) one report line quotes.
MAX_SHOWN_CHARS = 80


def shown(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """A server-chosen string for one report line: printable, bounded, never a terminal escape."""
    out: list[str] = []
    for ch in text[: limit + 1]:
        if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape", "backslashreplace").decode("ascii"))
    result = "".join(out)
    return result if len(text) <= limit else result[:limit] + "…"


def json_problem(
    value: Any, *, max_depth: int = MAX_RECORDED_DEPTH, text_only: bool = True
) -> str | None:
    """Why `value` (decoded from a server's JSON) cannot be written as JSON, or None.

    Catches what Python's JSON decoder lets through: NaN/Infinity (RFC 8259 has no such
    numbers), nesting deeper than `max_depth`, and with `text_only` lone surrogates (JSON text
    may escape one, but it is not Unicode: tool definitions and initialize results become
    generated code and must be text; a recorded result may hold one, written escaped).
    Iterative, so it cannot itself overflow the stack.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, ptr, depth = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return f"{node!r} (not a JSON number) at {shown(ptr or '/')}"
        elif isinstance(node, str):
            if text_only and _lone_surrogate(node):
                return f"a lone surrogate (not Unicode text) in the string at {shown(ptr or '/')}"
        elif isinstance(node, dict | list):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels at {shown(ptr or '/')}"
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str) or (text_only and _lone_surrogate(key)):
                        return (
                            f"a key that is not Unicode text in the object at {shown(ptr or '/')}"
                        )
                    stack.append((item, f"{ptr}/{pointer_token(key)}", depth + 1))
            else:
                stack.extend((item, f"{ptr}/{i}", depth + 1) for i, item in enumerate(node))
        elif node is not None and not isinstance(node, bool | int):
            return f"a {type(node).__name__} value at {shown(ptr or '/')}"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> bool:
    # json.loads joins escaped surrogate pairs into one code point: any surrogate left is lone.
    return _SURROGATE.search(text) is not None


def json_bytes(value: Any) -> int:
    line = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return len(line.encode("utf-8", "surrogatepass"))


def _cut(value: Any, max_chars: int, max_items: int | None) -> Any:
    """A copy with strings over max_chars cut (and marked) and arrays over max_items cut."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        return value[:max_chars] + TRUNCATION_MARK.format(total=len(value))
    if isinstance(value, dict):
        return {key: _cut(item, max_chars, max_items) for key, item in value.items()}
    if isinstance(value, list):
        items = value if max_items is None else value[:max_items]
        return [_cut(item, max_chars, max_items) for item in items]
    return value


def cap_result(result: Any, max_bytes: int) -> tuple[Any, int | None]:
    """(what to keep of `result`, its original size in bytes if it was cut, else None).

    Strings are cut first, all to one length (so no single one eats the budget): from
    max_bytes characters, lowered by the excess while that is small (one huge text ends just
    under the cap) and halved otherwise, down to MIN_CUT_STRING_CHARS. If that is not enough,
    arrays are cut to their first CUT_ARRAY_ITEMS items. Returns (None, size) when nothing
    that small keeps the shape (the call is then not recorded). `result` must pass
    `json_problem` (its depth is bounded, so the recursive copy is safe).
    """
    size = json_bytes(result)
    if size <= max_bytes:
        return result, None
    limit = max_bytes
    for _ in range(MAX_CUT_ROUNDS):
        kept = _cut(result, limit, None)
        excess = json_bytes(kept) - max_bytes
        if excess <= 0:
            return kept, size
        if limit <= MIN_CUT_STRING_CHARS:
            break
        # every cut string loses `excess` more characters, i.e. at least `excess` bytes
        limit = max(limit - excess if excess < limit // 2 else limit // 2, MIN_CUT_STRING_CHARS)
    for items in CUT_ARRAY_ITEMS:
        kept = _cut(result, MIN_CUT_STRING_CHARS, items)
        if json_bytes(kept) <= max_bytes:
            return kept, size
    return None, size
