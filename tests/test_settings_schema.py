"""codemode.toml is checked on load (codemode_gen/settings_schema.py, generator/project.py):
unknown keys, servers and tools are errors with `file:LINE:` and the closest valid name, limits
are held to the bounds every run enforces, and a tool may be named by its MCP or export name.

End to end: a real MCP server whose tool `delete-file` is denied by the export name the prompt
shows (`delete_file`) is hidden from a `run --yes`; every command refuses a broken file with
exit 2 and the message, never a traceback.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.codemode_toml import load_settings
from codemode_gen.errors import UserError
from codemode_gen.generator.project import load_project_settings
from codemode_gen.limit_bounds import LIMIT_RANGES
from codemode_gen.mcp_json import project_settings
from codemode_gen.runtime.limits import Limits
from codemode_gen.settings_schema import TABLE_KEYS, closest, dotted, key_lines
from tests.runtime.sandbox.test_engine import package_modules

from .conftest import PYTHON, REPO, server_script

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-m", "codemode_gen"]
# Bounds one CLI command in these tests (a record starts a server).
CLI_TIMEOUT = 90.0


def settings_file(
    tmp_path: Path, text: str, servers: tuple[str, ...] = ("notes", "calendar")
) -> Path:
    """A project: codemode.toml `text`, a .mcp.json with `servers`, the demo's recordings."""
    (tmp_path / "codemode.toml").write_text(text, encoding="utf-8")
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {s: {"command": "x"} for s in servers}})
    )
    if not (tmp_path / "fixtures").exists():
        shutil.copytree(REPO / "fixtures", tmp_path / "fixtures")
    return tmp_path / ".mcp.json"


def load(tmp_path: Path, text: str, **kwargs: Any) -> Any:
    return load_project_settings(settings_file(tmp_path, text), **kwargs)


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as info:
        load(tmp_path, text, report=lambda line: None)
    return info.value.message


# --------------------------------------------------------------------------- key lines


KEYS_TOML = """\
# a comment with [brackets] and key = "value"
fixtures = "fx"   # trailing comment
redact = [
  "a[",  # ] in a comment
  'b',
]
limits = { timeoutMs = 5000, inner = { deep = 1 } }
servers.notes.unwrap = "json"
[servers."my.server"]
blocklist = ["a",
  "b"]
[servers.notes.approval]
"*" = "auto"
'tasks.add' = "deny"
text = \"\"\"
[not_a_table]
not_a_key = 1
\"\"\"
[[samples]]
server = "notes"
input = { query = "milk" }
[[samples]]
tool = "t"
[samples.input]
q = 1
when = 1979-05-27 07:32:00
"""


def test_key_lines_follow_tables_dotted_quoted_inline_and_array_keys() -> None:
    tomllib.loads(KEYS_TOML)  # valid TOML, as every text the scan gets
    lines = key_lines(KEYS_TOML)
    assert lines[("fixtures",)] == 2
    assert lines[("redact", 1)] == 5
    assert lines[("limits", "inner", "deep")] == 7
    assert lines[("servers", "notes", "unwrap")] == 8
    assert lines[("servers", "my.server", "blocklist", 1)] == 11
    assert lines[("servers", "notes", "approval", "*")] == 13
    assert lines[("servers", "notes", "approval", "tasks.add")] == 14
    assert lines[("servers", "notes", "approval", "text")] == 15
    assert lines[("samples", 0, "input", "query")] == 21
    assert lines[("samples", 1, "tool")] == 23
    assert lines[("samples", 1, "input", "when")] == 26
    assert not any("not_a_table" in path or "not_a_key" in path for path in lines)


def every_key_path(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += every_key_path(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += every_key_path(item, (*path, index))
    return found


@pytest.mark.parametrize("text", [KEYS_TOML, (REPO / "codemode.toml").read_text(encoding="utf-8")])
def test_every_key_the_toml_parser_sees_has_a_line(text: str) -> None:
    lines = key_lines(text)
    missing = [path for path in every_key_path(tomllib.loads(text)) if path not in lines]
    assert missing == []


def test_dotted_names_and_closest_names() -> None:
    assert (
        dotted(("servers", "my.server", "approval", "delete_note"))
        == 'servers."my.server".approval.delete_note'
    )
    assert dotted(("samples", 0, "tool")) == "samples[0].tool"
    assert closest("timeout_ms", TABLE_KEYS["limits"]) == "timeoutMs"
    assert closest("maxmemory", TABLE_KEYS["limits"]) == "maxMemoryBytes"
    assert closest("unwarp", TABLE_KEYS["servers.*"]) == "unwrap"
    assert closest("zzz", TABLE_KEYS["servers.*"]) is None


# --------------------------------------------------------------------------- keys and servers


def test_unknown_keys_at_every_level_are_errors_with_lines_and_the_closest_key(
    tmp_path: Path,
) -> None:
    message = refused(
        tmp_path,
        (
            'fixture = "fx"\n'  # 1
            "[limits]\ntimeout_ms = 5000\n"  # 3
            "[sandbox]\nworkers = 2\n"  # 5
            '[servers.notes]\nunwarp = "json"\n'  # 7
            '[[samples]]\nserver = "notes"\ntol = "get_note"\n'  # 10
        ),
    )
    path = tmp_path / "codemode.toml"
    assert message.split("\n") == [
        f"{path}:1: fixture: unknown key in the top level; did you mean `fixtures`?",
        f"{path}:3: limits.timeout_ms: unknown key in [limits]; did you mean `timeoutMs`?",
        f"{path}:5: sandbox.workers: unknown key in [sandbox]; did you mean `max_workers`?",
        f"{path}:7: servers.notes.unwarp: unknown key in [servers.notes]; did you mean `unwrap`?",
        f"{path}:10: samples[0].tol: unknown key in [samples[0]]; did you mean `tool`?",
    ]


def test_servers_not_in_mcp_json_are_errors(tmp_path: Path) -> None:
    message = refused(
        tmp_path, '[servers.note]\nunwrap = "json"\n[[samples]]\nserver = "calender"\ntool = "x"\n'
    )
    path = tmp_path / "codemode.toml"
    assert message.split("\n") == [
        f"{path}:1: servers.note: no server `note` in {tmp_path / '.mcp.json'}; did you mean `notes`?",
        f"{path}:4: samples[0].server: no server `calender` in {tmp_path / '.mcp.json'}; did you mean `calendar`?",
    ]
    # Without a readable .mcp.json (generate needs none) the ids cannot be checked, and are not.
    (tmp_path / ".mcp.json").unlink()
    assert "note" in project_settings(tmp_path / ".mcp.json").servers


@pytest.mark.parametrize("key", sorted(LIMIT_RANGES))
def test_limits_are_held_to_the_bounds_every_run_enforces(tmp_path: Path, key: str) -> None:
    low, high = LIMIT_RANGES[key]
    for good in (low, high):
        settings = load(tmp_path, f"[limits]\n{key} = {good}\n")
        assert (
            Limits.from_json(settings.limits).to_json()[key] == good
        )  # what the file takes, a run takes
    for bad in (low - 1, high + 1):
        message = refused(tmp_path, f"[limits]\n{key} = {bad}\n")
        assert message == (
            f"{tmp_path / 'codemode.toml'}:2: limits.{key}: {bad} is out of range;"
            f" use an integer from {low} to {high}"
        )


def test_trace_takes_one_of_its_modes(tmp_path: Path) -> None:
    assert load(tmp_path, '[limits]\ntrace = "none"\n').limits["trace"] == "none"
    message = refused(tmp_path, '[limits]\ntrace = "all"\n')
    assert message == (
        f"{tmp_path / 'codemode.toml'}:2: limits.trace: expected one of 'full', 'errors', 'none',"
        " got 'all'"
    )


# --------------------------------------------------------------------------- tool names


def test_tools_by_mcp_name_pass_silently(tmp_path: Path) -> None:
    said: list[str] = []
    settings = load(
        tmp_path,
        '[servers.notes]\nblocklist = ["export-csv"]\n[servers.notes.approval]\n'
        '"tasks.add" = "ask"\n',
        report=said.append,
    )
    assert said == []
    assert settings.servers["notes"].blocklist == ("export-csv",)
    assert dict(settings.servers["notes"].approval) == {"tasks.add": "ask"}


def test_tools_by_export_name_apply_to_their_mcp_tool_and_say_so(tmp_path: Path) -> None:
    said: list[str] = []
    settings = load(
        tmp_path,
        (
            '[servers.notes]\nblocklist = ["export_csv"]\n'  # 2
            '[servers.notes.approval]\ntasks_add = "deny"\n'  # 4
            '[[samples]]\nserver = "notes"\ntool = "export_csv"\n'  # 7
        ),
        report=said.append,
    )
    notes = settings.servers["notes"]
    assert notes.blocklist == ("export-csv", "tasks.add")  # deny hides it: under its MCP name
    assert dict(notes.approval) == {"tasks.add": "deny"}
    assert settings.samples[0].tool == "export-csv"
    path = tmp_path / "codemode.toml"
    assert said == [
        f"note: {path}:2: servers.notes.blocklist[0]: `export_csv` is the export name of MCP tool `export-csv`"
        " of server `notes`; it applies to that tool",
        f"note: {path}:4: servers.notes.approval.tasks_add: `tasks_add` is the export name of MCP tool"
        " `tasks.add` of server `notes`; it applies to that tool",
        f"note: {path}:7: samples[0].tool: `export_csv` is the export name of MCP tool `export-csv` of server"
        " `notes`; it applies to that tool",
    ]


def test_unknown_tools_are_errors_naming_the_closest_name(tmp_path: Path) -> None:
    message = refused(
        tmp_path,
        '[servers.notes]\nblocklist = ["delete_nte"]\n[servers.notes.approval]\n'
        'export_cvs = "deny"\n',
    )
    path, recording = tmp_path / "codemode.toml", tmp_path / "fixtures" / "notes" / "tools.json"
    assert message.split("\n") == [
        f"{path}:2: servers.notes.blocklist[0]: server `notes` has no tool `delete_nte` (by MCP or export name)"
        f" in {recording}; did you mean `delete_note`?",
        f"{path}:4: servers.notes.approval.export_cvs: server `notes` has no tool `export_cvs` (by MCP or export"
        f" name) in {recording}; did you mean `export_csv` (MCP tool `export-csv`)?",
    ]


def test_one_tool_named_twice_in_an_approval_table_is_an_error(tmp_path: Path) -> None:
    message = refused(
        tmp_path, '[servers.notes.approval]\n"export-csv" = "allow"\nexport_csv = "deny"\n'
    )
    assert message.endswith(
        ":3: servers.notes.approval.export_csv: names MCP tool `export-csv` again"
        " (as servers.notes.approval.export-csv does)"
    )


def test_tools_of_a_server_not_recorded_yet_cannot_be_checked_and_say_so(tmp_path: Path) -> None:
    said: list[str] = []
    settings_file(
        tmp_path, '[servers.crm]\nblocklist = ["drop_all", "wipe"]\n', servers=("notes", "crm")
    )
    settings = load_project_settings(tmp_path / ".mcp.json", report=said.append)
    assert settings.servers["crm"].blocklist == ("drop_all", "wipe")
    assert said == [
        f"warning: {tmp_path / 'codemode.toml'}:2: servers.crm.blocklist[0]: tool names of server"
        f" `crm` cannot be checked: it is not recorded yet ({tmp_path / 'fixtures' / 'crm' / 'tools.json'};"
        " `codemode-gen record --server crm`)"
    ]


def test_record_warns_about_tools_its_recording_lacks_instead_of_refusing(tmp_path: Path) -> None:
    said: list[str] = []
    settings = load(
        tmp_path,
        '[servers.notes]\nblocklist = ["brand_new_tool"]\n',
        report=said.append,
        unknown_tools="warn",
    )
    assert settings.servers["notes"].blocklist == ("brand_new_tool",)
    assert (
        len(said) == 1 and said[0].startswith("warning: ") and "no tool `brand_new_tool`" in said[0]
    )


def test_the_repository_settings_are_valid() -> None:
    said: list[str] = []
    settings = load_project_settings(REPO / ".mcp.json", report=said.append)
    assert said == [] and len(settings.samples) == 7


def test_every_command_loads_settings_through_one_checked_door() -> None:
    """Tool names are only checked by generator/project.py: nothing else may read codemode.toml."""
    allowed = {
        "codemode_gen.codemode_toml",
        "codemode_gen.mcp_json",
        "codemode_gen.generator.project",
    }
    offenders = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for module, path in package_modules().items()
        if module not in allowed
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name | ast.Attribute)
        and (node.id if isinstance(node, ast.Name) else node.attr)
        in ("project_settings", "load_settings")
    ]
    assert offenders == [], (
        "load codemode.toml with generator.project.load_project_settings: " + ", ".join(offenders)
    )


# --------------------------------------------------------------------------- end to end

FILE_TOOLS = [
    {
        "name": "delete-file",
        "description": "Delete a file.",
        "annotations": {"destructiveHint": True},
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "read-file",
        "description": "Read a file.",
        "annotations": {"readOnlyHint": True},
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
]

CALL_DELETE = """
import { listTools } from "@codemode/discovery";
const files = await import("@codemode/servers/files");
let called = null;
try { called = await files.delete_file({ path: "/important" }); } catch (e) { called = e.name; }
globalThis.__codemode_result__ = {
  exports: Object.keys(files).filter((k) => k !== "__meta__"),
  listed: (await listTools("files")).map((t) => t.toolName),
  called,
};
"""


def cli(project: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=project, capture_output=True, text=True, input=stdin, timeout=CLI_TIMEOUT
    )


@pytest.mark.slow
def test_a_deny_written_by_export_name_hides_the_mcp_tool_even_when_everything_is_approved(
    tmp_path: Path,
) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(FILE_TOOLS))
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {
                        "command": PYTHON,
                        "args": [
                            str(server_script("catalog_server")),
                            "stdio",
                            "--catalog",
                            "tools.json",
                        ],
                    }
                }
            }
        )
    )
    recorded = cli(tmp_path, "record", "--no-probe")
    assert recorded.returncode == 0, recorded.stderr
    (tmp_path / "codemode.toml").write_text('[servers.files.approval]\ndelete_file = "deny"\n')
    (tmp_path / "script.js").write_text(CALL_DELETE)
    ran = cli(tmp_path, "run", "--no-pretty", "--yes", "script.js")
    response = json.loads(ran.stdout)
    assert response["result"] == {
        "exports": ["read_file"],
        "listed": ["read-file"],
        "called": "TypeError",
    }
    assert response.get("toolTrace", []) == []  # nothing was sent
    assert (
        f"note: {tmp_path / 'codemode.toml'}:2: servers.files.approval.delete_file: `delete_file` is the"
        " export name of MCP tool `delete-file` of server `files`; it applies to that tool"
    ) in ran.stderr


BROKEN = "[limits]\ntimeoutMs = 900000\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["record"],
        ["record", "--check"],
        ["generate"],
        ["generate", "--check"],
        ["run", "script.js"],
        ["run", "--replay", "script.js"],
        ["check", "script.js"],
        ["replay", "--server", "notes"],
    ],
)
def test_every_command_refuses_a_broken_file_with_its_line_and_exit_2(
    tmp_path: Path, args: list[str]
) -> None:
    settings_file(tmp_path, BROKEN)
    (tmp_path / "script.js").write_text("globalThis.__codemode_result__ = 1;\n")
    shutil.copytree(REPO / "out", tmp_path / "out")
    proc = cli(tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        f"error: {tmp_path / 'codemode.toml'}:2: limits.timeoutMs: 900000 is out of range"
        in proc.stderr
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_serve_reports_a_broken_file_instead_of_advertising_it(tmp_path: Path) -> None:
    settings_file(tmp_path, BROKEN)
    proc = cli(tmp_path, "serve", "--print-prompt")
    assert "900000 is out of range" in proc.stdout and "NOT available" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_from_config_refuses_a_broken_file(tmp_path: Path) -> None:
    from codemode_gen.runtime.codemode import CodeMode

    with pytest.raises(
        UserError, match=r"codemode.toml:2: limits.timeoutMs: 900000 is out of range"
    ):
        CodeMode.from_config(settings_file(tmp_path, BROKEN))


def test_hand_built_settings_with_bad_limits_fail_at_construction_not_every_run(
    tmp_path: Path,
) -> None:
    from codemode_gen.config import Settings
    from codemode_gen.runtime.codemode import CodeMode

    with pytest.raises(UserError, match=r"limits\.timeoutMs: 900000 is out of range"):
        CodeMode({}, out_dir=tmp_path / "out", settings=Settings(limits={"timeoutMs": 900000}))


def test_load_settings_alone_checks_keys_and_values(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text("[limits]\ntimeout = 1\n")
    with pytest.raises(
        UserError, match=r"codemode.toml:2: limits.timeout: unknown key in \[limits\]"
    ):
        load_settings(path)
