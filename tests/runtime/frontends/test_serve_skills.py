"""`serve --skills-writable`: a run proposes a skill (`saveSkill` of @codemode/skills) and it is
written to skills/ only once the user approves it through the approval channel of destructive
calls (elicitation, MCP 2025-11-25), never silently. A real `codemode-gen serve` over stdio and
the SDK's client (README "Skills")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.generator.fixtures import load_fixtures
from tests.runtime.frontends.test_serve_approval import Elicitor, served
from tests.runtime_support import REPO, mcp_project, write_out

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SKILL = """import * as notes from "@codemode/servers/notes";

/** How many notes there are. */
export async function count_notes(input: {}): Promise<number> {
  void input;
  return (await notes.list_notes()).result.length;
}
"""
PROPOSE = (
    'import { saveSkill } from "@codemode/skills";\n'
    "let out;\n"
    f'try {{ out = await saveSkill({{ name: "count_notes", source: {json.dumps(SKILL)} }}); }}\n'
    "catch (e) { out = { name: e.name, code: e.code, message: e.message }; }\n"
    "globalThis.__codemode_result__ = out;\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    base = mcp_project(tmp_path, notes=["notes_server"])
    write_out(base / "out", [s for s in load_fixtures(REPO / "fixtures") if s.config_id == "notes"])
    return base


async def propose(client: Any, code: str = PROPOSE) -> dict[str, Any]:
    result = await client.call_tool("codemode.run", {"code": code})
    response: dict[str, Any] = result.structured_content
    return response


def test_an_approved_proposal_is_written_and_the_user_saw_it(project: Path) -> None:
    user = Elicitor("accept")
    response = served(project, propose, "--skills-writable", elicitor=user)
    assert response["result"] == {"path": "skills/count_notes.ts", "written": True}, response
    assert (project / "skills" / "count_notes.ts").read_text() == SKILL
    (asked,) = user.asked
    assert '"saveSkill"' in asked.message and "count_notes" in asked.message
    assert "How many notes there are." in asked.message  # the source is shown to the user
    assert [(e["serverId"], e["toolName"], e["approval"]) for e in response["toolTrace"]] == [
        ("@skills", "saveSkill", "approved")
    ]


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_proposal_writes_nothing(project: Path, action: Any) -> None:
    user = Elicitor(action)
    response = served(project, propose, "--skills-writable", elicitor=user)
    assert (
        response["result"]["code"] == "APPROVAL_DENIED"
        and "nothing was written" in response["result"]["message"]
    )
    assert not (project / "skills").exists() or not any((project / "skills").iterdir())
    assert len(user.asked) == 1


def test_approve_all_does_not_write_a_skill_silently(project: Path) -> None:
    """--approve-all approves tool calls, not skills: with no user to ask, nothing is written."""
    response = served(project, propose, "--skills-writable", "--approve-all")
    assert response["result"]["code"] == "APPROVAL_DENIED", response
    assert not (project / "skills" / "count_notes.ts").exists()


def test_an_invalid_proposal_is_refused_before_anyone_is_asked(project: Path) -> None:
    user = Elicitor("accept")
    code = PROPOSE.replace('name: \\"count_notes\\"', 'name: \\"../../escape\\"').replace(
        '"count_notes"', '"../../escape"'
    )
    response = served(project, lambda c: propose(c, code), "--skills-writable", elicitor=user)
    assert "not a valid skill name" in response["result"]["message"], response
    assert user.asked == [] and not (project.parent / "escape.ts").exists()
    huge = PROPOSE.replace("How many notes there are.", "x" * 70_000)
    response = served(project, lambda c: propose(c, huge), "--skills-writable", elicitor=user)
    assert response["result"]["name"] == "ToolCallError" and user.asked == [], response
    assert not (project / "skills").exists()


def test_without_the_flag_there_is_no_skills_module(project: Path) -> None:
    user = Elicitor("accept")
    response = served(project, propose, elicitor=user)
    assert any(
        d["code"] == "MODULE_NOT_FOUND" or "@codemode/skills" in d["message"]
        for d in response["diagnostics"]
    )
    assert user.asked == [] and not (project / "skills").exists()


@pytest.mark.parametrize(("action", "written"), [("accept", True), ("decline", False)])
def test_on_2026_07_28_the_proposal_is_asked_through_input_required(
    project: Path, action: Any, written: bool
) -> None:
    """The same proposal on an MCP 2026-07-28 connection: the run ends asking (input_required),
    the SDK's driver asks the user and retries; only a yes writes the file, once."""
    from tests.runtime.frontends.test_serve_input_required import User
    from tests.runtime_support import against_serve

    user = User(action)

    async def body(client: Any) -> Any:
        assert client.protocol_version == "2026-07-28"
        return await propose(client)

    response = against_serve(
        project,
        body,
        "--trace",
        "full",
        "--skills-writable",
        elicitation_callback=user,
        mode="auto",
    )
    assert len(user.asked) == 1 and "count_notes" in user.asked[0].message
    target = project / "skills" / "count_notes.ts"
    if written:
        assert response["result"] == {"path": "skills/count_notes.ts", "written": True}, response
        assert target.read_text() == SKILL
    else:
        assert response["result"]["code"] == "APPROVAL_DENIED", response
        assert not target.exists()
