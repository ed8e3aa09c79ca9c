"""The compact agent rendering (generator/agent.py over typescript/compact.py; spec §4.4, §6.2, §6.3).

What a model reads (serve's prompt: `tools[].agent` assembled by runtime/frontends/prompt.py; discovery's
`tools[].declaration`), as opposed to what tsc reads (the committed .d.ts): one signature per
tool, a type inline where it is used once or is short and named where tools share it or it is
recursive, the description's first sentence, a `//` note per input field, annotations as terse
tags. Every string in it comes from a server we do not trust, so a note or a summary never
leaves its comment nor its line; and every declaration must still be TypeScript that compiles.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.generator.agent import (
    MAX_TAG_VALUE_CHARS,
    SHORT_TYPE_CHARS,
    AgentTool,
    annotation_tags,
    render_server,
)
from codemode_gen.generator.build import Outputs, build_outputs
from codemode_gen.generator.fixtures import FixtureSet, load_fixtures
from codemode_gen.generator.manifest import ServerEntry
from codemode_gen.generator.typescript import NameScope, TypeDecl, translate
from codemode_gen.generator.typescript.compact import (
    MAX_NOTE_CHARS,
    MAX_SUMMARY_CHARS,
    compact_note,
    first_sentence,
    one_line,
    print_compact,
)
from codemode_gen.generator.typescript.docs import schema_doc
from codemode_gen.runtime.frontends.prompt import server_block
from codemode_gen.runtime.frontends.prompt_layout import FULL, SIGNATURE
from tests.catalogs import catalog_ids, load_catalog
from tests.tsc import as_namespace
from tests.tsc import check as tsc_check

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"
# Every character JavaScript ends a line at (a `//` note must never contain one), and the
# other breaks sanitize_doc turns into newlines.
LINE_BREAKS = ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c"]
# Server text that would be code if it escaped its comment or its line.
BREAKOUT = " */ export const pwned = 1; /* "

NOTE = {
    "title": "Note",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "body": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "body", "tags"],
}
TREE = {
    "type": "object",
    "properties": {
        "value": {"type": "number"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["value"],
}


def server(tools: list[dict[str, Any]], server_id: str = "s") -> ServerEntry:
    """The manifest entry of one built server."""
    return build_outputs([FixtureSet(server_id, {}, copy.deepcopy(tools))]).manifest["servers"][0]


def declarations(entry: ServerEntry) -> dict[str, str]:
    return {t["toolName"]: t["declaration"] for t in entry["tools"]}


# --------------------------------------------------------------------------- §6.3 terse tags


@pytest.mark.parametrize(
    ("annotations", "tags"),
    [
        ({"readOnlyHint": True}, ["@readOnly"]),
        ({"readOnlyHint": False}, ["@notReadOnly"]),  # declared: said, even as MCP's default
        ({"destructiveHint": True}, ["@destructive"]),
        ({"destructiveHint": False}, ["@nonDestructive"]),  # differs from the default (true)
        ({"idempotentHint": True}, ["@idempotent"]),
        ({"idempotentHint": False}, ["@nonIdempotent"]),
        ({"openWorldHint": True}, ["@openWorld"]),
        ({"openWorldHint": False}, ["@closedWorld"]),  # differs from the default (true)
        ({}, []),
        ({"readOnlyHint": "yes", "openWorldHint": 1}, []),  # not booleans: no hint at all
        (
            {"openWorldHint": True, "idempotentHint": True, "destructiveHint": True},
            ["@destructive", "@idempotent", "@openWorld"],  # spec order, not the server's
        ),
        (
            {"openWorldHint": False, "idempotentHint": False, "destructiveHint": False,
             "readOnlyHint": False},
            ["@notReadOnly", "@nonDestructive", "@nonIdempotent", "@closedWorld"],
        ),
    ],
)  # fmt: skip
def test_s6_3_terse_tags_for_every_hint_true_false_and_absent(
    annotations: dict[str, Any], tags: list[str]
) -> None:
    """§6.3: every hint a tool declares is surfaced: true ones by name, false ones as a word of
    their own (not `=false`); absent hints, and values that are not booleans, say nothing."""
    assert annotation_tags(annotations, terse=True) == tags


def test_s6_3_a_read_only_tool_keeps_every_hint_it_declares() -> None:
    """MCP calls destructiveHint and idempotentHint "meaningful only when readOnlyHint == false",
    but §6.3 makes surfacing every annotation present a MUST: a read-only tool's
    `idempotentHint` is not dropped (a reference server's get_user showed only `@readOnly`).
    The non-terse form spells each value."""
    for destructive in (True, False):
        for idempotent in (True, False):
            annotations = {
                "readOnlyHint": True,
                "destructiveHint": destructive,
                "idempotentHint": idempotent,
                "openWorldHint": False,
            }
            assert annotation_tags(annotations, terse=True) == [
                "@readOnly",
                "@destructive" if destructive else "@nonDestructive",
                "@idempotent" if idempotent else "@nonIdempotent",
                "@closedWorld",
            ]
    assert annotation_tags({"readOnlyHint": True, "idempotentHint": True}, terse=True) == [
        "@readOnly",
        "@idempotent",
    ]
    assert annotation_tags(
        {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
    ) == ["@readOnly", "@destructive=false", "@idempotent", "@openWorld=false"]


def test_s6_3_non_standard_annotations_are_tags_with_their_json_value() -> None:
    """Annotations MCP does not define are surfaced too, after the hints, alphabetically, with
    their value as compact JSON cut at MAX_TAG_VALUE_CHARS."""
    tags = annotation_tags(
        {"zeta": [1, "x"], "costUnits": 3, "readOnlyHint": True, "scope": {"b": 1, "a": None}},
        terse=True,
    )
    assert tags == ["@readOnly", "@costUnits=3", '@scope={"a": null, "b": 1}', '@zeta=[1, "x"]']
    (long,) = annotation_tags({"note": "y" * 100}, terse=True)
    assert long == '@note="' + "y" * (MAX_TAG_VALUE_CHARS - 2) + "…"
    assert annotation_tags(None) == [] and annotation_tags({}, terse=True) == []


@pytest.mark.slow
def test_s6_3_an_annotation_value_holding_a_comment_end_cannot_break_the_comment() -> None:
    """A tag's value is server text: in the .d.ts and in the agent rendering it stays inside
    the tool's doc comment (the only `*/` on the line is the comment's own), and both compile."""
    tools = [
        {
            "name": "t",
            "description": "Does things.",
            "annotations": {"readOnlyHint": True, "vendorNote": "x" + BREAKOUT},
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
    ]
    out = build_outputs([FixtureSet("s", {}, tools)])
    entry = out.manifest["servers"][0]
    declaration = entry["tools"][0]["declaration"]
    doc, signature = declaration.split("\n")
    assert doc.startswith("/** Does things. @readOnly @vendorNote=") and doc.endswith(" */")
    assert doc.count("*/") == 1 and "*\\/ export const pwned" in doc
    assert signature == "export function t(input?: { q?: string }): Promise<unknown>;"
    dts = out.files["servers/s.d.ts"]
    (doc_line,) = [line for line in dts.splitlines() if "@vendorNote" in line]
    assert doc_line.strip().startswith("/** Does things. @readOnly @vendorNote=")
    assert doc_line.count("*/") == 1 and doc_line.endswith(" */")
    # a comment broken out of would leave `export const pwned = 1;` as code: a syntax error
    # in a declaration file, which tsc_check reports as a failure of the whole batch
    results = tsc_check(
        {"declaration.d.ts": declaration, "full.d.ts": as_namespace(server_block(entry))}
    )
    assert results == {"declaration.d.ts": [], "full.d.ts": []}


# --------------------------------------------------------------------------- summaries and notes


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("Fetch one note. Then more.", "Fetch one note."),
        ("Use e.g. 2026 as the year. Then stop.", "Use e.g. 2026 as the year."),
        ("Use i.e. the year. Then stop.", "Use i.e. the year."),
        ("Files, dirs etc. And more. Rest.", "Files, dirs etc. And more."),
        ("Version 1.2 is out. Next.", "Version 1.2 is out."),
        ("Returns the id. then more. Done.", "Returns the id. then more."),  # lower case goes on
        ("Why? Because.", "Why?"),
        ("First paragraph\n\nsecond paragraph", "First paragraph"),
        ("Spread\n  over\tlines. Next.", "Spread over lines."),
        ("  No full stop at all  ", "No full stop at all"),
        (None, ""),
        (7, ""),
    ],
)
def test_first_sentence_is_not_cut_at_an_abbreviation(text: object, sentence: str) -> None:
    """A tool's summary is its description's first sentence: "e.g." and "i.e." do not end one."""
    assert first_sentence(text) == sentence


def test_first_sentence_is_cut_at_max_summary_chars_with_an_ellipsis() -> None:
    exact = "w" * MAX_SUMMARY_CHARS
    assert first_sentence(exact) == exact
    long = first_sentence("word " * 100)
    assert len(long) == MAX_SUMMARY_CHARS and long.endswith("…")
    assert first_sentence("abcdefghij", limit=5) == "abcd…"
    # never a `*` before the ellipsis that a following `/` could have closed a comment with
    starred = first_sentence("a" * (MAX_SUMMARY_CHARS - 2) + "**/" + "b" * 10)
    assert starred == "a" * (MAX_SUMMARY_CHARS - 2) + "…"


def test_compact_note_is_meaning_constraints_and_default() -> None:
    """One phrase from a property's doc lines (translate.schema_doc): its meaning (first
    sentence), the constraints a caller must meet, the default; examples and read-only go."""
    doc = schema_doc(
        {
            "type": "integer",
            "description": "Page size. The server picks one otherwise.",
            "minimum": 1,
            "maximum": 100,
            "default": 20,
            "examples": [10],
            "readOnly": True,
        }
    )
    assert compact_note(doc) == "Page size; integer, ≥1, ≤100; default 20"
    deprecated = schema_doc({"type": "string", "description": "Old name.", "deprecated": True})
    assert compact_note(deprecated) == "Old name; deprecated"
    titled = schema_doc({"type": "string", "title": "Query", "description": "What to find."})
    assert compact_note(titled) == "Query"  # the first line that is a meaning
    assert compact_note(schema_doc({"type": "string", "maxLength": 200})) == "length ≤200"
    assert compact_note([]) == ""


def test_compact_note_drops_a_pattern_that_a_format_already_says() -> None:
    both = schema_doc(
        {"type": "string", "format": "date-time", "pattern": "^\\d{4}-", "maxLength": 30}
    )
    assert compact_note(both) == "format: date-time, length ≤30"
    alone = schema_doc({"type": "string", "pattern": "^[a-z]+$"})
    assert compact_note(alone) == "pattern: ^[a-z]+$"


def test_compact_note_is_cut_at_max_note_chars() -> None:
    note = compact_note(["x" * 300, "@default 1"])
    assert len(note) == MAX_NOTE_CHARS and note.endswith("…")
    long_default = compact_note(["Mode", '@default "' + "d" * 100 + '"'])
    assert long_default.startswith('Mode; default "ddd') and long_default.endswith("…")


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[repr(b) for b in LINE_BREAKS])
def test_notes_and_summaries_never_contain_a_line_break(brk: str) -> None:
    """A `//` note ends at the first line terminator JavaScript knows (U+2028 included): the
    rest of the server's text would be code. Notes and summaries are always one line."""
    text = f"Meaning{brk}export const x = 1;{brk}{brk}more"
    for line in (compact_note([text]), one_line(text), first_sentence(text.replace(brk, " ", 1))):
        assert len(line.splitlines()) == 1, repr(line)
        assert not any(b in line for b in LINE_BREAKS), repr(line)
    assert compact_note([text]) == "Meaning export const x = 1;"  # up to the blank line


@pytest.mark.slow
def test_notes_stay_on_their_property_line_in_a_built_server_and_compile() -> None:
    """End to end: property descriptions with every line terminator and a comment end become
    notes that stay on their property's line, in the multi-field (`//`) and the one-field
    (`/* */`) layouts, and the declarations compile."""
    properties = {
        f"p{i}": {
            "type": "string",
            "description": f"Field {i}{brk}export const c{i} = 1;{BREAKOUT}",
        }
        for i, brk in enumerate(LINE_BREAKS)
    }
    tools = [
        {
            "name": "many",
            "description": f"Many fields.{BREAKOUT}\u2028export const d = 1;",
            "inputSchema": {"type": "object", "properties": properties, "required": ["p0"]},
        },
        {
            "name": "one",
            "inputSchema": {
                "type": "object",
                "properties": {"q": {"type": "string", "description": "Q\u2028" + BREAKOUT}},
            },
        },
    ]
    entry = server(tools)
    decls = declarations(entry)
    # splitlines() breaks at every terminator Python knows (U+2028, U+0085, …): one leaked
    # into a note would change the line count below
    many = decls["many"].splitlines()
    assert many[0] == "/** Many fields. */"
    assert many[1] == "export function many(input: {"
    for i in range(len(LINE_BREAKS)):
        line = many[2 + i]
        assert line.startswith(
            f"  p{i}{'' if i == 0 else '?'}: string; // Field {i} export const c{i} = 1;"
        )
    assert many[-1] == "}): Promise<unknown>;"
    assert len(many) == 3 + len(LINE_BREAKS)
    assert decls["one"] == (
        "export function one(input?: { q?: string /* Q *\\/ export const pwned = 1; /* */ }): Promise<unknown>;"
    )
    assert len(decls["one"].splitlines()) == 1
    snippets = {f"{name}.d.ts": text for name, text in decls.items()}
    snippets["full.d.ts"] = as_namespace(server_block(entry))
    assert all(not diags for diags in tsc_check(snippets).values())


# --------------------------------------------------------------------------- shape of a server


def test_s4_4_a_type_shared_by_two_tools_is_named_once_and_a_single_use_type_is_inline() -> None:
    """A type several tools return is declared once by name (each tool's own declaration
    carries it, to stand alone); a type one tool uses is written where it is used."""
    tools = [
        {
            "name": "get_note",
            "description": "Fetch one note. Then more.",
            "annotations": {"readOnlyHint": True},
            "inputSchema": {
                "type": "object",
                "properties": {"id": {"type": "integer", "description": "Note id."}},
                "required": ["id"],
            },
            "outputSchema": NOTE,
        },
        {
            "name": "create_note",
            "inputSchema": {
                "type": "object",
                "properties": {"body": {"type": "string"}},
                "required": ["body"],
            },
            "outputSchema": NOTE,
        },
        {
            "name": "count_notes",
            "inputSchema": {"type": "object"},
            "outputSchema": {
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"],
            },
        },
    ]
    entry = server(tools)
    full = server_block(entry)
    note = "type Note = { id: number; body: string; tags: string[] };"
    assert full.count("type Note =") == 1 and f"\n  {note}\n" in full
    assert "  function create_note(input: { body: string }): Promise<Note>;\n" in full
    assert "  /** Fetch one note. @readOnly */\n" in full
    assert (
        "  function get_note(input: { id: number /* Note id; integer */ }): Promise<Note>;\n"
        in full
    )
    assert "  function count_notes(): Promise<{ count: number }>;\n" in full
    assert "CountNotesOutput" not in full and "GetNoteOutput" not in full
    decls = declarations(entry)
    assert decls["get_note"] == (
        "/** Fetch one note. @readOnly */\n"
        "export function get_note(input: { id: number /* Note id; integer */ }): Promise<Note>;\n"
        + note
    )
    assert decls["create_note"].endswith("Promise<Note>;\n" + note)
    assert decls["count_notes"] == "export function count_notes(): Promise<{ count: number }>;"
    plain = server_block(entry, SIGNATURE)
    assert plain.count("type Note =") == 1
    assert "  function get_note(input: { id: number }): Promise<Note>;\n" in plain
    assert "/*" not in plain and "//" not in plain  # signatures only


def test_s6_2_a_recursive_type_stays_named() -> None:
    """TypeScript cannot inline a type that refers to itself: a recursive input (the root
    `$ref: "#"`) and a recursive `$defs` entry keep their names, even when used once."""
    tools = [
        {
            "name": "walk_tree",
            "inputSchema": TREE,
            "outputSchema": {
                "type": "object",
                "properties": {"root": {"$ref": "#/$defs/node"}},
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                        },
                    }
                },
            },
        }
    ]
    entry = server(tools)
    assert declarations(entry)["walk_tree"] == (
        "export function walk_tree(input: WalkTreeInput): Promise<{ root?: NodeType }>;\n"
        "type WalkTreeInput = { value: number; children?: WalkTreeInput[] };\n"
        "type NodeType = { kids?: NodeType[] };"
    )
    assert entry["tools"][0]["types"] == {"input": "WalkTreeInput", "output": "WalkTreeOutput"}
    full = server_block(entry)
    assert full.count("type WalkTreeInput =") == 1 and full.count("type NodeType =") == 1


def _decl(schema: dict[str, Any], name: str, scope: NameScope) -> dict[str, TypeDecl]:
    return {d.name: d for d in translate(schema, name, scope).decls}


def _tool(name: str, output: str, input_type: str = "AnyInput") -> AgentTool:
    return AgentTool(
        tool_name=name,
        export_name=name,
        input_type=input_type,
        input_optional=True,
        output_type=output,
        json_type=None,
        description=None,
        annotations=None,
        output_source="declared",
    )


def test_a_short_type_is_written_where_used_even_when_shared() -> None:
    """A name only saves characters when its body is long: a shared type whose one-line text
    is at most SHORT_TYPE_CHARS is printed at each use; a longer one is named once."""
    scope = NameScope()
    decls = _decl({"type": "object"}, "AnyInput", scope)
    decls |= _decl({"type": "array", "items": {"type": "string"}}, "Ids", scope)
    long_schema = {
        "type": "object",
        "properties": {"identifier": {"type": "string"}, "description": {"type": "string"}},
        "required": ["identifier"],
    }
    decls |= _decl(long_schema, "Item", scope)
    ids, item = decls["Ids"].node, decls["Item"].node
    assert ids is not None and item is not None
    assert len(print_compact(ids)) <= SHORT_TYPE_CHARS < len(print_compact(item))
    tools = [_tool("a", "Ids"), _tool("b", "Ids"), _tool("c", "Item"), _tool("d", "Item")]
    rendered = render_server("s", tools, decls)
    assert {name: part["signature"] for name, part in rendered.tools.items()} == {
        "a": "function a(): Promise<string[]>;",
        "b": "function b(): Promise<string[]>;",
        "c": "function c(): Promise<Item>;",
        "d": "function d(): Promise<Item>;",
    }
    assert [part.get("types") for part in rendered.tools.values()] == [
        None,
        None,
        ["Item"],
        ["Item"],
    ]
    assert rendered.types == [
        {"name": "Item", "text": "type Item = { identifier: string; description?: string };"}
    ]
    assert rendered.declarations["a"] == "export function a(): Promise<string[]>;"
    assert rendered.declarations["d"] == (
        "export function d(): Promise<Item>;\ntype Item = { identifier: string; description?: string };"
    )


def test_s5_3_1_input_arity_in_the_agent_rendering() -> None:
    """`input:` when the schema requires something, `input?:` when it does not, and no
    parameter at all for a tool with nothing to pass (an object without properties)."""
    tools = [
        {"name": "none", "inputSchema": {"type": "object"}},
        {"name": "opt", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
        {
            "name": "req",
            "inputSchema": {
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
        },
        {"name": "arr", "inputSchema": {"type": "array", "items": {"type": "number"}}},
    ]
    decls = declarations(server(tools))
    assert decls["none"] == "export function none(): Promise<unknown>;"
    assert decls["opt"] == "export function opt(input?: { q?: string }): Promise<unknown>;"
    assert decls["req"] == "export function req(input: { q: string }): Promise<unknown>;"
    assert decls["arr"] == "export function arr(input: number[]): Promise<unknown>;"


def test_inferred_outputs_and_json_text_are_said_in_the_summary() -> None:
    """The notes fixture: `@inferred` marks a type guessed from samples; a JSON-text result
    names the type to parse it as; a recorded call follows the doc comment (examples.py)."""
    entry = next(
        s
        for s in build_outputs(load_fixtures(FIXTURES)).manifest["servers"]
        if s["serverId"] == "notes"
    )
    decls = declarations(entry)
    assert decls["search_notes"].startswith(
        "/** Full-text search. Returns JSON text: JSON.parse(result) as "
        "{ id: number; title: string; score: number; snippet?: string }[]."
        " @inferred @readOnly @nonDestructive @idempotent @closedWorld */\n"
        """// e.g. search_notes({ query: "work" }) → '[{"id": 1, "title": "Quarterly planning", "score": 2.0}, """
    )
    assert decls["get_note"].startswith(
        "/** Fetch one note by id. @readOnly @nonDestructive @idempotent @closedWorld */\n"
        '// e.g. get_note({ id: 1 }) → { body: "Draft the Q2 roadmap.", created: "2026-03-02T09:01:00Z", '
    )


# --------------------------------------------------------------------------- tsc


@pytest.fixture(scope="module")
def real_outputs() -> Outputs:
    """The 16 recorded real servers (tests/data/catalogs) and the test fixtures, built once."""
    sets = [FixtureSet(cid, *load_catalog(cid), {}) for cid in catalog_ids()]
    return build_outputs(sets + load_fixtures(FIXTURES))


@pytest.mark.slow
def test_s6_2_every_declaration_of_real_servers_compiles_with_tsc_strict(
    real_outputs: Outputs,
) -> None:
    """Each tool's `declaration` is self-contained TypeScript: alone in its own declaration
    file, it compiles with --strict (every type it names comes with it). The servers' `full`
    and `plain` blocks compile too. One batched tsc run; a known-bad snippet proves it checks."""
    snippets: dict[str, str] = {}
    tool_count = 0
    for entry in real_outputs.manifest["servers"]:
        for tool in entry["tools"]:
            snippets[f"{entry['serverId']}/{tool['toolName']}.d.ts"] = tool["declaration"]
            tool_count += 1
        for kind, level in (("full", FULL), ("plain", SIGNATURE)):
            snippets[f"{entry['serverId']}/{kind}.d.ts"] = as_namespace(server_block(entry, level))
    assert tool_count >= 166  # the catalogs' tools, and the fixtures'
    snippets["sentinel.d.ts"] = "export function f(): Promise<NotDeclared>;"
    results = tsc_check(snippets)
    assert [d.code for d in results.pop("sentinel.d.ts")] == ["TS2304"]  # cannot find name
    failing = {name: diags for name, diags in results.items() if diags}
    assert failing == {}
