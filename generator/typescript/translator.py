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

This module walks the schema and combines what its keywords say; the stages it calls live
beside it, one pure stage a file: state.py (what one translation knows so far), objects.py
(object keywords), arrays.py (array keywords), declarations.py (`$ref` targets as named
declarations), shapes.py (type algebra), patterns.py (`patternProperties`), evaluated.py (what
`unevaluated*` may see), docs.py (doc comments), cycles.py (aliases that reach themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import safe_jsonschema
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.arrays import ArrayKeywords
from codemode_gen.generator.typescript.cycles import break_direct_cycles
from codemode_gen.generator.typescript.declarations import RefDeclarations
from codemode_gen.generator.typescript.docs import schema_doc
from codemode_gen.generator.typescript.normalize import json_kind, normalize
from codemode_gen.generator.typescript.objects import ObjectKeywords
from codemode_gen.generator.typescript.patterns import PATTERN_BUDGET_S
from codemode_gen.generator.typescript.refs import join_pointer
from codemode_gen.generator.typescript.shapes import (
    KINDS,
    MAX_DEPTH,
    UNCONSTRAINED,
    Shape,
    all_kinds,
    close_object,
    conj,
    disj,
    disj_many,
    literal_shape,
)
from codemode_gen.generator.typescript.state import LEAF_KEYS, REF_LEAF_KEYS

# Most members of a literal union from `enum` (bounds agent-context cost of huge enums);
# larger enums widen to their primitive types.
MAX_UNION_MEMBERS = 200

_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "default", "examples", "deprecated", "readOnly",
     "writeOnly", "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "format"}
)  # fmt: skip
_OBJECT_KEYS = (
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "unevaluatedProperties",
)  # fmt: skip
_ARRAY_KEYS = ("prefixItems", "items", "minItems", "maxItems", "unevaluatedItems", "contains")

_ARRAY_LEAF_KEYS = LEAF_KEYS | {"items", "uniqueItems"}
_LEAF_KINDS = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}


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


class Translator(ObjectKeywords, ArrayKeywords, RefDeclarations):
    """The walk: a schema node -> its shape, each keyword family delegated to its stage."""

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
            msg = (
                f"recursive $ref to {', '.join(sorted(bad))} without an object or array in between"
            )
            self.warnings.append(
                f"#{self.pointer_of.get(name, '')}: {msg} cannot be represented; emitted unknown"
            )
            docs[name].append(f"Warning: {msg} cannot be represented; emitted unknown")

    # --- schemas --------------------------------------------------------------------------

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
            if keys <= LEAF_KEYS:
                kind = node.get("type")
                if isinstance(kind, str) and kind in _LEAF_KINDS:
                    return {_LEAF_KINDS[kind]: None}  # fast path: `{"type": "string", …docs}`
            elif "$ref" in node and "type" not in node and keys <= REF_LEAF_KEYS:
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

    # --- literals -------------------------------------------------------------------------

    def literal_shape(self, values: list[Any], ptr: str) -> Shape:
        if len(values) > MAX_UNION_MEMBERS:
            self._warn(ptr, f"enum with more than {MAX_UNION_MEMBERS} values widened to its types")
            return {k: None for v in values if (k := json_kind(v)) is not None}
        return literal_shape(values)


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
