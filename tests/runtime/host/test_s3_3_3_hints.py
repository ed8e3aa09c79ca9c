"""§3.3.3 hints of a failed run, unit by unit (runtime/host/hints.py, script_errors.py, near_miss.py, validation.py).

tests/runtime/host/test_s3_3_3_mistakes.py runs the mistake corpus through the real runtime; these tests pin
the pieces: the analysis over the demo's out/ (the engine's diagnostic as the worker makes it,
rewritten by `hints.explain`), the bounds and the fallback (a hint never fails a run), the
closest-name search, IMPORT_FAILURE for a missing export, the unawaited-call warning and the
hint of a programming error.
"""

from __future__ import annotations

from typing import Any

import pytest

from codemode_gen.generator.manifest import read_manifest
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import near_miss, script_errors
from codemode_gen.runtime.host import hints, hints_mistakes
from codemode_gen.runtime.host.catalog import Catalog, manifest_views
from codemode_gen.runtime.host.validation import prepare_arguments
from codemode_gen.runtime.host.validation_errors import InputInvalid
from tests.runtime_support import REPO


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    out = REPO / "out"
    return Catalog(servers=manifest_views(read_manifest(out), out, {}))


def uncaught(text: str, path: str) -> diag.Diagnostic:
    """The diagnostic the worker makes of an engine error (response.uncaught_exception)."""
    name, _, message = text.partition(": ")
    line, col = path.split(":")
    stack = f"    at <anonymous> (agent.js:{line}:{col})\n"
    return script_errors.uncaught_exception(
        {"isError": True, "name": name, "message": message, "stack": stack}, []
    )


def explained(catalog: Catalog, code: str, text: str, path: str) -> diag.Diagnostic:
    [d] = hints.explain([uncaught(text, path)], code, code, catalog)
    return d


BOXED = (
    "import * as notes from '@codemode/servers/notes';\n"
    "const all = await notes.list_notes();\n"
    "globalThis.__codemode_result__ = all.map((n) => n.title);\n"
)


def test_a_boxed_result_used_as_an_array_names_result(catalog: Catalog) -> None:
    d = explained(catalog, BOXED, "TypeError: not a function", "3:41")
    assert d["hint"] == "use .result: all.result.map((n) => n.title)"
    assert "notes.list_notes()" in d["message"] and "{ result: Note[] }" in d["message"]
    assert d["message"].endswith("\n    at <anonymous> (agent.js:3:41)")  # the frames stay
    assert d["path"] == "3:41" and d["code"] == diag.DiagnosticCode.UNCAUGHT_EXCEPTION


def test_a_value_bound_elsewhere_is_rewritten_where_it_was_bound(catalog: Catalog) -> None:
    code = BOXED.replace(
        "all.map((n) => n.title)", "0;\nconst first = all[0];\nconsole.log(first.title);"
    )
    d = explained(catalog, code, "TypeError: cannot read property 'title' of undefined", "5:13")
    assert d["hint"] == "use .result: all.result[0]"


def test_json_text_is_parsed_and_plain_text_is_not(catalog: Catalog) -> None:
    code = "import { stats, summary } from '@codemode/servers/notes';\nconst s = await stats();\ns.byTag.home;\n"
    d = explained(catalog, code, "TypeError: cannot read property 'home' of undefined", "3:1")
    assert d["hint"] == "parse it first: JSON.parse(s).byTag.home"
    code = "import { summary } from '@codemode/servers/notes';\nconst t = await summary();\nJSON.parse(t);\n"
    d = explained(catalog, code, "SyntaxError: unexpected token: 'You'", "3:11")
    assert "not JSON" in d["message"] and "no JSON.parse" in d["hint"]


def test_the_closest_field_and_the_items_of_a_callback(catalog: Catalog) -> None:
    code = (
        "import { list_notes } from '@codemode/servers/notes';\n"
        "const { result } = await list_notes();\n"
        "result.filter((n) => n.tag.includes('work'));\n"
    )
    d = explained(catalog, code, "TypeError: cannot read property 'includes' of undefined", "3:22")
    assert "no field 'tag'" in d["message"] and d["hint"].startswith(
        "did you mean .tags? n.tags.includes"
    )


def test_typescript_positions_and_text(catalog: Catalog) -> None:
    # The engine ran the erased script; the hint quotes the agent's TypeScript.
    code = (
        "import { get_note } from '@codemode/servers/notes';\n"
        "const n: { titel: string } = (await get_note({ id: 2 })) as any;\n"
        "n.titel!.length;\n"
    )
    from codemode_gen.runtime.host.tsinput import erase_types

    script = erase_types(code).code
    assert script != code
    [d] = hints.explain(
        [uncaught("TypeError: cannot read property 'length' of undefined", "3:1")],
        code,
        script,
        catalog,
    )
    assert d["hint"] == "did you mean .title? n.title!.length"


@pytest.mark.parametrize(
    "code",
    [
        "let a = b; let b = a;\na.x.y;\n",  # a cycle of aliases
        "const q = await fetchSomething();\nq.x.y;\n",  # nothing the host knows
        "import * as notes from '@codemode/servers/notes';\nconst x = notes.get_note;\nx.y.z;\n",
        "}{ not even JavaScript (\n a.b.c",
    ],
)
def test_nothing_known_keeps_the_engines_diagnostic(catalog: Catalog, code: str) -> None:
    d = uncaught("TypeError: cannot read property 'z' of undefined", "2:1")
    assert hints.explain([d], code, code, catalog) == [d]


def test_a_hint_never_fails_a_run(catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("bug in the analysis")

    monkeypatch.setattr(hints_mistakes.Analysis, "not_a_function", broken)
    d = uncaught("TypeError: not a function", "3:41")
    assert hints.explain([d], BOXED, BOXED, catalog) == [d]


def test_bounds_and_what_is_left_alone(catalog: Catalog) -> None:
    d = uncaught("TypeError: not a function", "3:41")
    huge = BOXED + " " * hints.MAX_SCRIPT_CHARS
    assert hints.explain([d], huge, huge, catalog) == [d]  # too big to analyse after a failure
    classed: diag.Diagnostic = {**d, "errorClass": "ToolCallError"}
    assert hints.explain([classed], BOXED, BOXED, catalog) == [classed]  # has its own hint
    assert not hints.needs_explaining([{"code": "SANDBOX_LIMIT", "severity": "error"}, classed])
    assert hints.needs_explaining([d])


def test_a_programming_errors_hint_says_fix_never_catch() -> None:
    d = uncaught("TypeError: x is not a function", "4:2")
    assert "try" not in d["hint"] and "catch" not in d["hint"]
    assert "fix the script's code" in d["hint"] and "agent.js:4:2" in d["hint"]
    own = script_errors.uncaught_exception(
        {"isError": True, "name": "Error", "message": "no notes", "stack": ""}, []
    )
    assert "threw this itself" in own["hint"] and "catch" not in own["hint"]


def test_closest_names() -> None:
    assert near_miss.closest_names("listNotes", ["get_note", "list_notes", "list_events"]) == [
        "list_notes"
    ]
    assert near_miss.closest_names("list_note", ["list_notes", "list_events"]) == ["list_notes"]
    assert near_miss.closest_names("zzz", ["list_notes"]) == []
    assert near_miss.closest_names("x" * 10_000, ["x"]) == []  # bounded: no quadratic difflib
    many = [f"tool_{i}" for i in range(10 * near_miss.MAX_NEAR_MISS_CANDIDATES)]
    assert len(near_miss.closest_names("tool_1", many, n=3)) <= 3


def test_import_failure_of_a_missing_export_names_the_closest_one() -> None:
    source = (REPO / "out" / "servers" / "notes.js").read_text(encoding="utf-8")
    modules = {"@codemode/servers/notes": source}
    assert "list_notes" in script_errors.module_exports(
        source
    ) and "__meta__" not in script_errors.module_exports(source)
    assert script_errors.export_not_found(
        "Could not find export 'list_note' in module '@codemode/servers/notes'"
    ) == ("list_note", "@codemode/servers/notes")
    code = "import { get_note, list_note } from '@codemode/servers/notes';\n"
    d = script_errors.export_failure("list_note", "@codemode/servers/notes", code, modules)
    assert d["code"] == diag.DiagnosticCode.IMPORT_FAILURE and d["path"] == "1:20"
    assert (
        d["hint"]
        == "did you mean 'list_notes'? import { list_notes } from '@codemode/servers/notes'"
    )
    d = script_errors.export_failure(
        "default",
        "@codemode/servers/notes",
        "import notes from '@codemode/servers/notes';",
        modules,
    )
    assert (
        d["hint"]
        == "import the module as a namespace: import * as notes from '@codemode/servers/notes'"
    )
    d = script_errors.import_failure(
        "notes", "import * as n from 'notes';", ["@codemode/servers/notes", "@codemode/errors"]
    )
    assert "did you mean '@codemode/servers/notes'" in d["hint"]


def test_unawaited_calls_are_warnings_naming_the_tool_and_bounded() -> None:
    stack = (
        "Error\n    at callTool (@codemode/host:84:20)\n    at flaky_sync (@codemode/servers/notes:23:44)\n"
        "    at <anonymous> (agent.js:2:1)\n"
    )
    call = {
        "serverId": "notes",
        "toolName": "flaky_sync",
        "name": "ToolCallError",
        "message": "down",
        "stack": stack,
    }
    report = {"calls": [call] * (script_errors.MAX_UNAWAITED_REPORTED + 2), "untracked": 3}
    found = script_errors.unawaited_calls(report, ["@codemode/servers/notes"])
    assert len(found) == script_errors.MAX_UNAWAITED_REPORTED + 1
    first = found[0]
    assert (
        first["severity"] == "warning"
        and first["code"] == diag.DiagnosticCode.UNAWAITED_CALL_FAILED
    )
    assert (
        "notes.flaky_sync failed" in first["message"] and "ToolCallError: down" in first["message"]
    )
    assert "`await flaky_sync(...)`" in first["hint"] and first["path"] == "2:1"
    assert found[-1]["message"].startswith("5 more tool call(s)")
    assert (
        script_errors.unawaited_calls(None, []) == []
        and script_errors.unawaited_calls({"calls": "x"}, []) == []
    )


NOTE_INPUT = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def invalid(schema: dict[str, Any], value: Any, export: str = "get_note") -> InputInvalid:
    with pytest.raises(InputInvalid) as info:
        prepare_arguments(schema, export, export, value)
    return info.value


def test_positional_input_gets_the_call_with_an_object() -> None:
    assert (
        invalid(NOTE_INPUT, 2).hint
        == "Pass one input object, not positional arguments: get_note({ id: 2 })."
    )
    two = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["title", "body"],
    }
    hint = invalid(two, "Groceries", "create_note").hint
    assert (
        hint.startswith("Pass one input object, not positional arguments: create_note(")
        and "title" in hint
    )


def test_a_misnamed_property_is_named() -> None:
    assert invalid(NOTE_INPUT, {"noteId": 2}).hint == (
        "Add the required property `input.id` (integer); `noteId` is not one of its properties: rename it to `id`."
    )
    assert "not among its properties" in invalid(NOTE_INPUT, {"a": 1, "b": 2}).hint
