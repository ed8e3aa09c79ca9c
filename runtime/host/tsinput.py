"""TypeScript input: erase the types of an agent script so QuickJS can run it, keeping positions.

Agents read TypeScript declarations and often answer in TypeScript (`const n: Note = …`, `as`,
interfaces, generics, `satisfies`, `!`). QuickJS only parses JavaScript, so `CodeMode.run` calls
`erase_types` once, before the syntax check, and the sandbox runs what it returns.

The technique is ts-blank-space's (bloomberg/ts-blank-space, whose rules this follows): every
character of a type is replaced by whitespace and every line break is kept, so the JavaScript
that is left sits at the same line:column as in the agent's source, and every SYNTAX_ERROR,
stack frame and `path` points at what the agent wrote. No source map is needed. QuickJS counts
columns in UTF-8 bytes, so an erased character becomes whitespace of the same UTF-8 length
(U+00A0 for two bytes, U+2002 for three, two U+00A0 for four; this keeps UTF-16 columns too).
In a few places erasing alone would change how the rest parses (automatic semicolon insertion
after a statement that ends in `as T`, an arrow whose return type spans lines): there one
erased character becomes `;`, `(` or `)`, as ts-blank-space does.

The parse is tree-sitter's TypeScript grammar (a real parser, error-tolerant: where the source
does not parse, types outside the broken part are still erased and QuickJS reports the error at
its own position). A script without anything to erase, i.e. plain JavaScript, comes back as the
very same string, and finding that out is one parse plus one query, both in C: about 0.2 ms for
20 lines, 2 ms for 200 (bench/typescript.py).

TypeScript that has runtime behaviour cannot be erased: `enum`, a `namespace`/`module` with
values, parameter properties (`constructor(private x: T)`), `import x = …`, `export = …`, the
prefix assertion `<T>value`, an `as`/`satisfies` whose erasure would regroup the operators
around it, and a type that tree-sitter (unlike TypeScript) continues onto a line starting with
`[`. Each is a SYNTAX_ERROR diagnostic (§3.3.3) at its line:column (QuickJS's units: UTF-8 bytes)
with a hint saying what to write instead, and the script does not run. Decorators are JavaScript
syntax that QuickJS does not support: they are left for its own SYNTAX_ERROR.

This module owns the entry points (`erase_types`, `runnable`) and the parse (tree-sitter, one
query for every TypeScript-only node); the rules for each node are tserase.py's, the blanking
that keeps positions tsblank.py's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host.tserase import Eraser

__all__ = ["Erased", "erase_types", "runnable"]

log = logging.getLogger(__name__)

#: Non-erasable constructs reported per script; one is enough to act on, a few save round trips.
MAX_DIAGNOSTICS = 5


@dataclass(frozen=True)
class Erased:
    """`code` with its types erased (the same object when there was nothing to erase), or the
    SYNTAX_ERROR diagnostics of what cannot be erased (then `code` must not run)."""

    code: str
    diagnostics: tuple[Diagnostic, ...] = ()


def erase_types(code: str) -> Erased:
    """Erase the TypeScript in `code`, keeping every other character at its line:column."""
    if not code:
        return Erased(code)
    try:
        return _erase(code)
    except Exception:  # a bug here must not stop JavaScript from running as written
        log.exception("erasing TypeScript types failed; running the script as written")
        return Erased(code)


#: The engine's syntax check of a script: its SYNTAX_ERROR diagnostics, or None when it parses.
SyntaxCheck = Callable[[str], Awaitable["list[Diagnostic] | None"]]


async def runnable(
    code: str, syntax_errors: SyntaxCheck, erased: Erased | None = None
) -> tuple[str, list[Diagnostic]]:
    """What a run executes for the agent's `code`, or why it refuses to: `(script, [])` with the
    types erased, or `(code, diagnostics)`, the TypeScript that cannot be erased or the engine's
    syntax error, and then nothing runs. `CodeMode.run` and `codemode-gen check` both ask this,
    so `check` refuses exactly what `run` refuses, with the same diagnostics. `erased`: what
    `erase_types(code)` gave already (a host erases long scripts in a helper process)."""
    if erased is None:
        erased = erase_types(code)
    if erased.diagnostics:
        return code, list(erased.diagnostics)
    script = erased.code
    syntax = await syntax_errors(script)
    if syntax is not None and script is not code and await syntax_errors(code) is None:
        return code, []  # JavaScript the TypeScript grammar misread: run it as written
    if syntax is not None:
        return code, syntax
    return script, []


def _erase(code: str) -> Erased:
    source = code.encode("utf-8", "surrogatepass")
    tree = ts_parser().parse(source)
    root = tree.root_node
    nodes = _candidates(root)
    if not nodes:
        return Erased(code)
    eraser = Eraser(source, check_errors=root.has_error)
    for node in nodes:
        eraser.visit(node)
    if eraser.diagnostics:
        return Erased(code, tuple(eraser.diagnostics[:MAX_DIAGNOSTICS]))
    if not eraser.ranges:
        return Erased(code)
    return Erased(eraser.result().decode("utf-8", "surrogatepass"))


# ------------------------------------------------------------------------------------- parser

# Every node that is, or marks, TypeScript-only syntax. Captured in one query (run in C), so a
# script without any costs a parse and this query, never a walk in Python.
_QUERY = """
[
  (interface_declaration) (type_alias_declaration) (ambient_declaration) (enum_declaration)
  (internal_module) (module) (function_signature) (import_alias) (import_require_clause)
  (abstract_class_declaration) (implements_clause) (accessibility_modifier) (override_modifier)
  (method_signature) (abstract_method_signature) (index_signature)
  (type_annotation) (asserts_annotation) (type_predicate_annotation)
  (type_arguments) (type_parameters) (as_expression) (satisfies_expression)
  (non_null_expression) (type_assertion) (optional_parameter)
] @ts
(import_statement "type" @ts)
(import_specifier "type" @ts)
(export_statement "type" @ts)
(export_specifier "type" @ts)
(export_statement "=" @ts)
(variable_declarator "!" @ts)
(public_field_definition ["declare" "abstract" "readonly" "?" "!"] @ts)
(method_definition "?" @ts)
(required_parameter "readonly" @ts)
(optional_parameter "readonly" @ts)
(required_parameter pattern: (this) @ts)
"""

_local = threading.local()


@cache
def _language() -> Any:
    import tree_sitter
    import tree_sitter_typescript

    return tree_sitter.Language(tree_sitter_typescript.language_typescript())


@cache
def _query() -> Any:
    import tree_sitter

    return tree_sitter.Query(_language(), _QUERY)


def ts_parser() -> Any:
    """A parser per thread (a tree-sitter Parser is not safe to share between threads)."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter

        parser = _local.parser = tree_sitter.Parser(_language())
    return parser


def _candidates(root: Any) -> list[Any]:
    """The captured nodes in source order, outer before inner."""
    import tree_sitter

    captures = tree_sitter.QueryCursor(_query()).captures(root)
    nodes = captures.get("ts", [])
    nodes.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return nodes
