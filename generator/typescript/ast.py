"""A small TypeScript type AST: the seam between schema semantics and text layout.

Translation decides *what* type a schema means; the printer decides *how* it looks. Keeping
the nodes frozen and hashable lets the translator deduplicate union members and compare
types structurally (e.g. "is this the unconstrained object type?") without printing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as TLiteral

KeywordName = TLiteral[
    "string", "number", "boolean", "null", "unknown", "never", "any", "undefined"
]


@dataclass(frozen=True)
class Keyword:
    name: KeywordName


@dataclass(frozen=True, eq=False)
class Literal:
    """A literal type; `value` is a JSON primitive (str, finite int/float, bool).

    Equality is JSON equality (`true` is not `1`, `1` is `1.0`): Python's would merge
    `Literal(True)` and `Literal(1)` when deduplicating union members.
    """

    value: str | int | float | bool

    def _key(self) -> tuple[str, object]:
        return (
            type(self.value).__name__ if isinstance(self.value, (bool, str)) else "number",
            self.value,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Ref:
    """A reference to a named declaration in the same module."""

    name: str


@dataclass(frozen=True)
class Array:
    element: TypeNode


@dataclass(frozen=True)
class Tuple:
    """`[required..., optional?..., ...rest[]]`; `elements[:required]` are mandatory."""

    elements: tuple[TypeNode, ...]
    required: int
    rest: TypeNode | None = None


@dataclass(frozen=True)
class Property:
    name: str
    type: TypeNode
    optional: bool = False
    readonly: bool = False
    doc: tuple[str, ...] = ()


def make_property(
    name: str, type: TypeNode, optional: bool, readonly: bool, doc: tuple[str, ...]
) -> Property:
    """`Property(...)` for the translator's hottest loop (one call per schema property).

    The frozen dataclass `__init__` pays one `object.__setattr__` per field; filling the
    instance dict directly builds the identical object (same fields, equality, hash, repr,
    and still frozen) in about half the time.
    """
    prop = object.__new__(Property)
    prop.__dict__.update(name=name, type=type, optional=optional, readonly=readonly, doc=doc)
    return prop


@dataclass(frozen=True)
class TemplateKey:
    """A template-literal key type: `${string}` + literal + `${string}`, either side optional."""

    literal: str
    any_before: bool
    any_after: bool


@dataclass(frozen=True)
class Object:
    """An object type; `index` is the value type of a `[k: string]` signature, if any;
    `patterns` are `[k: `…${string}`]` signatures from literal patternProperties."""

    properties: tuple[Property, ...] = ()
    index: TypeNode | None = None
    index_doc: tuple[str, ...] = field(default=())
    patterns: tuple[tuple[TemplateKey, TypeNode], ...] = ()


@dataclass(frozen=True)
class Union:
    members: tuple[TypeNode, ...]


@dataclass(frozen=True)
class Intersection:
    members: tuple[TypeNode, ...]


TypeNode = Keyword | Literal | Ref | Array | Tuple | Object | Union | Intersection

UNKNOWN = Keyword("unknown")
NEVER = Keyword("never")
STRING = Keyword("string")
NUMBER = Keyword("number")
BOOLEAN = Keyword("boolean")
NULL = Keyword("null")
UNDEFINED = Keyword("undefined")
ANY = Keyword("any")


def is_never(node: TypeNode) -> bool:
    """`node == NEVER`, without dataclass equality's two method calls (a hot check)."""
    return type(node) is Keyword and node.name == "never"


# Unions up to this many members deduplicate by equality instead of hashing.
SMALL_UNION = 8


def union(members: list[TypeNode] | tuple[TypeNode, ...]) -> TypeNode:
    """Flatten, deduplicate and simplify (`unknown` absorbs, `never` vanishes)."""
    if len(members) == 1 and not isinstance(members[0], Union):
        return members[0]
    parts: list[TypeNode] = []
    for m in members:
        if isinstance(m, Union):
            parts.extend(m.members)
        else:
            parts.append(m)
    # Few members (the common case) are deduplicated by equality within their node type
    # (nodes of different types are never equal): hashing would walk every member's whole
    # subtree, as frozen dataclasses do not cache their hash.
    small = len(parts) <= SMALL_UNION
    flat: list[TypeNode] = []
    by_type: dict[type, list[TypeNode]] = {}
    seen: dict[TypeNode, None] = {}
    keywords: set[str] = set()
    literals = False
    for p in parts:
        kind = type(p)
        if kind is Keyword:  # only a Keyword equals a keyword (cheaper than ==)
            name = p.name  # type: ignore[union-attr]
            if name == "unknown" or name == "any":
                return p
            if name == "never":
                continue
            keywords.add(name)
        elif kind is Literal:
            literals = True
        if small:
            same = by_type.get(kind)
            if same is None:
                by_type[kind] = [p]
            elif p in same:
                continue
            else:
                same.append(p)
            flat.append(p)
        elif p not in seen:
            seen[p] = None
            flat.append(p)
    if literals and "boolean" in keywords:
        flat = [p for p in flat if not (isinstance(p, Literal) and isinstance(p.value, bool))]
    if literals and "string" in keywords:
        flat = [p for p in flat if not (isinstance(p, Literal) and isinstance(p.value, str))]
    if literals and "number" in keywords:
        flat = [
            p
            for p in flat
            if not (
                isinstance(p, Literal)
                and isinstance(p.value, (int, float))
                and not isinstance(p.value, bool)
            )
        ]
    if not flat:
        return NEVER
    if len(flat) == 1:
        return flat[0]
    return Union(tuple(flat))


def intersection(members: list[TypeNode] | tuple[TypeNode, ...]) -> TypeNode:
    """Flatten, deduplicate and simplify (`never` absorbs, `unknown` vanishes)."""
    if len(members) == 1 and not isinstance(members[0], Intersection):
        return members[0]
    flat: list[TypeNode] = []
    for m in members:
        parts = m.members if isinstance(m, Intersection) else (m,)
        for p in parts:
            if p == NEVER:
                return NEVER
            if p == UNKNOWN or p in flat:
                continue
            flat.append(p)
    # `A & (A | B)` is `A`: drop a union that already contains another member.
    plain = [p for p in flat if not isinstance(p, Union)]
    flat = [p for p in flat if not (isinstance(p, Union) and any(q in p.members for q in plain))]
    if not flat:
        return UNKNOWN
    if len(flat) == 1:
        return flat[0]
    return Intersection(tuple(flat))


def walk(node: TypeNode) -> list[TypeNode]:
    """All nodes below and including `node`, pre-order."""
    out: list[TypeNode] = [node]
    if isinstance(node, Array):
        out += walk(node.element)
    elif isinstance(node, Tuple):
        for e in node.elements:
            out += walk(e)
        if node.rest is not None:
            out += walk(node.rest)
    elif isinstance(node, Object):
        for p in node.properties:
            out += walk(p.type)
        if node.index is not None:
            out += walk(node.index)
        for _, typ in node.patterns:
            out += walk(typ)
    elif isinstance(node, (Union, Intersection)):
        for m in node.members:
            out += walk(m)
    return out


def close_objects(node: TypeNode) -> TypeNode:
    """`node` without the `[k: string]: unknown` of objects that declare properties.

    For values the agent writes (tool inputs): the index signature only says "other keys are
    allowed", which a caller never needs, and dropping it narrows the type (still sound for
    an input). An object with no declared property keeps it: it is a free-form map.
    """
    kind = type(node)
    if kind is Object:
        assert isinstance(node, Object)
        props = tuple(
            make_property(p.name, close_objects(p.type), p.optional, p.readonly, p.doc)
            for p in node.properties
        )
        index = node.index
        if index is not None and props and index == UNKNOWN:
            index = None
        elif index is not None:
            index = close_objects(index)
        patterns = tuple((k, close_objects(v)) for k, v in node.patterns)
        return Object(props, index, node.index_doc if index is not None else (), patterns)
    if kind is Array:
        assert isinstance(node, Array)
        return Array(close_objects(node.element))
    if kind is Tuple:
        assert isinstance(node, Tuple)
        rest = close_objects(node.rest) if node.rest is not None else None
        return Tuple(tuple(close_objects(e) for e in node.elements), node.required, rest)
    if kind is Union:
        assert isinstance(node, Union)
        return Union(tuple(close_objects(m) for m in node.members))
    if kind is Intersection:
        assert isinstance(node, Intersection)
        return Intersection(tuple(close_objects(m) for m in node.members))
    return node
