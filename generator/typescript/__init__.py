"""The project's own JSON Schema -> TypeScript translator (spec §6.2), one stage a module.

normalize (draft spellings -> one vocabulary) -> refs ($ref targets) -> translator (schema ->
`ast` nodes, soundness first, with its stages: shapes for the type algebra, patterns for
`patternProperties`, evaluated for `unevaluated*`, docs for doc comments, cycles for aliases
that reach themselves) -> printer (AST -> text, sanitised); compact prints the agent's
rendering. This module is the API the generator pipeline uses: `translate` for one schema
into a shared `NameScope`, and `render_standalone` for the `codemode-gen types` command.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import __version__
from codemode_gen.generator.names import pascal_case, unique_name
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.printer import doc_comment, print_type, sanitize_doc
from codemode_gen.generator.typescript.translator import translate_schema

__all__ = [
    "NameScope",
    "Translation",
    "TypeDecl",
    "doc_comment",
    "render_standalone",
    "sanitize_doc",
    "translate",
]

# Longest type name handed out (a server-chosen $defs key could be kilobytes long).
MAX_NAME_CHARS = 64

# Names a module-level `export type` must not take: shadowing these inside a `declare
# module` block would silently change what `Promise<…>`, `Record<…>` etc. mean in the
# generated function declarations next to them.
_RESERVED_TYPE_NAMES = frozenset(
    [
        "Array",
        "ArrayBuffer",
        "Awaited",
        "BigInt",
        "Boolean",
        "DataView",
        "Date",
        "Error",
        "Exclude",
        "Extract",
        "Function",
        "Infinity",
        "InstanceType",
        "Iterable",
        "Iterator",
        "JSON",
        "Map",
        "Math",
        "NaN",
        "NonNullable",
        "Number",
        "Object",
        "Omit",
        "Parameters",
        "Partial",
        "Pick",
        "Promise",
        "PromiseLike",
        "Readonly",
        "ReadonlyArray",
        "Record",
        "Required",
        "RegExp",
        "ReturnType",
        "Set",
        "String",
        "Symbol",
        "Uint8Array",
        "Uppercase",
        "Lowercase",
        "Capitalize",
        "Uncapitalize",
        "WeakMap",
        "WeakSet",
        "Window",
        "Document",
        "Element",
        "Node",
        "Event",
        "Console",
    ]
)


@dataclass(frozen=True)
class TypeDecl:
    name: str  # exported type name
    doc: tuple[str, ...]  # doc-comment lines, already sanitised
    text: str  # printed type expression; multi-line text is indented relative to column 0
    # The schema's own `title`, raw (never printed as is): lets a module that declares the
    # same type several times name the shared body after it (generator/shared_types.py).
    title: str | None = None
    # The type as an AST (for the compact agent rendering, which inlines and re-prints it);
    # an alias made by shared_types.share_identical_types holds a `Ref` to the shared body.
    node: t.TypeNode | None = None


class NameScope:
    """Unique type names within one .d.ts module (tool types and their helpers share it)."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken: set[str] = set(taken)

    def claim(self, wanted: str) -> str:
        """PascalCase `wanted`, make it a valid, non-shadowing identifier, dedupe (Foo, Foo2, …)."""
        base = pascal_case(str(wanted))[:MAX_NAME_CHARS] or "Type"
        if base[0].isdigit():
            base = "T" + base
        if base in _RESERVED_TYPE_NAMES:
            base += "Type"
        name = unique_name(base, self._taken)
        self._taken.add(name)
        return name

    def __contains__(self, name: object) -> bool:
        return name in self._taken


@dataclass
class Translation:
    root: str  # type expression for the root (normally the root decl's name)
    decls: list[TypeDecl] = field(default_factory=list)  # root decl first, then helpers
    warnings: list[str] = field(
        default_factory=list
    )  # "<pointer>: <keyword> cannot be represented; …"


def translate(
    schema: Any,
    name: str,
    scope: NameScope,
    *,
    doc: Sequence[str] = (),
    derived_from: Sequence[str] = (),
    closed: bool = False,
) -> Translation:
    """Translate `schema` into declarations; claims `name` (and helper names) in `scope`.

    The caller passes the name it wants for the root type; the name actually used (after
    PascalCasing and deduplication) is `result.root` and `result.decls[0].name`. Never
    raises on any JSON value: what cannot be expressed is `unknown` plus a warning.
    `derived_from` names what the root name was made from (the tool name): root titles that
    only respell it or the root name (`create_noteArguments`) are generated noise, not docs.
    """
    root_name = scope.claim(name)
    result = translate_schema(
        schema, root_name, scope.claim, [sanitize_doc(d) for d in doc], derived_from
    )
    titles = result.titles
    shut = t.close_objects if closed else _same
    root = shut(result.root)
    decls = [
        TypeDecl(
            root_name, _doc_lines(result.root_doc), print_type(root), titles.get(root_name), root
        )
    ]
    for n, node, d in result.helpers:
        node = shut(node)
        decls.append(TypeDecl(n, _doc_lines(d), print_type(node), titles.get(n), node))
    return Translation(root=root_name, decls=decls, warnings=list(result.warnings))


def _same(node: t.TypeNode) -> t.TypeNode:
    return node


def _doc_lines(lines: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for line in lines:
        out.extend(sanitize_doc(line).split("\n"))
    return tuple(out)


_HEADER_UNSAFE = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def render_standalone(
    schema: Any, name: str = "Root", *, source: str = "<schema>"
) -> tuple[str, list[str]]:
    """A whole .d.ts exporting `name` (and its helpers) for one schema; also the warnings."""
    # imported here: templating imports this package's printer (and only `types` needs it)
    from codemode_gen.generator.templating import render

    result = translate(schema, name, NameScope())
    text = render(
        "types.d.ts.j2",
        version=__version__,
        source=_HEADER_UNSAFE.sub("?", source),
        decls=result.decls,
    )
    return text, result.warnings
