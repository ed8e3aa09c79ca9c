"""Text and JSON made safe to leave the runtime: UTF-8-encodable, bounded, without recursion.

Shared by both sides of the pipe (the sandbox worker and the per-run host): whatever a script or
a server hands over may hold lone surrogates (legal in JS strings), control or bidi characters,
megabytes of text or nesting as deep as the engine allows, and every response, diagnostic and
trace entry made from it must still encode as UTF-8, fit the agent's context and not fake text on
a terminal. Lone surrogates become U+FFFD.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from codemode_gen import payload
from codemode_gen.display import safe_text
from codemode_gen.runtime.limits import MAX_NAME_CHARS


def utf8_safe(text: str) -> str:
    """Replace lone surrogates (which JS strings may hold) with U+FFFD; keep valid pairs."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def utf8_safe_json(value: Any) -> Any:
    """`utf8_safe` applied to every string (keys too) inside a JSON value.

    Iterative (a result may be nested as deep as the engine allows) and, in the usual case of
    no lone surrogate anywhere, a C-speed encode (in bounded pieces: `payload.dumps`) that
    returns `value` itself.
    """
    if isinstance(value, str):
        return utf8_safe(value)
    if not isinstance(value, list | dict):
        return value
    try:
        payload.dumps(value, ensure_ascii=False).encode("utf-8")
        return value
    except (UnicodeEncodeError, RecursionError, TypeError, ValueError):
        pass
    return copy_json(value, text=utf8_safe)


def copy_json(
    value: Any,
    *,
    text: Callable[[str], str] | None = None,
    order: Callable[[dict[Any, Any]], Iterable[Any]] | None = None,
) -> Any:
    """A copy of a JSON value, made without recursion (any depth is safe): `text` maps every
    string, object keys included; `order` gives each object's keys in the order the copy
    lists them (default: as they are)."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        src, dst, key = stack.pop()
        if isinstance(src, str):
            dst[key] = text(src) if text is not None else src
        elif isinstance(src, list):
            new_list: list[Any] = [None] * len(src)
            dst[key] = new_list
            stack.extend((item, new_list, i) for i, item in enumerate(src))
        elif isinstance(src, dict):
            new_dict: dict[Any, Any] = {}
            dst[key] = new_dict
            for k in order(src) if order is not None else src:
                new_key = text(k) if text is not None and isinstance(k, str) else k
                new_dict[new_key] = None
                stack.append((src[k], new_dict, new_key))
        else:
            dst[key] = src
    return holder[0]


def clip(text: str, max_chars: int) -> str:
    """`text` made UTF-8-safe and cut to `max_chars` characters, saying how much was cut."""
    if len(text) > max_chars:
        text = text[:max_chars] + f"… [{len(text) - max_chars} more characters]"
    return utf8_safe(text)


def safe_name(value: Any, max_chars: int = MAX_NAME_CHARS) -> str:
    """A script-chosen name (serverId, toolName) as it may appear in toolTrace and messages:
    a string, at most `max_chars` characters, no lone surrogates, no control or bidi
    characters (U+FFFD instead), so it can neither break UTF-8 output nor a terminal; nor line
    separators, zero-width, odd spaces or other characters that hide or fake text
    (codemode_gen/display.py)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > max_chars:
        text = text[:max_chars] + "…"
    return safe_text(utf8_safe(text))


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests containers more than `limit` deep (`[]` is 1).

    Level by level, without recursion, so any depth is safe to measure."""
    level = [value] if isinstance(value, list | dict) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            below.extend([c for c in children if isinstance(c, list | dict)])
        level = below
    return False
