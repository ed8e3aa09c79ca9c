"""runtime/diagnostics.py: every diagnostic code is one `DiagnosticCode` member, made by
`diagnostic` (§3.3.3), and no call site spells a code as a string of its own."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from codemode_gen.runtime.diagnostics import FATAL_CODES, DiagnosticCode, diagnostic, ts_code

REPO = Path(__file__).resolve().parents[2]
SOURCES = [
    p for root in ("runtime", "codemode_gen", "generator") for p in (REPO / root).rglob("*.py")
]
# The functions whose first argument is a diagnostic's code.
MAKERS = {"diagnostic", "error_response"}


def code_arguments() -> list[tuple[str, ast.expr]]:
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in MAKERS:
                found.append((f"{path.relative_to(REPO)}:{node.lineno}", node.args[0]))
    return found


def test_every_call_site_names_its_code_from_the_enumeration() -> None:
    used: set[str] = set()
    offenders = []
    for where, arg in code_arguments():
        if (
            isinstance(arg, ast.Attribute)
            and isinstance(arg.value, ast.Attribute | ast.Name)
            and (
                getattr(arg.value, "attr", None) == "DiagnosticCode"
                or getattr(arg.value, "id", None) == "DiagnosticCode"
            )
        ):
            used.add(arg.attr)
        elif isinstance(arg, ast.Call) and getattr(arg.func, "id", None) == "ts_code":
            pass  # the compiler's own codes, passed through
        elif isinstance(arg, ast.Name) and arg.id == "code":
            pass  # a maker's own parameter, passed on (typed DiagnosticCode)
        else:
            offenders.append(f"{where}: {ast.unparse(arg)}")
    assert offenders == [], "diagnostic codes not taken from DiagnosticCode:\n" + "\n".join(
        offenders
    )
    # Every member is emitted somewhere (directly, or by a constructor of diagnostics.py or
    # script_errors.py): the enumeration is exactly what the runtime can emit.
    assert used <= {c.name for c in DiagnosticCode}
    assert {c.name for c in DiagnosticCode} - used == set(), "codes nothing emits"


def test_no_code_is_compared_as_a_string_literal() -> None:
    literal = re.compile(r"""get\("code"\)\s*(?:==|!=|in)\s*\(?["'][A-Z][A-Z_]+["']""")
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in SOURCES
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if literal.search(line)
    ]
    assert offenders == []


def test_the_spec_s_codes_are_members_and_fatal() -> None:
    spec = (REPO / "docs" / "code-mode-spec.md").read_text(encoding="utf-8")
    line = next(x for x in spec.splitlines() if x.startswith("* `code` (string, REQUIRED)"))
    named = set(re.findall(r'`"([A-Z_]+)"`', line))
    assert named and named <= {c.value for c in DiagnosticCode}
    assert named <= FATAL_CODES  # §3.3.4: the spec's examples all null the result


def test_a_diagnostic_is_plain_json_with_the_code_s_value() -> None:
    d = diagnostic(DiagnosticCode.STALE_OUT, "out/ is stale", severity="warning", hint="regenerate")
    assert type(d["code"]) is str and d["code"] == "STALE_OUT"
    assert json.loads(json.dumps(d)) == {
        "severity": "warning",
        "code": "STALE_OUT",
        "message": "out/ is stale",
        "hint": "regenerate",
    }
    assert ts_code(2322) == "TS2322"
    assert all(c.value == c.name for c in DiagnosticCode)
