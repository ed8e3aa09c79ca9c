"""Stable names: MCP tool name -> JS export identifier (spec §6.1), server id -> module path (§5.0.1).

Both mappings are agent-visible (imports, `__meta__`, discovery) and committed in out/, so they
must be pure functions of the *set* of names: same tools in any order -> same identifiers.

Choices beyond the letter of the spec (documented in docs/DESIGN.md "Names"):

* "Illegal identifier characters" are judged against the ASCII identifier alphabet
  `[A-Za-z0-9_$]`. ES allows many Unicode letters too, but whether a given code point is
  ID_Start/ID_Continue differs between engines' Unicode versions and between Python and JS; an
  ASCII identifier is valid everywhere, reads the same in every prompt, and cannot hide
  look-alike characters (homoglyphs) from a reviewer. Each non-ASCII code point becomes one `_`.
* Generated modules are ES modules, which are always strict code. Besides the spec's reserved
  words we therefore also suffix `_` to the words that are reserved in strict code or cannot be
  bound there (`enum`, `implements`, `interface`, `package`, `private`, `protected`, `public`,
  `arguments`, `eval`): `export async function eval()` is a SyntaxError in a module. Names of
  globals (`undefined`, `Promise`, `Object`) are legal module bindings and accepted by tsc, so
  they are kept.
* The generated module itself binds `__meta__` and two imports; a tool whose identifier would be
  one of those names is treated like a reserved word (suffix `_`), so it can never redeclare them.
* Export names that change what the module *is* are treated like reserved words too
  (`MODULE_SEMANTICS_NAMES`). `then` makes the module namespace a thenable: `await
  import("@codemode/servers/x")` (and the implicit await of a dynamic import's promise) calls the
  tool with resolve/reject and never settles, and tsc types the import as `unknown`.
  `__proto__` sets the prototype of any object the namespace is copied into by assignment
  (`Object.assign({}, ns)`). `__esModule` is the interop marker by which TypeScript, Babel and
  bundlers decide what a default import of the module means. (`default` is a reserved word
  already.) Other `Object.prototype` names (`constructor`, `toString`, ...) are plain own
  properties of the null-prototype namespace and stay; Symbol-keyed protocols
  (`Symbol.toStringTag`, `Symbol.iterator`) cannot be named by an identifier export at all.
* Collisions: every tool's clean name is claimed first (tools in alphabetical order of their
  canonical name), then duplicates get `__2`, `__3`, ... skipping every name already taken. So
  the first occurrence keeps the clean name, and a tool whose *clean* name happens to look like
  a suffixed one (`a_b__2`) is never displaced by another tool's suffix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable

# Spec §6.1 list, verbatim.
SPEC_RESERVED_WORDS = frozenset(
    {
        "break", "case", "class", "const", "continue", "debugger", "default", "delete", "do",
        "else", "export", "extends", "false", "finally", "for", "function", "if", "import", "in",
        "instanceof", "new", "null", "return", "super", "switch", "this", "throw", "true", "try",
        "typeof", "var", "void", "while", "with", "yield", "let", "static", "await",
    }
)  # fmt: skip
# Reserved or not bindable in strict (module) code; see the module docstring.
STRICT_MODE_RESERVED_WORDS = frozenset(
    {
        "enum", "implements", "interface", "package", "private", "protected", "public",
        "arguments", "eval",
    }
)  # fmt: skip
# Bindings every generated server module declares itself (templates/server.js.j2), and those of
# earlier versions of it (`__deepFreeze`): reserved once, a name stays reserved, so that no
# tool's export name changes with the template.
MODULE_INTERNAL_NAMES = frozenset(
    {"__meta__", "__callTool", "__deepFreeze", "__freeze", "__frozenJson", "__toolFunction"}
)
# Export names that change the semantics of the module namespace or its copies; see the module
# docstring.
MODULE_SEMANTICS_NAMES = frozenset({"then", "__proto__", "__esModule"})
RESERVED_IDENTIFIERS = (
    SPEC_RESERVED_WORDS
    | STRICT_MODE_RESERVED_WORDS
    | MODULE_INTERNAL_NAMES
    | MODULE_SEMANTICS_NAMES
)

# Used when a tool name is empty (nothing to sanitise) - still a valid, stable identifier.
EMPTY_TOOL_IDENTIFIER = "_"
# Used when a server id normalises to nothing (e.g. "日本" or "---").
EMPTY_MODULE_PATH = "server"

_ILLEGAL_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_$]")
# An ASCII JS identifier, the one test every generated name and printed property key uses.
# `\Z`, not `$`: `$` also matches before a final newline, which would let a server-chosen
# property name such as "a\n" be printed raw and break the declaration file.
IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_NOT_ALNUM_RUN = re.compile(r"[^A-Za-z0-9]+")
_ILLEGAL_PATH_CHAR = re.compile(r"[^a-z0-9-]")
_DASH_RUN = re.compile(r"-{2,}")


def is_identifier(text: str) -> bool:
    """True when `text` is usable as-is as an ASCII JS identifier (not checking reserved words)."""
    return bool(IDENTIFIER.match(text))


def tool_identifier(tool_name: str) -> str:
    """§6.1 steps 1-3 for one name, before collision handling."""
    ident = _ILLEGAL_IDENTIFIER_CHAR.sub("_", tool_name)
    if not ident:
        return EMPTY_TOOL_IDENTIFIER
    if ident[0].isdigit():
        ident = "_" + ident
    if ident in RESERVED_IDENTIFIERS:
        ident += "_"
    return ident


def _assign_unique(
    names: Iterable[str], clean: Callable[[str], str], separator: str
) -> dict[str, str]:
    """Name -> unique cleaned form, independent of input order (§6.1 and §5.0.1 share this).

    Names are taken in alphabetical order; the first occurrence of each clean form keeps it,
    then the duplicates get `<clean><separator>N`, N from 2, skipping anything already taken.
    """
    ordered = sorted(set(names))
    base = {name: clean(name) for name in ordered}
    taken: set[str] = set()
    result: dict[str, str] = {}
    duplicates: list[str] = []
    for name in ordered:  # pass 1: the first occurrence of each clean form keeps it
        if base[name] in taken:
            duplicates.append(name)
        else:
            taken.add(base[name])
            result[name] = base[name]
    for name in duplicates:  # pass 2: suffixes, skipping anything already taken
        result[name] = unique_name(base[name], taken, separator)
        taken.add(result[name])
    return result


def unique_name(base: str, taken: Container[str], separator: str = "") -> str:
    """`base` when it is free, else `<base><separator>N` with the smallest free N from 2.

    The one suffix rule of every generated name: export identifiers (`__`), module paths
    (`--`) and TypeScript type names (no separator: `Note`, `Note2`).
    """
    if base not in taken:
        return base
    n = 2
    while f"{base}{separator}{n}" in taken:
        n += 1
    return f"{base}{separator}{n}"


def assign_export_names(tool_names: Iterable[str]) -> dict[str, str]:
    """Canonical tool name -> unique export identifier, independent of input order (§6.1)."""
    return _assign_unique(tool_names, tool_identifier, "__")


def module_path(server_id: str) -> str:
    """§5.0.1 normalisation of one id, before collision handling."""
    path = _ILLEGAL_PATH_CHAR.sub("-", server_id.lower())
    path = _DASH_RUN.sub("-", path).strip("-")
    return path or EMPTY_MODULE_PATH


def assign_module_paths(server_ids: Iterable[str]) -> dict[str, str]:
    """Config id -> unique module path; collisions get `--2`, `--3` in alphabetical id order.

    A normalised path never contains `--` (runs are collapsed), so a suffixed path can never
    equal another server's clean path.
    """
    return _assign_unique(server_ids, module_path, "--")


def pascal_case(text: str) -> str:
    """`get_note` -> `GetNote`, `create-note v2` -> `CreateNoteV2`, `$x` -> `X`.

    Splits at every run of characters other than ASCII letters and digits and upper-cases the
    first letter of each part. The result may be empty or start with a digit: the callers
    decide (the translator's NameScope.claim makes it a valid, unique type name).
    """
    return "".join(p[:1].upper() + p[1:] for p in _NOT_ALNUM_RUN.split(text) if p)
