"""generator/drift.py, drift_listing.py, drift_results.py: the pure comparison behind `record --check` (no servers, no files)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from codemode_gen.generator.drift import check_server, exit_status, plan_resamples, render_report
from codemode_gen.generator.drift_findings import Finding, Repeated, Resample, ServerCheck
from codemode_gen.generator.drift_listing import (
    MAX_DIFF_LINES,
    compare_server,
    compare_tools,
    json_diff,
)
from codemode_gen.generator.drift_results import compare_results, shape_schema
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.jsonio import canonical_json as canonical

READ_ONLY = {"readOnlyHint": True}


def tool(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, "annotations": READ_ONLY, **fields}


def structured(value: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "…"}], "structuredContent": value}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def line(result: dict[str, Any], args: Any = None, **extra: Any) -> dict[str, Any]:
    return {
        "input": {} if args is None else args,
        "result": result,
        "durationMs": 1,
        "recordedAt": "x",
        **extra,
    }


def fixture(
    tools: list[dict[str, Any]], calls: dict[str, list[dict[str, Any]]] | None = None
) -> FixtureSet:
    return FixtureSet("srv", {"instructions": "Be nice."}, tools, calls or {})


def repeat(name: str, result: dict[str, Any], at: int = 1) -> Repeated:
    return Repeated(Resample(name, at, {}), result=result)


def shapes(fs: FixtureSet, *items: Repeated, mode: Any = "spec") -> list[str]:
    findings, unchecked, notes, _ = compare_results(fs, items, mode)
    assert not unchecked and not notes, (unchecked, notes)
    return [f.text() for f in findings]


# --------------------------------------------------------------------------- the tool list


def test_canonical_ignores_key_order_and_integral_floats_but_not_bool_vs_int() -> None:
    assert canonical({"b": 1, "a": [1.0, {"y": 2, "x": None}]}) == canonical(
        {"a": [1, {"x": None, "y": 2.0}], "b": 1.0}
    )
    assert canonical({"default": True}) != canonical({"default": 1})
    assert canonical(1.5) != canonical(1)


def test_json_diff_names_pointers_old_and_new() -> None:
    old = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    new = {
        "type": "object",
        "properties": {"q": {"type": "integer"}, "n": {}},
        "required": ["q", "n"],
    }
    assert json_diff(old, new) == [
        "/properties/n: added {}",
        '/properties/q/type: "string" -> "integer"',
        '/required: ["q"] -> ["q","n"]',
    ]
    assert json_diff({"a/b": 1, "gone": 2}, {"a/b": 2}) == [
        "/a~1b: 1 -> 2",
        "/gone: removed (was 2)",
    ]
    many = json_diff({f"k{i:02d}": i for i in range(30)}, {f"k{i:02d}": -i for i in range(1, 31)})
    assert (
        len(many) == MAX_DIFF_LINES + 1
        and many[-1] == f"... and {31 - MAX_DIFF_LINES} more differences"
    )  # k00 removed, k01-k29 changed, k30 added


def test_compare_tools_added_removed_and_changed_fields() -> None:
    recorded = [
        tool(
            "same",
            description="Same.",
            inputSchema={"type": "object", "properties": {"n": {"type": "number", "default": 1}}},
        ),
        tool("gone"),
        tool("described", description="Search every note in the notebook by its title."),
        tool("titled", title="Old"),
        tool("annotated"),
        tool("typed", outputSchema={"type": "object"}),
    ]
    live = [
        # key order and 1 vs 1.0 do not matter; absent and null descriptions mean the same
        {
            "annotations": READ_ONLY,
            "name": "same",
            "description": "Same.",
            "inputSchema": {
                "properties": {"n": {"default": 1.0, "type": "number"}},
                "type": "object",
            },
        },
        tool("new"),
        tool("described", description="Search every note in the notebook by its body."),
        tool("titled", title="New"),
        tool("annotated", annotations={"readOnlyHint": False}),
        tool("typed", outputSchema={"type": "array"}),
    ]
    got = [f.text() for f in compare_tools(recorded, live)]
    assert got == [
        "annotated: annotations changed at /readOnlyHint: true -> false",
        'described: description changed: …"the notebook by its title." -> …"the notebook by its body."',
        "gone: tool removed (the server no longer lists it)",
        "new: tool added (not in the fixtures)",
        'titled: title changed: "Old" -> "New"',
        'typed: outputSchema changed at /type: "object" -> "array"',
    ]
    assert compare_tools(recorded, recorded) == []
    assert compare_tools([tool("d", description=None)], [tool("d")]) == []


def test_compare_server_instructions_only() -> None:
    assert (
        compare_server(
            {"instructions": "a", "serverInfo": {"version": "1"}},
            {"instructions": "a", "serverInfo": {"version": "2"}},
        )
        == []
    )
    (finding,) = compare_server({"instructions": "a"}, {})
    assert finding.tool is None and finding.text() == 'instructions changed: "a" -> (absent)'


def test_report_lines_quote_hostile_server_text_printably() -> None:
    # spec §11: tool names and descriptions are untrusted; a report line never carries an escape
    (added,) = compare_tools([], [tool("evil\x1b[31m\nname")])
    assert "\x1b" not in added.text() and "\n" not in added.text()
    (changed,) = compare_tools(
        [tool("t", description="ok")], [tool("t", description="ok\x1b]0;pwned\x07")]
    )
    assert "\x1b" not in changed.text() and "\x07" not in changed.text()


# --------------------------------------------------------------------------- result shapes


def test_shape_schema_keeps_what_the_type_says() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"], "minimum": 0, "multipleOf": 2},
            "pattern": {"type": "string", "pattern": "^a", "format": "email", "maxLength": 3},
            "kind": {"const": "a"},
            "items": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "cond": {"if": {"const": 1}, "then": {"type": "string"}, "not": {"const": 2}},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    assert shape_schema(schema) == {
        "type": "object",
        "properties": {
            "n": {"type": ["number", "null"]},
            "pattern": {"type": "string"},  # a property named like a keyword stays
            "kind": {"const": "a"},
            "items": {"type": "array", "items": {"type": "number"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
            "cond": {},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    assert schema["properties"]["n"]["minimum"] == 0  # the input is not modified


def test_inferred_type_flags_changed_kinds_and_missing_fields_not_values() -> None:
    calls = {
        "get": [
            line(structured({"id": 1, "name": "a", "tags": ["x"], "price": 2})),
            line(structured({"id": 2, "name": "b", "tags": [], "price": 3, "note": "n"})),
        ]
    }
    fs = fixture([tool("get")], calls)
    # other values, a float where integers were recorded, a new field: the type still holds
    assert (
        shapes(
            fs,
            repeat(
                "get",
                structured({"id": 7, "name": "zz", "tags": ["y", "z"], "price": 2.5, "extra": 1}),
            ),
        )
        == []
    )
    assert shapes(
        fs,
        repeat("get", structured({"id": "7", "name": "a", "price": 1}), at=1),
        repeat("get", structured({"id": "8", "name": None, "price": 1}), at=2),
    ) == [
        "get: result shape changed at /id: expected number, got string (samples 1, 2)",
        "get: result shape changed at /name: expected string, got null (sample 2)",
        "get: result shape changed at /tags: expected array, got nothing (missing) (samples 1, 2)",
    ]


def test_declared_type_flags_literals_and_closed_objects_not_value_constraints() -> None:
    declared = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0},
            "status": {"enum": ["open", "closed"]},
            "code": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 3},
        },
        "required": ["count", "status"],
        "additionalProperties": False,
    }
    fs = fixture(
        [tool("stat", outputSchema=declared)],
        {"stat": [line(structured({"count": 1, "status": "open"}))]},
    )
    assert (
        shapes(
            fs,
            repeat(
                "stat", structured({"count": -2.5, "status": "closed", "code": "lower-and-long"})
            ),
        )
        == []
    )
    assert shapes(
        fs, repeat("stat", structured({"count": 1, "status": "archived", "more": True}))
    ) == [
        "stat: result shape changed at /more: expected no such property (closed object), got boolean (sample 1)",
        'stat: result shape changed at /status: expected "open" or "closed", got "archived" (sample 1)',
    ]


def test_what_the_recording_already_showed_is_not_a_change() -> None:
    # the server broke its declared type when it was recorded (generate reports that); the
    # same break again is not drift of the server since, a new one is
    declared = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}},
    }
    calls = {"ev": [line(structured({"id": 1, "n": 1})), line(structured({"id": "4", "n": 1}))]}
    fs = fixture([tool("ev", outputSchema=declared)], calls)
    assert shapes(fs, repeat("ev", structured({"id": "4", "n": 2}), at=2)) == []
    assert shapes(fs, repeat("ev", structured({"id": "4", "n": "2"}), at=2)) == [
        "ev: result shape changed at /n: expected number, got string (sample 2)",
    ]
    assert shapes(fs, repeat("ev", structured({"id": "1", "n": 1}), at=1)) == [
        "ev: result shape changed at /id: expected number, got string (sample 1)",
    ]


def test_union_is_explained_by_the_member_of_the_same_kind() -> None:
    declared = {
        "type": "object",
        "properties": {
            "v": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                    },
                    {"type": "null"},
                ]
            }
        },
    }
    fs = fixture([tool("u", outputSchema=declared)], {"u": [line(structured({"v": None}))]})
    assert shapes(fs, repeat("u", structured({"v": {"id": "x"}}))) == [
        "u: result shape changed at /v/id: expected number, got string (sample 1)",
    ]
    assert shapes(fs, repeat("u", structured({"v": [1]}))) == [
        "u: result shape changed at /v: expected object or null, got array (sample 1)",
    ]


def test_unwrapping_follows_spec_5_3_2_and_the_unwrap_mode() -> None:
    # §5.3.2 rule 2: one text block is returned as the string; a tool that always answered JSON
    # text is typed as "a string holding JSON", whose inside is compared too
    fs = fixture([tool("j")], {"j": [line(text('{"a": 1}'))]})
    assert shapes(fs, repeat("j", text('{"a": 5}'))) == []
    assert shapes(fs, repeat("j", text('{"a": "x"}'))) == [
        "j: result shape changed at /a (in the JSON text): expected number, got string (sample 1)",
    ]
    assert shapes(fs, repeat("j", text("[1]"))) == [
        "j: result shape changed at / (in the JSON text): expected object, got array (sample 1)",
    ]
    assert shapes(fs, repeat("j", text("not json"))) == [
        "j: result shape changed at /: expected a string holding a JSON object or array, got a string without one (sample 1)",
    ]
    # unwrap = "json": the text is parsed before it is compared
    assert shapes(fs, repeat("j", text('{"a": "x"}')), mode="json") == [
        "j: result shape changed at /a: expected number, got string (sample 1)",
    ]
    # rule 1 before rule 2: structuredContent wins over the text
    plain = fixture([tool("s")], {"s": [line(text("hello"))]})
    assert shapes(plain, repeat("s", text("bye"))) == []
    assert shapes(plain, repeat("s", structured({"x": 1}))) == [
        "s: result shape changed at /: expected string, got object (sample 1)",
    ]


def test_boxed_declared_schema_is_checked_as_sent() -> None:
    # §5.3.2: the server sends the box; whether the binding unboxes it does not change the check
    boxed = {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "x-dedalus-box": {"field": "result"},
    }
    fs = fixture(
        [tool("answer", outputSchema=boxed)], {"answer": [line(structured({"result": 7}))]}
    )
    assert shapes(fs, repeat("answer", structured({"result": 8}))) == []
    assert shapes(fs, repeat("answer", structured({"value": 8}))) == [
        "answer: result shape changed at /result: expected number, got nothing (missing) (sample 1)",
    ]


def test_failed_calls_and_tool_errors_are_unchecked_not_drift() -> None:
    fs = fixture([tool("t")], {"t": [line(structured({"a": 1}))] * 4})
    sample = [Resample("t", i, {}) for i in range(1, 5)]
    findings, unchecked, notes, compared = compare_results(
        fs,
        [
            Repeated(sample[0], failed="call failed: boom (code -32000)"),
            Repeated(
                sample[1], result={"content": [{"type": "text", "text": "quota"}], "isError": True}
            ),
            Repeated(
                sample[2],
                unrecordable="record would not keep the result: nan (not a JSON number) at /a",
            ),
            Repeated(sample[3], skipped="result of 300,000 bytes cut"),
        ],
    )
    assert [f.text() for f in findings] == [
        "t: sample 3: record would not keep the result: nan (not a JSON number) at /a"
    ]
    assert unchecked == [
        "t sample 1: call failed: boom (code -32000)",
        "t sample 2: answered with a tool error (isError): quota",
    ]
    assert notes == ["t sample 4: not compared: result of 300,000 bytes cut"]
    assert compared == 0


def test_unusable_declared_schema_is_a_note() -> None:
    bad = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    fs = fixture([tool("r", outputSchema=bad)], {"r": [line(structured({"a": 1}))]})
    findings, unchecked, notes, _ = compare_results(fs, [repeat("r", structured({"a": 1}))])
    assert findings == [] and unchecked == []
    assert len(notes) == 1 and notes[0].startswith("r: results not compared:")
    invalid = fixture([tool("i", outputSchema={"type": 12})], {"i": [line(structured({}))]})
    _, _, notes, _ = compare_results(invalid, [repeat("i", structured({}))])
    assert notes[0].startswith("i: its declared outputSchema is not a valid JSON Schema")


# --------------------------------------------------------------------------- what is repeated


def test_plan_repeats_only_read_only_recorded_samples_that_define_the_type() -> None:
    calls = {
        "ro": [
            line(structured({"a": 1}), {"q": 1}),
            line({"content": [], "isError": True}, {"q": 2}),  # an error: not part of the type
            line(structured({"a": 2}), {"q": 3}, truncated={"originalBytes": 9, "keptBytes": 1}),
            line(structured({"a": 3}), {"key": "<redacted:API_KEY>"}),
            line(structured({"a": 4}), {"q": 5}),
        ],
        "writes": [line(structured({}))],
        "was_ro_now_not": [line(structured({}))],
        "hidden": [line(structured({}))],
        "gone": [line(structured({}))],
    }
    recorded = [
        tool("ro"),
        tool("writes", annotations={}),
        tool("was_ro_now_not"),
        tool("hidden"),
        tool("gone"),
    ]
    live = [
        tool("ro"),
        tool("writes", annotations={}),
        tool("was_ro_now_not", annotations={"readOnlyHint": False}),
        tool("hidden"),
    ]
    plan, notes = plan_resamples(fixture(recorded, calls), live, blocklist=["hidden"])
    assert plan == [Resample("ro", 1, {"q": 1}), Resample("ro", 5, {"q": 5})]
    assert notes == ["ro sample 4: not repeated: its recorded input was redacted"]


# --------------------------------------------------------------------------- verdicts and report


def test_exit_status_drift_beats_could_not_check() -> None:
    ok = ServerCheck("a")
    drift = ServerCheck("b", findings=[Finding("t", "tool-added", "tool added")])
    down = ServerCheck("c", unreachable="connection refused")
    partial = ServerCheck("d", unchecked=["t sample 1: timed out"])
    new = ServerCheck("e", not_recorded=True)
    assert exit_status([ok]) == 0
    assert exit_status([ok, down]) == 3 and exit_status([partial]) == 3
    assert exit_status([ok, drift, down]) == 1 and exit_status([new, down]) == 1
    assert [c.status for c in (ok, drift, down, partial, new)] == [
        "up-to-date",
        "drift",
        "unreachable",
        "incomplete",
        "not-recorded",
    ]


def test_report_is_sorted_and_deterministic() -> None:
    calls = {"b": [line(structured({"x": 1}))], "a": [line(structured({"y": "s"}))]}
    fs = FixtureSet("srv", {}, [tool("a"), tool("b"), tool("c")], calls)
    live = [tool("z"), tool("b", description="new"), tool("a")]
    results = [repeat("b", structured({"x": "1"})), repeat("a", structured({"y": 1}))]
    reports = set()
    for seed in range(5):
        rng = random.Random(seed)
        shuffled_live, shuffled_results = live[:], results[:]
        rng.shuffle(shuffled_live)
        rng.shuffle(shuffled_results)
        check = check_server(fs, {}, shuffled_live, shuffled_results)
        others = [
            ServerCheck("m", unreachable="connection refused", log_path=Path("/l/m.log")),
            ServerCheck("a-new", not_recorded=True),
        ]
        rng.shuffle(others)
        reports.add("\n".join(render_report([check, *others], Path("fixtures"))))
    (report,) = reports
    assert report.splitlines() == [
        "a-new: not recorded yet: no fixtures/a-new/ (run `codemode-gen record --server a-new`)",
        "m: unreachable: connection refused",
        "  (server log: /l/m.log)",
        "srv: drift, 5 findings (3 tools, 2 results compared)",
        "  a: result shape changed at /y: expected string, got number (sample 1)",
        '  b: description changed: (absent) -> "new"',
        "  b: result shape changed at /x: expected number, got string (sample 1)",
        "  c: tool removed (the server no longer lists it)",
        "  z: tool added (not in the fixtures)",
    ]


def test_unchanged_server_is_up_to_date() -> None:
    calls = {"a": [line(structured({"y": "s"}), {"k": 1})]}
    fs = FixtureSet("srv", {"instructions": "hi"}, [tool("a")], calls)
    check = check_server(
        fs, {"instructions": "hi"}, [tool("a")], [repeat("a", structured({"y": "other"}))]
    )
    assert check.status == "up-to-date" and check.compared == 1
    assert render_report([check], Path("fx")) == ["srv: up to date (1 tool, 1 result compared)"]
