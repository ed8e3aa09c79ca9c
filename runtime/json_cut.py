"""A JSON value cut to a budget of characters, deterministically and still valid JSON: how a
result and logs larger than maxResponseChars are fitted into a response (§3.3, `fit_response`).

It measures what it keeps and little more (`measure`), never the whole of a large value, and
never recurses deeper than MAX_CUT_DEPTH.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from codemode_gen import payload
from codemode_gen.runtime.limits import MAX_JSON_DEPTH

#: Nesting followed by `cut_json`; deeper values are replaced by a marker. Results never nest
#: deeper than MAX_JSON_DEPTH (result_from_text): this only bounds the recursion.
MAX_CUT_DEPTH = 2 * MAX_JSON_DEPTH
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: What `_encoder` calls for a string (C): one call per string instead of a whole `encode`.
_encode_str: Any = json.encoder.encode_basestring


def json_size(value: Any) -> int:
    """Characters of `value` as compact JSON (non-ASCII kept): what a client shows of it."""
    return len(payload.dumps(value, ensure_ascii=False))


def _key_size(key: Any) -> int:
    """Characters of an object key as JSON (json's own coercion of non-string keys)."""
    if isinstance(key, str):
        return len(_encode_str(key))
    return len(_encoder.encode({key: 0})) - 4  # {"k":0}


def _scalar_size(item: Any) -> int:
    """Characters of a string, number, boolean or null as JSON: what `_encoder` writes, without
    a whole `encode` per value (measuring a cut result meets thousands of them)."""
    if isinstance(item, str):
        return len(_encode_str(item))
    if item is None or item is True:
        return 4
    if item is False:
        return 5
    if type(item) is int:
        return len(int.__repr__(item))
    return len(_encoder.encode(item))  # floats, and json's coercions


def measure(value: Any, cap: int) -> int:
    """Characters of `value` as compact JSON when that is at most `cap`; else some number over
    `cap`. The walk stops as soon as it is over, so it visits at most about `cap` values
    (each costs at least one character), however large `value` is: cutting a 16 MB result to a
    budget looks at little more than the budget (strings are measured by the C encoder)."""
    total = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) + 2 > cap - total:  # over already (a lower bound): never encode a long one
                return total + len(item) + 2
            total += len(_encode_str(item))
        elif isinstance(item, dict):
            total += 2 + max(0, len(item) - 1) + len(item)  # braces, commas, colons
            for key, child in item.items():
                total += (
                    len(key) + 2
                    if isinstance(key, str) and len(key) + 2 > cap - total
                    else _key_size(key)
                )
                if total > cap:
                    return total
                stack.append(child)
        elif isinstance(item, list):
            total += 2 + max(0, len(item) - 1)
            stack.extend(item)
        else:
            total += _scalar_size(item)
        if total > cap:
            return total
    return total


def size(value: Any, cap: int, small: bool = False) -> int:
    """`measure(value, cap)`, or for a `small` value (at most about payload.INLINE_NODES
    values: the caller measured it, and a part of one is small too) its exact size in one C
    call, several times faster than the Python walk and as bounded as one of payload.dumps's
    pieces."""
    if small:
        return len(_encoder.encode(value))
    return measure(value, cap)


def _fits(marker: str, room: int) -> Any:
    """`marker` if its JSON fits `room`, else null (4 characters): what stands for a value that
    cannot be cut any further."""
    return marker if len(_encoder.encode(marker)) <= room else None


def cut_string(text: str, room: int) -> Any:
    """`text` cut to a prefix ending in `…[+N chars]` so that its JSON takes at most `room`
    characters (the longest such prefix); a marker or null when not even the marker fits."""
    if len(text) + 2 <= room and len(_encoder.encode(text)) <= room:
        return text
    # The marker is sized for the most characters it could name, so the prefix is found by a
    # bisection over a monotone length (the real marker is never longer).
    marker_chars = len(f"…[+{len(text)} chars]")
    low, high = 0, min(len(text), room)
    while low < high:
        mid = (low + high + 1) // 2
        if len(_encoder.encode(text[:mid])) + marker_chars <= room:
            low = mid
        else:
            high = mid - 1
    cut = text[:low] + f"…[+{len(text) - low} chars]"
    if len(_encoder.encode(cut)) <= room:
        return cut
    return _fits(f"…[{len(text)} chars]", room)


#: Room below which a value is dropped (counted in its container's marker) rather than cut:
#: a cut value that small shows nothing but its own marker.
MIN_CUT_ROOM = 32
#: Least room a large value of an object is cut to while other large values are dropped: an
#: object of many large values (records keyed by id) keeps its first ones (whole, or nearly),
#: not stubs of all of them; one of a few large values gets an equal share of the room.
MIN_SHARE_CHARS = 1000


def cut_json(
    value: Any, room: int, depth: int = 0, *, small: bool = False, known: int | None = None
) -> Any:
    """`value` cut deterministically so that its compact JSON takes at most `room` characters
    (for any `room` of at least 4; a smaller one gets null), and stays valid JSON:

    - a string keeps its longest prefix that fits, ending in `…[+N chars]`;
    - an array keeps its first items that fit whole, then a last element `"…[+N items]"` (an
      array whose first item does not fit keeps that item, cut);
    - an object keeps whole, in key order, the values that are small (at most an equal share of
      the room, or MIN_SHARE_CHARS) while they fit; the large ones share what is left, each cut
      to its share (as many as get MIN_SHARE_CHARS each, the first ones in key order; at least
      the first); the dropped keys are counted in a last key `"…": "[+N keys]"`;
    - a number, boolean or null that does not fit (tiny rooms only) becomes a marker or null.
    It measures what it keeps and little more (`measure`), never the whole of a large value;
    a `small` one (see `size`) is sized by the C encoder instead. `known`: its exact size, when
    the caller has it."""
    if (known if known is not None else size(value, room, small)) <= room:
        return value
    if depth >= MAX_CUT_DEPTH:
        return _fits("…[nested too deep]", room)
    if isinstance(value, str):
        return cut_string(value, room)
    if isinstance(value, list):
        return _cut_list(value, room, depth, small)
    if isinstance(value, dict):
        return _cut_dict(value, room, depth, small)
    return _fits(f"…[{len(_encoder.encode(value))} chars]", room)


def _cut_list(items: list[Any], room: int, depth: int, small: bool) -> Any:
    # Room for the closing marker element, sized for the most items it could name.
    reserve = len(_encoder.encode(f"…[+{len(items)} items]")) + 1
    avail = room - 2 - reserve
    kept: list[Any] = []
    used = 0
    for index, item in enumerate(items):
        comma = 1 if kept else 0
        cost = size(item, avail - used - comma, small) + comma
        if used + cost <= avail:
            kept.append(item)
            used += cost
            continue
        if not kept:  # not even the first item fits whole: it gets the room, cut
            last = index == len(items) - 1
            share = room - 2 if last else avail
            if share >= MIN_CUT_ROOM or last:
                kept.append(cut_json(item, share, depth + 1, small=small))
        break
    dropped = len(items) - len(kept)
    if dropped:
        kept.append(f"…[+{dropped} items]")
    if cut_size(kept, room) <= room:  # always, for rooms the markers fit in
        return kept
    return _fits(f"…[{len(items)} items]", room)


def _marker_key(keys: Iterable[Any]) -> str:
    """The key of an object's "keys were dropped" marker: `…`, or `…2`, `…3`… if it is taken."""
    taken = {k for k in keys if isinstance(k, str)}
    name, n = "…", 1
    while name in taken:
        n += 1
        name = f"…{n}"
    return name


def _cut_dict(obj: dict[Any, Any], room: int, depth: int, small: bool) -> Any:
    keys = list(obj)
    marker_key = _marker_key(keys)
    reserve = (
        len(_encoder.encode({marker_key: f"[+{len(keys)} keys]"})) - 2 + 1
    )  # its entry and comma
    avail = room - 2 - reserve
    small_cap = max(avail // max(1, len(keys)), MIN_SHARE_CHARS)
    whole: set[int] = set()
    large: list[int] = []
    used = 0
    for index, key in enumerate(keys):
        if used + 5 > avail:  # not even `"":0,` fits any more
            break
        key_cost = _key_size(key) + 2  # colon and comma
        value_size = size(obj[key], min(small_cap, avail - used) - key_cost, small)
        if value_size + key_cost > small_cap:
            large.append(index)
        elif used + value_size + key_cost <= avail:
            whole.add(index)
            used += value_size + key_cost
    # The large values share what is left: as many as get MIN_SHARE_CHARS each (at least the
    # first one), in key order, each cut to an equal share.
    left = avail - used
    count = min(len(large), max(1, left // MIN_SHARE_CHARS))
    cut: dict[int, Any] = {}
    if large and left // count - _key_size(keys[large[0]]) - 2 >= MIN_CUT_ROOM:
        share = left // count
        for index in large[:count]:
            value_room = share - _key_size(keys[index]) - 2
            if value_room >= MIN_CUT_ROOM:
                cut[index] = cut_json(obj[keys[index]], value_room, depth + 1, small=small)
    out: dict[Any, Any] = {}
    for index, key in enumerate(keys):
        if index in whole:
            out[key] = obj[key]
        elif index in cut:
            out[key] = cut[index]
    dropped = len(keys) - len(out)
    if dropped:
        out[marker_key] = f"[+{dropped} keys]"
    if cut_size(out, room) <= room:  # always, for rooms the markers fit in
        return out
    return _fits(f"…[{len(keys)} keys]", room)


def cut_size(value: Any, room: int) -> int:
    """`json_size` of a value `cut_json` made for `room`. Such a value takes at most `room`
    characters, so it holds at most that many values: within INLINE_NODES it is encoded in one
    C call, as bounded as one of `payload.dumps`'s pieces, without the walk that sizes them."""
    if room <= payload.INLINE_NODES:
        return len(_encoder.encode(value))
    return json_size(value)
