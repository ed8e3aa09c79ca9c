"""Type algebra: shapes, how keywords combine them, and the object/array operations behind them.

One stage of the translator (generator/typescript/translator.py walks the schema and calls
these). A *shape* maps each JSON kind (null, boolean, number, string, array, object) that a
schema admits to the TS type of that kind's valid values (None: every value of the kind); a
kind without an entry is excluded. Keywords combine shapes the way the validator combines
results: `conj` intersects kind by kind (allOf, `$ref`, sibling keywords), `disj` unites
(anyOf/oneOf), and `render` turns a shape into one type. The object and array operations
(`merge_objects`, `close_object`, `limit_items`) are exact or wider, never narrower, than the
schema: soundness first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.normalize import json_kind
from codemode_gen.generator.typescript.patterns import finish_patterns, template_matches

# Deepest schema nesting translated; deeper subschemas become `unknown` (bounds stack use
# and output size for hostile, deeply nested schemas). Also bounds the nesting of a literal.
MAX_DEPTH = 40
# Longest string kept as a literal type (bounds agent-context cost; longer ones widen to `string`).
MAX_LITERAL_CHARS = 500
# Most tuple slots synthesised from minItems/maxItems (`[T, T, T?]`); beyond that, `T[]`.
MAX_TUPLE_EXPANSION = 8
# Most properties spelled out in one object type; the rest fall under the index signature.
MAX_PROPERTIES = 500
# Most union members an object type is distributed over when intersected (`A & (B | C)` ->
# `(A & B) | (A & C)`); bounds output growth from properties combined with oneOf/anyOf.
MAX_DISTRIBUTE = 8

KINDS = ("object", "array", "string", "number", "boolean", "null")  # also the print order
Shape = dict[str, t.TypeNode | None]  # kind -> type of that kind's values; None = unconstrained

UNCONSTRAINED: dict[str, t.TypeNode] = {
    "null": t.NULL,
    "boolean": t.BOOLEAN,
    "number": t.NUMBER,
    "string": t.STRING,
    "array": t.Array(t.UNKNOWN),
    "object": t.Object(index=t.UNKNOWN),
}
# Names every object has through Object.prototype: `{}` is assignable to `{ toString?: … }`
# only when the property's type admits the inherited function.
OBJECT_PROTOTYPE_MEMBERS = frozenset(
    {"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty", "isPrototypeOf",
     "propertyIsEnumerable", "__defineGetter__", "__defineSetter__", "__lookupGetter__",
     "__lookupSetter__", "__proto__"}
)  # fmt: skip
FUNCTION = t.Ref("Function")


def all_kinds() -> Shape:
    return dict.fromkeys(KINDS)


def is_literalish(node: t.TypeNode) -> bool:
    """True for types denoting a finite set of JSON values (enum/const output)."""
    if isinstance(node, t.Literal) or (type(node) is t.Keyword and node.name == "null"):
        return True
    if isinstance(node, t.Union):
        return all(is_literalish(m) for m in node.members)
    if isinstance(node, t.Tuple):
        return (
            node.rest is None
            and node.required == len(node.elements)
            and all(map(is_literalish, node.elements))
        )
    if isinstance(node, t.Object):
        return node.index in (None, t.NEVER) and all(
            not p.optional and is_literalish(p.type) for p in node.properties
        )
    return False


def union_members(node: t.TypeNode) -> tuple[t.TypeNode, ...]:
    return node.members if isinstance(node, t.Union) else (node,)


def conj(a: Shape, b: Shape) -> Shape:
    """Shape of values valid against both."""
    out: Shape = {}
    for k in KINDS:
        if k not in a or k not in b:
            continue
        x, y = a[k], b[k]
        r: t.TypeNode | None
        if x is None or x == y:
            r = y
        elif y is None:
            r = x
        elif is_literalish(x) and is_literalish(y):
            ys = union_members(y)
            r = t.union([m for m in union_members(x) if m in ys])
        elif is_literalish(x):
            r = x  # a finite literal set already lies inside the other constraint's type
        elif is_literalish(y):
            r = y
        else:
            r = merge_types(x, y)
            if r is None:
                r = t.intersection([x, y])
        if r is None or not t.is_never(r):
            out[k] = r
    return out


def disj(a: Shape, b: Shape) -> Shape:
    """Shape of values valid against either."""
    out: Shape = {}
    for k in KINDS:
        if k in a and k in b:
            x, y = a[k], b[k]
            out[k] = None if x is None or y is None else t.union([x, y])
        elif k in a:
            out[k] = a[k]
        elif k in b:
            out[k] = b[k]
    return out


def disj_many(shapes: list[Shape]) -> Shape:
    """`disj` over many branches at once (one union per kind instead of n growing ones)."""
    out: Shape = {}
    for k in KINDS:
        parts: list[t.TypeNode] = []
        unconstrained = present = False
        for sh in shapes:
            if k in sh:
                present = True
                v = sh[k]
                if v is None:
                    unconstrained = True
                    break
                parts.append(v)
        if present:
            out[k] = None if unconstrained else t.union(parts)
    return out


def render(shape: Shape) -> t.TypeNode:
    if len(shape) == 1:
        ((k, v),) = shape.items()
        return UNCONSTRAINED[k] if v is None else v
    values = list(shape.values())
    first = values[0] if values else None
    same = len(set(map(id, values))) == 1
    if first is not None and same:
        return first  # e.g. a $ref: the same named type for every kind it allows
    if len(shape) == len(KINDS) and same and first is None:
        return t.UNKNOWN
    members: list[t.TypeNode] = []
    for k in KINDS:
        if k in shape:
            v = shape[k]
            members.append(UNCONSTRAINED[k] if v is None else v)
    return t.union(members)


def literal_type(v: Any, depth: int = 0) -> t.TypeNode:
    """The literal type of one JSON value (`enum`/`const`); too long or too deep: its kind."""
    if v is None:
        return t.NULL
    if isinstance(v, bool):
        return t.Literal(v)
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return t.NUMBER
        # Any finite JSON number printed back exactly denotes the same double in TS.
        return t.Literal(v) if len(repr(v)) <= MAX_LITERAL_CHARS else t.NUMBER
    if isinstance(v, str):
        return t.Literal(v) if len(v) <= MAX_LITERAL_CHARS else t.STRING
    if depth > MAX_DEPTH:
        return t.UNKNOWN
    if isinstance(v, list):
        items = tuple(literal_type(x, depth + 1) for x in v)
        return t.Tuple(items, len(items))
    if isinstance(v, dict):
        props = tuple(t.Property(str(k), literal_type(x, depth + 1)) for k, x in v.items())
        return t.Object(props, None if props else t.NEVER)
    return t.UNKNOWN


def literal_shape(values: list[Any]) -> Shape:
    """The shape of `enum` values: per kind, the union of its values' literal types."""
    out: dict[str, list[t.TypeNode]] = {}
    for v in values:
        kind = json_kind(v)
        if kind is None:
            continue
        out.setdefault(kind, []).append(literal_type(v))
    return {k: t.union(nodes) for k, nodes in out.items()}


def tuple_type(
    elems: list[t.TypeNode], rest: t.TypeNode | None, min_items: int, max_items: int | None
) -> t.TypeNode:
    """The array type of leading items `elems`, then `rest` (None: no more items), with
    `minItems`/`maxItems`: a tuple where the bounds allow one (`[T, T, T?]`), else `T[]`."""
    if rest is not None and t.is_never(rest):
        rest = None
    if max_items is not None and max_items <= len(elems):
        elems, rest = elems[:max_items], None
    if max_items is not None and max_items < min_items:
        return t.NEVER
    if rest is None and min_items > len(elems):
        return t.NEVER
    required = min(min_items, len(elems))
    if rest is not None and len(elems) < min_items <= MAX_TUPLE_EXPANSION:
        elems += [rest] * (min_items - len(elems))
        required = min_items
    if rest is not None and max_items is not None and len(elems) < max_items <= MAX_TUPLE_EXPANSION:
        elems += [rest] * (max_items - len(elems))
        rest = None
    # A required slot typed never, or an optional one followed by more: keep TS honest.
    if any(e == t.NEVER for e in elems[:required]):
        return t.NEVER
    if not elems and rest is not None:
        return t.Array(rest)
    return t.Tuple(tuple(elems), required, rest)


def merge_types(x: t.TypeNode, y: t.TypeNode) -> t.TypeNode | None:
    """`x & y` as one object type, distributing over a small union of object types."""
    if isinstance(x, t.Object) and isinstance(y, t.Object):
        return merge_objects(x, y)
    if isinstance(x, t.Union) and isinstance(y, t.Object):
        x, y = y, x
    if (
        isinstance(x, t.Object)
        and isinstance(y, t.Union)
        and len(y.members) <= MAX_DISTRIBUTE
        and all(isinstance(m, t.Object) for m in y.members)
    ):
        merged = [merge_objects(x, m) for m in y.members if isinstance(m, t.Object)]
        if all(m is not None for m in merged):
            return t.union([m for m in merged if m is not None])
    return None


def _key_type(obj: t.Object, name: str) -> t.TypeNode | None:
    """What `obj` requires of an undeclared property `name`; None when it forbids it."""
    parts = [typ for key, typ in obj.patterns if template_matches(key, name)]
    if obj.index is not None:
        parts.append(obj.index)
    return t.intersection(parts) if parts else None


def merge_objects(a: t.Object, b: t.Object) -> t.TypeNode | None:
    """One object type for `a & b` (keeps excess-property checks that `&` would lose).

    Every property gets the conjunction of what both sides demand of it; a name one side
    forbids must be absent. None when a side has no index signature information to merge.
    """
    if len(a.properties) + len(b.properties) > 2 * MAX_PROPERTIES:
        return None
    own_a = {p.name: p for p in a.properties}
    own_b = {p.name: p for p in b.properties}
    props: list[t.Property] = []
    for name in [*own_a, *(n for n in own_b if n not in own_a)]:
        pa, pb = own_a.get(name), own_b.get(name)
        ta = pa.type if pa is not None else _key_type(a, name)
        tb = pb.type if pb is not None else _key_type(b, name)
        required = (pa is not None and not pa.optional) or (pb is not None and not pb.optional)
        if ta is None or tb is None:
            if required:
                return t.NEVER
            continue  # one side forbids it: it must be absent
        typ = t.intersection([ta, tb])
        if typ == t.NEVER and required:
            return t.NEVER
        first = pa if pa is not None else pb
        assert first is not None
        readonly = (pa is not None and pa.readonly) or (pb is not None and pb.readonly)
        props.append(t.Property(name, typ, optional=not required, readonly=readonly, doc=first.doc))
    optional = [p for p in props if p.optional]
    index: t.TypeNode | None = None
    if a.index is not None and b.index is not None:
        index = t.intersection([a.index, b.index])
        if optional and index != t.UNKNOWN:
            index = t.union([index, t.UNDEFINED])
    elif a.index is None and b.index is None and not props:
        index = t.NEVER
    patterns = []
    for key, typ in [*a.patterns, *b.patterns]:
        if any(template_matches(key, p.name) for p in optional):
            typ = t.union([typ, t.UNDEFINED])
        patterns.append((key, typ))
    if index is None and not props and not patterns:
        index = t.NEVER
    return t.Object(tuple(props), index, patterns=finish_patterns(patterns, index))


def close_object(
    node: t.TypeNode | None,
    allowed: Sequence[str],
    expand: Callable[[str], t.TypeNode | None] | None = None,
) -> t.TypeNode:
    """Restrict an object type to the property names in `allowed` (an exact object type).

    `expand` inlines (one level of) named types so they can be closed too.
    """
    if node is None:
        node = t.Object(index=t.UNKNOWN)
    if isinstance(node, t.Union):
        return t.union([close_object(m, allowed, expand) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([close_object(m, allowed, expand) for m in node.members])
    if isinstance(node, t.Ref) and expand is not None:
        inner = expand(node.name)
        return node if inner is None else close_object(inner, allowed, None)
    if not isinstance(node, t.Object):
        return node  # a named type: left open (wider, still sound)
    keep = set(allowed)
    props: list[t.Property] = []
    for prop in node.properties:
        if prop.name in keep:
            props.append(prop)
        elif not prop.optional:
            return t.NEVER  # a required property that may not exist
    declared = {p.name for p in props}
    for name in allowed:
        if name in declared:
            continue
        parts = [typ for key, typ in node.patterns if template_matches(key, name)]
        if node.index is not None:
            parts.append(node.index)
        if not parts:
            continue  # this member already forbids the name
        typ = t.intersection(parts)
        if name in OBJECT_PROTOTYPE_MEMBERS:
            typ = t.union([typ, FUNCTION])
        props.append(t.Property(name, typ, optional=True))
    return t.Object(tuple(props), None if props else t.NEVER)


def limit_items(node: t.TypeNode | None, count: int, rest: t.TypeNode | None) -> t.TypeNode:
    """Items after the first `count` must match `rest` (None: must not exist)."""
    if node is None:
        node = t.Array(t.UNKNOWN)
    if isinstance(node, t.Union):
        return t.union([limit_items(m, count, rest) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([limit_items(m, count, rest) for m in node.members])
    if isinstance(node, t.Array):
        node = t.Tuple((), 0, node.element)
    if not isinstance(node, t.Tuple):
        return node
    elems = list(node.elements)
    required = node.required
    tail = node.rest
    if len(elems) < count and tail is not None:
        elems += [tail] * (count - len(elems))
    if rest is None:
        if required > count:
            return t.NEVER
        return t.Tuple(tuple(elems[:count]), min(required, count), None)
    elems = elems[:count] + [t.intersection([e, rest]) for e in elems[count:]]
    new_tail = None if tail is None else t.intersection([tail, rest])
    if not elems and new_tail is not None:
        return t.Array(new_tail)
    return t.Tuple(tuple(elems), required, new_tail)
