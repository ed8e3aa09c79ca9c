"""TS type AST -> TypeScript text, and the sanitising of every server-controlled string.

Output is injected into an agent's context and compiled by tsc, and every string in it
(descriptions, property names, enum values) comes from a server we do not trust. So:
doc text can never close its comment (`*/`) or start new lines of code; property names
that are not identifiers are quoted string literals, never raw; string literals escape
line terminators, `*/` and invisible/bidi controls. Layout is deterministic, 2-space indent.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence

from codemode_gen.generator.names import IDENTIFIER
from codemode_gen.generator.typescript import ast as t

# Longest doc text kept for one schema field (bounds the agent-context cost of a hostile
# or auto-generated multi-kilobyte description).
MAX_DOC_CHARS = 2000
# Most doc lines for one documented item (same attack as above, via many short lines).
MAX_DOC_LINES = 60
TRUNCATION_MARKER = " … [truncated]"
# A doc comment of one line up to this length prints as `/** text */` on one line.
MAX_ONE_LINE_DOC_CHARS = 320
# Starts the doc line of constraints TypeScript cannot check (docs.schema_doc writes it).
CONSTRAINTS_LABEL = "Constraints: "
# An object type without docs prints on one line up to this length (`{ id: number }`).
MAX_ONE_LINE_OBJECT_CHARS = 60
# More members than this never fit in MAX_ONE_LINE_OBJECT_CHARS (`a: T; ` is 6+): skip the try.
MAX_ONE_LINE_OBJECT_MEMBERS = 8
# Most doc lines of one property that field_doc joins on one line.
MAX_FIELD_DOC_LINES = 4
INDENT = "  "

# Line terminators in JavaScript and common text: all become "\n" in doc text.
_LINE_BREAKS = re.compile("\r\n|[\r\u2028\u2029\x85\x0b\x0c]")


_ASCII_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f]")
_NON_ASCII = re.compile("[^\x00-\x7f]")


def _unsafe_char(ch: str) -> bool:
    """Characters that must never appear raw in generated text."""
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def sanitize_doc(text: object) -> str:
    """Make server text safe inside `/** … */`: no comment end, no controls, bounded length.

    Newlines are kept (the caller splits them into ` * ` lines); every other line
    terminator becomes a newline, tabs become spaces, other control and format characters
    (including bidi overrides used for "trojan source" tricks) are removed.
    """
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    if len(s) <= MAX_DOC_CHARS and s.isascii() and "*/" not in s:
        if s.isprintable():
            return s.strip()  # fast path: nothing to remove or escape
        if "\n" in s and s.replace("\n", "").isprintable():
            # fast path for plain multi-line text: exactly what the general path does to it
            lines = s.split("\n")
            if len(lines) <= MAX_DOC_LINES:
                return "\n".join([line.rstrip() for line in lines]).strip("\n")
    s = _LINE_BREAKS.sub("\n", s).replace("\t", "  ")
    s = _ASCII_CONTROLS.sub("", s)
    if not s.isascii():
        s = _NON_ASCII.sub(lambda m: "" if _unsafe_char(m[0]) else m[0], s)
    s = s.replace("*/", "*\\/")
    lines = [line.rstrip() for line in s.split("\n")]
    truncated = False
    if len(lines) > MAX_DOC_LINES:
        lines, truncated = lines[:MAX_DOC_LINES], True
    s = "\n".join(lines).strip("\n")
    if len(s) > MAX_DOC_CHARS:
        s, truncated = s[:MAX_DOC_CHARS].rstrip(), True
        if s.endswith("*"):  # never leave a "*" that the next text could pair with "/"
            s = s[:-1]
    if truncated:
        s += TRUNCATION_MARKER
    return s


def doc_comment(lines: Sequence[str], indent: str = "") -> str:
    """A JSDoc block for `lines` (sanitised again, idempotently), or "" when there are none."""
    if not lines:
        return ""
    if len(lines) == 1:  # the common case, without the general path's list juggling
        text = sanitize_doc(lines[0])
        if "\n" not in text:
            if not text.strip():
                return ""
            # One line stays one line: `/** a */` is what editors show, at a third of the bytes.
            if len(text) <= MAX_ONE_LINE_DOC_CHARS:
                return f"{indent}/** {text} */\n"
            return f"{indent}/**\n{indent} * {text}\n{indent} */\n"
    out: list[str] = []
    for line in lines:
        text = sanitize_doc(line)
        if "\n" in text:
            out.extend(text.split("\n"))
        else:
            out.append(text)
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    if not out:
        return ""
    if len(out) == 1 and len(out[0]) <= MAX_ONE_LINE_DOC_CHARS:
        return f"{indent}/** {out[0]} */\n"
    body = "".join([f"{indent} *{' ' + line if line else ''}\n" for line in out])
    return f"{indent}/**\n{body}{indent} */\n"


def joined_doc(lines: Sequence[str], indent: str = "") -> str:
    """`doc_comment`, but short lines join into one `/** … */` line (a tool's one-line
    description and its annotation tags read as well on one line as on five)."""
    if len(lines) <= MAX_FIELD_DOC_LINES:
        joined = _join([sanitize_doc(line) for line in lines if line])
        if joined.strip() and "\n" not in joined and len(joined) <= MAX_ONE_LINE_DOC_CHARS:
            return f"{indent}/** {joined} */\n"
    return doc_comment(lines, indent)


def _join(texts: Sequence[str]) -> str:
    """Doc lines as one line: sentences keep their full stop (so "by the server" and "integer."
    do not run together), and `@tags` go last (a tag's text runs to the end of the comment)."""
    prose = [t for t in texts if not t.startswith("@")]
    tags = [t for t in texts if t.startswith("@")]
    prose = [
        t
        if t.rstrip(")]\"'").endswith((".", "!", "?", ":", ";")) or i == len(prose) - 1
        else t + "."
        for i, t in enumerate(prose)
    ]
    return " ".join(prose + tags)


def field_doc(lines: Sequence[str], indent: str = "") -> str:
    """A property's doc. Short lines join into one `/** … */ ` that the property's own line
    starts with (no newline: editors attach it all the same, and a field's doc is a phrase or
    two, where a block costs three lines); anything longer is a block ending in a newline."""
    if len(lines) == 1:  # the common case (the translator's hottest doc path), no list work
        text = sanitize_doc(lines[0].removeprefix(CONSTRAINTS_LABEL))
        if text.strip() and "\n" not in text and len(text) <= MAX_ONE_LINE_DOC_CHARS:
            return f"{indent}/** {text} */ "
    elif len(lines) <= MAX_FIELD_DOC_LINES:
        # On one line the constraints read as such without their label ("Id. integer, ≥1.").
        joined = _join([sanitize_doc(line.removeprefix(CONSTRAINTS_LABEL)) for line in lines])
        if joined.strip() and "\n" not in joined and len(joined) <= MAX_ONE_LINE_DOC_CHARS:
            return f"{indent}/** {joined} */ "
    return doc_comment(lines, indent)


def string_literal(value: str) -> str:
    """A double-quoted TS string literal that is safe anywhere (code or comment)."""
    if (
        value.isascii()
        and value.isprintable()
        and '"' not in value
        and "\\" not in value
        and "*/" not in value
    ):
        return f'"{value}"'  # fast path: no character needs an escape
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "/" and out[-1] == "*":
            out.append("\\/")
        elif code < 0x20 or _unsafe_char(ch):
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\u{{{code:x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def number_literal(value: int | float) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite number has no literal type")
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return str(value)


_TEMPLATE_SAFE = re.compile(r"^[^`$\\\x00-\x1f\x7f\u2028\u2029]*$")


def template_key(key: t.TemplateKey) -> str:
    """`` `${string}lit${string}` `` — the literal was checked to need no escaping."""
    if not _TEMPLATE_SAFE.match(key.literal) or "*/" in key.literal:
        raise ValueError("template literal text needs escaping")
    before = "${string}" if key.any_before else ""
    after = "${string}" if key.any_after else ""
    return f"`{before}{key.literal}{after}`"


def property_key(name: str) -> str:
    # a property named like an identifier prints bare; any other (server text) as a string
    return name if IDENTIFIER.match(name) else string_literal(name)


def print_type(node: t.TypeNode, level: int = 0) -> str:
    """Print `node`; lines after the first are indented by `level` steps."""
    if isinstance(node, t.Keyword):
        return node.name
    if isinstance(node, t.Ref):
        return node.name
    if isinstance(node, t.Literal):
        v = node.value
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return string_literal(v)
        return number_literal(v)
    if isinstance(node, t.Array):
        return _wrap(node.element, level, postfix=True) + "[]"
    if isinstance(node, t.Tuple):
        parts = [_wrap(e, level, postfix=True) for e in node.elements[: node.required]]
        parts += [_wrap(e, level, postfix=True) + "?" for e in node.elements[node.required :]]
        if node.rest is not None:
            parts.append("..." + _wrap(node.rest, level, postfix=True) + "[]")
        return "[" + ", ".join(parts) + "]"
    if isinstance(node, t.Object):
        return _print_object(node, level)
    if isinstance(node, t.Union):
        return " | ".join(_wrap(m, level, postfix=False, in_union=True) for m in node.members)
    if isinstance(node, t.Intersection):
        return " & ".join(_wrap(m, level, postfix=False) for m in node.members)
    raise TypeError(f"not a type node: {node!r}")


def _wrap(node: t.TypeNode, level: int, *, postfix: bool, in_union: bool = False) -> str:
    text = print_type(node, level)
    needs = isinstance(node, t.Union) or (
        isinstance(node, t.Intersection) and (postfix or in_union)
    )
    if postfix and isinstance(node, t.Literal) and text.startswith("-"):
        needs = True
    return f"({text})" if needs else text


# Node types that print as their `name` and never need parentheses.
_NAMED = (t.Ref, t.Keyword)


def _print_object(node: t.Object, level: int) -> str:
    if not node.properties and node.index is None and not node.patterns:
        return "{}"
    pad = INDENT * (level + 1)
    members: list[str] = []
    docs: list[str] = []  # per member: "" (none), a block ending in "\n", or a `/** … */ ` lead
    is_ident = IDENTIFIER.match
    for prop in node.properties:
        docs.append(field_doc(prop.doc, pad) if prop.doc else "")
        ro = "readonly " if prop.readonly else ""
        opt = "?" if prop.optional else ""
        name = prop.name if is_ident(prop.name) else string_literal(prop.name)
        typ = prop.type
        # names print as themselves: skip the dispatch for the commonest property types
        if isinstance(typ, _NAMED):
            text = typ.name
        elif isinstance(typ, t.Array) and isinstance(typ.element, _NAMED):
            text = typ.element.name + "[]"
        else:
            text = print_type(typ, level + 1)
        members.append(f"{ro}{name}{opt}: {text}")
    for key, typ in node.patterns:
        docs.append("")
        members.append(f"[k: {template_key(key)}]: {print_type(typ, level + 1)}")
    if node.index is not None:
        docs.append(doc_comment(node.index_doc, pad))
        members.append(f"[k: string]: {print_type(node.index, level + 1)}")
    if len(members) <= MAX_ONE_LINE_OBJECT_MEMBERS and not any(docs):
        # A small undocumented object reads best on one line, as a formatter would print it.
        flat = "{ " + "; ".join(members) + " }"
        if len(flat) <= MAX_ONE_LINE_OBJECT_CHARS and "\n" not in flat:
            return flat
    lines: list[str] = ["{\n"]
    for doc, member in zip(docs, members, strict=True):
        if doc.endswith("\n"):
            lines.append(doc)
            doc = ""
        lines.append(f"{doc or pad}{member};\n")
    lines.append(INDENT * level + "}")
    return "".join(lines)
