"""codemode_gen.payload: large JSON parsed and encoded in bounded pieces, with exactly
json.loads' and json.dumps' values, text and errors (the host's event loop depends on the
pieces being bounded; everything downstream on the results being the same)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from codemode_gen import payload


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny windows and batches, so modest values take every chunked path."""
    monkeypatch.setattr(payload, "CHUNK_CHARS", 600)
    monkeypatch.setattr(payload, "INLINE_NODES", 40)


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 5 or roll < 0.3:
        return rng.choice(
            [
                0,
                -7,
                2.5,
                -1e300,
                1.5e-7,
                123456789012345,
                None,
                True,
                False,
                'a"b\\c',
                "é\u2028\ud83d\ude00",
                "x" * rng.randint(0, 900),
            ]
        )
    width = rng.randint(0, 40 if depth < 2 else 4)
    if roll < 0.65:
        return [_value(rng, depth + 1) for _ in range(width)]
    return {f"k{rng.randint(0, 9)}{i}": _value(rng, depth + 1) for i in range(width)}


@pytest.mark.usefixtures("small_bounds")
def test_chunked_parse_and_encode_equal_json() -> None:
    rng = random.Random(18)
    for _ in range(200):
        value = _value(rng)
        text = json.dumps(value, indent=rng.choice([None, 1]))
        assert payload.loads(text) == json.loads(text)
        assert payload.loads(text.encode()) == json.loads(text.encode())
        for ascii_only in (True, False):
            for sort in (True, False):
                expected = json.dumps(
                    value, ensure_ascii=ascii_only, sort_keys=sort, separators=(",", ":")
                )
                assert payload.dumps(value, ensure_ascii=ascii_only, sort_keys=sort) == expected


@pytest.mark.usefixtures("small_bounds")
@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[: len(t) // 2],  # cut short
        lambda t: t + " x",  # extra data
        lambda t: t.replace('"k', "k", 1),  # a bare key
        lambda t: t[:-1] + ",}",  # a trailing comma
        lambda t: t.replace(", ", " ", 1),  # a missing comma
        lambda t: t.replace("2.5", "2.", 1),  # a number cut at a window's edge or not
        lambda t: t.replace("null", "nul", 1),
    ],
)
def test_chunked_parse_raises_what_json_raises(damage: Any) -> None:
    value = {
        "k0": [{"a": 2.5, "b": None, "c": "y" * 300} for _ in range(30)],
        "k1": {"x": [1] * 200},
    }
    assert_fails_as_json(damage(json.dumps(value)))


def assert_fails_as_json(text: str) -> None:
    """payload.loads refuses `text` with json.loads' error: the same message, the same place."""
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    with pytest.raises(json.JSONDecodeError) as got:
        payload.loads(text)
    assert (got.value.msg, got.value.pos) == (expected.value.msg, expected.value.pos)


@pytest.mark.usefixtures("small_bounds")
def test_no_c_call_parses_more_than_a_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner only ever sees windows of CHUNK_CHARS (the GIL is held for one call each);
    the whole text goes to C only for one string or number longer than that."""
    seen: list[int] = []
    real = payload._ChunkedParser._slide

    def slide(self: Any, idx: int) -> None:
        real(self, idx)
        seen.append(len(self.window))

    monkeypatch.setattr(payload._ChunkedParser, "_slide", slide)
    value = {"rows": [{"id": i, "tags": ["t"] * (i % 5)} for i in range(2000)]}
    text = json.dumps(value)
    assert payload.loads(text) == value
    assert seen and max(seen) <= payload.CHUNK_CHARS < len(text)


def _look_alike(rng: random.Random, i: int) -> Any:
    """An element whose text holds what separates elements of its list or map elsewhere: a
    run of elements cut at such a place is not a run of whole elements."""
    return rng.choice(
        [
            {"s": "a},{b", "t": 'x", "y', "n": i},
            {"rows": [{"a": i}, {"b": [{"c": 1}, {"d": 2}]}], "m": {"k": {"v": i}}},
            [{"x": i}, {"y": "],["}, [1, 2, [3, {"z": "}, {"}]]],
            "},{" * rng.randint(0, 30) + '", "' * rng.randint(0, 30),
            i * 7,
            -2.5e-3,
            {"e": {}, "f": [], "g": [[], {}]},
        ]
    )


@pytest.mark.usefixtures("small_bounds")
def test_runs_of_elements_equal_json_where_separators_also_occur_inside_elements() -> None:
    """Lists and maps are parsed a run of elements per C call (the window cut at the last place
    two elements met the same way): cuts inside strings and nested values are never taken for
    element boundaries, in compact and indented text."""
    rng = random.Random(2026)
    for _ in range(60):
        n = rng.randint(0, 120)
        items = [_look_alike(rng, i) for i in range(n)]
        for value in (items, {f"k{i}": x for i, x in enumerate(items)}, {"a": items, "b": [items]}):
            for text in (
                json.dumps(value),
                json.dumps(value, separators=(",", ":")),
                json.dumps(value, indent=rng.choice([1, 2])),
            ):
                assert payload.loads(text) == json.loads(text)


@pytest.mark.usefixtures("small_bounds")
def test_a_run_holding_an_error_raises_what_json_raises() -> None:
    rows = [{"id": i, "name": f"item {i}", "v": [i, 2.5]} for i in range(300)]
    text = json.dumps(rows)
    for spot, damaged in (
        ('"name": "item 250"', '"name": item 250"'),  # a bare word
        ("2.5]}, {", "2.5]} {"),  # a missing comma between elements
        ("2.5]}, {", "2.5]},, {"),  # a doubled one
        ('"id": 123', '"id" 123'),  # a missing colon
        ('"id": 299, "name": "item 299", "v": [299, 2.5]}]', '"id": 299}'),  # cut short
    ):
        assert spot in text
        assert_fails_as_json(text.replace(spot, damaged, 1))


@pytest.mark.usefixtures("small_bounds")
def test_a_hook_that_refuses_a_value_inside_a_run_refuses_it_as_json_does() -> None:
    """parse_constant / parse_float raising (the stdio client refuses NaN and overflowing
    floats) inside a run of elements: the same error, for the same token, as json.loads."""

    class Refused(ValueError):
        pass

    def refuse(token: str) -> Any:
        raise Refused(token)

    rows = [{"id": i, "v": 1.5} for i in range(200)]
    for bad in ("NaN", "-Infinity", "1e999"):
        text = json.dumps(rows).replace('"id": 150, "v": 1.5', f'"id": 150, "v": {bad}')
        hooks: dict[str, Any] = {"parse_constant": refuse}
        if bad == "1e999":
            hooks["parse_float"] = lambda t: refuse(t) if t == "1e999" else float(t)
        with pytest.raises(Refused) as expected:
            json.loads(text, **hooks)
        with pytest.raises(Refused) as got:
            payload.loads(text, **hooks)
        assert got.value.args == expected.value.args == (bad,)


def test_a_long_list_is_parsed_a_window_per_c_call_not_an_element_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16,000 records (1 MB): about one C call per window of text instead of one per record
    (each call's Python around it cost more than the parse); the same for a map of 50,000
    keys."""
    calls = 0
    real_init = payload._ChunkedParser.__init__

    def counting_init(self: Any, text: str, decoder: json.JSONDecoder) -> None:
        real_init(self, text, decoder)
        scan = self.scan

        def counted(s: str, i: int) -> Any:
            nonlocal calls
            calls += 1
            return scan(s, i)

        self.scan = counted

    monkeypatch.setattr(payload._ChunkedParser, "__init__", counting_init)
    rows = [
        {"id": i, "name": f"item {i}", "tags": ["a", "b"], "ok": i % 2 == 0} for i in range(16_000)
    ]
    for value in (rows, {"rows": rows, "m": {str(i): i for i in range(50_000)}}):
        text = json.dumps(value)
        calls = 0
        assert payload.loads(text) == value
        windows = len(text) // payload.CHUNK_CHARS + 1
        assert calls <= 3 * windows + 10, (calls, windows)


def test_sizes_are_counted_with_bounded_walks() -> None:
    assert payload.node_count({"a": [1, 2, {"b": "x"}]}, 100) == 8  # values and keys
    assert payload.node_count(list(range(10_000)), 50) is None
    assert payload.is_large("x" * (payload.INLINE_NODES * payload.STRING_CHARS_PER_NODE + 10))
    assert not payload.is_large({"small": [1, 2, 3]})


def test_counting_a_wide_value_stops_near_the_limit() -> None:
    """`is_large` on 100,000 records looks at a slice of them past INLINE_NODES, not at all of
    them (every large result and reply is asked)."""
    opened = 0

    class Record(dict[str, Any]):
        def values(self) -> Any:
            nonlocal opened
            opened += 1
            return super().values()

    rows = [Record(id=i, name=f"item {i}", tags=["a"]) for i in range(100_000)]
    assert payload.is_large(rows)
    assert opened <= payload.INLINE_NODES // 3 + payload._SURVEY_SLICE
    opened = 0
    assert payload.node_count(rows[:10], 1000) == 1 + 10 + 10 * (
        3 + 3 + 1
    )  # list, keys, values, tag
    assert opened == 10


def test_every_container_size_is_its_node_count_shared_and_long_strings_included() -> None:
    # `dumps` batches children by these sizes: each must be what `node_count` counts.
    shared = {"s": [1, 2, {"t": "x" * 1000}]}
    value = {"rows": [shared, shared, [shared, {"k": shared}]], "long": "y" * 5000, "n": None}
    sizes = payload._sizes(value)
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            assert sizes[id(item)] == payload.node_count(item, 10**9)
            stack.extend(item.values() if isinstance(item, dict) else item)
    assert payload._sizes("z" * 10) == {}
    big = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(payload.INLINE_NODES)]
    assert payload.dumps(big) == json.dumps(big, separators=(",", ":"))


def test_depth_if_small_is_node_count_and_json_depth_in_one_walk() -> None:
    """The one walk a tool result gets on the event loop answers what `is_large` and
    jsonsafe.json_depth_exceeds would: None exactly when node_count passes the limit, else the
    depth json_depth_exceeds measures."""
    from codemode_gen.runtime.jsonsafe import json_depth_exceeds

    rng = random.Random(20261128)
    values = [_value(rng) for _ in range(300)]
    values += [[], {}, "x" * 5000, [[[[]]]], {"a": {"b": [{"c": []}]}}, [1] * 50]
    deep: Any = []
    for _ in range(150):
        deep = [deep, 1]
    values.append({"deep": deep})
    for value in values:
        nodes = payload.node_count(value, 10**9)
        assert nodes is not None
        depth = next(d for d in range(400) if not json_depth_exceeds(value, d))
        for limit in (0, 1, 5, 40, nodes - 1, nodes, 10**9):
            expected = depth if nodes <= limit else None
            assert payload.depth_if_small(value, limit) == expected, (limit, nodes)


def test_a_measured_reply_is_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = payload.Small(ok=True, value={"rows": [1, 2, 3]})

    def no_walk(value: Any, limit: int) -> int:
        raise AssertionError("walked")

    monkeypatch.setattr(payload, "node_count", no_walk)
    assert not payload.is_large(reply)
    assert json.loads(json.dumps(reply)) == {"ok": True, "value": {"rows": [1, 2, 3]}}
    with pytest.raises(AssertionError):
        payload.is_large({"ok": True})  # a plain dict is still measured
