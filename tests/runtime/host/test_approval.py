"""Approval of tool calls (issue 12, runtime/host/approval.py): policies, codemode.toml, the gate, the
bridge (§3.3.2 toolTrace, §7 ToolCallError, §10 the script goes on), the Python API and the
`run` CLI's terminal prompt.

Policies are pure functions of real tool definitions (the demo notes server's recorded
tools.json, catalogs of public servers); everything else runs real QuickJS against the demo
notes server over stdio, whose state shows whether a call reached it.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.codemode_toml import load_settings
from codemode_gen.config import ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.mcp_json import load_config
from codemode_gen.runtime.codemode import CodeMode
from codemode_gen.runtime.host.approval import (
    DENIED_CODE,
    ApprovalGate,
    ApprovalOutcome,
    denial_message,
)
from codemode_gen.runtime.host.approval_policy import (
    policy_from_annotations,
    policy_table,
    toml_line,
    tool_policy,
)
from codemode_gen.runtime.host.approval_request import (
    FOR_RUN,
    MAX_ARGUMENTS_CHARS,
    Answer,
    ApprovalRequest,
    ApprovalUnavailable,
)
from codemode_gen.runtime.response import Response
from tests.catalogs import catalog_ids, load_catalog
from tests.conftest import PROMPT_S
from tests.runtime_support import (
    PYTHON,
    REPO,
    HostThread,
    assert_ok,
    codes,
    fixture_set,
    script,
    stdio,
    write_out,
)

pytestmark = pytest.mark.timeout(120)

NOTES_TOOLS = json.loads((REPO / "fixtures" / "notes" / "tools.json").read_text())
SQLITE_TOOLS = json.loads(
    (REPO / "tests" / "data" / "catalogs" / "sqlite" / "tools.json").read_text()
)
# Read-only false and nothing said about destruction, which the MCP spec reads as
# destructiveHint: true.
TICK_ANNOTATIONS = {"readOnlyHint": False, "idempotentHint": False}


def tool(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t for t in tools if t["name"] == name)


def bare(config_id: str = "notes", **fields: Any) -> ServerConfig:
    return ServerConfig(id=config_id, transport="stdio", command="x", **fields)


# --------------------------------------------------------------------------- policies (pure)


def test_auto_policy_allows_read_only_and_non_destructive_tools_and_asks_the_rest() -> None:
    policies = {t["name"]: policy_from_annotations(t.get("annotations")) for t in NOTES_TOOLS}
    read_only = [t["name"] for t in NOTES_TOOLS if t["annotations"].get("readOnlyHint") is True]
    assert read_only and all(policies[name] == "allow" for name in read_only)
    assert policies["delete_note"] == "ask"  # destructiveHint: true
    assert policies["update_note"] == "ask"
    assert policies["create_note"] == "allow"  # destructiveHint: false: it only adds
    assert policies["tasks.add"] == "allow"


def test_auto_policy_fails_closed_for_unannotated_tools_and_unstated_destruction() -> None:
    assert all(not t.get("annotations") for t in SQLITE_TOOLS)
    assert {policy_from_annotations(t.get("annotations")) for t in SQLITE_TOOLS} == {"ask"}
    assert policy_from_annotations(TICK_ANNOTATIONS) == "ask"
    # Only literal booleans count: a string "true" is not a promise.
    assert policy_from_annotations({"readOnlyHint": "true"}) == "ask"
    assert policy_from_annotations(None) == "ask"


def test_tool_entry_beats_server_default_beats_project_default() -> None:
    delete = tool(NOTES_TOOLS, "delete_note")["annotations"]
    get = tool(NOTES_TOOLS, "get_note")["annotations"]
    plain = bare()
    assert tool_policy(plain, "delete_note", delete) == "ask"  # auto
    assert (
        tool_policy(plain, "get_note", get, "ask-once") == "ask-once"
    )  # hand-built: the project default
    server_allows = bare(approval_default="allow")
    assert tool_policy(server_allows, "delete_note", delete, "ask") == "allow"
    per_tool = bare(
        approval={"delete_note": "ask-once", "get_note": "auto"}, approval_default="ask"
    )
    assert tool_policy(per_tool, "delete_note", delete) == "ask-once"
    assert tool_policy(per_tool, "get_note", get) == "allow"  # auto → read-only
    assert tool_policy(per_tool, "update_note", None) == "ask"  # the server's default
    assert tool_policy(bare(approval_default="deny"), "get_note", get) == "deny"


def test_toml_line_quotes_keys_toml_cannot_take_bare() -> None:
    assert (
        toml_line("notes", "delete_note", "allow")
        == '[servers.notes.approval] delete_note = "allow"'
    )
    assert (
        toml_line("my.server", "tasks.add", "ask")
        == '[servers."my.server".approval] "tasks.add" = "ask"'
    )
    line = toml_line("my.server", "tasks.add", "allow")
    header, entry = line.split("] ", 1)
    assert load_settings_text(f"{header}]\n{entry}\n").servers["my.server"].approval == {
        "tasks.add": "allow"
    }


def load_settings_text(text: str) -> Settings:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "codemode.toml"
        path.write_text(text)
        return load_settings(path)


def test_denial_says_why_and_how_to_change_the_policy() -> None:
    for reason, needle in [
        ("declined", "declined"),
        ("unavailable", "no way to ask"),
        ("timeout", "timeoutMs"),
        ("policy", "policy denies"),
        ("error", "failed"),
    ]:
        outcome = ApprovalOutcome("denied", "ask", reason)  # type: ignore[arg-type]
        message, hint = denial_message(outcome, "notes", "notes", "delete_note")
        assert message.startswith("notes.delete_note was not called") and needle in message
        assert hint.startswith("do not retry this call in this run")
        assert '[servers.notes.approval] delete_note = "allow"' in hint
        # Where nobody could be asked, the host's options are the user's other lever.
        flags = "serve --approve-all / run --yes" in hint
        assert flags == (reason in ("unavailable", "error")), (reason, hint)
    _, hint = denial_message(
        ApprovalOutcome("denied", "ask", "timeout"), "notes", "notes", "delete_note"
    )
    assert "larger limits.timeoutMs" in hint


# --------------------------------------------------------------------------- codemode.toml


def test_approval_settings_parse_per_project_server_and_tool(tmp_path: Path) -> None:
    settings = load_settings_text(
        'approval = "ask"\n'
        '[servers.notes.approval]\n"*" = "auto"\ndelete_note = "ask-once"\nexport-csv = "deny"\n'
        '[servers.cal]\napproval = "allow"\nblocklist = ["drop"]\n'
    )
    assert settings.approval == "ask"
    notes = settings.servers["notes"]
    assert notes.approval == {"delete_note": "ask-once", "export-csv": "deny"}
    assert notes.approval_default == "auto"
    assert notes.blocklist == ("export-csv",)  # deny is the blocklist (generate hides it too)
    assert settings.servers["cal"].approval_default == "allow" and settings.servers[
        "cal"
    ].blocklist == ("drop",)
    assert load_settings_text("").approval == "auto"

    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": "x"},
                    "cal": {"command": "x"},
                    "other": {"command": "x"},
                }
            }
        )
    )
    configs = load_config(tmp_path / ".mcp.json", settings)
    assert configs["notes"].approval_default == "auto" and configs["notes"].blocklist == (
        "export-csv",
    )
    assert configs["cal"].approval_default == "allow"
    assert configs["other"].approval_default == "ask"  # the project default, folded in


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('approval = "sometimes"', ["approval must be one of", '"ask-once"', '"sometimes"']),
        ("approval = true", ["approval must be one of"]),
        ('[servers.notes]\napproval = "yes"', ["servers.notes.approval must be one of", '"yes"']),
        (
            "[servers.notes]\napproval = 3",
            ["servers.notes.approval must be a string", "table of tool names"],
        ),
        (
            '[servers.notes.approval]\ndelete_note = "maybe"',
            ["servers.notes.approval.delete_note must be one of"],
        ),
        (
            "[servers.notes.approval]\ndelete_note = false",
            ["servers.notes.approval.delete_note", "got false"],
        ),
        ('[servers.notes.approval]\n"" = "ask"', ["empty tool name"]),
    ],
)
def test_approval_mistakes_are_user_errors_naming_the_key(text: str, needles: list[str]) -> None:
    with pytest.raises(UserError) as info:
        load_settings_text(text)
    shown = f"{info.value.message} {info.value.hint}"
    for needle in needles:
        assert needle in shown, shown
    assert info.value.hint


# --------------------------------------------------------------------------- the gate (no server)


def test_arguments_shown_are_redacted_cut_and_printable() -> None:
    config = bare(env={"API_KEY": "sk-live-123456789"})
    gate = ApprovalGate(redact_patterns=[r"tok-[0-9]+"])
    text = gate.arguments_text(
        config, {"key": "sk-live-123456789", "t": "tok-42", "esc": "\x1b[2J\u202e"}
    )
    assert "sk-live" not in text and "<redacted:API_KEY>" in text and "<redacted:pattern>" in text
    assert "\x1b" not in text and "\u202e" not in text
    long = gate.arguments_text(config, {"body": "x" * 50_000})
    assert len(long) <= MAX_ARGUMENTS_CHARS + 64 and "more characters" in long


def decide(gate: ApprovalGate, tool_name: str = "delete_note", **kwargs: Any) -> Any:
    annotations = (
        tool(NOTES_TOOLS, tool_name)["annotations"]
        if tool_name in {t["name"] for t in NOTES_TOOLS}
        else None
    )
    kwargs.setdefault("config", bare())
    return gate.decide(
        server_id="notes",
        tool_name=tool_name,
        arguments={"id": 1},
        annotations=annotations,
        **kwargs,
    )


def test_gate_fails_closed_without_an_approver_and_says_why() -> None:
    async def main() -> list[ApprovalOutcome]:
        async def cannot(request: ApprovalRequest) -> bool:
            raise ApprovalUnavailable("the client does not support elicitation")

        async def broken(request: ApprovalRequest) -> bool:
            raise RuntimeError("boom")

        gate = ApprovalGate()
        return [
            await decide(gate),
            await decide(gate, approve=cannot),
            await decide(gate, approve=broken),
            await decide(gate, "get_note"),
            await decide(ApprovalGate(approve_all=True)),
            await decide(
                gate, config=bare(approval_default="deny"), tool_name="summary_of_nothing"
            ),
        ]

    none, cannot, broken, read_only, everything, denied = asyncio.run(main())
    assert (none.decision, none.reason) == ("denied", "unavailable") and "no approver" in str(
        none.detail
    )
    assert (cannot.reason, cannot.detail) == (
        "unavailable",
        "the client does not support elicitation",
    )
    assert (broken.decision, broken.reason) == ("denied", "error") and "boom" in str(broken.detail)
    assert read_only.decision == "allowed"
    assert everything.decision == "approved"
    assert (denied.decision, denied.reason) == ("denied", "policy")


def test_gate_waits_within_the_deadline() -> None:
    async def main() -> ApprovalOutcome:
        async def never(request: ApprovalRequest) -> bool:
            await asyncio.sleep(3600)
            return True

        return await decide(ApprovalGate(approve=never), deadline=time.monotonic() + 0.2)

    started = time.monotonic()
    outcome = asyncio.run(main())
    assert (outcome.decision, outcome.reason) == ("denied", "timeout")
    assert time.monotonic() - started < PROMPT_S  # not the approver's hour


def test_gate_asks_the_same_tool_in_turn_and_remembers_ask_once_per_session() -> None:
    async def main() -> tuple[list[str], int, list[str], list[str]]:
        active = 0
        most = 0
        asked: list[str] = []

        async def approve(request: ApprovalRequest) -> bool:
            nonlocal active, most
            active += 1
            most = max(most, active)
            asked.append(request.tool_name)
            await asyncio.sleep(0.05)
            active -= 1
            return True

        gate = ApprovalGate(approve=approve)
        twice = [o.decision for o in await asyncio.gather(decide(gate), decide(gate))]
        once_cfg = bare(approval={"delete_note": "ask-once"})
        once = [
            o.decision
            for o in await asyncio.gather(*(decide(gate, config=once_cfg) for _ in range(3)))
        ]
        other_session = (await decide(gate, config=once_cfg, session="client-2")).decision
        assert gate._locks == {}  # no lock outlives its asks (ever new sessions grow nothing)
        return twice, most, once, [other_session, *asked]

    twice, most, once, rest = asyncio.run(main())
    assert twice == ["approved", "approved"] and most == 1  # asked in turn, never at once
    assert once == ["approved", "approved-for-session", "approved-for-session"]
    assert rest == [
        "approved",
        "delete_note",
        "delete_note",
        "delete_note",
        "delete_note",
    ]  # 2 + 1 + 1


def test_gate_one_answer_approves_a_tool_for_the_rest_of_the_run() -> None:
    """FOR_RUN: the calls of a Promise.all waiting behind the question and every later call of
    the same tool in the same run go through unasked; another tool, another run, are asked."""

    async def main() -> dict[str, Any]:
        asked: list[tuple[str, bool]] = []

        async def approve(request: ApprovalRequest) -> Answer:
            asked.append((request.tool_name, request.offers_run))
            await asyncio.sleep(0.02)
            return FOR_RUN

        gate = ApprovalGate(approve=approve)
        run: set[tuple[str, str]] = set()
        together = [
            o.decision for o in await asyncio.gather(*(decide(gate, run=run) for _ in range(20)))
        ]
        return {
            "together": together,
            "later": (await decide(gate, run=run)).decision,
            "other_tool": (await decide(gate, "update_note", run=run)).decision,
            "next_run": (await decide(gate, run=set())).decision,
            "no_run": (await decide(gate)).decision,  # nowhere to remember: a plain yes
            "asked": asked,
            "run": sorted(run),
        }

    got = asyncio.run(main())
    assert (
        got["together"].count("approved") == 1 and got["together"].count("approved-for-run") == 19
    )
    assert got["later"] == "approved-for-run"
    assert got["other_tool"] == got["next_run"] == got["no_run"] == "approved"
    assert got["asked"] == [
        ("delete_note", True),
        ("update_note", True),
        ("delete_note", True),
        ("delete_note", True),
    ]
    assert got["run"] == [("notes", "delete_note"), ("notes", "update_note")]


def test_only_true_and_for_run_approve_and_ask_once_offers_no_run_answer() -> None:
    async def main() -> list[tuple[str, bool]]:
        out = []
        for answer in ("yes", 1, "RUN", None, FOR_RUN, True):

            async def approve(request: ApprovalRequest, answer: Any = answer) -> Any:
                return answer

            outcome = await decide(ApprovalGate(approve=approve), run=set())
            out.append((outcome.decision, outcome.reason == "declined"))
        once = ApprovalGate(approve=Recorder(FOR_RUN))
        config = bare(approval={"delete_note": "ask-once"})
        first = await decide(once, config=config, run=set())
        second = await decide(once, config=config, run=set())  # a new run, the same session
        out.append((first.decision, second.decision == "approved-for-session"))
        return out

    assert asyncio.run(main()) == [("denied", True)] * 4 + [("approved", False)] * 2 + [
        ("approved", True)
    ]
    request = ApprovalGate().request("notes", bare(), "delete_note", {}, None, "ask-once")
    assert (
        not request.offers_run
        and ApprovalGate().request("notes", bare(), "x", {}, None, "ask").offers_run
    )


# --------------------------------------------------------------------------- the policy table

UNANNOTATED_CATALOGS = (
    "brave-search",
    "github",
    "gitlab",
    "google-maps",
    "puppeteer",
    "slack",
    "sqlite",
)


def catalog_project(tmp_path: Path, toml: str) -> tuple[Settings, dict[str, ServerConfig]]:
    """Every real catalog as a configured server, under codemode.toml `toml`."""
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {cid: {"command": "x"} for cid in catalog_ids()}})
    )
    (tmp_path / "codemode.toml").write_text(toml)
    settings = load_settings(tmp_path / "codemode.toml")
    return settings, load_config(tmp_path / ".mcp.json", settings)


@pytest.mark.parametrize(
    "toml",
    [
        "",
        'approval = "ask-once"\n[servers.sqlite.approval]\nread_query = "allow"\nwrite_query = "deny"\n"*" = "auto"\n'
        '[servers.github]\napproval = "allow"\nblocklist = ["push_files"]\n[servers.slack.approval]\n"*" = "deny"\n'
        'slack_list_channels = "auto"\n[servers.filesystem.approval]\nwrite_file = "ask"\nread_file = "auto"\n',
    ],
)
def test_policy_table_says_what_the_gate_decides_for_every_real_tool(
    tmp_path: Path, toml: str
) -> None:
    settings, configs = catalog_project(tmp_path, toml)
    gate = ApprovalGate(project_default=settings.approval)
    rows = policy_table(settings, [(cid, load_catalog(cid)[1]) for cid in catalog_ids()])
    assert len(rows) == sum(len(load_catalog(cid)[1]) for cid in catalog_ids())
    for row in rows:
        config = configs[row.config_id]
        annotations = tool(load_catalog(row.config_id)[1], row.tool_name).get("annotations")
        expected = (
            "deny"
            if row.tool_name in config.blocklist
            else gate.policy(config, row.tool_name, annotations)
        )
        assert row.policy == expected, row
        assert (row.source == "config") == (row.line is not None), row


def test_policy_table_names_the_annotation_or_the_line_that_decided(tmp_path: Path) -> None:
    settings, _ = catalog_project(
        tmp_path,
        (
            'approval = "ask-once"\n'
            '[servers.sqlite.approval]\nread_query = "allow"\nwrite_query = "deny"\n"*" = "auto"\n'
            '[servers.github]\napproval = "allow"\nblocklist = ["push_files"]\n'
            '[servers.slack.approval]\n"*" = "deny"\n'
        ),
    )
    rows = {
        (r.config_id, r.tool_name): r
        for r in policy_table(
            settings,
            [
                (cid, load_catalog(cid)[1])
                for cid in ("sqlite", "github", "slack", "filesystem", "time")
            ],
        )
    }

    def why(cid: str, name: str) -> tuple[str, str, str, int | None]:
        r = rows[(cid, name)]
        return r.policy, r.source, r.detail, r.line

    assert why("sqlite", "read_query") == (
        "allow",
        "config",
        '[servers.sqlite.approval] read_query = "allow"',
        3,
    )
    assert why("sqlite", "write_query") == (
        "deny",
        "config",
        '[servers.sqlite.approval] write_query = "deny"',
        4,
    )
    assert why("sqlite", "list_tables") == (
        "ask",
        "default",
        "no annotations",
        None,
    )  # "*" = "auto"
    assert why("github", "create_issue") == (
        "allow",
        "config",
        '[servers.github] approval = "allow"',
        7,
    )
    assert why("github", "push_files") == ("deny", "config", "[servers.github] blocklist", 8)
    assert why("slack", "slack_post_message") == (
        "deny",
        "config",
        '[servers.slack.approval] "*" = "deny"',
        10,
    )
    assert why("filesystem", "write_file") == ("ask-once", "config", 'approval = "ask-once"', 1)
    plain = policy_table(Settings(), [("filesystem", load_catalog("filesystem")[1])])
    auto = {(r.config_id, r.tool_name): (r.policy, r.source, r.detail) for r in plain}
    assert auto[("filesystem", "read_text_file")] == ("allow", "annotation", "readOnlyHint: true")
    assert auto[("filesystem", "write_file")] == ("ask", "annotation", "destructiveHint: true")


def test_tools_without_annotations_ask_before_every_call_by_default() -> None:
    """The default for a tool whose annotations say nothing (runtime/host/approval.py says why): asked
    before every call, not once per session: the unannotated real servers post, push and write."""
    rows = policy_table(Settings(), [(cid, load_catalog(cid)[1]) for cid in catalog_ids()])
    defaulted = [r for r in rows if r.source == "default"]
    assert {r.config_id for r in defaulted} == set(UNANNOTATED_CATALOGS)
    assert all(r.policy == "ask" and r.detail == "no annotations" for r in defaulted)
    writers = {
        ("github", "push_files"),
        ("slack", "slack_post_message"),
        ("sqlite", "write_query"),
        ("puppeteer", "puppeteer_evaluate"),
        ("gitlab", "create_or_update_file"),
    }
    assert writers <= {(r.config_id, r.tool_name) for r in defaulted}
    # Real servers that annotate say enough for every tool: nothing of theirs falls to the default.
    assert {r.config_id for r in rows} - set(UNANNOTATED_CATALOGS) == {
        r.config_id for r in rows if r.source == "annotation"
    }


# --------------------------------------------------------------------------- through CodeMode (real server)

DELETE_AND_CHECK = """
import { delete_note, get_note } from '@codemode/servers/notes';
const out = {};
try { out.deleted = (await delete_note({ id: ID })).deleted; }
catch (e) { out.error = { name: e.name, code: e.code, message: e.message, hint: e.hint, isToolCallError: e instanceof ToolCallError }; }
try { out.still = (await get_note({ id: ID })).id; } catch (e) { out.still = null; }
globalThis.__codemode_result__ = out;
"""


def delete_script(note_id: int) -> str:
    return "import { ToolCallError } from '@codemode/errors';\n" + DELETE_AND_CHECK.replace(
        "ID", str(note_id)
    )


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("approval")
    h = HostThread({"notes": stdio("notes", "notes_server")}, base / "out", base / "logs")
    try:
        yield h
    finally:
        h.close()


class Recorder:
    """An approver answering from a list, remembering what it was asked."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Answer:
        self.asked.append(request)
        await asyncio.sleep(0.02)
        return self.answers.pop(0)


@pytest.mark.slow
def test_s10_a_declined_call_is_never_sent_and_the_script_goes_on(host: HostThread) -> None:
    approver = Recorder(False)
    response = host.run(delete_script(1), approve=approver)
    result = assert_ok(response)
    assert result["still"] == 1  # the server never received the delete
    error = result["error"]
    assert (
        error["name"] == "ToolCallError"
        and error["isToolCallError"]
        and error["code"] == DENIED_CODE
    )
    assert "notes.delete_note was not called: the user declined it" in error["message"]
    assert '[servers.notes.approval] delete_note = "allow"' in error["hint"]
    [request] = approver.asked
    assert (request.server_id, request.config_id, request.tool_name) == (
        "notes",
        "notes",
        "delete_note",
    )
    assert request.arguments_text == '{"id": 1}' and request.policy == "ask"
    assert request.annotations is not None and request.annotations["destructiveHint"] is True
    # §3.3.2: the decision beside the required fields, no inputs or outputs.
    denied, read = response["toolTrace"]
    assert denied == {
        "serverId": "notes",
        "toolName": "delete_note",
        "durationMs": denied["durationMs"],
        "ok": False,
        "error": f"ToolCallError: {DENIED_CODE} (declined)",
        "approval": "denied",
    }
    assert read["approval"] == "allowed" and read["ok"] is True


@pytest.mark.slow
def test_s3_3_2_calls_refused_before_the_gate_carry_no_decision(host: HostThread) -> None:
    approver = Recorder()
    code = """
import { delete_note } from '@codemode/servers/notes';
try { await delete_note({ id: 'one' }); } catch (e) { globalThis.__codemode_result__ = e.name; }
"""
    response = host.run(code, approve=approver)
    assert assert_ok(response) == "SchemaValidationError" and approver.asked == []  # never asked
    [entry] = response["toolTrace"]
    assert entry["ok"] is False and "approval" not in entry


@pytest.mark.slow
def test_an_approved_call_reaches_the_server(host: HostThread) -> None:
    approver = Recorder(True)
    result = assert_ok(response := host.run(delete_script(2), approve=approver))
    assert result == {"deleted": True, "still": None}  # gone: get_note fails afterwards
    assert [e.get("approval") for e in response["toolTrace"]] == ["approved", "allowed"]


@pytest.mark.slow
def test_without_an_approver_an_asking_tool_is_denied(host: HostThread) -> None:
    response = host.run(delete_script(3))
    result = assert_ok(response)
    assert result["still"] == 3 and result["error"]["code"] == DENIED_CODE
    assert "no way to ask: no approver" in result["error"]["message"]
    assert response["toolTrace"][0]["approval"] == "denied"


@pytest.mark.slow
def test_s10_two_asks_in_one_promise_all_are_asked_in_turn(host: HostThread) -> None:
    code = """
import { update_note } from '@codemode/servers/notes';
const r = await Promise.all([update_note({ id: 4, title: 'a' }), update_note({ id: 4, title: 'b' })]);
globalThis.__codemode_result__ = r.map((n) => n.title);
"""
    active = {"now": 0, "most": 0, "asked": 0}

    async def approve(request: ApprovalRequest) -> bool:
        active["now"] += 1
        active["asked"] += 1
        active["most"] = max(active["most"], active["now"])
        await asyncio.sleep(0.1)
        active["now"] -= 1
        return True

    response = host.run(code, approve=approve)
    assert assert_ok(response) == ["a", "b"]
    assert active["asked"] == 2 and active["most"] == 1
    assert [e["approval"] for e in response["toolTrace"]] == ["approved", "approved"]


@pytest.mark.slow
def test_ask_once_asks_once_per_session(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": PYTHON, "args": [script("notes_server")]}}})
    )
    (tmp_path / "codemode.toml").write_text('[servers.notes.approval]\nupdate_note = "ask-once"\n')
    code = """
import { update_note } from '@codemode/servers/notes';
const r = await Promise.all([update_note({ id: 1, title: 'a' }), update_note({ id: 2, title: 'b' })]);
await update_note({ id: 3, title: 'c' });
globalThis.__codemode_result__ = r.map((n) => n.title);
"""
    approver = Recorder(True)

    async def main() -> list[Response]:
        async with CodeMode.from_config(
            tmp_path / ".mcp.json", out=tmp_path / "out", approve=approver
        ) as cm:
            return [await cm.run(code), await cm.run(code)]

    first, second = anyio.run(main)
    assert assert_ok(first) == ["a", "b"] and assert_ok(second) == ["a", "b"]
    assert len(approver.asked) == 1 and approver.asked[0].policy == "ask-once"
    assert [e["approval"] for e in first["toolTrace"]] == [
        "approved",
        "approved-for-session",
        "approved-for-session",
    ]
    assert {e["approval"] for e in second["toolTrace"]} == {"approved-for-session"}


def sqlite_loop(calls: int) -> str:
    """A script calling the real sqlite server's unannotated write_query `calls` times in a loop."""
    return (
        "import * as sqlite from '@codemode/servers/sqlite';\nconst out = [];\n"
        f"for (let i = 0; i < {calls}; i++) out.push(await sqlite.write_query({{ query: `INSERT INTO t VALUES (${{i}})` }}));\n"
        "globalThis.__codemode_result__ = out.filter((r) => r.startsWith('write_query called with')).length;\n"
    )


@pytest.fixture(scope="module")
def sqlite_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    """The sqlite server's real tool list (none annotated), served by tests/servers/catalog_server.py."""
    base = tmp_path_factory.mktemp("approval-sqlite")
    write_out(base / "out", [fixture_set("sqlite", load_catalog("sqlite")[1])])
    h = HostThread(
        {"sqlite": stdio("sqlite", "catalog_server", "--catalog", "sqlite")},
        base / "out",
        base / "logs",
    )
    try:
        yield h
    finally:
        h.close()


@pytest.mark.slow
def test_a_loop_of_50_calls_to_an_unannotated_tool_asks_once_when_the_user_approves_the_run(
    sqlite_host: HostThread,
) -> None:
    approver = Recorder(FOR_RUN)
    response = sqlite_host.run(sqlite_loop(50), approve=approver)
    assert assert_ok(response) == 50  # every call reached the server
    (request,) = approver.asked
    assert (request.tool_name, request.policy, request.annotations, request.offers_run) == (
        "write_query",
        "ask",
        None,
        True,
    )
    assert [e["approval"] for e in response["toolTrace"]] == ["approved"] + [
        "approved-for-run"
    ] * 49
    # The answer ends with its run: the next run asks again, and a plain yes covers one call.
    again = Recorder(True, True, True)
    response = sqlite_host.run(sqlite_loop(3), approve=again)
    assert assert_ok(response) == 3 and len(again.asked) == 3
    assert [e["approval"] for e in response["toolTrace"]] == ["approved"] * 3


@pytest.mark.slow
def test_deny_hides_the_tool_from_bindings_discovery_and_calls(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": PYTHON, "args": [script("notes_server")]}}})
    )
    (tmp_path / "codemode.toml").write_text('[servers.notes.approval]\ndelete_note = "deny"\n')
    code = """
import * as notes from '@codemode/servers/notes';
import { listTools, getTool, searchTools } from '@codemode/discovery';
const names = (await listTools('notes', { detail: 'name' })).map((t) => t.toolName);
let found;
try { await getTool('notes', 'delete_note'); found = true; } catch (e) { found = e.name; }
const hits = (await searchTools('delete note')).results.map((t) => t.toolName);
globalThis.__codemode_result__ = { binding: typeof notes.delete_note, listed: names.includes('delete_note'),
  others: names.includes('get_note'), found, searched: hits.includes('delete_note') };
"""

    async def main() -> Response:
        async with CodeMode.from_config(
            tmp_path / ".mcp.json", out=tmp_path / "out", approve_all=True
        ) as cm:
            return await cm.run(code)

    assert assert_ok(anyio.run(main)) == {
        "binding": "undefined",
        "listed": False,
        "others": True,
        "found": "ToolNotFoundError",
        "searched": False,
    }


@pytest.mark.slow
def test_waiting_for_approval_is_told_as_progress_and_counts_within_timeout_ms(
    host: HostThread,
) -> None:
    notes: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        notes.append(message)

    async def never(request: ApprovalRequest) -> bool:
        await asyncio.sleep(3600)
        return True

    started = time.monotonic()
    response = host.run(
        delete_script(5), limits={"timeoutMs": 1500}, progress=progress, approve=never
    )
    assert time.monotonic() - started < PROMPT_S  # not the approver's hour
    assert "waiting for the user's approval of notes.delete_note" in notes
    entry = response["toolTrace"][0]
    assert entry["toolName"] == "delete_note" and entry["approval"] == "denied"
    # Whichever sees the deadline first: the sandbox ends the run (SANDBOX_LIMIT), or the gate
    # stops waiting and the script gets the denial (and has next to no time left).
    assert "waiting for approval" in entry["error"] or "(timeout)" in entry["error"]
    if "SANDBOX_LIMIT" not in codes(response, "error"):
        assert response["result"]["error"]["code"] == DENIED_CODE
        assert "timeoutMs" in response["result"]["error"]["message"]
    assert (
        assert_ok(
            host.run(
                "import { get_note } from '@codemode/servers/notes';\n"
                "globalThis.__codemode_result__ = (await get_note({ id: 5 })).id;"
            )
        )
        == 5
    )


# --------------------------------------------------------------------------- `codemode-gen run`

CLI = [sys.executable, "-m", "codemode_gen", "run"]
PROMPT = b"N] "  # the end of the question: "[y/a/N] " ("ask"), "[y/N] " ("ask-once")
# Bounds one CLI run in these tests (server start + script + the prompt round trip).
CLI_TIMEOUT = 90.0


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("approval-cli")
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": PYTHON, "args": [script("notes_server")]},
                    "sqlite": {
                        "command": PYTHON,
                        "args": [script("catalog_server"), "stdio", "--catalog", "sqlite"],
                    },
                }
            }
        )
    )
    write_out(base / "out", [fixture_set("sqlite", load_catalog("sqlite")[1])])
    (base / "delete.js").write_text(delete_script(1))
    (base / "loop.js").write_text(sqlite_loop(20))
    (base / "spoof.js").write_text(
        "import { update_note } from '@codemode/servers/notes';\n"
        f"let out; try {{ await update_note({{ id: 2, body: {json.dumps(SPOOF)} }}); }} catch (e) {{ out = e.code; }}\n"
        "globalThis.__codemode_result__ = out;\n"
    )
    return base


# Arguments a script chose to read like the host's own words on the next terminal line.
SPOOF = (
    "\u2028(administrator) This call is read-only and pre-approved.\u2029\x85\r\u200b\u202e"
    + " " * 60
    + "y"
)
SPOOFED_SENTENCE = "(administrator) This call is read-only and pre-approved."


def run_with_terminal(
    project: Path, answer: bytes, *args: str, script_name: str = "delete.js"
) -> tuple[dict[str, Any], str]:
    """`codemode-gen run` with stdin and stderr on a pseudo-terminal (stdout piped): answers the
    first prompt with `answer`; returns the response and what the terminal showed."""
    leader, follower = os.openpty()
    proc = subprocess.Popen(
        [*CLI, "--no-pretty", *args, script_name],
        cwd=project,
        stdin=follower,
        stderr=follower,
        stdout=subprocess.PIPE,
    )
    os.close(follower)
    shown = b""
    try:
        deadline = time.monotonic() + CLI_TIMEOUT
        while PROMPT not in shown and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    shown += os.read(leader, 4096)
                except OSError:  # the child closed the terminal
                    break
        assert PROMPT in shown, shown.decode(errors="replace")
        os.write(leader, answer)
        stdout, _ = proc.communicate(timeout=CLI_TIMEOUT)
        while select.select([leader], [], [], 0.2)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return json.loads(stdout), shown.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize(("answer", "approved"), [(b"y\n", True), (b"n\n", False), (b"\n", False)])
def test_run_asks_on_the_terminal(project: Path, answer: bytes, approved: bool) -> None:
    response, shown = run_with_terminal(project, answer)
    assert "approval needed: notes.delete_note (destructive" in shown
    question = "Allow this call? y = yes, a = all calls of delete_note in this run, N = no [y/a/N]"
    assert '\n│ {"id": 1}\n' + question in shown.replace("\r\n", "\n")  # the terminal adds \r
    result = response["result"]
    if approved:
        assert result == {"deleted": True, "still": None}
        assert response["toolTrace"][0]["approval"] == "approved"
    else:
        assert result["still"] == 1 and result["error"]["code"] == DENIED_CODE
        assert "declined" in result["error"]["message"]
        assert response["toolTrace"][0]["approval"] == "denied"


@pytest.mark.slow
def test_run_a_approves_every_call_of_the_tool_in_this_run(project: Path) -> None:
    """`a` at the terminal: a loop of 20 calls to the unannotated write_query asks once."""
    response, shown = run_with_terminal(
        project, b"a\n", "--limits", '{"timeoutMs": 20000}', script_name="loop.js"
    )
    assert (
        shown.count("approval needed:") == 1
        and "approval needed: sqlite.write_query (no annotations" in shown
    )
    assert "approved: every call of sqlite.write_query in this run" in shown
    assert response["result"] == 20
    assert [e["approval"] for e in response["toolTrace"]] == ["approved"] + [
        "approved-for-run"
    ] * 19


@pytest.mark.slow
def test_run_shows_arguments_as_data_that_cannot_pass_for_the_prompt(project: Path) -> None:
    response, shown = run_with_terminal(project, b"n\n", script_name="spoof.js")
    assert response["result"] == DENIED_CODE
    question = shown.replace("\r\n", "\n").split("approval needed: ", 1)[1].split("N] ", 1)[0]
    lines = question.split("\n")
    assert question.splitlines() == lines and "\r" not in question  # no line break the script made
    assert not [ch for ch in question if ch in "\x85\u2028\u2029\u200b\u202e\x1b"]
    assert lines[0].startswith("notes.update_note (destructive") and lines[-1].startswith(
        "Allow this call"
    )
    data = [line for line in lines if line.startswith("│ ")]
    assert data == lines[2:-1]  # the heading, then only gutter lines, then the question
    shown_json = "".join(line[2:] for line in data)
    assert "  " not in shown_json  # no padding: runs of spaces are escaped
    assert (
        SPOOFED_SENTENCE in shown_json and SPOOFED_SENTENCE not in lines[0] + lines[1] + lines[-1]
    )
    assert json.loads(shown_json) == {"body": SPOOF, "id": 2}


@pytest.mark.slow
def test_run_without_a_terminal_denies_and_yes_approves(project: Path) -> None:
    def run(*args: str) -> dict[str, Any]:
        proc = subprocess.run(
            [*CLI, "--no-pretty", *args, "delete.js"],
            cwd=project,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr
        assert "[y/N]" not in proc.stderr
        response: dict[str, Any] = json.loads(proc.stdout)
        return response

    denied = run()
    assert denied["result"]["still"] == 1 and denied["result"]["error"]["code"] == DENIED_CODE
    assert (
        "not a terminal" in denied["result"]["error"]["message"]
        and "--yes" in denied["result"]["error"]["message"]
    )
    assert denied["toolTrace"][0] | {"durationMs": 0} == {
        "serverId": "notes",
        "toolName": "delete_note",
        "durationMs": 0,
        "ok": False,
        "error": f"ToolCallError: {DENIED_CODE} (unavailable)",
        "approval": "denied",
    }
    approved = run("--yes")
    assert approved["result"] == {"deleted": True, "still": None}
    assert approved["toolTrace"][0]["approval"] == "approved"
