"""What one translation knows so far, and the helpers every keyword family of the walk shares.

The translator (translator.py) walks a schema once, and each keyword family lives in its own
stage module: objects.py (object keywords), arrays.py (array keywords), declarations.py (`$ref`
targets as named declarations). They recurse into each other through `shape` and share one
state — the named targets found so far, their finished shapes, the warning sinks of the
declaration being translated — so that state, its warnings and its rendering live here, once,
as the base every family extends. `shape` itself, the walk, is translator.py's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from codemode_gen import safe_jsonschema
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.normalize import detect_draft
from codemode_gen.generator.typescript.patterns import undecided_reason
from codemode_gen.generator.typescript.refs import Resolver
from codemode_gen.generator.typescript.shapes import MAX_DEPTH, Shape, is_literalish, render

__all__ = ["IN_PLACE_APPLICATORS", "LEAF_KEYS", "REF_LEAF_KEYS", "TranslationState"]

# The keywords that apply subschemas to the same instance (they may evaluate its properties
# and items, so `unevaluated*` depends on them).
IN_PLACE_APPLICATORS = (
    "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "$recursiveRef", "if", "dependentSchemas",
)  # fmt: skip
# Keys that never change a schema's shape beyond its single `type` (docs and constraints TS
# cannot express): such leaves skip normalisation entirely.
LEAF_KEYS = frozenset(
    {"type", "title", "description", "$comment", "default", "examples", "format", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
     "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding"}
)  # fmt: skip
REF_LEAF_KEYS = LEAF_KEYS | {"$ref"}


class TranslationState(ABC):
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

    def known_ref_type(self, node: Any, depth: int) -> t.TypeNode | None:
        """The type of a plain `{"$ref": …, …docs}` (what `shape`'s fast path would give)
        when the reference was already resolved and its target finished; else None."""
        if type(node) is dict and depth <= MAX_DEPTH and "$ref" in node and "type" not in node:
            ref = node["$ref"]
            if type(ref) is str and node.keys() <= REF_LEAF_KEYS:
                return self.ref_types.get(ref)
        return None

    @abstractmethod
    def shape(self, node: Any, ptr: str, depth: int) -> Shape:
        """The shape of a subschema: the walk (translator.py), through which every keyword
        family recurses into the subschemas its keywords hold."""
