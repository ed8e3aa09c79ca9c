"""Pattern handling: `patternProperties` patterns, as far as TypeScript can use them.

One stage of the translator (generator/typescript/translator.py). A pattern that is plain text
(`^x-`, `_id$`, `^name$`) becomes an exact property name or a template literal key
(`` `x-${string}` ``); one that matches every name becomes part of the index signature; any
other pattern is server text and is matched against property names only through
codemode_gen.safe_jsonschema (ECMA-262 semantics, a per-match timeout, length caps and a budget
per translation), never with Python's `re`. A match that cannot be told narrows nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import safe_jsonschema
from codemode_gen.generator.typescript import ast as t

# Bounds the regex time one translation spends matching server-supplied `patternProperties`
# against property names. Every pattern runs through the ECMA-262 matcher the validators use
# (codemode_gen.safe_jsonschema: its own per-match timeout and length caps): with Python's `re`,
# `^(a|a)*$` against a 24-character name took seconds and doubled per character, hanging
# `generate` and `serve`. Once spent, the remaining matches count as unknown (wider types).
PATTERN_BUDGET_S = 0.5

_REGEX_META = frozenset(".*+?()[]{}|^$\\")


def literal_pattern(pattern: str) -> tuple[str, bool, bool] | None:
    """(literal, anchored at start, anchored at end) for regexes that are plain text."""
    start = pattern.startswith("^")
    body = pattern[1:] if start else pattern
    end = body.endswith("$") and not body.endswith("\\$")
    if end:
        body = body[:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if i + 1 < len(body) and body[i + 1] in ".-/_:@ ,;=!#%&~'\"":
                out.append(body[i + 1])
                i += 2
                continue
            return None
        if ch in _REGEX_META:
            return None
        out.append(ch)
        i += 1
    literal = "".join(out)
    if (
        not literal
        or "*/" in literal
        or not all(c.isprintable() and c not in "`$\\" for c in literal)
    ):
        return None
    return literal, start, end


_NON_REGULAR = re.compile(r"[$^]|\\[bBAZz0-9]|\(\?[=!<]")


def matches_every_name(pattern: str) -> bool:
    """True for unanchored patterns that match the empty string (so every string).

    False also when that cannot be told (an invalid or too slow pattern): the pattern is then
    matched name by name, which can only make the type wider.
    """
    if _NON_REGULAR.search(pattern):
        return False  # anchors, word boundaries, lookarounds, back-references
    return safe_jsonschema.search(pattern, "") is True


def template_matches(key: t.TemplateKey, name: str) -> bool:
    if not key.any_before:
        return name.startswith(key.literal)
    if not key.any_after:
        return name.endswith(key.literal)
    return key.literal in name


def _template_contains(outer: t.TemplateKey, inner: t.TemplateKey) -> bool:
    """Every name matching `inner` also matches `outer` (as TypeScript also concludes)."""
    if outer.any_before and outer.any_after:
        return outer.literal in inner.literal
    if outer.any_after:
        return not inner.any_before and inner.literal.startswith(outer.literal)
    if outer.any_before:
        return not inner.any_after and inner.literal.endswith(outer.literal)
    return False


def finish_patterns(
    patterns: Sequence[tuple[t.TemplateKey, t.TypeNode]], index: t.TypeNode | None
) -> tuple[tuple[t.TemplateKey, t.TypeNode], ...]:
    """Make template index signatures consistent the way tsc demands (TS2413/TS2374).

    One signature per key; a signature whose names all match another one also satisfies
    that one's type, and every signature satisfies the string index. All of this holds for
    every valid value already, so the intersections narrow nothing valid.
    """
    grouped: dict[t.TemplateKey, list[t.TypeNode]] = {}
    for key, typ in patterns:
        grouped.setdefault(key, []).append(typ)
    out = []
    for key, types in grouped.items():
        parts = list(types)
        for other, other_types in grouped.items():
            if other != key and _template_contains(other, key):
                parts.extend(other_types)
        if index is not None:
            parts.append(index)
        out.append((key, t.intersection(parts)))
    return tuple(out)


def undecided_reason(pattern: str, report: safe_jsonschema.RegexReport | None) -> str:
    """Why `safe_jsonschema.search(pattern, …)` gave no verdict in the session of `report`
    (`could not be evaluated within 50 ms`, …), without quoting the server-written pattern."""
    why = "could not be evaluated"
    if report is not None:
        key = pattern[: safe_jsonschema.MAX_PATTERN_CHARS + 1]
        skipped = next((each for each in report.skipped if each.pattern == key), None)
        if skipped is not None:
            why = skipped.explain()
    return why


@dataclass
class PatternTypes:
    """The `patternProperties` of one object schema, each typed and sorted by what TypeScript
    can do with it. `search(pattern, name, pointer)` decides a regex pattern for one property
    name in bounded time (None: it cannot be told; the translator warns)."""

    search: Callable[[str, str, str], bool | None]
    exact: list[tuple[str, t.TypeNode]] = field(default_factory=list)  # `^name$`: one name
    templates: list[tuple[t.TemplateKey, t.TypeNode]] = field(default_factory=list)  # `^x-`
    match_all: list[t.TypeNode] = field(default_factory=list)  # such as "a*": every name
    regexes: list[tuple[str, str, t.TypeNode]] = field(
        default_factory=list
    )  # (pattern, pointer, type)

    def add(self, pattern: str, ptr: str, typ: t.TypeNode) -> None:
        lit = literal_pattern(pattern)
        if lit is not None and lit[1] and lit[2]:
            self.exact.append((lit[0], typ))
        elif lit is not None:
            self.templates.append((t.TemplateKey(lit[0], not lit[1], not lit[2]), typ))
        elif matches_every_name(pattern):
            self.match_all.append(typ)
        else:
            self.regexes.append((pattern, ptr, typ))

    def __bool__(self) -> bool:
        return bool(self.templates or self.exact or self.regexes or self.match_all)

    def matching(self, name: str) -> tuple[list[t.TypeNode], list[t.TypeNode]]:
        """(types of the patterns that match `name`, of those that may: unknown)."""
        out = [
            *self.match_all,
            *(typ for key, typ in self.templates if template_matches(key, name)),
        ]
        out += [typ for lit, typ in self.exact if lit == name]
        maybe: list[t.TypeNode] = []
        for pat, pat_ptr, typ in self.regexes:
            found = self.search(pat, name, pat_ptr)
            if found:
                out.append(typ)
            elif found is None:
                maybe.append(typ)
        return out, maybe

    def object_type(
        self, members: list[t.Property], ap: Any, ap_type: t.TypeNode | None
    ) -> t.Object:
        """The object type of `members` under these patterns and `additionalProperties` `ap`
        (True, False, or a schema typed `ap_type`): its index and template signatures."""
        match_all, templates = self.match_all, self.templates
        # only the index signature and match-all patterns depend on it
        any_optional = (ap is not True or bool(match_all)) and any(p.optional for p in members)
        index: t.TypeNode | None
        if ap is True:
            index = t.UNKNOWN
        elif ap is False and not self.regexes:
            index = None if members or templates else t.NEVER
        else:
            parts = [p.type for p in members] + [typ for _, _, typ in self.regexes]
            parts += [typ for _, typ in templates]
            if ap_type is not None:
                parts.append(ap_type)
            if any_optional:
                parts.append(t.UNDEFINED)
            index = t.union(parts)
        if match_all:
            # Every name matches these patterns, so every value satisfies them (and
            # additionalProperties never applies).
            index = t.intersection(match_all)
            if any_optional:
                index = t.union([index, t.UNDEFINED])
        pattern_sigs = []
        for template, typ in templates:
            parts = [typ] + [p.type for p in members if template_matches(template, p.name)]
            if any(p.optional for p in members if template_matches(template, p.name)):
                parts.append(t.UNDEFINED)
            pattern_sigs.append((template, t.union(parts)))
        return t.Object(tuple(members), index, patterns=finish_patterns(pattern_sigs, index))
