"""Examples from the recordings and text formats (generator/examples.py), over the demo and the
recorded real catalog (tests/data/catalogs: git, sqlite and time have real calls).

A model that reads `Promise<string>` cannot know what the string holds: a real SQLite server's
`read_query` answers Python-literal text, and a first `JSON.parse` failed. The recordings hold
the example that says so; these tests hold the generated files to showing it, in every
rendering (.d.ts, discovery's declaration, the prompt's ladder), bounded and redacted.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.config import Settings
from codemode_gen.generator.build import Outputs, build_outputs
from codemode_gen.generator.examples import (
    MAX_EXAMPLE_INPUT_CHARS,
    MAX_EXAMPLE_LINE_CHARS,
    MAX_EXAMPLE_RESULT_CHARS,
    MAX_PROMPT_EXAMPLE_CHARS,
    choose_example,
    example_redactor,
    js_literal,
    text_format,
)
from codemode_gen.generator.fixtures import FixtureSet, load_fixtures
from codemode_gen.runtime.frontends.prompt import layout_prompt
from codemode_gen.runtime.frontends.prompt_layout import EXAMPLE
from tests.catalogs import catalog_fixture_sets
from tests.generator.test_build import tsc_project, write
from tests.runtime_support import REPO
from tests.tsc import check as tsc_check


@cache
def demo() -> Outputs:
    return build_outputs(load_fixtures(REPO / "fixtures"))


@cache
def real() -> Outputs:
    return build_outputs(catalog_fixture_sets())


def tools(outputs: Outputs) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(server, tool) for server in outputs.manifest["servers"] for tool in server["tools"]]  # type: ignore[misc]


def vague(tool: dict[str, Any]) -> bool:
    """Its result type says nothing of the value: `string` or `unknown`."""
    schema = tool.get("outputSchema")
    return schema is None or schema.get("type") == "string"


def recorded(tool: dict[str, Any]) -> bool:
    return tool["output"]["samples"] > 0


@pytest.mark.parametrize("catalog", ["demo", "real"])
def test_every_string_or_unknown_output_with_a_recording_carries_an_example_everywhere(
    catalog: str,
) -> None:
    """In the .d.ts doc comment, discovery's declaration and the prompt's parts, bounded."""
    outputs = demo() if catalog == "demo" else real()
    checked = 0
    for server, tool in tools(outputs):
        dts = outputs.files[server["types"]]
        declaration = tool["declaration"]
        example = tool["agent"].get("example")
        if not recorded(tool):
            assert example is None and "// e.g." not in declaration, tool["toolName"]
            continue
        line = next(x for x in declaration.splitlines() if x.startswith("// e.g. "))
        assert len(line) <= MAX_EXAMPLE_LINE_CHARS
        assert f"Example (a recorded call): await {tool['exportName']}(" in dts
        if vague(tool):
            checked += 1
            assert example is not None and " → " in example, tool["toolName"]
            assert len(example) <= MAX_PROMPT_EXAMPLE_CHARS
        elif example is not None:  # a typed result: the prompt shows the call only
            assert " → " not in example
    assert checked >= (4 if catalog == "demo" else 10)
    for text in (t for path, t in outputs.files.items() if path.endswith(".d.ts")):
        for line in text.splitlines():
            if "Example (a recorded call): await " in line:
                head, _, result = line.partition(") → ")
                args = head.split("Example (a recorded call): await ", 1)[1].split("(", 1)[1]
                result = re.sub(r"( @\S+)* \*/$", "", result)  # a one-line doc's tags come last
                assert (
                    len(args) <= MAX_EXAMPLE_INPUT_CHARS and len(result) <= MAX_EXAMPLE_RESULT_CHARS
                ), line


def test_golden_real_catalog_examples_and_text_formats() -> None:
    """What the recorded real servers' declarations say: sqlite's Python-literal text is named
    and shown (the example that would have saved the failed JSON.parse), git's plain text is
    shown as it is, and time's declared results show the call."""
    by_name = {(s["serverId"], t["toolName"]): t for s, t in tools(real())}
    read_query = by_name["sqlite", "read_query"]
    assert read_query["output"]["format"] == "python"
    assert read_query["agent"]["summary"] == (
        "Execute a SELECT query on the SQLite database. Returns Python-literal text, not JSON."
    )
    assert read_query["agent"]["example"] == (
        """// e.g. read_query({ query: "SELECT sku, stock FROM stock…) → "[{'sku': 'PAP-A4-80', 'stock': 420}]\""""
    )
    assert read_query["declaration"].splitlines()[1] == (
        """// e.g. read_query({ query: "SELECT sku, stock FROM stock WHERE stock > 100" }) → "[{'sku': 'PAP-A4-80', 'stock': 420}]\""""
    )
    sqlite_dts = real().files["servers/sqlite.d.ts"]
    assert (
        "Returns Python-literal text, not JSON (single quotes, None/True/False): JSON.parse fails on it."
        in sqlite_dts
    )
    assert (
        by_name["sqlite", "list_tables"]["agent"]["example"]
        == """// e.g. list_tables() → "[{'name': 'stock'}]\""""
    )
    assert "format" not in by_name["git", "git_log"]["output"]  # plain text: no format named
    assert by_name["git", "git_log"]["agent"]["example"].startswith(
        '// e.g. git_log({ repo_path: "/tmp/shop-repo" }) → "Commit history:\\nCommit: 2286c76'
    )
    assert (
        by_name["time", "get_current_time"]["agent"]["example"]
        == '// e.g. get_current_time({ timezone: "Europe/Berlin" })'
    )
    # probed from other calls' arguments: git_status's sample filled git_log's repo_path
    assert by_name["git", "git_log"]["output"]["source"] == "inferred"


def test_golden_demo_examples_and_text_formats() -> None:
    by_name = {t["toolName"]: t for _, t in tools(demo())}
    assert by_name["export-csv"]["output"]["format"] == "csv"
    assert by_name["export-csv"]["agent"]["summary"].startswith(
        "Export notes as CSV"
    )  # already says so
    assert "Returns CSV text" not in by_name["export-csv"]["agent"]["summary"]
    assert by_name["stats"]["output"]["format"] == "json"
    assert by_name["stats"]["agent"]["example"].startswith(
        """// e.g. stats() → '{"notes": 5, "todo": 2,"""
    )
    assert "format" not in by_name["summary"]["output"]  # prose
    assert by_name["get_note"]["agent"]["example"] == "// e.g. get_note({ id: 2 })"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["[{'sku': 'PAP-A4-80', 'stock': 420}]", "None", "[]"], "python"),  # `[]` is both
        (["[]", '[{"a": 1}]'], "json"),
        (["[]", '[{"a": true}]', "None"], None),  # `true` is JSON only, `None` Python only
        (["(1, 'a')", "{'a': True}"], "python"),
        (["id,title\n1,a\n2,b", "id,title\n"], None),  # a header alone is one line: not CSV
        (['id,title\n1,a\n2,"b, c"', "x;y\n1;2"], "csv"),
        (["# Report\n\nAll good.", "| a | b |\n|---|---|\n| 1 | 2 |"], "markdown"),
        (['{"a": 1}', "[1, 2]"], "json"),
        (["hello world", "On branch main"], None),
        (["[{'a': 1}]", "# Title"], None),  # formats that differ: none is named
        (["42", "true"], None),  # JSON scalars are values, not documents
        ([{"a": 1}], None),  # not text at all
        (["", "  "], None),
        (["[" * 10_000 + "]" * 10_000], None),  # too deep to read safely: not a literal
    ],
)
def test_text_formats_are_named_only_when_every_sample_agrees(
    values: list[Any], expected: str | None
) -> None:
    assert text_format(values) == expected


def call(
    value: Any, *, args: Any = None, error: bool = False, truncated: bool = False
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "input": args if args is not None else {},
        "result": {
            "content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": value,
            "isError": error,
        },
    }
    if truncated:
        line["truncated"] = {"originalBytes": 1, "keptBytes": 1}
    return line


def test_the_choice_is_deterministic_first_useful_call_in_line_order() -> None:
    redactor = example_redactor()
    calls = [
        call({"n": 0}, error=True),
        call({"n": 1}, truncated=True),
        call([]),
        call({"n": 2}),
        call({"n": 3}),
    ]
    chosen = choose_example(calls, "spec", show_input=False, redactor=redactor)
    assert chosen is not None and chosen.line == 4 and chosen.result == "{ n: 2 }"
    only_empty = choose_example([call({}), call([])], "spec", show_input=False, redactor=redactor)
    assert only_empty is not None and only_empty.line == 1  # all empty: the first that succeeded
    assert (
        choose_example([call({}, error=True)], "spec", show_input=False, redactor=redactor) is None
    )


def test_examples_are_redacted_whatever_the_recording_kept() -> None:
    """A hand-edited fixture or an older recorder's: known credential shapes, fields named like
    credentials and the project's `redact` patterns never reach out/."""
    leaky = {
        "user": "dana",
        "password": "hunter2-hunter2",
        "note": "key sk-proj-abcdefghijklmnopqrstu",
        "ticket": "ACME-4711",
    }
    tool = {
        "name": "whoami",
        "inputSchema": {
            "type": "object",
            "properties": {"token": {"type": "string"}},
            "required": ["token"],
        },
    }
    fixture = FixtureSet(
        "leaky", {}, [tool], {"whoami": [call(leaky, args={"token": "ghp_" + "a" * 36})]}
    )
    settings = Settings(redact_patterns=(r"ACME-\d+",))
    outputs = build_outputs([fixture], settings)
    entry = outputs.manifest["servers"][0]["tools"][0]
    texts = [outputs.files["servers/leaky.d.ts"], entry["declaration"], json.dumps(entry["agent"])]
    for text in texts:
        for secret in ("hunter2", "sk-proj-abc", "ghp_aaaa", "ACME-4711"):
            assert secret not in text, secret
    assert (
        "<redacted:password>" in entry["declaration"] and "<redacted:token>" in entry["declaration"]
    )
    assert "<redacted:pattern>" in entry["declaration"]


def test_js_literal_is_bounded_and_readable() -> None:
    assert (
        js_literal({"id": 2, "x-y": [None, True], "s": 'say "hi"'}, 100)
        == """{ id: 2, "x-y": [null, true], s: 'say "hi"' }"""
    )
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    assert len(js_literal(deep, 50)) <= 50
    assert (
        len(js_literal({"k": "x" * 10_000}, MAX_EXAMPLE_RESULT_CHARS)) == MAX_EXAMPLE_RESULT_CHARS
    )


def test_s4_4_examples_reach_the_prompt_of_the_real_catalog_when_budget_allows() -> None:
    servers = real().manifest["servers"]
    layout = layout_prompt([s for s in servers if s["serverId"] in ("git", "sqlite", "time")])
    assert all(level >= EXAMPLE for level in layout.levels.values())
    assert """→ "[{'sku': 'PAP-A4-80', 'stock': 420}]\"""" in layout.text


@pytest.mark.slow
def test_declarations_and_d_ts_with_examples_compile_under_tsc_strict(tmp_path: Path) -> None:
    """Examples are comments, and their calls are real calls: out/ of the demo and of the real
    catalog compiles under its own tsconfig (tsc --strict) with a script making every recorded
    call a .d.ts example shows, and every discovery declaration with an example compiles."""
    snippets: dict[str, str] = {}
    for name, outputs in (("demo", demo()), ("real", real())):
        out = write(tmp_path / name, outputs)
        lines = []
        for i, server in enumerate(outputs.manifest["servers"]):
            dts = outputs.files[server["types"]]
            calls = re.findall(r"Example \(a recorded call\): await (\w+)\((.*?)\) → ", dts)
            lines.append(f'import * as s{i} from "@codemode/servers/{server["serverId"]}";')
            lines += [f"await s{i}.{export}({args});" for export, args in calls if "…" not in args]
        assert sum(line.startswith("await") for line in lines) >= (7 if name == "demo" else 10)
        (tmp_path / name / "examples.ts").write_text(
            "\n".join(lines) + "\nexport {};\n", encoding="utf-8"
        )
        proc = tsc_project(out / "tsconfig.json")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        for entry, tool in tools(outputs):
            if "// e.g." in tool["declaration"]:
                body = tool["declaration"].replace("export ", "")
                snippets[f"{name}-{entry['serverId']}-{tool['exportName']}"] = (
                    f"declare namespace N {{\n{body}\n}}"
                )
    results = tsc_check(snippets)
    assert all(not errors for errors in results.values()), {k: v for k, v in results.items() if v}
