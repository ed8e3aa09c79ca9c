"""JSON Schema -> TS type AST, sound first, then as precise as TypeScript allows.

Soundness: every JSON value valid against a schema must be assignable to its type. The
translator therefore works on a *shape* (shapes.py): for each JSON kind (null, boolean,
number, string, array, object) the TS type that kind's valid values have, or no entry when the
kind is excluded. Keywords combine shapes the way the validator combines results:

- `type`, `enum`/`const` restrict which kinds exist (and to which literals);
- object keywords refine only the object kind, array keywords only the array kind;
- `allOf`, `$ref` (with its siblings in 2019-09+) intersect kind by kind;
- `anyOf`/`oneOf` unite kind by kind (a oneOf member never disappears next to `type`);
- keywords TypeScript cannot express (`not` in general, `if`/`then`/`else`, `contains`,
  `dependentSchemas`, ...) are either approximated from above or ignored, with a warning:
  ignoring a constraint can only widen the type.

A schema without `type` keeps every kind its keywords do not exclude — `{"properties": …}`
accepts strings, as the validator does. `$ref` targets become named declarations; that is
also what makes recursion terminate. Any malformed input becomes `unknown` plus a warning.

This module walks the schema and names the declarations; the stages it calls live beside it:
shapes.py (type algebra), patterns.py (`patternProperties`), evaluated.py (what
`unevaluated*` may see), docs.py (doc comments), cycles.py (aliases that reach themselves).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import safe_jsonschema
from codemode_gen.generator.names import pascal_case
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.cycles import break_direct_cycles
from codemode_gen.generator.typescript.docs import schema_doc
from codemode_gen.generator.typescript.evaluated import evaluated_items, evaluated_names
from codemode_gen.generator.typescript.normalize import (
    PREFIX_ORIGIN,
    detect_draft,
    json_kind,
    normalize,
)
from codemode_gen.generator.typescript.patterns import (
    PATTERN_BUDGET_S,
    PatternTypes,
    undecided_reason,
)
from codemode_gen.generator.typescript.refs import Resolver, join_pointer
from codemode_gen.generator.typescript.shapes import (
    FUNCTION,
    KINDS,
    MAX_DEPTH,
    MAX_PROPERTIES,
    MAX_TUPLE_EXPANSION,
    OBJECT_PROTOTYPE_MEMBERS,
    UNCONSTRAINED,
    Shape,
    all_kinds,
    close_object,
    conj,
    disj,
    disj_many,
    is_literalish,
    limit_items,
    literal_shape,
    merge_types,
    render,
    tuple_type,
    union_members,
)
from codemode_gen.jsonio import pointer_token

# Most members of a literal union from `enum` (bounds agent-context cost of huge enums);
# larger enums widen to their primitive types.
MAX_UNION_MEMBERS = 200
# Most named helper declarations per translation (bounds output of ref-heavy documents).
MAX_DECLS = 2000

_IN_PLACE_APPLICATORS = (
    "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "$recursiveRef", "if", "dependentSchemas",
)  # fmt: skip
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "default", "examples", "deprecated", "readOnly",
     "writeOnly", "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "format"}
)  # fmt: skip
_OBJECT_KEYS = (
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "unevaluatedProperties",
)  # fmt: skip
_ARRAY_KEYS = ("prefixItems", "items", "minItems", "maxItems", "unevaluatedItems", "contains")
_STRUCTURAL_TOKENS = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "items", "prefixItems", "allOf", "anyOf",
     "oneOf", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
     "dependentSchemas", "dependencies", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
)  # fmt: skip

# Keys that never change a schema's shape beyond its single `type` (docs and constraints TS
# cannot express): such leaves skip normalisation entirely.
_LEAF_KEYS = frozenset(
    {"type", "title", "description", "$comment", "default", "examples", "format", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
     "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding"}
)  # fmt: skip
_REF_LEAF_KEYS = _LEAF_KEYS | {"$ref"}
_ARRAY_LEAF_KEYS = _LEAF_KEYS | {"items", "uniqueItems"}
_LEAF_KINDS = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null"}



def _whole_kinds(sub: Any) -> set[str] | None:
    """The kinds a `{"type": …}`-only schema accepts entirely (integer is not all numbers)."""
    if not isinstance(sub, dict) or set(sub) - _ANNOTATIONS - {"type"}:
        return None
    types = sub.get("type")
    names = [types] if isinstance(types, str) else types
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(x, str) and x in KINDS for x in names)
    ):
        return None
    return set(names)


def _accepts_everything(sub: Any) -> bool:
    return sub is True or (isinstance(sub, dict) and not (set(sub) - _ANNOTATIONS - {"$id"}))



@dataclass
class Result:
    root: t.TypeNode
    root_doc: list[str]
    helpers: list[tuple[str, t.TypeNode, list[str]]]  # (name, type, doc) in first-reference order
    warnings: list[str]
    titles: dict[str, str] = field(default_factory=dict)  # declaration name -> its schema's title



class Translator:
    """One translation of one document; holds the named targets discovered so far."""

    def __init__(
        self,
        root: Any,
        root_name: str,
        claim: Callable[[str], str],
        derived_from: Sequence[str] = (),
    ) -> None:
        self.root = root
        self.root_name = root_name
        self.derived_from = tuple(derived_from)
        self.claim = claim
        self.draft = detect_draft(root)
        self.warnings: list[str] = []
        self.sinks: list[list[str]] = [[]]
        self.names: dict[str, str] = {"": root_name}
        self.pointer_of: dict[str, str] = {root_name: ""}
        self.shapes: dict[str, Shape] = {}
        self.in_progress: set[str] = {""}
        self.order: list[str] = []
        self.decl_sinks: dict[str, list[str]] = {}
        self.ref_shapes: dict[str, Shape] = {}  # target pointer -> its finished `$ref` shape
        self.ref_done: dict[str, Shape] = {}  # `$ref` text -> the same, when it has one meaning
        self.ref_types: dict[str, t.TypeNode] = {}  # `$ref` text -> its rendered `ref_done` shape
        self.target_nodes: dict[str, Any] = {}  # pointer of a named declaration -> its schema
        # the `safe_jsonschema.regex_session` of this translation (translate_schema opens it)
        self.regex_report: safe_jsonschema.RegexReport | None = None
        try:
            self.resolver: Resolver | None = Resolver(root, self.draft)
        except Exception:  # never crash: without an index every $ref is non-local (unknown)
            self.resolver = None

    # --- warnings -------------------------------------------------------------------------

    def _warn(self, ptr: str, message: str) -> None:
        text = f"#{ptr}: {message}"
        if text not in self.warnings:
            self.warnings.append(text)
        line = "Warning: " + message
        if line not in self.sinks[-1]:
            self.sinks[-1].append(line)

    def warn_unknown(self, ptr: str, keyword: str, why: str = "") -> None:
        self._warn(ptr, f"{keyword} cannot be represented{why}; emitted unknown")

    def warn_wider(self, ptr: str, keyword: str) -> None:
        self._warn(ptr, f"{keyword} cannot be represented; the type is wider than the schema")

    def pattern_matches(self, pattern: str, name: str, ptr: str) -> bool | None:
        """Does a server-supplied pattern match `name`? None (and a warning) when that cannot
        be told in bounded time: invalid, too long, too slow, or the budget is spent."""
        found = safe_jsonschema.search(pattern, name)
        if found is None:
            why = undecided_reason(pattern, self.regex_report)
            self._warn(ptr, f"pattern {why}; the type is wider than the schema")
        return found

    def _norm_warn(self, ptr: str, keyword: str, message: str) -> None:
        self._warn(ptr, message)

    # --- entry points ---------------------------------------------------------------------

    def run(self) -> Result:
        root_shape = self.shape(self.root, "", 0)
        self.in_progress.discard("")
        asts: dict[str, t.TypeNode] = {self.root_name: self.render(root_shape)}
        root_doc = schema_doc(self.root, derived=(self.root_name, *self.derived_from))
        docs: dict[str, list[str]] = {self.root_name: root_doc + self.sinks[0]}
        titles: dict[str, str] = {}
        if isinstance(self.root, dict) and isinstance(self.root.get("title"), str):
            titles[self.root_name] = self.root["title"]
        for ptr in self.order:
            name = self.names[ptr]
            asts[name] = self.render(self.shapes.get(ptr, all_kinds()))
            node = self.target_nodes.get(ptr)
            docs[name] = schema_doc(node, derived=(name,)) + self.decl_sinks.get(ptr, [])
            if isinstance(node, dict) and isinstance(node.get("title"), str):
                titles[name] = node["title"]
        self._break_direct_cycles(asts, docs)
        helpers = [(self.names[p], asts[self.names[p]], docs[self.names[p]]) for p in self.order]
        return Result(asts[self.root_name], docs[self.root_name], helpers, self.warnings, titles)

    def _break_direct_cycles(self, asts: dict[str, t.TypeNode], docs: dict[str, list[str]]) -> None:
        """TS rejects aliases that reach themselves through unions/intersections only."""
        for name, bad in break_direct_cycles(asts):
            msg = f"recursive $ref to {', '.join(sorted(bad))} without an object or array in between"
            self.warnings.append(
                f"#{self.pointer_of.get(name, '')}: {msg} cannot be represented; emitted unknown"
            )
            docs[name].append(f"Warning: {msg} cannot be represented; emitted unknown")

    # --- schemas --------------------------------------------------------------------------

    def type_of(self, node: Any, ptr: str, depth: int) -> t.TypeNode:
        return self.render(self.shape(node, ptr, depth))

    def render(self, shape: Shape) -> t.TypeNode:
        """`render`, but a named type standing in for a kind it does not cover alone is
        replaced by its simple per-kind type: in `{…} | Bar` the `Bar` would re-admit
        every object `Bar` allows, undoing whatever narrowed the object kind."""
        # One kind, or one node for every kind (a $ref): nothing stands in, render prints it.
        if len(shape) > 1 and len(set(map(id, shape.values()))) > 1:
            by_name = self.pointer_of
            out: Shape = {}
            for k, v in shape.items():
                if isinstance(v, t.Ref) and by_name.get(v.name) in self.shapes:
                    target = self.shapes[by_name[v.name]]
                    own = target.get(k, v)
                    if own is None or is_literalish(own) or isinstance(own, t.Keyword):
                        v = own
                out[k] = v
            shape = out
        return render(shape)

    def shape(self, node: Any, ptr: str, depth: int) -> Shape:
        if node is True:
            return all_kinds()
        if node is False:
            return {}
        if not isinstance(node, dict):
            self.warn_unknown(ptr, "schema", " (not an object or boolean)")
            return all_kinds()
        if depth > MAX_DEPTH:
            self.warn_unknown(ptr, "nesting", f" (deeper than {MAX_DEPTH} levels)")
            return all_kinds()
        try:
            keys = node.keys()
            if keys <= _LEAF_KEYS:
                kind = node.get("type")
                if isinstance(kind, str) and kind in _LEAF_KINDS:
                    return {_LEAF_KINDS[kind]: None}  # fast path: `{"type": "string", …docs}`
            elif "$ref" in node and "type" not in node and keys <= _REF_LEAF_KEYS:
                # fast path: `{"$ref": …, …docs}` is exactly the referenced type
                return self.ref_shape(node["$ref"], ptr + "/$ref", ptr, depth)
            elif (
                keys <= _ARRAY_LEAF_KEYS
                and node.get("type") == "array"
                and isinstance(node.get("items"), dict)
            ):
                # fast path: `{"type": "array", "items": {…}, …docs}`
                items = node["items"]
                element = self.known_ref_type(items, depth + 1) or self.type_of(
                    items, ptr + "/items", depth + 1
                )
                return {"array": t.Tuple((), 0) if t.is_never(element) else t.Array(element)}
            return self._shape(node, ptr, depth)
        except RecursionError:
            self.warn_unknown(ptr, "nesting", " (too deep)")
            return all_kinds()
        except Exception as exc:  # never crash on a schema: unknown is always sound
            self.warn_unknown(ptr, "schema", f" (internal error {type(exc).__name__})")
            return all_kinds()

    def _shape(self, node: dict[str, Any], ptr: str, depth: int) -> Shape:
        n = normalize(node, ptr, self.draft, self._norm_warn)
        s = all_kinds()
        if "$ref" in n:
            s = conj(s, self.ref_shape(n["$ref"], join_pointer(ptr, "$ref"), ptr, depth))
            if self.draft < 2019:
                return s  # draft-07 and older ignore every sibling of $ref
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in n:
                self.warn_wider(ptr, key)
        if "type" in n:
            s = conj(s, {("number" if k == "integer" else k): None for k in n["type"]})
        if "enum" in n:
            s = conj(s, self.literal_shape(n["enum"], join_pointer(ptr, "enum")))
        if "object" in s and not n.keys().isdisjoint(_OBJECT_KEYS):
            obj = self.object_type(n, ptr, depth)
            if obj != UNCONSTRAINED["object"]:
                s = conj(s, {**all_kinds(), "object": obj})
        if "array" in s and not n.keys().isdisjoint(_ARRAY_KEYS):
            arr = self.array_type(n, ptr, depth)
            if arr != UNCONSTRAINED["array"]:
                s = conj(s, {**all_kinds(), "array": arr})
        for i, sub in enumerate(n.get("allOf", ())):
            s = conj(s, self.shape(sub, join_pointer(ptr, "allOf", i), depth + 1))
        if "oneOf" in n and sum(1 for sub in n["oneOf"] if _accepts_everything(sub)) >= 2:
            s = {}  # every value matches at least two branches
        elif "oneOf" in n and sum(1 for sub in n["oneOf"] if _accepts_everything(sub)) == 1:
            # With one catch-all branch, a value is valid iff it matches no other branch:
            # exact when the others only exclude whole kinds (`{"type": "number"}`).
            covered = [_whole_kinds(sub) for sub in n["oneOf"] if not _accepts_everything(sub)]
            if all(c is not None for c in covered):
                gone = {k for c in covered if c is not None for k in c}
                s = {k: v for k, v in s.items() if k not in gone}
        for key in ("anyOf", "oneOf"):
            if key in n:
                branches = [
                    self.shape(sub, join_pointer(ptr, key, i), depth + 1)
                    for i, sub in enumerate(n[key])
                ]
                if key == "oneOf":
                    branches = self.close_one_of_branches(n, ptr, branches)
                s = conj(s, disj_many(branches))
        if "not" in n:
            s = self.apply_not(s, n["not"], join_pointer(ptr, "not"))
        if "if" in n and ("then" in n or "else" in n) and _accepts_everything(n["if"]):
            s = conj(s, self.shape(n.get("then", True), join_pointer(ptr, "then"), depth + 1))
        elif "if" in n and ("then" in n or "else" in n) and n["if"] is False:
            s = conj(s, self.shape(n.get("else", True), join_pointer(ptr, "else"), depth + 1))
        elif "if" in n and ("then" in n or "else" in n):
            cond = self.shape(n["if"], join_pointer(ptr, "if"), depth + 1)
            then = self.shape(n.get("then", True), join_pointer(ptr, "then"), depth + 1)
            other = self.shape(n.get("else", True), join_pointer(ptr, "else"), depth + 1)
            s = conj(s, disj(conj(cond, then), other))
            self.warn_wider(ptr, "if/then/else")
        if "object" in s:
            s = self.apply_dependencies(s, n, ptr, depth)
        if "object" in s:
            for allowed in self.allowed_names(n, ptr, depth):
                s["object"] = close_object(s["object"], allowed, self._object_kind_of)
        if "array" in s and self.draft >= 2019 and "unevaluatedItems" in n and "items" not in n:
            s = self.apply_unevaluated_items(s, n, ptr, depth)
        if "contains" in n and n.get("maxContains") is not None:
            self.warn_wider(ptr, "maxContains")
        return s

    def _object_kind_of(self, name: str) -> t.TypeNode | None:
        """The object-kind type of a finished named declaration, for inlining."""
        ptr = self.pointer_of.get(name)
        if ptr is None or ptr not in self.shapes:
            return None  # the root or a type still being translated (recursion): stays open
        shape = self.shapes[ptr]
        if "object" not in shape:
            return t.NEVER
        return shape["object"] or t.Object(index=t.UNKNOWN)

    def close_one_of_branches(
        self, n: dict[str, Any], ptr: str, branches: list[Shape]
    ) -> list[Shape]:
        """With `unevaluatedProperties: false`, exactly one oneOf branch contributes the
        evaluated names, so each branch can be closed on its own names plus the rest's."""
        if (
            self.draft < 2019
            or n.get("unevaluatedProperties") is not False
            or "additionalProperties" in n
        ):
            return branches
        rest = {k: v for k, v in n.items() if k != "oneOf"}
        base = evaluated_names(rest, ptr, set(), self.draft, self.resolver, top=True)
        if base is None:
            return branches
        out = []
        for i, (sub, branch) in enumerate(zip(n["oneOf"], branches, strict=True)):
            names = evaluated_names(sub, join_pointer(ptr, "oneOf", i), set(), self.draft, self.resolver)
            if names is None or "object" not in branch:
                out.append(branch)
                continue
            closed = dict(branch)
            closed["object"] = close_object(
                branch["object"], sorted(base | names), self._object_kind_of
            )
            out.append(closed)
        return out

    def apply_dependencies(self, s: Shape, n: dict[str, Any], ptr: str, depth: int) -> Shape:
        """dependentRequired/dependentSchemas: "name absent, or present and …" as a union."""
        deps: list[tuple[str, t.TypeNode | None]] = []
        req = n.get("dependentRequired")
        if isinstance(req, dict):
            for name, needs in req.items():
                if isinstance(needs, list) and needs:
                    names = list(dict.fromkeys([name, *(x for x in needs if isinstance(x, str))]))
                    deps.append(
                        (name, t.Object(tuple(t.Property(x, t.UNKNOWN) for x in names), t.UNKNOWN))
                    )
        sch = n.get("dependentSchemas")
        if isinstance(sch, dict):
            for name, sub in sch.items():
                sub_shape = self.shape(sub, join_pointer(ptr, "dependentSchemas", name), depth + 1)
                present = t.Object((t.Property(name, t.UNKNOWN),), t.UNKNOWN)
                if "object" not in sub_shape:
                    deps.append((name, None))
                else:
                    obj = sub_shape["object"]
                    merged = None if obj is None else merge_types(present, obj)
                    deps.append(
                        (name, present if obj is None else merged or t.intersection([present, obj]))
                    )
        for name, present_type in deps:
            absent_type = FUNCTION if name in OBJECT_PROTOTYPE_MEMBERS else t.NEVER
            absent = t.Object((t.Property(name, absent_type, optional=True),), t.UNKNOWN)
            either = absent if present_type is None else t.union([absent, present_type])
            s = conj(s, {**all_kinds(), "object": either})
        return s

    def allowed_names(self, n: dict[str, Any], ptr: str, depth: int) -> list[list[str]]:
        """Finite sets of property names the object may have (each one closes the type)."""
        out: list[list[str]] = []
        if n.get("maxProperties") == 0:
            out.append([])
        names = n.get("propertyNames")
        if isinstance(names, dict) and names:
            name_shape = self.shape(names, join_pointer(ptr, "propertyNames"), depth + 1)
            strings = name_shape.get("string", t.STRING) if "string" in name_shape else t.NEVER
            if strings == t.NEVER:
                out.append([])
            elif strings is not None and is_literalish(strings):
                out.append(
                    [
                        m.value
                        for m in union_members(strings)
                        if isinstance(m, t.Literal) and isinstance(m.value, str)
                    ]
                )
            else:
                self.warn_wider(ptr, "propertyNames")
        un = n.get("unevaluatedProperties")
        if self.draft >= 2019 and un is False and "additionalProperties" not in n:
            if not n.keys().isdisjoint(_IN_PLACE_APPLICATORS):
                evaluated = evaluated_names(n, ptr, set(), self.draft, self.resolver, top=True)
                if evaluated is None:
                    self.warn_wider(ptr, "unevaluatedProperties")
                else:
                    out.append(sorted(evaluated))
        elif (
            self.draft >= 2019
            and un not in (None, True, False)
            and not n.keys().isdisjoint(_IN_PLACE_APPLICATORS)
        ):
            self.warn_wider(ptr, "unevaluatedProperties")
        return out

    def apply_unevaluated_items(self, s: Shape, n: dict[str, Any], ptr: str, depth: int) -> Shape:
        un = n["unevaluatedItems"]
        if un is True or not any(k in n for k in (*_IN_PLACE_APPLICATORS, "contains")):
            return s  # nothing to do, or already handled as `items` by array_type
        count = evaluated_items(n, ptr, set(), self.draft, self.resolver, top=True)
        if count is None or count > MAX_TUPLE_EXPANSION:
            self.warn_wider(ptr, "unevaluatedItems")
            return s
        rest = (
            None
            if un is False
            else self.type_of(un, join_pointer(ptr, "unevaluatedItems"), depth + 1)
        )
        s = dict(s)
        s["array"] = limit_items(s["array"], count, rest)
        return s

    def apply_not(self, s: Shape, sub: Any, ptr: str) -> Shape:
        """`not` is exact when it excludes whole kinds or null/booleans; otherwise ignored."""
        if sub is True:
            return {}
        if sub is False:
            return s
        if isinstance(sub, dict):
            n = normalize(sub, ptr, self.draft, lambda *_: None)
            keys = set(n) - _ANNOTATIONS
            if not keys:
                return {}
            if keys == {"type"}:
                kinds = set(n["type"])
                if "integer" in kinds and "number" not in kinds:
                    kinds.discard("integer")  # non-integral numbers stay valid
                return {k: v for k, v in s.items() if k not in kinds}
            if keys == {"enum"} and isinstance(n["enum"], list):
                values = n["enum"]
                out = dict(s)
                if any(v is None for v in values):
                    out.pop("null", None)
                bools = {v for v in values if isinstance(v, bool)}
                if bools == {True, False}:
                    out.pop("boolean", None)
                elif bools and "boolean" in out and out["boolean"] in (None, t.BOOLEAN):
                    out["boolean"] = t.Literal(not next(iter(bools)))
                if len(values) == sum(1 for v in values if v is None or isinstance(v, bool)):
                    return out
                s = out
        self.warn_wider(ptr, "not")
        return s

    # --- $ref -----------------------------------------------------------------------------

    def ref_shape(self, ref: Any, ref_ptr: str, site: str, depth: int) -> Shape:
        if not isinstance(ref, str):
            self._warn(ref_ptr, "malformed `$ref` (not a string) ignored")
            return all_kinds()
        done = self.ref_done.get(ref)
        if done is not None:
            return done.copy()  # callers may extend the shape they get
        target = self.resolver.resolve(ref, site) if self.resolver else None
        if target is None:
            self.warn_unknown(ref_ptr, "$ref", f" (not local: {ref[:200]!r})")
            return all_kinds()
        tp = target.pointer
        done = self.ref_shapes.get(tp)
        if done is not None:
            return done.copy()  # callers may extend the shape they get
        if tp not in self.names:
            if len(self.order) >= MAX_DECLS:
                self.warn_unknown(ref_ptr, "$ref", f" (more than {MAX_DECLS} named types)")
                return all_kinds()
            self.names[tp] = self.claim(self._name_for(tp, target.node))
            self.pointer_of[self.names[tp]] = tp
            self.order.append(tp)
            self.target_nodes[tp] = target.node
        name = self.names[tp]
        if tp in self.shapes:
            kinds: Iterable[str] = self.shapes[tp].keys()
        elif tp in self.in_progress:
            kinds = KINDS  # recursion: the target's kinds are not known yet; all is sound
        else:
            self.in_progress.add(tp)
            self.sinks.append(self.decl_sinks.setdefault(tp, []))
            try:
                self.shapes[tp] = self.shape(target.node, tp, depth + 1)
            finally:
                self.sinks.pop()
                self.in_progress.discard(tp)
            kinds = self.shapes[tp].keys()
        ref_node = t.Ref(name)  # one object for every kind: render() can skip deduplication
        out: Shape = dict.fromkeys(kinds, ref_node)
        if tp in self.shapes:  # final: every later $ref to this target gets the same kinds
            self.ref_shapes[tp] = out.copy()
            if self.resolver is not None and len(self.resolver.scopes) == 1:
                # no `$id` anywhere: the same `$ref` text means the same target everywhere
                self.ref_done[ref] = self.ref_shapes[tp]
                # one Ref for every kind: rendering depends on nothing else
                self.ref_types[ref] = self.render(out)
        return out

    def known_ref_type(self, node: Any, depth: int) -> t.TypeNode | None:
        """The type of a plain `{"$ref": …, …docs}` (what `shape`'s fast path would give)
        when the reference was already resolved and its target finished; else None."""
        if type(node) is dict and depth <= MAX_DEPTH and "$ref" in node and "type" not in node:
            ref = node["$ref"]
            if type(ref) is str and node.keys() <= _REF_LEAF_KEYS:
                return self.ref_types.get(ref)
        return None

    def _name_for(self, ptr: str, node: Any) -> str:
        tokens = [tok.replace("~1", "/").replace("~0", "~") for tok in ptr.split("/")[1:]]
        meaningful = [tok for tok in tokens if tok not in _STRUCTURAL_TOKENS and not tok.isdigit()]
        if meaningful and pascal_case(meaningful[-1]):
            return meaningful[-1]
        if (
            isinstance(node, dict)
            and isinstance(node.get("title"), str)
            and pascal_case(node["title"])
        ):
            return str(node["title"])
        return self.root_name + "Item"

    # --- literals -------------------------------------------------------------------------

    def literal_shape(self, values: list[Any], ptr: str) -> Shape:
        if len(values) > MAX_UNION_MEMBERS:
            self._warn(ptr, f"enum with more than {MAX_UNION_MEMBERS} values widened to its types")
            return {k: None for v in values if (k := json_kind(v)) is not None}
        return literal_shape(values)

    # --- objects --------------------------------------------------------------------------

    def _sub(
        self, node: Any, ptr: str, depth: int, name: str | None = None
    ) -> tuple[t.TypeNode, list[str]]:
        """Translate a subschema that gets its own doc comment; returns (type, doc lines)."""
        sink: list[str] = []
        self.sinks.append(sink)
        try:
            typ = self.render(self.shape(node, ptr, depth + 1))
        finally:
            self.sinks.pop()
        doc = schema_doc(node, name)
        if sink:
            doc += sink
        return typ, doc

    def object_type(self, n: dict[str, Any], ptr: str, depth: int) -> t.TypeNode:
        if n.get("propertyNames") is False:
            return t.Object(index=t.NEVER)
        props: dict[str, Any] = n.get("properties", {})
        required: list[str] = n.get("required", [])
        ap: Any = n.get("additionalProperties", True)
        if (
            "additionalProperties" not in n
            and "unevaluatedProperties" in n
            and self.draft >= 2019
            and n.keys().isdisjoint(_IN_PLACE_APPLICATORS)
        ):
            ap = n["unevaluatedProperties"]  # nothing else can evaluate properties here
        if not isinstance(ap, (bool, dict)):
            self._warn(
                join_pointer(ptr, "additionalProperties"),
                "malformed `additionalProperties` ignored",
            )
            ap = True

        pats = PatternTypes(self.pattern_matches)
        for pat, sub in n.get("patternProperties", {}).items():
            pat_ptr = join_pointer(ptr, "patternProperties", pat)
            pats.add(pat, pat_ptr, self.type_of(sub, pat_ptr, depth + 1))
        matching = pats.matching

        members: list[t.Property] = []
        names = list(props)
        if len(names) > MAX_PROPERTIES:
            self._warn(
                ptr,
                f"more than {MAX_PROPERTIES} properties; the rest fall under the index signature",
            )
            names = names[:MAX_PROPERTIES]
            ap = True
        patterned = bool(pats)
        prop_ptr = join_pointer(ptr, "properties") + "/"
        sinks, shape, render = self.sinks, self.shape, self.render
        for name in names:  # the hottest loop: `_sub` inlined
            sub = props[name]
            known = self.known_ref_type(sub, depth + 1)
            if known is not None:  # most properties of big documents: a finished $ref
                typ = known
                doc = schema_doc(sub, name)
            else:
                sink: list[str] = []
                sinks.append(sink)
                plain = type(name) is str and "/" not in name and "~" not in name
                key = name if plain else pointer_token(str(name))
                try:
                    typ = render(shape(sub, prop_ptr + key, depth + 1))
                finally:
                    sinks.pop()
                doc = schema_doc(sub, name)
                if sink:
                    doc += sink
            if patterned:  # a pattern that may match is left out: the type can only be wider
                typ = t.intersection([typ, *matching(name)[0]])
            readonly = isinstance(sub, dict) and sub.get("readOnly") is True
            optional = name not in required
            if optional and name in OBJECT_PROTOTYPE_MEMBERS:
                typ = t.union([typ, FUNCTION])  # `{}` inherits e.g. toString from Object.prototype
            members.append(t.make_property(name, typ, optional, readonly, tuple(doc)))
        ap_type: t.TypeNode | None = None
        if isinstance(ap, dict):
            ap_type, _ = self._sub(ap, join_pointer(ptr, "additionalProperties"), depth)
        for name in required:
            if name in props:
                continue
            extra, maybe = matching(name)
            if extra:
                typ = t.intersection(extra)
            elif maybe:  # whichever of them match (or none): their union, and the fallback
                fallback = [] if ap is False else [ap_type if ap_type is not None else t.UNKNOWN]
                typ = t.union([*maybe, *fallback])
            elif ap is False:
                return t.NEVER  # required but forbidden: no object is valid
            else:
                typ = ap_type if ap_type is not None else t.UNKNOWN
            members.append(t.Property(name, typ))
        declared = {p.name for p in members} if pats.exact else set()
        for exact_name, _ in pats.exact:
            if exact_name not in declared:
                typ = t.intersection(matching(exact_name)[0])
                if exact_name in OBJECT_PROTOTYPE_MEMBERS:
                    typ = t.union([typ, FUNCTION])
                members.append(t.Property(exact_name, typ, optional=True))
                declared.add(exact_name)

        if any(t.is_never(p.type) and not p.optional for p in members):
            return t.NEVER
        return pats.object_type(members, ap, ap_type)

    # --- arrays ---------------------------------------------------------------------------

    def array_type(self, n: dict[str, Any], ptr: str, depth: int) -> t.TypeNode:
        prefix = n.get("prefixItems", [])
        rest: Any = n.get("items", True)
        rest_ptr = join_pointer(ptr, "additionalItems" if PREFIX_ORIGIN in n else "items")
        if (
            "items" not in n
            and "unevaluatedItems" in n
            and self.draft >= 2019
            and not any(k in n for k in (*_IN_PLACE_APPLICATORS, "contains"))
        ):
            rest, rest_ptr = n["unevaluatedItems"], join_pointer(ptr, "unevaluatedItems")
        min_items: int = n.get("minItems", 0)
        if "contains" in n:
            # At least minContains (default 1) items match `contains`, so at least that many exist.
            least = n.get("minContains", 1) if self.draft >= 2019 else 1
            if isinstance(least, (int, float)) and not isinstance(least, bool) and least >= 0:
                if n["contains"] is False and least >= 1:
                    return t.NEVER
                min_items = max(min_items, math.ceil(least))
        max_items: int | None = n.get("maxItems")
        prefix_key = n.get(PREFIX_ORIGIN, "prefixItems")
        elems = [
            self.type_of(sub, join_pointer(ptr, prefix_key, i), depth + 1)
            for i, sub in enumerate(prefix)
        ]
        rest_t: t.TypeNode | None = (
            None if rest is False else self.type_of(rest, rest_ptr, depth + 1)
        )
        return tuple_type(elems, rest_t, min_items, max_items)


def translate_schema(
    schema: Any,
    root_name: str,
    claim: Callable[[str], str],
    doc: Sequence[str] = (),
    derived_from: Sequence[str] = (),
) -> Result:
    """Translate one document; `claim` hands out unique names for helper declarations.

    `derived_from`: names (the tool's) the root name was made from; a root title that only
    respells one of them or the root name is a framework's generated title and is dropped.
    """
    translator = Translator(schema, root_name, claim, derived_from)
    with safe_jsonschema.regex_session(PATTERN_BUDGET_S) as report:
        translator.regex_report = report
        result = translator.run()
    result.root_doc = [*doc, *result.root_doc]
    return result
