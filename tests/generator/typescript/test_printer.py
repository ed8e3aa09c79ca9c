"""AST -> TypeScript text, and sanitising of untrusted server text (spec §6.2, DESIGN "Types")."""

from __future__ import annotations

import json

import pytest

from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.printer import (
    MAX_DOC_CHARS,
    MAX_DOC_LINES,
    MAX_ONE_LINE_DOC_CHARS,
    TRUNCATION_MARKER,
    doc_comment,
    field_doc,
    joined_doc,
    print_type,
    property_key,
    sanitize_doc,
    string_literal,
)
from tests import tsc


def test_sanitize_doc_cannot_close_comment() -> None:
    assert sanitize_doc("a */ b") == "a *\\/ b"
    assert "*/" not in sanitize_doc("**/*/*/")


def test_sanitize_doc_line_terminators_become_newlines() -> None:
    assert sanitize_doc("a\r\nb\rc\u2028d\u2029e\x85f") == "a\nb\nc\nd\ne\nf"


def test_sanitize_doc_removes_control_and_bidi_characters() -> None:
    assert sanitize_doc("a\x00b\x1bc\u202ed\u2066e\ufeff") == "abcde"
    assert sanitize_doc("tab\there") == "tab  here"


def test_sanitize_doc_truncates_long_text_with_marker() -> None:
    text = sanitize_doc("x" * (MAX_DOC_CHARS + 50))
    assert text.endswith(TRUNCATION_MARKER)
    assert len(text) == MAX_DOC_CHARS + len(TRUNCATION_MARKER)
    lines = sanitize_doc("\n".join(["l"] * (MAX_DOC_LINES + 5))).split("\n")
    assert len(lines) == MAX_DOC_LINES
    assert lines[-1].endswith(TRUNCATION_MARKER)


def test_sanitize_doc_truncation_never_leaves_half_a_comment_end() -> None:
    text = sanitize_doc("a" * (MAX_DOC_CHARS - 1) + "*/" + "b" * 10)
    assert "*/" not in text and not text[: -len(TRUNCATION_MARKER)].endswith("*")


def test_sanitize_doc_is_idempotent_and_accepts_non_strings() -> None:
    once = sanitize_doc("x */ \u2028 y")
    assert sanitize_doc(once) == once
    assert sanitize_doc({"a": 1}) == '{"a": 1}'


def test_doc_comment_layout() -> None:
    assert doc_comment([]) == ""
    assert doc_comment(["", "  "]) == ""
    assert doc_comment(["one", "", "two\nthree"], "  ") == (
        "  /**\n   * one\n   *\n   * two\n   * three\n   */\n"
    )


def test_doc_comment_sanitises_again() -> None:
    """Both layouts (one line, block) re-sanitise: the only `*/` left is the comment's own end."""
    assert doc_comment(["x */ y"]) == "/** x *\\/ y */\n"
    long = "x */ y " + "z" * MAX_ONE_LINE_DOC_CHARS
    block = doc_comment([long])
    assert block == f"/**\n * {sanitize_doc(long)}\n */\n"
    for text in (doc_comment(["x */ y"]), block, doc_comment(["a */", "b */"])):
        assert text.count("*/") == 1 and text.endswith("*/\n")


def test_field_doc_joins_short_lines_before_the_property_and_stays_a_comment() -> None:
    """A property's short doc is one `/** … */ ` that its own line starts with (the
    "Constraints: " label goes on one line); anything longer is a block. Both re-sanitise."""
    assert (
        field_doc(["Note id.", "Constraints: integer, ≥1."], "  ")
        == "  /** Note id. integer, ≥1. */ "
    )
    assert field_doc(["a */ b", "@default 1"]) == "/** a *\\/ b @default 1 */ "
    assert field_doc(["one\ntwo"]) == doc_comment(["one\ntwo"])  # a line break: a block
    five = ["1", "2", "3", "4", "5"]
    assert field_doc(five, "  ") == doc_comment(five, "  ")  # more than MAX_FIELD_DOC_LINES
    long = ["w" * MAX_ONE_LINE_DOC_CHARS, "x"]
    assert field_doc(long) == doc_comment(long)
    for text in (field_doc(["x */ y", "*/"]), joined_doc(["x */ y", "*/"])):
        assert text.count("*/") == 1


def test_joined_doc_puts_a_tools_short_lines_on_one_line() -> None:
    """A tool's one-line description and its annotation tags read as well on one line."""
    assert joined_doc(["Fetch a note.", "", "@readOnly"]) == "/** Fetch a note. @readOnly */\n"
    # only a property's doc drops the label
    assert joined_doc(["Constraints: kept."]) == "/** Constraints: kept. */\n"
    assert joined_doc(["a\nb", "c"]) == doc_comment(["a\nb", "c"])
    assert joined_doc(["", " "]) == ""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak\r\t", '"line\\nbreak\\r\\t"'),
        ("ls\u2028ps\u2029", '"ls\\u2028ps\\u2029"'),
        ("end */ here", '"end *\\/ here"'),
        ("\x00\x1f", '"\\u0000\\u001f"'),
        ("\ud800", '"\\ud800"'),
        ("\U000f0000", '"\\u{f0000}"'),
        ("héllo ✓", '"héllo ✓"'),
    ],
)
def test_string_literal_escapes(value: str, expected: str) -> None:
    assert string_literal(value) == expected


@pytest.mark.slow
def test_string_literals_denote_the_original_strings() -> None:
    """tsc agrees: each printed literal type accepts the JSON text of the original string."""
    values = [
        'say "hi"',
        "back\\slash",
        "line\nbreak",
        "ls\u2028ps",
        "end */ here",
        "\x00",
        "héllo ✓",
        "\U0001f600",
    ]
    lines = [f"const v{i}: {string_literal(v)} = {json.dumps(v)};" for i, v in enumerate(values)]
    assert tsc.check_one("\n".join(lines)) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("plain", "plain"),
        ("$ok_1", "$ok_1"),
        ("a-b", '"a-b"'),
        ("0", '"0"'),
        ("", '""'),
        ("a b", '"a b"'),
        ("é", '"é"'),
    ],
)
def test_property_keys_quoted_unless_identifier(name: str, expected: str) -> None:
    assert property_key(name) == expected


def test_print_nested_objects_indent_two_spaces() -> None:
    inner = t.Object((t.Property("b", t.NUMBER, optional=True, doc=("doc",)),), None)
    node = t.Object((t.Property("a", inner, readonly=True),), t.UNKNOWN)
    assert print_type(node) == (
        "{\n  readonly a: {\n    /** doc */ b?: number;\n  };\n  [k: string]: unknown;\n}"
    )
    # A doc of several lines is a block, indented like the property it documents.
    inner = t.Object((t.Property("b", t.NUMBER, optional=True, doc=("one\ntwo",)),), None)
    node = t.Object((t.Property("a", inner, readonly=True),), t.UNKNOWN)
    assert print_type(node) == (
        "{\n  readonly a: {\n    /**\n     * one\n     * two\n     */\n    b?: number;\n  };\n"
        "  [k: string]: unknown;\n}"
    )


def test_print_parenthesises_where_precedence_requires() -> None:
    u = t.Union((t.STRING, t.NUMBER))
    assert print_type(t.Array(u)) == "(string | number)[]"
    assert (
        print_type(t.Tuple((u, u), 1, u))
        == "[(string | number), (string | number)?, ...(string | number)[]]"
    )
    assert print_type(t.Intersection((t.Ref("A"), u))) == "A & (string | number)"
    assert (
        print_type(t.Union((t.Intersection((t.Ref("A"), t.Ref("B"))), t.NULL))) == "(A & B) | null"
    )
    assert print_type(t.Array(t.Literal(-1))) == "(-1)[]"
    assert print_type(t.Array(t.Array(t.STRING))) == "string[][]"


def test_print_literals() -> None:
    assert print_type(t.Literal(True)) == "true"
    assert print_type(t.Literal(1.0)) == "1"
    assert print_type(t.Literal(1.5e300)) == "1.5e+300"
    assert print_type(t.Literal(-2)) == "-2"
    assert print_type(t.Object(index=t.NEVER)) == "{ [k: string]: never }"
    assert print_type(t.Object()) == "{}"


def test_print_template_literal_index_signatures() -> None:
    node = t.Object(
        patterns=(
            (t.TemplateKey("x-", False, True), t.STRING),
            (t.TemplateKey("_id", True, False), t.NUMBER),
        )
    )
    assert print_type(node) == "{ [k: `x-${string}`]: string; [k: `${string}_id`]: number }"


@pytest.mark.slow
def test_printed_types_compile() -> None:
    u = t.Union((t.STRING, t.NUMBER))
    node = t.Object(
        (
            t.Property("a-b", t.Tuple((u, t.Literal("*/")), 1, u), optional=True, doc=("x */ y",)),
            t.Property(
                "c",
                t.Intersection(
                    (
                        t.Object((t.Property("d", t.NULL),), t.UNKNOWN),
                        t.Union((t.Object((t.Property("e", u, optional=True),)), t.NULL)),
                    )
                ),
            ),
        ),
        t.UNKNOWN,
        patterns=((t.TemplateKey("x-", False, True), t.UNKNOWN),),
    )
    source = f"type T = {print_type(node)};\nconst v: T = {{c: {{d: null, e: 1}}, 'a-b': [1, '*/', 's'], 'x-y': 2}};"
    assert tsc.check_one(source) == []


@pytest.mark.parametrize(
    "text",
    ["  lead\ntrail   \n\n  middle  \n", "\n\nonly\n", "a\n\n\nb", "x\n" * MAX_DOC_LINES, "\n"],
)
def test_sanitize_doc_multiline_fast_path_matches_the_general_path(text: str) -> None:
    """Plain multi-line text takes a fast path; a removable control character forces the
    general path over the same text, and both must agree."""
    assert sanitize_doc(text) == sanitize_doc(text + "\x01")
    assert sanitize_doc(sanitize_doc(text)) == sanitize_doc(text)


def test_doc_comment_single_line_fast_path_matches_the_general_layout() -> None:
    assert doc_comment(["one"], "  ") == "  /** one */\n"
    assert doc_comment(["one", ""], "  ") == doc_comment(["one"], "  ")
    # Past MAX_ONE_LINE_DOC_CHARS both paths print the same block.
    long = "w" * (MAX_ONE_LINE_DOC_CHARS + 1)
    assert doc_comment([long], "  ") == f"  /**\n   * {long}\n   */\n"
    assert doc_comment([long, ""], "  ") == doc_comment([long], "  ")
    edge = "w" * MAX_ONE_LINE_DOC_CHARS
    assert doc_comment([edge]) == doc_comment(["", edge]) == f"/** {edge} */\n"
    assert doc_comment(["   "]) == "" and doc_comment([""]) == ""


def test_string_literal_fast_path_round_trips() -> None:
    """Strings with nothing to escape are quoted as they are; every literal is JSON that
    decodes to the original and never contains a comment end."""
    samples = ["plain text", "a*b/c", "a*/b", 'q"', "b\\s", "tab\tx", "é", "*/", "/*"]
    for value in samples:
        literal = string_literal(value)
        assert json.loads(literal) == value
        assert "*/" not in literal
    assert string_literal("plain text") == '"plain text"'


@pytest.mark.slow
def test_property_name_with_a_trailing_newline_is_quoted_and_compiles() -> None:
    """`$` in a regex also matches before a final newline: such a name must still be quoted."""
    assert property_key("a\n") == '"a\\n"'
    node = t.Object((t.Property("a\n", t.STRING), t.Property("b", t.NUMBER)), t.UNKNOWN)
    text = print_type(node)
    assert text == '{ "a\\n": string; b: number; [k: string]: unknown }'
    assert tsc.check_one(f"type T = {text};\nconst v: T = {{ 'a\\n': 'x', b: 1 }};") == []
