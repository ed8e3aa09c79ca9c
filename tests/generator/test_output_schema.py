"""Declared outputSchema vs recorded samples: precedence, drift, and the `none` case."""

from __future__ import annotations

import json
from typing import Any

from codemode_gen.generator.output_schema import MAX_DRIFT_PER_TOOL, merge_output

NOTE_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "title": {"type": "string"}},
    "required": ["id", "title"],
}


def structured(value: Any, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": json.dumps(value)}],
        "structuredContent": value,
    }
    if is_error:
        result = {"content": [{"type": "text", "text": "failed"}], "isError": True}
    return {"input": {}, "result": result}


def test_declared_output_schema_wins_over_samples() -> None:
    tool = {"name": "get_note", "outputSchema": NOTE_SCHEMA}
    out = merge_output(tool, [structured({"id": 1, "title": "a", "extra": [1]})])
    assert out.source == "declared"
    assert out.schema == NOTE_SCHEMA
    assert out.inferred is not None and "extra" in out.inferred["properties"]
    assert out.drift == ()
    assert out.samples == 1


def test_drift_names_pointer_expected_got_and_sample() -> None:
    tool = {"name": "get_note", "outputSchema": NOTE_SCHEMA}
    calls = [
        structured({"id": 1, "title": "a"}),
        structured({"id": "one", "title": "b"}),
        structured({"id": 3}),
    ]
    out = merge_output(tool, calls)
    assert out.drift == (
        "/id: expected integer, got string (sample 2)",
        '/: expected required properties "title", got object without them (sample 3)',
    )


def test_drift_in_nested_arrays_uses_json_pointer() -> None:
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": NOTE_SCHEMA}}}
    out = merge_output(
        {"name": "t", "outputSchema": schema},
        [structured({"items": [{"id": 1, "title": "a"}, {"id": 2.5, "title": "b"}]})],
    )
    assert out.drift == ("/items/1/id: expected integer, got number (sample 1)",)


def test_drift_when_server_ignores_its_schema_and_returns_text() -> None:
    call = {"result": {"content": [{"type": "text", "text": "just text"}]}}
    out = merge_output({"name": "t", "outputSchema": NOTE_SCHEMA}, [call])
    assert out.drift == ("/: expected object, got string (sample 1)",)


def test_draft_follows_dollar_schema() -> None:
    # draft-04 exclusiveMaximum is a boolean; 2020-12 would reject that schema
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 10, "exclusiveMaximum": True}},
    }
    out = merge_output({"name": "t", "outputSchema": schema}, [structured({"n": 10})])
    assert out.warnings == ()
    assert out.drift == ("/n: expected maximum 10, got 10 (sample 1)",)


def test_invalid_declared_schema_is_a_warning_not_a_crash() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "nonsense"}}}
    out = merge_output({"name": "t", "outputSchema": schema}, [structured({"n": 1})])
    assert out.source == "declared"
    assert out.drift == ()
    assert any("not a valid JSON Schema" in w for w in out.warnings)


def test_drift_is_bounded() -> None:
    calls = [structured({"id": "x", "title": 1}) for _ in range(MAX_DRIFT_PER_TOOL)]
    out = merge_output({"name": "t", "outputSchema": NOTE_SCHEMA}, calls)
    assert len(out.drift) == MAX_DRIFT_PER_TOOL
    assert out.warnings == (f"{MAX_DRIFT_PER_TOOL} more drift findings not listed",)


def test_drift_values_are_short() -> None:
    schema = {"type": "object", "properties": {"s": {"enum": ["a"]}}}
    out = merge_output({"name": "t", "outputSchema": schema}, [structured({"s": "x" * 10_000})])
    assert len(out.drift) == 1 and len(out.drift[0]) < 200


def test_is_error_samples_are_neither_inferred_nor_drift() -> None:
    calls = [structured(None, is_error=True), structured({"id": 1, "title": "a"})]
    declared = merge_output({"name": "t", "outputSchema": NOTE_SCHEMA}, calls)
    assert declared.drift == () and declared.samples == 1
    inferred = merge_output({"name": "t"}, calls)
    assert inferred.source == "inferred" and inferred.samples == 1
    assert inferred.schema == NOTE_SCHEMA | {"required": ["id", "title"]}


def test_inferred_when_no_declared_schema() -> None:
    out = merge_output({"name": "t"}, [structured({"id": 1}), structured({"id": 2, "x": "y"})])
    assert out.source == "inferred"
    assert out.declared is None
    assert out.optional == ("x",)


def test_none_without_schema_or_samples() -> None:
    out = merge_output({"name": "t"}, [])
    assert (out.source, out.schema, out.samples) == ("none", None, 0)
    only_errors = merge_output({"name": "t"}, [structured(None, is_error=True)])
    assert only_errors.source == "none"


def test_non_object_output_schema_is_ignored_with_a_warning() -> None:
    out = merge_output({"name": "t", "outputSchema": "string"}, [])
    assert out.source == "none"
    assert out.warnings == ("outputSchema ignored: expected an object, got string",)


def test_json_text_passes_through_merge() -> None:
    calls = [{"result": {"content": [{"type": "text", "text": '{"a": 1}'}]}}]
    out = merge_output({"name": "t"}, calls)
    assert out.json_text and out.json_schema is not None
    as_json = merge_output({"name": "t"}, calls, mode="json")
    assert (
        not as_json.json_text and as_json.schema is not None and as_json.schema["type"] == "object"
    )


def test_remote_refs_are_never_fetched() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/never.json"}}}
    out = merge_output({"name": "t", "outputSchema": schema}, [structured({"a": 1})])
    assert out.source == "declared" and out.drift == ()
    assert out.warnings == (
        "drift not checked from sample 1 on: Unresolvable: http://127.0.0.1:9/never.json",
    )


def test_local_refs_are_followed() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "string"}},
    }
    out = merge_output({"name": "t", "outputSchema": schema}, [structured({"a": 1})])
    assert out.drift == ("/a: expected string, got integer (sample 1)",)


def test_non_string_dollar_schema_is_a_warning() -> None:
    out = merge_output(
        {"name": "t", "outputSchema": {"$schema": 5, "type": "object"}}, [structured({"a": 1})]
    )
    assert out.source == "declared"
    assert any("not a valid JSON Schema" in w for w in out.warnings)
