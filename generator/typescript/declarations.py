"""`$ref` targets -> named declarations: one `type X = …` per target, reached by name.

One stage of the translator (translator.py). Each local `$ref` target (resolved by refs.py)
gets a single named declaration, translated once and in first-reference order; that is also
what makes recursion terminate (a target still in progress is referenced by name with every
kind open). Names come from the pointer's last meaningful token or the target's `title`,
made unique by the caller's `claim`. Finished targets are cached by pointer and, when the
document has no `$id`, by `$ref` text, so big documents resolve each reference once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemode_gen.generator.names import pascal_case
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.shapes import KINDS, Shape, all_kinds
from codemode_gen.generator.typescript.state import TranslationState

__all__ = ["MAX_DECLS", "RefDeclarations"]

# Most named helper declarations per translation (bounds output of ref-heavy documents).
MAX_DECLS = 2000

_STRUCTURAL_TOKENS = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "items", "prefixItems", "allOf", "anyOf",
     "oneOf", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
     "dependentSchemas", "dependencies", "propertyNames", "unevaluatedItems", "unevaluatedProperties"}
)  # fmt: skip


class RefDeclarations(TranslationState):
    """`$ref` -> the shape of a named declaration, declaring the target on first reference."""

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
