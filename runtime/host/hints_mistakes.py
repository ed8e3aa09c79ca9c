"""The explanations of the commonest mistakes of a failed script (§3.3.3 `hint`).

Each method of Analysis takes one kind of engine error (a property of undefined, not a function,
not iterable, not defined, JSON.parse's SyntaxError), finds the expression it is about with the
script model (hints_script.py) and, when the value came from a tool, says what the value was and
the expression that works (the table in runtime/host/hints.py's docstring) as a `Fix`. The text
it quotes is the agent's own (TypeScript included), cut to MAX_SNIPPET_CHARS.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codemode_gen.runtime import near_miss
from codemode_gen.runtime.host.hints_schema import (
    cut,
    json_text,
    properties,
    resolve,
    schema_at,
    schema_kind,
    shape,
)
from codemode_gen.runtime.host.hints_script import (
    ARRAY_METHODS,
    MAX_CANDIDATES,
    ScriptModel,
    Val,
    index_value,
    inside,
    tool_by_export,
)

#: Output-schema properties listed as "its fields" (the rest are counted).
MAX_FIELDS_LISTED = 12

#: Expressions that `.field` can follow without parentheses.
_PRIMARY = frozenset(
    {
        "identifier",
        "member_expression",
        "subscript_expression",
        "call_expression",
        "parenthesized_expression",
        "this",
        "array",
        "object",
        "string",
        "template_string",
    }
)


@dataclass(frozen=True)
class Fix:
    """Why the failing expression is wrong (appended to the message) and what to write."""

    why: str
    hint: str


class Analysis(ScriptModel):
    """The script model asked about one engine error: `None` when no known mistake explains it."""

    # ---- the mistakes ------------------------------------------------------------------------

    def undefined_property(self, prop: str, what: str, where: tuple[int, int] | None) -> Fix | None:
        """`X.prop` failed because X is undefined/null: why is X so?"""
        self._prepare()
        for node in self._candidates(
            where, ("member_expression", "subscript_expression"), chain=True
        ):
            if node.type == "member_expression":
                name = node.child_by_field_name("property")
                if name is None or self._node_text(name, self._src) != prop:
                    continue
            else:  # `x[k]`: the one read `k` from x, unless the index is not a literal
                index = index_value(self._src, node.child_by_field_name("index"))
                if index is not None and str(index) != prop:
                    continue
            obj = node.child_by_field_name("object")
            got = self.value(obj)
            if got.kind == "missing":
                fix = self._missing(got, node)
                if fix is not None:
                    return fix
            if got.kind == "value" and got.optional and got.path:
                return self._absent(got, node, prop, what)
        return None

    def not_a_function(self, where: tuple[int, int] | None) -> Fix | None:
        self._prepare()
        for node in self._candidates(where, ("call_expression",), chain=False, anchor="arguments"):
            callee = node.child_by_field_name("function")
            if callee is None or callee.type not in ("member_expression", "subscript_expression"):
                continue
            got = self.value(callee)
            if got.kind == "missing":
                fix = self._missing(got, node)
                if fix is not None:
                    return fix
        return None

    def not_iterable(self, where: tuple[int, int] | None) -> Fix | None:
        """`[a] = X`, `for (… of X)`, `...X` on a value that is no array. The engine points at the
        enclosing function rather than at the expression, so the whole script is searched."""
        self._prepare()
        sites = list(self._iteration_sites())
        if where is not None:
            sites.sort(key=lambda n: n.start_point[0] != where[0])
        for node in sites[:MAX_CANDIDATES]:
            got = self.value(node)
            if got.kind == "missing":
                fix = self._missing(got, node)
            elif got.kind in ("value", "promise"):
                fix = self._not_a_list(got, node)
            else:
                fix = None
            if fix is not None:
                return fix
        return None

    def not_defined(self, name: str) -> Fix | None:
        """A tool function or server namespace used without its import."""
        self._prepare()
        for spec, server in sorted(self._modules.items()):
            if name in (server.server_id, re.sub(r"\W", "_", server.server_id)):
                return Fix(
                    f"{name} is not imported; the server's functions are in the module '{spec}'",
                    f"import the module first: import * as {name} from '{spec}'",
                )
        exact = [
            (spec, tool)
            for spec, server in sorted(self._modules.items())
            if (tool := tool_by_export(server, name)) is not None
        ]
        if exact:
            spec, tool = exact[0]
            return Fix(
                f"{name} is a function of '{spec}' that the script did not import",
                f"import it first: import {{ {tool.export_name} }} from '{spec}'",
            )
        pool = {
            tool.export_name: spec
            for spec, server in sorted(self._modules.items())
            for tool in server.tools.values()
        }
        close = near_miss.closest_names(name, pool)
        if close:
            return Fix(
                f"{name} is not defined; the closest tool function is {close[0]} of '{pool[close[0]]}'",
                f"did you mean {close[0]}? import it first: import {{ {close[0]} }} from '{pool[close[0]]}'",
            )
        return None

    def json_parse(self, where: tuple[int, int] | None) -> Fix | None:
        """JSON.parse of a tool's plain text, of a value that is already an object, or of a Promise."""
        self._prepare()
        for node in self._candidates(where, ("call_expression",), chain=True):
            callee = node.child_by_field_name("function")
            if (
                callee is None
                or self._node_text(callee, self._src).replace(" ", "") != "JSON.parse"
            ):
                continue
            args = node.child_by_field_name("arguments")
            arg = args.named_children[0] if args is not None and args.named_children else None
            got = self.value(arg)
            text = self._snippet(arg)
            if got.kind == "promise" and got.origin is not None:
                return Fix(
                    f"{text} is a Promise: {got.origin.call} was not awaited",
                    f"await the call first: {self._rewrite(node, arg, f'await {text}')}",
                )
            if got.kind != "value" or got.origin is None:
                continue
            schema = resolve(got.schema, got.root)
            kind = schema_kind(schema)
            what = got.origin.call if not got.path else text
            if kind == "string" and not json_text(schema):
                return Fix(
                    f"{text} is plain text: {what} returns a string that is not JSON",
                    f"use the text as it is (no JSON.parse): {text}",
                )
            if kind in ("object", "array"):
                return Fix(
                    f"{text} is already {_article(kind)} ({shape(schema, got.root)}): {what} returns parsed data, not JSON text",
                    f"drop JSON.parse and use the value directly: {text}",
                )
        return None

    # ---- explanations ------------------------------------------------------------------------

    def _missing(self, got: Val, failing: Any) -> Fix | None:
        """`got` is `parent.prop` that the parent does not have (so it is undefined)."""
        parent, prop = got.parent, got.prop
        if parent is None or prop is None:
            return None
        base = self._snippet(parent.node) if parent.node is not None else "the value"
        operand = self._operand(parent.node) if parent.node is not None else base
        shown = f"{operand}.{prop}" if isinstance(prop, str) else f"{operand}[{prop}]"
        if parent.kind == "promise":
            call = parent.origin.call if parent.origin is not None else "the call"
            return Fix(
                f"{base} is a Promise, not the result: {call} was not awaited, so {shown} is undefined",
                f"await the call: {self._rewrite(failing, parent.node, f'(await {base})', got.node)}",
            )
        if parent.kind == "namespace":
            exports = (
                sorted(t.export_name for t in parent.server.tools.values()) if parent.server else []
            )
            close = near_miss.closest_names(str(prop), exports)
            module = parent.module or "the module"
            if close:
                return Fix(
                    f"'{module}' has no export '{prop}'",
                    f"did you mean {operand}.{close[0]}? {self._rewrite(failing, got.node, f'{operand}.{close[0]}', got.node)}",
                )
            return Fix(
                f"'{module}' has no export '{prop}'",
                f"call one of its functions: {near_miss.listed(exports)}",
            )
        if parent.kind != "value" or parent.origin is None:
            return None
        origin = parent.origin
        schema = resolve(parent.schema, parent.root)
        kind = schema_kind(schema)
        if kind == "string":
            if json_text(schema):
                inner = resolve(schema.get("contentSchema"), schema.get("contentSchema"))
                fields = properties(inner)
                note = (
                    f" (its JSON has the fields {self._fields(inner, inner)})"
                    if fields and prop not in fields
                    else ""
                )
                return Fix(
                    f"{base} is a string: {self._source_of(parent)} returns JSON text (as recorded), not "
                    f"{'an array' if schema_kind(inner) == 'array' else 'an object'}",
                    f"parse it first: {self._rewrite(failing, parent.node, f'JSON.parse({base})', got.node)}{note}",
                )
            return Fix(
                f"{base} is a string: {self._source_of(parent)} returns plain text (not JSON), which has no '{prop}'",
                f"use {base} as text, e.g. {operand}.includes(…) or {operand}.split('\\n'); it cannot be parsed as JSON",
            )
        boxed = origin.tool.box if not origin.tool.unboxed and not parent.path else None
        if kind == "object" and boxed is not None and prop != boxed.field:
            box = boxed.field
            return Fix(
                f"{base} is the object {origin.call} resolves to, {origin.returns}: its value is boxed in .{box}",
                f"use .{box}: {self._rewrite(failing, parent.node, f'{operand}.{box}', got.node)}",
            )
        if kind == "object":
            props = properties(schema)
            lists = [k for k, v in props.items() if schema_kind(resolve(v, parent.root)) == "array"]
            if isinstance(prop, int) or prop in ARRAY_METHODS:
                if len(lists) == 1:
                    return Fix(
                        f"{base} is an object ({shape(schema, parent.root)}), not an array: the list is in .{lists[0]}",
                        f"use .{lists[0]}: {self._rewrite(failing, parent.node, f'{operand}.{lists[0]}', got.node)}",
                    )
                return Fix(
                    f"{base} is an object ({shape(schema, parent.root)}), not an array",
                    f"use its fields ({self._fields(schema, parent.root)}) or Object.values({base})",
                )
            close = near_miss.closest_names(str(prop), props)
            what = f"{base}, {self._type_name(parent)},"
            if close:
                return Fix(
                    f"{what} has no field '{prop}' (its fields: {self._fields(schema, parent.root)})",
                    f"did you mean .{close[0]}? {self._rewrite(failing, got.node, f'{operand}.{close[0]}', got.node)}",
                )
            return Fix(
                f"{what} has no field '{prop}'",
                f"use one of its fields: {self._fields(schema, parent.root)}",
            )
        if kind == "array":
            item = resolve(schema.get("items"), parent.root)
            if isinstance(prop, str) and prop in properties(item):
                return Fix(
                    f"{base} is an array ({shape(schema, parent.root)}), not one item",
                    f"take an item or map over them: {operand}[0].{prop} or {operand}.map((x) => x.{prop})",
                )
            return Fix(
                f"{base} is an array ({shape(schema, parent.root)}), which has no '{prop}'",
                f"iterate over it (for (const x of {base})) or use its items' fields: {self._fields(item, parent.root)}",
            )
        return None

    def _absent(self, got: Val, failing: Any, prop: str, what: str) -> Fix | None:
        """`got` is an optional (or nullable) field and was absent (or null) at run time."""
        text = self._snippet(got.node) if got.node is not None else "the field"
        parent_type = self._type_name(
            Val("value", origin=got.origin, schema=None, path=got.path[:-1])
        )
        return Fix(
            f"{text} is {what} here: .{got.path[-1]} may be absent or null in {parent_type}",
            f"check it before use: {self._rewrite(failing, got.node, f'{text}?')}"
            if got.node is not None
            else f"check the field before reading '{prop}' from it",
        )

    def _not_a_list(self, got: Val, node: Any) -> Fix | None:
        text = self._snippet(node)
        operand = self._operand(node)
        if got.kind == "promise":
            call = got.origin.call if got.origin is not None else "the call"
            return Fix(
                f"{text} is a Promise: {call} was not awaited",
                f"await it: {self._rewrite(node, node, f'(await {text})')}",
            )
        if got.origin is None:
            return None
        schema = resolve(got.schema, got.root)
        if schema_kind(schema) != "object":
            return None
        box = got.origin.tool.box if not got.origin.tool.unboxed and not got.path else None
        if box is not None:
            return Fix(
                f"{text} is the object {got.origin.call} resolves to, {got.origin.returns}, not a list: its value is boxed in .{box.field}",
                f"use .{box.field}: {self._rewrite(node, node, f'{operand}.{box.field}')}",
            )
        lists = [
            k for k, v in properties(schema).items() if schema_kind(resolve(v, got.root)) == "array"
        ]
        if len(lists) == 1:
            return Fix(
                f"{text} is an object ({shape(schema, got.root)}), not a list: the list is in .{lists[0]}",
                f"use .{lists[0]}: {self._rewrite(node, node, f'{operand}.{lists[0]}')}",
            )
        return Fix(
            f"{text} is an object ({shape(schema, got.root)}), not a list",
            f"iterate over Object.values({text}) or use its fields: {self._fields(schema, got.root)}",
        )

    # ---- helpers -----------------------------------------------------------------------------

    def _source_of(self, val: Val) -> str:
        """`notes.stats()` for a tool's whole result, `the field .x of notes.get_note()` for a part."""
        assert val.origin is not None
        if not val.path:
            return val.origin.call
        return f"the field {_path_text(val.path)} of {val.origin.call}'s result"

    def _type_name(self, val: Val) -> str:
        """`the result of notes.get_note() (Note)`, `an item of .result from notes.list_notes()
        (Note)`, `the field .byTag of notes.stats()`: where a value of a tool's result is."""
        if val.origin is None:
            return "the value"
        schema = (
            val.schema
            if val.schema is not None
            else schema_at(val.origin.tool.output_schema, val.path)
        )
        title = schema.get("title") if isinstance(schema, Mapping) else None
        resolved = resolve(schema, val.origin.tool.output_schema)
        title = title or (resolved.get("title") if isinstance(resolved, Mapping) else None)
        named = (
            f" ({title})"
            if isinstance(title, str) and re.fullmatch(r"[A-Z]\w{0,40}", title)
            else ""
        )
        path = val.path
        if not path:
            return f"the result of {val.origin.call}{named}"
        if isinstance(path[-1], int):
            return f"an item of {_path_text(path[:-1]) or 'the list'} from {val.origin.call}{named}"
        return f"the field {_path_text(path)} of {val.origin.call}{named}"

    def _fields(self, schema: Any, root: Any) -> str:
        props = sorted(properties(resolve(schema, root)))
        shown = ", ".join(props[:MAX_FIELDS_LISTED])
        return (
            shown
            + (
                f" and {len(props) - MAX_FIELDS_LISTED} more"
                if len(props) > MAX_FIELDS_LISTED
                else ""
            )
            or "none"
        )

    def _operand(self, node: Any) -> str:
        """The snippet of `node`, in parentheses unless it binds tighter than `.x` (`(await f()).x`)."""
        text = self._snippet(node)
        if node is None or node.type in _PRIMARY:
            return text
        return f"({text})"

    def _snippet(self, node: Any) -> str:
        """The agent's own text of `node` (TypeScript included), on one line, cut short."""
        if node is None:
            return "the value"
        return cut(" ".join(self._node_text(node, self._text).split()))

    def _rewrite(self, whole: Any, part: Any, replacement: str, context: Any = None) -> str:
        """The agent's text of `whole` with `part` (inside it) replaced: the corrected expression.
        When `part` is elsewhere (bound on another line: `const first = all[0]`), the text of
        `context` (the expression around `part` there) is rewritten instead."""
        if part is not None and whole is not None and not inside(part, whole):
            whole = context if context is not None and inside(part, context) else None
        if part is None or whole is None:
            return cut(replacement)
        before = self._text[whole.start_byte : part.start_byte].decode("utf-8", "replace")
        after = self._text[part.end_byte : whole.end_byte].decode("utf-8", "replace")
        if replacement.endswith("?") and after.startswith(
            "!"
        ):  # TypeScript's `x!.y` becomes `x?.y`
            after = after[1:]
        return cut(" ".join(f"{before}{replacement}{after}".split()))


def _path_text(path: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _article(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind
