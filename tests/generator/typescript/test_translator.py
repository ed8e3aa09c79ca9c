"""JSON Schema -> TypeScript translation (spec §6.2): expected text AND real-tsc behaviour.

Every case states the exact TypeScript it must produce, JSON values that are valid against
the schema (each must type-check: soundness) and values that are invalid in ways TypeScript
can express (each must be rejected: precision). All cases compile in ONE tsc run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pytest

from codemode_gen import safe_jsonschema
from codemode_gen.generator.typescript import NameScope, doc_comment, translate
from tests import tsc


@dataclass
class Case:
    schema: Any
    text: str  # expected text of the root declaration
    valid: list[Any] = field(default_factory=list)
    invalid: list[Any] = field(default_factory=list)
    helpers: dict[str, str] = field(default_factory=dict)  # expected helper declarations
    warns: tuple[str, ...] = ()  # substrings expected in the warnings
    validates: bool = True  # False: the validator itself cannot evaluate this schema


OPEN = "[k: string]: unknown;"
OPEN1 = "[k: string]: unknown"  # the same member in a one-line object (`{ a?: string; … }`)

CASES: dict[str, Case] = {
    "type_string": Case({"type": "string"}, "string", ["", "x"], [1, None, True, [], {}]),
    "type_integer_is_number": Case({"type": "integer"}, "number", [0, -3, 10**12], ["1", None]),
    "type_array_with_null": Case(
        {"type": ["string", "null"]}, "string | null", ["a", None], [1, True, []]
    ),
    # OpenAPI 3.0's keyword: a JSON Schema validator does not know it (validates=False).
    "nullable_true": Case(
        {"type": "integer", "nullable": True}, "number | null", [1, None], ["x"], validates=False
    ),
    "enum_literals": Case(
        {"enum": ["a", 1, True, None, {"k": [1, "x"]}]},
        '{ k: [1, "x"] } | "a" | 1 | true | null',
        ["a", 1, True, None, {"k": [1, "x"]}],
        ["b", 2, False, {"k": [1]}, {"k": [1, "x"], "z": 1}],
    ),
    "enum_filtered_by_type": Case(
        {"type": "string", "enum": ["a", 1, "b"]}, '"a" | "b"', ["a", "b"], [1, "c"]
    ),
    "const": Case({"const": "fixed"}, '"fixed"', ["fixed"], ["other", 1]),
    "const_and_enum": Case({"const": "b", "enum": ["a", "b"]}, '"b"', ["b"], ["a"]),
    "empty_schema": Case({}, "unknown", [1, "x", None, [], {"a": 1}]),
    "no_type_keeps_all_kinds": Case(
        {"properties": {"a": {"type": "string"}}},
        "{ a?: string; " + OPEN1 + " } | unknown[] | string | number | boolean | null",
        [{"a": "x", "b": 1}, [1], "s", 2, True, None],
        [{"a": 1}],
    ),
    "required_and_optional": Case(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            "required": ["id"],
        },
        # A property's short doc starts its line; on one line the "Constraints: " label goes.
        "{\n  /** integer. */ id: number;\n  name?: string;\n  " + OPEN + "\n}",
        [{"id": 1}, {"id": 1, "name": "n", "extra": [1]}],
        [{}, {"name": "n"}, {"id": "1"}, {"id": 1, "name": 2}, [], "x"],
    ),
    "additional_properties_false_is_exact": Case(
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
        "{\n  /** integer. */ id: number;\n}",
        [{"id": 1}],
        [{"id": 1, "extra": 2}, {}],
    ),
    "empty_closed_object": Case(
        {"type": "object", "additionalProperties": False},
        "{ [k: string]: never }",
        [{}],
        [{"a": 1}, [], "x"],
    ),
    "additional_properties_schema": Case(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "number"},
        },
        "{ a?: string; [k: string]: string | number | undefined }",
        [{"a": "x", "b": 2}, {}],
        [{"b": True}, {"a": 1}],
    ),
    "pattern_properties_closed": Case(
        {
            "type": "object",
            "patternProperties": {"^x-": {"type": "string"}, "[0-9]+": {"type": "integer"}},
            "additionalProperties": False,
        },
        "{ [k: `x-${string}`]: string; [k: string]: number | string }",
        [{"x-a": "s", "n1": 2}, {}],
        [{"x-a": 1}, {"n1": None}],
    ),
    "pattern_exact_name": Case(
        {
            "type": "object",
            "patternProperties": {"^only$": {"type": "boolean"}},
            "additionalProperties": False,
        },
        "{ only?: boolean }",
        [{"only": True}, {}],
        [{"only": 1}, {"other": True}],
    ),
    "quoted_property_names": Case(
        {
            "type": "object",
            "properties": {
                "a-b": {"type": "string"},
                "0": {"type": "string"},
                'with "quote"': {"type": "string"},
                "line\u2028sep": {"type": "string"},
                "$ok_id": {"type": "string"},
            },
            "additionalProperties": False,
        },
        '{\n  "a-b"?: string;\n  "0"?: string;\n  "with \\"quote\\""?: string;\n'
        '  "line\\u2028sep"?: string;\n  $ok_id?: string;\n}',
        [{"a-b": "x", "0": "y", 'with "quote"': "z", "line\u2028sep": "w", "$ok_id": "v"}],
        [{"a-b": 1}, {"ab": "x"}],
    ),
    "object_prototype_names": Case(
        {"properties": {"toString": {"type": "string"}, "constructor": {"type": "number"}}},
        "{\n  toString?: string | Function;\n  constructor?: number | Function;\n  "
        + OPEN
        + "\n} | unknown[] | string | number | boolean | null",
        [{}, {"toString": "x", "constructor": 1}],
        [{"toString": 1}],
    ),
    "one_of_is_union": Case(
        {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "string | number",
        ["a", 1],
        [True, None],
    ),
    "type_with_one_of_keeps_members": Case(
        {
            "type": ["string", "number", "boolean"],
            "oneOf": [{"type": "string"}, {"type": "integer"}],
        },
        "string | number",
        ["a", 3],
        [True],
    ),
    "properties_with_any_of_lose_nothing": Case(
        {
            "type": "object",
            "properties": {"kind": {"type": "string"}},
            "required": ["kind"],
            "anyOf": [
                {"properties": {"a": {"type": "number"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]},
            ],
        },
        "{ kind: string; a: number; " + OPEN1 + " } | { kind: string; b: string; " + OPEN1 + " }",
        [{"kind": "k", "a": 1}, {"kind": "k", "b": "x"}, {"kind": "k", "a": 1, "b": "x"}],
        [{"kind": "k"}, {"a": 1}, {"kind": "k", "a": "1"}],
    ),
    "all_of_with_closed_member": Case(
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {
                    "type": "object",
                    "properties": {"a": True, "b": {"type": "number"}},
                    "additionalProperties": False,
                },
            ]
        },
        "{ a?: string; b?: number }",
        [{"a": "x", "b": 1}, {}, {"b": 2}],
        [{"a": 1}, {"b": "x"}],
    ),
    "ref_to_defs_is_named": Case(
        {
            "type": "object",
            "properties": {
                "owner": {"$ref": "#/$defs/user"},
                "watchers": {"type": "array", "items": {"$ref": "#/$defs/user"}},
            },
            "$defs": {
                "user": {
                    "type": "object",
                    "properties": {"login": {"type": "string"}},
                    "required": ["login"],
                    "additionalProperties": False,
                },
                "unused": {"type": "string"},
            },
        },
        "{ owner?: User; watchers?: User[]; " + OPEN1 + " }",
        [{"owner": {"login": "a"}, "watchers": [{"login": "b"}]}],
        [{"owner": {}}, {"watchers": [{"login": 1}]}, {"owner": {"login": "a", "x": 1}}],
        helpers={"User": "{ login: string }"},
    ),
    "ref_to_definitions": Case(
        {"$ref": "#/definitions/Name", "definitions": {"Name": {"type": "string"}}},
        "Name",
        ["x"],
        [1],
        helpers={"Name": "string"},
    ),
    "ref_with_siblings_2020_intersects": Case(
        {
            "$defs": {"o": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "$ref": "#/$defs/o",
            "required": ["a"],
        },
        "O & { a: unknown; " + OPEN1 + " }",
        [{"a": "x"}],
        [{}, {"a": 1}],
        helpers={"O": "{ a?: string; " + OPEN1 + " }"},
    ),
    "ref_siblings_ignored_in_draft7": Case(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"arr": {"type": "array"}},
            "$ref": "#/definitions/arr",
            "maxItems": 1,
        },
        "Arr",
        [[1, 2, 3]],
        ["x"],
        helpers={"Arr": "unknown[]"},
    ),
    "recursive_schema_named": Case(
        {
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "children": {"type": "array", "items": {"$ref": "#"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        },
        "{ value: number; children?: Root[] }",
        [{"value": 1, "children": [{"value": 2, "children": []}]}],
        [{"value": 1, "children": [{}]}, {"value": 1, "children": [{"value": "x"}]}],
    ),
    "direct_recursion_becomes_unknown": Case(
        {
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}},
            "$ref": "#/$defs/a",
        },
        "A",
        ["x", 1],
        helpers={"A": "unknown"},
        validates=False,  # endless recursion for a validator too
        warns=(
            "#/$defs/a: recursive $ref to A without an object or array in between cannot be represented",
        ),
    ),
    "json_pointer_escapes": Case(
        {
            "$defs": {
                "a/b": {"type": "string"},
                "c~d": {"type": "number"},
                "e%f": {"type": "boolean"},
            },
            "type": "array",
            "prefixItems": [
                {"$ref": "#/$defs/a~1b"},
                {"$ref": "#/$defs/c~0d"},
                {"$ref": "#/$defs/e%25f"},
            ],
            "items": False,
        },
        "[AB?, CD?, EF?]",
        [[], ["x", 1, True]],
        [[1], ["x", 1, True, 4]],
        helpers={"AB": "string", "CD": "number", "EF": "boolean"},
    ),
    "anchor_ref": Case(
        {"$defs": {"x": {"$anchor": "thing", "type": "string"}}, "$ref": "#thing"},
        "X",
        ["s"],
        [1],
        helpers={"X": "string"},
    ),
    "id_relative_ref": Case(
        {
            "$id": "https://example.com/root.json",
            "$defs": {"b": {"$id": "b.json", "type": "boolean"}},
            "$ref": "b.json",
        },
        "B",
        [True],
        [1],
        helpers={"B": "boolean"},
    ),
    "non_local_ref_is_unknown": Case(
        {"$ref": "https://example.com/schema.json"},
        "unknown",
        [1, "x"],
        validates=False,  # a validator would fetch the URL
        warns=(
            "#/$ref: $ref cannot be represented (not local: 'https://example.com/schema.json'); emitted unknown",
        ),
    ),
    "prefix_items_with_rest": Case(
        {
            "type": "array",
            "prefixItems": [{"type": "string"}, {"type": "number"}],
            "items": {"type": "boolean"},
            "minItems": 1,
        },
        "[string, number?, ...boolean[]]",
        [["a"], ["a", 1], ["a", 1, True, False]],
        [[], [1], ["a", "b"], ["a", 1, 2]],
    ),
    "draft7_items_array_closed": Case(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array",
            "items": [{"type": "string"}, {"type": "number"}],
            "additionalItems": False,
            "minItems": 2,
        },
        "[string, number]",
        [["a", 1]],
        [["a"], ["a", 1, 2]],
    ),
    "draft7_items_array_open": Case(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "array",
            "items": [{"type": "string"}],
        },
        "[string?, ...unknown[]]",
        [[], ["a", 1, None]],
        [[1]],
    ),
    "min_max_items_tuple": Case(
        {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "[string, string?, string?]",
        [["a"], ["a", "b", "c"]],
        [[], ["a", "b", "c", "d"], [1]],
    ),
    "large_min_items_stays_array": Case(
        {"type": "array", "items": {"type": "integer"}, "minItems": 100},
        "number[]",
        [list(range(100))],
        [["x"]],
    ),
    "boolean_schema_true": Case(True, "unknown", [1, None, {"a": [1]}]),
    "boolean_schema_false": Case(False, "never", [], [1, None]),
    "boolean_subschemas": Case(
        {"type": "object", "properties": {"any": True, "none": False}},
        "{ any?: unknown; none?: never; " + OPEN1 + " }",
        [{"any": [1]}, {}],
        [{"none": 1}],
    ),
    "read_only_and_deprecated": Case(
        {
            "type": "object",
            "properties": {
                "id": {
                    "type": "string",
                    "readOnly": True,
                    "deprecated": True,
                    "description": "Server id.",
                }
            },
        },
        "{\n  /** Server id. Read-only. @deprecated */ readonly id?: string;\n  " + OPEN + "\n}",
        [{"id": "x"}],
        [{"id": 1}],
    ),
    "doc_comments_from_annotations": Case(
        {
            "type": "object",
            "properties": {
                "when": {
                    "type": "string",
                    "format": "date-time",
                    "title": "Start time",
                    "description": "ISO time",
                    "default": "now",
                    "examples": ["2024-01-01T00:00:00Z"],
                },
                "n": {"type": "integer", "minimum": 1, "maximum": 10, "pattern": "^a"},
            },
        },
        # `when` has more doc lines than field_doc joins: a block, with its "Constraints: " label;
        # `n` has one line: it starts the property's line, label dropped, bounds as symbols.
        '{\n  /**\n   * Start time\n   * ISO time\n   * Constraints: format: date-time.\n   * @default "now"\n'
        '   * @example "2024-01-01T00:00:00Z"\n   */\n  when?: string;\n'
        "  /** integer, ≥1, ≤10, pattern: ^a. */ n?: number;\n  " + OPEN + "\n}",
        [{"when": "2024-01-01T00:00:00Z", "n": 3}],
        [{"n": "3"}],
    ),
    "generated_titles_dropped": Case(
        {
            "type": "object",
            "title": "Root Args",
            "properties": {"max_items": {"title": "Max Items", "type": "integer"}},
        },
        "{\n  /** integer. */ max_items?: number;\n  " + OPEN + "\n}",
        [{"max_items": 2}],
        [{"max_items": "2"}],
    ),
    "one_of_with_catch_all_excludes_kinds": Case(
        {"oneOf": [{"type": "number"}, {}]},
        "{ " + OPEN1 + " } | unknown[] | string | boolean | null",
        ["x", None, [1], {"a": 1}],
        [1, 2.5],
    ),
    "if_true_takes_then": Case(
        {"if": True, "then": {"const": "then"}, "else": {"const": "else"}},
        '"then"',
        ["then"],
        ["else"],
    ),
    "pattern_matching_every_name": Case(
        {
            "type": "object",
            "patternProperties": {"a*": {"type": "integer"}},
            "properties": {"b": {"type": "number"}},
        },
        "{ b?: number; [k: string]: number | undefined }",
        [{"b": 1, "c": 2}, {}],
        [{"c": "x"}],
    ),
    # spec §11: server-supplied patterns run through the bounded ECMA-262 matcher
    # (codemode_gen.safe_jsonschema), never Python's `re`: `\d` is ASCII-only as in JavaScript...
    "pattern_properties_use_ecma_semantics": Case(
        {
            "type": "object",
            "properties": {"\u0661\u0662": {"type": "string"}, "12": {}},
            "patternProperties": {"^\\d+$": {"type": "integer"}},
        },
        '{ "\u0661\u0662"?: string; "12"?: number; [k: string]: unknown }',
        [{"\u0661\u0662": "x", "12": 3}, {}],
        [{"12": "x"}, {"\u0661\u0662": 1}],
    ),
    # ...and a catastrophic pattern (seconds per name with `re`, doubling per character) gives
    # up within its timeout: the property keeps its own type (wider), with a warning.
    "pattern_properties_catastrophic_backtracking": Case(
        {
            "type": "object",
            "properties": {"a" * 28 + "!": {"type": "string"}, "aaaa": {"type": "number"}},
            "patternProperties": {"^(a|a)*$": {"type": "integer"}},
            "additionalProperties": False,
        },
        '{\n  "' + "a" * 28 + '!"?: string;\n  aaaa?: number;\n'
        "  [k: string]: string | number | undefined;\n}",
        [{"a" * 28 + "!": "s", "aaaa": 2}, {}],
        [{"a" * 28 + "!": 1}, {"aaaa": "x"}],
        warns=("pattern could not be evaluated within 50 ms; the type is wider than the schema",),
        validates=False,  # the validator would give up on the same pattern (fail open)
    ),
    "dependent_schemas_merged": Case(
        {
            "type": "object",
            "properties": {"foo": {}},
            "dependentSchemas": {
                "foo": {"properties": {"bar": {"type": "string"}}, "required": ["bar"]}
            },
        },
        "{ foo?: never; " + OPEN1 + " } | { foo: unknown; bar: string; " + OPEN1 + " }",
        [{}, {"foo": 1, "bar": "x"}, {"bar": 2}],
        [{"foo": 1}, {"foo": 1, "bar": 2}],
    ),
    "template_signatures_consistent": Case(
        {
            "type": "object",
            "patternProperties": {
                "a": {"type": "integer"},
                "^abc": {"type": "number"},
                "x\\-": {"type": "string"},
                "x-": {"minLength": 1},
                "z*": {"type": ["integer", "string"]},
            },
        },
        "{\n  [k: `${string}a${string}`]: number;\n  [k: `abc${string}`]: number;\n"
        "  [k: `${string}x-${string}`]: string;\n  [k: string]: string | number;\n}",
        [{"abc": 1, "x-y": "s", "q": 2}, {}],
        [{"a": "s"}, {"x-": 1}, {"q": None}],
    ),
    "prefix_items_is_not_a_2019_keyword": Case(
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "type": "array",
            "prefixItems": [{"type": "string"}],
        },
        "unknown[]",
        [[1], ["a"]],
        ["a"],
    ),
    "ref_siblings_apply_in_2019": Case(
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$defs": {"s": {"type": "string"}},
            "$ref": "#/$defs/s",
            "enum": ["a", 1],
        },
        '"a"',
        ["a"],
        ["b", 1],
        helpers={"S": "string"},
    ),
    "not_excluding_a_type": Case(
        {"type": ["string", "number", "null"], "not": {"type": "null"}},
        "string | number",
        ["a", 1],
        [None],
    ),
    "not_general_widens_with_warning": Case(
        {"type": "string", "not": {"pattern": "^a"}},
        "string",
        ["b"],
        [1],
        warns=("#/not: not cannot be represented; the type is wider than the schema",),
    ),
    "if_then_else_approximated": Case(
        {"if": {"type": "string"}, "then": {"type": "string"}, "else": {"type": "number"}},
        "string | number",
        ["x", 1],
        [None, True],
        warns=("#: if/then/else cannot be represented",),
    ),
    "contains_means_non_empty": Case(
        {"type": "array", "items": {"type": "number"}, "contains": {"minimum": 3}},
        "[number, ...number[]]",
        [[1, 5]],
        [[]],
    ),
    "dependent_required": Case(
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        "{ a?: never; " + OPEN1 + " } | { a: unknown; b: unknown; " + OPEN1 + " }",
        [{}, {"b": 1}, {"a": 1, "b": 2}],
        [{"a": 1}],
    ),
    "unevaluated_properties_false": Case(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "allOf": [{"properties": {"b": {"type": "number"}}}],
            "unevaluatedProperties": False,
        },
        "{ a?: string; b?: number }",
        [{"a": "x", "b": 1}, {}],
        [{"c": 1}, {"b": "x"}],
    ),
    "property_names_enum": Case(
        {"type": "object", "propertyNames": {"enum": ["x", "y"]}},
        "{ x?: unknown; y?: unknown }",
        [{"x": 1}, {}],
        [{"z": 1}],
    ),
    "malformed_schema_is_unknown": Case(
        {
            "type": "object",
            "properties": {"a": 5, "b": {"type": 7}, "c": {"items": "x", "type": "array"}},
        },
        "{\n  /** Warning: schema cannot be represented (not an object or boolean); emitted unknown */"
        " a?: unknown;\n  /** Warning: malformed `type` ignored */ b?: unknown;\n"
        "  /** Warning: schema cannot be represented (not an object or boolean); emitted unknown */"
        " c?: unknown[];\n  " + OPEN + "\n}",
        [{"a": 1, "b": "x", "c": [1]}],
        [{"c": 1}],
        warns=(
            "#/properties/a: schema cannot be represented (not an object or boolean); emitted unknown",
        ),
    ),
}


def _render(result_decls: list[Any]) -> str:
    return "\n".join(doc_comment(d.doc) + f"type {d.name} = {d.text};" for d in result_decls)


@pytest.mark.parametrize("name", sorted(CASES))
def test_s6_2_translation_text(name: str) -> None:
    case = CASES[name]
    result = translate(case.schema, "Root", NameScope())
    assert result.root == "Root"
    assert result.decls[0].name == "Root"
    assert result.decls[0].text == case.text
    assert {d.name: d.text for d in result.decls[1:]} == case.helpers
    for expected in case.warns:
        assert any(expected in w for w in result.warnings), (expected, result.warnings)
    if not case.warns and "malformed" not in name:
        assert result.warnings == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_instances_agree_with_jsonschema(name: str) -> None:
    """The test table itself is right: valid values validate, invalid ones do not."""
    case = CASES[name]
    if "malformed" in name or not case.validates:
        pytest.skip("not a schema a validator can evaluate")
    # the validator the project runs on server schemas: ECMA-262 patterns, as JSON Schema says
    cls = safe_jsonschema.validator_for(case.schema, default=jsonschema.Draft202012Validator)
    validator = cls(case.schema)
    for value in case.valid:
        assert validator.is_valid(value), value
    for value in case.invalid:
        assert not validator.is_valid(value), value


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[list[tsc.Diagnostic], dict[int, tuple[bool, Any]], int]]:
    """All cases in one tsc run: name -> (diagnostics, line -> (valid?, value), decl lines)."""
    snippets: dict[str, str] = {}
    lines_of: dict[str, dict[int, tuple[bool, Any]]] = {}
    decl_lines: dict[str, int] = {}
    for name, case in CASES.items():
        result = translate(case.schema, "Root", NameScope())
        lines = _render(result.decls).split("\n")
        decl_lines[name] = len(lines)
        at: dict[int, tuple[bool, Any]] = {}
        for i, value in enumerate([*case.valid, *case.invalid]):
            lines.append(f"const v{i}: Root = {json.dumps(value)};")
            at[len(lines)] = (i < len(case.valid), value)
        snippets[name] = "\n".join(lines)
        lines_of[name] = at
    diags = tsc.check(snippets)
    return {name: (diags[name], lines_of[name], decl_lines[name]) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.slow
def test_s6_2_generated_types_compile_and_classify(name: str, compiled: dict[str, Any]) -> None:
    diags, at, n_decl = compiled[name]
    assert [d for d in diags if d.line <= n_decl] == [], "generated declarations do not compile"
    errors = {d.line for d in diags}
    for line, (valid, value) in at.items():
        if valid:
            assert line not in errors, (
                f"valid value rejected (unsound): {value!r}: {[d for d in diags if d.line == line]}"
            )
        else:
            assert line in errors, f"invalid value accepted: {value!r}"


def test_same_ref_text_under_different_ids_resolves_per_scope() -> None:
    """`$ref` results are reused by text only when no `$id` changes what the text means."""
    schema = {
        "$id": "https://example.com/root.json",
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/x"},
            "b": {
                "$id": "https://example.com/other.json",
                "type": "object",
                "properties": {"c": {"$ref": "#/$defs/x"}},
                "$defs": {"x": {"type": "number"}},
            },
            "d": {"$ref": "#/$defs/x"},
        },
        "$defs": {"x": {"type": "string"}},
    }
    result = translate(schema, "Root", NameScope())
    text = "\n".join(f"{d.name} = {d.text}" for d in result.decls)
    assert "a?: X;" in text and "d?: X;" in text
    assert "X = string" in text and "X2 = number" in text
    assert "c?: X2;" in text


def test_repeated_refs_reuse_the_finished_target_with_the_same_result() -> None:
    """Later `$ref`s to a finished target skip re-translation (the speed path for big
    documents); they must print exactly what the first one did, docs included."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/S", "description": "first"},
            "b": {"$ref": "#/$defs/S", "description": "second"},
            "c": {"type": "array", "items": {"$ref": "#/$defs/S"}},
            "d": {"$ref": "#/$defs/Nothing"},
            "e": {"$ref": "#/$defs/Nothing", "title": "E"},
        },
        "$defs": {"S": {"type": "string"}, "Nothing": False},
    }
    result = translate(schema, "Root", NameScope())
    assert result.decls[0].text == (
        "{\n  /** first */ a?: S;\n  /** second */ b?: S;\n"
        "  c?: S[];\n  d?: never;\n  e?: never;\n  " + OPEN + "\n}"
    )
    assert [(d.name, d.text) for d in result.decls[1:]] == [("S", "string"), ("Nothing", "never")]
