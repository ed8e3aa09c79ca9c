"""runtime/host/tsinput.py: TypeScript erased to JavaScript with every position kept (spec §3.2.1, §3.3.3).

The corpus (tests/data/typescript_scripts/*.ts) is agent-style TypeScript against the demo
servers. Each must come out as JavaScript that the sandbox's own syntax check (a real QuickJS
worker) accepts, with every character that was not erased at the same line:column; plain
JavaScript must come back as the very same string; what cannot be erased is a SYNTAX_ERROR
diagnostic with a hint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host.tsinput import erase_types
from codemode_gen.runtime.sandbox.pool import Sandbox
from tests.runtime_support import REPO

CORPUS = REPO / "tests" / "data" / "typescript_scripts"
TS_FILES = sorted(CORPUS.glob("*.ts"))
JS_FILES = [*sorted(CORPUS.glob("*.js")), REPO / "examples" / "plan_week.js"]
# What an erased character may become: whitespace of its UTF-8 length, or a `;`/`(`/`)` that
# keeps automatic semicolon insertion from joining what TypeScript keeps apart.
ERASED = frozenset(" \u00a0\u2002;()")
LINE_BREAKS = frozenset("\n\r\u2028\u2029")


class SyntaxCheck:
    """The sandbox's syntax check (Sandbox.check_syntax: a pooled QuickJS worker), synchronously."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.sandbox = Sandbox(pool_size=1)
        self.loop.run_until_complete(self.sandbox.start())

    def __call__(self, code: str) -> list[Diagnostic] | None:
        return self.loop.run_until_complete(self.sandbox.check_syntax(code))

    def close(self) -> None:
        self.loop.run_until_complete(self.sandbox.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def check() -> Iterator[SyntaxCheck]:
    checker = SyntaxCheck()
    # check_syntax answers None also when it could not check: make sure this one really does.
    assert checker("const n: number = 1;") is not None
    yield checker
    checker.close()


def assert_positions_kept(source: str, erased: str) -> None:
    """Every character that was not erased is at its byte offset (so its line:column in bytes,
    UTF-16 units and, outside erased astral characters, code points); line breaks all stay."""
    src = source.encode("utf-8")
    assert len(erased.encode("utf-8")) == len(src)
    offset = 0
    for ch in erased:
        size = len(ch.encode("utf-8"))
        original = src[offset : offset + size].decode("utf-8", "replace")
        if original != ch:
            assert ch in ERASED, (offset, ch, original)
            assert not LINE_BREAKS & set(original), (offset, original)
        offset += size


def ts_id(path: Path) -> str:
    return path.stem


@pytest.mark.parametrize("path", TS_FILES, ids=ts_id)
def test_corpus_erases_to_javascript_that_quickjs_parses(path: Path, check: SyntaxCheck) -> None:
    source = path.read_text(encoding="utf-8")
    assert check(source) is not None  # TypeScript as written: QuickJS rejects it
    erased = erase_types(source)
    assert erased.diagnostics == ()
    assert erased.code != source
    assert check(erased.code) is None, check(erased.code)
    assert_positions_kept(source, erased.code)
    assert erase_types(erased.code).code is erased.code  # the result is JavaScript: nothing left


@pytest.mark.parametrize("path", JS_FILES, ids=ts_id)
def test_javascript_comes_back_as_the_same_string(path: Path, check: SyntaxCheck) -> None:
    source = path.read_text(encoding="utf-8")
    assert check(source) is None
    erased = erase_types(source)
    assert erased.code is source and erased.diagnostics == ()


@pytest.mark.parametrize(
    "source",
    [
        "",
        "globalThis.__codemode_result__ = 1 + 1",
        "const o = { a: 1, 'b': [2, 3] }; const t = o.a ? o.b : null; outer: for (const x of o.b) { if (x) break outer; }",
        "const v = a?.b?.[c]?.(d) ?? (e < f && g > h);",
        "const r = /(\\d{2}):(\\d{2})|<T>\\s*as\\s+string/g; const s = `id: ${x} as ${y} <T>`;",
        "label: { const type = 1, declare = 2, as = 3, satisfies = 4, namespace = 5; }",
        "class A { #x = 1; static { } get x() { return this.#x; } }",
        "let = ;",  # a syntax error is QuickJS's to report, unchanged
    ],
)
def test_javascript_snippets_pass_through(source: str) -> None:
    erased = erase_types(source)
    assert erased.code is source and erased.diagnostics == ()


# (TypeScript, the JavaScript QuickJS gets): each construct on its own.
ERASURES = [
    ("const n: number = 1;", "const n         = 1;"),
    ("let x!: string;", "let x         ;"),
    ("interface A { a: string }\nlet b = 1;", "                         \nlet b = 1;"),
    ("type T = { a: number };\nlet b = 1;", "                       \nlet b = 1;"),
    ("const v = f<string>(x) as number;", "const v = f        (x)          ;"),
    ("const s = new Set<string>(xs);", "const s = new Set        (xs);"),
    ("const q = { a: 1 } satisfies Q;", "const q = { a: 1 }            ;"),
    ("const e = m.get(k)!.name;", "const e = m.get(k) .name;"),
    ("const o = a?.b!;", "const o = a?.b ;"),
    (
        "function f<T>(a: T, b?: string): T[] { return [a]; }",
        "function f   (a   , b         )      { return [a]; }",
    ),
    ("const g = <T,>(x: T): T => x;", "const g =     (x   )    => x;"),
    (
        "const h = async (a: number,\n  b: number):\n  Promise<number> => a + b;",
        "const h = async (a        ,\n  b" + " " * 10 + "\n                ) => a + b;",
    ),
    (
        'import type { A } from "x";\nimport { type B, c } from "y";',
        '                           \nimport {         c } from "y";',
    ),
    (
        "export type { A };\nexport interface B {}\nlet c = 1;",
        "                  \n                     \nlet c = 1;",
    ),
    ("function f(this: Window, a: number) {}", "function f(              a        ) {}"),
    (
        "function f(a: string): void;\nfunction f(a) {}",
        "                            \nfunction f(a) {}",
    ),
    (
        "class C<T> extends B<T> implements I {\n  private readonly x: number = 1;\n  declare y: string;\n  m?(): void {}\n}",
        "class C    extends B                 {\n                   x         = 1;\n                   ;\n  m ()       {}\n}",
    ),
    ("abstract class A { abstract m(): void; }", "         class A {                   ; }"),
    (
        "declare const x: number;\nnamespace N { export type T = 1 }\nlet y = 1;",
        "                        \n                                 \nlet y = 1;",
    ),
    ("try { f() } catch (e: unknown) {}", "try { f() } catch (e         ) {}"),
    (
        "function g(x: unknown): x is string { return true; }",
        "function g(x         )              { return true; }",
    ),
    ("const t = ['a'] as const;", "const t = ['a']         ;"),
    # Automatic semicolon insertion: TypeScript ends the statement after the type.
    ("let a = b as T\n(c)", "let a = b;    \n(c)"),
    ("let a = b\ntype T = 1\n(c)", "let a = b\n;         \n(c)"),
    ("if (x)\n  type T = 1;\nf();", "if (x)\n  ;          \nf();"),
    # Non-ASCII in an erased type: same UTF-8 length (QuickJS's columns), same UTF-16 length.
    ('let é: "é" | "😀" = 1; let z = (;', "let é   \u00a0     \u00a0\u00a0  = 1; let z = (;"),
]


@pytest.mark.parametrize(
    ("source", "expected"), ERASURES, ids=[s.split("\n")[0][:40] for s, _ in ERASURES]
)
def test_each_construct_is_erased_in_place(source: str, expected: str) -> None:
    erased = erase_types(source)
    assert erased.diagnostics == ()
    assert erased.code == expected
    assert_positions_kept(source, erased.code)


def test_a_syntax_error_after_types_is_reported_at_its_typescript_position(
    check: SyntaxCheck,
) -> None:
    source = 'type Étiquette = "é";\nconst label: Étiquette = "é";\nconst n: number = (1 +;\n'
    erased = erase_types(source)
    assert erased.diagnostics == ()
    [diagnostic] = check(erased.code) or []
    line = source.splitlines()[2]
    column = (
        len(line[: line.index(";")].encode("utf-8")) + 1
    )  # QuickJS counts columns in UTF-8 bytes
    assert diagnostic["code"] == "SYNTAX_ERROR" and diagnostic["path"] == f"3:{column}"


def test_broken_typescript_still_gets_its_other_types_erased(check: SyntaxCheck) -> None:
    """tree-sitter recovers from the error: the types around it are erased, so QuickJS reports the
    real mistake (line 2), not the first annotation."""
    source = "const a: number = 1;\nconst b: string = f(;\nconst c: boolean = true;\n"
    erased = erase_types(source)
    assert erased.diagnostics == ()
    assert erased.code.startswith("const a         = 1;")
    [diagnostic] = check(erased.code) or []
    assert diagnostic["path"].startswith("2:")


NOT_ERASABLE = [
    ("let a = 1;\nenum Color { Red, Green }", "2:1", "const object instead of an enum"),
    ("const enum E { A }", "1:1", "const object instead of an enum"),
    ("namespace N {\n  export const x = 1;\n}", "1:1", "instead of a namespace with values"),
    ("module M { export function f() {} }", "1:1", "instead of a namespace with values"),
    (
        "class P {\n  constructor(private x: number) {}\n}",
        "2:15",
        "declare the field in the class body",
    ),
    (
        "class P {\n  constructor(readonly x: number) {}\n}",
        "2:15",
        "declare the field in the class body",
    ),
    ('import fs = require("fs");', "1:1", "use an ES import"),
    ("import y = N.x;", "1:1", "const x = A.B"),
    ("const x = 1;\nexport = x;", "2:1", "export default"),
    ("let h = <number>x;", "1:9", "value as T"),
    ("const v = 1 + 1 as number / 2;", "1:11", "parentheses"),
    ("const w = q as string[]\n[1].map(g)", "2:1", "end the line before with `;`"),
]


@pytest.mark.parametrize(
    ("source", "path", "hint"),
    NOT_ERASABLE,
    ids=[s.replace("\n", " ")[:30] for s, _, _ in NOT_ERASABLE],
)
def test_what_cannot_be_erased_is_a_syntax_error_with_a_hint(
    source: str, path: str, hint: str
) -> None:
    erased = erase_types(source)
    assert erased.code is source
    [diagnostic] = erased.diagnostics
    assert diagnostic["code"] == "SYNTAX_ERROR" and diagnostic["severity"] == "error"
    assert diagnostic["path"] == path
    assert (
        diagnostic["message"].startswith("SyntaxError: ")
        and f"agent.js:{path}" in diagnostic["message"]
    )
    assert hint in diagnostic["hint"], diagnostic["hint"]


@pytest.mark.parametrize(
    "source",
    [
        "const a = 1 * 1 as number + 2;",  # a lower-precedence operator after: same grouping
        "const b = a || b as unknown && c;",  # TypeScript asserts `b` alone
        "const c = (a + b) as number * 2;",
        "declare enum E { A }\nnamespace T { type X = 1; import Y = Z.W; }",
    ],
)
def test_assertions_and_declarations_that_erase_safely(source: str, check: SyntaxCheck) -> None:
    erased = erase_types(source)
    assert erased.diagnostics == ()
    assert check(erased.code) is None
    assert_positions_kept(source, erased.code)
