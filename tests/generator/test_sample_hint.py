"""generator/sample_hint.py: the [[samples]] entry generate suggests for an unknown output type."""

from __future__ import annotations

import tomllib

from codemode_gen.codemode_toml import parse_sample
from codemode_gen.generator.sample_hint import sample_entry


def parsed(text: str) -> dict:
    data = tomllib.loads(text)
    sample = parse_sample(data["samples"][0], "samples[0]")  # what record will accept
    assert (sample.server, sample.tool) == (
        data["samples"][0]["server"],
        data["samples"][0]["tool"],
    )
    return data["samples"][0]


def test_entry_is_valid_toml_record_accepts_with_placeholders_of_the_right_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 10},
            "mode": {"enum": ["fast", "full"]},
            "tags": {"type": "array"},
            "filter": {
                "type": "object",
                "properties": {"since": {"type": "string", "examples": ["2026-01-01"]}},
                "required": ["since"],
            },
            "weird key": {"type": ["null", "boolean"]},
            "optional": {"type": "string"},
        },
        "required": ["query", "limit", "mode", "tags", "filter", "weird key"],
    }
    entry = parsed(sample_entry("notes", "search.v2", schema, {"readOnlyHint": True}))
    assert entry["input"] == {
        "query": "TODO",
        "limit": 10,
        "mode": "fast",
        "tags": [],
        "filter": {"since": "2026-01-01"},
        "weird key": False,
    }


def test_a_tool_not_marked_read_only_is_flagged_and_odd_names_are_quoted() -> None:
    text = sample_entry('my "server"', "tool\nname", None, None)
    assert text.splitlines()[0].endswith("`record` will really call it")
    entry = parsed(text)
    assert (
        entry["server"] == 'my "server"' and entry["tool"] == "tool\nname" and entry["input"] == {}
    )


def test_deep_required_objects_stop_at_the_bound() -> None:
    schema: dict = {"type": "object", "properties": {}, "required": ["a"]}
    node = schema
    for _ in range(10):
        child: dict = {"type": "object", "properties": {}, "required": ["a"]}
        node["properties"]["a"] = child
        node = child
    entry = parsed(sample_entry("s", "t", schema, {"readOnlyHint": True}))
    assert entry["input"] == {"a": {"a": {"a": {}}}}
