"""Tool input validation before the call (spec §5.3.1, §7.2).

A model that passes the wrong shape learns more from one precise error than from a server's
generic "invalid params": the failing property as a JSON Pointer, what was expected and what
was received, one action to take, and a payload that would have worked. Validating in the host
also keeps malformed calls away from servers that handle them badly.

Validators are compiled once per distinct schema (tool lists are stable across calls and runs),
and a schema that is itself invalid is not enforced: the server stays the judge of its own
input, rather than an agent being blocked by a server's broken schema.

Validation is bounded, because both the input (the script's) and the schema (the server's) are
untrusted: a small input is validated on the event loop; a larger one in a worker thread
(`prepare_arguments_async`) with a time budget that also ends at the run's deadline and when
the run ends. At most MAX_VALIDATION_ERRORS errors are collected for the best match, error
messages never copy a whole value, and `uniqueItems` is linear. When the budget runs out before
any error was found, the input is not enforced (the server judges it), as for a pattern that
cannot be evaluated (codemode_gen.safe_jsonschema).

This module decides and schedules; the bounded validators are compiled in validators.py, the
error a failed input gets is worded in validation_errors.py, its example payload made in
schema_examples.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from codemode_gen import safe_jsonschema
from codemode_gen.runtime.host.validation_errors import (
    at_most,
    expected_root,
    invalid,
    raise_from,
    too_deep,
)
from codemode_gen.runtime.host.validators import (
    Budget,
    OutOfBudget,
    compiled_validator,
    thread_state,
)
from codemode_gen.runtime.jsonsafe import json_depth_exceeds
from codemode_gen.runtime.limits import MAX_JSON_DEPTH

__all__ = [
    "is_object_schema",
    "prepare_arguments",
    "prepare_arguments_async",
]

# Bounds the errors collected to pick the best match: an invalid 300k-item array made 300k
# errors (each with a repr of its value), 936 MB and 22 s on the event loop.
MAX_VALIDATION_ERRORS = 16
# Bounds the time one input's validation may take (within the run's deadline, which also ends
# it); past it the errors found so far are reported, or, if none, the server judges the input.
VALIDATION_BUDGET_S = 1.0
# Bounds the time spent looking for a better error once one is found (a valid 200k-item array
# with one `maxItems` error would otherwise be walked to the end of the budget).
MORE_ERRORS_BUDGET_S = 0.05
# Inputs of at most this many JSON values are validated on the event loop (well under a
# millisecond); larger ones in a thread, so a big input never stalls other runs.
INLINE_VALIDATION_NODES = 256
# Threads validating large inputs at once (across runs); more wait their turn within their own
# budget. Bounds the CPU and memory that concurrent validation bombs can take.
VALIDATION_THREADS = 2

_UNSET = object()


def is_object_schema(schema: Any) -> bool:
    """True when the root takes an arguments object: `type: object`, or empty/absent (§5.3.1)."""
    if not isinstance(schema, Mapping):
        return schema is None or schema is True
    declared = schema.get("type")
    if declared is None:
        return True
    if isinstance(declared, list):
        return "object" in declared
    return bool(declared == "object")


def prepare_arguments(schema: Any, tool_name: str, export_name: str, value: Any = _UNSET) -> Any:
    """Return the `arguments` to send, or raise InputInvalid.

    `value` is left out when the binding was called without an argument. Object and empty
    schemas then mean `{}` (§5.3.1: no-arg tools accept `()` and `({})`); a non-object root
    schema takes the value itself, so a missing one is reported as `undefined`.
    """
    if value is _UNSET:
        if is_object_schema(schema):
            value = {}
        else:
            raise invalid(
                schema,
                tool_name,
                export_name,
                "",
                expected_root(schema),
                "undefined",
                f"call {export_name} with one argument ({expected_root(schema)})",
            )
    validator = compiled_validator(schema)
    if validator is None:
        return value
    # Server patterns run with a timeout and a per-call budget (safe_jsonschema): one that cannot
    # be evaluated is skipped for this value, so the event loop never stalls and the server
    # stays the judge of what its catastrophic pattern accepts.
    errors: list[ValidationError] = []
    with safe_jsonschema.regex_session():
        try:
            for found in validator.iter_errors(value):
                errors.append(found)
                if len(errors) >= MAX_VALIDATION_ERRORS:
                    break
                budget = getattr(thread_state, "budget", None)
                if budget is not None and len(errors) == 1:
                    budget.until = min(budget.until, time.monotonic() + MORE_ERRORS_BUDGET_S)
        except (OutOfBudget, RecursionError):
            pass  # judge by the errors found so far; none: the server judges the input
    error = best_match(errors)
    if error is not None:
        raise_from(error, schema, tool_name, export_name)
    return value


async def prepare_arguments_async(
    schema: Any, tool_name: str, export_name: str, value: Any, *, deadline: float | None = None
) -> Any:
    """`prepare_arguments` for an input given by the script, bounded in time and memory.

    A small input is checked here (depth included); a large one in a validation thread with
    VALIDATION_BUDGET_S, cut short at `deadline` (`time.monotonic()` seconds) and as soon as the
    awaiting task is cancelled (the run ended), so the event loop, other runs and the run's
    deadline never wait for it.
    """
    if at_most(value, INLINE_VALIDATION_NODES):
        if json_depth_exceeds(value, MAX_JSON_DEPTH):
            raise too_deep(schema, tool_name, export_name)
        return prepare_arguments(schema, tool_name, export_name, value)
    budget = Budget(float("inf") if deadline is None else deadline)
    job = _executor().submit(_prepare_in_thread, budget, schema, tool_name, export_name, value)
    try:
        return await asyncio.wrap_future(job)
    finally:
        budget.stopped = True  # cancelled or done: a running check stops at its next step


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(VALIDATION_THREADS, thread_name_prefix="codemode-validate")
        return _pool


def _prepare_in_thread(
    budget: Budget, schema: Any, tool_name: str, export_name: str, value: Any
) -> Any:
    if budget.stopped:
        raise OutOfBudget()  # the run ended while this waited for a thread
    # The budget starts now: time spent queued for a thread is bounded by the run's deadline.
    budget.until = min(budget.until, time.monotonic() + VALIDATION_BUDGET_S)
    if json_depth_exceeds(value, MAX_JSON_DEPTH):
        raise too_deep(schema, tool_name, export_name)
    thread_state.budget = budget
    try:
        return prepare_arguments(schema, tool_name, export_name, value)
    finally:
        thread_state.budget = None
