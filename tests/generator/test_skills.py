"""Skills (README "Skills"): skills/<name>.ts|js checked by real tsc in `generate`/`check`,
imported by real QuickJS runs through the same bridge, tested with `skill test` (--replay),
broken by drift, and hostile names and sources refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemode_gen.errors import UserError
from codemode_gen.generator import skills as sk
from codemode_gen.runtime.response import Response
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(300)

CLI = [sys.executable, "-m", "codemode_gen"]

WRONG_FIELD = """import * as calendar from "@codemode/servers/calendar";

/** Book one event. */
export async function book(input: { title: string }): Promise<number> {
  const event = await calendar.create_event({ title: input.title, start: "x", end: "y", room: 4 });
  return event.id;
}
"""

FORGET = """import { delete_note } from "@codemode/servers/notes";

/** Delete one note (destructive: asks for approval). */
export async function forget(input: { id: number }): Promise<boolean> {
  return (await delete_note({ id: input.id })).deleted;
}
"""


def cli(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=240
    )


def clone(base: Path) -> Path:
    """The demo project as a fresh clone has it: config, settings, recordings, out/, skills/."""
    project = base / "project"
    project.mkdir()
    shutil.copy(REPO / "codemode.toml", project / "codemode.toml")
    servers = {
        sid: {
            "command": sys.executable,
            "args": [str(REPO / "examples" / "servers" / f"{sid}_server.py")],
        }
        for sid in ("notes", "calendar")
    }
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    for name in ("fixtures", "out", "skills"):
        shutil.copytree(REPO / name, project / name)
    (project / "node_modules").symlink_to(REPO / "node_modules")  # the project's TypeScript
    return project


# ------------------------------------------------------------------------------ reading skills


def write(project: Path, name: str, text: str | bytes) -> Path:
    folder = project / sk.SKILLS_DIR
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_skill_names_that_could_leave_the_folder_are_refused(tmp_path: Path) -> None:
    for name in ("../evil", "a/b", "..", "", "Plan", "x" * 49, "1st", "a.b", "a b", "con\x00"):
        with pytest.raises(UserError, match="not a valid skill name"):
            sk.check_name(name)
        with pytest.raises(UserError):
            sk.write_skill(tmp_path, name, "/** x */\nexport async function f() {}\n", lang="ts")
    assert not (tmp_path / "evil.ts").exists() and not (tmp_path.parent / "evil.ts").exists()
    assert sk.check_name("plan_week") == "plan_week"


def test_hostile_skill_sources_are_refused_with_their_path(tmp_path: Path) -> None:
    write(
        tmp_path,
        "big.ts",
        "/** big */\nexport async function big() {}\n" + "//" + "x" * sk.MAX_SKILL_BYTES,
    )
    with pytest.raises(UserError, match=r"skills/big.ts: \d+ bytes, more than a skill may have"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "big.ts").unlink()
    outside = tmp_path / "secret.ts"
    outside.write_text("/** s */\nexport async function s() {}\n")
    (tmp_path / "skills" / "linked.ts").symlink_to(outside)
    with pytest.raises(UserError, match=r"skills/linked\.ts: not a regular file"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "linked.ts").unlink()
    write(tmp_path, "bad_name-x.ts", "/** x */\nexport async function x() {}\n")
    with pytest.raises(UserError, match="not a valid skill name"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "bad_name-x.ts").unlink()
    write(tmp_path, "notes.txt", "hello")
    with pytest.raises(UserError, match=r"skills/notes\.txt: not a skill"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "notes.txt").unlink()
    write(tmp_path, "bin.ts", b"\xff\xfe/** x */")
    with pytest.raises(UserError, match=r"skills/bin\.ts: not UTF-8"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "bin.ts").unlink()
    write(
        tmp_path,
        "two.ts",
        "/** a */\nexport async function a() {}\n/** b */\nexport async function b() {}\n",
    )
    with pytest.raises(UserError, match="exactly one async function"):
        sk.load_skills(tmp_path)
    write(tmp_path, "two.ts", "export async function a() {}\n")
    with pytest.raises(UserError, match="has no doc comment"):
        sk.load_skills(tmp_path)
    write(tmp_path, "two.ts", "/** Two. */\nexport async function two() {}\n")
    write(tmp_path, "two.js", "/** Two. */\nexport async function two() {}\n")
    with pytest.raises(UserError, match="two skills named two"):
        sk.load_skills(tmp_path)
    (tmp_path / "skills" / "two.js").unlink()
    write(tmp_path, "two.test.ts", "throw new Error('a test file is not a skill');\n")
    assert [s.name for s in sk.load_skills(tmp_path)] == ["two"]


def test_a_skill_is_not_overwritten_without_force(tmp_path: Path) -> None:
    text = "/** Says hi. */\nexport async function hi() { return 1; }\n"
    sk.write_skill(tmp_path, "hi", text, lang="ts")
    with pytest.raises(UserError, match="exists already"):
        sk.write_skill(tmp_path, "hi", text.replace("1", "2"), lang="js")
    sk.write_skill(tmp_path, "hi", text.replace("1", "2"), lang="js", replace_existing=True)
    assert sorted(p.name for p in (tmp_path / "skills").iterdir()) == ["hi.js"]
    with pytest.raises(UserError, match="more than a skill may have"):
        sk.write_skill(tmp_path, "huge", text + "//" + "x" * sk.MAX_SKILL_BYTES, lang="ts")
    assert not (tmp_path / "skills" / "huge.ts").exists()


def test_skeleton_of_the_demo_script_is_a_valid_skill() -> None:
    code = (REPO / "examples" / "plan_week.js").read_text()
    for lang in ("ts", "js"):
        text = sk.skeleton("plan_week", code, lang=lang, origin="plan_week.js")
        skill = sk.parse_skill("plan_week", f"skills/plan_week.{lang}", text)
        assert skill.description.startswith(
            "An agent's script: one codemode.run that chains two MCP servers."
        )
        assert "__codemode_result__" not in text and "return { day: DAY, booked };" in text
        assert text.startswith('import * as notes from "@codemode/servers/notes";\n')
        assert skill.imports() == [
            "@codemode/servers/notes",
            "@codemode/servers/calendar",
            "@codemode/discovery",
            "@codemode/errors",
        ]


def test_doc_comment_examples_and_description() -> None:
    skill = sk.load_skills(REPO)[1]
    assert skill.name == "plan_week" and skill.function == "plan_week"
    assert skill.description.startswith("Book a 30-minute slot on `day`")
    assert len(skill.examples) == 1 and 'plan_week({ day: "2026-03-02" })' in skill.examples[0]
    assert "@codemode/skills/open_todos" in skill.imports()


# ------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_generate_declares_skills_and_a_run_imports_a_skill_importing_a_skill(
    tmp_path: Path,
) -> None:
    project = clone(tmp_path)
    shutil.rmtree(project / "out")
    write(project, "forget.ts", FORGET)
    proc = cli(project, "generate")
    assert proc.returncode == 0, proc.stderr
    assert "3 skills)" in proc.stdout
    manifest = json.loads((project / "out" / "manifest.json").read_text())
    by_name = {s["name"]: s for s in manifest["skills"]}
    assert by_name["plan_week"]["signature"] == (
        "function plan_week(input: { day: string; minutes?: number }): Promise<{ day: string; booked: "
        "{ note: string; eventId: number; start: string }[]; failed: string[] }>;"
    )
    dts = (project / "out" / "codemode.d.ts").read_text()
    assert 'declare module "@codemode/skills/open_todos" {' in dts
    # The committed out/ is what generate writes (the demo's skills included).
    assert (project / "out" / "skills" / "plan_week.js").read_text() == (
        REPO / "out" / "skills" / "plan_week.js"
    ).read_text()
    # A run imports the skill; its (and the skill it imports) calls are the run's own.
    script = project / "use.ts"
    script.write_text(
        'import { plan_week } from "@codemode/skills/plan_week";\n'
        'globalThis.__codemode_result__ = await plan_week({ day: "2026-03-02" });\n'
    )
    proc = cli(project, "run", "--replay", "--yes", "--no-pretty", "use.ts")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    response = json.loads(proc.stdout)
    # (list_notes and list_events run in one Promise.all: the trace lists them as they end)
    assert {(c["serverId"], c["toolName"]) for c in response["toolTrace"]} == {
        ("notes", "list_notes"),
        ("calendar", "list_events"),
        ("calendar", "free_slots"),
        ("calendar", "create_event"),
    }
    assert response["result"]["day"] == "2026-03-02"
    # Approvals hold as if the script had made the call: a destructive call asks; without --yes
    # and no terminal to ask on, it is denied (live: replayed calls change nothing, none asks).
    proc = cli(
        project,
        "run",
        "--no-pretty",
        "-",
        stdin='import { forget } from "@codemode/skills/forget";\nawait forget({ id: 2 });\n',
    )
    trace = json.loads(proc.stdout)["toolTrace"]
    assert [(c["toolName"], c["approval"]) for c in trace] == [("delete_note", "denied")], (
        proc.stdout
    )
    # Limits too: one tool call allowed, the skill's second one is refused.
    proc = cli(
        project,
        "run",
        "--replay",
        "--yes",
        "--no-pretty",
        "--limits",
        '{"maxToolCalls": 1}',
        "use.ts",
    )
    limited = json.loads(proc.stdout)
    assert proc.returncode == 1 and len([c for c in limited["toolTrace"] if c.get("ok")]) <= 1
    # Discovery lists them too (what the prompt's skills section may only count).
    proc = cli(
        project,
        "run",
        "--replay",
        "--no-pretty",
        "-",
        stdin='import { listSkills } from "@codemode/discovery";\n'
        "globalThis.__codemode_result__ = (await listSkills()).map((s) => s.specifier);\n",
    )
    assert json.loads(proc.stdout)["result"] == [
        f"@codemode/skills/{n}" for n in ("forget", "open_todos", "plan_week")
    ]
    # `skill test` in the fresh clone: every example replays, a skills/<name>.test.ts too.
    write(
        project,
        "open_todos.test.ts",
        'import { open_todos } from "@codemode/skills/open_todos";\n'
        'const todos = await open_todos({ tag: "no-such-tag" });\n'
        'if (todos.length !== 0) throw new Error("a tag no note has");\n',
    )
    proc = cli(project, "skill", "test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok   skills/open_todos.test.ts (1 tool calls)" in proc.stdout
    assert "3 of 3 example(s) passed (replayed)" in proc.stdout
    assert "skill forget has no example" in proc.stderr
    write(
        project,
        "open_todos.test.ts",
        'import { open_todos } from "@codemode/skills/open_todos";\n'
        'if ((await open_todos({})).length === 0) throw new Error("broken on purpose");\n'.replace(
            "=== 0", "> 0"
        ),
    )
    proc = cli(project, "skill", "test", "open_todos")
    assert proc.returncode == 1 and "FAIL skills/open_todos.test.ts" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_a_skill_with_a_wrong_field_fails_generate_and_check_with_its_line(tmp_path: Path) -> None:
    project = clone(tmp_path)
    before = {p: p.read_bytes() for p in (project / "out").rglob("*") if p.is_file()}
    write(project, "book.ts", WRONG_FIELD)
    proc = cli(project, "generate")
    assert proc.returncode != 0
    assert (
        "skills/book.ts:5:" in proc.stderr and "TS2353" in proc.stderr and "'room'" in proc.stderr
    )
    assert {
        p: p.read_bytes() for p in (project / "out").rglob("*") if p.is_file()
    } == before  # nothing written
    proc = cli(project, "check")
    assert proc.returncode == 1
    found = json.loads(proc.stdout)
    assert [(d["file"], d["path"].split(":")[0], d["code"]) for d in found] == [
        ("skills/book.ts", "5", "TS2353")
    ]
    proc = cli(project, "generate", "--check")
    assert proc.returncode != 0 and "skills/book.ts:5:" in proc.stderr


@pytest.mark.slow
def test_drift_removing_a_tool_a_skill_calls_is_reported_by_generate_check(tmp_path: Path) -> None:
    project = clone(tmp_path)
    tools = project / "fixtures" / "calendar" / "tools.json"
    data = json.loads(tools.read_text())
    listed = data["tools"] if isinstance(data, dict) else data
    kept = [t for t in listed if t["name"] != "list_events"]
    tools.write_text(json.dumps({**data, "tools": kept} if isinstance(data, dict) else kept))
    (project / "fixtures" / "calendar" / "calls" / "list_events.jsonl").unlink()
    proc = cli(project, "generate", "--check")
    assert proc.returncode != 0
    assert "skills/plan_week.ts:" in proc.stderr and "list_events" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_skill_save_turns_a_script_into_a_skill_that_generates_and_runs(tmp_path: Path) -> None:
    project = clone(tmp_path)
    proc = cli(project, "skill", "save", "plan_demo", str(REPO / "examples" / "plan_week.js"))
    assert proc.returncode == 0, proc.stderr
    assert (project / "skills" / "plan_demo.js").is_file()
    proc = cli(project, "skill", "save", "plan_demo", str(REPO / "examples" / "plan_week.js"))
    assert proc.returncode != 0 and "exists already" in proc.stderr
    proc = cli(project, "skill", "save", "../../escape", str(REPO / "examples" / "plan_week.js"))
    assert proc.returncode != 0 and "not a valid skill name" in proc.stderr
    assert not (tmp_path / "escape.js").exists() and not (project.parent / "escape.js").exists()
    proc = cli(project, "generate")
    assert proc.returncode == 0, proc.stderr
    proc = cli(
        project,
        "run",
        "--replay",
        "--yes",
        "--no-pretty",
        "-",
        stdin='import { plan_demo } from "@codemode/skills/plan_demo";\n'
        "globalThis.__codemode_result__ = await plan_demo();\n",
    )
    response = json.loads(proc.stdout)
    # The saved script's own calls, made from the skill (list_events' input is not recorded).
    assert {c["toolName"] for c in response["toolTrace"]} >= {"list_notes", "list_events"}, (
        proc.stdout
    )


def test_the_prompt_lists_skills_within_their_share_of_the_budget() -> None:
    from codemode_gen.runtime.frontends.prompt import (
        MAX_SKILLS_SHARE,
        MIN_PROMPT_BUDGET,
        layout_prompt,
        skills_section,
    )

    manifest = json.loads((REPO / "out" / "manifest.json").read_text())
    demo = skills_section(manifest["skills"], 10_000)
    assert (
        'import { plan_week } from "@codemode/skills/plan_week"`: function plan_week(input: { day: string;'
        in demo
    )
    many = [
        {
            **manifest["skills"][1],
            "name": f"s{i}",
            "specifier": f"@codemode/skills/s{i}",
            "function": f"s{i}",
        }
        for i in range(sk.MAX_SKILLS)
    ]
    for room in (200, 1_000, 3_000, 100_000):
        text = skills_section(many, room)
        assert len(text) <= room
        if text:
            assert text.count("\n- ") >= 1 and ("more: listSkills()" in text) == (room < 100_000)
    for budget in (MIN_PROMPT_BUDGET, 8_000, 16_000):
        layout = layout_prompt(manifest["servers"], budget=budget, skills=many)
        assert len(layout.text) <= budget and layout.computed == len(layout.text)
        assert len(layout.text.partition("\nSkills: ")[2]) <= budget * MAX_SKILLS_SHARE // 100


ARCHIVE = """import { archive_note } from "@codemode/servers/notes";

/** Archive one note. */
export async function archive(input: { id: number }): Promise<unknown> {
  return await archive_note({ id: input.id });
}
"""


@pytest.mark.slow
def test_record_check_reports_a_skill_broken_by_a_removed_tool(tmp_path: Path) -> None:
    """fixtures/ has a tool the live notes server no longer lists; a skill calling it checked
    against the recording (generate passes) and `record --check` says the drift breaks it."""
    project = clone(tmp_path)
    tools = project / "fixtures" / "notes" / "tools.json"
    data = json.loads(tools.read_text())
    listed = data["tools"] if isinstance(data, dict) else data
    listed.append(
        {
            "name": "archive_note",
            "description": "Archive a note.",
            "inputSchema": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
        }
    )
    tools.write_text(json.dumps(data))
    write(project, "archive.ts", ARCHIVE)
    proc = cli(project, "generate")
    assert proc.returncode == 0, proc.stderr
    proc = cli(project, "record", "--check", "--server", "notes")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "skills broken by this drift" in proc.stdout
    assert "skills/archive.ts:1:10 error TS2305" in proc.stdout and "archive_note" in proc.stdout, (
        proc.stdout
    )
    assert "breaks skills/" in proc.stderr


@pytest.mark.slow
def test_a_type_checked_run_knows_the_skills_and_the_save_module(tmp_path: Path) -> None:
    """With --typecheck, a run importing a skill (declared in codemode.d.ts) and, on a writable
    host, @codemode/skills (not in codemode.d.ts) gets only its own type errors."""
    import asyncio

    from codemode_gen.runtime.codemode import CodeMode

    project = clone(tmp_path)
    code = (
        'import { saveSkill } from "@codemode/skills";\n'
        'import { plan_week } from "@codemode/skills/plan_week";\n'
        "const day: number = plan_week.name;\n"
        "globalThis.__codemode_result__ = [typeof saveSkill, day];\n"
    )

    async def main() -> Response:
        cm = CodeMode.from_config(
            project / ".mcp.json", replay=True, skills_writable=True, typecheck=True
        )
        async with cm:
            await cm.prepare_typecheck(None)
            return await cm.run(code, limits={"typecheck": True})

    response = asyncio.run(main())
    assert [(d["code"], d["path"]) for d in response["diagnostics"]] == [("TS2322", "3:7")], (
        response
    )
    assert response["result"] == ["function", "plan_week"]


@pytest.mark.slow
def test_drift_changing_a_type_a_skill_reads_is_reported_by_generate_check(tmp_path: Path) -> None:
    """The notes server's Note now says `id` is a string: open_todos returns it as a number."""
    project = clone(tmp_path)
    tools = project / "fixtures" / "notes" / "tools.json"
    data = json.loads(tools.read_text())
    listed = data["tools"] if isinstance(data, dict) else data
    (list_notes,) = [t for t in listed if t["name"] == "list_notes"]
    list_notes["outputSchema"]["$defs"]["Note"]["properties"]["id"] = {"type": "string"}
    tools.write_text(json.dumps(data))
    proc = cli(project, "generate", "--check")
    assert proc.returncode != 0
    assert "skills/open_todos.ts:" in proc.stderr and "TS2322" in proc.stderr, proc.stderr


def test_generate_without_typescript_keeps_skills_out_already_holds_checked(tmp_path: Path) -> None:
    """A fresh machine with no npm (the README's first command): out/ already holds the demo's
    skills, checked against the same declarations, so `generate` keeps them and says so. A changed
    skill needs the compiler: the error says how to get one, and out/ is left as it was."""
    import os

    from codemode_gen.runtime.host.tsinstall import CACHE_ENV

    project = clone(tmp_path)
    (project / "node_modules").unlink()
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {
        "PATH": str(empty_bin),
        "HOME": str(tmp_path),
        CACHE_ENV: str(tmp_path / "cache"),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }

    def generate(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, "generate", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )

    before = {
        p.relative_to(project): p.read_bytes() for p in (project / "out").rglob("*") if p.is_file()
    }
    done = generate()
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "skills/ not re-checked (no TypeScript here)" in done.stderr
        and "npm i -g typescript" in done.stderr
    )
    after = {
        p.relative_to(project): p.read_bytes() for p in (project / "out").rglob("*") if p.is_file()
    }
    assert after == before
    assert generate("--check").returncode == 0

    skill = project / "skills" / "open_todos.ts"
    skill.write_text(skill.read_text() + "\n// changed\n")
    changed = generate()
    assert changed.returncode == 2, changed.stdout + changed.stderr
    assert (
        "no TypeScript compiler found" in changed.stderr
        and "skills/ or the declarations they use changed" in changed.stderr
    )
    assert "codemode-gen check --install-typescript" in changed.stderr
    assert {
        p.relative_to(project): p.read_bytes() for p in (project / "out").rglob("*") if p.is_file()
    } == before
