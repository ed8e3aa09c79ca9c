"""JSON Schema validation whose regular expressions cannot hang the process (spec §11).

Tool schemas come from MCP servers, which are untrusted input. `jsonschema` evaluates
`pattern`, `patternProperties` (also inside `additionalProperties` / `unevaluatedProperties`)
and `format: regex` with Python's `re`, which has no timeout: one declared
`{"pattern": "^(a|a)*$"}` could stall `codemode-gen generate` (drift checking) or the runtime
host's event loop (input validation, every run in `serve`). Here every pattern is translated
from ECMA-262 syntax (what JSON Schema patterns are written in; ecma_regex.py) and run by the `regex` package
with a per-match timeout, length caps and a per-validation time budget.

A pattern that cannot be evaluated (timeout, budget spent, too long, invalid) is *unverifiable*:
the keyword is skipped for that value (it never raises and never fails the value) and the event
is recorded in the active `regex_session()` report, so the drift checker can say so and input
validation can leave the verdict to the server.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
from jsonschema import _keywords, _legacy_keywords
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from referencing.jsonschema import lookup_recursive_ref

__all__ = [
    "MATCH_TIMEOUT_S",
    "MAX_PATTERN_CHARS",
    "MAX_SUBJECT_CHARS",
    "SESSION_BUDGET_S",
    "RegexReport",
    "Skipped",
    "check_schema",
    "regex_session",
    "safe_validator_class",
    "search",
    "validator_for",
]

# Bounds one match of a server-declared pattern: catastrophic backtracking (`^(a|a)*$` against
# "aaaa…!") would otherwise run for minutes while holding the generator or the host event loop.
MATCH_TIMEOUT_S = 0.05
# Bounds all regex time spent inside one `regex_session()` (one tool-input validation, one
# tool's drift check): many values or many patterns must not multiply the per-match timeout.
SESSION_BUDGET_S = 0.25
# Bounds compile time and memory for a hostile pattern (nested repeats compile to huge programs);
# real-world schema patterns (e-mail, URL, date) are well under this.
MAX_PATTERN_CHARS = 2048
# Bounds the text a pattern is run against: matching cost grows with the subject, so a
# multi-megabyte string is not searched (the keyword is unverifiable for it instead).
MAX_SUBJECT_CHARS = 100_000
# Bounds the compiled-pattern cache: a server can publish ever-new schemas (tools/list_changed
# in a loop) and must not grow memory without end.
MAX_CACHED_PATTERNS = 512
# A pattern that timed out this many times is not run again while it stays cached, so a
# hostile schema costs at most a few timeouts per process instead of one per tool call.
MAX_TIMEOUTS_PER_PATTERN = 3
# Bounds the distinct unverifiable events one session keeps (a report, not a log).
MAX_SKIPPED_PER_SESSION = 50
# Bounds how much of a pattern is quoted in a report line (untrusted text, sanitised later).
MAX_QUOTED_PATTERN_CHARS = 60

SkipReason = Literal["timeout", "budget", "invalid", "pattern too long", "value too long"]


@dataclass(frozen=True)
class Skipped:
    """One pattern evaluation that could not give a verdict."""

    pattern: str
    reason: SkipReason

    def describe(self) -> str:
        """`pattern "…" could not be evaluated within 50 ms`, with the reason spelled out."""
        quoted = self.pattern
        if len(quoted) > MAX_QUOTED_PATTERN_CHARS:
            quoted = quoted[: MAX_QUOTED_PATTERN_CHARS - 1] + "…"
        return f"pattern {_json_quote(quoted)} {self.explain()}"

    def explain(self) -> str:
        """The reason alone (`could not be evaluated within 50 ms`), without the pattern."""
        return {
            "timeout": f"could not be evaluated within {MATCH_TIMEOUT_S * 1000:.0f} ms",
            "budget": "was not evaluated: the regex time budget of this validation was spent",
            "invalid": "is not a valid ECMA-262 regular expression",
            "pattern too long": f"is longer than {MAX_PATTERN_CHARS} characters",
            "value too long": f"was not run on a value longer than {MAX_SUBJECT_CHARS} characters",
        }[self.reason]


@dataclass
class RegexReport:
    """What one `regex_session()` could not check, and the regex time it spent."""

    budget_s: float
    spent_s: float = 0.0
    skipped: list[Skipped] = field(default_factory=list)

    def add(self, skipped: Skipped) -> None:
        """Record `skipped` once (the same pattern fails the same way on every value)."""
        if len(self.skipped) < MAX_SKIPPED_PER_SESSION and skipped not in self.skipped:
            self.skipped.append(skipped)


_session: ContextVar[RegexReport | None] = ContextVar(
    "codemode_safe_jsonschema_session", default=None
)


@contextmanager
def regex_session(budget_s: float = SESSION_BUDGET_S) -> Iterator[RegexReport]:
    """Bound the regex time of one validation and collect what could not be checked.

    Context-local (ContextVar), so concurrent validations in one event loop or thread pool
    each get their own budget and report.
    """
    report = RegexReport(budget_s=budget_s)
    token = _session.set(report)
    try:
        yield report
    finally:
        _session.reset(token)


# --------------------------------------------------------------------------- compile and search


@dataclass
class _Compiled:
    program: Any  # regex.Pattern[str] | None
    error: SkipReason | None
    timeouts: int = 0


_TOO_LONG = _Compiled(None, "pattern too long")


def _compile(pattern: str) -> _Compiled:
    # Checked before the cache, so an over-long pattern never becomes a cache key.
    return _TOO_LONG if len(pattern) > MAX_PATTERN_CHARS else _compile_cached(pattern)


@functools.lru_cache(maxsize=MAX_CACHED_PATTERNS)
def _compile_cached(pattern: str) -> _Compiled:
    # Imported by the first pattern compiled: `regex` is ~1.3 MB of RSS that a host whose
    # tools declare no pattern never needs.
    import regex

    from codemode_gen.ecma_regex import FLAGS, translate

    try:
        return _Compiled(regex.compile(translate(pattern), FLAGS), None)
    except Exception:  # regex.error, PatternError, RecursionError, OverflowError, MemoryError…
        return _Compiled(None, "invalid")


def search(pattern: Any, text: str) -> bool | None:
    """Does the ECMA-262 `pattern` match anywhere in `text`? None when it cannot be told.

    Never raises: a timeout, a spent session budget, an over-long pattern or value, or an
    invalid pattern all give None and are recorded in the active `regex_session()`.
    """
    report = _session.get()
    if not isinstance(pattern, str):
        return _skip(report, repr(pattern)[:MAX_QUOTED_PATTERN_CHARS], "invalid")
    compiled = _compile(pattern)
    if compiled.error is not None:
        return _skip(report, pattern, compiled.error)
    if compiled.timeouts >= MAX_TIMEOUTS_PER_PATTERN:
        return _skip(report, pattern, "timeout")
    if len(text) > MAX_SUBJECT_CHARS:
        return _skip(report, pattern, "value too long")
    timeout = MATCH_TIMEOUT_S
    if report is not None:
        left = report.budget_s - report.spent_s
        if left <= 0:
            return _skip(report, pattern, "budget")
        timeout = min(timeout, left)
    started = time.monotonic()
    try:
        found = compiled.program.search(text, timeout=timeout) is not None
    except TimeoutError:
        compiled.timeouts += 1
        found = None
    except Exception:  # a regex engine failure (MemoryError, RecursionError…) is not a verdict
        found = None
    finally:
        if report is not None:
            # A match is charged at most its own timeout: on a loaded machine the wall clock
            # also counts time this process was not running, which must not leave fewer
            # patterns evaluated than on an idle one.
            report.spent_s += min(time.monotonic() - started, timeout)
    if found is None:
        return _skip(report, pattern, "timeout")
    return found


def _skip(report: RegexReport | None, pattern: str, reason: SkipReason) -> bool | None:
    """Record an unverifiable evaluation; returns None, the "no verdict" value of `search`."""
    if report is not None:
        report.add(Skipped(pattern[: MAX_PATTERN_CHARS + 1], reason))
    return None


def _json_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --------------------------------------------------------------------------- jsonschema keywords
# Each replaces the jsonschema keyword of the same name, identical except that patterns go
# through `search` and an unverifiable match never fails a value (fail open).


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and search(patrn, instance) is False:
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object") or not isinstance(pattern_properties, Mapping):
        return
    for pattern, subschema in pattern_properties.items():
        for k, v in instance.items():
            if search(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _matches_a_pattern(schema: Mapping[str, Any], prop: str) -> bool:
    """True when a patternProperties pattern matches `prop`, or when one cannot be evaluated
    (fail open: such a property is treated as covered, not as additional/unevaluated)."""
    patterns = schema.get("patternProperties", {})
    if not isinstance(patterns, Mapping):
        return False
    return any(search(pattern, prop) is not False for pattern in patterns)


def _additional_properties(
    validator: Any, ap: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    extras = {p for p in instance if p not in properties and not _matches_a_pattern(schema, p)}
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % _extras_msg(sorted(extras, key=str)))


def _extras_msg(extras: list[Any]) -> tuple[str, str]:
    verb = "was" if len(extras) == 1 else "were"
    return ", ".join(repr(extra) for extra in extras), verb


def _is_valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Any, schema: Any, *, legacy: bool) -> list[Any]:
    """jsonschema's find_evaluated_property_keys_by_schema (2020-12, or 2019-09 when `legacy`)
    with patternProperties matched through `search`."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[Any] = []

    def follow(resolved: Any) -> None:
        keys.extend(
            _evaluated_keys(
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                instance,
                resolved.contents,
                legacy=legacy,
            )
        )

    ref = schema.get("$ref")
    if ref is not None:
        follow(validator._resolver.lookup(ref))
    if legacy:
        if "$recursiveRef" in schema:
            follow(lookup_recursive_ref(validator._resolver))
        for keyword in ("properties", "additionalProperties", "unevaluatedProperties"):
            if keyword in schema:
                value = schema[keyword]
                if validator.is_type(value, "boolean") and value:
                    keys += instance.keys()
                elif validator.is_type(value, "object"):
                    keys += [p for p in value if p in instance]
    else:
        dynamic_ref = schema.get("$dynamicRef")
        if dynamic_ref is not None:
            follow(validator._resolver.lookup(dynamic_ref))
        properties = schema.get("properties")
        if validator.is_type(properties, "object"):
            keys += properties.keys() & instance.keys()
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if (subschema := schema.get(keyword)) is None:
                continue
            keys += (
                key
                for key, value in instance.items()
                if _is_valid(validator.descend(value, subschema))
            )
    if "patternProperties" in schema:
        for prop in instance:
            for pattern in schema["patternProperties"]:
                # An unverifiable match counts as evaluated (fail open).
                if search(pattern, prop) is not False:
                    keys.append(prop)
    if "dependentSchemas" in schema:
        for prop, subschema in schema["dependentSchemas"].items():
            if prop in instance:
                keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _is_valid(validator.descend(instance, subschema)):
                keys += _evaluated_keys(validator, instance, subschema, legacy=legacy)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += _evaluated_keys(validator, instance, schema["if"], legacy=legacy)
            if "then" in schema:
                keys += _evaluated_keys(validator, instance, schema["then"], legacy=legacy)
        elif "else" in schema:
            keys += _evaluated_keys(validator, instance, schema["else"], legacy=legacy)
    return keys


def _unevaluated_properties(legacy: bool) -> Any:
    def keyword(validator: Any, up: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_keys(validator, instance, schema, legacy=legacy)
        unevaluated = []
        for prop in instance:
            if prop not in evaluated:
                for _ in validator.descend(instance[prop], up, path=prop, schema_path=prop):
                    unevaluated.append(prop)
        if unevaluated:
            if up is False:
                error = "Unevaluated properties are not allowed (%s %s unexpected)"
                yield ValidationError(error % _extras_msg(sorted(unevaluated, key=str)))
            else:
                error = (
                    "Unevaluated properties are not valid under "
                    "the given schema (%s %s unevaluated and invalid)"
                )
                yield ValidationError(error % _extras_msg(unevaluated))

    return keyword


def _regex_format(instance: object) -> bool:
    """`format: regex`: a valid ECMA-262 pattern (compiled, never run, so it cannot hang)."""
    if not isinstance(instance, str):
        return True
    return _compile(instance).error is None


def _format_checker(base: jsonschema.FormatChecker) -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(base.checkers)
    checker.checks("regex")(_regex_format)
    return checker


def _schema_format_checker(base: jsonschema.FormatChecker) -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = {k: v for k, v in base.checkers.items() if k != "regex"}
    return checker


_REPLACEMENTS: dict[Any, Any] = {
    _keywords.pattern: _pattern,
    _keywords.patternProperties: _pattern_properties,
    _keywords.additionalProperties: _additional_properties,
    _keywords.unevaluatedProperties: _unevaluated_properties(legacy=False),
    _legacy_keywords.unevaluatedProperties_draft2019: _unevaluated_properties(legacy=True),
}


@functools.cache
def safe_validator_class(cls: type[Validator]) -> type[Validator]:
    """`cls` with every regex-evaluating keyword (and `format: regex`) routed through `search`.

    The extension is not registered for any `$schema` URI, so jsonschema's own lookups
    (meta-schema validation, `validator_for`) are unaffected.
    """
    replaced = {
        name: _REPLACEMENTS[fn] for name, fn in cls.VALIDATORS.items() if fn in _REPLACEMENTS
    }
    safe: type[Validator] = jsonschema.validators.extend(
        cls, replaced, format_checker=_format_checker(cls.FORMAT_CHECKER)
    )
    return safe


def validator_for(
    schema: Any, default: type[Validator] = jsonschema.Draft202012Validator
) -> type[Validator]:
    """The safe validator class for `schema`'s `$schema` draft (like jsonschema.validator_for)."""
    return safe_validator_class(jsonschema.validators.validator_for(schema, default=default))


def check_schema(cls: type[Validator], schema: Any) -> None:
    """`cls.check_schema(schema)` (raises SchemaError) without judging pattern syntax.

    The meta-schemas declare patterns `format: regex`, which jsonschema checks with Python's
    `re.compile`: a valid ECMA pattern such as `(?<year>\\d{4})` would make the whole schema
    "invalid" and unenforced. Pattern syntax is instead judged per keyword at validation time
    (an invalid pattern is unverifiable there, and only that keyword is skipped).
    """
    meta = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    # jsonschema's Validator protocol leaves out check_schema's `format_checker`, which every
    # validator class it creates takes (jsonschema >= 4.21 here).
    cls.check_schema(schema, format_checker=_schema_format_checker(meta.FORMAT_CHECKER))  # type: ignore[call-arg]
