"""runtime/host/validators.py: compiled validators for tools' input schemas, bounded (spec §5.3.1)."""

from __future__ import annotations

import time

import pytest

from codemode_gen.runtime.host import validators
from codemode_gen.runtime.host.validators import (
    MAX_CACHED_VALIDATORS,
    Budget,
    OutOfBudget,
    compiled_validator,
    thread_state,
)


def test_no_schema_and_a_broken_schema_are_not_enforced() -> None:
    assert compiled_validator(None) is None
    assert compiled_validator({}) is None
    assert compiled_validator(True) is None
    assert compiled_validator({"type": 12}) is None  # invalid: the server judges its own input


def test_a_schema_is_compiled_once_and_the_cache_is_bounded() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert compiled_validator(schema) is compiled_validator(dict(schema))
    for i in range(MAX_CACHED_VALIDATORS + 5):
        compiled_validator({"type": "object", "properties": {f"p{i}": {"type": "string"}}})
    assert len(validators._validators) <= MAX_CACHED_VALIDATORS


def test_unique_items_is_linear_and_finds_a_repeat() -> None:
    v = compiled_validator({"type": "array", "uniqueItems": True})
    assert v is not None
    items = [{"id": i} for i in range(50_000)]
    start = time.monotonic()
    assert list(v.iter_errors(items)) == []
    assert time.monotonic() - start < 5.0  # pairwise comparison took hours
    [error] = list(v.iter_errors([*items, {"id": 7}]))
    assert error.validator == "uniqueItems"


def test_additional_properties_names_only_the_first_extras() -> None:
    v = compiled_validator(
        {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    )
    assert v is not None
    [error] = list(v.iter_errors({"a": 1, **{f"x{i:05}": 1 for i in range(1000)}}))
    assert (
        "'x00000'" in error.message and "..." in error.message and "'x00999'" not in error.message
    )


def test_cheap_keywords_are_checked_before_descending_ones() -> None:
    v = compiled_validator({"type": "array", "items": {"type": "integer"}, "maxItems": 1})
    assert v is not None
    first = next(iter(v.iter_errors(["a", "b"])))
    assert first.validator == "maxItems"


def test_every_keyword_checks_the_running_budget() -> None:
    v = compiled_validator({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert v is not None
    budget = Budget(time.monotonic() + 60)
    budget.stopped = True  # the run ended
    thread_state.budget = budget
    try:
        with pytest.raises(OutOfBudget):
            list(v.iter_errors({"n": 1}))
    finally:
        thread_state.budget = None
    assert list(v.iter_errors({"n": 1})) == []  # no budget on the event loop
