"""codemode_gen/display.py: what a script (or a server) chose, shown to a person as data only."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemode_gen.display import (
    GUTTER,
    MAX_STACKED_MARKS,
    data_block,
    display_json,
    display_string,
    escape_hidden,
    safe_text,
)
from codemode_gen.runtime.jsonsafe import safe_name

# One of each kind of character that hides text or fakes a line: controls (C0, DEL, C1 NEL),
# line/paragraph separators, zero-width and bidi format characters, the BOM, odd spaces,
# private use, a noncharacter (unassigned), a lone surrogate.
HIDING = [
    "\x00", "\x1b", "\r", "\x7f", "\x85", "\u2028", "\u2029", "\u200b", "\u200d", "\u2060", "\u202e",
    "\u2066", "\u061c", "\u00ad", "\ufeff", "\u00a0", "\u2003", "\u3000", "\u1680", "\ue000",
    "\U000f0000", "\uffff", "\ud800",
]  # fmt: skip


def kept_raw(text: str) -> list[str]:
    """The characters of `text` a person could not see or would read as layout."""
    return [
        ch
        for ch in text
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
        or (unicodedata.category(ch) == "Zs" and ch != " ")
    ]


@pytest.mark.parametrize("ch", HIDING)
def test_every_hiding_character_is_escaped_and_the_json_still_decodes(ch: str) -> None:
    value = {"note": f"a{ch}b"}
    shown = display_json(value, 1000)
    assert kept_raw(shown) == [], ascii(shown)
    assert json.loads(shown) == value
    assert safe_text(f"a{ch}b") == "a\ufffdb"


def test_ordinary_text_is_shown_as_it_is() -> None:
    value = {"title": "Café — 日本語 ok", "emoji": "😀", "n": 1.5, "accent": "e\u0301"}
    assert display_json(value, 1000) == json.dumps(value, ensure_ascii=False, sort_keys=True)
    assert safe_name("notes.delete_note") == "notes.delete_note"


def test_padding_and_stacked_or_stray_marks_are_escaped() -> None:
    assert escape_hidden('"a    b"') == '"a \\u0020\\u0020\\u0020b"'
    stacked = "e" + "\u0301" * (MAX_STACKED_MARKS + 2)
    assert escape_hidden(stacked) == "e" + "\u0301" * MAX_STACKED_MARKS + "\\u0301\\u0301"
    assert escape_hidden('"\u0338') == '"\\u0338'  # a mark that would overprint a quote


def test_long_values_are_cut_between_characters_with_a_marker() -> None:
    value = {"body": "\u2028" * 5000}
    shown = display_json(value, 100)
    head, marker = shown.split("…")
    prefix = '{"body": "'
    assert len(head) <= 100 and head.startswith(prefix) and head.endswith("\\u2028")
    escapes = (len(head) - len(prefix)) // 6  # each stands for one character of the JSON
    left = len(json.dumps(value, ensure_ascii=False)) - len(prefix) - escapes
    assert marker == f" [{left} more characters]"


def test_names_are_quoted_json_strings() -> None:
    assert display_string("delete\u2028note") == '"delete\\u2028note"'
    assert display_string("x" * 300, 10) == '"' + "x" * 10 + '…"'


def test_data_block_puts_every_piece_behind_the_gutter_and_never_splits_an_escape() -> None:
    line = display_json({"a": "\u2028" * 30 + "😀" * 10}, 1000)
    block = data_block(line, 17)
    pieces = block.split("\n")
    assert all(p.startswith(GUTTER) and len(p) <= len(GUTTER) + 17 for p in pieces)
    assert "".join(p[len(GUTTER) :] for p in pieces) == line
    assert not any(p.endswith("\\") or p[len(GUTTER) :].startswith("u2028") for p in pieces)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.text() | st.integers() | st.none(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    )
)
def test_any_value_shows_as_one_line_of_json_without_hidden_characters(value: object) -> None:
    shown = display_json(value, 10_000)
    assert kept_raw(shown) == [] and "\n" not in shown and len(shown.splitlines()) <= 1
    assert "  " not in shown
    assert json.loads(shown) == value
