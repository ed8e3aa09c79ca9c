"""JSON Schema -> TS type AST, sound first, then as precise as TypeScript allows.

Soundness: every JSON value valid against a schema must be assignable to its type. The
translator therefore works on a *shape*: for each JSON kind (null, boolean, number,
string, array, object) the TS type that kind's valid values have, or no entry when the
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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from codemode_gen import schema_regex
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.normalize import (
    PREFIX_ORIGIN,
    detect_draft,
    json_kind,
    normalize,
)
from codemode_gen.generator.typescript.printer import CONSTRAINTS_LABEL, MAX_DOC_CHARS, sanitize_doc
from codemode_gen.generator.typescript.refs import Resolver, escape_token, join_pointer

# Deepest schema nesting translated; deeper subschemas become `unknown` (bounds stack use
# and output size for hostile, deeply nested schemas).
MAX_DEPTH = 40
# Most members of a literal union from `enum` (bounds agent-context cost of huge enums);
# larger enums widen to their primitive types.
MAX_UNION_MEMBERS = 200
# Longest string kept as a literal type (same reason; longer ones widen to `string`).
MAX_LITERAL_CHARS = 500
# Most tuple slots synthesised from minItems/maxItems (`[T, T, T?]`); beyond that, `T[]`.
MAX_TUPLE_EXPANSION = 8
# Most properties spelled out in one object type; the rest fall under the index signature.
MAX_PROPERTIES = 500
# Most union members an object type is distributed over when intersected (`A & (B | C)` ->
# `(A & B) | (A & C)`); bounds output growth from properties combined with oneOf/anyOf.
MAX_DISTRIBUTE = 8
# Most named helper declarations per translation (bounds output of ref-heavy documents).
MAX_DECLS = 2000
# Most `examples` quoted in one doc comment.
MAX_EXAMPLES = 3
# Longest JSON rendering of a `default`/example value in a doc comment.
MAX_DOC_VALUE_CHARS = 200
# Bounds the regex time one translation spends matching server-supplied `patternProperties`
# against property names. Every pattern runs through the ECMA-262 matcher the validators use
# (codemode_gen.schema_regex: its own per-match timeout and length caps): with Python's `re`,
# `^(a|a)*$` against a 24-character name took seconds and doubled per character, hanging
# `generate` and `serve`. Once spent, the remaining matches count as unknown (wider types).
PATTERN_BUDGET_S = 0.5

KINDS = ("object", "array", "string", "number", "boolean", "null")  # also the print order
Shape = dict[str, t.TypeNode | None]  # kind -> type of that kind's values; None = unconstrained

_UNCONSTRAINED: dict[str, t.TypeNode] = {
    "null": t.NULL,
    "boolean": t.BOOLEAN,
    "number": t.NUMBER,
    "string": t.STRING,
    "array": t.Array(t.UNKNOWN),
    "object": t.Object(index=t.UNKNOWN),
}
_IN_PLACE_APPLICATORS = (
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "if",
    "dependentSchemas",
)
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "default", "examples", "deprecated", "readOnly",
     "writeOnly", "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "format"}
)  # fmt: skip
_OBJECT_KEYS = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
)
_ARRAY_KEYS = ("prefixItems", "items", "minItems", "maxItems", "unevaluatedItems", "contains")
_CONSTRAINT_KEYS = (
    "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
    "contentMediaType", "contentEncoding",
)  # fmt: skip
_STRUCTURAL_TOKENS = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "items", "prefixItems", "allOf", "anyOf",
     "oneOf", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
     "dependentSchemas", "dependencies", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
)  # fmt: skip


_OBJECT_PROTOTYPE_MEMBERS = frozenset(
    {"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty", "isPrototypeOf",
     "propertyIsEnumerable", "__defineGetter__", "__defineSetter__", "__lookupGetter__",
     "__lookupSetter__", "__proto__"}
)  # fmt: skip
_FUNCTION = t.Ref("Function")
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
    return schema_regex.search(pattern, "") is True


def template_matches(key: t.TemplateKey, name: str) -> bool:
    if not key.any_before:
        return name.startswith(key.literal)
    if not key.any_after:
        return name.endswith(key.literal)
    return key.literal in name


# Keys that never change a schema's shape beyond its single `type` (docs and constraints TS
# cannot express): such leaves skip normalisation entirely.
_LEAF_KEYS = frozenset(
    {"type", "title", "description", "$comment", "default", "examples", "format", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
     "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding"}
)  # fmt: skip
_REF_LEAF_KEYS = _LEAF_KEYS | {"$ref"}
_ARRAY_LEAF_KEYS = _LEAF_KEYS | {"items", "uniqueItems"}
_LEAF_KINDS = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}


def all_kinds() -> Shape:
    return dict.fromkeys(KINDS)


def is_literalish(node: t.TypeNode) -> bool:
    """True for types denoting a finite set of JSON values (enum/const output)."""
    if isinstance(node, t.Literal) or (type(node) is t.Keyword and node.name == "null"):
        return True
    if isinstance(node, t.Union):
        return all(is_literalish(m) for m in node.members)
    if isinstance(node, t.Tuple):
        return (
            node.rest is None
            and node.required == len(node.elements)
            and all(map(is_literalish, node.elements))
        )
    if isinstance(node, t.Object):
        return node.index in (None, t.NEVER) and all(
            not p.optional and is_literalish(p.type) for p in node.properties
        )
    return False


def _members(node: t.TypeNode) -> tuple[t.TypeNode, ...]:
    return node.members if isinstance(node, t.Union) else (node,)


def conj(a: Shape, b: Shape) -> Shape:
    """Shape of values valid against both."""
    out: Shape = {}
    for k in KINDS:
        if k not in a or k not in b:
            continue
        x, y = a[k], b[k]
        r: t.TypeNode | None
        if x is None or x == y:
            r = y
        elif y is None:
            r = x
        elif is_literalish(x) and is_literalish(y):
            ys = _members(y)
            r = t.union([m for m in _members(x) if m in ys])
        elif is_literalish(x):
            r = x  # a finite literal set already lies inside the other constraint's type
        elif is_literalish(y):
            r = y
        else:
            r = _merge(x, y)
            if r is None:
                r = t.intersection([x, y])
        if r is None or not t.is_never(r):
            out[k] = r
    return out


def disj(a: Shape, b: Shape) -> Shape:
    """Shape of values valid against either."""
    out: Shape = {}
    for k in KINDS:
        if k in a and k in b:
            x, y = a[k], b[k]
            out[k] = None if x is None or y is None else t.union([x, y])
        elif k in a:
            out[k] = a[k]
        elif k in b:
            out[k] = b[k]
    return out


def disj_many(shapes: list[Shape]) -> Shape:
    """`disj` over many branches at once (one union per kind instead of n growing ones)."""
    out: Shape = {}
    for k in KINDS:
        parts: list[t.TypeNode] = []
        unconstrained = present = False
        for sh in shapes:
            if k in sh:
                present = True
                v = sh[k]
                if v is None:
                    unconstrained = True
                    break
                parts.append(v)
        if present:
            out[k] = None if unconstrained else t.union(parts)
    return out


def render(shape: Shape) -> t.TypeNode:
    if len(shape) == 1:
        ((k, v),) = shape.items()
        return _UNCONSTRAINED[k] if v is None else v
    values = list(shape.values())
    first = values[0] if values else None
    same = len(set(map(id, values))) == 1
    if first is not None and same:
        return first  # e.g. a $ref: the same named type for every kind it allows
    if len(shape) == len(KINDS) and same and first is None:
        return t.UNKNOWN
    members: list[t.TypeNode] = []
    for k in KINDS:
        if k in shape:
            v = shape[k]
            members.append(_UNCONSTRAINED[k] if v is None else v)
    return t.union(members)


def _compact_json(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > MAX_DOC_VALUE_CHARS:
        text = text[:MAX_DOC_VALUE_CHARS] + "…"
    return text


_CONSTRAINT_SET = frozenset(_CONSTRAINT_KEYS)
_DOC_KEYS = frozenset(
    {"title", "description", "type", "format", *_CONSTRAINT_KEYS, "readOnly", "writeOnly", "default",
     "examples", "deprecated"}
)  # fmt: skip
_RARE_DOC_KEYS = _DOC_KEYS - {"title", "description", "type"}


# Suffixes that server frameworks append to a function's name to title the models they
# synthesise for it (pydantic/FastMCP `create_noteArguments`, `create_noteOutput`; other SDKs
# `…Input`, `…Params`, `…Result`, …). Longest first, so one suffix is stripped at most.
_GENERATED_TITLE_SUFFIXES = (
    "parameters", "arguments", "response", "request", "output", "params", "result", "input", "args",
)  # fmt: skip
_NOT_ALNUM = re.compile(r"[^0-9a-z]")
# Bounds as symbols (`length ≤200`, not `maxLength: 200`): the same fact in a third of the
# characters, in the .d.ts and in the agent's prompt.
_BOUND_SYMBOLS = {
    "minimum": "≥", "maximum": "≤", "exclusiveMinimum": ">", "exclusiveMaximum": "<",
    "minLength": "length ≥", "maxLength": "length ≤", "minItems": "items ≥", "maxItems": "items ≤",
    "minProperties": "keys ≥", "maxProperties": "keys ≤",
}  # fmt: skip
# Shortest function-name stem that a generated title may share with the end of a tool name.
MIN_TITLE_STEM = 3


def _squash(text: str) -> str:
    return _NOT_ALNUM.sub("", text.lower())


def _stem(squashed: str) -> str:
    for suffix in _GENERATED_TITLE_SUFFIXES:
        if squashed.endswith(suffix) and len(squashed) > len(suffix):
            return squashed[: -len(suffix)]
    return squashed


def is_generated_title(title: str, names: Sequence[str]) -> bool:
    """True when `title` only respells one of `names` (a type or tool name), in any casing or
    separators and with or without a generated suffix: it carries no information, so printing
    it would only cost agent context on every request."""
    squashed = _squash(title)
    if not squashed:
        return False
    stem = _stem(squashed)
    for name in names:
        other = _squash(name)
        if squashed == other or stem == _stem(other):
            return True
        # `addArguments` for the tool `git_add`: frameworks title a model after the function,
        # which servers often prefix (git_, browser_) when they name the tool.
        if stem != squashed and len(stem) >= MIN_TITLE_STEM and other.endswith(stem):
            return True
    return False


def schema_doc(node: Any, name: str | None = None, *, derived: Sequence[str] = ()) -> list[str]:
    """Doc-comment lines from a schema's annotations and the constraints TS cannot check.

    `name` is the property or type name the lines document: a title that only repeats it is
    dropped; `derived` are the names of a declaration (its own and the tool's) whose generated
    spellings (`create_noteArguments` for `CreateNoteInput`) are dropped too.
    """
    if not isinstance(node, dict):
        return []
    keys = node.keys()
    if keys.isdisjoint(_DOC_KEYS):
        return []
    lines: list[str] = []
    title = node.get("title")
    if (
        isinstance(title, str)
        and title.strip()
        # generated titles ("Body" for `body`) only cost agent context
        and (name is None or _squash(title) != _squash(name))
        and not (derived and is_generated_title(title, derived))
    ):
        lines.append(sanitize_doc(title))
    description = node.get("description")
    if isinstance(description, str):
        if (
            len(description) <= MAX_DOC_CHARS
            and description.isascii()
            and description.isprintable()
            and "*/" not in description
        ):
            text = description.strip()  # sanitize_doc's own fast path, without the call
            keep = bool(text)
        else:
            keep = bool(description.strip())
            text = sanitize_doc(description) if keep else ""
        if keep and text not in lines:
            lines.append(text)
    types = node.get("type")
    integer = types == "integer" or (
        isinstance(types, list) and "integer" in types and "number" not in types
    )
    if keys.isdisjoint(_RARE_DOC_KEYS):  # most schemas document no more than this
        if integer:
            lines.append(CONSTRAINTS_LABEL + "integer.")
        return lines
    constraints: list[str] = ["integer"] if integer else []
    if isinstance(node.get("format"), str):
        constraints.append(f"format: {node['format']}")
    if not keys.isdisjoint(_CONSTRAINT_SET):
        for key in _CONSTRAINT_KEYS:
            value = node.get(key)
            if key in node and isinstance(value, (int, float, str, bool)):
                shown = str(value) if key == "pattern" else _compact_json(value)
                bound = _BOUND_SYMBOLS.get(key)
                constraints.append(f"{bound}{shown}" if bound else f"{key}: {shown}")
    if constraints:
        lines.append(sanitize_doc(CONSTRAINTS_LABEL + ", ".join(constraints) + "."))
    if node.get("readOnly") is True:
        lines.append("Read-only.")
    if node.get("writeOnly") is True:
        lines.append("Write-only.")
    if "default" in node:
        lines.append(sanitize_doc("@default " + _compact_json(node["default"])))
    examples = node.get("examples")
    if isinstance(examples, list):
        lines.extend(sanitize_doc("@example " + _compact_json(e)) for e in examples[:MAX_EXAMPLES])
    if node.get("deprecated") is True:
        lines.append("@deprecated")
    return lines


def pascal_case(text: str) -> str:
    parts = re.split(r"[^A-Za-z0-9]+", text)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


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
        # the `schema_regex.regex_session` of this translation (translate_schema opens it)
        self.regex_report: schema_regex.RegexReport | None = None
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
        found = schema_regex.search(pattern, name)
        if found is None:
            why = "could not be evaluated"
            report = self.regex_report
            if report is not None:
                key = pattern[: schema_regex.MAX_PATTERN_CHARS + 1]
                skipped = next((each for each in report.skipped if each.pattern == key), None)
                if skipped is not None:  # the reason without the (server-written) pattern
                    why = schema_regex.Skipped("", skipped.reason).describe().removeprefix('pattern "" ')
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
        graph = {name: _immediate_refs(node) & asts.keys() for name, node in asts.items()}
        if not any(graph.values()):
            return
        # An edge closes a cycle iff both ends are in one strongly connected component; one
        # linear pass instead of a reachability search from every name (quadratic on big
        # documents such as FHIR's 680 definitions).
        component = _components(graph)
        pointer_of = self.pointer_of
        for name, targets in graph.items():
            bad = {v for v in targets if component[v] == component[name]}
            if bad:
                asts[name] = _replace_refs(asts[name], bad)
                msg = f"recursive $ref to {', '.join(sorted(bad))} without an object or array in between"
                self.warnings.append(
                    f"#{pointer_of.get(name, '')}: {msg} cannot be represented; emitted unknown"
                )
                docs[name].append(f"Warning: {msg} cannot be represented; emitted unknown")

    # --- schemas --------------------------------------------------------------------------

    def type_of(self, node: Any, ptr: str, depth: int) -> t.TypeNode:
        return self.render(self.shape(node, ptr, depth))

    def render(self, shape: Shape) -> t.TypeNode:
        """`render`, but a named type standing in for a kind it does not cover alone is
        replaced by its simple per-kind type: in `{…} | Bar` the `Bar` would re-admit
        every object `Bar` allows, undoing whatever narrowed the object kind."""
        if len(shape) == 1:
            ((k, v),) = shape.items()
            return _UNCONSTRAINED[k] if v is None else v
        values = list(shape.values())
        if len(set(map(id, values))) == 1 and values[0] is not None:
            return values[0]  # e.g. a $ref: the same named type for every kind it allows
        if len(values) > 1 and len(set(map(id, values))) > 1:
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
            if obj != _UNCONSTRAINED["object"]:
                s = conj(s, {**all_kinds(), "object": obj})
        if "array" in s and not n.keys().isdisjoint(_ARRAY_KEYS):
            arr = self.array_type(n, ptr, depth)
            if arr != _UNCONSTRAINED["array"]:
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
        base = self.evaluated_names(rest, ptr, set(), top=True)
        if base is None:
            return branches
        out = []
        for i, (sub, branch) in enumerate(zip(n["oneOf"], branches, strict=True)):
            names = self.evaluated_names(sub, join_pointer(ptr, "oneOf", i), set())
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
                    merged = None if obj is None else _merge(present, obj)
                    deps.append(
                        (name, present if obj is None else merged or t.intersection([present, obj]))
                    )
        for name, present_type in deps:
            absent_type = _FUNCTION if name in _OBJECT_PROTOTYPE_MEMBERS else t.NEVER
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
                        for m in _members(strings)
                        if isinstance(m, t.Literal) and isinstance(m.value, str)
                    ]
                )
            else:
                self.warn_wider(ptr, "propertyNames")
        un = n.get("unevaluatedProperties")
        if self.draft >= 2019 and un is False and "additionalProperties" not in n:
            if not n.keys().isdisjoint(_IN_PLACE_APPLICATORS):
                evaluated = self.evaluated_names(n, ptr, set(), top=True)
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

    def _in_place(self, n: dict[str, Any], ptr: str) -> list[tuple[Any, str]] | None:
        """Subschemas applied to the same instance (None when a $ref cannot be followed)."""
        subs: list[tuple[Any, str]] = []
        for key in ("allOf", "anyOf", "oneOf"):
            for i, sub in enumerate(n.get(key, ())):
                subs.append((sub, join_pointer(ptr, key, i)))
        for key in ("if", "then", "else"):
            if key in n:
                subs.append((n[key], join_pointer(ptr, key)))
        for name, sub in (n.get("dependentSchemas") or {}).items():
            subs.append((sub, join_pointer(ptr, "dependentSchemas", name)))
        if "$ref" in n:
            ref = n["$ref"]
            target = (
                self.resolver.resolve(ref, ptr) if self.resolver and isinstance(ref, str) else None
            )
            if target is None:
                return None
            subs.append((target.node, target.pointer))
        if "$dynamicRef" in n or "$recursiveRef" in n:
            return None
        return subs

    def evaluated_names(
        self, node: Any, ptr: str, seen: set[str], *, top: bool = False
    ) -> set[str] | None:
        """Every property name an in-place part of `node` may evaluate; None = unbounded."""
        if not isinstance(node, dict) or ptr in seen or len(seen) > MAX_DEPTH:
            return set() if ptr in seen or not isinstance(node, dict) else None
        n = normalize(node, ptr, self.draft, lambda *_: None)
        if "additionalProperties" in n or "patternProperties" in n:
            return None
        if not top and "unevaluatedProperties" in n:
            return None
        names = set(n.get("properties", {}))
        subs = self._in_place(n, ptr)
        if subs is None:
            return None
        for sub, sub_ptr in subs:
            more = self.evaluated_names(sub, sub_ptr, seen | {ptr})
            if more is None:
                return None
            names |= more
        return names

    def evaluated_items(
        self, node: Any, ptr: str, seen: set[str], *, top: bool = False
    ) -> int | None:
        """How many leading items in-place parts of `node` may evaluate; None = all of them."""
        if not isinstance(node, dict) or ptr in seen or len(seen) > MAX_DEPTH:
            return 0 if ptr in seen or not isinstance(node, dict) else None
        n = normalize(node, ptr, self.draft, lambda *_: None)
        if "items" in n or "contains" in n or (not top and "unevaluatedItems" in n):
            return None
        count = len(n.get("prefixItems", ()))
        subs = self._in_place(n, ptr)
        if subs is None:
            return None
        for sub, sub_ptr in subs:
            more = self.evaluated_items(sub, sub_ptr, seen | {ptr})
            if more is None:
                return None
            count = max(count, more)
        return count

    def apply_unevaluated_items(self, s: Shape, n: dict[str, Any], ptr: str, depth: int) -> Shape:
        un = n["unevaluatedItems"]
        if un is True or not any(k in n for k in (*_IN_PLACE_APPLICATORS, "contains")):
            return s  # nothing to do, or already handled as `items` by array_type
        count = self.evaluated_items(n, ptr, set(), top=True)
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
        out: dict[str, list[t.TypeNode]] = {}
        if len(values) > MAX_UNION_MEMBERS:
            self._warn(ptr, f"enum with more than {MAX_UNION_MEMBERS} values widened to its types")
            return {k: None for v in values if (k := json_kind(v)) is not None}
        for v in values:
            kind = json_kind(v)
            if kind is None:
                continue
            out.setdefault(kind, []).append(self.literal_node(v, 0))
        return {k: t.union(nodes) for k, nodes in out.items()}

    def literal_node(self, v: Any, depth: int) -> t.TypeNode:
        if v is None:
            return t.NULL
        if isinstance(v, bool):
            return t.Literal(v)
        if isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                return t.NUMBER
            # Any finite JSON number printed back exactly denotes the same double in TS.
            return t.Literal(v) if len(repr(v)) <= MAX_LITERAL_CHARS else t.NUMBER
        if isinstance(v, str):
            return t.Literal(v) if len(v) <= MAX_LITERAL_CHARS else t.STRING
        if depth > MAX_DEPTH:
            return t.UNKNOWN
        if isinstance(v, list):
            items = tuple(self.literal_node(x, depth + 1) for x in v)
            return t.Tuple(items, len(items))
        if isinstance(v, dict):
            props = tuple(t.Property(str(k), self.literal_node(x, depth + 1)) for k, x in v.items())
            return t.Object(props, None if props else t.NEVER)
        return t.UNKNOWN

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

        templates: list[tuple[t.TemplateKey, t.TypeNode]] = []
        exact: list[tuple[str, t.TypeNode]] = []
        regexes: list[tuple[str, str, t.TypeNode]] = []  # (pattern, its pointer, type)
        match_all: list[t.TypeNode] = []  # patterns such as "a*" that match every name
        for pat, sub in n.get("patternProperties", {}).items():
            pat_ptr = join_pointer(ptr, "patternProperties", pat)
            typ = self.type_of(sub, pat_ptr, depth + 1)
            lit = literal_pattern(pat)
            if lit is not None and lit[1] and lit[2]:
                exact.append((lit[0], typ))
            elif lit is not None:
                templates.append((t.TemplateKey(lit[0], not lit[1], not lit[2]), typ))
            elif matches_every_name(pat):
                match_all.append(typ)
            else:
                regexes.append((pat, pat_ptr, typ))

        def matching(name: str) -> tuple[list[t.TypeNode], list[t.TypeNode]]:
            """(types of the patterns that match `name`, of those that may: unknown)."""
            out = [*match_all, *(typ for key, typ in templates if template_matches(key, name))]
            out += [typ for lit, typ in exact if lit == name]
            maybe: list[t.TypeNode] = []
            for pat, pat_ptr, typ in regexes:
                found = self.pattern_matches(pat, name, pat_ptr)
                if found:
                    out.append(typ)
                elif found is None:
                    maybe.append(typ)
            return out, maybe

        members: list[t.Property] = []
        names = list(props)
        if len(names) > MAX_PROPERTIES:
            self._warn(
                ptr,
                f"more than {MAX_PROPERTIES} properties; the rest fall under the index signature",
            )
            names = names[:MAX_PROPERTIES]
            ap = True
        patterned = bool(templates or exact or regexes or match_all)
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
                key = name if plain else escape_token(str(name))
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
            if optional and name in _OBJECT_PROTOTYPE_MEMBERS:
                typ = t.union([typ, _FUNCTION])  # `{}` inherits e.g. toString from Object.prototype
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
        declared = {p.name for p in members} if exact else set()
        for exact_name, _ in exact:
            if exact_name not in declared:
                typ = t.intersection(matching(exact_name)[0])
                if exact_name in _OBJECT_PROTOTYPE_MEMBERS:
                    typ = t.union([typ, _FUNCTION])
                members.append(t.Property(exact_name, typ, optional=True))
                declared.add(exact_name)

        # only the index signature and match-all patterns depend on it
        any_optional = (ap is not True or bool(match_all)) and any(p.optional for p in members)
        index: t.TypeNode | None
        if ap is True:
            index = t.UNKNOWN
        elif ap is False and not regexes:
            index = None if members or templates else t.NEVER
        else:
            parts = [p.type for p in members] + [typ for _, _, typ in regexes]
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
        if any(t.is_never(p.type) and not p.optional for p in members):
            return t.NEVER
        return t.Object(tuple(members), index, patterns=finish_patterns(pattern_sigs, index))

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
        if rest_t is not None and t.is_never(rest_t):
            rest_t = None
        if max_items is not None and max_items <= len(elems):
            elems, rest_t = elems[:max_items], None
        if max_items is not None and max_items < min_items:
            return t.NEVER
        if rest_t is None and min_items > len(elems):
            return t.NEVER
        required = min(min_items, len(elems))
        if rest_t is not None and len(elems) < min_items <= MAX_TUPLE_EXPANSION:
            elems += [rest_t] * (min_items - len(elems))
            required = min_items
        if (
            rest_t is not None
            and max_items is not None
            and len(elems) < max_items <= MAX_TUPLE_EXPANSION
        ):
            elems += [rest_t] * (max_items - len(elems))
            rest_t = None
        # A required slot typed never, or an optional one followed by more: keep TS honest.
        if any(e == t.NEVER for e in elems[:required]):
            return t.NEVER
        if not elems and rest_t is not None:
            return t.Array(rest_t)
        return t.Tuple(tuple(elems), required, rest_t)


def _merge(x: t.TypeNode, y: t.TypeNode) -> t.TypeNode | None:
    """`x & y` as one object type, distributing over a small union of object types."""
    if isinstance(x, t.Object) and isinstance(y, t.Object):
        return merge_objects(x, y)
    if isinstance(x, t.Union) and isinstance(y, t.Object):
        x, y = y, x
    if (
        isinstance(x, t.Object)
        and isinstance(y, t.Union)
        and len(y.members) <= MAX_DISTRIBUTE
        and all(isinstance(m, t.Object) for m in y.members)
    ):
        merged = [merge_objects(x, m) for m in y.members if isinstance(m, t.Object)]
        if all(m is not None for m in merged):
            return t.union([m for m in merged if m is not None])
    return None


def _key_type(obj: t.Object, name: str) -> t.TypeNode | None:
    """What `obj` requires of an undeclared property `name`; None when it forbids it."""
    parts = [typ for key, typ in obj.patterns if template_matches(key, name)]
    if obj.index is not None:
        parts.append(obj.index)
    return t.intersection(parts) if parts else None


def merge_objects(a: t.Object, b: t.Object) -> t.TypeNode | None:
    """One object type for `a & b` (keeps excess-property checks that `&` would lose).

    Every property gets the conjunction of what both sides demand of it; a name one side
    forbids must be absent. None when a side has no index signature information to merge.
    """
    if len(a.properties) + len(b.properties) > 2 * MAX_PROPERTIES:
        return None
    own_a = {p.name: p for p in a.properties}
    own_b = {p.name: p for p in b.properties}
    props: list[t.Property] = []
    for name in [*own_a, *(n for n in own_b if n not in own_a)]:
        pa, pb = own_a.get(name), own_b.get(name)
        ta = pa.type if pa is not None else _key_type(a, name)
        tb = pb.type if pb is not None else _key_type(b, name)
        required = (pa is not None and not pa.optional) or (pb is not None and not pb.optional)
        if ta is None or tb is None:
            if required:
                return t.NEVER
            continue  # one side forbids it: it must be absent
        typ = t.intersection([ta, tb])
        if typ == t.NEVER and required:
            return t.NEVER
        first = pa if pa is not None else pb
        assert first is not None
        readonly = (pa is not None and pa.readonly) or (pb is not None and pb.readonly)
        props.append(t.Property(name, typ, optional=not required, readonly=readonly, doc=first.doc))
    optional = [p for p in props if p.optional]
    index: t.TypeNode | None = None
    if a.index is not None and b.index is not None:
        index = t.intersection([a.index, b.index])
        if optional and index != t.UNKNOWN:
            index = t.union([index, t.UNDEFINED])
    elif a.index is None and b.index is None and not props:
        index = t.NEVER
    patterns = []
    for key, typ in [*a.patterns, *b.patterns]:
        if any(template_matches(key, p.name) for p in optional):
            typ = t.union([typ, t.UNDEFINED])
        patterns.append((key, typ))
    if index is None and not props and not patterns:
        index = t.NEVER
    return t.Object(tuple(props), index, patterns=finish_patterns(patterns, index))


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


def close_object(
    node: t.TypeNode | None,
    allowed: Sequence[str],
    expand: Callable[[str], t.TypeNode | None] | None = None,
) -> t.TypeNode:
    """Restrict an object type to the property names in `allowed` (an exact object type).

    `expand` inlines (one level of) named types so they can be closed too.
    """
    if node is None:
        node = t.Object(index=t.UNKNOWN)
    if isinstance(node, t.Union):
        return t.union([close_object(m, allowed, expand) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([close_object(m, allowed, expand) for m in node.members])
    if isinstance(node, t.Ref) and expand is not None:
        inner = expand(node.name)
        return node if inner is None else close_object(inner, allowed, None)
    if not isinstance(node, t.Object):
        return node  # a named type: left open (wider, still sound)
    keep = set(allowed)
    props: list[t.Property] = []
    for prop in node.properties:
        if prop.name in keep:
            props.append(prop)
        elif not prop.optional:
            return t.NEVER  # a required property that may not exist
    declared = {p.name for p in props}
    for name in allowed:
        if name in declared:
            continue
        parts = [typ for key, typ in node.patterns if template_matches(key, name)]
        if node.index is not None:
            parts.append(node.index)
        if not parts:
            continue  # this member already forbids the name
        typ = t.intersection(parts)
        if name in _OBJECT_PROTOTYPE_MEMBERS:
            typ = t.union([typ, _FUNCTION])
        props.append(t.Property(name, typ, optional=True))
    return t.Object(tuple(props), None if props else t.NEVER)


def limit_items(node: t.TypeNode | None, count: int, rest: t.TypeNode | None) -> t.TypeNode:
    """Items after the first `count` must match `rest` (None: must not exist)."""
    if node is None:
        node = t.Array(t.UNKNOWN)
    if isinstance(node, t.Union):
        return t.union([limit_items(m, count, rest) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([limit_items(m, count, rest) for m in node.members])
    if isinstance(node, t.Array):
        node = t.Tuple((), 0, node.element)
    if not isinstance(node, t.Tuple):
        return node
    elems = list(node.elements)
    required = node.required
    tail = node.rest
    if len(elems) < count and tail is not None:
        elems += [tail] * (count - len(elems))
    if rest is None:
        if required > count:
            return t.NEVER
        return t.Tuple(tuple(elems[:count]), min(required, count), None)
    elems = elems[:count] + [t.intersection([e, rest]) for e in elems[count:]]
    new_tail = None if tail is None else t.intersection([tail, rest])
    if not elems and new_tail is not None:
        return t.Array(new_tail)
    return t.Tuple(tuple(elems), required, new_tail)


def _components(graph: dict[str, set[str]]) -> dict[str, str]:
    """Each node's strongly connected component (named by its root); iterative Tarjan, so
    long alias chains cannot exhaust the stack."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    component: dict[str, str] = {}
    for root in graph:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        while work:
            v, successors = work[-1]
            for w in successors:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component[w] = v
                        if w == v:
                            break
    return component


def _immediate_refs(node: t.TypeNode) -> set[str]:
    if isinstance(node, t.Ref):
        return {node.name}
    if isinstance(node, (t.Union, t.Intersection)):
        out: set[str] = set()
        for m in node.members:
            out |= _immediate_refs(m)
        return out
    return set()


def _replace_refs(node: t.TypeNode, names: set[str]) -> t.TypeNode:
    if isinstance(node, t.Ref) and node.name in names:
        return t.UNKNOWN
    if isinstance(node, t.Union):
        return t.union([_replace_refs(m, names) for m in node.members])
    if isinstance(node, t.Intersection):
        return t.intersection([_replace_refs(m, names) for m in node.members])
    return node


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
    with schema_regex.regex_session(PATTERN_BUDGET_S) as report:
        translator.regex_report = report
        result = translator.run()
    result.root_doc = [*doc, *result.root_doc]
    return result
