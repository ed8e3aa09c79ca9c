"""runtime/limits.py: defaults, unknown keys ignored (§3.2.4), bad values rejected clearly."""

from __future__ import annotations

import pytest

from codemode_gen.runtime import limits as L
from codemode_gen.runtime.limits import Limits, LimitsError, SandboxLimitExceeded, merge


def test_defaults_are_the_documented_constants() -> None:
    assert Limits().to_json() == {
        "timeoutMs": L.DEFAULT_TIMEOUT_MS,
        "maxMemoryBytes": L.DEFAULT_MAX_MEMORY_BYTES,
        "maxLogBytes": L.DEFAULT_MAX_LOG_BYTES,
        "maxToolCalls": L.DEFAULT_MAX_TOOL_CALLS,
        "maxConcurrentCalls": L.DEFAULT_MAX_CONCURRENT_CALLS,
    }


def test_s3_2_4_unknown_keys_are_ignored() -> None:
    got = Limits.from_json({"timeoutMs": 1000, "maxCpuCycles": 5, "nested": {"x": 1}})
    assert got == Limits(timeoutMs=1000)


def test_from_json_none_and_empty_give_defaults() -> None:
    assert Limits.from_json(None) == Limits() == Limits.from_json({})


def test_merge_applies_overrides_on_given_defaults() -> None:
    base = Limits(timeoutMs=2000, maxLogBytes=10)
    got = merge(base, {"maxLogBytes": 20, "timeoutMs": None})
    assert got == Limits(timeoutMs=2000, maxLogBytes=20)
    assert merge(base, None) is base


def test_integral_floats_are_accepted() -> None:
    assert Limits.from_json({"timeoutMs": 1500.0}).timeoutMs == 1500


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("timeoutMs", "1000", "expected an integer"),
        ("timeoutMs", 1.5, "expected an integer"),
        ("timeoutMs", True, "expected an integer"),
        ("timeoutMs", -1, "out of range"),
        ("timeoutMs", 0, "out of range"),
        ("maxMemoryBytes", 1024, "out of range"),
        ("maxLogBytes", -5, "out of range"),
        ("maxToolCalls", [1], "expected an integer"),
        ("maxConcurrentCalls", 0, "out of range"),
        ("timeoutMs", L.HARD_MAX_TIMEOUT_MS + 1, "out of range"),
        ("maxMemoryBytes", L.HARD_MAX_MEMORY_BYTES * 2, "out of range"),
    ],
)
def test_bad_values_raise_a_clear_error(key: str, value: object, fragment: str) -> None:
    with pytest.raises(LimitsError) as info:
        Limits.from_json({key: value})
    assert str(info.value).startswith(f"limits.{key}: ")
    assert fragment in str(info.value)
    assert info.value.key == key


def test_non_object_limits_rejected() -> None:
    with pytest.raises(LimitsError):
        merge(Limits(), [1, 2])  # type: ignore[arg-type, unused-ignore]


def test_dataclass_validates_direct_construction() -> None:
    with pytest.raises(LimitsError):
        Limits(timeoutMs=-3)


def test_typecheck_is_a_boolean_option_defaulting_to_the_host() -> None:
    assert Limits().typecheck is None and "typecheck" not in Limits().to_json()  # the host decides
    assert Limits.from_json({"typecheck": True}).to_json()["typecheck"] is True
    assert merge(Limits(typecheck=True), {"typecheck": False, "timeoutMs": 5}).typecheck is False
    assert merge(Limits(typecheck=True), {"typecheck": None}).typecheck is True
    for bad in (1, "true", [True]):
        with pytest.raises(LimitsError, match=r"limits\.typecheck: expected true or false"):
            Limits.from_json({"typecheck": bad})


def test_response_keys_default_to_the_host_and_are_checked() -> None:
    """maxResponseChars and trace (host-defined keys, §3.2.4): None means the host's default
    (serve's budget and "errors"; the Python API's whole response); set, they are validated."""
    assert Limits().maxResponseChars is None and Limits().trace is None
    assert {"maxResponseChars", "trace"}.isdisjoint(Limits().to_json())
    got = Limits.from_json({"maxResponseChars": 5000.0, "trace": "none"})
    assert (got.maxResponseChars, got.trace) == (5000, "none")
    assert merge(got, {"trace": None}).trace == "none"
    with pytest.raises(
        LimitsError, match=r"limits\.trace: expected one of 'full', 'errors', 'none', got 'all'"
    ):
        Limits.from_json({"trace": "all"})
    with pytest.raises(
        LimitsError,
        match=r"limits\.maxResponseChars: 999 is out of range; use an integer from 1000",
    ):
        Limits.from_json({"maxResponseChars": L.MIN_RESPONSE_CHARS - 1})
    with pytest.raises(LimitsError):
        Limits(trace="verbose")  # type: ignore[arg-type]


def test_sandbox_limit_exceeded_carries_fields() -> None:
    exc = SandboxLimitExceeded("maxToolCalls", 3, "too many")
    assert (exc.limit, exc.value, exc.message, str(exc)) == (
        "maxToolCalls",
        3,
        "too many",
        "too many",
    )


def test_s3_2_4_limits_read_again_from_the_same_json_are_the_same_validated_object() -> None:
    first = Limits.from_json({"timeoutMs": 4321, "unknownKey": [1]})
    assert Limits.from_json({"unknownKey": "x", "timeoutMs": 4321}) is first
    assert first == Limits(timeoutMs=4321)
    # True and 1 are equal in Python; as a limit one is a flag and the other is not.
    assert Limits.from_json({"typecheck": True}).typecheck is True
    with pytest.raises(LimitsError, match="typecheck"):
        Limits.from_json({"typecheck": 1})
    with pytest.raises(LimitsError, match="timeoutMs"):
        Limits.from_json({"timeoutMs": -1})
    # A value that is not a plain scalar is validated as before (and refused).
    with pytest.raises(LimitsError, match="timeoutMs"):
        Limits.from_json({"timeoutMs": [1]})
    # to_json hands out a copy: a caller changing it changes no other run's limits.
    sent = first.to_json()
    sent["timeoutMs"] = 1
    assert first.to_json()["timeoutMs"] == 4321
