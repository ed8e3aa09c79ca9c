"""runtime/host/validation.py: input checks before a call (spec §5.3.1, §7.2)."""

from __future__ import annotations

from typing import Any

import pytest

from codemode_gen.runtime.host.schema_examples import MAX_EXAMPLE_DEPTH, example_for
from codemode_gen.runtime.host.validation import is_object_schema, prepare_arguments
from codemode_gen.runtime.host.validation_errors import InputInvalid

NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}},
        "kind": {"enum": ["note", "todo"]},
        "meta": {
            "type": "object",
            "properties": {"due": {"type": "string", "format": "date"}},
            "required": ["due"],
        },
    },
    "required": ["title"],
    "additionalProperties": False,
}


def invalid(schema: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(InputInvalid) as info:
        prepare_arguments(schema, "create_note", "createNote", *args)
    return info.value.payload()


def test_s7_2_missing_required_property_points_at_it() -> None:
    p = invalid(NOTE_SCHEMA, {})
    assert p["errorClass"] == "SchemaValidationError"
    assert (p["toolName"], p["exportName"]) == ("create_note", "createNote")
    assert p["path"] == "/title"
    assert p["expected"] == "string" and p["received"] == "undefined"
    assert "title" in p["hint"]
    assert p["example"] == {"title": "x"}


def test_s7_2_wrong_type_reports_expected_and_received() -> None:
    p = invalid(NOTE_SCHEMA, {"title": 42})
    assert p["path"] == "/title"
    assert p["expected"] == "string"
    assert p["received"] == "integer 42"
    assert p["hint"].startswith("Pass `input.title` as a string")


def test_s7_2_nested_pointer_into_arrays_and_objects() -> None:
    assert invalid(NOTE_SCHEMA, {"title": "a", "tags": ["x", 2]})["path"] == "/tags/1"
    p = invalid(NOTE_SCHEMA, {"title": "a", "meta": {}})
    assert p["path"] == "/meta/due"


def test_s7_2_enum_minimum_and_extra_property() -> None:
    p = invalid(NOTE_SCHEMA, {"title": "a", "kind": "memo"})
    assert p["expected"] == 'one of "note", "todo"' and p["received"] == 'string "memo"'
    p = invalid(NOTE_SCHEMA, {"title": "a", "limit": 0})
    assert p["expected"] == "a number >= 1" and p["path"] == "/limit"
    p = invalid(NOTE_SCHEMA, {"title": "a", "colour": "red"})
    assert p["path"] == "/colour" and "colour" in p["received"] and p["hint"].startswith("Remove")


def test_s7_2_pointer_escapes_slash_and_tilde() -> None:
    schema = {"type": "object", "properties": {"a/b~c": {"type": "integer"}}}
    assert invalid(schema, {"a/b~c": "no"})["path"] == "/a~1b~0c"


def test_s7_2_received_values_are_clipped() -> None:
    p = invalid(
        NOTE_SCHEMA, {"title": 1, "x": "y"} | {"title": "z" * 10_000, "limit": "q" * 10_000}
    )
    assert len(p["received"]) < 100


def test_s7_2_example_prefers_schema_examples_then_default() -> None:
    assert example_for({"type": "object", "examples": [{"room": "A"}], "required": ["room"]}) == {
        "room": "A"
    }
    schema = {
        "type": "object",
        "required": ["n", "mode"],
        "properties": {"n": {"type": "integer", "default": 5}, "mode": {"const": "fast"}},
    }
    assert example_for(schema) == {"n": 5, "mode": "fast"}


def test_s7_2_example_synthesis_is_bounded_on_recursive_schemas() -> None:
    schema = {
        "$ref": "#/$defs/node",
        "$defs": {
            "node": {
                "type": "object",
                "required": ["child"],
                "properties": {"child": {"$ref": "#/$defs/node"}},
            }
        },
    }
    value = example_for(schema)
    depth = 0
    while isinstance(value, dict):
        value = value["child"]
        depth += 1
    assert 1 <= depth <= MAX_EXAMPLE_DEPTH + 1


def test_s5_3_1_no_argument_tools_accept_nothing_and_empty_object() -> None:
    for schema in (None, {}, {"type": "object"}, {"type": "object", "properties": {}}):
        assert prepare_arguments(schema, "t", "t") == {}
        assert prepare_arguments(schema, "t", "t", {}) == {}


def test_s5_3_1_non_object_root_takes_the_value_itself() -> None:
    schema = {"type": "array", "items": {"type": "number"}}
    assert not is_object_schema(schema)
    assert prepare_arguments(schema, "total", "total", [1, 2.5]) == [1, 2.5]
    p = invalid(schema, ["1"])
    assert p["path"] == "/0"
    p = invalid(schema)
    assert p["received"] == "undefined" and p["expected"] == "array"


def test_invalid_schemas_are_not_enforced() -> None:
    broken = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    assert prepare_arguments(broken, "t", "t", {"a": 1}) == {"a": 1}


def test_every_error_has_a_single_sentence_hint() -> None:
    for args in ({}, {"title": 3}, {"title": "a", "kind": 1}, {"title": ""}):
        hint = invalid(NOTE_SCHEMA, args)["hint"]
        assert hint and hint.endswith(".") and "\n" not in hint
