"""`$ref` resolution inside one schema document.

A tool schema is self-contained: the translator never fetches anything (a server could
point `$ref` at any URL). What it can resolve cheaply it resolves: `#`, any JSON Pointer
fragment (with `~0`/`~1` and percent-decoding), `$id`-scoped resources embedded in the
document and `$anchor`s (or draft-07 `"$id": "#name"`). Everything else is reported by the
caller as non-local and becomes `unknown`.

Targets are identified by their JSON Pointer from the document root so the translator can
give each one a single named declaration (which is also how recursion terminates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from codemode_gen.jsonio import pointer_token, resolve_pointer

# Base URI of a document without `$id`. The `.invalid` TLD (RFC 2606) can never name a real
# resource, so a relative `$ref` can only ever resolve to something inside this document.
DEFAULT_BASE = "https://codemode.invalid/schema.json"

# Keywords whose value is one subschema / a map of subschemas / a list of subschemas.
# Only these are walked for `$id`/`$anchor`: an `$id` inside `const` or `examples` is data.
_SCHEMA_KEYS = (
    "additionalProperties", "additionalItems", "items", "not", "if", "then", "else",
    "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
)  # fmt: skip
_MAP_KEYS = (
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
)
_LIST_KEYS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")

# The index walk looks each key up once: what kinds of value it walks (bit flags).
_ONE, _MAP, _LIST = 1, 2, 4
_WALK_KINDS: dict[str, int] = {}
for _key in _SCHEMA_KEYS:
    _WALK_KINDS[_key] = _WALK_KINDS.get(_key, 0) | _ONE
for _key in _MAP_KEYS:
    _WALK_KINDS[_key] = _WALK_KINDS.get(_key, 0) | _MAP
for _key in _LIST_KEYS:
    _WALK_KINDS[_key] = _WALK_KINDS.get(_key, 0) | _LIST
# A subschema with none of these keys indexes nothing (most property schemas): not visited.
_INDEXED_KEYS = frozenset({*_WALK_KINDS, "$id", "id", "$anchor", "$dynamicAnchor"})

_MISSING = object()  # resolve_pointer's answer for a pointer into nothing

# Bounds the index walk on hostile documents (very deep nesting would exhaust the stack).
MAX_INDEX_DEPTH = 200


def join_pointer(ptr: str, *tokens: str | int) -> str:
    if len(tokens) == 1:
        return f"{ptr}/{pointer_token(str(tokens[0]))}"
    if len(tokens) == 2:
        return f"{ptr}/{pointer_token(str(tokens[0]))}/{pointer_token(str(tokens[1]))}"
    return ptr + "".join("/" + pointer_token(str(t)) for t in tokens)


def _strip_fragment(uri: str) -> str:
    return uri.split("#", 1)[0]


def resolve_uri(base: str, ref: str) -> str:
    """RFC 3986 reference resolution that also copes with non-hierarchical bases (urn:).

    Malformed URIs (e.g. "http://[") resolve to themselves: they then match no resource.
    """
    if ref.startswith("#"):
        return _strip_fragment(base) + ref
    try:
        if urlsplit(ref).scheme:
            return ref
        if urlsplit(base).scheme in ("http", "https", "file", "ftp"):
            return urljoin(base, ref)
    except ValueError:
        return ref
    return ref  # relative reference against a urn: base has no defined meaning


@dataclass
class Target:
    pointer: str  # JSON Pointer from the document root
    node: Any


@dataclass
class Resolver:
    """Index of the resources and anchors of one document; `resolve` maps a `$ref` to a node."""

    root: Any
    draft: int = 2020
    resources: dict[str, str] = field(default_factory=dict)  # absolute URI (no fragment) -> pointer
    anchors: dict[str, str] = field(default_factory=dict)  # absolute URI#anchor -> pointer
    scopes: dict[str, str] = field(default_factory=dict)  # pointer of an `$id` -> its base URI
    _cache: dict[tuple[str, str], Target | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scopes[""] = DEFAULT_BASE
        self._walk(self.root, "", DEFAULT_BASE, 0)
        self.resources.setdefault(DEFAULT_BASE, "")

    def _walk(self, node: Any, ptr: str, base: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > MAX_INDEX_DEPTH:
            return
        ident = node.get("$id", node.get("id") if self.draft < 2019 else None)
        if isinstance(ident, str) and not ("$ref" in node and self.draft < 2019):
            if ident.startswith("#") and self.draft < 2019:
                self.anchors.setdefault(_strip_fragment(base) + ident, ptr)
            else:
                base = resolve_uri(base, ident)
                self.resources.setdefault(_strip_fragment(base), ptr)
                self.scopes[ptr] = base
        if "$anchor" in node or "$dynamicAnchor" in node:
            for key in ("$anchor", "$dynamicAnchor"):
                anchor = node.get(key)
                if isinstance(anchor, str):
                    self.anchors.setdefault(_strip_fragment(base) + "#" + anchor, ptr)
        kinds = _WALK_KINDS
        for key, value in node.items():
            kind = kinds.get(key)
            if kind is None:
                continue  # most keys: annotations, validation keywords, data
            if isinstance(value, dict):
                if kind & _ONE:
                    if not _INDEXED_KEYS.isdisjoint(value):
                        self._walk(value, f"{ptr}/{key}", base, depth + 1)
                elif kind & _MAP:
                    for name, sub in value.items():
                        if isinstance(sub, dict) and not _INDEXED_KEYS.isdisjoint(sub):
                            self._walk(sub, f"{ptr}/{key}/{pointer_token(name)}", base, depth + 1)
            elif kind & _LIST and isinstance(value, list):
                for i, sub in enumerate(value):
                    if isinstance(sub, dict) and not _INDEXED_KEYS.isdisjoint(sub):
                        self._walk(sub, f"{ptr}/{key}/{i}", base, depth + 1)

    def base_at(self, ptr: str) -> str:
        """The base URI in effect at `ptr`: that of the nearest enclosing `$id`."""
        if len(self.scopes) == 1:
            return self.scopes[""]
        while ptr:
            if ptr in self.scopes:
                return self.scopes[ptr]
            ptr = ptr.rpartition("/")[0]
        return self.scopes[""]

    def resolve(self, ref: str, at: str) -> Target | None:
        """The node `ref` (found at pointer `at`) points to, or None when it is not local."""
        base = self.base_at(at)
        key = (base, ref)
        if key not in self._cache:
            self._cache[key] = self._resolve(base, ref)
        return self._cache[key]

    def _resolve(self, base: str, ref: str) -> Target | None:
        absolute = resolve_uri(base, ref)
        doc, _, fragment = absolute.partition("#")
        if fragment and not fragment.startswith("/"):
            ptr = self.anchors.get(doc + "#" + unquote(fragment))
            return None if ptr is None else self._target(ptr)
        start = self.resources.get(doc)
        if start is None:
            return None
        return self._target(start + unquote(fragment)) if fragment else self._target(start)

    def _target(self, ptr: str) -> Target | None:
        node = resolve_pointer(self.root, ptr, _MISSING)
        return None if node is _MISSING else Target(ptr, node)
