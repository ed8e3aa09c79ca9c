"""runtime/host/hints_schema.py: reading a tool's output schema for the hints of a failed run (§3.3.3)."""

from __future__ import annotations

from typing import Any

from codemode_gen.runtime.host.hints_schema import (
    MAX_REF_HOPS,
    MAX_SNIPPET_CHARS,
    cut,
    declared_return,
    json_text,
    nullable,
    resolve,
    schema_at,
    schema_kind,
    shape,
)

NOTE: dict[str, Any] = {
    "type": "object",
    "title": "Note",
    "properties": {
        "id": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
BOXED: dict[str, Any] = {
    "type": "object",
    "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Note"}}},
    "$defs": {"Note": NOTE},
}


def test_resolve_follows_local_refs_and_drops_null_from_a_union() -> None:
    assert resolve({"$ref": "#/$defs/Note"}, BOXED) == NOTE
    assert resolve({"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Note"}]}, BOXED) == NOTE
    # Two real options stay a union; a non-schema is {}.
    union = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    assert resolve(union, {}) == union
    assert resolve("not a schema", {}) == {}


def test_a_ref_cycle_ends_after_max_ref_hops() -> None:
    root: dict[str, Any] = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}
    assert MAX_REF_HOPS > 0
    got = resolve({"$ref": "#/$defs/A"}, root)
    assert got in ({"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"})  # stopped, not looping


def test_kind_and_nullable_read_type_lists_and_implied_kinds() -> None:
    assert schema_kind({"type": ["string", "null"]}) == "string"
    assert schema_kind({"properties": {}}) == "object"
    assert schema_kind({"items": {}}) == "array"
    assert schema_kind({"type": ["string", "integer"]}) is None
    assert nullable({"type": ["string", "null"]}) and nullable({"anyOf": [{"type": "null"}, {}]})
    assert not nullable({"type": "string"}) and not nullable(None)


def test_json_text_is_a_string_recorded_as_json() -> None:
    assert json_text({"type": "string", "contentMediaType": "application/json; charset=utf-8"})
    assert not json_text({"type": "string", "contentMediaType": "text/plain"})
    assert not json_text({"type": "string"})


def test_schema_at_walks_fields_and_items() -> None:
    assert schema_at(BOXED, ["result", 0]) == {"$ref": "#/$defs/Note"}
    assert schema_at(BOXED, ["missing"]) is None


def test_shape_names_titled_refs_and_cuts_wide_objects() -> None:
    assert shape(BOXED, BOXED) == "{ result: Note[] }"
    wide = {"type": "object", "properties": {k: {"type": "string"} for k in "abcdef"}}
    assert shape(wide, wide) == "{ a: string, b: string, c: string, d: string, … }"
    assert shape({}, {}) == "unknown"


def test_declared_return_reads_the_promise_of_a_declaration() -> None:
    assert (
        declared_return("export function list_notes(input?: {}): Promise<{ result: Array<Note> }>;")
        == "{ result: Array<Note> }"
    )
    assert declared_return("export function f(): void;") is None
    assert declared_return(None) is None


def test_cut_keeps_at_most_max_snippet_chars() -> None:
    assert cut("short") == "short"
    long = "x" * (MAX_SNIPPET_CHARS + 10)
    assert len(cut(long)) == MAX_SNIPPET_CHARS and cut(long).endswith("…")
