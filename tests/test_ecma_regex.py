"""ecma_regex: an ECMA-262 pattern keeps its JavaScript meaning under the `regex` package.

The evaluation (timeouts, budget, fail-open keywords) is tested in test_safe_jsonschema.py;
here only the syntax translation, each case one place where Python and JavaScript differ."""

from __future__ import annotations

import pytest
import regex

from codemode_gen.ecma_regex import FLAGS, PatternError, translate


def matches(pattern: str, text: str) -> bool:
    return regex.compile(translate(pattern), FLAGS).search(text) is not None


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"^\d+$", "123", True),
        (r"^\d+$", "١٢٣", False),  # \d is ASCII-only in JavaScript
        (r"^\w$", "é", False),
        (r"^\s$", "\u2028", True),  # a LineTerminator is whitespace
        (r"^a$", "a\n", False),  # $ is the end of input only
        (r"^.$", "\u2029", False),  # . excludes every LineTerminator
        ("[]", "anything", False),  # [] matches nothing
        ("^[^]$", "\n", True),  # [^] matches anything
        ("^a{$", "a{", True),  # a brace that is not a quantifier is a literal
        (r"^(?<y>\d)\k<y>$", "77", True),
        (r"^\u{1F600}$", "\U0001f600", True),
        (r"^[\D]$", "x", True),
    ],
)
def test_translated_patterns_keep_their_javascript_meaning(
    pattern: str, text: str, expected: bool
) -> None:
    assert matches(pattern, text) is expected


@pytest.mark.parametrize("pattern", ["(?i)a", "a++", "(?P<x>a)", "a**", "[a"])
def test_python_only_or_broken_syntax_is_refused(pattern: str) -> None:
    with pytest.raises((PatternError, regex.error)):
        regex.compile(translate(pattern), FLAGS)
