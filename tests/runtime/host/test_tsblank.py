"""runtime/host/tsblank.py: erased TypeScript becomes whitespace of the same UTF-8 length, so every
position QuickJS reports (UTF-8 byte columns) stays the agent's (spec §3.3.3)."""

from __future__ import annotations

from codemode_gen.runtime.host.tsblank import blank


def test_ascii_is_blanked_byte_for_byte_and_line_breaks_stay() -> None:
    assert blank(b": string", "") == b"        "
    assert blank(b"<T,\r\n U>", "") == b"   \r\n   "


def test_each_character_keeps_its_utf8_length() -> None:
    segment = "é€𝄞\u2028".encode()  # 2, 3, 4 and 3 bytes; U+2028 is a line break and stays
    out = blank(segment, "")
    assert len(out) == len(segment)
    assert out.decode() == "\u00a0\u2002\u00a0\u00a0\u2028"


def test_a_mark_takes_the_first_or_last_character_that_is_no_line_break() -> None:
    assert blank(b"\nas T", ";") == b"\n;   "
    assert blank(b"): T\n", ")") == b"   )\n"
    assert blank("é".encode(), "(") == b"( "  # two bytes: the mark and a space
    assert blank("é".encode(), ")") == b" )"
