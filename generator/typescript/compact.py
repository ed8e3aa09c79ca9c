"""TS type AST -> the compact text a model reads: one line per type where it can, notes inline.

The committed .d.ts (printer.py) is laid out for editors and tsc: a JSDoc block per property.
A model pays for every character of it on every request, so this printer keeps what a caller
needs to write a correct call and use its result (names, types, optional vs required, enums,
defaults, the short meaning of a field) and drops the rest: objects print on one line, and
only when a property has something worth saying does the object break into lines, each with
a `//` note. Every server string still goes through printer.py's sanitising, and a note can
never leave its line (line comments end only at a line terminator, which is removed).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.printer import (
    CONSTRAINTS_LABEL,
    INDENT,
    number_literal,
    property_key,
    sanitize_doc,
    string_literal,
    template_key,
)

__all__ = [
    "MAX_NOTE_CHARS",
    "MAX_SUMMARY_CHARS",
    "compact_note",
    "cut",
    "first_sentence",
    "one_line",
    "print_compact",
]

# Longest `//` note after one property: a field's meaning in a phrase, not its documentation
# (a server's paragraph per field would cost more context than its whole schema).
MAX_NOTE_CHARS = 100
# Longest one-line summary of a tool or server (its first sentence, cut there).
MAX_SUMMARY_CHARS = 160
# Longest default value shown in a note.
MAX_DEFAULT_CHARS = 40
# Deepest nesting printed before the rest becomes `unknown`: a hostile schema nested hundreds
# of levels deep must not overflow the stack or the prompt.
MAX_COMPACT_DEPTH = 32
ELLIPSIS = "…"
# An object of one noted field stays on one line up to this length (else one field a line).
MAX_ONE_LINE_CHARS = 100

# A sentence ends at ". " before anything but a lower-case word ("e.g. 2026" and "i.e. the"
# do not end one), or at a blank line.
_SENTENCE_END = re.compile(
    r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<=[.!?])\s+(?=[^a-z\s])|\n\s*\n"
)
_SPACES = re.compile(r"\s+")
# Doc-line prefixes written by docs.schema_doc that are not a field's meaning.
_NOT_MEANING = (
    CONSTRAINTS_LABEL,
    "@default ",
    "@example ",
    "@deprecated",
    "Read-only.",
    "Write-only.",
    "Warning:",
)


def one_line(text: str) -> str:
    """Sanitised server text on one line: safe in a `//` note and in a one-line `/** */`."""
    return _SPACES.sub(" ", sanitize_doc(text)).strip()


def cut(text: str, limit: int) -> str:
    """`text` at most `limit` characters: cut, trailing space dropped, ending in `…` (never in
    `*…`, so no "*" is left that later text could pair with "/")."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rstrip()
    return cut[:-1] + ELLIPSIS if cut.endswith("*") else cut + ELLIPSIS


def first_sentence(text: object, limit: int = MAX_SUMMARY_CHARS) -> str:
    """The first sentence (or paragraph) of a description, on one line, at most `limit` chars."""
    if not isinstance(text, str):
        return ""
    raw = sanitize_doc(text)
    match = _SENTENCE_END.search(raw)
    head = raw[: match.start()] if match else raw
    return cut(_SPACES.sub(" ", head).strip(), limit)


def compact_note(doc: Sequence[str], *, limit: int = MAX_NOTE_CHARS) -> str:
    """One phrase from a property's doc lines (docs.schema_doc): meaning, constraints, default."""
    meaning = ""
    extras: list[str] = []
    for line in doc:
        if line.startswith(CONSTRAINTS_LABEL):
            extras.append(_constraints(line[len(CONSTRAINTS_LABEL) :].rstrip(".")))
        elif line.startswith("@default "):
            extras.append("default " + cut(one_line(line[len("@default ") :]), MAX_DEFAULT_CHARS))
        elif line.startswith("@deprecated"):
            extras.append("deprecated")
        elif not meaning and not line.startswith(_NOT_MEANING):
            meaning = first_sentence(line, limit).rstrip(".")
    text = "; ".join(part for part in [meaning, *extras] if part)
    return cut(one_line(text), limit)


def _constraints(text: str) -> str:
    """Constraints a caller must meet, minus a `pattern` that a `format` already says."""
    parts = text.split(", ")
    has_format = any(p.startswith("format: ") for p in parts)
    return ", ".join(p for p in parts if not (has_format and p.startswith("pattern: ")))


def print_compact(
    node: t.TypeNode,
    *,
    notes: bool = False,
    level: int = 0,
    inline: Mapping[str, t.TypeNode] | None = None,
) -> str:
    """Print `node` compactly; `Ref`s named in `inline` print as their type instead.

    With `notes`, an object whose properties have notes prints one property a line (lines
    after the first indented `level` steps); otherwise everything is on one line.
    """
    return _Printer(notes, inline or {}).type(node, level, 0)


class _Printer:
    def __init__(self, notes: bool, inline: Mapping[str, t.TypeNode]) -> None:
        self.notes = notes
        self.inline = inline

    def type(self, node: t.TypeNode, level: int, depth: int) -> str:
        if depth > MAX_COMPACT_DEPTH:
            return "unknown"
        kind = type(node)
        if kind is t.Keyword:
            assert isinstance(node, t.Keyword)
            return node.name
        if kind is t.Ref:
            assert isinstance(node, t.Ref)
            name = node.name
            target = self.inline.get(name)
            return name if target is None else self.type(target, level, depth + 1)
        if kind is t.Literal:
            assert isinstance(node, t.Literal)
            v = node.value
            if isinstance(v, bool):
                return "true" if v else "false"
            return string_literal(v) if isinstance(v, str) else number_literal(v)
        if kind is t.Array:
            assert isinstance(node, t.Array)
            return self.wrap(node.element, level, depth, postfix=True) + "[]"
        if kind is t.Tuple:
            assert isinstance(node, t.Tuple)
            parts = [
                self.wrap(e, level, depth, postfix=True) for e in node.elements[: node.required]
            ]
            parts += [
                self.wrap(e, level, depth, postfix=True) + "?"
                for e in node.elements[node.required :]
            ]
            if node.rest is not None:
                parts.append("..." + self.wrap(node.rest, level, depth, postfix=True) + "[]")
            return "[" + ", ".join(parts) + "]"
        if kind is t.Object:
            assert isinstance(node, t.Object)
            return self.object(node, level, depth)
        if kind is t.Union:
            assert isinstance(node, t.Union)
            return " | ".join(
                self.wrap(m, level, depth, postfix=False, in_union=True) for m in node.members
            )
        if kind is t.Intersection:
            assert isinstance(node, t.Intersection)
            return " & ".join(self.wrap(m, level, depth, postfix=False) for m in node.members)
        raise TypeError(f"not a type node: {node!r}")

    def resolved(self, node: t.TypeNode) -> t.TypeNode:
        seen = 0
        while type(node) is t.Ref and node.name in self.inline and seen <= MAX_COMPACT_DEPTH:
            node = self.inline[node.name]
            seen += 1
        return node

    def wrap(
        self, node: t.TypeNode, level: int, depth: int, *, postfix: bool, in_union: bool = False
    ) -> str:
        text = self.type(node, level, depth + 1)
        shown = self.resolved(node)
        needs = isinstance(shown, t.Union) or (
            isinstance(shown, t.Intersection) and (postfix or in_union)
        )
        if postfix and isinstance(shown, t.Literal) and text.startswith("-"):
            needs = True
        return f"({text})" if needs else text

    def object(self, node: t.Object, level: int, depth: int) -> str:
        if not node.properties and node.index is None and not node.patterns:
            return "{}"
        noted = [compact_note(p.doc) if self.notes and p.doc else "" for p in node.properties]
        multiline = any(noted)
        inner = level + 1 if multiline else level
        members: list[str] = []
        for prop in node.properties:
            ro = "readonly " if prop.readonly else ""
            opt = "?" if prop.optional else ""
            members.append(
                f"{ro}{property_key(prop.name)}{opt}: {self.type(prop.type, inner, depth + 1)}"
            )
        for key, typ in node.patterns:
            members.append(f"[k: {template_key(key)}]: {self.type(typ, inner, depth + 1)}")
        if node.index is not None:
            members.append(f"[k: string]: {self.type(node.index, inner, depth + 1)}")
        if not multiline:
            return "{ " + "; ".join(members) + " }"
        if len(members) == 1 and len(noted) == 1 and "\n" not in members[0]:
            # One field: its note fits on the line (`*/` in server text was escaped by sanitising).
            one = f"{{ {members[0]} /* {noted[0]} */ }}"
            if len(one) <= MAX_ONE_LINE_CHARS:
                return one
        pad = INDENT * inner
        lines = ["{"]
        for i, member in enumerate(members):
            note = noted[i] if i < len(noted) else ""
            lines.append(f"{pad}{member};" + (f" // {note}" if note else ""))
        lines.append(INDENT * level + "}")
        return "\n".join(lines)
