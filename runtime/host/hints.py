"""Hints that name the fix for the commonest mistakes of a failed script (§3.3.3 `hint`).

QuickJS says `TypeError: not a function at agent.js:3:18` where the agent wrote
`notes.map(...)` on a tool result boxed as `{ result: Note[] }`. The host knows more than the
engine: the script's source, which tool each value came from and that tool's output schema
(the run's catalog, out/'s manifest: boxed results, text results and whether their recordings
were JSON, object fields). So after a run fails with UNCAUGHT_EXCEPTION (never on a successful
run: this costs them nothing), `explain` reads the failing line, finds the expression the error
is about, follows it back to the tool call its value came from (`const notes = await
list_notes(); notes.map(...)`: `notes` is bound to a call of notes.list_notes) and rewrites the
diagnostic's message and hint to say what the value was and the expression that works:

| mistake                                  | the hint says                                     |
|------------------------------------------|---------------------------------------------------|
| array method / index on a boxed result   | the value is in `.result`: `notes.result.map(…)`  |
| property of a JSON text result           | `JSON.parse(s).byTag`                             |
| property of a plain text result          | it is text: use the string                        |
| field the result type does not have      | the closest field names: `n.tags`                 |
| array method on an object with one list  | the list is in `.events`                          |
| a Promise used as the value (no await)   | `(await notes.list_notes()).result`               |
| a name the module does not export        | the closest export: `notes.list_notes`            |
| an optional field that was absent        | check it first: `n.done?.x`                       |
| a tool function used without its import  | `import { list_notes } from "@codemode/servers/…"`|
| JSON.parse of text or of an object       | drop JSON.parse / the text is not JSON            |

The analysis is static and cheap: one tree-sitter parse of the script (the TypeScript grammar
runtime/host/tsinput.py uses; types were erased keeping every position, so the engine's line:column
and the parse agree), a table of bindings (imports, declarations with destructuring,
assignments, for-of variables, callback parameters of array methods), and a walk of the
output schema. It is scope-insensitive (the nearest binding before the use wins) and bounded by
the named constants below. It never fails a run: on any exception the diagnostic stays as the
sandbox made it. Nothing here needs Node or a type checker.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codemode_gen.generator.manifest import module_specifier
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import jsonsafe, near_miss
from codemode_gen.runtime.host.catalog import Catalog, ServerView, ToolView
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS

__all__ = ["explain", "needs_explaining"]

log = logging.getLogger(__name__)

#: Scripts longer than this are not analysed (the diagnostic keeps the engine's text): bounds
#: the parse and the binding table built after a failed run.
MAX_SCRIPT_CHARS = 100_000
#: Nodes of the script visited to build the binding table; bounds the walk for a huge script
#: made of tiny statements.
MAX_NODES = 100_000
#: Bindings followed from a use back to a tool call (`a = b; b = c; ...`); bounds a chain (or a
#: cycle: `a = b; b = a`) of aliases.
MAX_BINDING_HOPS = 16
#: `$ref`s followed inside one output schema; bounds a schema whose refs loop.
MAX_REF_HOPS = 16
#: Characters of the script's own text quoted in a message or hint (longer ones are cut).
MAX_SNIPPET_CHARS = 80
#: Candidate expressions examined per error (the failing line's, then the whole script's).
MAX_CANDIDATES = 200
#: Output-schema properties listed as "its fields" (the rest are counted).
MAX_FIELDS_LISTED = 12

#: Methods a value of each kind has, so that calling one is never reported as a mistake.
ARRAY_METHODS = frozenset({
    "at", "concat", "copyWithin", "entries", "every", "fill", "filter", "find", "findIndex", "findLast",
    "findLastIndex", "flat", "flatMap", "forEach", "includes", "indexOf", "join", "keys", "lastIndexOf",
    "map", "pop", "push", "reduce", "reduceRight", "reverse", "shift", "slice", "some", "sort", "splice",
    "toLocaleString", "toReversed", "toSorted", "toSpliced", "toString", "unshift", "values", "with",
    "length",
})
STRING_METHODS = frozenset({
    "at", "charAt", "charCodeAt", "codePointAt", "concat", "endsWith", "includes", "indexOf", "isWellFormed",
    "lastIndexOf", "localeCompare", "match", "matchAll", "normalize", "padEnd", "padStart", "repeat",
    "replace", "replaceAll", "search", "slice", "split", "startsWith", "substring", "substr", "toLocaleLowerCase",
    "toLocaleUpperCase", "toLowerCase", "toString", "toUpperCase", "toWellFormed", "trim", "trimEnd",
    "trimStart", "valueOf", "length",
})
OBJECT_METHODS = frozenset({
    "constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString", "toString",
    "valueOf", "toJSON",
})
PROMISE_METHODS = frozenset({"then", "catch", "finally"})
#: Array methods whose callback gets an item as the given parameters (reduce: the second).
CALLBACK_ITEM_PARAMS: Mapping[str, tuple[int, ...]] = {
    "map": (0,), "filter": (0,), "forEach": (0,), "find": (0,), "findIndex": (0,), "findLast": (0,),
    "findLastIndex": (0,), "some": (0,), "every": (0,), "flatMap": (0,), "reduce": (1,),
    "reduceRight": (1,), "sort": (0, 1), "toSorted": (0, 1),
}

#: Expressions that `.field` can follow without parentheses.
_PRIMARY = frozenset({
    "identifier", "member_expression", "subscript_expression", "call_expression", "parenthesized_expression",
    "this", "array", "object", "string", "template_string",
})

_ERROR_LINE = re.compile(r"^Uncaught (?P<name>[A-Za-z]*Error): (?P<message>.*)$")
_READ = re.compile(r"^cannot (?:read|set) property '(?P<prop>[^']*)' of (?P<what>undefined|null)$")
_READ_V8 = re.compile(r"^Cannot (?:read|set) properties of (?P<what>undefined|null) \((?:reading|setting) '(?P<prop>[^']*)'\)$")
_NOT_FUNCTION = re.compile(r"^(?:.* )?is not a function$|^not a function$")
_NOT_ITERABLE = re.compile(r"not iterable")
_NOT_DEFINED = re.compile(r"^'?(?P<name>[A-Za-z_$][\w$]*)'? is not defined$")


def needs_explaining(diagnostics: Iterable[Mapping[str, Any]]) -> bool:
    """Whether `explain` has anything to look at (a run that did not fail this way: no)."""
    return any(
        d.get("code") == diag.DiagnosticCode.UNCAUGHT_EXCEPTION and d.get("severity") == "error" and not d.get("errorClass")
        for d in diagnostics
    )


def explain(
    diagnostics: Sequence[dict[str, Any]], code: str, script: str, catalog: Catalog
) -> list[dict[str, Any]]:
    """`diagnostics` with an UNCAUGHT_EXCEPTION that one of the known mistakes explains given a
    message and hint that name the fix. `code` is the agent's source, `script` what ran (its
    TypeScript types erased: same positions); `catalog` is the run's."""
    out = list(diagnostics)
    for i, d in enumerate(out):
        if d.get("code") != diag.DiagnosticCode.UNCAUGHT_EXCEPTION or d.get("severity") != "error" or d.get("errorClass"):
            continue
        try:
            better = _explain(d, code, script, catalog)
        except Exception as exc:  # a hint is a courtesy: the engine's diagnostic stands
            log.debug("no hint for %s: %s: %s", d.get("message", "")[:80], type(exc).__name__, exc)
            better = None
        if better is not None:
            out[i] = better
    return out


@dataclass(frozen=True)
class Fix:
    """Why the failing expression is wrong (appended to the message) and what to write."""

    why: str
    hint: str


def _explain(d: Mapping[str, Any], code: str, script: str, catalog: Catalog) -> dict[str, Any] | None:
    message = str(d.get("message") or "")
    first, _, frames = message.partition("\n")
    m = _ERROR_LINE.match(first)
    if m is None or len(script) > MAX_SCRIPT_CHARS or (len(code) != len(script) and not _same_bytes(code, script)):
        return None
    name, text = m.group("name"), m.group("message")
    where = _position(d.get("path"))
    analysis = _Analysis(code, script, catalog)
    fix: Fix | None = None
    read = _READ.match(text) or _READ_V8.match(text)
    if name == "TypeError" and read is not None and read.group("prop").startswith("Symbol."):
        fix = analysis.not_iterable(where)  # `for (… of undefined)`
    elif name == "TypeError" and read is not None:
        fix = analysis.undefined_property(read.group("prop"), read.group("what"), where)
    elif name == "TypeError" and _NOT_FUNCTION.match(text):
        fix = analysis.not_a_function(where)
    elif name == "TypeError" and _NOT_ITERABLE.search(text):
        fix = analysis.not_iterable(where)
    elif name == "ReferenceError" and (ref := _NOT_DEFINED.match(text)) is not None:
        fix = analysis.not_defined(ref.group("name"))
    elif name == "SyntaxError":  # at run time: JSON.parse
        fix = analysis.json_parse(where)
    if fix is None:
        return None
    better = dict(d)
    better["message"] = jsonsafe.clip(f"{first} — {fix.why}" + (f"\n{frames}" if frames else ""), MAX_DIAGNOSTIC_CHARS)
    better["hint"] = jsonsafe.clip(fix.hint, MAX_DIAGNOSTIC_CHARS)
    return better


def _same_bytes(code: str, script: str) -> bool:
    """Whether the source and what ran have the same UTF-8 length (erasing keeps it)."""
    return len(code.encode("utf-8", "surrogatepass")) == len(script.encode("utf-8", "surrogatepass"))


def _position(path: Any) -> tuple[int, int] | None:
    """(row, byte column), both from 0, of a diagnostic's `line:column` path."""
    if not isinstance(path, str):
        return None
    line, _, col = path.partition(":")
    if not line.isdecimal():
        return None
    return int(line) - 1, (int(col) - 1 if col.isdecimal() else -1)


# ------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class _Origin:
    """The tool call a value came from."""

    server: ServerView
    tool: ToolView

    @property
    def call(self) -> str:
        return f"{self.server.server_id}.{self.tool.export_name}()"

    @property
    def returns(self) -> str:
        """The tool's result type as its declaration writes it (else from the schema)."""
        declared = _declared_return(self.tool.declaration)
        return declared if declared else _shape(self.tool.output_schema, self.tool.output_schema)


@dataclass(frozen=True)
class _Val:
    """What an expression of the script evaluates to, as far as the static analysis knows.

    kind: "value" (part of a tool's result, `schema` describing it), "promise" (`inner` is what
    it resolves to), "namespace" (a server module), "toolfn" (a tool's function), "missing"
    (`parent` has no `prop`: undefined), "unknown"."""

    kind: str
    node: Any = None  # the expression, where the script has it
    origin: _Origin | None = None
    schema: Any = None
    root: Any = None  # the schema `$ref`s resolve against
    path: tuple[str | int, ...] = ()  # accessors from the tool's result to this value
    optional: bool = False  # a field the type does not require, or one that may be null
    inner: _Val | None = None
    module: str | None = None
    server: ServerView | None = None
    parent: _Val | None = None
    prop: str | int | None = None


_UNKNOWN = _Val("unknown")


@dataclass
class _Binding:
    """`name` bound at byte `at` to `source` (an expression node), then `accesses` into it
    (destructuring, for-of items, callback items); or to an import."""

    at: int
    source: Any = None
    accesses: tuple[tuple[str, Any], ...] = ()
    value: _Val | None = None  # imports: known without evaluating anything


@dataclass
class _Analysis:
    code: str
    script: str
    catalog: Catalog
    _src: bytes = b""
    _text: bytes = b""
    _root: Any = None
    _bindings: dict[str, list[_Binding]] = field(default_factory=dict)
    _modules: dict[str, ServerView] = field(default_factory=dict)
    _ready: bool = False

    # ---- set-up ------------------------------------------------------------------------------

    def _prepare(self) -> None:
        if self._ready:
            return
        from codemode_gen.runtime.host.tsinput import _parser

        self._ready = True
        self._src = self.script.encode("utf-8", "surrogatepass")
        self._text = self.code.encode("utf-8", "surrogatepass")
        self._root = _parser().parse(self._src).root_node
        self._modules = {module_specifier(sid): view for sid, view in self.catalog.servers.items()}
        for seen, node in enumerate(_walk(self._root)):
            if seen >= MAX_NODES:
                break
            self._index(node)

    def _index(self, node: Any) -> None:
        kind = node.type
        if kind == "import_statement":
            self._index_import(node)
        elif kind == "variable_declarator":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None:
                self._bind_pattern(name, value, ())
        elif kind == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and left.type == "identifier":
                self._bind(left, _Binding(left.start_byte, right))
        elif kind in ("for_in_statement", "for_of_statement"):
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and any(c.type == "of" for c in node.children):
                self._bind_pattern(left, right, (("item", None),))
        elif kind in ("arrow_function", "function_expression", "function"):
            self._index_callback(node)

    def _index_import(self, node: Any) -> None:
        source = node.child_by_field_name("source")
        if source is None:
            return
        module = _string_value(self._src, source)
        server = self._modules.get(module or "")
        for clause in node.named_children:
            if clause.type != "import_clause":
                continue
            for part in clause.named_children:
                if part.type == "namespace_import":
                    ident = next((c for c in part.named_children if c.type == "identifier"), None)
                    if ident is not None:
                        ns = _Val("namespace", module=module, server=server)
                        self._bind(ident, _Binding(ident.start_byte, value=ns))
                elif part.type == "named_imports":
                    for spec in part.named_children:
                        if spec.type != "import_specifier":
                            continue
                        name = spec.child_by_field_name("name")
                        alias = spec.child_by_field_name("alias") or name
                        if name is None or alias is None or server is None:
                            continue
                        tool = _tool_by_export(server, self._node_text(name, self._src))
                        if tool is not None:
                            fn = _Val("toolfn", origin=_Origin(server, tool))
                            self._bind(alias, _Binding(alias.start_byte, value=fn))

    def _index_callback(self, fn: Any) -> None:
        """Parameters of a callback given to an array method (`xs.map(n => n.title)`): items."""
        args = fn.parent
        call = args.parent if args is not None else None
        if args is None or call is None or args.type != "arguments" or call.type != "call_expression":
            return
        if args.named_children[:1] != [fn]:
            return
        callee = call.child_by_field_name("function")
        if callee is None or callee.type != "member_expression":
            return
        prop = callee.child_by_field_name("property")
        items = CALLBACK_ITEM_PARAMS.get(self._node_text(prop, self._src) if prop is not None else "")
        target = callee.child_by_field_name("object")
        if items is None or target is None:
            return
        single = fn.child_by_field_name("parameter")
        params = [single] if single is not None else []
        listed = fn.child_by_field_name("parameters")
        if listed is not None:
            for p in listed.named_children:
                params.append(p.child_by_field_name("pattern") or p)
        for i in items:
            if i < len(params) and params[i] is not None:
                self._bind_pattern(params[i], target, (("item", None),))

    def _bind_pattern(self, pattern: Any, source: Any, accesses: tuple[tuple[str, Any], ...]) -> None:
        kind = pattern.type
        if kind in ("identifier", "shorthand_property_identifier_pattern"):
            self._bind(pattern, _Binding(pattern.start_byte, source, accesses))
        elif kind == "array_pattern":
            for i, element in enumerate(pattern.named_children):
                self._bind_pattern(element, source, (*accesses, ("index", i)))
        elif kind == "object_pattern":
            for element in pattern.named_children:
                if element.type == "shorthand_property_identifier_pattern":
                    name = self._node_text(element, self._src)
                    self._bind(element, _Binding(element.start_byte, source, (*accesses, ("prop", name))))
                elif element.type == "pair_pattern":
                    key, value = element.child_by_field_name("key"), element.child_by_field_name("value")
                    if key is not None and value is not None:
                        self._bind_pattern(value, source, (*accesses, ("prop", _key_text(self._src, key))))
                elif element.type == "object_assignment_pattern":
                    left = element.child_by_field_name("left")
                    if left is not None:
                        self._bind_pattern(left, source, accesses)
        elif kind == "assignment_pattern":
            left = pattern.child_by_field_name("left")
            if left is not None:
                self._bind_pattern(left, source, accesses)

    def _bind(self, ident: Any, binding: _Binding) -> None:
        self._bindings.setdefault(self._node_text(ident, self._src), []).append(binding)

    # ---- evaluation --------------------------------------------------------------------------

    def value(self, node: Any, hops: int = 0) -> _Val:
        """What `node` evaluates to (see _Val); `unknown` whenever the analysis cannot tell."""
        if node is None or hops > MAX_BINDING_HOPS:
            return _UNKNOWN
        kind = node.type
        if kind == "parenthesized_expression":
            inner = node.named_children[-1] if node.named_children else None
            return _at(self.value(inner, hops), node)
        if kind == "await_expression":
            inner = self.value(node.named_children[0] if node.named_children else None, hops)
            if inner.kind == "promise" and inner.inner is not None:
                return _at(inner.inner, node)
            return _at(inner, node)
        if kind == "call_expression":
            return self._call(node, hops)
        if kind == "identifier":
            return self._identifier(node, hops)
        if kind == "member_expression":
            obj = self.value(node.child_by_field_name("object"), hops)
            prop = node.child_by_field_name("property")
            return self.member(obj, self._node_text(prop, self._src) if prop is not None else "", node)
        if kind == "subscript_expression":
            obj = self.value(node.child_by_field_name("object"), hops)
            return self.member(obj, _index_value(self._src, node.child_by_field_name("index")), node)
        return _at(_UNKNOWN, node)

    def _call(self, node: Any, hops: int) -> _Val:
        callee = node.child_by_field_name("function")
        if callee is not None and callee.type == "import":  # `await import("@codemode/servers/x")`
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            module = _string_value(self._src, first) if first is not None else None
            if module is not None:
                ns = _Val("namespace", module=module, server=self._modules.get(module))
                return _Val("promise", node=node, inner=ns)
            return _at(_UNKNOWN, node)
        fn = self.value(callee, hops)
        if fn.kind == "toolfn" and fn.origin is not None:
            schema = fn.origin.tool.output_schema
            result = _Val("value", origin=fn.origin, schema=schema, root=schema)
            return _Val("promise", node=node, origin=fn.origin, inner=result)
        return _at(_UNKNOWN, node)

    def _identifier(self, node: Any, hops: int) -> _Val:
        name = self._node_text(node, self._src)
        found = [b for b in self._bindings.get(name, ()) if b.at < node.start_byte or b.value is not None]
        if not found:
            return _at(_UNKNOWN, node)
        binding = max(found, key=lambda b: b.at if b.value is None else -1)
        if binding.value is not None:
            return _at(binding.value, node)
        got = self.value(binding.source, hops + 1)
        for how, key in binding.accesses:
            if got.kind in ("unknown", "missing"):
                return _at(_UNKNOWN, node)
            got = self.member(got, key, None) if how in ("prop", "index") else self.item(got)
        # A missing value keeps the expression that made it (`all[0]` where `first` was bound):
        # the hint rewrites that one.
        return got if got.kind == "missing" else _at(got, node)

    def member(self, obj: _Val, prop: str | int | None, node: Any) -> _Val:
        """`obj.prop` / `obj[prop]` (`prop` None: an index the analysis cannot read)."""
        if obj.kind == "namespace":
            if obj.server is None or not isinstance(prop, str):
                return _at(_UNKNOWN, node)
            tool = _tool_by_export(obj.server, prop)
            if tool is not None:
                return _Val("toolfn", node=node, origin=_Origin(obj.server, tool))
            if prop.startswith("__") or prop in OBJECT_METHODS:
                return _at(_UNKNOWN, node)
            return _Val("missing", node=node, parent=obj, prop=prop)
        if obj.kind == "promise":
            if prop in PROMISE_METHODS or prop in OBJECT_METHODS or prop is None:
                return _at(_UNKNOWN, node)
            return _Val("missing", node=node, parent=obj, prop=prop)
        if obj.kind != "value" or prop is None:
            return _at(_UNKNOWN, node)
        schema = _resolve(obj.schema, obj.root)
        kind = _kind(schema)
        if kind == "string":
            if isinstance(prop, int) or prop in STRING_METHODS or prop in OBJECT_METHODS:
                return _at(_UNKNOWN, node)
            return _Val("missing", node=node, parent=obj, prop=prop)
        if kind == "array":
            if isinstance(prop, int) or (isinstance(prop, str) and prop.isdecimal()):
                return _at(self.item(obj), node)
            if prop in ARRAY_METHODS or prop in OBJECT_METHODS:
                return _at(_UNKNOWN, node)
            return _Val("missing", node=node, parent=obj, prop=prop)
        if kind == "object":
            props = _properties(schema)
            key = str(prop)
            if key in props:
                sub = props[key]
                listed = schema.get("required")
                required: list[Any] = listed if isinstance(listed, list) else []
                optional = key not in required or _nullable(_resolve(sub, obj.root))
                return _Val("value", node=node, origin=obj.origin, schema=sub, root=obj.root,
                            path=(*obj.path, prop), optional=optional)
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return _Val("value", node=node, origin=obj.origin, schema=extra, root=obj.root,
                            path=(*obj.path, prop), optional=True)
            if not props or "patternProperties" in schema or key in OBJECT_METHODS:
                return _at(_UNKNOWN, node)
            return _Val("missing", node=node, parent=obj, prop=prop)
        return _at(_UNKNOWN, node)

    def item(self, obj: _Val) -> _Val:
        """An item of an array value (for-of, callbacks, `[first] = ...`)."""
        if obj.kind != "value":
            return _UNKNOWN
        schema = _resolve(obj.schema, obj.root)
        if _kind(schema) != "array" or not isinstance(schema.get("items"), Mapping):
            return _UNKNOWN
        return _Val("value", origin=obj.origin, schema=schema["items"], root=obj.root, path=(*obj.path, 0))

    # ---- the mistakes ------------------------------------------------------------------------

    def undefined_property(self, prop: str, what: str, where: tuple[int, int] | None) -> Fix | None:
        """`X.prop` failed because X is undefined/null: why is X so?"""
        self._prepare()
        for node in self._candidates(where, ("member_expression", "subscript_expression"), chain=True):
            if node.type == "member_expression":
                name = node.child_by_field_name("property")
                if name is None or self._node_text(name, self._src) != prop:
                    continue
            else:  # `x[k]`: the one read `k` from x, unless the index is not a literal
                index = _index_value(self._src, node.child_by_field_name("index"))
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
        exact = [(spec, tool) for spec, server in sorted(self._modules.items())
                 if (tool := _tool_by_export(server, name)) is not None]
        if exact:
            spec, tool = exact[0]
            return Fix(
                f"{name} is a function of '{spec}' that the script did not import",
                f"import it first: import {{ {tool.export_name} }} from '{spec}'",
            )
        pool = {tool.export_name: spec for spec, server in sorted(self._modules.items()) for tool in server.tools.values()}
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
            if callee is None or self._node_text(callee, self._src).replace(" ", "") != "JSON.parse":
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
            schema = _resolve(got.schema, got.root)
            kind = _kind(schema)
            what = got.origin.call if not got.path else text
            if kind == "string" and not _json_text(schema):
                return Fix(
                    f"{text} is plain text: {what} returns a string that is not JSON",
                    f"use the text as it is (no JSON.parse): {text}",
                )
            if kind in ("object", "array"):
                return Fix(
                    f"{text} is already {_article(kind)} ({_shape(schema, got.root)}): {what} returns parsed data, not JSON text",
                    f"drop JSON.parse and use the value directly: {text}",
                )
        return None

    # ---- explanations ------------------------------------------------------------------------

    def _missing(self, got: _Val, failing: Any) -> Fix | None:
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
            exports = sorted(t.export_name for t in parent.server.tools.values()) if parent.server else []
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
        schema = _resolve(parent.schema, parent.root)
        kind = _kind(schema)
        if kind == "string":
            if _json_text(schema):
                inner = _resolve(schema.get("contentSchema"), schema.get("contentSchema"))
                fields = _properties(inner)
                note = f" (its JSON has the fields {self._fields(inner, inner)})" if fields and prop not in fields else ""
                return Fix(
                    f"{base} is a string: {self._source_of(parent)} returns JSON text (as recorded), not "
                    f"{'an array' if _kind(inner) == 'array' else 'an object'}",
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
            props = _properties(schema)
            lists = [k for k, v in props.items() if _kind(_resolve(v, parent.root)) == "array"]
            if isinstance(prop, int) or prop in ARRAY_METHODS:
                if len(lists) == 1:
                    return Fix(
                        f"{base} is an object ({_shape(schema, parent.root)}), not an array: the list is in .{lists[0]}",
                        f"use .{lists[0]}: {self._rewrite(failing, parent.node, f'{operand}.{lists[0]}', got.node)}",
                    )
                return Fix(
                    f"{base} is an object ({_shape(schema, parent.root)}), not an array",
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
            item = _resolve(schema.get("items"), parent.root)
            if isinstance(prop, str) and prop in _properties(item):
                return Fix(
                    f"{base} is an array ({_shape(schema, parent.root)}), not one item",
                    f"take an item or map over them: {operand}[0].{prop} or {operand}.map((x) => x.{prop})",
                )
            return Fix(
                f"{base} is an array ({_shape(schema, parent.root)}), which has no '{prop}'",
                f"iterate over it (for (const x of {base})) or use its items' fields: {self._fields(item, parent.root)}",
            )
        return None

    def _absent(self, got: _Val, failing: Any, prop: str, what: str) -> Fix | None:
        """`got` is an optional (or nullable) field and was absent (or null) at run time."""
        text = self._snippet(got.node) if got.node is not None else "the field"
        parent_type = self._type_name(_Val("value", origin=got.origin, schema=None, path=got.path[:-1]))
        return Fix(
            f"{text} is {what} here: .{got.path[-1]} may be absent or null in {parent_type}",
            f"check it before use: {self._rewrite(failing, got.node, f'{text}?')}" if got.node is not None
            else f"check the field before reading '{prop}' from it",
        )

    def _not_a_list(self, got: _Val, node: Any) -> Fix | None:
        text = self._snippet(node)
        operand = self._operand(node)
        if got.kind == "promise":
            call = got.origin.call if got.origin is not None else "the call"
            return Fix(f"{text} is a Promise: {call} was not awaited", f"await it: {self._rewrite(node, node, f'(await {text})')}")
        if got.origin is None:
            return None
        schema = _resolve(got.schema, got.root)
        if _kind(schema) != "object":
            return None
        box = got.origin.tool.box if not got.origin.tool.unboxed and not got.path else None
        if box is not None:
            return Fix(
                f"{text} is the object {got.origin.call} resolves to, {got.origin.returns}, not a list: its value is boxed in .{box.field}",
                f"use .{box.field}: {self._rewrite(node, node, f'{operand}.{box.field}')}",
            )
        lists = [k for k, v in _properties(schema).items() if _kind(_resolve(v, got.root)) == "array"]
        if len(lists) == 1:
            return Fix(
                f"{text} is an object ({_shape(schema, got.root)}), not a list: the list is in .{lists[0]}",
                f"use .{lists[0]}: {self._rewrite(node, node, f'{operand}.{lists[0]}')}",
            )
        return Fix(
            f"{text} is an object ({_shape(schema, got.root)}), not a list",
            f"iterate over Object.values({text}) or use its fields: {self._fields(schema, got.root)}",
        )

    # ---- helpers -----------------------------------------------------------------------------

    def _candidates(self, where: tuple[int, int] | None, kinds: tuple[str, ...], *, chain: bool,
                    anchor: str | None = None) -> list[Any]:
        """Nodes of `kinds` the error may be about: those at the reported position first (the
        engine reports a member chain at its start, a call at its `(`; innermost first when
        `chain`: `a.b.c` fails at `.b` before `.c` is read), then the others on its line."""
        if where is None:
            return []
        row, col = where
        exact: list[Any] = []
        line: list[Any] = []
        for seen, node in enumerate(_walk(self._root)):
            if seen >= MAX_NODES or len(exact) + len(line) >= MAX_CANDIDATES:
                break
            if node.type not in kinds or not node.start_point[0] <= row <= node.end_point[0]:
                continue
            at = node.child_by_field_name(anchor) if anchor else None
            point = (at if at is not None else node).start_point
            if point == (row, col):
                exact.append(node)
            elif point[0] == row:
                line.append(node)
        if chain:
            exact.sort(key=lambda n: n.end_byte - n.start_byte)
        line.sort(key=lambda n: (n.start_byte, n.end_byte - n.start_byte))
        return exact + line

    def _iteration_sites(self) -> Iterator[Any]:
        """Expressions the script iterates: `[a] = X`, `for (… of X)`, `...X`, `Promise.all(X)`."""
        for node in _walk(self._root):
            kind = node.type
            if kind == "variable_declarator":
                name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
                if name is not None and value is not None and name.type == "array_pattern":
                    yield value
            elif kind in ("for_in_statement", "for_of_statement") and any(c.type == "of" for c in node.children):
                right = node.child_by_field_name("right")
                if right is not None:
                    yield right
            elif kind == "spread_element" and node.named_children:
                yield node.named_children[0]

    def _source_of(self, val: _Val) -> str:
        """`notes.stats()` for a tool's whole result, `the field .x of notes.get_note()` for a part."""
        assert val.origin is not None
        if not val.path:
            return val.origin.call
        return f"the field {_path_text(val.path)} of {val.origin.call}'s result"

    def _type_name(self, val: _Val) -> str:
        """`the result of notes.get_note() (Note)`, `an item of .result from notes.list_notes()
        (Note)`, `the field .byTag of notes.stats()`: where a value of a tool's result is."""
        if val.origin is None:
            return "the value"
        schema = val.schema if val.schema is not None else _schema_at(val.origin.tool.output_schema, val.path)
        title = schema.get("title") if isinstance(schema, Mapping) else None
        resolved = _resolve(schema, val.origin.tool.output_schema)
        title = title or (resolved.get("title") if isinstance(resolved, Mapping) else None)
        named = f" ({title})" if isinstance(title, str) and re.fullmatch(r"[A-Z]\w{0,40}", title) else ""
        path = val.path
        if not path:
            return f"the result of {val.origin.call}{named}"
        if isinstance(path[-1], int):
            return f"an item of {_path_text(path[:-1]) or 'the list'} from {val.origin.call}{named}"
        return f"the field {_path_text(path)} of {val.origin.call}{named}"

    def _fields(self, schema: Any, root: Any) -> str:
        props = sorted(_properties(_resolve(schema, root)))
        shown = ", ".join(props[:MAX_FIELDS_LISTED])
        return shown + (f" and {len(props) - MAX_FIELDS_LISTED} more" if len(props) > MAX_FIELDS_LISTED else "") or "none"

    def _operand(self, node: Any) -> str:
        """The snippet of `node`, in parentheses unless it binds tighter than `.x` (`(await f()).x`)."""
        text = self._snippet(node)
        if node is None or node.type in _PRIMARY:
            return text
        return f"({text})"

    def _node_text(self, node: Any, src: bytes) -> str:
        return src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def _snippet(self, node: Any) -> str:
        """The agent's own text of `node` (TypeScript included), on one line, cut short."""
        if node is None:
            return "the value"
        return _cut(" ".join(self._node_text(node, self._text).split()))

    def _rewrite(self, whole: Any, part: Any, replacement: str, context: Any = None) -> str:
        """The agent's text of `whole` with `part` (inside it) replaced: the corrected expression.
        When `part` is elsewhere (bound on another line: `const first = all[0]`), the text of
        `context` (the expression around `part` there) is rewritten instead."""
        if part is not None and whole is not None and not _inside(part, whole):
            whole = context if context is not None and _inside(part, context) else None
        if part is None or whole is None:
            return _cut(replacement)
        before = self._text[whole.start_byte:part.start_byte].decode("utf-8", "replace")
        after = self._text[part.end_byte:whole.end_byte].decode("utf-8", "replace")
        if replacement.endswith("?") and after.startswith("!"):  # TypeScript's `x!.y` becomes `x?.y`
            after = after[1:]
        return _cut(" ".join(f"{before}{replacement}{after}".split()))


# ------------------------------------------------------------------------------------- schemas


def _resolve(schema: Any, root: Any) -> Mapping[str, Any]:
    """`schema` with local `$ref`s followed and a nullable `anyOf`/`oneOf` (T | null) reduced to
    T; {} when it is not a schema object."""
    for _ in range(MAX_REF_HOPS):
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            schema = target
            continue
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list):
                real = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
                if len(real) == 1:
                    schema = real[0]
                    break
        else:
            return schema
    return schema if isinstance(schema, Mapping) else {}


def _kind(schema: Mapping[str, Any]) -> str | None:
    declared = schema.get("type")
    if isinstance(declared, list):
        real = [t for t in declared if t != "null"]
        declared = real[0] if len(real) == 1 else None
    if isinstance(declared, str):
        return declared
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def _properties(schema: Any) -> dict[str, Any]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return dict(props) if isinstance(props, Mapping) else {}


def _nullable(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    declared = schema.get("type")
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return True
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and any(isinstance(o, Mapping) and o.get("type") == "null" for o in options):
            return True
    return False


def _json_text(schema: Mapping[str, Any]) -> bool:
    """A string result whose recordings were JSON (generator/infer.py marks it so)."""
    media = schema.get("contentMediaType")
    return isinstance(media, str) and media.split(";")[0].strip().lower() in ("application/json", "text/json")


def _schema_at(schema: Any, path: Iterable[str | int]) -> Any:
    current = schema
    for step in path:
        resolved = _resolve(current, schema)
        if isinstance(step, int):
            current = resolved.get("items")
        else:
            current = _properties(resolved).get(step)
    return current


def _shape(schema: Any, root: Any, depth: int = 0) -> str:
    """A short TypeScript-like picture of a schema: `{ result: Note[] }`, `string`."""
    resolved = _resolve(schema, root)
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    title = resolved.get("title")
    if isinstance(ref, str) and isinstance(title, str) and re.fullmatch(r"[A-Z]\w{0,40}", title):
        return title
    kind = _kind(resolved)
    if kind == "array":
        return f"{_shape(resolved.get('items'), root, depth + 1)}[]" if depth < 3 else "array"
    if kind == "object":
        props = sorted(_properties(resolved))
        if depth >= 2 or not props:
            return "object"
        shown = ", ".join(f"{p}: {_shape(_properties(resolved)[p], root, depth + 1)}" for p in props[:4])
        return "{ " + shown + (", …" if len(props) > 4 else "") + " }"
    return kind or "unknown"


def _declared_return(declaration: str | None) -> str | None:
    """`{ result: Note[] }` from `...): Promise<{ result: Note[] }>;` (the generated declaration)."""
    if not declaration:
        return None
    start = declaration.find("): Promise<")
    if start < 0:
        return None
    i, depth = start + len("): Promise<"), 1
    for j in range(i, min(len(declaration), i + 2000)):
        ch = declaration[j]
        if ch == "<":
            depth += 1
        elif ch == ">" and declaration[j - 1] != "=":
            depth -= 1
            if depth == 0:
                text = " ".join(declaration[i:j].split())
                return _cut(text)
    return None


# --------------------------------------------------------------------------------- small helpers


def _walk(root: Any) -> Iterator[Any]:
    """Every node under `root` in source order, without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _inside(part: Any, whole: Any) -> bool:
    return bool(whole.start_byte <= part.start_byte and part.end_byte <= whole.end_byte)


def _at(val: _Val, node: Any) -> _Val:
    return val if node is None else replace(val, node=node)


def _tool_by_export(server: ServerView, export: str) -> ToolView | None:
    return next((t for t in server.tools.values() if t.export_name == export), None)


def _string_value(src: bytes, node: Any) -> str | None:
    if node is None or node.type != "string":
        return None
    return src[node.start_byte + 1:node.end_byte - 1].decode("utf-8", "replace")


def _key_text(src: bytes, node: Any) -> str:
    text = src[node.start_byte:node.end_byte].decode("utf-8", "replace")
    return text[1:-1] if node.type == "string" else text


def _index_value(src: bytes, node: Any) -> str | int | None:
    if node is None:
        return None
    text = src[node.start_byte:node.end_byte].decode("utf-8", "replace")
    if node.type == "number" and text.isdecimal():
        return int(text)
    if node.type == "string":
        return text[1:-1]
    return None


def _path_text(path: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _article(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SNIPPET_CHARS else text[: MAX_SNIPPET_CHARS - 1] + "…"
