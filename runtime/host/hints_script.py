"""The static model of a failed script for its hints: bindings, and what each expression is.

To say "`notes` is the object notes.list_notes() resolves to", runtime/host/hints.py must follow
an expression of the script back to the tool call its value came from. ScriptModel owns that:
one tree-sitter parse of the script (runtime/host/tsinput.py's TypeScript grammar), a table of
bindings (imports, declarations with destructuring, assignments, for-of variables, callback
parameters of array methods) and an evaluation of an expression to a `Val` (part of a tool's
result with its schema, a Promise, a server module, a tool function, a missing field, or
unknown). It is scope-insensitive (the nearest binding before the use wins) and bounded by the
named constants below; the explanations built on it are in hints_mistakes.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from codemode_gen.generator.manifest import module_specifier
from codemode_gen.runtime.host.catalog import Catalog, ServerView, ToolView
from codemode_gen.runtime.host.hints_schema import (
    declared_return,
    nullable,
    properties,
    resolve,
    schema_kind,
    shape,
)

#: Nodes of the script visited to build the binding table; bounds the walk for a huge script
#: made of tiny statements.
MAX_NODES = 100_000
#: Bindings followed from a use back to a tool call (`a = b; b = c; ...`); bounds a chain (or a
#: cycle: `a = b; b = a`) of aliases.
MAX_BINDING_HOPS = 16
#: Candidate expressions examined per error (the failing line's, then the whole script's).
MAX_CANDIDATES = 200

#: Methods a value of each kind has, so that calling one is never reported as a mistake.
ARRAY_METHODS = frozenset(
    {
        "at",
        "concat",
        "copyWithin",
        "entries",
        "every",
        "fill",
        "filter",
        "find",
        "findIndex",
        "findLast",
        "findLastIndex",
        "flat",
        "flatMap",
        "forEach",
        "includes",
        "indexOf",
        "join",
        "keys",
        "lastIndexOf",
        "map",
        "pop",
        "push",
        "reduce",
        "reduceRight",
        "reverse",
        "shift",
        "slice",
        "some",
        "sort",
        "splice",
        "toLocaleString",
        "toReversed",
        "toSorted",
        "toSpliced",
        "toString",
        "unshift",
        "values",
        "with",
        "length",
    }
)
STRING_METHODS = frozenset(
    {
        "at",
        "charAt",
        "charCodeAt",
        "codePointAt",
        "concat",
        "endsWith",
        "includes",
        "indexOf",
        "isWellFormed",
        "lastIndexOf",
        "localeCompare",
        "match",
        "matchAll",
        "normalize",
        "padEnd",
        "padStart",
        "repeat",
        "replace",
        "replaceAll",
        "search",
        "slice",
        "split",
        "startsWith",
        "substring",
        "substr",
        "toLocaleLowerCase",
        "toLocaleUpperCase",
        "toLowerCase",
        "toString",
        "toUpperCase",
        "toWellFormed",
        "trim",
        "trimEnd",
        "trimStart",
        "valueOf",
        "length",
    }
)
OBJECT_METHODS = frozenset(
    {
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
        "toJSON",
    }
)
PROMISE_METHODS = frozenset({"then", "catch", "finally"})
#: Array methods whose callback gets an item as the given parameters (reduce: the second).
CALLBACK_ITEM_PARAMS: Mapping[str, tuple[int, ...]] = {
    "map": (0,),
    "filter": (0,),
    "forEach": (0,),
    "find": (0,),
    "findIndex": (0,),
    "findLast": (0,),
    "findLastIndex": (0,),
    "some": (0,),
    "every": (0,),
    "flatMap": (0,),
    "reduce": (1,),
    "reduceRight": (1,),
    "sort": (0, 1),
    "toSorted": (0, 1),
}


@dataclass(frozen=True)
class Origin:
    """The tool call a value came from."""

    server: ServerView
    tool: ToolView

    @property
    def call(self) -> str:
        return f"{self.server.server_id}.{self.tool.export_name}()"

    @property
    def returns(self) -> str:
        """The tool's result type as its declaration writes it (else from the schema)."""
        declared = declared_return(self.tool.declaration)
        return declared if declared else shape(self.tool.output_schema, self.tool.output_schema)


@dataclass(frozen=True)
class Val:
    """What an expression of the script evaluates to, as far as the static analysis knows.

    kind: "value" (part of a tool's result, `schema` describing it), "promise" (`inner` is what
    it resolves to), "namespace" (a server module), "toolfn" (a tool's function), "missing"
    (`parent` has no `prop`: undefined), "unknown"."""

    kind: str
    node: Any = None  # the expression, where the script has it
    origin: Origin | None = None
    schema: Any = None
    root: Any = None  # the schema `$ref`s resolve against
    path: tuple[str | int, ...] = ()  # accessors from the tool's result to this value
    optional: bool = False  # a field the type does not require, or one that may be null
    inner: Val | None = None
    module: str | None = None
    server: ServerView | None = None
    parent: Val | None = None
    prop: str | int | None = None


UNKNOWN = Val("unknown")


@dataclass
class _Binding:
    """`name` bound at byte `at` to `source` (an expression node), then `accesses` into it
    (destructuring, for-of items, callback items); or to an import."""

    at: int
    source: Any = None
    accesses: tuple[tuple[str, Any], ...] = ()
    value: Val | None = None  # imports: known without evaluating anything


@dataclass
class ScriptModel:
    """The script's parse and binding table (built on first use) and its evaluation."""

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
        from codemode_gen.runtime.host.tsinput import ts_parser

        self._ready = True
        self._src = self.script.encode("utf-8", "surrogatepass")
        self._text = self.code.encode("utf-8", "surrogatepass")
        self._root = ts_parser().parse(self._src).root_node
        self._modules = {module_specifier(sid): view for sid, view in self.catalog.servers.items()}
        for seen, node in enumerate(walk(self._root)):
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
            if (
                left is not None
                and right is not None
                and any(c.type == "of" for c in node.children)
            ):
                self._bind_pattern(left, right, (("item", None),))
        elif kind in ("arrow_function", "function_expression", "function"):
            self._index_callback(node)

    def _index_import(self, node: Any) -> None:
        source = node.child_by_field_name("source")
        if source is None:
            return
        module = string_value(self._src, source)
        server = self._modules.get(module or "")
        for clause in node.named_children:
            if clause.type != "import_clause":
                continue
            for part in clause.named_children:
                if part.type == "namespace_import":
                    ident = next((c for c in part.named_children if c.type == "identifier"), None)
                    if ident is not None:
                        ns = Val("namespace", module=module, server=server)
                        self._bind(ident, _Binding(ident.start_byte, value=ns))
                elif part.type == "named_imports":
                    for spec in part.named_children:
                        if spec.type != "import_specifier":
                            continue
                        name = spec.child_by_field_name("name")
                        alias = spec.child_by_field_name("alias") or name
                        if name is None or alias is None or server is None:
                            continue
                        tool = tool_by_export(server, self._node_text(name, self._src))
                        if tool is not None:
                            fn = Val("toolfn", origin=Origin(server, tool))
                            self._bind(alias, _Binding(alias.start_byte, value=fn))

    def _index_callback(self, fn: Any) -> None:
        """Parameters of a callback given to an array method (`xs.map(n => n.title)`): items."""
        args = fn.parent
        call = args.parent if args is not None else None
        if (
            args is None
            or call is None
            or args.type != "arguments"
            or call.type != "call_expression"
        ):
            return
        if args.named_children[:1] != [fn]:
            return
        callee = call.child_by_field_name("function")
        if callee is None or callee.type != "member_expression":
            return
        prop = callee.child_by_field_name("property")
        items = CALLBACK_ITEM_PARAMS.get(
            self._node_text(prop, self._src) if prop is not None else ""
        )
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

    def _bind_pattern(
        self, pattern: Any, source: Any, accesses: tuple[tuple[str, Any], ...]
    ) -> None:
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
                    self._bind(
                        element, _Binding(element.start_byte, source, (*accesses, ("prop", name)))
                    )
                elif element.type == "pair_pattern":
                    key, value = (
                        element.child_by_field_name("key"),
                        element.child_by_field_name("value"),
                    )
                    if key is not None and value is not None:
                        self._bind_pattern(
                            value, source, (*accesses, ("prop", key_text(self._src, key)))
                        )
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

    def value(self, node: Any, hops: int = 0) -> Val:
        """What `node` evaluates to (see Val); `unknown` whenever the analysis cannot tell."""
        if node is None or hops > MAX_BINDING_HOPS:
            return UNKNOWN
        kind = node.type
        if kind == "parenthesized_expression":
            inner = node.named_children[-1] if node.named_children else None
            return at_node(self.value(inner, hops), node)
        if kind == "await_expression":
            inner = self.value(node.named_children[0] if node.named_children else None, hops)
            if inner.kind == "promise" and inner.inner is not None:
                return at_node(inner.inner, node)
            return at_node(inner, node)
        if kind == "call_expression":
            return self._call(node, hops)
        if kind == "identifier":
            return self._identifier(node, hops)
        if kind == "member_expression":
            obj = self.value(node.child_by_field_name("object"), hops)
            prop = node.child_by_field_name("property")
            return self.member(
                obj, self._node_text(prop, self._src) if prop is not None else "", node
            )
        if kind == "subscript_expression":
            obj = self.value(node.child_by_field_name("object"), hops)
            return self.member(obj, index_value(self._src, node.child_by_field_name("index")), node)
        return at_node(UNKNOWN, node)

    def _call(self, node: Any, hops: int) -> Val:
        callee = node.child_by_field_name("function")
        if callee is not None and callee.type == "import":  # `await import("@codemode/servers/x")`
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            module = string_value(self._src, first) if first is not None else None
            if module is not None:
                ns = Val("namespace", module=module, server=self._modules.get(module))
                return Val("promise", node=node, inner=ns)
            return at_node(UNKNOWN, node)
        fn = self.value(callee, hops)
        if fn.kind == "toolfn" and fn.origin is not None:
            schema = fn.origin.tool.output_schema
            result = Val("value", origin=fn.origin, schema=schema, root=schema)
            return Val("promise", node=node, origin=fn.origin, inner=result)
        return at_node(UNKNOWN, node)

    def _identifier(self, node: Any, hops: int) -> Val:
        name = self._node_text(node, self._src)
        found = [
            b for b in self._bindings.get(name, ()) if b.at < node.start_byte or b.value is not None
        ]
        if not found:
            return at_node(UNKNOWN, node)
        binding = max(found, key=lambda b: b.at if b.value is None else -1)
        if binding.value is not None:
            return at_node(binding.value, node)
        got = self.value(binding.source, hops + 1)
        for how, key in binding.accesses:
            if got.kind in ("unknown", "missing"):
                return at_node(UNKNOWN, node)
            got = self.member(got, key, None) if how in ("prop", "index") else self.item(got)
        # A missing value keeps the expression that made it (`all[0]` where `first` was bound):
        # the hint rewrites that one.
        return got if got.kind == "missing" else at_node(got, node)

    def member(self, obj: Val, prop: str | int | None, node: Any) -> Val:
        """`obj.prop` / `obj[prop]` (`prop` None: an index the analysis cannot read)."""
        if obj.kind == "namespace":
            if obj.server is None or not isinstance(prop, str):
                return at_node(UNKNOWN, node)
            tool = tool_by_export(obj.server, prop)
            if tool is not None:
                return Val("toolfn", node=node, origin=Origin(obj.server, tool))
            if prop.startswith("__") or prop in OBJECT_METHODS:
                return at_node(UNKNOWN, node)
            return Val("missing", node=node, parent=obj, prop=prop)
        if obj.kind == "promise":
            if prop in PROMISE_METHODS or prop in OBJECT_METHODS or prop is None:
                return at_node(UNKNOWN, node)
            return Val("missing", node=node, parent=obj, prop=prop)
        if obj.kind != "value" or prop is None:
            return at_node(UNKNOWN, node)
        schema = resolve(obj.schema, obj.root)
        kind = schema_kind(schema)
        if kind == "string":
            if isinstance(prop, int) or prop in STRING_METHODS or prop in OBJECT_METHODS:
                return at_node(UNKNOWN, node)
            return Val("missing", node=node, parent=obj, prop=prop)
        if kind == "array":
            if isinstance(prop, int) or (isinstance(prop, str) and prop.isdecimal()):
                return at_node(self.item(obj), node)
            if prop in ARRAY_METHODS or prop in OBJECT_METHODS:
                return at_node(UNKNOWN, node)
            return Val("missing", node=node, parent=obj, prop=prop)
        if kind == "object":
            props = properties(schema)
            key = str(prop)
            if key in props:
                sub = props[key]
                listed = schema.get("required")
                required: list[Any] = listed if isinstance(listed, list) else []
                optional = key not in required or nullable(resolve(sub, obj.root))
                return Val(
                    "value",
                    node=node,
                    origin=obj.origin,
                    schema=sub,
                    root=obj.root,
                    path=(*obj.path, prop),
                    optional=optional,
                )
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return Val(
                    "value",
                    node=node,
                    origin=obj.origin,
                    schema=extra,
                    root=obj.root,
                    path=(*obj.path, prop),
                    optional=True,
                )
            if not props or "patternProperties" in schema or key in OBJECT_METHODS:
                return at_node(UNKNOWN, node)
            return Val("missing", node=node, parent=obj, prop=prop)
        return at_node(UNKNOWN, node)

    def item(self, obj: Val) -> Val:
        """An item of an array value (for-of, callbacks, `[first] = ...`)."""
        if obj.kind != "value":
            return UNKNOWN
        schema = resolve(obj.schema, obj.root)
        if schema_kind(schema) != "array" or not isinstance(schema.get("items"), Mapping):
            return UNKNOWN
        return Val(
            "value", origin=obj.origin, schema=schema["items"], root=obj.root, path=(*obj.path, 0)
        )

    # ---- where the error is ------------------------------------------------------------------

    def _candidates(
        self,
        where: tuple[int, int] | None,
        kinds: tuple[str, ...],
        *,
        chain: bool,
        anchor: str | None = None,
    ) -> list[Any]:
        """Nodes of `kinds` the error may be about: those at the reported position first (the
        engine reports a member chain at its start, a call at its `(`; innermost first when
        `chain`: `a.b.c` fails at `.b` before `.c` is read), then the others on its line."""
        if where is None:
            return []
        row, col = where
        exact: list[Any] = []
        line: list[Any] = []
        for seen, node in enumerate(walk(self._root)):
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
        for node in walk(self._root):
            kind = node.type
            if kind == "variable_declarator":
                name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
                if name is not None and value is not None and name.type == "array_pattern":
                    yield value
            elif kind in ("for_in_statement", "for_of_statement") and any(
                c.type == "of" for c in node.children
            ):
                right = node.child_by_field_name("right")
                if right is not None:
                    yield right
            elif kind == "spread_element" and node.named_children:
                yield node.named_children[0]

    def _node_text(self, node: Any, src: bytes) -> str:
        return src[node.start_byte : node.end_byte].decode("utf-8", "replace")


# --------------------------------------------------------------------------------- small helpers


def walk(root: Any) -> Iterator[Any]:
    """Every node under `root` in source order, without recursion."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def inside(part: Any, whole: Any) -> bool:
    return bool(whole.start_byte <= part.start_byte and part.end_byte <= whole.end_byte)


def at_node(val: Val, node: Any) -> Val:
    return val if node is None else replace(val, node=node)


def tool_by_export(server: ServerView, export: str) -> ToolView | None:
    return next((t for t in server.tools.values() if t.export_name == export), None)


def string_value(src: bytes, node: Any) -> str | None:
    if node is None or node.type != "string":
        return None
    return src[node.start_byte + 1 : node.end_byte - 1].decode("utf-8", "replace")


def key_text(src: bytes, node: Any) -> str:
    text = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
    return text[1:-1] if node.type == "string" else text


def index_value(src: bytes, node: Any) -> str | int | None:
    if node is None:
        return None
    text = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
    if node.type == "number" and text.isdecimal():
        return int(text)
    if node.type == "string":
        return text[1:-1]
    return None
