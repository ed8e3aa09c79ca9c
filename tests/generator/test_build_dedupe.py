"""build_outputs prints each type body once per module (generator/build.py share_identical_types).

Generated modules are agent context (spec §4.4), so identical declarations become aliases of
one body; every exported type name stays, and the result still compiles with the real tsc.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.generator.build import Outputs, build_outputs
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.shared_types import MIN_SHARED_BODY_CHARS

REPO = Path(__file__).resolve().parents[2]
TSC = REPO / "node_modules" / ".bin" / "tsc"
# Bounds one tsc run (a hang is a bug, not slowness).
TOOL_TIMEOUT = 120

NOTE = {
    "title": "Note",
    "description": "One note.",
    "type": "object",
    "properties": {"id": {"type": "integer"}, "body": {"type": "string"}},
    "required": ["id", "body"],
}
NOTE_BODY = "{\n    /** integer. */ id: number;\n    body: string;\n    [k: string]: unknown;\n  }"


def tool(name: str, output: Any = None, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}, **extra}
    if output is not None:
        entry["outputSchema"] = copy.deepcopy(output)
    return entry


def dts(tools: list[dict[str, Any]]) -> str:
    return build_outputs([FixtureSet("s", {}, tools)]).files["servers/s.d.ts"]


def compile_with_script(tmp_path: Path, outputs: Outputs, script: str) -> None:
    tsc = str(TSC) if TSC.exists() else shutil.which("tsc")
    if tsc is None:
        pytest.skip("tsc not found (run `npm ci` in the repository root)")
    out = tmp_path / "out"
    for rel, text in outputs.files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    (tmp_path / "agent.ts").write_text(script, encoding="utf-8")
    proc = subprocess.run(
        [tsc, "-p", str(out / "tsconfig.json"), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_s4_4_identical_outputs_share_the_title_named_body_and_compile(tmp_path: Path) -> None:
    tools = [
        tool("create_note", NOTE, description="Create a note."),
        tool("get_note", NOTE, description="Fetch a note."),
        tool("update_note", NOTE),
    ]
    outputs = build_outputs([FixtureSet("s", {}, tools)])
    text = outputs.files["servers/s.d.ts"]
    assert text.count(" = {\n    /** integer. */ id: number;") == 1
    assert "  /** One note. */\n  export type Note = " + NOTE_BODY + ";\n" in text
    for name in ("CreateNoteOutput", "GetNoteOutput", "UpdateNoteOutput"):
        assert f"  export type {name} = Note;\n" in text
    # the body comes first, before the first alias; tool docs stay on the functions
    assert text.index("export type Note =") < text.index("export type CreateNoteOutput =")
    assert "  /** Fetch a note. */\n  export function get_note(" in text
    # the manifest keeps naming the tools' own types
    server = outputs.manifest["servers"][0]
    assert [t["types"]["output"] for t in server["tools"]] == [
        "CreateNoteOutput",
        "GetNoteOutput",
        "UpdateNoteOutput",
    ]
    compile_with_script(
        tmp_path,
        outputs,
        'import { get_note, create_note, type GetNoteOutput, type Note } from "@codemode/servers/s";\n'
        "const a: GetNoteOutput = await create_note({});\n"
        "const b: Note = await get_note();\n"
        "const n: number = a.id + b.id;\n"
        "// @ts-expect-error body is a string\n"
        "const bad: number = b.body;\n"
        "export {};\n",
    )


def test_identical_helper_named_like_the_title_holds_the_body() -> None:
    listing = {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Note"}}},
        "required": ["result"],
        "$defs": {"Note": NOTE},
    }
    text = dts([tool("get_note", NOTE), tool("list_notes", listing)])
    assert "  export type GetNoteOutput = Note;\n" in text
    assert "  export type ListNotesOutput = { result: Note[]; [k: string]: unknown };\n" in text
    assert text.count(NOTE_BODY) == 1
    assert "  /** One note. */\n  export type Note = " + NOTE_BODY in text
    # the title is now the body's name: no doc line repeats it
    assert "* Note\n" not in text and "/** Note " not in text


def test_identical_helpers_of_two_tools_are_shared() -> None:
    def listing(defs: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": f"#/$defs/{defs}"}}},
            "$defs": {defs: {k: v for k, v in NOTE.items() if k != "title"}},
        }

    text = dts([tool("a", listing("Item")), tool("b", listing("Item"))])
    assert "  export type Item2 = Item;\n" in text
    assert text.count(NOTE_BODY) == 1


def test_without_a_shared_title_the_alphabetically_first_name_holds_the_body() -> None:
    untitled = {k: v for k, v in NOTE.items() if k != "title"}
    retitled = dict(untitled, title="Memo")
    text = dts([tool("zeta", untitled), tool("alpha", retitled), tool("mid", untitled)])
    assert "  export type MidOutput = AlphaOutput;\n" in text
    assert "  export type ZetaOutput = AlphaOutput;\n" in text
    assert text.count(NOTE_BODY) == 1
    # docs that differ stay on the alias; the shared description is printed once, on the body
    assert text.count("One note.") == 1
    assert "  /**\n   * Memo\n   * One note.\n   */\n  export type AlphaOutput = {" in text


@pytest.mark.parametrize(
    ("title", "why"),
    [
        ("My Note", "not an identifier"),
        ("Promise", "a TS global the module must not shadow"),
        ("note", "not the PascalCase name the scope would hand out"),
        ("OtherOutput", "taken by a different type in the module"),
    ],
)
def test_unusable_titles_fall_back_to_the_first_name(title: str, why: str) -> None:
    schema = dict(NOTE, title=title)
    other = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    text = dts([tool("b", schema), tool("c", schema), tool("other", other)])
    assert "  export type COutput = BOutput;\n" in text, why
    assert text.count(NOTE_BODY) == 1
    assert f"export type {title} =" not in text or title == "OtherOutput"


def test_short_one_line_bodies_are_repeated_not_aliased() -> None:
    short = {"type": "string"}
    long_enum = {"enum": ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]}
    text = dts([tool("a", short), tool("b", short), tool("c", long_enum), tool("d", long_enum)])
    assert "  export type AOutput = string;\n" in text
    assert "  export type BOutput = string;\n" in text
    assert (
        len('"alpha" | "bravo" | "charlie" | "delta" | "echo" | "foxtrot"') >= MIN_SHARED_BODY_CHARS
    )
    assert "  export type DOutput = COutput;\n" in text


def test_sharing_is_deterministic_and_listing_order_independent() -> None:
    tools = [tool("get_note", NOTE), tool("create_note", NOTE), tool("update_note", NOTE)]
    first = dts(tools)
    assert first == dts(tools)
    # a live listing's hash (header line) follows its order; the declarations must not
    body = first.split("\n", 1)[1]
    assert body == dts(list(reversed(copy.deepcopy(tools)))).split("\n", 1)[1]
