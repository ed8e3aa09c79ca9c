"""Which name a script meant: the near misses offered in hints (a misspelt export, module,
server, tool or field) and the bounded lists of names a hint shows instead.

Shared by the sandbox (import failures) and the host (unknown tools, invalid fields), so every
"did you mean" in a response is found the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from codemode_gen.runtime.limits import MAX_NAME_CHARS

#: Names compared when looking for the one a script meant (a misspelt export, module, field):
#: bounds difflib's work, which is quadratic in a name's length and linear in the candidates.
MAX_NEAR_MISS_CANDIDATES = 2000
#: Names listed in a hint ("its exports: ...", "its fields: ..."), so a server with hundreds of
#: tools does not fill the agent's context.
MAX_LISTED_NAMES = 16


def _name_key(name: str) -> str:
    """What two spellings of one name share: `listNotes`, `list-notes`, `List_Notes`."""
    return re.sub(r"[\W_]+", "", name).lower()


def closest_names(name: str, candidates: Iterable[str], n: int = 1) -> list[str]:
    """The candidates a script most likely meant by `name` (best first; empty when none is
    close): the same name but for case and separators first, then difflib's close matches."""
    if len(name) > MAX_NAME_CHARS:  # difflib is quadratic in the name's length
        return []
    import difflib  # here: only a failure asks, and the sandbox worker should not hold it

    pool = [
        c for _, c in zip(range(MAX_NEAR_MISS_CANDIDATES), candidates, strict=False) if c != name
    ]
    key = _name_key(name)
    found = [c for c in pool if key and _name_key(c) == key]
    by_key: dict[str, str] = {}
    for c in pool:
        by_key.setdefault(_name_key(c), c)
    for close in difflib.get_close_matches(key, list(by_key), n=n, cutoff=0.6) if key else []:
        if by_key[close] not in found:
            found.append(by_key[close])
    for close in difflib.get_close_matches(name, pool, n=n, cutoff=0.6):
        if close not in found:
            found.append(close)
    return found[:n]


def listed(names: Iterable[str]) -> str:
    """`a, b, c` of at most MAX_LISTED_NAMES names, saying how many more there are."""
    items = list(names)
    shown = ", ".join(items[:MAX_LISTED_NAMES])
    return shown + (
        f" and {len(items) - MAX_LISTED_NAMES} more" if len(items) > MAX_LISTED_NAMES else ""
    )
