"""codemode_gen/jsonio.py: the JSON helpers every layer shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode_gen.errors import UserError
from codemode_gen.jsonio import dumps_stable, iter_jsonl, json_type, resolve_pointer


def test_dumps_stable_sorts_indents_and_ends_with_newline() -> None:
    assert dumps_stable({"b": 1, "a": "é"}) == '{\n  "a": "é",\n  "b": 1\n}\n'


@pytest.mark.parametrize(("value", "strict", "loose"), [
    (None, "null", "null"), (True, "boolean", "boolean"), (3, "integer", "number"),
    (3.5, "number", "number"), ("x", "string", "string"), ([], "array", "array"),
    ({}, "object", "object"), ((1,), None, None),
])
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
    assert list(iter_jsonl('{"a": 1}\n\n[2]\n', path, what="demo", hint="fix it")) == [(1, {"a": 1}), (3, [2])]
    with pytest.raises(UserError, match=r"x.jsonl:2:\d+: invalid JSON in demo") as info:
        list(iter_jsonl('{}\n{"a": }\n', path, what="demo", hint="fix it"))
    assert info.value.hint == "fix it"
