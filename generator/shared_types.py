"""Identical type bodies printed once per module: later identical declarations become aliases.

A step of `generate` (generator/build.py) between building the tools' models and rendering the
module: servers repeat types (one `Note` as the result of create/get/update_note and again as a
`$defs` helper), and the module is agent context on every request. Only declarations of at
least MIN_SHARED_BODY_CHARS are shared; every exported name stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from codemode_gen.generator.names import is_identifier
from codemode_gen.generator.tool_model import ModuleScope, ToolModel
from codemode_gen.generator.typescript import TypeDecl
from codemode_gen.generator.typescript.ast import Ref

__all__ = ["MIN_SHARED_BODY_CHARS", "share_identical_types"]

# A declaration body shorter than this is printed again instead of becoming an alias of an
# identical declaration: `= string` or an empty open object (`{ [k: string]: unknown; }`)
# costs the agent's context no more than `= OtherToolInput` and is clearer. Longer bodies are
# printed once per module.
MIN_SHARED_BODY_CHARS = 40


def _shared_name(title: str | None, members: Sequence[TypeDecl], scope: ModuleScope) -> str | None:
    """The title identical declarations share, when it can name their body: already one of
    their names, or a free identifier the scope hands out unchanged (not a TS global)."""
    if title is None or not is_identifier(title):
        return None
    if any(m.name == title for m in members):
        return title
    if title in scope:
        return None
    return title if scope.reserve(title) == title else None


def share_identical_types(tools: Sequence[ToolModel], scope: ModuleScope) -> tuple[ToolModel, ...]:
    """Print each type body once per module: later identical declarations become aliases.

    The module is agent context on every request, and servers repeat types (one `Note` as the
    result of create/get/update_note, and again as a `$defs` helper). Every exported name stays
    (scripts reference `GetNoteOutput`); the body goes to the identical schemas' shared title
    when that is a usable name, else to the alphabetically first declaration. Doc lines the
    body already shows are dropped from the aliases; the rest (what differs) stay on them.
    """
    positions: dict[str, list[tuple[int, int]]] = {}
    for ti, tool in enumerate(tools):
        for di, decl in enumerate(tool.decls):
            if len(decl.text) >= MIN_SHARED_BODY_CHARS:
                positions.setdefault(decl.text, []).append((ti, di))
    replaced: dict[tuple[int, int], TypeDecl] = {}
    inserted: dict[tuple[int, int], TypeDecl] = {}  # a new body, printed before this position
    for text, where in positions.items():  # first-appearance order: deterministic
        if len(where) < 2:
            continue
        members = [tools[ti].decls[di] for ti, di in where]
        titles = {m.title for m in members}
        name = _shared_name(titles.pop() if len(titles) == 1 else None, members, scope)
        if name is None:
            name = min(m.name for m in members)
        body = next((m for m in members if m.name == name), None)
        if body is None:  # a new declaration named after the title; keep the docs all share
            common = tuple(line for line in members[0].doc if all(line in m.doc for m in members))
            body = TypeDecl(
                name, tuple(line for line in common if line != name), text, name, members[0].node
            )
            inserted[where[0]] = body
        for pos, member in zip(where, members, strict=True):
            if member is not body:
                doc = tuple(line for line in member.doc if line not in body.doc and line != name)
                replaced[pos] = TypeDecl(member.name, doc, name, member.title, Ref(name))
    if not replaced:
        return tuple(tools)
    out: list[ToolModel] = []
    for ti, tool in enumerate(tools):
        decls: list[TypeDecl] = []
        for di, decl in enumerate(tool.decls):
            if (ti, di) in inserted:
                decls.append(inserted[(ti, di)])
            decls.append(replaced.get((ti, di), decl))
        out.append(replace(tool, decls=tuple(decls)))
    return tuple(out)
