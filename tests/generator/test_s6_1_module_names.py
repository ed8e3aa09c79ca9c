"""Spec §6.1 beyond reserved words: tool names that would change what a server module *is*.

A tool named `then` made the module namespace a thenable (`await import(...)` never settled);
`__proto__` changed the prototype of objects the namespace is copied into; `__esModule` is the
interop marker bundlers and TypeScript read. They are renamed like reserved words
(generator/names.py). End to end: a real MCP server (tests/servers/catalog_server.py) serving
tools with these names, bindings in real QuickJS, generated out/ checked by real tsc.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode_gen.generator.names import (
    MODULE_SEMANTICS_NAMES,
    assign_export_names,
    tool_identifier,
)
from codemode_gen.runtime.host.tsdiagnostics import to_diagnostics
from codemode_gen.runtime.host.typecheck import check_sync
from tests.runtime_support import REPO, HostThread, assert_ok, fixture_set, stdio, write_out
from tests.tsc import require_tsc

pytestmark = pytest.mark.timeout(120)

# Tool name -> the export it must get. `then_` is a tool of its own that collides with the
# renamed `then` (the first in alphabetical order keeps the clean form, §6.1 collisions).
EXPECTED = {
    "then": "then_",
    "then_": "then___2",
    "__proto__": "__proto___",
    "__esModule": "__esModule_",
    "default": "default_",
    "constructor": "constructor",  # a plain own property of the null-prototype namespace
    "toString": "toString",
}


def tools() -> list[dict[str, object]]:
    return [
        {
            "name": name,
            "description": f"The tool {name}.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": True},
        }
        for name in EXPECTED
    ]


@pytest.mark.parametrize("name", sorted(MODULE_SEMANTICS_NAMES))
def test_s6_1_module_semantics_names_are_suffixed_like_reserved_words(name: str) -> None:
    assert tool_identifier(name) == name + "_"


def test_s6_1_module_semantics_names_collide_deterministically() -> None:
    assert assign_export_names(EXPECTED) == EXPECTED
    assert assign_export_names(reversed(list(EXPECTED))) == EXPECTED


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("s6-1-names")
    (base / "tools.json").write_text(json.dumps(tools()))
    write_out(base / "out", [fixture_set("odd", tools())])
    return base


@pytest.fixture(scope="module", params=["out", "live"])
def host(request: pytest.FixtureRequest, project: Path) -> Iterator[HostThread]:
    """The server's module from generated out/, or built in memory from the live tools/list."""
    out = project / "out" if request.param == "out" else project / f"empty-{request.param}"
    h = HostThread(
        {"odd": stdio("odd", "catalog_server", "--catalog", str(project / "tools.json"))},
        out,
        project / f"logs-{request.param}",
    )
    yield h
    h.close()


@pytest.mark.slow
def test_s6_1_dynamic_import_settles_and_renamed_exports_call_their_tools(host: HostThread) -> None:
    code = """
const ns = await import("@codemode/servers/odd");
const copy = Object.assign({}, ns);
const { listTools } = await import("@codemode/discovery");
globalThis.__codemode_result__ = {
  exports: Object.keys(ns).filter((k) => k !== "__meta__").sort(),
  meta: Object.fromEntries(ns.__meta__.tools.map((t) => [t.toolName, t.exportName])),
  discovery: Object.fromEntries((await listTools("odd")).map((t) => [t.toolName, t.exportName])),
  copyIsPlain: Object.getPrototypeOf(copy) === Object.prototype,
  then: await ns.then_({}),
  thenUnderscore: await ns.then___2({}),
  proto: await ns.__proto___({}),
  esModule: await ns.__esModule_({}),
  ctor: await ns.constructor({}),
};
"""
    result = assert_ok(host.run(code))
    assert result["exports"] == sorted(EXPECTED.values())
    assert result["meta"] == EXPECTED and result["discovery"] == EXPECTED
    assert result["copyIsPlain"] is True
    assert result["then"] == "then called with {}"  # the MCP tool `then`, not `then_`
    assert result["thenUnderscore"] == "then_ called with {}"
    assert result["proto"] == "__proto__ called with {}"
    assert result["esModule"] == "__esModule called with {}"
    assert result["ctor"] == "constructor called with {}"


@pytest.mark.slow
def test_s6_1_manifest_and_declarations_agree_and_tsc_accepts_them(project: Path) -> None:
    require_tsc()
    manifest = json.loads((project / "out" / "manifest.json").read_text())
    (server,) = manifest["servers"]
    assert {t["toolName"]: t["exportName"] for t in server["tools"]} == EXPECTED
    script = """
const ns = await import("@codemode/servers/odd");
import { then_, __proto___ } from "@codemode/servers/odd";
const a: unknown = await ns.then_({});
const b: unknown = await then_({});
const c: unknown = await __proto___();
export const all = [a, b, c, await ns.__esModule_({}), await ns.default_({}), await ns.then___2({})];
"""
    result = check_sync(script, project / "out", lang="ts", roots=[REPO], timeout=120)
    assert to_diagnostics(result) == []
