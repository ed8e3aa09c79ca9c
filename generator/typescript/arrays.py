"""Array keywords -> the array kind's type: tuples, rest items, length bounds, `unevaluatedItems`.

One stage of the translator (translator.py). `prefixItems` (or draft-07 `items` arrays, which
normalize.py rewrites to it), `items`, `minItems`/`maxItems` and `contains`/`minContains` make
one tuple or array type through shapes.tuple_type; `unevaluatedItems` limits the items after
the leading ones the in-place applicators evaluate (evaluated.py), or widens with a warning.
"""

from __future__ import annotations

import math
from typing import Any

from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.evaluated import evaluated_items
from codemode_gen.generator.typescript.normalize import PREFIX_ORIGIN
from codemode_gen.generator.typescript.refs import join_pointer
from codemode_gen.generator.typescript.shapes import (
    MAX_TUPLE_EXPANSION,
    Shape,
    limit_items,
    tuple_type,
)
from codemode_gen.generator.typescript.state import IN_PLACE_APPLICATORS, TranslationState

__all__ = ["ArrayKeywords"]


class ArrayKeywords(TranslationState):
    """The array keywords of one schema node -> the array kind's type."""

    def apply_unevaluated_items(self, s: Shape, n: dict[str, Any], ptr: str, depth: int) -> Shape:
        un = n["unevaluatedItems"]
        if un is True or not any(k in n for k in (*IN_PLACE_APPLICATORS, "contains")):
            return s  # nothing to do, or already handled as `items` by array_type
        count = evaluated_items(n, ptr, set(), self.draft, self.resolver, top=True)
        if count is None or count > MAX_TUPLE_EXPANSION:
            self.warn_wider(ptr, "unevaluatedItems")
            return s
        rest = (
            None
            if un is False
            else self.type_of(un, join_pointer(ptr, "unevaluatedItems"), depth + 1)
        )
        s = dict(s)
        s["array"] = limit_items(s["array"], count, rest)
        return s

    def array_type(self, n: dict[str, Any], ptr: str, depth: int) -> t.TypeNode:
        prefix = n.get("prefixItems", [])
        rest: Any = n.get("items", True)
        rest_ptr = join_pointer(ptr, "additionalItems" if PREFIX_ORIGIN in n else "items")
        if (
            "items" not in n
            and "unevaluatedItems" in n
            and self.draft >= 2019
            and not any(k in n for k in (*IN_PLACE_APPLICATORS, "contains"))
        ):
            rest, rest_ptr = n["unevaluatedItems"], join_pointer(ptr, "unevaluatedItems")
        min_items: int = n.get("minItems", 0)
        if "contains" in n:
            # At least minContains (default 1) items match `contains`, so at least that many exist.
            least = n.get("minContains", 1) if self.draft >= 2019 else 1
            if isinstance(least, (int, float)) and not isinstance(least, bool) and least >= 0:
                if n["contains"] is False and least >= 1:
                    return t.NEVER
                min_items = max(min_items, math.ceil(least))
        max_items: int | None = n.get("maxItems")
        prefix_key = n.get(PREFIX_ORIGIN, "prefixItems")
        elems = [
            self.type_of(sub, join_pointer(ptr, prefix_key, i), depth + 1)
            for i, sub in enumerate(prefix)
        ]
        rest_t: t.TypeNode | None = (
            None if rest is False else self.type_of(rest, rest_ptr, depth + 1)
        )
        return tuple_type(elems, rest_t, min_items, max_items)
