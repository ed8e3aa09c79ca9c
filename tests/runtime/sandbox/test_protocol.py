"""runtime/sandbox/protocol.py: the sandbox ⇄ worker framing both sides share."""

from __future__ import annotations

import json

import pytest

from codemode_gen.runtime.sandbox import protocol


def test_encode_is_one_ascii_json_line_that_decode_reads_back() -> None:
    message = {"op": protocol.LOG, "level": "info", "message": "é\u2028x", "timeMs": 3}
    line = protocol.encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
    assert protocol.decode(line[:-1]) == message


def test_a_framed_reply_is_sliced_out_without_decoding() -> None:
    body = json.dumps({"ok": True, "result": [1, "two"]}, separators=(",", ":"))
    line = protocol.encode_reply(7, body)
    assert line.endswith(b"\n")
    assert protocol.decode_reply(line[:-1]) == (7, body)
    assert json.loads(line) == {"op": "reply", "id": 7, "reply": {"ok": True, "result": [1, "two"]}}


@pytest.mark.parametrize("call_id", [-1, True, "7", None])
def test_a_reply_with_an_odd_id_falls_back_to_a_plain_message(call_id: object) -> None:
    line = protocol.encode_reply(call_id, "{}")
    assert protocol.decode_reply(line[:-1]) is None
    assert protocol.decode(line[:-1]) == {"op": "reply", "id": call_id, "reply": "{}"}


def test_other_lines_are_not_taken_for_framed_replies() -> None:
    for line in (
        b'{"op":"run"}',
        b'{"op":"reply","id":x,"reply":1}',
        b'{"op":"reply","id":1,"reply":\xff}',
    ):
        assert protocol.decode_reply(line) is None


def test_a_call_embeds_the_request_text_verbatim_or_escapes_a_lone_surrogate() -> None:
    assert (
        protocol.encode_call(3, '{"serverId":"s"}')
        == b'{"op":"call","id":3,"request":{"serverId":"s"}}\n'
    )
    line = protocol.encode_call(4, '{"x":"\ud800"}')
    assert line.isascii() and json.loads(line) == {
        "op": "call",
        "id": 4,
        "request": '{"x":"\ud800"}',
    }


def test_decode_refuses_what_is_not_one_object() -> None:
    with pytest.raises(protocol.MalformedMessage, match=r"^malformed message$"):
        protocol.decode(b"[1]")
    with pytest.raises(protocol.MalformedMessage) as deep:
        protocol.decode(b"[" * 100_000 + b"]" * 100_000)
    assert deep.value.detail == " (nested too deep)"
    with pytest.raises(ValueError):
        protocol.decode(b"not json")
