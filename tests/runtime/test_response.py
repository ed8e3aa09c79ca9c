"""runtime/response.py and the contract modules it was split from (logs, diagnostics, script_errors, json_cut, host/tooltrace): §3.3 logs (truncation), diagnostics, stack mapping, result rules."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode_gen.limit_bounds import MIN_RESPONSE_CHARS as R_MIN
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import json_cut, jsonsafe, screen, script_errors
from codemode_gen.runtime import logs as run_logs
from codemode_gen.runtime import response as R
from codemode_gen.runtime.host import tooltrace


def test_s3_3_1_truncation_cuts_at_limit_and_appends_warn() -> None:
    logs = run_logs.LogCollector(10)
    assert logs.add("log", "12345", 1) is not None
    assert logs.add("warn", "67890abc", 2) == {"level": "warn", "message": "67890", "timeMs": 2}
    assert logs.truncated
    assert logs.add("log", "dropped", 3) is None
    final = run_logs.finish_logs(logs.entries, logs.truncated, 10, 5)
    assert [e["message"] for e in final[:-1]] == ["12345", "67890"]
    assert (
        final[-1]["level"] == "warn"
        and "maxLogBytes" in final[-1]["message"]
        and "10" in final[-1]["message"]
    )
    assert final[-1]["timeMs"] == 5


def test_truncation_respects_utf8_boundaries() -> None:
    logs = run_logs.LogCollector(4)
    logs.add("log", "aé€", 0)  # 1 + 2 + 3 bytes
    assert logs.entries[0]["message"] == "aé"
    assert logs.truncated


def test_exact_fit_is_not_truncated() -> None:
    logs = run_logs.LogCollector(3)
    logs.add("log", "abc", 0)
    assert not logs.truncated
    assert run_logs.finish_logs(logs.entries, logs.truncated, 3, 0) == [
        {"level": "log", "message": "abc", "timeMs": 0}
    ]


def test_unknown_level_becomes_log_and_lone_surrogates_are_replaced() -> None:
    logs = run_logs.LogCollector(100)
    entry = logs.add("info", "a\ud800b", 0)
    assert entry == {"level": "log", "message": "a\ufffdb", "timeMs": 0}
    assert jsonsafe.utf8_safe("\U0001f600") == "\U0001f600"


def test_map_stack_keeps_agent_and_codemode_frames_only() -> None:
    stack = (
        "    at toError (@codemode/errors:3:1)\n"
        "    at callTool (@codemode/host:80:5)\n"
        "    at run (eval_script:400:3)\n"
        "    at apply (native)\n"
        "    at f (agent.js:2:15)\n"
        "    at /home/user/secret.py:1\n"
        "    at <anonymous> (agent.js:4:1)\n"
    )
    frames = script_errors.map_stack(stack, ["@codemode/host", "@codemode/errors"])
    assert frames == [
        "    at callTool (@codemode/host:80:5)",
        "    at f (agent.js:2:15)",
        "    at <anonymous> (agent.js:4:1)",
    ]
    assert script_errors.agent_location(stack) == "2:15"


def test_s3_3_3_uncaught_exception_diagnostic() -> None:
    d = script_errors.uncaught_exception(
        {
            "isError": True,
            "name": "TypeError",
            "message": "x is null",
            "stack": "    at f (agent.js:2:15)\n",
            "text": "TypeError: x is null",
        },
        [],
    )
    assert d["severity"] == "error" and d["code"] == "UNCAUGHT_EXCEPTION"
    assert d["message"] == "Uncaught TypeError: x is null\n    at f (agent.js:2:15)"
    assert d["path"] == "2:15" and d["hint"] and "errorClass" not in d


def test_uncaught_codemode_error_keeps_class_and_hint() -> None:
    d = script_errors.uncaught_exception(
        {
            "isError": True,
            "name": "Mine",
            "message": "m",
            "stack": "",
            "errorClass": "ToolCallError",
            "hint": "retry later",
        },
        [],
    )
    assert (d["errorClass"], d["hint"]) == ("ToolCallError", "retry later")


def test_uncaught_non_error_value() -> None:
    d = script_errors.uncaught_exception({"isError": False, "text": '{"a":1}', "stack": None}, [])
    assert d["message"] == 'Uncaught {"a":1}' and "path" not in d


def test_syntax_error_path_is_line_column() -> None:
    d = script_errors.syntax_error("unexpected token", "    at check:4:5\n")
    assert d["code"] == "SYNTAX_ERROR" and d["path"] == "4:5" and "agent.js:4:5" in d["message"]


def test_import_failure_lists_server_modules_and_locates_the_import() -> None:
    assert (
        script_errors.module_not_found("module not found: @codemode/servers/nope")
        == "@codemode/servers/nope"
    )
    assert script_errors.module_not_found("something else") is None
    code = 'const x = 1;\nimport("@codemode/servers/nope");'
    d = script_errors.import_failure(
        "@codemode/servers/nope",
        code,
        ["@codemode/servers/b", "@codemode/servers/a", "@codemode/discovery", "@codemode/host"],
    )
    assert d["code"] == "IMPORT_FAILURE" and d["path"] == "2:8"
    assert "@codemode/servers/a, @codemode/servers/b" in d["hint"]
    assert "@codemode/discovery" in d["hint"] and "@codemode/host" not in d["hint"]


def test_sandbox_limit_diagnostic() -> None:
    d = diag.timeout_limit(500)
    assert (
        d["code"] == "SANDBOX_LIMIT"
        and d["errorClass"] == "SandboxLimitError"
        and "500" in d["message"]
    )
    assert d["hint"]


def test_s3_3_4_result_is_null_on_fatal_error() -> None:
    fatal = R.build_response([], {"a": 1}, [diag.timeout_limit(5)])
    assert fatal["result"] is None
    ok = R.build_response(
        [],
        {"a": "\ud800"},
        [diag.diagnostic(diag.DiagnosticCode.STALE_OUT, "info only", severity="warning")],
    )
    assert ok["result"] == {"a": "\ufffd"}
    json.dumps(ok, ensure_ascii=False).encode("utf-8")


# ---- the model-facing response: trace modes and the budget ------------------------------------


def compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def entry(tool: str, ok: bool, **extra: object) -> R.TraceEntry:
    return cast(
        R.TraceEntry, {"serverId": "notes", "toolName": tool, "durationMs": 3, "ok": ok, **extra}
    )


def test_s3_3_2_trace_modes_keep_the_entry_shape_and_summarise_in_errors_mode() -> None:
    trace = [
        entry("get_note", True),
        entry("get_note", False, error="ToolCallError: note 9 not found"),
        entry(
            "delete_note",
            False,
            error="ToolCallError: APPROVAL_DENIED (declined)",
            approval="denied",
        ),
        entry("get_note", False, error="ToolCallError: note 8 not found", approval="allowed"),
    ]
    counts = tooltrace.CallCounts()
    for e in trace:
        counts.add(str(e["serverId"]), str(e["toolName"]), bool(e["ok"]))
    assert tooltrace.shape_trace(trace, counts, "full") == (trace, None)
    listed, summary = tooltrace.shape_trace(trace, counts, "errors")
    # Failed and denied, §3.3.2's shape whole; "allowed" (sent unasked) says nothing of a failure.
    assert listed == [*trace[1:3], {k: v for k, v in trace[3].items() if k != "approval"}]
    assert summary == {"calls": {"notes.get_note": 3, "notes.delete_note": 1}, "failed": 3}
    assert tooltrace.shape_trace(trace, counts, "none") == (None, None)
    assert tooltrace.shape_trace([], tooltrace.CallCounts(), "errors") == (
        [],
        None,
    )  # no calls: no summary
    many = [entry("get_note", False, error="x")] * (tooltrace.MAX_LISTED_FAILURES + 7)
    assert (
        len(tooltrace.shape_trace(many, counts, "errors")[0] or []) == tooltrace.MAX_LISTED_FAILURES
    )


def test_response_carries_the_summary_and_a_budget_when_asked() -> None:
    response = R.build_response(
        [], {"a": 1}, [], [], tool_summary={"calls": {"n.t": 1}, "failed": 0}
    )
    assert response["toolSummary"] == {"calls": {"n.t": 1}, "failed": 0}
    assert "toolSummary" not in R.build_response([], None, [], [])
    small = R.build_response(
        [{"level": "log", "message": "hi", "timeMs": 1}], "x" * 100, [], max_chars=1000
    )
    assert small["result"] == "x" * 100 and small["diagnostics"] == []  # within budget: untouched


def test_cut_string_keeps_the_longest_prefix_that_fits_and_says_how_much_is_gone() -> None:
    text = 'héllo "world"\n' * 100
    cut = json_cut.cut_string(text, 120)
    assert isinstance(cut, str) and len(compact(cut)) <= 120
    prefix, marker = cut.rsplit("…[+", 1)
    assert text.startswith(prefix) and marker == f"{len(text) - len(prefix)} chars]"
    assert len(compact(json_cut.cut_string(text, 121))) >= len(
        compact(cut)
    )  # longest: one more char may not fit
    assert json_cut.cut_string("short", 100) == "short"


def test_cut_json_keeps_whole_items_and_small_keys_and_marks_the_rest() -> None:
    records = [{"id": i, "body": "b" * 300} for i in range(100)]
    value = {"items": records, "total": 100, "query": "milk"}
    cut = json_cut.cut_json(value, 2000)
    assert len(compact(cut)) <= 2000
    assert cut["total"] == 100 and cut["query"] == "milk"  # small values kept whole
    items = cut["items"]
    assert items[:-1] == records[: len(items) - 1] and items[-1] == f"…[+{101 - len(items)} items]"
    first_too_big = json_cut.cut_json([{"body": "z" * 5000}, 1, 2], 300)
    assert len(compact(first_too_big)) <= 300 and first_too_big[-1] == "…[+2 items]"
    assert first_too_big[0]["body"].startswith("zzz") and first_too_big[0]["body"].endswith(
        "chars]"
    )
    crowded = json_cut.cut_json({f"k{i}": "v" * 200 for i in range(50)}, 1000)
    assert len(compact(crowded)) <= 1000 and list(crowded)[-1] == "…"
    assert crowded["…"] == f"[+{50 - len(crowded) + 1} keys]"
    by_id = {str(i): {"id": i, "body": "b" * 900} for i in range(100)}  # records keyed by id
    kept = json_cut.cut_json(by_id, 5000)
    assert len(compact(kept)) <= 5000 and list(kept)[:-1] == [str(i) for i in range(len(kept) - 1)]
    assert all(kept[k] == by_id[k] for k in list(kept)[:-1])  # the first records, whole: no stubs
    assert kept["…"] == f"[+{101 - len(kept)} keys]"
    two = json_cut.cut_json(
        {"a": "x" * 5000, "b": "y" * 5000, "n": 1}, 4000
    )  # a few large values share
    assert two["n"] == 1 and abs(len(two["a"]) - len(two["b"])) <= 2 and len(compact(two)) <= 4000
    taken = json_cut.cut_json({"…": "x" * 500, **{f"k{i}": "v" * 200 for i in range(50)}}, 1000)
    assert taken["…"].startswith("xxx") and taken["…2"].endswith(
        " keys]"
    )  # the marker never clobbers a key


def test_cut_logs_keeps_the_first_and_last_entries_with_one_marker_between() -> None:
    logs: list[run_logs.LogEntry] = [
        {"level": "log", "message": f"item {i}", "timeMs": i} for i in range(500)
    ]
    logs.append(
        {"level": "warn", "message": "logs truncated: maxLogBytes limit reached", "timeMs": 999}
    )
    kept, dropped = R.cut_logs(logs, 2000)
    assert len(compact(kept)) <= 2000 and dropped == len(logs) - len(kept) + 1
    (marker,) = [e for e in kept if e["message"].startswith("…[+")]
    at = kept.index(marker)
    assert kept[:at] == logs[:at] and kept[at + 1 :] == logs[len(logs) - (len(kept) - at - 1) :]
    assert marker["level"] == "warn" and marker["message"].startswith(f"…[+{dropped} log entries")
    assert kept[-1] == logs[-1]  # §3.3.1's truncation warning, the last entry, is kept
    one: list[run_logs.LogEntry] = [{"level": "log", "message": "m" * 10_000, "timeMs": 5}]
    (alone,), none_dropped = R.cut_logs(one, 500)
    assert (
        none_dropped == 0 and len(compact([alone])) <= 500 and alone["message"].endswith("chars]")
    )


def test_fit_response_shares_the_budget_and_says_what_was_cut() -> None:
    logs: list[run_logs.LogEntry] = [
        {"level": "log", "message": "x" * 100, "timeMs": i} for i in range(300)
    ]
    result = {"rows": [{"id": i, "text": "y" * 100} for i in range(1000)]}
    new_logs, new_result, note = R.fit_response(logs, result, 20_000)
    logs_size, result_size = len(compact(new_logs)), len(compact(new_result))
    assert logs_size + result_size <= 20_000
    assert logs_size <= 20_000 * R.LOG_SHARE  # the result needed the rest
    assert (
        note is not None
        and note["code"] == diag.DiagnosticCode.RESPONSE_TRUNCATED
        and note["severity"] == "warning"
    )
    assert f"result {len(compact(result))} → {result_size}" in note["message"]
    assert (
        f"logs {len(compact(logs))} → {logs_size}" in note["message"]
        and "summary" not in note["message"]
    )
    assert "aggregate" in note["hint"] and "limits.maxResponseChars" in note["hint"]
    # Small logs keep all of their share: only the result is cut, and the logs' slack is its.
    few = logs[:3]
    kept_logs, cut_result, note = R.fit_response(few, result, 5_000)
    assert kept_logs is few and len(compact(few)) + len(compact(cut_result)) <= 5_000
    assert note is not None and "logs" not in note["message"]
    # Deterministic: the same input is cut the same way.
    assert R.fit_response(logs, result, 20_000) == (
        new_logs,
        new_result,
        R.fit_response(logs, result, 20_000)[2],
    )


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.text(min_size=50, max_size=400),
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=6), children, max_size=8)
    ),
    max_leaves=60,
)


@settings(max_examples=500, deadline=None)
@given(JSON_VALUES, st.floats(min_value=0.0, max_value=1.2), st.integers(min_value=4, max_value=40))
def test_any_json_value_cut_to_any_budget_stays_valid_json_within_it(
    value: object, share: float, floor: int
) -> None:
    """Whatever the value and the room (from 4 characters up), the cut is valid JSON within the
    room, and a value that fits is returned as it is."""
    size = len(compact(value))
    room = max(floor, int(size * share))
    assert json_cut.measure(value, size) == size and (json_cut.measure(value, room) > room) == (
        size > room
    )
    for small in (False, True):  # measured by the Python walk, or (small) by the C encoder
        cut = json_cut.cut_json(value, room, small=small)
        text = compact(cut)
        assert json.loads(text) == cut
        assert len(text) <= room
        if size <= room:
            assert cut is value


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            lambda m, t: {"level": "log", "message": m, "timeMs": t},
            st.text(),
            st.integers(0, 10**6),
        ),
        max_size=40,
    ),
    JSON_VALUES,
    st.integers(min_value=R_MIN, max_value=5000),
)
def test_any_logs_and_result_fit_the_budget_together(
    logs: list[run_logs.LogEntry], value: object, budget: int
) -> None:
    for small in (False, True):
        new_logs, new_result, note = R.fit_response(logs, value, budget, result_small=small)
        assert len(compact(new_logs)) + len(compact(new_result)) <= budget
        assert all(set(e) == {"level", "message", "timeMs"} for e in new_logs)  # §3.3.1 entries
        assert (note is None) == (new_logs is logs and new_result is value)
        if note is not None and new_result is not value:  # the whole size, either way
            assert f"result {len(compact(value))} → " in note["message"]


def test_s3_3_a_result_from_text_is_utf8_safe_so_the_response_need_not_walk_it() -> None:
    # JSON.stringify escapes a lone surrogate; a text that holds one raw (a worker that broke the
    # protocol) is repaired too: either way the result is U+FFFD, before build_response sees it.
    for text in ('["a\\ud800b"]', '["a\ud800b"]', '{"\\udc00":1}'):
        result, problems = screen.result_from_text(text)
        assert problems == [] and ("\ud800" not in str(result)), ascii(result)
        json.dumps(result, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    value = {"rows": [{"id": i} for i in range(30_000)]}
    response = R.build_response([], value, [], result_checked=True)
    assert response["result"] is value  # not walked, not copied
    assert R.build_response([], ["\udfff"], [])["result"] == ["\ufffd"]  # unchecked: repaired


def test_a_value_is_measured_as_json_writes_it_scalars_included() -> None:
    # measure() sizes strings, numbers, booleans and null without a whole encode each.
    values = [
        "plain",
        'quote " and \\ backslash',
        "tab\tnew\nline\x01",
        "café ✓ 𝄞",
        "",
        0,
        -17,
        10**30,
        True,
        False,
        None,
        1.5,
        -0.0,
        1e-7,
        3e21,
        {"k\n": [1, "two", None, {"x": False}]},
    ]
    for value in values:
        expected = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        assert json_cut.measure(value, 10**6) == expected, ascii(value)
        assert json_cut.json_size(value) == expected


def test_a_checked_result_without_a_budget_is_not_walked_even_to_size_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def walked(value: Any) -> bool:
        raise AssertionError("the result was walked")

    value = [{"id": i} for i in range(50_000)]
    monkeypatch.setattr(R.payload, "is_large", walked)
    response = asyncio.run(R.build_response_async([], value, [], result_checked=True))
    assert response["result"] is value
    with pytest.raises(AssertionError, match="walked"):  # a budget, or an unchecked result, is
        asyncio.run(R.build_response_async([], value, [], max_chars=20_000))


def test_a_cut_value_is_sized_as_json_writes_it_on_either_side_of_the_one_call_bound() -> None:
    value = {"rows": [{"id": i, "name": f"row {i}", "tags": ["a", "é"]} for i in range(5000)]}
    for room in (100, 5_000, 20_000, 60_000):
        cut = json_cut.cut_json(value, room)
        exact = len(json.dumps(cut, ensure_ascii=False, separators=(",", ":")))
        assert json_cut.cut_size(cut, room) == exact <= room


def test_s3_3_a_small_result_under_a_budget_is_sized_in_c_not_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """build_response_async measures the result once (is_large); a small one is then sized and
    cut by the C encoder: the Python walk (`measure`) never sees it, and the cut is the one the
    walk makes for a listing (items kept whole while they fit)."""
    value = [{"id": i, "name": f"item {i}", "tags": ["a", "é"]} for i in range(1000)]
    walked = R.fit_response([], value, 20_000)[1]  # the walk's cut
    real_measure = json_cut.measure

    def measure(item: Any, cap: int) -> int:
        assert item is not value and not (isinstance(item, dict) and "id" in item), "walked"
        return real_measure(item, cap)

    monkeypatch.setattr(json_cut, "measure", measure)
    monkeypatch.setattr(R, "measure", measure)
    got = asyncio.run(R.build_response_async([], value, [], max_chars=20_000))
    assert got["result"] == walked and walked[-1].startswith("…[+")
    assert len(compact(got["result"])) <= 20_000
