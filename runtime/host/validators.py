"""Compiled validators for tools' input schemas, bounded in time and size (spec §5.3.1).

Both the input (the script's) and the schema (the server's) are untrusted, and jsonschema has
costs an input can blow up: `uniqueItems` compares pairwise, `additionalProperties` sorts every
extra name into its message, and a keyword walk over 300k items never looks at the clock. This
module compiles each distinct schema once (MAX_CACHED_VALIDATORS kept) into a validator whose
every keyword checks the running thread's `Budget`, whose `uniqueItems` is linear and whose
cheap keywords run first; a schema that is itself invalid compiles to None (not enforced: the
server stays the judge). validation.py runs the validators and schedules the budget.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
from jsonschema._utils import find_additional_properties
from jsonschema.exceptions import SchemaError, ValidationError

from codemode_gen import safe_jsonschema
from codemode_gen.runtime.host.validation_errors import MAX_LISTED_ITEMS, show
from codemode_gen.runtime.jsonsafe import copy_json

# Bounds how many compiled validators are kept: a server could publish ever-new schemas
# (tools/list_changed in a loop) and grow the cache without end.
MAX_CACHED_VALIDATORS = 512

_validators: dict[str, jsonschema.protocols.Validator | None] = {}


class OutOfBudget(Exception):
    """Raised inside a budgeted validation when its time is up or its run has ended."""


class Budget:
    """When one validation must stop (`until`, `time.monotonic()` seconds), or `stopped` when
    its run ended; every keyword of a bounded validator checks it."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.stopped = False

    def check(self) -> None:
        if self.stopped or time.monotonic() > self.until:
            self.stopped = True
            raise OutOfBudget()


thread_state = threading.local()  # .budget: the Budget of the validation running in this thread


def _budgeted(keyword: Any) -> Any:
    """A keyword function that first checks the thread's budget (absent on the event loop)."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = getattr(thread_state, "budget", None)
        if budget is not None:
            budget.check()
        return keyword(validator, value, instance, schema)

    return check


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """`uniqueItems` in linear time (jsonschema compares unsortable items pairwise: hours for
    50k objects). Items are compared by their canonical JSON; values JSON Schema calls equal
    but that print differently (1 and 1.0) count as distinct: the server judges those."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        try:
            key = json.dumps(item, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return
        if key in seen:
            yield ValidationError(f"{show(instance)} has non-unique elements")
            return
        seen.add(key)


def _additional_properties(original: Any) -> Any:
    """`additionalProperties` whose error names the first few extra properties only: jsonschema
    sorts all of them into its message (one C sort of 400,000 names held the GIL, and so the
    event loop, for most of a second). Everything else is jsonschema's own."""

    def check(
        validator: Any, allowed: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if allowed is not False or not validator.is_type(instance, "object"):
            yield from original(validator, allowed, instance, schema)
            return
        extras = heapq.nsmallest(MAX_LISTED_ITEMS + 1, find_additional_properties(instance, schema))
        if not extras:
            return
        names = ", ".join(repr(name) for name in extras[:MAX_LISTED_ITEMS])
        more = ", ..." if len(extras) > MAX_LISTED_ITEMS else ""
        if "patternProperties" in schema:
            yield ValidationError(f"{names}{more} do not match any of the patternProperties")
        else:
            yield ValidationError(
                f"Additional properties are not allowed ({names}{more} unexpected)"
            )

    return check


_bounded_classes: dict[Any, Any] = {}

# Keywords that look into an instance's children or into other schemas: validated after the
# keywords that judge the instance as a whole (type, required, maxItems, ...), so the few
# errors collected include those cheap, high-up ones before a walk over 300k items.
_DESCENDING = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "dependentSchemas",
        "dependencies",
        "propertyNames",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
        "uniqueItems",
    }
)


def _cheap_first(schema: Any) -> Any:
    """A copy of `schema` whose objects list the _DESCENDING keywords last (same meaning:
    JSON Schema keywords are unordered; jsonschema checks them in the order given).

    Iterative (`copy_json`): a server's schema can be nested hundreds of levels deep."""
    return copy_json(
        schema, order=lambda obj: sorted(obj, key=lambda name: name in _DESCENDING)
    )  # stable


def _bounded_class(cls: Any) -> Any:
    """`cls` (already regex-safe) with every keyword budget-checked and `uniqueItems` linear."""
    bounded = _bounded_classes.get(cls)
    if bounded is None:
        keywords = {name: _budgeted(fn) for name, fn in cls.VALIDATORS.items()}
        if "uniqueItems" in keywords:
            keywords["uniqueItems"] = _budgeted(_unique_items)
        if "additionalProperties" in keywords:
            keywords["additionalProperties"] = _budgeted(
                _additional_properties(cls.VALIDATORS["additionalProperties"])
            )
        bounded = jsonschema.validators.extend(cls, keywords)
        _bounded_classes[cls] = bounded
    return bounded


def compiled_validator(schema: Any) -> jsonschema.protocols.Validator | None:
    if schema is None or schema == {} or schema is True:
        return None
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return None
    if key in _validators:
        return _validators[key]
    validator: jsonschema.protocols.Validator | None
    try:
        cls = safe_jsonschema.validator_for(schema, default=jsonschema.Draft202012Validator)
        safe_jsonschema.check_schema(cls, schema)
        validator = _bounded_class(cls)(_cheap_first(schema))
    except (SchemaError, TypeError, ValueError, LookupError):
        validator = None
    if len(_validators) >= MAX_CACHED_VALIDATORS:
        _validators.clear()
    _validators[key] = validator
    return validator
