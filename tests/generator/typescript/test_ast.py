"""The TS type AST's simplifying constructors (used for deduplication and soundness)."""

from __future__ import annotations

import dataclasses

import pytest

from codemode_gen.generator.typescript import ast as t


def test_union_flattens_dedupes_and_absorbs() -> None:
    a, b = t.Ref("A"), t.Ref("B")
    assert t.union([a, t.Union((b, a)), t.NEVER]) == t.Union((a, b))
    assert t.union([a, t.UNKNOWN]) == t.UNKNOWN
    assert t.union([]) == t.NEVER
    assert t.union([t.NEVER, a]) == a


def test_union_drops_literals_covered_by_their_keyword() -> None:
    members: list[t.TypeNode] = [t.Literal("x"), t.STRING, t.Literal(1), t.Literal(True), t.BOOLEAN]
    assert t.union(members) == t.Union((t.STRING, t.Literal(1), t.BOOLEAN))


def test_intersection_flattens_and_absorbs() -> None:
    a, b = t.Ref("A"), t.Ref("B")
    assert t.intersection([a, t.Intersection((b, a)), t.UNKNOWN]) == t.Intersection((a, b))
    assert t.intersection([a, t.NEVER]) == t.NEVER
    assert t.intersection([]) == t.UNKNOWN


def test_intersection_drops_unions_that_contain_another_member() -> None:
    u = t.Union((t.STRING, t.NUMBER))
    assert t.intersection([t.NUMBER, u]) == t.NUMBER
    assert t.intersection([t.Ref("A"), u]) == t.Intersection((t.Ref("A"), u))


def test_literal_equality_is_json_equality() -> None:
    assert t.Literal(True) != t.Literal(1)
    assert t.Literal(0) != t.Literal(False)
    assert t.Literal(1) == t.Literal(1.0)
    assert len({t.Literal(True), t.Literal(1), t.Literal(1.0), t.Literal("1")}) == 3
    assert t.union([t.Literal(True), t.Literal(1)]) == t.Union((t.Literal(True), t.Literal(1)))


def test_walk_visits_every_node() -> None:
    node = t.Object(
        (t.Property("a", t.Array(t.Ref("X"))),),
        t.Union((t.NULL, t.Tuple((t.Ref("Y"),), 1, t.Ref("Z")))),
        patterns=((t.TemplateKey("p", False, True), t.Ref("W")),),
    )
    refs = {n.name for n in t.walk(node) if isinstance(n, t.Ref)}
    assert refs == {"X", "Y", "Z", "W"}


def test_union_deduplicates_the_same_with_and_without_hashing() -> None:
    """Small unions deduplicate by equality, large ones by hashing: the results agree."""
    obj = t.Object((t.Property("a", t.STRING),), t.UNKNOWN)
    same_obj = t.Object((t.Property("a", t.STRING),), t.UNKNOWN)
    parts: list[t.TypeNode] = [obj, t.NULL, same_obj, t.Literal(True), t.BOOLEAN, t.Literal(1)]
    assert len(parts) <= t.SMALL_UNION
    small = t.union(parts)
    padding = [t.Literal(f"s{i}") for i in range(t.SMALL_UNION)]
    large = t.union([*parts, *padding])
    assert small == t.Union((obj, t.NULL, t.BOOLEAN, t.Literal(1)))
    assert large == t.Union((obj, t.NULL, t.BOOLEAN, t.Literal(1), *padding))
    assert t.union([t.Literal("x"), t.STRING, t.NEVER]) == t.STRING
    assert t.union([t.Keyword("any"), obj]) == t.ANY


def test_is_never_is_keyword_equality() -> None:
    assert t.is_never(t.NEVER) and t.is_never(t.Keyword("never"))
    assert not t.is_never(t.UNKNOWN) and not t.is_never(t.Literal("never"))
    assert not t.is_never(t.Ref("never"))


def test_make_property_builds_the_same_frozen_property() -> None:
    fast = t.make_property("a", t.STRING, True, False, ("doc",))
    slow = t.Property("a", t.STRING, optional=True, readonly=False, doc=("doc",))
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert type(fast) is t.Property and dataclasses.asdict(fast) == dataclasses.asdict(slow)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.name = "b"  # type: ignore[misc]  # assigning a frozen field is the point
