"""Schema normalisation: every draft spelling maps onto one vocabulary (spec §6.2)."""

from __future__ import annotations

from typing import Any

import pytest

from codemode_gen.generator.typescript.normalize import (
    detect_draft,
    json_equal,
    json_kind,
    normalize,
)


def norm(node: dict[str, Any], draft: int = 2020) -> tuple[dict[str, Any], list[str]]:
    warnings: list[str] = []
    out = normalize(node, "/p", draft, lambda ptr, kw, msg: warnings.append(f"{ptr} {kw}: {msg}"))
    return out, warnings


def test_type_string_becomes_list_and_duplicates_go() -> None:
    assert norm({"type": "string"})[0]["type"] == ["string"]
    assert norm({"type": ["string", "null", "string"]})[0]["type"] == ["string", "null"]


@pytest.mark.parametrize("bad", [5, [], [1], None, {"a": 1}])
def test_malformed_type_dropped_with_warning(bad: Any) -> None:
    out, warnings = norm({"type": bad})
    assert "type" not in out
    assert warnings == ["/p type: malformed `type` ignored"]


def test_unknown_type_name_allows_everything_with_warning() -> None:
    out, warnings = norm({"type": ["string", "any"]})
    assert "type" not in out
    assert "unknown type name(s) 'any'" in warnings[0]


def test_nullable_adds_null_to_type_and_enum() -> None:
    assert norm({"type": "integer", "nullable": True})[0]["type"] == ["integer", "null"]
    assert norm({"enum": ["a"], "nullable": True})[0]["enum"] == ["a", None]
    assert norm({"type": "integer", "nullable": False})[0]["type"] == ["integer"]


def test_const_becomes_enum_and_intersects_enum() -> None:
    out, _ = norm({"const": {"a": 1}})
    assert out["enum"] == [{"a": 1}] and "const" not in out
    assert norm({"const": 1, "enum": [True, 1.0, "1"]})[0]["enum"] == [1.0]
    assert norm({"const": None})[0]["enum"] == [None]


def test_json_equality_distinguishes_booleans_from_numbers() -> None:
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert json_equal(1, 1.0)
    assert json_equal({"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal([1], [1, 2])
    samples: list[Any] = [None, True, 1, 1.5, "s", [], {}]
    assert [json_kind(v) for v in samples] == [
        "null", "boolean", "number", "number", "string", "array", "object"
    ]  # fmt: skip


def test_draft7_items_array_becomes_prefix_items() -> None:
    out, _ = norm({"items": [{"type": "string"}], "additionalItems": False}, draft=7)
    assert out["prefixItems"] == [{"type": "string"}]
    assert out["items"] is False
    assert "additionalItems" not in out
    out, _ = norm({"items": [True]})
    assert out["prefixItems"] == [True] and "items" not in out


def test_additional_items_without_items_array_has_no_effect() -> None:
    out, _ = norm({"items": {"type": "string"}, "additionalItems": False}, draft=7)
    assert out["items"] == {"type": "string"} and "additionalItems" not in out


def test_prefix_items_is_not_a_keyword_before_2020() -> None:
    assert "prefixItems" not in norm({"prefixItems": [True]}, draft=7)[0]
    assert "prefixItems" not in norm({"prefixItems": [True]}, draft=2019)[0]
    assert "prefixItems" in norm({"prefixItems": [True]}, draft=2020)[0]


def test_dependencies_split() -> None:
    out, _ = norm({"dependencies": {"a": ["b"], "c": {"required": ["d"]}}}, draft=7)
    assert out["dependentRequired"] == {"a": ["b"]}
    assert out["dependentSchemas"] == {"c": {"required": ["d"]}}


def test_malformed_keywords_dropped() -> None:
    out, warnings = norm(
        {
            "properties": [1],
            "allOf": [],
            "anyOf": {"a": 1},
            "enum": "x",
            "required": "a",
            "minItems": -1,
            "maxItems": "3",
        }
    )
    for key in ("properties", "allOf", "anyOf", "enum", "required", "minItems", "maxItems"):
        assert key not in out
    assert len(warnings) == 6  # `required` that is not a list is draft-03 style, silently ignored


def test_required_keeps_strings_once() -> None:
    assert norm({"required": ["a", 1, "a", "b"]})[0]["required"] == ["a", "b"]


def test_item_counts_rounded_towards_validity() -> None:
    out, _ = norm({"minItems": 1.5, "maxItems": 2.5})
    assert (out["minItems"], out["maxItems"]) == (2, 2)


def test_normalize_does_not_mutate_input() -> None:
    node = {"type": "string", "const": "a", "nullable": True}
    norm(node)
    assert node == {"type": "string", "const": "a", "nullable": True}


@pytest.mark.parametrize(
    ("schema", "draft"),
    [
        ({"$schema": "http://json-schema.org/draft-07/schema#"}, 7),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, 7),
        ({"$schema": "https://json-schema.org/draft/2020-12/schema"}, 2020),
        ({"$schema": "https://json-schema.org/draft/2019-09/schema"}, 2019),
        ({}, 2020),
        (True, 2020),
    ],
)
def test_detect_draft(schema: Any, draft: int) -> None:
    assert detect_draft(schema) == draft
