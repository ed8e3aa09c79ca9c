"""codemode_gen/jsonio.py: the JSON helpers every layer shares."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from codemode_gen.errors import UserError
from codemode_gen.jsonio import (
    dumps_line,
    dumps_stable,
    iter_jsonl,
    json_type,
    parse_json_bytes,
    read_untrusted_file,
    resolve_pointer,
    without_lone_surrogates,
)

# Every character `str.splitlines` ends a line at (computed, not listed: the class, not a sample).
LINE_BREAKERS = [chr(c) for c in range(sys.maxunicode + 1) if len(f"a{chr(c)}b".splitlines()) > 1]


def test_dumps_stable_sorts_indents_and_ends_with_newline() -> None:
    assert dumps_stable({"b": 1, "a": "é"}) == '{\n  "a": "é",\n  "b": 1\n}\n'


@pytest.mark.parametrize(
    ("value", "strict", "loose"),
    [
        (None, "null", "null"),
        (True, "boolean", "boolean"),
        (3, "integer", "number"),
        (3.5, "number", "number"),
        ("x", "string", "string"),
        ([], "array", "array"),
        ({}, "object", "object"),
        ((1,), None, None),
    ],
)
def test_json_type(value: object, strict: str | None, loose: str | None) -> None:
    assert json_type(value) == strict and json_type(value, integer=False) == loose


def test_resolve_pointer_follows_rfc6901() -> None:
    doc = {"a/b": {"~k": [10, {"x": 1}]}, "": 5}
    assert resolve_pointer(doc, "") is doc
    assert resolve_pointer(doc, "/a~1b/~0k/1/x") == 1
    assert resolve_pointer(doc, "/") == 5
    assert resolve_pointer(doc, "/a~1b/~0k/2", "missing") == "missing"
    assert resolve_pointer(doc, "/a~1b/~0k/-1") is None
    assert resolve_pointer(doc, "no-slash", "bad") == "bad"


def test_iter_jsonl_skips_blank_lines_and_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    assert list(iter_jsonl('{"a": 1}\n\n[2]\n', path, what="demo", hint="fix it")) == [
        (1, {"a": 1}),
        (3, [2]),
    ]
    with pytest.raises(UserError, match=r"x.jsonl:2:\d+: invalid JSON in demo") as info:
        list(iter_jsonl('{}\n{"a": }\n', path, what="demo", hint="fix it"))
    assert info.value.hint == "fix it"


def test_s11_a_json_line_holds_no_character_any_line_reader_splits_on() -> None:
    assert {"\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"} <= set(
        LINE_BREAKERS
    )
    value = {"".join(LINE_BREAKERS): "".join(LINE_BREAKERS) + "\ud800 \udfff \U0001f600 é"}
    line = dumps_line(value)
    assert line.endswith("\n") and len(line.splitlines()) == 1 and "\n" not in line[:-1]
    assert line.encode("utf-8")  # lone surrogates escaped: UTF-8 text
    assert "é" in line and "\U0001f600" in line  # the rest stays readable UTF-8
    assert json.loads(line) == value
    assert list(
        iter_jsonl(line.encode("utf-8") * 2, Path("x.jsonl"), what="t", hint="h", max_depth=5)
    ) == [(1, value), (2, value)]


def test_old_lines_with_raw_separators_read_as_one_line(tmp_path: Path) -> None:
    # what the writer used to put on disk: U+2028/U+2029/U+0085 raw inside a string
    raw = '{"a":"x\u2028y\x85z\u2029"}\n{"b":1}\n'
    expected = [(1, {"a": "x\u2028y\x85z\u2029"}), (2, {"b": 1})]
    assert list(iter_jsonl(raw, tmp_path / "a.jsonl", what="t", hint="h")) == expected
    assert (
        list(iter_jsonl(raw.encode(), tmp_path / "a.jsonl", what="t", hint="h", max_depth=3))
        == expected
    )


def test_dumps_stable_writes_lone_surrogates_as_escapes() -> None:
    text = dumps_stable({"k\ud800": ["\udc00"]})
    assert "\\ud800" in text and "\\udc00" in text and json.loads(text) == {"k\ud800": ["\udc00"]}


def test_without_lone_surrogates_keeps_identity_when_clean() -> None:
    clean = {"a": ["b", {"c": 1}], "é": "\U0001f600"}
    assert without_lone_surrogates(clean) is clean
    assert without_lone_surrogates({"k\ud800": ["x\udfffy", 2]}) == {"k\ufffd": ["x\ufffdy", 2]}


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b'{"a": "\xff"}', r"f.json:1:8: demo is not UTF-8 text \(byte 0xff\)"),
        (b'{\n "a": \n "\xc3"}', r"f.json:3:3: demo is not UTF-8 text"),
        (b"[" * 50 + b"]" * 50, r"f.json: demo nested deeper than 10 levels"),
        (b'{"a": NaN}', r"f.json: invalid JSON in demo: NaN is not a JSON number"),
        (b"[-Infinity]", r"f.json: invalid JSON in demo: -Infinity is not a JSON number"),
        (b"[1e999]", r"f.json: invalid JSON in demo: 1e999 overflows a float"),
        (
            b"[" + b"9" * 5000 + b"]",
            r"f.json: invalid JSON in demo: a number of more than [\d,]+ digits",
        ),
        (b'{\n"a": }', r"f.json:2:6: invalid JSON in demo"),
    ],
)
def test_parse_json_bytes_names_file_and_position(data: bytes, needle: str) -> None:
    with pytest.raises(UserError, match=needle) as info:
        parse_json_bytes(data, Path("f.json"), what="demo", hint="fix it", max_depth=10)
    assert info.value.hint == "fix it"


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    good = b'{"a": 1}\n'
    with pytest.raises(UserError, match=r"c.jsonl:3:7: t is not UTF-8"):
        list(iter_jsonl(good * 2 + b'{"a":"\xfe"}\n', path, what="t", hint="h", max_depth=5))
    with pytest.raises(UserError, match=r"c.jsonl:2: t nested deeper than 5 levels"):
        list(iter_jsonl(good + b"[" * 9 + b"]" * 9, path, what="t", hint="h", max_depth=5))
    with pytest.raises(UserError, match=r"c.jsonl:2: a line of 20 bytes; a t may have at most 10"):
        list(
            iter_jsonl(
                b"{}\n" + b" " * 18 + b"{}",
                path,
                what="t",
                hint="h",
                max_depth=5,
                max_line_bytes=10,
            )
        )


def test_read_untrusted_file_reads_only_bounded_regular_files(tmp_path: Path) -> None:
    ok = tmp_path / "ok.json"
    ok.write_bytes(b"[1]")
    assert read_untrusted_file(ok, 3, what="demo", hint="h") == b"[1]"
    with pytest.raises(UserError, match=r"ok.json: demo is 3 bytes; at most 2 are read"):
        read_untrusted_file(ok, 2, what="demo", hint="h")
    with pytest.raises(UserError, match=r"nope.json: demo not found"):
        read_untrusted_file(tmp_path / "nope.json", 10, what="demo", hint="h")
    link = tmp_path / "link.json"
    link.symlink_to(ok)
    with pytest.raises(
        UserError, match=r"link.json: demo is a symbolic link to '.*ok.json'"
    ) as info:
        read_untrusted_file(link, 10, what="demo", hint="record again")
    assert info.value.hint == "replace the link with a copy of the file, or record again"
    with pytest.raises(UserError, match=r"demo is a folder, not a regular file"):
        read_untrusted_file(tmp_path, 10, what="demo", hint="h")
    with pytest.raises(UserError, match=r"demo is a character device, not a regular file"):
        read_untrusted_file(Path(os.devnull), 10, what="demo", hint="h")


def test_read_untrusted_file_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_untrusted_file(fifo, 10, what="demo", hint="h")
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(60)  # generous: a blocked open never returns at all
    if thread.is_alive():  # unblock the reader so the process can end, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO blocked")
    assert len(outcome) == 1 and isinstance(outcome[0], UserError)
    assert "pipe.jsonl: demo is a named pipe (FIFO), not a regular file" in str(outcome[0])
