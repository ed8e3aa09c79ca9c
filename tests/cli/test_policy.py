"""The approval policy where a user first meets it: `codemode-gen policy` (the table) and the
summary `record` and `generate` print (codemode_gen/cli/policy.py, runtime/host/approval.py).

Golden outputs (tests/data/policy/) for the demo project and for the real sqlite server, whose
tools carry no annotations; set CODEMODE_UPDATE_GOLDEN=1 to rewrite them after a deliberate
change (and read the diff). The summary's codemode.toml lines are pasted into a real
codemode.toml and read back, so "the lines to add" are the lines that work.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.cli import main
from tests.catalogs import CATALOGS_DIR
from tests.runtime_support import PYTHON, REPO, script

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "policy"

# The demo project with approval settings of every kind: a project default, a server default
# as a string and as "*", per-tool entries, a blocklist.
CONFIGURED = """\
approval = "auto"

[servers.notes]
blocklist = ["stats"]

[servers.notes.approval]
update_note = "ask-once"
"tasks.add" = "deny"
summary = "ask"

[servers.calendar.approval]
"*" = "deny"
list_events = "allow"
"""


def cli(
    argv: list[str], capsys: pytest.CaptureFixture[str], cwd: Path | None = None
) -> tuple[int, str, str]:
    """`codemode-gen ARGV` in-process (in `cwd`); (exit code, stdout, stderr)."""
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with pytest.raises(SystemExit) as exc:
            main(argv)
    finally:
        os.chdir(before)
    captured = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CODEMODE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} changed (CODEMODE_UPDATE_GOLDEN=1 rewrites it)"
    )


def summary(stdout: str) -> str:
    """The approval summary in a record/generate output: from `approval:` to its last line."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("approval: "))
    end = start + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return "\n".join(lines[start:end]) + "\n"


def catalog_project(base: Path, *catalogs: str) -> Path:
    """A project whose fixtures/ are real recorded catalogs (tests/data/catalogs), each served
    live by tests/servers/catalog_server.py when a command connects."""
    entries = {
        cid: {"command": PYTHON, "args": [script("catalog_server"), "stdio", "--catalog", cid]}
        for cid in catalogs
    }
    (base / ".mcp.json").write_text(json.dumps({"mcpServers": entries}))
    for cid in catalogs:
        shutil.copytree(CATALOGS_DIR / cid, base / "fixtures" / cid)
    return base


def demo_project(base: Path, settings: str | None) -> Path:
    shutil.copy(REPO / ".mcp.json", base / ".mcp.json")
    shutil.copytree(REPO / "fixtures", base / "fixtures")
    if settings is not None:
        (base / "codemode.toml").write_text(settings)
    return base


# --------------------------------------------------------------------------- codemode-gen policy


def test_policy_table_of_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(["policy", "--config", str(REPO / ".mcp.json")], capsys)
    assert code == 0 and err == ""
    golden("demo.txt", out)


def test_policy_table_of_an_unannotated_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = catalog_project(tmp_path, "sqlite")
    code, out, _ = cli(["policy"], capsys, cwd=project)
    assert code == 0
    golden("sqlite.txt", out)


def test_policy_table_names_the_codemode_toml_line_that_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = demo_project(tmp_path, CONFIGURED)
    code, out, _ = cli(["policy", "--config", str(project / ".mcp.json")], capsys)
    assert code == 0
    golden("configured.txt", out)


def test_policy_json_has_every_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = demo_project(tmp_path, CONFIGURED)
    code, out, _ = cli(
        ["policy", "--json", "--server", "notes", "--config", str(project / ".mcp.json")], capsys
    )
    assert code == 0
    rows = {row["tool"]: row for row in json.loads(out)}
    assert {row["server"] for row in rows.values()} == {"notes"} and len(rows) == 13
    assert rows["update_note"] == {
        "server": "notes",
        "tool": "update_note",
        "policy": "ask-once",
        "why": "config",
        "detail": '[servers.notes.approval] update_note = "ask-once"',
        "line": 7,
    }
    assert rows["stats"] | {"line": 0} == {
        "server": "notes",
        "tool": "stats",
        "policy": "deny",
        "why": "config",
        "detail": "[servers.notes] blocklist",
        "line": 0,
    }
    assert rows["delete_note"] == {
        "server": "notes",
        "tool": "delete_note",
        "policy": "ask",
        "why": "annotation",
        "detail": "destructiveHint: true",
    }


def test_policy_says_what_it_cannot_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = catalog_project(tmp_path, "sqlite")
    config = json.loads((project / ".mcp.json").read_text())
    config["mcpServers"]["later"] = {"command": "x"}
    (project / ".mcp.json").write_text(json.dumps(config))
    code, out, err = cli(["policy"], capsys, cwd=project)
    assert "later" not in out
    assert (
        code == 0
        and "note: later is configured but not recorded" in err
        and "codemode-gen record --server later" in err
    )
    code, _, err = cli(["policy", "--server", "nope"], capsys, cwd=project)
    assert code == 2 and "--server nope: not recorded" in err and "recorded servers: sqlite" in err
    shutil.rmtree(project / "fixtures")
    code, _, err = cli(["policy"], capsys, cwd=project)
    assert code == 2 and "codemode-gen record" in err and "Traceback" not in err


# --------------------------------------------------------------------------- record / generate summary


def test_generate_prints_the_policy_summary_of_the_demo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(
        ["generate", "--config", str(REPO / ".mcp.json"), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 0
    golden("generate-demo.txt", summary(out))


def test_generate_summary_lists_a_few_tools_and_points_to_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = catalog_project(tmp_path, "github", "time")
    code, out, _ = cli(["generate"], capsys, cwd=project)
    assert code == 0
    golden("generate-github.txt", summary(out))


def pasted(summary_text: str) -> str:
    """The codemode.toml lines of a summary, as a user pastes them."""
    return (
        "\n".join(line[4:] for line in summary_text.splitlines() if line.startswith("    ")) + "\n"
    )


def policies(project: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    code, out, err = cli(["policy", "--json"], capsys, cwd=project)
    assert code == 0, err
    return {row["tool"]: row for row in json.loads(out)}


def test_the_lines_the_summary_prints_allow_the_tools_it_lists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = catalog_project(tmp_path, "sqlite")
    code, out, _ = cli(["generate"], capsys, cwd=project)
    assert code == 0
    lines = pasted(summary(out))
    assert tomllib.loads(lines)["servers"]["sqlite"]["approval"]["write_query"] == "allow"
    (project / "codemode.toml").write_text(lines)
    rows = policies(project, capsys)
    assert {row["policy"] for row in rows.values()} == {"allow"} and {
        row["why"] for row in rows.values()
    } == {"config"}
    code, out, _ = cli(["generate"], capsys, cwd=project)
    assert code == 0 and "approval: no tool asks the user before a call (6 sent at once;" in out


def test_the_summary_moves_a_server_default_into_the_table_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`approval = "ask"` under [servers.sqlite] and a [servers.sqlite.approval] table cannot both
    be in one file: the printed table carries the default as "*", replacing that line."""
    project = catalog_project(tmp_path, "sqlite")
    (project / "codemode.toml").write_text('[servers.sqlite]\napproval = "ask"\n')
    code, out, _ = cli(["generate"], capsys, cwd=project)
    assert code == 0
    text = summary(out)
    assert '    "*" = "ask"  # instead of approval = "ask" under [servers.sqlite]\n' in text
    (project / "codemode.toml").write_text("[servers.sqlite]\n" + pasted(text))
    rows = policies(project, capsys)
    assert {name: row["policy"] for name, row in rows.items()} == dict.fromkeys(rows, "allow")
    # A table the file has already: the lines go into it, and the summary says so.
    (project / "codemode.toml").write_text('[servers.sqlite.approval]\nread_query = "ask"\n')
    code, out, _ = cli(["generate"], capsys, cwd=project)
    assert "    [servers.sqlite.approval]  # already in codemode.toml: add the lines there\n" in out


@pytest.mark.slow
def test_record_prints_the_policy_summary_of_what_it_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = catalog_project(tmp_path, "sqlite")
    shutil.rmtree(project / "fixtures")
    code, out, _ = cli(["record", "--no-probe"], capsys, cwd=project)
    assert code == 0, out
    code, generated, _ = cli(["generate"], capsys, cwd=project)
    assert code == 0
    assert (
        summary(out) == summary(generated)
        and '    write_query = "allow"  # now "ask": no annotations\n' in out
    )


def test_summary_lines_name_any_tool_name_exactly_and_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server's tool names can hold what TOML must quote and what could fake a line on a
    terminal (U+2028, bidi controls): the printed key is escaped, one line, and reads back as
    the very name."""
    from tests.runtime_support import fixture_set

    names = ["tasks.add", 'say "hi"', "evil\u2028(administrator) pre-approved\u202e", "ünïcödé"]
    folder = tmp_path / "fixtures" / "odd"
    fixture = fixture_set("odd", [{"name": n, "inputSchema": {"type": "object"}} for n in names])
    folder.mkdir(parents=True)
    (folder / "server.json").write_text(json.dumps(fixture.server_json))
    (folder / "tools.json").write_text(json.dumps(fixture.tools))
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"odd": {"command": "x"}}}))
    code, out, _ = cli(["generate"], capsys, cwd=tmp_path)
    assert code == 0
    text = summary(out)
    assert (
        "\u2028" not in text
        and "\u202e" not in text
        and len(text.splitlines()) == 3 + 1 + len(names)
    )
    table = tomllib.loads(pasted(text))["servers"]["odd"]["approval"]
    assert table == dict.fromkeys(names, "allow")
