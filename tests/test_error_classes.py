"""codemode_gen/error_classes.py: the one definition of @codemode/errors, and everything that
must agree with it (runtime/js/errors.js, the declaration in codemode.d.ts, what the host and
host.js name), down to the documented `e.code === "APPROVAL_DENIED"` passing the real tsc."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemode_gen import error_classes
from codemode_gen.error_classes import (
    ERROR_CLASSES,
    ToolCallCode,
    class_names,
    errors_declaration,
    errors_js,
)
from codemode_gen.runtime.script_errors import module_exports
from tests.cli.test_check import checked

REPO = Path(__file__).resolve().parent.parent
ERRORS_JS = REPO / "runtime" / "js" / "errors.js"

# How docs/config.md ("Approval") tells a script to tell a denied call from other failures.
CATCH_DENIAL = """import { ToolCallError } from "@codemode/errors";
import * as notes from "@codemode/servers/notes";
let outcome = "deleted";
try {
  await notes.delete_note({ id: 1 });
} catch (e) {
  if (e instanceof ToolCallError && e.code === "APPROVAL_DENIED") outcome = "denied: " + e.hint;
  else if (e instanceof ToolCallError && (e.code === "timeout" || typeof e.code === "number")) outcome = "failed";
  else throw e;
}
globalThis.__codemode_result__ = outcome;
"""


def test_errors_js_is_generated_from_the_definition() -> None:
    assert ERRORS_JS.read_text(encoding="utf-8") == errors_js(), (
        "runtime/js/errors.js differs from codemode_gen/error_classes.py: run `python -m codemode_gen.error_classes`"
    )
    assert ERRORS_JS.resolve() == error_classes.ERRORS_JS
    assert error_classes.main(["--check"]) == 0


def test_committed_declaration_is_rendered_from_the_definition() -> None:
    # out/ is held to the template by `generate --check`; this pins the template to the definition.
    assert errors_declaration() in (REPO / "out" / "codemode.d.ts").read_text(encoding="utf-8")
    assert '"{{' not in errors_declaration()


def test_declaration_gives_tool_call_error_code_the_values_the_host_sends() -> None:
    declaration = errors_declaration()
    assert 'readonly code?: number | "timeout" | "APPROVAL_DENIED";' in declaration
    assert {c.value for c in ToolCallCode} == {"timeout", "APPROVAL_DENIED"}
    # Every class, each extending one declared before it.
    seen: set[str] = set()
    for cls in ERROR_CLASSES:
        assert cls.base is None or cls.base in seen, cls.name
        assert f"export class {cls.name} extends {cls.base or 'Error'}" in declaration
        seen.add(cls.name)


def test_every_class_the_runtime_names_is_defined_and_exported() -> None:
    source = errors_js()
    assert set(module_exports(source)) == class_names()
    host_js = (REPO / "runtime" / "js" / "host.js").read_text(encoding="utf-8")
    table = re.search(r"const CLASSES = freeze\(\{([^}]*)\}\)", host_js)
    assert (
        table is not None
        and {n.strip() for n in table.group(1).split(",") if n.strip()} == class_names()
    )
    # The classes the host names in its replies and diagnostics.
    named: set[str] = set()
    for path in (REPO / "runtime").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        named |= set(re.findall(r'_error\(\s*"(\w+)"', text))
        named |= set(re.findall(r'"errorClass": "(\w+)"', text))
        named |= set(re.findall(r'error_class="(\w+)"', text))
    assert named and named <= class_names(), named - class_names()


def test_a_renamed_class_is_caught() -> None:
    # The comparison above can fail: a definition that differs renders a different file.
    changed = errors_js().replace("class ToolCallError", "class ToolCallFailure")
    assert changed != ERRORS_JS.read_text(encoding="utf-8")
    assert "ToolCallFailure" in module_exports(changed)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["agent.js", "agent.ts"])
def test_documented_denial_check_type_checks_with_real_tsc(tmp_path: Path, name: str) -> None:
    assert checked(tmp_path, CATCH_DENIAL, name) == (0, [])


@pytest.mark.slow
def test_a_code_the_host_never_sends_is_a_type_error(tmp_path: Path) -> None:
    # The union is closed: comparing with a value outside it is TS2367, so the test above can fail.
    wrong = CATCH_DENIAL.replace('"APPROVAL_DENIED"', '"DENIED"')
    code, found = checked(tmp_path, wrong, "agent.ts")
    assert code == 1 and [d["code"] for d in found] == ["TS2367"]
