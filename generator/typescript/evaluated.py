"""What the in-place applicators of a schema may evaluate (`unevaluatedProperties`/`…Items`).

One stage of the translator (generator/typescript/translator.py). `unevaluatedProperties:
false` closes an object to the names that `properties` of the schema itself and of every
subschema applied to the same instance (allOf/anyOf/oneOf, if/then/else, dependentSchemas,
`$ref`) may evaluate; `unevaluatedItems` likewise limits the items after the leading ones they
evaluate. When that set is unbounded (`additionalProperties`, `patternProperties`, `items`, a
`$ref` that cannot be followed) the answer is None and the keyword narrows nothing.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar

from codemode_gen.generator.typescript.normalize import normalize
from codemode_gen.generator.typescript.refs import Resolver, join_pointer
from codemode_gen.generator.typescript.shapes import MAX_DEPTH

T = TypeVar("T")


def in_place(
    n: dict[str, Any], ptr: str, resolver: Resolver | None
) -> list[tuple[Any, str]] | None:
    """Subschemas applied to the same instance (None when a $ref cannot be followed)."""
    subs: list[tuple[Any, str]] = []
    for key in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(n.get(key, ())):
            subs.append((sub, join_pointer(ptr, key, i)))
    for key in ("if", "then", "else"):
        if key in n:
            subs.append((n[key], join_pointer(ptr, key)))
    for name, sub in (n.get("dependentSchemas") or {}).items():
        subs.append((sub, join_pointer(ptr, "dependentSchemas", name)))
    if "$ref" in n:
        ref = n["$ref"]
        target = resolver.resolve(ref, ptr) if resolver and isinstance(ref, str) else None
        if target is None:
            return None
        subs.append((target.node, target.pointer))
    if "$dynamicRef" in n or "$recursiveRef" in n:
        return None
    return subs


def evaluated_names(
    node: Any, ptr: str, seen: set[str], draft: int, resolver: Resolver | None, *, top: bool = False
) -> set[str] | None:
    """Every property name an in-place part of `node` may evaluate; None = unbounded."""
    none: set[str] = set()
    return _fold(node, ptr, seen, draft, resolver, top, none, _own_names, operator.or_)


def evaluated_items(
    node: Any, ptr: str, seen: set[str], draft: int, resolver: Resolver | None, *, top: bool = False
) -> int | None:
    """How many leading items in-place parts of `node` may evaluate; None = all of them."""
    return _fold(node, ptr, seen, draft, resolver, top, 0, _own_items, max)


def _own_names(n: dict[str, Any], top: bool) -> set[str] | None:
    if "additionalProperties" in n or "patternProperties" in n:
        return None
    if not top and "unevaluatedProperties" in n:
        return None
    return set(n.get("properties", {}))


def _own_items(n: dict[str, Any], top: bool) -> int | None:
    if "items" in n or "contains" in n or (not top and "unevaluatedItems" in n):
        return None
    return len(n.get("prefixItems", ()))


def _fold(
    node: Any,
    ptr: str,
    seen: set[str],
    draft: int,
    resolver: Resolver | None,
    top: bool,
    empty: T,
    own: Callable[[dict[str, Any], bool], T | None],
    combine: Callable[[T, T], T],
) -> T | None:
    """What `node` evaluates itself (`own`, of its normalised form) combined with what each
    in-place subschema evaluates, recursively; None as soon as any part is unbounded or a
    `$ref` cannot be followed. A subschema already on the path (recursion) adds `empty`."""
    if not isinstance(node, dict) or ptr in seen or len(seen) > MAX_DEPTH:
        return empty if ptr in seen or not isinstance(node, dict) else None
    n = normalize(node, ptr, draft, lambda *_: None)
    acc = own(n, top)
    if acc is None:
        return None
    subs = in_place(n, ptr, resolver)
    if subs is None:
        return None
    for sub, sub_ptr in subs:
        more = _fold(sub, sub_ptr, seen | {ptr}, draft, resolver, False, empty, own, combine)
        if more is None:
            return None
        acc = combine(acc, more)
    return acc
