"""Boxed scalar results: recognised, typed, shown, and unboxed on request (§5.3.2).

End to end against real servers: tests/servers/boxed_server.py (OpenMCP/Dedalus
`x-dedalus-box`) and tests/servers/fastmcp_boxed.py (FastMCP of the `mcp` SDK, which boxes
without a marker), each configured twice in one temp project: as the spec says (the box is
returned as sent) and with `unbox = true` (the project default in its codemode.toml, turned
off per server for the spec twins). `codemode-gen record` and `generate` write the project's
fixtures and out/; the real tsc checks the declarations, real QuickJS runs the scripts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.cli import main
from codemode_gen.config import ServerSettings, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.build import build_outputs
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.manifest import read_manifest
from codemode_gen.generator.unwrap import Box, inner_schema, read_box, unbox_value, unwrap_result
from codemode_gen.mcp_json import load_config, project_settings
from codemode_gen.runtime.frontends.prompt import render_prompt, server_block, system_prompt
from codemode_gen.runtime.frontends.prompt_layout import FULL, SIGNATURE
from codemode_gen.runtime.host.catalog import manifest_views
from tests.conftest import PYTHON, server_script, stdio_config
from tests.runtime_support import HostThread, assert_ok
from tests.tsc import as_namespace, require_tsc
from tests.tsc import check as tsc_check

pytestmark = pytest.mark.timeout(180)

SPEC = ("dedalus", "fastmcp")  # config ids, also the module paths
UNBOXED = ("dedalus-unboxed", "fastmcp-unboxed")
SCRIPTS = {"dedalus": "boxed_server", "fastmcp": "fastmcp_boxed"}

CODEMODE_TOML = """\
unbox = true                 # project default: every server unboxes ...

[servers.dedalus]            # ... except the spec twins
unbox = false

[servers.fastmcp]
unbox = false
"""
# Tools with required arguments are recorded from samples; read-only tools without are probed.
SAMPLES = [
    ("greet", {"name": "Ada"}),
    ("find", {"query": "milk"}),
    ("broken", {"shape": "text"}),
]
FASTMCP_SAMPLES = [("word_count", {"text": "a b c"})]

DEDALUS_BOX = {"field": "result", "marker": "x-dedalus-box"}
SDK_BOX = {"field": "result", "marker": "mcp-sdk"}


def _samples_toml() -> str:
    rows = []
    for sid in ("dedalus", "dedalus-unboxed"):
        rows += [(sid, tool, args) for tool, args in SAMPLES]
    for sid in ("fastmcp", "fastmcp-unboxed"):
        rows += [(sid, tool, args) for tool, args in FASTMCP_SAMPLES]
    return "".join(
        f'\n[[samples]]\nserver = "{sid}"\ntool = "{tool}"\ninput = {json.dumps(args).replace(":", " =")}\n'
        + (
            'expect = "drift"\n' if tool == "broken" else ""
        )  # its result breaks its schema on purpose
        for sid, tool, args in rows
    )


def _cli(project: Path, *argv: str) -> None:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        with pytest.raises(SystemExit) as info:
            main(list(argv))
    finally:
        os.chdir(cwd)
    assert info.value.code in (0, None), argv


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose fixtures/ and out/ were written by `record` and `generate`."""
    root = tmp_path_factory.mktemp("boxed")
    servers = {
        cid: {"command": PYTHON, "args": [str(server_script(SCRIPTS[cid.split("-")[0]])), "stdio"]}
        for cid in (*SPEC, *UNBOXED)
    }
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    (root / "codemode.toml").write_text(CODEMODE_TOML + _samples_toml(), encoding="utf-8")
    _cli(root, "record")
    _cli(root, "generate")
    return root


@pytest.fixture(scope="module")
def manifest(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (project / "out" / "manifest.json").read_text(encoding="utf-8")
    )
    return data


@pytest.fixture(scope="module")
def host(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    settings = project_settings(project / ".mcp.json")
    configs = load_config(project / ".mcp.json", settings)
    h = HostThread(configs, project / "out", tmp_path_factory.mktemp("logs"), settings=settings)
    yield h
    h.close()


def server(manifest: dict[str, Any], sid: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in manifest["servers"] if s["serverId"] == sid)
    return found


def tool(manifest: dict[str, Any], sid: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(t for t in server(manifest, sid)["tools"] if t["toolName"] == name)
    return found


def warnings(response: dict[str, Any]) -> list[dict[str, Any]]:
    """Diagnostics beyond info (connecting can take long enough for a CONNECT_TIME note)."""
    return [d for d in response["diagnostics"] if d["severity"] != "info"]


def tool_doc(dts: str, export: str) -> str:
    """The doc comment line right above `export function <export>(`."""
    lines = dts.splitlines()
    at = next(
        i for i, line in enumerate(lines) if line.strip().startswith(f"export function {export}(")
    )
    return lines[at - 1].strip()


# --------------------------------------------------------------------------- recognising markers


def test_markers_recognised_from_declared_schemas() -> None:
    dedalus = {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
        "x-dedalus-box": {"field": "result"},
    }
    assert read_box(dedalus) == (Box("result", "x-dedalus-box"), None)
    # the standalone fastmcp package (2.10+): an explicit marker
    wrapped = {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"type": "string"}}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    assert read_box(wrapped) == (Box("result", "x-fastmcp-wrap-result"), None)
    assert read_box({**wrapped, "x-fastmcp-wrap-result": False}) == (None, None)
    # the mcp SDK's FastMCP: no marker; its `<function>Output` wrapper model is the sign
    sdk = {
        "properties": {"result": {"title": "Result", "type": "integer"}},
        "required": ["result"],
        "title": "word_countOutput",
        "type": "object",
    }
    assert read_box(sdk) == (Box("result", "mcp-sdk"), None)
    # a real model that happens to have one `result` field is not a box
    assert read_box({**sdk, "title": "Stats"}) == (None, None)
    assert read_box({**sdk, "additionalProperties": False}) == (None, None)
    assert read_box({**sdk, "required": []}) == (None, None)
    # a marker that cannot be used is a warning, not a box
    box, warning = read_box({**dedalus, "x-dedalus-box": {"field": "value"}})
    assert box is None and warning is not None and "not a property" in warning
    box, warning = read_box({**dedalus, "x-dedalus-box": "result"})
    assert box is None and warning is not None and "x-dedalus-box ignored" in warning
    assert read_box({"type": "object"}) == (None, None)
    assert read_box(None) == (None, None)


def test_inner_schema_keeps_definitions_and_dialect() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Note": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Note"}}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    box = Box("result", "x-fastmcp-wrap-result")
    assert inner_schema(schema, box) == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Note": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "type": "array",
        "items": {"$ref": "#/$defs/Note"},
    }
    assert inner_schema({"properties": {"result": True}}, box) == {}


def test_unboxing_comes_after_the_spec_rules() -> None:
    box = Box("result", "x-dedalus-box")
    boxed = {"content": [{"type": "text", "text": "7"}], "structuredContent": {"result": 7}}
    assert unbox_value(unwrap_result(boxed), box) == (True, 7)
    assert unbox_value(unwrap_result({"structuredContent": {"result": None}}), box) == (True, None)
    # rule 2 gives a string: not an object, nothing to unbox
    text = {"content": [{"type": "text", "text": "7"}]}
    assert unbox_value(unwrap_result(text), box) == (False, "7")
    assert unbox_value({"value": 7}, box) == (False, {"value": 7})


def test_fastmcp_package_marker_types_the_inner_value() -> None:
    """`x-fastmcp-wrap-result` (standalone fastmcp) is typed like the others, boxed or not."""
    listed = {
        "name": "add",
        "description": "Adds two integer numbers together.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "outputSchema": {
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
            "type": "object",
            "x-fastmcp-wrap-result": True,
        },
    }
    fixtures = [FixtureSet("calc", {"serverInfo": {"name": "calc"}}, [listed], {})]
    spec = build_outputs(fixtures)
    unboxed = build_outputs(fixtures, Settings(servers={"calc": ServerSettings(unbox=True)}))
    for outputs, output, tag in (
        (spec, "{ result: number }", "@boxed result"),
        (unboxed, "number", "@unboxed result"),
    ):
        entry = outputs.manifest["servers"][0]
        declaration = entry["tools"][0]["declaration"]
        assert f"): Promise<{output}>;" in declaration and tag in declaration
        assert entry["tools"][0]["output"]["box"]["marker"] == "x-fastmcp-wrap-result"
        assert "x-fastmcp-wrap-result" in tool_doc(outputs.files["servers/calc.d.ts"], "add")
    assert unboxed.manifest["servers"][0]["tools"][0]["outputSchema"] == {"type": "integer"}


# --------------------------------------------------------------------------- configuration


def test_unbox_setting_per_server_and_project_default(tmp_path: Path) -> None:
    toml = tmp_path / "codemode.toml"
    toml.write_text("unbox = true\n[servers.a]\nunbox = false\n[servers.b]\ncall_timeout = 5\n")
    settings = project_settings(tmp_path / ".mcp.json")
    assert (settings.unbox_for("a"), settings.unbox_for("b"), settings.unbox_for("c")) == (
        False,
        True,
        True,
    )
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {n: {"command": "x"} for n in ("a", "b", "c")}})
    )
    configs = load_config(tmp_path / ".mcp.json", settings)
    assert {n: c.unbox for n, c in configs.items()} == {"a": False, "b": True, "c": True}
    assert Settings().unbox_for("a") is False  # the default stays spec behaviour
    toml.write_text('[servers.a]\nunbox = "yes"\n')
    with pytest.raises(UserError, match=r"servers\.a\.unbox must be true or false"):
        project_settings(tmp_path / ".mcp.json")
    toml.write_text("unbox = 1\n")
    with pytest.raises(UserError, match=r"unbox must be true or false"):
        project_settings(tmp_path / ".mcp.json")


# --------------------------------------------------------------------------- generate


@pytest.mark.slow
def test_manifest_keeps_the_boxes(manifest: dict[str, Any]) -> None:
    for sid in (*SPEC, *UNBOXED):
        unboxed = sid in UNBOXED
        entry = server(manifest, sid)
        assert entry.get("unbox", False) is unboxed
        names = (
            ["answer", "broken", "find", "greet"]
            if sid.startswith("dedalus")
            else ["tags", "word_count"]
        )
        marker = DEDALUS_BOX if sid.startswith("dedalus") else SDK_BOX
        for name in names:
            output = tool(manifest, sid, name)["output"]
            assert output["source"] == "declared"
            assert output["box"] == {**marker, "unboxed": unboxed}, (sid, name)
    assert "box" not in tool(manifest, "fastmcp-unboxed", "stats")["output"]  # an object, not boxed
    # the effective outputSchema is what the script receives; the declared one is kept as sent
    spec, unboxed_answer = (
        tool(manifest, "dedalus", "answer"),
        tool(manifest, "dedalus-unboxed", "answer"),
    )
    assert spec["outputSchema"] == spec["output"]["declared"]
    assert spec["outputSchema"]["x-dedalus-box"] == {"field": "result"}
    assert unboxed_answer["outputSchema"] == {"type": "integer"}
    assert unboxed_answer["output"]["declared"] == spec["output"]["declared"]
    assert tool(manifest, "fastmcp-unboxed", "tags")["outputSchema"] == {
        "items": {"type": "string"},
        "title": "Result",
        "type": "array",
    }
    # broken's recorded result (a sample that expects it) does not match its own schema: drift, as
    # for any declared schema
    assert any(
        "expected object, got string" in d
        for d in tool(manifest, "dedalus", "broken")["output"]["drift"]
    )


@pytest.mark.slow
def test_declarations_say_boxed_and_type_the_returned_value(
    project: Path, manifest: dict[str, Any]
) -> None:
    out = project / "out"
    dedalus = (out / "servers" / "dedalus.d.ts").read_text(encoding="utf-8")
    unboxed = (out / "servers" / "dedalus-unboxed.d.ts").read_text(encoding="utf-8")
    fastmcp = (out / "servers" / "fastmcp.d.ts").read_text(encoding="utf-8")
    fast_unboxed = (out / "servers" / "fastmcp-unboxed.d.ts").read_text(encoding="utf-8")
    # spec: the box as sent, and why
    assert re.search(
        r"export type AnswerOutput = \{\n\s+/\*\* integer\. \*/ result: number;", dedalus
    )
    assert "export type GreetOutput = { result: string; [k: string]: unknown };" in dedalus
    doc = tool_doc(dedalus, "answer")
    assert "Boxed by the server (x-dedalus-box): the value is in .result." in doc
    assert doc.endswith("@boxed result @readOnly @closedWorld */")
    assert re.search(
        r"export type WordCountOutput = \{\n\s+/\*\* integer\. \*/ result: number;", fastmcp
    )
    assert "export type TagsOutput = { result: string[]; [k: string]: unknown };" in fastmcp
    assert "(FastMCP's result wrapper)" in tool_doc(
        fastmcp, "tags"
    ) and "@boxed result" in tool_doc(fastmcp, "tags")
    assert "@boxed" not in tool_doc(fastmcp, "stats")
    # unbox: the inner type, and the deviation named
    assert "export type AnswerOutput = number;" in unboxed
    assert "export type FindOutput = string[];" in unboxed
    assert "export type GreetOutput = string;" in unboxed
    assert "): Promise<AnswerOutput>;" in unboxed
    assert "returned unboxed (unbox = true, a deviation from spec §5.3.2)" in tool_doc(
        unboxed, "greet"
    )
    assert "@unboxed result" in tool_doc(unboxed, "greet")
    assert "(tools tagged @unboxed) are returned as that field's value" in unboxed
    assert "that field's value" not in dedalus
    assert "export type WordCountOutput = number;" in fast_unboxed
    assert "export type TagsOutput = string[];" in fast_unboxed
    assert (
        "/** Result" not in fast_unboxed and " * Result\n" not in fast_unboxed
    )  # pydantic's title of the field respells it: no doc line
    # the compact agent rendering: one short tag, the returned type inline
    full = server_block(server(manifest, "dedalus-unboxed"))
    assert re.search(
        r"@unboxed result @readOnly @closedWorld \*/\n\s+function answer\([^)]*\): Promise<number>;",
        full,
    )
    assert "function find(input: {" in full and "}): Promise<string[]>;" in full
    assert "): Promise<number>;" in tool(manifest, "fastmcp-unboxed", "word_count")["declaration"]
    assert "@unboxed result" in tool(manifest, "fastmcp-unboxed", "word_count")["declaration"]
    spec_decl = tool(manifest, "dedalus", "answer")["declaration"]
    assert "@boxed result" in spec_decl and "): Promise<{ result: number }>;" in spec_decl
    assert "): Promise<{ result: string[] }>;" in tool(manifest, "fastmcp", "tags")["declaration"]
    # the serve prompt's blocks show the box in the type; the tag is only in the declarations
    assert "@boxed" not in server_block(server(manifest, "dedalus"))
    assert "Promise<{ result: string }>" in server_block(server(manifest, "dedalus"))


@pytest.mark.slow
def test_declarations_compile_and_type_both_modes(project: Path, manifest: dict[str, Any]) -> None:
    """tsc --strict over out/ (its own tsconfig) and a script using every mode: each
    `@ts-expect-error` line must fail, so the types really differ between the modes."""
    tsc = require_tsc()
    (project / "agent.ts").write_text(
        'import * as d from "@codemode/servers/dedalus";\n'
        'import * as du from "@codemode/servers/dedalus-unboxed";\n'
        'import * as f from "@codemode/servers/fastmcp";\n'
        'import * as fu from "@codemode/servers/fastmcp-unboxed";\n'
        'import { getTool } from "@codemode/discovery";\n'
        "const a: number = (await d.answer()).result;\n"
        "const b: number = await du.answer();\n"
        'const g: string = (await d.greet({ name: "x" })).result + (await du.greet({ name: "x" }));\n'
        'const l: string[] = await du.find({ query: "m" });\n'
        'const n: number = (await f.word_count({ text: "a" })).result + (await fu.word_count({ text: "a" }));\n'
        "const t: string[] = [...(await f.tags()).result, ...(await fu.tags())];\n"
        "const s: number = (await fu.stats()).words;\n"
        'const boxed = (await getTool("dedalus", "answer")).boxed;\n'
        "const field: string | undefined = boxed?.field;\n"
        "const unboxed: boolean | undefined = boxed?.unboxed;\n"
        "// @ts-expect-error the spec binding returns the box\n"
        "const bad1: number = await d.answer();\n"
        "// @ts-expect-error the unboxed binding returns the value itself\n"
        "const bad2: number = (await du.answer()).result;\n"
        "// @ts-expect-error a list, not a box\n"
        "const bad3: string[] = (await fu.tags()).result;\n"
        "globalThis.__codemode_result__ = [a, b, g, l, n, t, s, field, unboxed, bad1, bad2, bad3];\n"
        "export {};\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [str(tsc), "-p", str(project / "out" / "tsconfig.json"), "--pretty", "false"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the agent rendering (declarations and prompt blocks) compiles and types the same way
    snippets: dict[str, str] = {}
    for entry in manifest["servers"]:
        for t in entry["tools"]:
            snippets[f"{entry['serverId']}/{t['toolName']}.d.ts"] = t["declaration"]
        for kind, level in (("full", FULL), ("plain", SIGNATURE)):
            snippets[f"{entry['serverId']}/{kind}.d.ts"] = as_namespace(server_block(entry, level))
    use = (
        'const v: number = await Server.answer();\nconst w: string[] = await Server.find({ query: "q" });\n'
        "// @ts-expect-error unboxed\nconst x = (await Server.answer()).result;\nconsole.log(v, w, x);\n"
    )
    snippets["use-unboxed"] = (
        "declare const console: { log(...a: unknown[]): void };\n"
        + as_namespace(server_block(server(manifest, "dedalus-unboxed")))
        + "\n"
        + use
    )
    results = tsc_check(snippets)
    assert {name: diags for name, diags in results.items() if diags} == {}


# --------------------------------------------------------------------------- runtime


@pytest.mark.slow
def test_spec_behaviour_returns_the_box(host: HostThread) -> None:
    r = host.run(
        'import * as d from "@codemode/servers/dedalus";\nimport * as f from "@codemode/servers/fastmcp";\n'
        'globalThis.__codemode_result__ = [await d.answer(), await d.greet({ name: "Ada" }), '
        'await d.find({ query: "milk" }), await d.broken(), await f.word_count({ text: "a b c" }), await f.tags()];'
    )
    assert assert_ok(r) == [
        {"result": 7},
        {"result": "Hello Ada"},
        {"result": ["milk and eggs", "buy milk"]},
        {"value": 42},
        {"result": 3},
        {"result": ["a", "b", "c"]},
    ]
    assert warnings(r) == []  # no unbox, nothing to warn about


@pytest.mark.slow
def test_unbox_returns_the_inner_value(host: HostThread) -> None:
    r = host.run(
        'import * as du from "@codemode/servers/dedalus-unboxed";\n'
        'import * as fu from "@codemode/servers/fastmcp-unboxed";\n'
        'globalThis.__codemode_result__ = [await du.answer(), await du.greet({ name: "Ada" }), '
        'await du.find({ query: "milk", limit: 1 }), await fu.word_count({ text: "a b c" }), await fu.tags(), '
        "await fu.stats()];"
    )
    assert assert_ok(r) == [
        7,
        "Hello Ada",
        ["milk and eggs"],
        3,
        ["a", "b", "c"],
        {"words": 3, "lines": 1},
    ]
    assert warnings(r) == []
    assert [e["ok"] for e in r["toolTrace"]] == [True] * 6


@pytest.mark.slow
def test_result_without_the_boxed_field_is_returned_unchanged_with_a_warning(
    host: HostThread,
) -> None:
    r = host.run(
        'import { broken, answer } from "@codemode/servers/dedalus-unboxed";\n'
        "globalThis.__codemode_result__ = [await broken(), await broken({ shape: 'object' }), await answer()];"
    )
    assert assert_ok(r) == [{"value": 42}, {"value": 42}, 7]
    (warning,) = warnings(r)  # one per tool and run
    assert (warning["severity"], warning["code"]) == ("warning", "UNBOX_MISMATCH")
    assert "dedalus-unboxed.broken" in warning["message"] and '"result"' in warning["message"]
    assert "object without it" in warning["message"] and warning["hint"]
    assert all(e["ok"] for e in r["toolTrace"])
    # not an object at all (a single text block, §5.3.2 rule 2): the string, unchanged
    r = host.run(
        "import { broken } from '@codemode/servers/dedalus-unboxed';\n"
        "globalThis.__codemode_result__ = await broken({ shape: 'text' });"
    )
    assert assert_ok(r) == "42"
    (warning,) = warnings(r)
    assert warning["code"] == "UNBOX_MISMATCH" and "string, not an object" in warning["message"]


@pytest.mark.slow
def test_discovery_exposes_the_box_and_the_effective_output_schema(host: HostThread) -> None:
    r = host.run(
        'import { getTool, listTools, searchTools } from "@codemode/discovery";\n'
        "globalThis.__codemode_result__ = {\n"
        '  spec: await getTool("dedalus", "answer"),\n'
        '  unboxed: await getTool("dedalus-unboxed", "answer"),\n'
        '  fast: await getTool("fastmcp-unboxed", "tags"),\n'
        '  stats: await getTool("fastmcp-unboxed", "stats"),\n'
        '  brief: (await listTools("dedalus-unboxed")).find((t) => t.toolName === "answer"),\n'
        '  found: (await searchTools("word count", { serverId: "fastmcp", detail: "full" })).results[0],\n'
        "};"
    )
    got = assert_ok(r)
    assert got["spec"]["boxed"] == {"field": "result", "unboxed": False}
    assert got["spec"]["outputSchema"]["x-dedalus-box"] == {"field": "result"}
    assert "Promise<{ result: number }>" in got["spec"]["declaration"]
    assert got["unboxed"]["boxed"] == {"field": "result", "unboxed": True}
    assert got["unboxed"]["outputSchema"] == {"type": "integer"}
    assert "): Promise<number>;" in got["unboxed"]["declaration"]
    assert "@unboxed result" in got["unboxed"]["declaration"]
    assert got["fast"]["boxed"] == {"field": "result", "unboxed": True}
    assert got["fast"]["outputSchema"]["type"] == "array"
    assert "boxed" not in got["stats"]
    assert "boxed" not in got["brief"] and "outputSchema" not in got["brief"]  # full detail only
    assert got["found"]["toolName"] == "word_count" and got["found"]["boxed"] == {
        "field": "result",
        "unboxed": False,
    }


@pytest.mark.slow
def test_serve_prompt_documents_unboxing_only_when_used(
    host: HostThread, manifest: dict[str, Any]
) -> None:
    prompt = system_prompt(host.cm)
    (line,) = [x for x in prompt.splitlines() if "boxes in a one-field object" in x]
    assert line.startswith("- Deviation: for `dedalus-unboxed`, `fastmcp-unboxed` ")
    assert "`@unboxed <field>`" in line
    servers = manifest["servers"]
    without = render_prompt(servers)
    assert "@unboxed result" in without  # the unboxed servers' blocks carry the tag
    assert without.splitlines() == [
        x for x in render_prompt(servers, unbox_servers=UNBOXED).splitlines() if x != line
    ]
    spec_only = render_prompt([server(manifest, "dedalus"), server(manifest, "fastmcp")])
    assert (
        "@boxed" not in spec_only and "@unboxed" not in spec_only and "Deviation" not in spec_only
    )


@pytest.mark.slow
def test_in_memory_module_of_an_unboxed_server(tmp_path: Path) -> None:
    """A server out/ lacks is built in memory with its own `unbox` (a ServerConfig given
    directly, no codemode.toml): its declaration types the inner value the bridge returns."""
    configs = {"memo": stdio_config("memo", "boxed_server", unbox=True)}
    h = HostThread(configs, tmp_path / "out", tmp_path / "logs")
    try:
        r = h.run(
            'import { answer } from "@codemode/servers/memo";\nimport { getTool } from "@codemode/discovery";\n'
            'const t = await getTool("memo", "answer");\n'
            "globalThis.__codemode_result__ = [await answer(), t.declaration, t.outputSchema, t.boxed];"
        )
    finally:
        h.close()
    value, declaration, schema, boxed = assert_ok(r)
    assert (
        value == 7
        and schema == {"type": "integer"}
        and boxed == {"field": "result", "unboxed": True}
    )
    assert "): Promise<number>;" in declaration and "@unboxed result" in declaration


@pytest.mark.slow
def test_out_generated_for_the_other_setting_drops_its_declaration(
    project: Path, manifest: dict[str, Any]
) -> None:
    """out/ typed the box, but this host unboxes (or the reverse): discovery shows the schema
    the script receives and no declaration that would type the wrong value."""
    flipped = {
        "dedalus": stdio_config("dedalus", "boxed_server", unbox=True),
        "dedalus-unboxed": stdio_config("dedalus-unboxed", "boxed_server"),
    }
    views = manifest_views(read_manifest(project / "out"), project / "out", flipped)
    now_unboxed, now_boxed = (
        views["dedalus"].tools["answer"],
        views["dedalus-unboxed"].tools["answer"],
    )
    assert (now_unboxed.unboxed, now_unboxed.output_schema, now_unboxed.declaration) == (
        True,
        {"type": "integer"},
        None,
    )
    assert now_boxed.unboxed is False and now_boxed.declaration is None
    assert now_boxed.output_schema == tool(manifest, "dedalus", "answer")["output"]["declared"]
    kept = manifest_views(
        read_manifest(project / "out"),
        project / "out",
        {"dedalus": stdio_config("dedalus", "boxed_server")},
    )
    assert (
        kept["dedalus"].tools["answer"].declaration
        == tool(manifest, "dedalus", "answer")["declaration"]
    )
    assert kept["dedalus"].tools["answer"].definition()["boxed"] == {
        "field": "result",
        "unboxed": False,
    }
