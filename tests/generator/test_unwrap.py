"""Spec §5.3.2: the unwrapping rules, applied in order (the one implementation the bridge uses)."""

from __future__ import annotations

import copy
from typing import Any

from codemode_gen.generator.unwrap import parse_json_text, unwrap_result

TEXT = {"type": "text", "text": '{"id": 1}'}
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}


def test_s5_3_2_rule1_structured_content_wins_and_content_is_ignored() -> None:
    result = {"content": [TEXT, IMAGE], "structuredContent": {"id": 1, "title": "x"}}
    assert unwrap_result(result) == {"id": 1, "title": "x"}
    assert unwrap_result(result, "json") == {"id": 1, "title": "x"}


def test_s5_3_2_rule1_falsy_structured_content_still_wins() -> None:
    assert unwrap_result({"content": [TEXT], "structuredContent": {}}) == {}


def test_s5_3_2_rule1_null_structured_content_counts_as_absent() -> None:
    assert unwrap_result({"content": [TEXT], "structuredContent": None}) == '{"id": 1}'


def test_s5_3_2_rule2_single_text_block_returns_the_string() -> None:
    assert unwrap_result({"content": [TEXT]}) == '{"id": 1}'
    assert unwrap_result({"content": [{"type": "text", "text": ""}], "isError": False}) == ""


def test_s5_3_2_rule3_image_or_audio_returns_full_result_with_base64() -> None:
    for blocks in ([IMAGE], [TEXT, IMAGE], [AUDIO]):
        result = {"content": blocks, "_meta": {"x": 1}}
        before = copy.deepcopy(result)
        out = unwrap_result(result)
        assert out == before
        assert isinstance(out["content"][-1]["data"], str)
        assert result == before  # never mutated


def test_s5_3_2_rule4_everything_else_returns_full_result() -> None:
    results: tuple[dict[str, Any], ...] = (
        {"content": []},
        {"content": [TEXT, TEXT]},
        {"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}]},
        {"content": [{"type": "text"}]},  # malformed text block: no string to return
        {},
    )
    for result in results:
        assert unwrap_result(result) == result


def test_json_mode_parses_rule2_json_text_only() -> None:
    assert unwrap_result({"content": [TEXT]}, "json") == {"id": 1}
    assert unwrap_result({"content": [{"type": "text", "text": "[1, 2]"}]}, "json") == [1, 2]
    assert unwrap_result({"content": [{"type": "text", "text": "42"}]}, "json") == 42
    assert unwrap_result({"content": [{"type": "text", "text": "null"}]}, "json") is None
    assert (
        unwrap_result({"content": [{"type": "text", "text": "plain words"}]}, "json")
        == "plain words"
    )
    # rule 4 is untouched by json mode
    two = {"content": [TEXT, TEXT]}
    assert unwrap_result(two, "json") == two


def test_json_mode_rejects_what_json_parse_rejects() -> None:
    for text in ("NaN", "[Infinity]", "{'a': 1}", "[1,]", "", "1 2"):
        assert unwrap_result({"content": [{"type": "text", "text": text}]}, "json") == text


def test_json_depth_bomb_text_stays_a_string() -> None:
    bomb = "[" * 100_000 + "]" * 100_000
    assert parse_json_text(bomb) == (False, None)
    assert unwrap_result({"content": [{"type": "text", "text": bomb}]}, "json") == bomb
