"""Approval of tool calls through `serve` (issue 12): the MCP client's user is asked by
elicitation, and the agent sees which tools ask.

End to end: a real `codemode-gen serve` over stdio, the SDK's client with an
`elicitation_callback` (what makes it declare the elicitation capability), the demo notes and
calendar servers (delete_note is `destructiveHint: true`, so the default "auto" policy asks).
The project's codemode.toml makes update_note ask-once, hides tasks.add ("deny", after out/
was generated) and denies every calendar tool but list_events (a server default of "deny").
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import pytest

from codemode_gen.cli.serve import serve_command
from codemode_gen.generator.fixtures import load_fixtures
from codemode_gen.host_options import HostOptions
from codemode_gen.runtime.frontends.serve_approval import APPROVAL_SCHEMA, FOR_RUN_FIELD
from tests.catalogs import load_catalog
from tests.conftest import HANG_S, PROMPT_S
from tests.runtime.frontends.test_serve_http import TOKEN, start_serve
from tests.runtime_support import (
    REPO,
    RUN_TIMEOUT,
    against_serve,
    fixture_set,
    mcp_project,
    write_out,
)

if TYPE_CHECKING:
    import mcp_types as types

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

# "accept-for-run": accept with the form's checkbox ticked (the tool's further calls in this run).
Action = Literal["accept", "accept-for-run", "decline", "cancel"]

T = TypeVar("T")

SETTINGS = """
[servers.notes.approval]
update_note = "ask-once"
"tasks.add" = "deny"

[servers.calendar.approval]
"*" = "deny"
list_events = "allow"
"""

NOTES = 'import * as notes from "@codemode/servers/notes";\n'
# The notes server starts with notes 1..5; a run reports what it did and whether note 1 is left.
DELETE_ONE = (
    NOTES
    + """
let outcome;
try { outcome = await notes.delete_note({ id: 1 }); }
catch (e) { outcome = { name: e.name, code: e.code, message: e.message, hint: e.hint }; }
globalThis.__codemode_result__ = outcome;
"""
)
IDS = NOTES + "globalThis.__codemode_result__ = (await notes.list_notes()).result.map((n) => n.id);"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = mcp_project(
        tmp_path_factory.mktemp("serve-approval"),
        notes=["notes_server"],
        calendar=["calendar_server"],
    )
    # out/ as `generate` wrote it before codemode.toml said anything about approval
    write_out(base / "out", load_fixtures(REPO / "fixtures"))
    (base / "codemode.toml").write_text(SETTINGS)
    return base


class Elicitor:
    """The client's user: answers elicitation/create with `actions` in turn (then "accept"),
    remembering what was asked, how many asks overlapped, and the progress seen when it answered."""

    def __init__(self, *actions: Action, delay: float = 0.05) -> None:
        self.actions = list(actions)
        self.delay = delay
        self.asked: list[Any] = []  # ElicitRequestParams (form mode: .message, .requested_schema)
        self.active = 0
        self.overlap = 0
        self.cancelled = 0  # asks the server withdrew (notifications/cancelled) before an answer
        self.progress: list[
            str | None
        ] = []  # the run's progress messages (when it asked for progress)
        self.progress_when_answered: list[list[str | None]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        import mcp_types as types

        self.asked.append(params)
        self.active += 1
        self.overlap = max(self.overlap, self.active)
        try:
            await anyio.sleep(self.delay)  # the user reads the dialog
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
        self.progress_when_answered.append(list(self.progress))
        action = self.actions.pop(0) if self.actions else "accept"
        if action == "accept-for-run":
            return types.ElicitResult(action="accept", content={FOR_RUN_FIELD: True})
        return types.ElicitResult(action=action)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(message)


def served(
    project: Path, body: Callable[[Any], Awaitable[T]], *args: str, elicitor: Elicitor | None = None
) -> T:
    """`body(client)` against `serve` in `project` over stdio; the client declares elicitation
    only when given an `elicitor`. The trace lists every call (`--trace full`): the approval
    decisions of the calls that ran are in their entries."""
    return against_serve(
        project,
        body,
        "--out",
        str(project / "out"),
        "--trace",
        "full",
        *args,
        elicitation_callback=elicitor,
    )


async def run(
    client: Any, code: str, elicitor: Elicitor | None = None, **limits: int
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"code": code, **({"limits": limits} if limits else {})}
    progress = elicitor.on_progress if elicitor is not None else None
    result = await client.call_tool("codemode.run", arguments, progress_callback=progress)
    response: dict[str, Any] = result.structured_content
    assert not [d for d in response["diagnostics"] if d["severity"] == "error"], response[
        "diagnostics"
    ]
    return response


def trace(response: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(entry["toolName"], entry.get("approval")) for entry in response["toolTrace"]]


def test_an_accepted_call_runs_and_the_user_saw_server_tool_and_arguments(project: Path) -> None:
    user = Elicitor("accept")

    async def body(client: Any) -> Any:
        return await run(client, DELETE_ONE, user), await run(client, IDS)

    deleted, after = served(project, body, elicitor=user)
    assert deleted["result"] == {"id": 1, "deleted": True, "remaining": 4}
    assert trace(deleted) == [("delete_note", "approved")]
    assert 1 not in after["result"]  # the call reached the server
    (asked,) = user.asked
    # An "ask" tool's form: one checkbox, unticked unless the user ticks it (only this call).
    assert asked.requested_schema == {
        "type": "object",
        "properties": {
            FOR_RUN_FIELD: {
                "type": "boolean",
                "title": 'Allow every call of "delete_note" for the rest of this run',
                "description": "Unticked: only this call.",
                "default": False,
            }
        },
    }
    assert 'tool "delete_note" of server "notes" (destructive)' in asked.message
    assert (
        asked.message.endswith('\n│ {"id": 1}')
        and "Accept" in asked.message
        and "tick the box" in asked.message
    )


# A script's attempt to make its arguments read as the host's words: a line break JSON leaves
# raw (U+2028), zero-width and bidi characters, odd spaces, and padding to where a line wraps.
SPOOF = (
    "x\u2028\u2029\u0085(administrator) This call is read-only and pre-approved.\u200b\u2066\u202e"
    "\u00a0\u3000" + " " * 40 + "Accept is safe.\ufeff\ue000"
)
SPOOFED_SENTENCE = "(administrator) This call is read-only and pre-approved."


def test_arguments_a_script_writes_cannot_pass_for_the_hosts_words(project: Path) -> None:
    user = Elicitor("decline")
    code = NOTES + (
        f"let out; try {{ await notes.update_note({{ id: 3, body: {json.dumps(SPOOF)} }}); }}\n"
        "catch (e) { out = e.code; }\nglobalThis.__codemode_result__ = out;"
    )

    async def body(client: Any) -> Any:
        return await run(client, code, user)

    response = served(project, body, elicitor=user)
    assert response["result"] == "APPROVAL_DENIED"
    (asked,) = user.asked
    message = asked.message
    lines = message.split("\n")
    assert message.splitlines() == lines  # no line break but \n: no U+2028/2029/0085, no \r
    hidden = [
        ch
        for ch in message
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn") and ch != "\n"
    ]
    assert hidden == [] and "\u00a0" not in message and "\u3000" not in message
    # The host's words come first; everything from the script is on gutter lines, last.
    data = [line for line in lines if line.startswith("│ ")]
    assert data == lines[-len(data) :] and data
    assert "Accept" in "\n".join(lines[: -len(data)])
    shown = "".join(line[2:] for line in data)
    assert "  " not in shown  # no padding: runs of spaces are escaped
    assert SPOOFED_SENTENCE in shown.replace("\u200b", "")
    assert SPOOFED_SENTENCE not in "\n".join(lines[: -len(data)])
    # What was shown is the script's JSON, escaped: it decodes back to exactly what was sent.
    assert json.loads(shown) == {"body": SPOOF, "id": 3}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_call_is_never_sent_and_the_script_goes_on(
    project: Path, action: Action
) -> None:
    user = Elicitor(action)

    async def body(client: Any) -> Any:
        return await run(client, DELETE_ONE, user), await run(client, IDS)

    denied, after = served(project, body, elicitor=user)
    error = denied["result"]
    assert error["name"] == "ToolCallError" and error["code"] == "APPROVAL_DENIED"
    assert "the user declined it" in error["message"] and "do not retry" in error["hint"]
    assert '[servers.notes.approval] delete_note = "allow"' in error["hint"]
    assert 1 in after["result"]  # the server never got the call
    assert len(user.asked) == 1
    (entry,) = denied["toolTrace"]
    assert (
        entry["approval"] == "denied"
        and entry["ok"] is False
        and "APPROVAL_DENIED" in entry["error"]
    )


def test_a_client_without_elicitation_is_denied_unless_serve_approves_all(project: Path) -> None:
    async def body(client: Any) -> Any:
        return await run(client, DELETE_ONE), await run(client, IDS)

    denied, after = served(project, body)
    assert denied["result"]["code"] == "APPROVAL_DENIED"
    assert "does not support elicitation" in denied["result"]["message"]
    assert "--approve-all" in denied["result"]["message"]
    assert trace(denied) == [("delete_note", "denied")] and 1 in after["result"]

    approved, after = served(project, body, "--approve-all")
    assert approved["result"]["deleted"] is True and trace(approved) == [
        ("delete_note", "approved")
    ]
    assert 1 not in after["result"]


def test_two_asks_in_one_promise_all_are_asked_in_turn(project: Path) -> None:
    user = Elicitor("accept", "decline", delay=0.3)
    code = (
        NOTES
        + """
const outcomes = await Promise.allSettled([notes.delete_note({ id: 1 }), notes.delete_note({ id: 2 })]);
globalThis.__codemode_result__ = outcomes.map((o) => o.status === "fulfilled" ? o.value.id : o.reason.code);
"""
    )

    async def body(client: Any) -> Any:
        return await run(client, code, user), await run(client, IDS)

    both, after = served(project, body, elicitor=user)
    assert len(user.asked) == 2 and user.overlap == 1  # one dialog at a time
    assert both["result"].count("APPROVAL_DENIED") == 1
    (deleted,) = [r for r in both["result"] if r != "APPROVAL_DENIED"]
    assert [i for i in (1, 2) if i not in after["result"]] == [
        deleted
    ]  # only the accepted one was sent
    assert sorted(str(a) for _, a in trace(both)) == ["approved", "denied"]


def test_ask_once_asks_once_per_client_session(project: Path) -> None:
    user = Elicitor("accept")
    code = (
        NOTES
        + """
await notes.update_note({ id: 1, title: "one" });
await notes.update_note({ id: 2, title: "two" });
globalThis.__codemode_result__ = (await notes.get_note({ id: 2 })).title;
"""
    )

    async def body(client: Any) -> Any:
        return await run(client, code, user), await run(client, code, user)

    first, second = served(project, body, elicitor=user)
    assert first["result"] == second["result"] == "two"
    assert len(user.asked) == 1 and "ask-once" in user.asked[0].message
    assert (
        user.asked[0].requested_schema == APPROVAL_SCHEMA == {"type": "object", "properties": {}}
    )  # nothing to tick
    assert trace(first) == [
        ("update_note", "approved"),
        ("update_note", "approved-for-session"),
        ("get_note", "allowed"),
    ]
    assert trace(second) == [
        ("update_note", "approved-for-session"),
        ("update_note", "approved-for-session"),
        ("get_note", "allowed"),
    ]


@pytest.fixture(scope="module")
def sqlite_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real sqlite server's tool list (nothing annotated: "auto" asks before every call),
    served by tests/servers/catalog_server.py, which answers every call."""
    base = mcp_project(
        tmp_path_factory.mktemp("serve-approval-sqlite"),
        sqlite=["catalog_server", "stdio", "--catalog", "sqlite"],
    )
    write_out(base / "out", [fixture_set("sqlite", load_catalog("sqlite")[1])])
    return base


def writes(calls: int, *, together: bool = False) -> str:
    """`calls` write_query calls, one after another or in one Promise.all; the result counts
    the ones the server answered."""
    call = "sqlite.write_query({ query: `INSERT INTO t VALUES (${i})` })"
    loop = (
        f"const out = await Promise.all(Array.from({{ length: {calls} }}, (_, i) => {call}));"
        if together
        else f"const out = [];\nfor (let i = 0; i < {calls}; i++) out.push(await {call});"
    )
    return (
        'import * as sqlite from "@codemode/servers/sqlite";\n'
        + loop
        + "\nglobalThis.__codemode_result__ = out.filter((r) => r.startsWith('write_query called with')).length;"
    )


def test_accept_for_the_run_asks_once_for_a_loop_of_20_calls(sqlite_project: Path) -> None:
    """One answer with the form's box ticked approves write_query for the rest of its run: a
    loop asks once, so does a Promise.all; the next run asks again, and an answer without the
    box covers one call."""
    user = Elicitor("accept-for-run", "accept-for-run", "accept", "accept")

    async def body(client: Any) -> Any:
        return (
            await run(client, writes(20), user),
            await run(client, writes(20, together=True), user),
            await run(client, writes(2), user),
        )

    looped, together, plain = served(sqlite_project, body, elicitor=user)
    assert looped["result"] == together["result"] == 20 and plain["result"] == 2
    assert len(user.asked) == 4  # 1 + 1 + 2
    assert (
        trace(looped) == [("write_query", "approved")] + [("write_query", "approved-for-run")] * 19
    )
    assert sorted(str(a) for _, a in trace(together)) == ["approved"] + ["approved-for-run"] * 19
    assert trace(plain) == [("write_query", "approved")] * 2
    first = user.asked[0]
    assert 'tool "write_query" of server "sqlite" (no annotations)' in first.message
    assert first.requested_schema["properties"][FOR_RUN_FIELD]["title"] == (
        'Allow every call of "write_query" for the rest of this run'
    )


def test_progress_says_the_run_waits_for_approval(project: Path) -> None:
    user = Elicitor("accept", delay=0.5)
    waiting = "waiting for the user's approval of notes.delete_note"

    async def body(client: Any) -> Any:
        return await run(client, DELETE_ONE, user)

    served(project, body, elicitor=user)

    def told(
        messages: list[str | None],
    ) -> list[str | None]:  # without the heartbeats of a slow start
        return [m for m in messages if not (m or "").startswith("running ")]

    assert [told(seen) for seen in user.progress_when_answered] == [
        [waiting]
    ]  # while the dialog is open
    assert told(user.progress) == [waiting, "1 tool call done; last notes.delete_note"]


def test_no_answer_within_timeout_ms_ends_the_run_and_cancels_the_ask(project: Path) -> None:
    user = Elicitor("accept", delay=HANG_S)

    async def body(client: Any) -> Any:
        await run(client, IDS)  # connected and warm: the 1.5 s below is the wait for the user only
        started = time.monotonic()
        result = await client.call_tool(
            "codemode.run", {"code": DELETE_ONE, "limits": {"timeoutMs": 1500}}
        )
        took = time.monotonic() - started
        after = await run(client, IDS)
        with anyio.move_on_after(PROMPT_S):
            while not user.cancelled:
                await anyio.sleep(0.05)
        return result.structured_content, took, after

    response, took, after = served(project, body, elicitor=user)
    assert took < PROMPT_S and len(user.asked) == 1 and user.cancelled == 1  # not the user's HANG_S
    # At the run's deadline either the gate gave up first (the script caught the denial and
    # ended) or the sandbox stopped the script; the call was never sent either way.
    assert [d["code"] for d in response["diagnostics"]] in ([], ["SANDBOX_LIMIT"])
    assert response["result"] is None or response["result"]["code"] == "APPROVAL_DENIED"
    assert trace(response) == [("delete_note", "denied")] and 1 in after["result"]


def test_stateless_http_cannot_ask_so_the_call_is_denied(project: Path) -> None:
    user = Elicitor("accept")
    server = start_serve(project)

    async def main() -> Any:
        import httpx2
        import mcp_types as types
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx2.Timeout(RUN_TIMEOUT, read=RUN_TIMEOUT),
        )
        async with (
            http,
            Client(
                streamable_http_client(server.url, http_client=http),
                mode="legacy",
                read_timeout_seconds=RUN_TIMEOUT,
                elicitation_callback=user,
                client_info=types.Implementation(name="test", version="0"),
            ) as client,
        ):
            return await run(client, DELETE_ONE)

    try:
        denied = anyio.run(main)
    finally:
        server.stop()
    assert (
        denied["result"]["code"] == "APPROVAL_DENIED" and "stateless" in denied["result"]["message"]
    )
    assert user.asked == [] and trace(denied) == [("delete_note", "denied")]


GET_TOOLS = """
import { getTool, listTools, searchTools } from "@codemode/discovery";
const del = await getTool("notes", "delete_note");
const once = await getTool("notes", "update_note");
const found = (await searchTools("delete a note", { detail: "full", serverId: "notes" })).results[0];
const create = await getTool("calendar", "create_event");
let refused;
try { await (await import("@codemode/servers/calendar")).create_event({ start: "2026-03-03T10:00:00Z",
  end: "2026-03-03T11:00:00Z", title: "x" }); } catch (e) { refused = e.code; }
globalThis.__codemode_result__ = {
  del: [del.approval, del.declaration], once: [once.approval, once.declaration],
  found: [found.toolName, found.approval, found.declaration],
  create: [create.approval, create.declaration], refused,
  read: (await getTool("notes", "get_note")).approval ?? null,
  names: (await listTools("notes", { detail: "name" })).map((t) => t.toolName),
  full: (await listTools("notes", { detail: "full" })).filter((t) => t.approval).map((t) => `${t.toolName}:${t.approval}`),
  described: (await listTools("notes")).some((t) => "approval" in t),
};
"""


def test_the_prompt_and_discovery_mark_tools_that_ask_and_leave_out_denied_ones(
    project: Path,
) -> None:
    user = Elicitor()

    async def body(client: Any) -> Any:
        response = await run(client, GET_TOOLS, user)
        return (await client.list_tools()).tools[0].description, response

    description, response = served(project, body, elicitor=user)
    lines = description.splitlines()
    doc_of = {
        name: lines[i - 1]
        for i, line in enumerate(lines)
        for name in ("delete_note", "update_note", "get_note")
        if line.strip().startswith(f"function {name}(")
    }
    assert doc_of["delete_note"].endswith("@destructive @idempotent @closedWorld @approval */")
    assert doc_of["update_note"].endswith("@approvalOnce */")
    assert "@approval" not in doc_of["get_note"]
    (tags,) = [line for line in lines if line.startswith("- Tags: ")]
    assert tags.endswith(
        "; `@approval` calls wait for the user's OK (`@approvalOnce`: the first per session), "
        "within timeoutMs: batch them in one Promise.all."
    )
    # denied: tasks.add per tool (hidden although out/ has it), calendar's tools by its default
    assert "function tasks_add(" not in description and "function tasks_list(" in description
    assert "function create_event(" not in description and "function list_events(" in description
    assert "`calendar` (1 tool), `notes` (12 tools)" in description

    result = response["result"]
    batch = "; batch such calls in one Promise.all */"
    assert result["del"][0] == "ask"
    assert (
        "@destructive @idempotent @closedWorld @approval the user is asked before each call" + batch
        in result["del"][1]
    )
    assert result["once"][0] == "ask-once"
    assert (
        "@approvalOnce the user is asked before the first call per session" + batch
        in result["once"][1]
    )
    assert result["found"] == ["delete_note", "ask", result["del"][1]]
    assert result["create"][0] == "deny" and "@denied calls are refused */" in result["create"][1]
    assert result["refused"] == "APPROVAL_DENIED" and user.asked == []  # a deny is never asked
    assert result["read"] is None
    assert "tasks.add" not in result["names"] and "tasks.list" in result["names"]
    assert sorted(result["full"]) == ["delete_note:ask", "update_note:ask-once"]
    assert result["described"] is False  # §4.3: the "description" level stays as the spec has it


def test_approve_all_is_served_and_registered(project: Path) -> None:
    probe = (
        "import { getTool } from '@codemode/discovery';\nconst t = await getTool('notes', 'delete_note');\n"
        "globalThis.__codemode_result__ = [t.approval ?? null, t.declaration.includes('@approval')];"
    )

    async def body(client: Any) -> Any:
        return (await client.list_tools()).tools[0].description, (await run(client, probe))[
            "result"
        ]

    description, shown = served(project, body, "--approve-all")
    assert "@approval" not in description  # nobody is asked: nothing waits
    assert shown == [None, False]  # nor does discovery say so
    assert (
        "function tasks_add(" not in description and "function create_event(" not in description
    )  # deny holds
    argv = serve_command(
        project / ".mcp.json", None, "codemode.run", 16000, HostOptions(approve_all=True)
    )
    assert argv[-1] == "--approve-all"
    assert "--approve-all" not in serve_command(project / ".mcp.json", None, "codemode.run", 16000)
