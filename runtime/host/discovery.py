"""Builds the `@codemode/discovery` module source for one run (spec §4, §12.1).

The catalog is embedded as data in the module text instead of being fetched through the host
bridge: discovery then costs no round trip, cannot be counted against `maxToolCalls`, and is
by construction the snapshot taken at run start (§8.2).

`searchTools` ranks with BM25F over three fields of each tool (names, title, description). The
host does the text work once per catalog, here, so that a search inside QuickJS costs in
proportion to what the query matches, not to the size of the catalog: each server gets an
inverted index, its sorted vocabulary of normalised terms with one postings string per term
(the field slots holding it, `tool * 3 + field`, once per occurrence, in fixed-width base-64
digits: compact JSON, decoded with charCodeAt only for the query's terms), and each field's
length in terms. The query is normalised in JS by the same rules (`terms` here and in
js/discovery.js must agree; a test feeds both the same words).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from codemode_gen import SPEC_VERSION
from codemode_gen.runtime.host.catalog import Catalog, ToolView

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "MAX_SEARCH_LIMIT",
    "MODULE_NAME",
    "discovery_data",
    "discovery_module",
    "search_index",
    "stem",
    "terms",
]

MODULE_NAME = "@codemode/discovery"
# searchTools results when the agent gives no limit: enough to choose from, small enough to
# keep a broad query ("get") from dumping the whole catalog into the agent's context.
DEFAULT_SEARCH_LIMIT = 20
# Upper bound even when the agent asks for more; listTools is the way to see everything.
MAX_SEARCH_LIMIT = 200
_PLACEHOLDER = "__CODEMODE_DISCOVERY_DATA__"
# Per-server search indexes kept between runs (keyed by the searched text of every tool), so an
# unchanged catalog is tokenised once per process, not once per run.
SEARCH_INDEX_CACHE = 64
# Distinct words whose stems are remembered: catalogs repeat a small vocabulary thousands of times.
STEM_CACHE = 1 << 16

# What `listSkills` says of each skill (its manifest entry's fields).
SKILL_FIELDS = ("name", "specifier", "function", "description", "signature")
FIELDS = 3  # searched per tool, in slot order: names, title, description
# Digits of the postings strings: base64url, ASCII that JSON never escapes.
POSTING_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")  # getNote -> get Note
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")  # HTTPServer -> HTTP Server
_NON_WORD = re.compile(r"[\W_]+")  # str patterns: \w is letters and digits of any script, plus _
_VOWELS = frozenset("aeiouy")
_UNDOUBLE = frozenset("bcdfghjkmnpqrtv")  # a doubled one before -ing/-ed is single in the stem
_CVC_END = frozenset("bcdfghjklmnpqrstvz")  # consonants a short (c)vc stem that lost its e ends in


@lru_cache(maxsize=1)
def _template() -> str:
    return (
        resources.files("codemode_gen.runtime")
        .joinpath("js/discovery.js")
        .read_text(encoding="utf-8")
    )


def discovery_data(
    catalog: Catalog,
    *,
    copy_values: bool = True,
    skills: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON the module serves: visible servers with their full tool definitions, and the
    search index of each (`search`, aligned with `servers`; the module keeps it private).

    `copy_values=False` shares schema objects with the catalog (only for serialising)."""
    servers = []
    indexes = []
    for view in catalog.visible():
        tools = [tool for _, tool in sorted(view.tools.items())]
        entry = view.describe()
        entry["tools"] = [tool.definition(copy_values=copy_values) for tool in tools]
        servers.append(entry)
        indexes.append(search_index(tools))
    return {
        "specVersion": SPEC_VERSION,
        "defaultSearchLimit": DEFAULT_SEARCH_LIMIT,
        "maxSearchLimit": MAX_SEARCH_LIMIT,
        "servers": servers,
        "search": indexes,
        # out/'s skills (`listSkills`): what the prompt's skills section may only count.
        "skills": [{key: skill.get(key) for key in SKILL_FIELDS} for skill in skills],
    }


def discovery_module(catalog: Catalog, skills: Sequence[Mapping[str, Any]] = ()) -> str:
    """ES module text; the data is a JSON string literal, so no server text is ever code."""
    text = json.dumps(
        discovery_data(catalog, copy_values=False, skills=skills),
        ensure_ascii=True,
        sort_keys=True,
        separators=(",", ":"),
    )
    # A second dumps makes a JS string literal; ensure_ascii also escapes U+2028/2029.
    return _template().replace(_PLACEHOLDER, json.dumps(text, ensure_ascii=True), 1)


# --------------------------------------------------------------------------- search index


def terms(text: str) -> list[str]:
    """The search terms of a text: words split at case changes and non-alphanumerics, lower
    case, lightly stemmed. js/discovery.js `terms` applies the same rules to the query."""
    spaced = _ACRONYM.sub(r"\1 \2", _CAMEL.sub(r"\1 \2", text)).lower()
    return [stem(word) for word in _NON_WORD.split(spaced) if word]


@lru_cache(maxsize=STEM_CACHE)
def stem(word: str) -> str:
    """Fold plural, -ing/-ed and -e/-y endings so "notes", "note" and "noting" meet.

    Deliberately light (no dictionary, a handful of rules that both languages can share
    exactly): a stem only has to be the same for the forms of one word, not a real word."""
    n = _units(word)
    if n < 3:
        return word
    if n > 4 and word.endswith(("ies", "ied")):
        word = word[:-3] + "i"  # queries, copied -> queri, copi (query -> queri below)
    elif n > 3 and word.endswith(("sses", "xes", "ches", "shes")):
        word = word[:-2]  # classes, boxes, matches, pushes
    elif word.endswith("s") and not word.endswith(("ss", "us", "is", "ias")):
        word = word[:-1]  # notes, ids; not class, status, analysis, alias
    if word.endswith("ing"):
        word = _unsuffix(word, 3)
    elif word.endswith("ed") and not word.endswith("eed"):
        word = _unsuffix(word, 2)
    if _units(word) > 2 and word.endswith("y") and word[-2] not in _VOWELS:
        word = word[:-1] + "i"  # copy, query -> copi, queri (key stays)
    if _units(word) > 4 and word.endswith("e"):
        word = word[:-1]  # create, creates, created, creating -> creat
    return word


def _unsuffix(word: str, size: int) -> str:
    base = word[:-size]
    if _units(base) < 2 or not any(c in _VOWELS for c in base):
        return word  # thing, string, shed: the ending is part of the word
    last = base[-1]
    if _units(base) > 3 and last == base[-2] and last in _UNDOUBLE:
        base = base[:-1]  # getting, stopped -> get, stop (added -> add, calling -> call)
        if base.endswith("ed") and not base.endswith("eed"):
            return _unsuffix(base, 2)  # embedding -> embed -> emb, as embed and embeds
        return base
    if _short_cvc(base):
        return base + "e"  # naming, noted, using -> name, note, use
    return base


def _short_cvc(base: str) -> bool:
    """A two- or three-letter stem that lost its final e: (consonant) vowel consonant."""
    if _units(base) == 3 and base[0] not in _VOWELS:
        base = base[1:]
    return _units(base) == 2 and base[0] in _VOWELS and base[1] in _CVC_END


def _units(text: str) -> int:
    """Length as JS counts it (UTF-16 code units): the stem rules' thresholds must agree."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def _tool_fields(tool: ToolView) -> tuple[str, str, str, str]:
    return (tool.tool_name, tool.export_name, tool.title or "", tool.description or "")


def search_index(tools: Sequence[ToolView]) -> dict[str, Any]:
    """One server's search index (see the module docstring), cached per distinct tool texts."""
    return _search_index(tuple(_tool_fields(t) for t in tools))


@lru_cache(maxsize=SEARCH_INDEX_CACHE)
def _search_index(tools: tuple[tuple[str, str, str, str], ...]) -> dict[str, Any]:
    postings: dict[str, list[int]] = {}
    lengths: list[int] = []
    totals = [0] * FIELDS
    for number, (tool_name, export_name, title, description) in enumerate(tools):
        names = terms(tool_name)
        names += [t for t in terms(export_name) if t not in names]
        for field, words in enumerate((names, terms(title), terms(description))):
            slot = number * FIELDS + field
            lengths.append(len(words))
            totals[field] += len(words)
            for word in words:
                postings.setdefault(word, []).append(slot)
    # JS compares strings by UTF-16 code unit; its binary search needs that order.
    vocabulary = sorted(postings, key=lambda t: t.encode("utf-16-be"))
    width = 1
    while len(POSTING_DIGITS) ** width < len(lengths):
        width += 1
    return {
        "terms": vocabulary,
        "postings": [_encode(postings[t], width) for t in vocabulary],
        "width": width,
        "lengths": lengths,
        "totals": totals,
    }


def _encode(slots: list[int], width: int) -> str:
    base = len(POSTING_DIGITS)
    out = []
    for slot in slots:
        digits = []
        for _ in range(width):
            slot, digit = divmod(slot, base)
            digits.append(POSTING_DIGITS[digit])
        out.append("".join(reversed(digits)))
    return "".join(out)
