"""What `codemode-gen serve` sends back to the model (spec §3.3): a real MCP client (the SDK's)
against a real serve process over stdio, on the demo servers.

The model reads the tools/call result's text block (Claude Code and most clients) or its
structuredContent (the rest): both are the same §3.3 response, so everything here is checked on
the text as the client receives it, and the two are checked to be equal. serve makes it for the
model: toolTrace lists the failed and denied calls plus one toolSummary (`limits.trace`,
`serve --trace`), result and logs together stay within `limits.maxResponseChars` (default
DEFAULT_MAX_RESPONSE_CHARS, `serve --max-response-chars`), and an info diagnostic says only what
explains an outcome (no CONNECT_TIME on a run that went well).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.cli.serve import serve_command
from codemode_gen.generator.fixtures import load_fixtures
from codemode_gen.host_options import HostOptions
from codemode_gen.limit_bounds import (
    DEFAULT_MAX_RESPONSE_CHARS,
    HARD_MAX_RESPONSE_CHARS,
    LIMIT_KEYS,
)
from codemode_gen.runtime.diagnostics import DiagnosticCode
from tests.runtime_support import PYTHON, REPO, against_serve, script, write_out

pytestmark = pytest.mark.timeout(180)

# The notes server starts this much later than it would: connecting it takes longer than
# CONNECT_NOTICE_MS (1 s) on any machine, so its first run is one that used to get CONNECT_TIME.
START_DELAY_S = 1.2
# Nine calls of one tool, one failing with the server's own message (note 99 does not exist).
NINE_CALLS = """
import * as notes from "@codemode/servers/notes";
const titles = [];
for (const id of [1, 2, 3, 4, 5, 1, 2, 3, 99]) {
  try { titles.push((await notes.get_note({ id })).title); } catch (e) { titles.push(e.name); }
}
globalThis.__codemode_result__ = titles;
"""
# A naive script: a log line per row and every row returned (about 250 KB of JSON).
DUMP = """
import * as notes from "@codemode/servers/notes";
const all = (await notes.list_notes()).result;
for (let i = 0; i < 300; i++) console.log(`row ${i}: ${all[i % all.length].body}`);
globalThis.__codemode_result__ = {
  count: 1000, rows: Array.from({ length: 1000 }, (_, i) => ({ i, note: all[i % all.length] })),
};
"""


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("serve-response")
    notes = f"sleep {START_DELAY_S}; exec {PYTHON} {script('notes_server')}"
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": "sh", "args": ["-c", notes]},
                    "calendar": {"command": PYTHON, "args": [script("calendar_server")]},
                }
            }
        )
    )
    write_out(
        base / "out", load_fixtures(REPO / "fixtures")
    )  # the demo's out/, as generate wrote it
    return base


async def run(client: Any, code: str, **limits: Any) -> tuple[str, dict[str, Any]]:
    """(the text block the model reads, the response parsed from it); structuredContent is the
    same response."""
    got = await client.call_tool(
        "codemode.run", {"code": code, **({"limits": limits} if limits else {})}
    )
    assert not got.is_error and len(got.content) == 1
    text = got.content[0].text
    response = json.loads(text)
    assert response == got.structured_content
    return text, response


@pytest.mark.slow
def test_s3_3_serve_gives_the_model_failed_calls_a_summary_and_no_idle_notes(project: Path) -> None:
    async def body(client: Any) -> Any:
        description = (await client.list_tools()).tools[0].description
        first = await run(client, NINE_CALLS)  # connects notes: longer than CONNECT_NOTICE_MS
        full = await run(client, NINE_CALLS, trace="full")
        none = await run(
            client, NINE_CALLS, trace="none", frobnicate=1
        )  # unknown keys pass (§3.2.4)
        bad = await run(client, NINE_CALLS, trace="some")
        return description, first, full, none, bad

    description, (text, first), (_, full), (_, none), (_, bad) = against_serve(
        project, body, "--out", str(project / "out")
    )
    titles = [
        "Quarterly planning",
        "Groceries",
        "Search latency investigation",
        "Book club",
        "Release checklist",
    ]
    assert first["result"] == [*titles, *titles[:3], "ToolCallError"]
    # The default, "errors": the failed call in §3.3.2's shape, its error the server's own words.
    (failed,) = first["toolTrace"]
    assert set(failed) == {
        "serverId",
        "toolName",
        "durationMs",
        "ok",
        "error",
    }  # approval "allowed" says nothing
    assert failed["ok"] is False and failed["toolName"] == "get_note"
    assert (
        failed["error"]
        == "ToolCallError: Error executing tool get_note: note 99 not found (existing ids: 1, 2, 3, 4, 5)"
    )
    assert first["toolSummary"] == {"calls": {"notes.get_note": 9}, "failed": 1}
    # Connecting took over a second, and the run went well: nothing to say about it.
    assert first["diagnostics"] == []
    assert "CONNECT_TIME" not in text and "nothing to do" not in text
    # "full": every call; "none": no trace at all.
    assert [e["ok"] for e in full["toolTrace"]] == [True] * 8 + [
        False
    ] and "toolSummary" not in full
    assert full["toolTrace"][-1] == {
        **failed,
        "durationMs": full["toolTrace"][-1]["durationMs"],
        "approval": "allowed",
    }
    assert (
        "toolTrace" not in none and "toolSummary" not in none and none["result"] == first["result"]
    )
    (invalid,) = bad["diagnostics"]
    assert invalid["code"] == "INVALID_LIMITS" and invalid["path"] == "/limits/trace"
    assert "'full', 'errors', 'none'" in invalid["message"]
    # The prompt names every key the host honours (§3.2.4 MUST), with serve's defaults.
    for key in LIMIT_KEYS:
        assert key in description, key
    assert "maxResponseChars 2e4" in description and "trace errors (or full, none)" in description


@pytest.mark.slow
def test_s3_3_serve_cuts_result_and_logs_to_the_budget_and_says_so(project: Path) -> None:
    async def body(client: Any) -> Any:
        whole = await run(client, DUMP, maxResponseChars=HARD_MAX_RESPONSE_CHARS)
        default = await run(client, DUMP)
        small = await run(client, DUMP, maxResponseChars=2000)
        return whole, default, small

    (_, whole), *cut_runs = against_serve(project, body, "--out", str(project / "out"))
    assert (
        whole["diagnostics"] == []
        and len(whole["result"]["rows"]) == 1000
        and len(whole["logs"]) == 300
    )
    full_result, full_logs = len(compact(whole["result"])), len(compact(whole["logs"]))
    for (text, response), budget in zip(cut_runs, (DEFAULT_MAX_RESPONSE_CHARS, 2000), strict=True):
        result, logs = response["result"], response["logs"]
        kept_result, kept_logs = len(compact(result)), len(compact(logs))
        assert kept_result + kept_logs <= budget
        # Cut deterministically, never silently: what is kept is the start of the real thing.
        assert (
            result["count"] == 1000
            and result["rows"][-1] == f"…[+{1001 - len(result['rows'])} items]"
        )
        assert result["rows"][:-1] == whole["result"]["rows"][: len(result["rows"]) - 1]
        assert (
            logs[0]["message"] == whole["logs"][0]["message"]
            and logs[-1]["message"] == whole["logs"][-1]["message"]
        )
        (marker,) = [e for e in logs if e["message"].startswith("…[+")]
        assert marker["level"] == "warn" and "log entries" in marker["message"]
        (note,) = response["diagnostics"]
        assert note["code"] == DiagnosticCode.RESPONSE_TRUNCATED and note["severity"] == "warning"
        assert f"maxResponseChars = {budget}" in note["message"]
        assert f"result {full_result} → {kept_result}" in note["message"]
        # The logs' full size (entries' timeMs differ from run to run by a digit or so each).
        stated = re.search(r"logs (\d+) → (\d+) \((\d+) of 300 entries kept\)", note["message"])
        assert (
            stated is not None and int(stated[2]) == kept_logs and int(stated[3]) == len(logs) - 1
        )
        assert abs(int(stated[1]) - full_logs) <= 300 * 3
        assert "summary" in note["hint"] or "aggregate" in note["hint"]
        # What the model reads is the budget plus a bounded rest (diagnostics, trace summary).
        assert len(text) <= budget + 1500
    assert len(cut_runs[0][0]) < len(compact(whole)) / 10


@pytest.mark.slow
def test_serve_flags_set_the_defaults(project: Path) -> None:
    """`serve --trace full --max-response-chars N` change serve's defaults (a run's limits still
    win)."""

    async def body(client: Any) -> Any:
        flagged = await run(
            client, NINE_CALLS + DUMP.replace("import * as notes", "import * as notes2")
        )
        per_run = await run(client, NINE_CALLS, trace="errors", maxResponseChars=1000)
        return flagged, per_run

    (_, flagged), (_, per_run) = against_serve(
        project,
        body,
        "--out",
        str(project / "out"),
        "--trace",
        "full",
        "--max-response-chars",
        "5000",
    )
    assert len(flagged["toolTrace"]) == 10 and "toolSummary" not in flagged  # --trace full
    assert (
        len(compact(flagged["result"])) + len(compact(flagged["logs"])) <= 5000
    )  # --max-response-chars
    assert [d["code"] for d in flagged["diagnostics"]] == [DiagnosticCode.RESPONSE_TRUNCATED]
    assert len(per_run["toolTrace"]) == 1 and per_run["toolSummary"]["failed"] == 1


def test_print_config_repeats_the_response_flags_given(tmp_path: Path) -> None:
    config = tmp_path / ".mcp.json"
    argv = serve_command(
        config, None, "codemode.run", 16_000, HostOptions(trace="none", max_response_chars=5000)
    )
    assert argv[-4:] == ["--trace", "none", "--max-response-chars", "5000"]
    default = serve_command(config, None, "codemode.run", 16_000)
    assert "--trace" not in default and "--max-response-chars" not in default
