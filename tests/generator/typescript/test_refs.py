"""`$ref` resolution within one document (spec §6.2): pointers, anchors, `$id` scopes."""

from __future__ import annotations

from typing import Any

import pytest

from codemode_gen.generator.typescript.refs import Resolver, join_pointer, resolve_uri

DOC: dict[str, Any] = {
    "$defs": {
        "a": {"type": "string"},
        "x/y": {"type": "number"},
        "t~n": {"type": "boolean"},
        "p%q": {"type": "null"},
        "anchored": {"$anchor": "here", "type": "integer"},
        "scoped": {
            "$id": "https://example.com/scoped.json",
            "$defs": {"inner": {"const": 1}},
            "properties": {"r": {"$ref": "#/$defs/inner"}},
        },
    },
    "properties": {"list": {"type": "array", "items": [{"const": "first"}]}},
    "const": {"$id": "https://example.com/data-not-schema.json"},
}


@pytest.mark.parametrize(
    ("ref", "pointer"),
    [
        ("#", ""),
        ("#/$defs/a", "/$defs/a"),
        ("#/$defs/x~1y", "/$defs/x~1y"),
        ("#/$defs/t~0n", "/$defs/t~0n"),
        ("#/$defs/p%25q", "/$defs/p%q"),
        ("#/properties/list/items/0", "/properties/list/items/0"),
        ("#here", "/$defs/anchored"),
        ("https://example.com/scoped.json", "/$defs/scoped"),
        ("https://example.com/scoped.json#/$defs/inner", "/$defs/scoped/$defs/inner"),
    ],
)
def test_local_refs_resolve(ref: str, pointer: str) -> None:
    target = Resolver(DOC).resolve(ref, "")
    assert target is not None
    assert target.pointer == pointer


def test_fragment_refs_resolve_against_the_enclosing_id() -> None:
    resolver = Resolver(DOC)
    target = resolver.resolve("#/$defs/inner", "/$defs/scoped/properties/r")
    assert target is not None and target.node == {"const": 1}
    assert resolver.resolve("#/$defs/inner", "") is None  # no such pointer at the root


@pytest.mark.parametrize(
    "ref",
    ["#/$defs/missing", "https://example.com/other.json", "other.json", "#nope", "#/properties/list/items/5",
     "https://example.com/data-not-schema.json"],
)  # fmt: skip
def test_non_local_or_missing_refs_are_none(ref: str) -> None:
    assert Resolver(DOC).resolve(ref, "") is None


def test_draft7_id_fragment_is_an_anchor() -> None:
    doc = {"definitions": {"a": {"$id": "#foo", "type": "string"}}}
    target = Resolver(doc, draft=7).resolve("#foo", "")
    assert target is not None and target.pointer == "/definitions/a"


def test_relative_id_resolution() -> None:
    doc = {
        "$id": "http://h/root/main.json",
        "$defs": {"b": {"$id": "sub/b.json", "type": "string"}},
    }
    target = Resolver(doc).resolve("sub/b.json", "")
    assert target is not None and target.pointer == "/$defs/b"
    assert resolve_uri("urn:uuid:1234", "#/a") == "urn:uuid:1234#/a"
    assert resolve_uri("http://a/b/c.json", "/d.json") == "http://a/d.json"


def test_hostile_depth_does_not_crash_the_index() -> None:
    doc: dict[str, Any] = {}
    node = doc
    for _ in range(5000):
        node["not"] = {}
        node = node["not"]
    Resolver(doc)  # bounded walk, no RecursionError


def test_join_pointer_escapes() -> None:
    assert join_pointer("", "a/b", "c~d", 0) == "/a~1b/c~0d/0"
