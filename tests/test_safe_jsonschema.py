"""safe_jsonschema: server-declared patterns can neither hang nor crash validation (spec §11).

Real jsonschema validation through the extended validator classes; the stock validators are the
reference for "behaves exactly as before" on patterns where Python and ECMA-262 agree. Timing
asserts are deliberately generous (a hang is the bug, not a slow machine); the pytest timeout
marks turn a regression into a failure instead of a stuck run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema.exceptions import SchemaError

from codemode_gen import safe_jsonschema
from codemode_gen.generator.fixtures import write_server_fixtures
from codemode_gen.generator.output_schema import merge_output
from codemode_gen.runtime.host.validation import prepare_arguments
from codemode_gen.runtime.host.validation_errors import InputInvalid

from .conftest import PROMPT_S

EVIL = "a" * 40 + "!"
# Catastrophic under Python's `re` (exponential backtracking) ...
RE_CATASTROPHIC = r"^(a+)+$"
# ... and under the `regex` package too, so the timeout itself is exercised.
REGEX_CATASTROPHIC = r"^(a|a)*$"


def errors(schema: Any, instance: Any) -> list[tuple[list[Any], str]]:
    cls = safe_jsonschema.validator_for(schema)
    safe_jsonschema.check_schema(cls, schema)
    return sorted((list(e.absolute_path), e.message) for e in cls(schema).iter_errors(instance))


def stock_errors(schema: Any, instance: Any) -> list[tuple[list[Any], str]]:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return sorted((list(e.absolute_path), e.message) for e in cls(schema).iter_errors(instance))


# --------------------------------------------------------------------------- catastrophic patterns


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "pattern", [RE_CATASTROPHIC, REGEX_CATASTROPHIC, r"^(a|aa)+$", r"(x+x+)+y", r"^(\w+\s?)*$"]
)
def test_s11_catastrophic_pattern_returns_promptly(pattern: str) -> None:
    schema = {"type": "string", "pattern": pattern}
    started = time.monotonic()
    with safe_jsonschema.regex_session() as report:
        found = errors(schema, EVIL)
    assert time.monotonic() - started < PROMPT_S
    # Either a real verdict (the regex engine needed no backtracking) or no verdict, recorded.
    if report.skipped:
        assert found == []
        assert report.skipped == [safe_jsonschema.Skipped(pattern, "timeout")]
    else:
        assert found != []


@pytest.mark.timeout(60)
def test_s11_timed_out_pattern_fails_open_and_is_reported() -> None:
    with safe_jsonschema.regex_session() as report:
        assert errors({"pattern": REGEX_CATASTROPHIC}, EVIL) == []
    assert report.skipped == [safe_jsonschema.Skipped(REGEX_CATASTROPHIC, "timeout")]
    text = report.skipped[0].describe()
    assert text == f'pattern "{REGEX_CATASTROPHIC}" could not be evaluated within 50 ms'


@pytest.mark.timeout(60)
def test_s11_re_catastrophic_pattern_gets_a_real_verdict() -> None:
    """`^(a+)+$` hangs Python's `re`; here it is answered, both ways, without a timeout."""
    with safe_jsonschema.regex_session() as report:
        assert errors({"pattern": RE_CATASTROPHIC}, EVIL) == [
            ([], f"{EVIL!r} does not match {RE_CATASTROPHIC!r}")
        ]
        assert errors({"pattern": RE_CATASTROPHIC}, "a" * 40) == []
    assert report.skipped == []


@pytest.mark.timeout(60)
def test_s11_many_values_share_one_budget() -> None:
    # Distinct patterns, so neither the per-pattern strike count nor other tests interfere.
    props = {f"p{i}": {"type": "string", "pattern": f"^(a|a)*$|^budget{i}$"} for i in range(40)}
    schema = {"type": "object", "properties": props}
    started = time.monotonic()
    with safe_jsonschema.regex_session() as report:
        assert errors(schema, dict.fromkeys(props, EVIL)) == []
    assert time.monotonic() - started < PROMPT_S
    reasons = {s.reason for s in report.skipped}
    assert reasons == {"timeout", "budget"}
    # Each match that ran used at least its timeout of the budget (however slow the machine):
    # once the budget was spent the rest were skipped without running.
    timed_out = sum(s.reason == "timeout" for s in report.skipped)
    assert timed_out <= safe_jsonschema.SESSION_BUDGET_S / safe_jsonschema.MATCH_TIMEOUT_S + 1, (
        timed_out
    )


@pytest.mark.timeout(60)
def test_s11_a_pattern_that_keeps_timing_out_is_not_run_again() -> None:
    pattern = r"^(a|a)*$|^strikes$"
    for _ in range(safe_jsonschema.MAX_TIMEOUTS_PER_PATTERN):
        with safe_jsonschema.regex_session():
            assert safe_jsonschema.search(pattern, EVIL) is None
    with safe_jsonschema.regex_session() as report:
        assert safe_jsonschema.search(pattern, EVIL) is None
    assert report.skipped == [safe_jsonschema.Skipped(pattern, "timeout")]
    assert report.spent_s == 0.0  # not run again: no time spent matching


@pytest.mark.timeout(60)
def test_s11_search_without_a_session_still_times_out() -> None:
    started = time.monotonic()
    assert safe_jsonschema.search(r"^(a|a)*$|^nosession$", EVIL) is None
    assert time.monotonic() - started < PROMPT_S


# --------------------------------------------------------------------------- unchanged behaviour


AGREEING = [
    (r"^[a-z]+$", ["abc", "ABC", "", "abc1"]),
    (r"\d{3}-\d{4}", ["555-1234", "x555-1234y", "55-1234"]),
    (r"^\S+@\S+\.\S+$", ["a@b.c", "a b@c.d", "@."]),
    (r"colou?r", ["color", "colour", "colr"]),
    (r"^(foo|bar)$", ["foo", "bar", "foobar"]),
    (r"b", ["abc", "xyz"]),
    (r"^[^\s]{2,4}$", ["ab", "a b", "abcde"]),
    (r"^\w+(?=!)", ["hi!", "hi"]),
    (r"^[\w.-]+$", ["a.b-c_d", "a/b"]),
    (r"^(?:\+|-)?\d+(\.\d+)?$", ["-1.5", "+2", "1.", "x"]),
]


@pytest.mark.parametrize(("pattern", "values"), AGREEING)
def test_normal_patterns_give_the_same_verdicts_and_messages(
    pattern: str, values: list[str]
) -> None:
    schema = {"type": "object", "properties": {"v": {"type": "string", "pattern": pattern}}}
    for value in values:
        with safe_jsonschema.regex_session() as report:
            assert errors(schema, {"v": value}) == stock_errors(schema, {"v": value}), value
        assert report.skipped == []


def test_non_strings_are_not_pattern_checked() -> None:
    assert errors({"pattern": "^a$"}, 5) == stock_errors({"pattern": "^a$"}, 5) == []


PROPERTY_SCHEMAS: list[dict[str, Any]] = [
    {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
    {"patternProperties": {"^x-": {"type": "integer"}, "^y": {"minimum": 3}}},
    {
        "properties": {"id": {}},
        "patternProperties": {"^x-": True},
        "additionalProperties": {"type": "string"},
    },
    {"patternProperties": {"^x-": {"type": "integer"}}, "unevaluatedProperties": False},
    {"allOf": [{"patternProperties": {"^x-": True}}], "unevaluatedProperties": False},
    {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "allOf": [{"patternProperties": {"^x-": True}}],
        "unevaluatedProperties": False,
    },
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    },
]
PROPERTY_VALUES: list[dict[str, Any]] = [
    {"x-a": 1},
    {"x-a": "s"},
    {"y": 1},
    {"y": "s", "x-b": 2},
    {"id": 1, "other": 2},
    {},
]


@pytest.mark.parametrize("schema", PROPERTY_SCHEMAS)
def test_pattern_properties_additional_and_unevaluated_as_before(schema: dict[str, Any]) -> None:
    for value in PROPERTY_VALUES:
        with safe_jsonschema.regex_session() as report:
            assert errors(schema, value) == stock_errors(schema, value), value
        assert report.skipped == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "schema",
    [
        {"patternProperties": {REGEX_CATASTROPHIC: {"type": "integer"}}},
        {
            "patternProperties": {REGEX_CATASTROPHIC: {"type": "integer"}},
            "additionalProperties": False,
        },
        {"patternProperties": {REGEX_CATASTROPHIC: True}, "unevaluatedProperties": False},
        {"propertyNames": {"pattern": REGEX_CATASTROPHIC}},
    ],
)
def test_s11_catastrophic_pattern_properties_fail_open(schema: dict[str, Any]) -> None:
    started = time.monotonic()
    with safe_jsonschema.regex_session() as report:
        assert errors(schema, {EVIL: "not an integer"}) == []
    assert time.monotonic() - started < PROMPT_S
    assert safe_jsonschema.Skipped(REGEX_CATASTROPHIC, "timeout") in report.skipped


# --------------------------------------------------------------------------- ECMA-262 semantics


@pytest.mark.parametrize(
    ("pattern", "value", "valid"),
    [
        (r"^\d+$", "12", True),
        (r"^\d+$", "١٢", False),  # JS `\d` is ASCII; Python's matches Arabic-Indic digits
        (r"^\w+$", "é", False),
        (r"^[\d]+$", "١٢", False),
        (r"^[\w-]+$", "a-b_1", True),
        (r"^[^\D]$", "7", True),
        (r"^[^\D]$", "x", False),
        (r"^[\W\d]+$", "1 !", True),
        (r"^[\W\d]+$", "a", False),
        (r"\bfoo", "éfoo", True),  # JS word boundary: "é" is not a word character
        (r"\Bfoo", "éfoo", False),
        (r"^x$", "x\n", False),  # JS `$` is end of input; Python's also matches before "\n"
        (r"(?<year>\d{4})-\k<year>", "2024-2024", True),  # named groups: a Python re.error
        (r"(?<year>\d{4})-\k<year>", "2024-2025", False),
        (r"^\s$", "\ufeff", True),
        (r"^\s$", "\x1c", False),
        (r"^.$", "\u2028", False),
        (r"^[^]$", "\n", True),
        (r"[]", "anything", False),
        (r"^a{e<=1}$", "a{e<=1}", True),  # a literal brace, not fuzzy matching
        (r"^a{e<=1}$", "b", False),
        (r"^\u{1F600}$", "\U0001f600", True),
        (r"^\uD83D\uDE00$", "\U0001f600", True),
        (r"^\cJ$", "\n", True),
        (r"^[\S]+$", "ab", True),
        (r"^[\S]+$", "a\xa0b", False),
        (r"^[^\S\n]$", "\t", True),
        (r"^[^\S\n]$", "\n", False),
        (r"^\p{L}+$", "Grüße", True),
        (r"^\A$", "A", True),  # Annex B identity escape, not an anchor
    ],
)
def test_patterns_follow_ecma_262(pattern: str, value: str, valid: bool) -> None:
    with safe_jsonschema.regex_session() as report:
        assert (errors({"pattern": pattern}, value) == []) is valid
    assert report.skipped == []


# --------------------------------------------------------------------------- invalid and oversized


@pytest.mark.parametrize("pattern", ["(", "[a-", "a++", "(?i)abc", "(?P<n>a)", "x{2}*", "\\"])
def test_invalid_patterns_are_skipped_never_raised(pattern: str) -> None:
    schema = {"type": "object", "properties": {"v": {"pattern": pattern}}, "required": ["v"]}
    with safe_jsonschema.regex_session() as report:
        assert errors(schema, {"v": "abc"}) == []
        assert errors(schema, {}) == [([], "'v' is a required property")]
    assert report.skipped == [safe_jsonschema.Skipped(pattern, "invalid")]
    assert "not a valid ECMA-262 regular expression" in report.skipped[0].describe()


def test_check_schema_does_not_judge_pattern_syntax_but_still_checks_the_rest() -> None:
    cls = safe_jsonschema.validator_for({})
    safe_jsonschema.check_schema(cls, {"pattern": r"(?<y>\d)"})
    safe_jsonschema.check_schema(cls, {"patternProperties": {"(": {}}})
    with pytest.raises(SchemaError):
        jsonschema.Draft202012Validator.check_schema({"pattern": r"(?<y>\d)"})
    with pytest.raises(SchemaError):
        safe_jsonschema.check_schema(cls, {"pattern": 5})
    with pytest.raises(SchemaError):
        safe_jsonschema.check_schema(cls, {"type": "strnig"})


def test_oversized_pattern_and_value_are_skipped() -> None:
    long_pattern = "a" * (safe_jsonschema.MAX_PATTERN_CHARS + 1)
    long_value = "b" * (safe_jsonschema.MAX_SUBJECT_CHARS + 1)
    with safe_jsonschema.regex_session() as report:
        assert errors({"pattern": long_pattern}, "b") == []
        assert errors({"pattern": "^a"}, long_value) == []
        assert errors({"pattern": "^a"}, "b") != []
    assert [s.reason for s in report.skipped] == ["pattern too long", "value too long"]


@pytest.mark.parametrize(
    "cls",
    [
        jsonschema.Draft3Validator,
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    ],
)
def test_every_regex_keyword_is_replaced(cls: Any) -> None:
    """Guards against a jsonschema upgrade renaming a keyword function: the stock one (Python
    `re`, no timeout) must never survive in a safe class."""
    safe = safe_jsonschema.safe_validator_class(cls)
    for keyword in (
        "pattern",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
    ):
        if keyword in cls.VALIDATORS:
            assert safe.VALIDATORS[keyword] is not cls.VALIDATORS[keyword], keyword
    assert safe.FORMAT_CHECKER.checkers["regex"][0] is not cls.FORMAT_CHECKER.checkers["regex"][0]
    schema = {"pattern": REGEX_CATASTROPHIC}
    with safe_jsonschema.regex_session() as report:
        assert safe(schema).is_valid(EVIL)
    assert report.skipped


def test_format_regex_checks_ecma_syntax_without_python_re() -> None:
    cls = safe_jsonschema.validator_for({})
    validator = cls({"format": "regex"}, format_checker=cls.FORMAT_CHECKER)
    assert validator.is_valid(r"(?<y>\d{4})")
    assert validator.is_valid(REGEX_CATASTROPHIC)  # compiled, never run
    assert not validator.is_valid("(")
    assert not validator.is_valid("a++")
    assert validator.is_valid(5)


def test_sessions_are_context_local() -> None:
    with safe_jsonschema.regex_session() as outer:
        with safe_jsonschema.regex_session() as inner:
            safe_jsonschema.search("(", "x")
        safe_jsonschema.search("[", "x")
    assert [s.pattern for s in inner.skipped] == ["("]
    assert [s.pattern for s in outer.skipped] == ["["]


# --------------------------------------------------------------------------- drift checking (output_schema)

CATASTROPHIC_OUTPUT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": RE_CATASTROPHIC},
        "slug": {"type": "string", "pattern": r"^(a|a)*$|^merge$"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
    },
}


def structured(value: Any) -> dict[str, Any]:
    return {
        "input": {},
        "result": {
            "content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": value,
        },
        "durationMs": 1,
        "recordedAt": "2026-01-01T00:00:00Z",
    }


@pytest.mark.timeout(60)
def test_s11_drift_check_with_catastrophic_pattern_is_bounded() -> None:
    tool = {"name": "get", "inputSchema": {"type": "object"}, "outputSchema": CATASTROPHIC_OUTPUT}
    calls = [structured({"name": EVIL, "slug": EVIL, "code": "abc"}) for _ in range(5)]
    started = time.monotonic()
    out = merge_output(tool, calls)
    assert time.monotonic() - started < PROMPT_S
    assert out.source == "declared"
    assert any(d.startswith(f'/name: expected pattern "{RE_CATASTROPHIC}"') for d in out.drift)
    assert any(
        d.startswith('/code: expected pattern "^[A-Z]{3}$", got "abc" (sample 1)')
        for d in out.drift
    )
    assert not any(d.startswith("/slug") for d in out.drift)
    assert (
        'drift not checked: pattern "^(a|a)*$|^merge$" could not be evaluated within 50 ms (sample 1)'
        in out.warnings
    )


@pytest.mark.timeout(120)
def test_s11_generate_with_catastrophic_output_pattern_finishes_with_a_warning(
    tmp_path: Path,
) -> None:
    schema = json.loads(json.dumps(CATASTROPHIC_OUTPUT).replace("merge", "generate"))
    tools = [{"name": "get", "inputSchema": {"type": "object"}, "outputSchema": schema}]
    calls = {"get": [structured({"name": EVIL, "slug": EVIL, "code": "ABC"})]}
    server = {
        "serverInfo": {"name": "evil", "version": "1"},
        "capabilities": {"tools": {}},
        "protocolVersion": "2025-06-18",
    }
    write_server_fixtures(tmp_path / "fixtures", "evil", server, tools, calls)
    out = tmp_path / "out"
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode_gen",
            "generate",
            "--fixtures",
            str(tmp_path / "fixtures"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 60
    assert 'pattern "^(a|a)*$|^generate$" could not be evaluated within 50 ms' in proc.stdout
    assert f'drift: /name: expected pattern "{RE_CATASTROPHIC}"' in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    [tool] = manifest["servers"][0]["tools"]
    assert [d.split(":")[0] for d in tool["output"]["drift"]] == ["/name"]


# --------------------------------------------------------------------------- input validation (runtime)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pattern", [RE_CATASTROPHIC, r"^(a|a)*$|^runtime$"])
def test_s11_prepare_arguments_returns_promptly_for_catastrophic_patterns(pattern: str) -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": pattern}, "n": {"type": "integer"}},
        "required": ["q"],
    }
    started = time.monotonic()
    for _ in range(20):  # repeated calls: the per-pattern strike limit keeps later ones free
        try:
            prepare_arguments(schema, "search", "search", {"q": EVIL})
        except InputInvalid as exc:
            # A verdict the engine could give quickly is still enforced.
            assert pattern == RE_CATASTROPHIC
            assert exc.path == "/q" and exc.expected == f"a string matching /{pattern}/"
        else:
            assert pattern != RE_CATASTROPHIC  # the timed-out pattern is left to the server
    assert time.monotonic() - started < PROMPT_S
    # The rest of the schema is still enforced.
    with pytest.raises(InputInvalid) as info:
        prepare_arguments(schema, "search", "search", {"q": "aaa", "n": "x"})
    assert info.value.path == "/n"


def test_prepare_arguments_enforces_ecma_named_groups() -> None:
    """Before, `(?<y>…)` made check_schema fail and the whole schema went unenforced."""
    schema = {
        "type": "object",
        "properties": {"d": {"type": "string", "pattern": r"^(?<y>\d{4})$"}},
    }
    assert prepare_arguments(schema, "t", "t", {"d": "2024"}) == {"d": "2024"}
    with pytest.raises(InputInvalid) as info:
        prepare_arguments(schema, "t", "t", {"d": "24"})
    assert info.value.path == "/d"
