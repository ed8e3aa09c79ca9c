"""The erasure rules: which TypeScript-only syntax nodes are blanked, where a mark is needed, and
which constructs cannot be erased (SYNTAX_ERROR diagnostics with a hint, spec §3.3.3).

Why its own module: runtime/host/tsinput.py parses the script and finds the TypeScript-only
nodes (one tree-sitter query); this module decides, node kind by node kind, what erasing each
means (ts-blank-space's rules), and tsblank.py turns the chosen byte ranges into whitespace.
"""

from __future__ import annotations

import re
from typing import Any

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import script_errors
from codemode_gen.runtime.host.tsblank import blank

# ----------------------------------------------------------------------------------- erasing

# Statements and class members: what an erased `as T` at their very end, or an erased statement
# after one without `;`, needs a `;` for (automatic semicolon insertion would not split them).
_STATEMENTS = frozenset(
    {
        "expression_statement",
        "lexical_declaration",
        "variable_declaration",
        "return_statement",
        "throw_statement",
        "export_statement",
        "public_field_definition",
    }
)
# Binary operator precedences (ts-blank-space's table): erasing `as T` in `a + b as T * c`
# would regroup it as `a + (b * c)`.
_PRECEDENCE = {
    "**": 15,
    "*": 14,
    "/": 14,
    "%": 14,
    "+": 13,
    "-": 13,
    "<<": 12,
    ">>": 12,
    ">>>": 12,
    "<": 11,
    "<=": 11,
    ">": 11,
    ">=": 11,
    "instanceof": 11,
    "in": 11,
    "==": 10,
    "!=": 10,
    "===": 10,
    "!==": 10,
    "&": 9,
    "^": 8,
    "|": 7,
    "&&": 6,
    "||": 5,
    "??": 4,
}
_RELATIONAL = _PRECEDENCE["<"]
_LINE_STARTS_WITH_BRACKET = re.compile(rb"\n[ \t]*\[")
# The binary operator that follows an assertion (after whitespace and comments); compound
# assignments (`*=`), `=>`, `++`/`--` and comment starts are not operators here.
_NEXT_OPERATOR = re.compile(
    rb"""(?:\s|/\*.*?\*/|//[^\n]*)*
    ( \*\*(?!=) | >>>(?!=) | <<(?!=) | >>(?![=>]) | === | !== | == | != | <= | >=
    | &&(?!=) | \|\|(?!=) | \?\?(?!=) | [*/%](?![=*/]) | \+(?![+=]) | -(?![-=])
    | <(?![<=]) | >(?![>=]) | &(?![&=]) | \|(?![|=]) | \^(?!=) | instanceof\b | in\b )""",
    re.VERBOSE | re.DOTALL,
)
_ASSERTIONS = frozenset({"as_expression", "satisfies_expression"})
_TYPE_ONLY_STATEMENTS = frozenset(
    {"interface_declaration", "type_alias_declaration", "ambient_declaration"}
)


_ENUM_HINT = (
    "use a const object instead of an enum: `const Color = { Red: 0, Green: 1 } as const;` "
    "(and `type Color = (typeof Color)[keyof typeof Color]` if you need the type)"
)
_NAMESPACE_HINT = "use plain `const` declarations or an object instead of a namespace with values"
_PARAMETER_PROPERTY_HINT = (
    "declare the field in the class body and assign it in the constructor: "
    "`x: T; constructor(x: T) { this.x = x; }`"
)


class Eraser:
    def __init__(self, source: bytes, *, check_errors: bool) -> None:
        self.source = source
        self.check_errors = check_errors
        self.ranges: list[tuple[int, int, str]] = []  # (start, end, first or last character)
        # The erased ranges that still reach past the node being visited (nodes are visited in
        # source order, so a range that ends before one never covers a later one).
        self._active: list[tuple[int, int]] = []
        self._blanked_ids: set[int] = set()  # statements and members erased as a whole
        self.diagnostics: list[diag.Diagnostic] = []

    # ---- the result

    def result(self) -> bytes:
        out = bytearray(self.source)
        # Ranges may overlap (a modifier, then its whole member): the marked ones go last, so
        # no plain blank overwrites a `;`, `(` or `)`.
        for start, end, mark in sorted(self.ranges, key=lambda r: bool(r[2])):
            out[start:end] = blank(self.source[start:end], mark)
        return bytes(out)

    def _erase(self, start: int, end: int, mark: str = "") -> None:
        """Blank [start, end) (bytes); `mark` ';' / '(' replaces its first character, ')' its last."""
        if end <= start:
            return
        self.ranges.append((start, end, mark))
        self._active.append((start, end))

    def _covered(self, node: Any) -> bool:
        """Whether `node` lies inside text already erased (a type, a whole statement)."""
        start, end = node.start_byte, node.end_byte
        return any(s <= start and end <= e for s, e in self._active)

    def _erase_node(self, node: Any, mark: str = "") -> None:
        self._erase(node.start_byte, node.end_byte, mark)

    def _erase_token(self, node: Any, kind: str) -> None:
        """Erase the first child token of `node` of type `kind` (`abstract class`, `x?: T`)."""
        token = next((c for c in node.children if c.type == kind), None)
        if token is not None:
            self._erase_node(token)

    def _error(self, node: Any, what: str, hint: str) -> None:
        line, col = node.start_point.row + 1, node.start_point.column + 1
        self.diagnostics.append(
            diag.diagnostic(
                diag.DiagnosticCode.SYNTAX_ERROR,
                f"SyntaxError: {what} at {script_errors.AGENT_MODULE}:{line}:{col}",
                hint=hint,
                path=f"{line}:{col}",
            )
        )

    # ---- dispatch

    def visit(self, node: Any) -> None:
        pos = node.start_byte
        self._active = [r for r in self._active if r[1] > pos]
        if node.is_missing or self._covered(node):
            return
        if self.check_errors and (node.has_error or _inside_error(node)):
            return  # tree-sitter's recovery: leave the broken part to QuickJS's own error
        kind = node.type
        parent = node.parent
        if not node.is_named:
            self._token(node, kind, parent)
            return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, node)

    def _token(self, node: Any, kind: str, parent: Any) -> None:
        ptype = parent.type if parent is not None else ""
        if kind == "type" and ptype in ("import_statement", "export_statement"):
            self._statement(parent)  # import type … / export type { … }
        elif kind == "type":  # import { type A } / export { type A }
            self._with_comma(parent)
        elif kind == "=":  # export = value
            self._error(
                parent,
                "`export =` is TypeScript's CommonJS export",
                "use `export default value`, or set globalThis.__codemode_result__",
            )
        elif kind in ("!", "?"):  # let x!: T; x?: T; m?() {}
            self._erase_node(node)
        elif kind in ("declare", "abstract"):  # a class field that only exists for the checker
            self._statement(parent)
        elif kind == "readonly" and ptype in ("required_parameter", "optional_parameter"):
            self._error(
                node,
                "parameter properties (`readonly` on a constructor parameter) are not erasable TypeScript",
                _PARAMETER_PROPERTY_HINT,
            )
        elif kind == "readonly":
            self._modifier(node, parent)

    # ---- statements

    def _statement(self, node: Any) -> None:
        """Erase a whole statement or class member, after `;` when the one before lacks it."""
        target = node
        parent = node.parent
        while parent is not None and parent.type in ("export_statement", "expression_statement"):
            target, parent = parent, parent.parent
        if self._covered(target):
            return
        self._blanked_ids.add(target.id)
        self._erase_node(target, ";" if self._semicolon_needed(target) else "")

    def _semicolon_needed(self, node: Any) -> bool:
        prev = node.prev_sibling
        while prev is not None and (
            prev.type in ("comment", "html_comment") or prev.id in self._blanked_ids
        ):
            prev = prev.prev_sibling
        if prev is None or prev.is_missing:
            return False
        if prev.type == "{":
            return False  # the first statement of a block: nothing to continue
        # After `if (x)`, `else`, `label:` … the `;` is the (empty) statement that must stay.
        return self.source[prev.end_byte - 1] != ord(";")

    def interface(self, node: Any) -> None:
        self._statement(node)

    def enum(self, node: Any) -> None:
        self._error(
            node, "TypeScript `enum` has runtime behaviour and cannot be erased", _ENUM_HINT
        )

    def namespace(self, node: Any) -> None:
        body = node.child_by_field_name("body")
        if body is None or _types_only(body):
            self._statement(node)
            return
        keyword = "module" if node.type == "module" else "namespace"  # `declare module` is ambient
        self._error(node, f"a TypeScript `{keyword}` with values cannot be erased", _NAMESPACE_HINT)

    def import_equals(self, node: Any) -> None:
        if node.type == "import_require_clause":
            self._error(
                node.parent,
                "`import x = require(…)` is TypeScript's CommonJS import",
                'use an ES import: `import * as x from "@codemode/…"`',
            )
        else:
            self._error(node, "`import x = A.B` aliases cannot be erased", "use `const x = A.B;`")

    def abstract_class(self, node: Any) -> None:
        self._erase_token(node, "abstract")

    def member_signature(self, node: Any) -> None:
        if node.parent is not None and node.parent.type == "class_body":
            self._statement(node)  # overload signatures, abstract methods, index signatures

    def modifier(self, node: Any) -> None:
        parent = node.parent
        if parent is not None and parent.type in ("required_parameter", "optional_parameter"):
            self._error(
                node,
                "parameter properties (a modifier on a constructor parameter) are not erasable TypeScript",
                _PARAMETER_PROPERTY_HINT,
            )
        else:
            self._modifier(node, parent)

    def _modifier(self, node: Any, member: Any) -> None:
        """`public`/`private`/`protected`/`readonly`/`override` on a class member."""
        first = member is not None and member.children and member.children[0].id == node.id
        name = member.child_by_field_name("name") if member is not None else None
        computed = name is not None and name.type == "computed_property_name"
        self._erase_node(node, ";" if first and computed else "")

    # ---- annotations and type arguments

    def annotation(self, node: Any) -> None:
        parent = node.parent
        if (
            parent is not None
            and parent.type == "arrow_function"
            and parent.child_by_field_name("return_type") is not None
            and parent.child_by_field_name("return_type").id == node.id
        ):
            params = parent.child_by_field_name("parameters")
            arrow = next((c for c in parent.children if c.type == "=>"), None)
            if (
                params is not None
                and arrow is not None
                and b"\n" in self.source[params.end_byte : arrow.start_byte]
            ):
                # `(a): T\n=> a`: `(a)\n=>` would be a syntax error; move the `)` to just before `=>`.
                self._erase(params.end_byte - 1, node.end_byte, ")")
                return
        if not self._type_runs_on(node, node.start_byte):
            self._erase_node(node)

    def generics(self, node: Any) -> None:
        parent = node.parent
        if node.type == "type_parameters" and parent is not None:
            params = parent.child_by_field_name("parameters")
            if params is not None and b"\n" in self.source[node.start_byte : params.start_byte]:
                # `return <T>\n(v: T) => v`: keep the `(` where the `<` was, so no ASI splits it.
                self._erase_node(node, "(")
                self._erase(params.start_byte, params.start_byte + 1)
                return
        self._erase_node(node)

    def optional(self, node: Any) -> None:
        self._erase_token(node, "?")

    def implements(self, node: Any) -> None:
        self._erase_node(node)

    # ---- expressions

    def assertion(self, node: Any) -> None:
        """`value as T` / `value satisfies T`: keep the value, erase the rest."""
        if node.parent is None or node.parent.type not in _ASSERTIONS:
            problem = self._regroups(node)
            if problem:
                self._error(
                    node,
                    f"erasing this `{_keyword(node)}` would change how `{problem}` groups",
                    "put the asserted expression in parentheses: `(a + b as T)`",
                )
                return
        value = node.named_children[0]
        if self._type_runs_on(node, value.end_byte):
            return
        mark = ";" if self._ends_statement(node) or _callee(node) else ""
        self._erase(value.end_byte, node.end_byte, mark)

    def _type_runs_on(self, node: Any, start: int) -> bool:
        """A type that tree-sitter continued onto a line starting with `[` (`x as T` ⏎ `[1].map(f)`).

        TypeScript ends the type at the line break (and the statement with it); tree-sitter's
        grammar reads `T[1]` and erasing that would silently drop code, so this is an error."""
        for match in _LINE_STARTS_WITH_BRACKET.finditer(self.source, start, node.end_byte):
            bracket = node.descendant_for_byte_range(match.end() - 1, match.end())
            if (
                bracket is not None
                and bracket.parent is not None
                and bracket.parent.type in ("lookup_type", "array_type")
            ):
                self._error(
                    bracket,
                    "this line continues the type on the line before (`T[…]`), not a new statement",
                    "end the line before with `;`",
                )
                return True
        return False

    def _regroups(self, node: Any) -> str | None:
        """The operator whose grouping erasing this assertion chain would change, if any.

        TypeScript parses `as`/`satisfies` at the precedence of `<`: in `1 + 1 as T / 2` the
        assertion holds `1 + 1`, and erasing it leaves `1 + 1 / 2`, which groups differently.
        (tree-sitter's grammar groups `as` more loosely than TypeScript, so the operand is
        re-derived here: `a || b as T` asserts `b`.)"""
        base = node
        while base.type in _ASSERTIONS:
            base = base.named_children[0]
        base = _assertion_operand(base)
        if base.type != "binary_expression":
            return None
        inner = _operator(base)
        match = _NEXT_OPERATOR.match(self.source, node.end_byte)
        outer = match.group(1).decode() if match else ""
        p_in, p_out = _PRECEDENCE.get(inner), _PRECEDENCE.get(outer)
        if p_in is None or p_out is None:
            return None
        if p_out > p_in or (p_out == p_in and "**" in (inner, outer)):
            return outer
        return None

    def _ends_statement(self, node: Any) -> bool:
        """Whether `node` is the last thing of its statement, with no `;` after it."""
        end = node.end_byte
        current = node
        while current.parent is not None:
            current = current.parent
            if current.type in (
                "statement_block",
                "class_body",
                "program",
                "arguments",
                "parenthesized_expression",
                "formal_parameters",
                "template_substitution",
            ):
                return False
            if current.type in _STATEMENTS:
                last = _last_token(current)
                if last is None or last.end_byte != end:
                    return False
                following = self.source[end : end + 1]
                return following != b";"
            if current.end_byte != end:
                # Something of this enclosing expression follows the node, so the statement's
                # last token ends after it too. Stopping here keeps a chain of n assertions
                # (`x as A as B …`) linear instead of walking n parents for each of them.
                return False
        return False

    def non_null(self, node: Any) -> None:
        last = node.children[-1]
        if last.type == "!":
            self._erase_node(last)

    def type_assertion(self, node: Any) -> None:
        self._error(
            node,
            "the prefix assertion `<T>value` cannot be erased safely",
            "write `value as T` instead",
        )

    def this_parameter(self, node: Any) -> None:
        """`function f(this: T, …)`: the parameter exists only for the checker."""
        if node.parent is not None and node.parent.type == "required_parameter":
            self._with_comma(node.parent)

    def _with_comma(self, node: Any) -> None:
        """Erase a list element and the comma after it (`import { type A, b }`, `this: T,`)."""
        end = node.end_byte
        following = node.next_sibling
        while following is not None and following.type in ("comment", "html_comment"):
            following = following.next_sibling
        if following is not None and following.type == ",":
            end = following.end_byte
        self._erase(node.start_byte, end)


_HANDLERS = {
    "interface_declaration": Eraser.interface,
    "type_alias_declaration": Eraser.interface,
    "ambient_declaration": Eraser.interface,
    "function_signature": Eraser.interface,
    "enum_declaration": Eraser.enum,
    "internal_module": Eraser.namespace,
    "module": Eraser.namespace,
    "import_alias": Eraser.import_equals,
    "import_require_clause": Eraser.import_equals,
    "abstract_class_declaration": Eraser.abstract_class,
    "implements_clause": Eraser.implements,
    "accessibility_modifier": Eraser.modifier,
    "override_modifier": Eraser.modifier,
    "method_signature": Eraser.member_signature,
    "abstract_method_signature": Eraser.member_signature,
    "index_signature": Eraser.member_signature,
    "type_annotation": Eraser.annotation,
    "asserts_annotation": Eraser.annotation,
    "type_predicate_annotation": Eraser.annotation,
    "type_arguments": Eraser.generics,
    "type_parameters": Eraser.generics,
    "as_expression": Eraser.assertion,
    "satisfies_expression": Eraser.assertion,
    "non_null_expression": Eraser.non_null,
    "type_assertion": Eraser.type_assertion,
    "optional_parameter": Eraser.optional,
    "this": Eraser.this_parameter,
}


# ----------------------------------------------------------------------------------- helpers


def _inside_error(node: Any) -> bool:
    current = node.parent
    while current is not None:
        if current.type == "ERROR":
            return True
        current = current.parent
    return False


def _types_only(block: Any) -> bool:
    """A namespace body that declares only types (erasable as a whole): type aliases,
    interfaces, `declare`s, local `import X = A.B` aliases and namespaces like it."""
    for child in block.named_children:
        if child.type in ("comment", "html_comment"):
            continue
        exported = child.type == "export_statement"
        inner = (
            child.named_children[0]
            if child.type in ("export_statement", "expression_statement") and child.named_children
            else child
        )
        if inner.type in _TYPE_ONLY_STATEMENTS or (inner.type == "import_alias" and not exported):
            continue
        if inner.type in ("internal_module", "module"):
            body = inner.child_by_field_name("body")
            if body is None or _types_only(body):
                continue
        return False
    return True


def _callee(node: Any) -> bool:
    """`x as T` followed by `(…)`, `[…]` or a template on the next line. TypeScript ends the
    statement after `T` (no type can be called), tree-sitter's grammar makes it a call: the
    erased text must start with `;` to keep TypeScript's meaning."""
    parent = node.parent
    if parent is None or parent.type not in ("call_expression", "subscript_expression"):
        return False
    callee = parent.child_by_field_name(
        "function" if parent.type == "call_expression" else "object"
    )
    return callee is not None and callee.id == node.id


def _assertion_operand(node: Any) -> Any:
    """What TypeScript's `as` applies to at the end of `node`: binary operators looser than
    `<`, `?:`, assignments, `,`, arrows and `yield` leave it their right-hand side."""
    while True:
        kind = node.type
        if kind == "binary_expression" and _PRECEDENCE.get(_operator(node), 99) < _RELATIONAL:
            nxt = node.child_by_field_name("right")
        elif kind == "ternary_expression":
            nxt = node.child_by_field_name("alternative")
        elif kind in ("assignment_expression", "augmented_assignment_expression"):
            nxt = node.child_by_field_name("right")
        elif kind == "arrow_function":
            nxt = node.child_by_field_name("body")
        elif kind in ("sequence_expression", "yield_expression") and node.named_children:
            nxt = node.named_children[-1]
        else:
            return node
        if nxt is None:
            return node
        node = nxt


def _operator(node: Any) -> str:
    op = node.child_by_field_name("operator")
    return op.type if op is not None else ""


def _keyword(node: Any) -> str:
    return "as" if node.type == "as_expression" else "satisfies"


def _last_token(node: Any) -> Any:
    """The last child of `node` that is real source: not a comment, not an inserted `;`."""
    for child in reversed(node.children):
        if child.is_missing or child.type in ("comment", "html_comment"):
            continue
        return child
    return None
