"""Object keywords -> the object kind's type: properties, index signatures, closed names.

One stage of the translator (translator.py). `properties`/`required`/`additionalProperties`
and `patternProperties` (patterns.py) make one object type; `propertyNames`, `maxProperties:
0` and `unevaluatedProperties: false` (with the names evaluated.py finds) close it to a finite
set of names; `dependentRequired`/`dependentSchemas` become "absent, or present and …" unions,
and a oneOf under `unevaluatedProperties: false` is closed branch by branch. Every property's
subschema is translated with its own doc comment (docs.py) and warning sink.
"""

from __future__ import annotations

from typing import Any

from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.docs import schema_doc
from codemode_gen.generator.typescript.evaluated import evaluated_names
from codemode_gen.generator.typescript.patterns import PatternTypes
from codemode_gen.generator.typescript.refs import join_pointer
from codemode_gen.generator.typescript.shapes import (
    FUNCTION,
    MAX_PROPERTIES,
    OBJECT_PROTOTYPE_MEMBERS,
    Shape,
    all_kinds,
    close_object,
    conj,
    is_literalish,
    merge_types,
    union_members,
)
from codemode_gen.generator.typescript.state import IN_PLACE_APPLICATORS, TranslationState
from codemode_gen.jsonio import pointer_token

__all__ = ["ObjectKeywords"]


class ObjectKeywords(TranslationState):
    """The object keywords of one schema node -> the object kind's type."""

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
            names = evaluated_names(
                sub, join_pointer(ptr, "oneOf", i), set(), self.draft, self.resolver
            )
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
            if not n.keys().isdisjoint(IN_PLACE_APPLICATORS):
                evaluated = evaluated_names(n, ptr, set(), self.draft, self.resolver, top=True)
                if evaluated is None:
                    self.warn_wider(ptr, "unevaluatedProperties")
                else:
                    out.append(sorted(evaluated))
        elif (
            self.draft >= 2019
            and un not in (None, True, False)
            and not n.keys().isdisjoint(IN_PLACE_APPLICATORS)
        ):
            self.warn_wider(ptr, "unevaluatedProperties")
        return out

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
            and n.keys().isdisjoint(IN_PLACE_APPLICATORS)
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
