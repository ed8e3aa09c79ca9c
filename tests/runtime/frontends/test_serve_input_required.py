"""Approvals on MCP 2026-07-28 connections: `input_required` results (SEP-2322), and runs that
resume on any instance (runtime/frontends/input_required.py, runtime/host/resume.py).

End to end: a real `codemode-gen serve` (stdio, `--http`, two `--http` instances behind nginx),
the MCP SDK's client in its default mode (it negotiates 2026-07-28) with an elicitation handler,
and tests/servers/ledger_server.py, which writes down every call it receives: what "sent once"
and "nothing sent" mean is read from the upstream server's own log. The project's codemode.toml
allows `record` (destructive, so it must never be sent twice either); `transfer` and `close`
are destructive and asked by the default policy.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import pytest

from tests.conftest import PROMPT_S, free_port
from tests.runtime.frontends.test_serve_http import TOKEN, HttpServe, start_serve
from tests.runtime_support import PYTHON, RUN_TIMEOUT, against_serve, child_env, script, start_http

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

T = TypeVar("T")
# "run": accept with the form's box ticked (serve.FOR_RUN_FIELD: the tool's further calls in this run)
Action = Literal["accept", "decline", "cancel", "run"]
TOOL = "codemode.run"
SECRET = "9c1f6f1e3a0b4d7e8f2a5c6b7d8e9f00aa11bb22cc33dd44"  # >= 32 characters
SETTINGS = '[servers.ledger.approval]\nrecord = "allow"\n'

LEDGER = 'import * as ledger from "@codemode/servers/ledger";\n'
# Sent without asking (allowed), then asked; the script reports what it got.
RECORD_THEN_TRANSFER = (
    LEDGER
    + """
const noted = await ledger.record({ text: "before the transfer" });
let moved;
try { moved = await ledger.transfer({ to: "bob", amount: 5 }); }
catch (e) { moved = { code: e.code, message: e.message, hint: e.hint }; }
globalThis.__codemode_result__ = { noted, moved };
"""
)
TWO_ASKS = (
    LEDGER
    + """
const outcomes = await Promise.allSettled([ledger.transfer({ to: "ann", amount: 1 }), ledger.close({ account: "old" })]);
globalThis.__codemode_result__ = outcomes.map((o) => o.status === "fulfilled" ? "sent" : o.reason.code);
"""
)


class Ledger:
    """The calls log of the ledger server(s) of one project: what they received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mark = 0

    def calls(self) -> list[dict[str, Any]]:
        """Calls received since the last `since()`, in order."""
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        return [json.loads(line) for line in lines[self.mark :]]

    def tools(self) -> list[str]:
        return [call["tool"] for call in self.calls()]

    def since(self) -> None:
        self.mark = len(self.path.read_text().splitlines()) if self.path.exists() else 0


def make_project(base: Path, *, url: str | None = None) -> tuple[Path, Ledger]:
    """A project with the ledger (over stdio, or the HTTP server at `url`) and its calls log."""
    base.mkdir(parents=True, exist_ok=True)
    log = base / "ledger-calls.log"
    entry: dict[str, Any] = (
        {"type": "http", "url": url}
        if url is not None
        else {"command": PYTHON, "args": [script("ledger_server"), "--calls-log", str(log)]}
    )
    (base / ".mcp.json").write_text(json.dumps({"mcpServers": {"ledger": entry}}))
    (base / "codemode.toml").write_text(SETTINGS)
    return base, Ledger(log)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Ledger]:
    return make_project(tmp_path / "project")


class User:
    """The client's user: answers each elicitation with `actions` in turn (then "accept")."""

    def __init__(self, *actions: Action) -> None:
        self.actions = list(actions)
        self.asked: list[Any] = []

    async def __call__(self, context: Any, params: Any) -> Any:

        self.asked.append(params)
        return answer(self.actions.pop(0) if self.actions else "accept")


def answer(action: Action) -> Any:
    """The elicitation result of `action` (the form serve.approval_form asks)."""
    import mcp_types as types

    from codemode_gen.runtime.frontends.serve_approval import FOR_RUN_FIELD

    if action == "run":
        return types.ElicitResult(action="accept", content={FOR_RUN_FIELD: True})
    return types.ElicitResult(action=action)


def served(
    project: Path,
    body: Callable[[Any], Awaitable[T]],
    *args: str,
    user: User | None = None,
    env: dict[str, str] | None = None,
) -> T:
    """`body(client)` against `serve` over stdio, the client negotiating MCP 2026-07-28."""
    return against_serve(
        project, body, "--trace", "full", *args, elicitation_callback=user, env=env, mode="auto"
    )


def arguments(code: str, **limits: int) -> dict[str, Any]:
    return {"code": code, **({"limits": limits} if limits else {})}


async def run(client: Any, code: str, **limits: int) -> dict[str, Any]:
    """A codemode.run through the SDK's own input_required driver (it asks `User` and retries)."""
    assert client.protocol_version == "2026-07-28"
    result = await client.call_tool(TOOL, arguments(code, **limits))
    response: dict[str, Any] = result.structured_content
    return response


async def first_round(client: Any, code: str, **limits: int) -> Any:
    """The first answer to a codemode.run, whatever it is (no driver: the test is the client)."""
    await client.list_tools()
    return await client.session.call_tool(
        TOOL, arguments(code, **limits), allow_input_required=True
    )


async def retry(
    client: Any, code: str, state: str | None, answers: dict[str, Action], **limits: int
) -> Any:
    responses = {key: answer(action) for key, action in answers.items()}
    return await client.session.call_tool(
        TOOL,
        arguments(code, **limits),
        input_responses=responses,
        request_state=state,
        allow_input_required=True,
    )


def errors(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in response["diagnostics"] if d["severity"] == "error"]


def trace(response: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(entry["toolName"], entry.get("approval")) for entry in response["toolTrace"]]


# ---------------------------------------------------------------------------------- stdio


def test_an_accepted_call_is_sent_once_and_the_run_goes_on(project: tuple[Path, Ledger]) -> None:
    base, ledger = project
    user = User("accept")

    async def body(client: Any) -> Any:
        return await run(client, RECORD_THEN_TRANSFER)

    response = served(base, body, user=user)
    assert errors(response) == []
    assert response["result"]["moved"] == {"to": "bob", "balance": 95}
    assert trace(response) == [("record", "allowed"), ("transfer", "approved")]
    # The retry ran the script again: `record` came from the first round's journal, not the server.
    assert ledger.tools() == ["record", "transfer"]
    (asked,) = user.asked
    assert 'tool "transfer" of server "ledger" (destructive)' in asked.message
    assert '\n│ {"amount": 5, "to": "bob"}' in asked.message and "Accept" in asked.message
    # The form of the 2025-11-25 elicitation path (serve.approval_form): an "ask" tool's has
    # one box, to allow the tool for the rest of the run.
    from codemode_gen.runtime.frontends.serve_approval import (
        APPROVAL_ACTIONS_FOR_RUN,
        FOR_RUN_FIELD,
    )

    assert APPROVAL_ACTIONS_FOR_RUN in asked.message
    (box,) = asked.requested_schema["properties"].items()
    assert box[0] == FOR_RUN_FIELD and box[1]["type"] == "boolean" and box[1]["default"] is False
    assert box[1]["title"] == 'Allow every call of "transfer" for the rest of this run'


def test_s11_the_input_required_form_shows_redacted_arguments(tmp_path: Path) -> None:
    """A secret the ledger's entry takes from the environment, passed by the script as an argument:
    the question the client shows its user carries the placeholder, never the value (§11), and the
    sealed `requestState` does not carry it in the clear either."""
    key = "ledger-key-5f0c2a9e77"
    base, ledger = make_project(tmp_path / "project")
    config = json.loads((base / ".mcp.json").read_text())
    config["mcpServers"]["ledger"]["env"] = {"LEDGER_KEY": "${LEDGER_KEY}"}
    (base / ".mcp.json").write_text(json.dumps(config))
    user = User("decline")
    code = (
        LEDGER
        + f"""
try {{ await ledger.transfer({{ to: {json.dumps(key)}, amount: 1 }}); }}
catch (e) {{ globalThis.__codemode_result__ = e.code; }}
"""
    )

    async def body(client: Any) -> Any:
        first = await first_round(client, code)
        return first, await run(client, code)

    first, response = served(base, body, user=user, env={"LEDGER_KEY": key})
    assert response["result"] == "APPROVAL_DENIED"
    (asked,) = user.asked
    assert key not in asked.message and "<redacted:LEDGER_KEY>" in asked.message, asked.message
    assert key not in json.dumps(first, default=str)
    assert ledger.tools() == []


FOR_RUN_LOOP = (
    LEDGER
    + """
const moved = [];
for (let i = 0; i < 20; i++) moved.push((await ledger.transfer({ to: "ivy", amount: 1 })).balance);
const closed = await ledger.close({ account: "loop" });
for (let i = 0; i < 20; i++) moved.push((await ledger.transfer({ to: "jo", amount: 1 })).balance);
globalThis.__codemode_result__ = { moved, closed };
"""
)


def test_accept_for_the_run_asks_once_in_a_loop_of_20_and_holds_across_rounds(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project
    user = User("run", "accept")

    async def body(client: Any) -> Any:
        return await run(client, FOR_RUN_LOOP)

    response = served(base, body, user=user)
    assert errors(response) == [], response["diagnostics"]
    assert response["result"]["moved"] == list(range(99, 59, -1)) and response["result"][
        "closed"
    ] == {"closed": "loop"}
    # One question for the 40 transfers, one for close: the second round's run (the script
    # again from its start, on a new bridge) knew `transfer` was approved for the run from
    # the sealed state, so the 20 transfers after `close` did not make a third round.
    assert ["transfer" in m.message for m in user.asked] == [True, False]
    assert trace(response) == [
        ("transfer", "approved"),
        *[("transfer", "approved-for-run")] * 19,
        ("close", "approved"),
        *[("transfer", "approved-for-run")] * 20,
    ]
    assert ledger.tools() == ["transfer"] * 20 + ["close"] + ["transfer"] * 20  # each once


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_call_is_never_sent(
    project: tuple[Path, Ledger], action: Action
) -> None:
    base, ledger = project
    user = User(action)

    async def body(client: Any) -> Any:
        return await run(client, RECORD_THEN_TRANSFER)

    response = served(base, body, user=user)
    moved = response["result"]["moved"]
    assert moved["code"] == "APPROVAL_DENIED" and "the user declined it" in moved["message"]
    assert '[servers.ledger.approval] transfer = "allow"' in moved["hint"]
    assert trace(response) == [("record", "allowed"), ("transfer", "denied")]
    assert ledger.tools() == ["record"] and len(user.asked) == 1


def test_asks_pending_in_one_promise_all_are_asked_in_one_round(
    project: tuple[Path, Ledger],
) -> None:
    import mcp_types as types

    base, ledger = project

    async def body(client: Any) -> Any:
        first = await first_round(client, TWO_ASKS)
        assert isinstance(first, types.InputRequiredResult)
        asks = {
            key: getattr(request.params, "message", None)
            for key, request in (first.input_requests or {}).items()
        }
        sent_before = ledger.tools()
        answers: dict[str, Action] = {
            key: ("accept" if "transfer" in str(message) else "decline")
            for key, message in asks.items()
        }
        final = await retry(client, TWO_ASKS, first.request_state, answers)
        return asks, sent_before, final

    asks, sent_before, final = served(base, body, user=User())
    assert len(asks) == 2 and sent_before == []  # both asked at once, nothing sent meanwhile
    assert sorted('"transfer"' in str(m) for m in asks.values()) == [False, True]
    assert final.structured_content["result"] == ["sent", "APPROVAL_DENIED"]
    assert ledger.tools() == ["transfer"]


def test_a_call_in_flight_when_the_run_asks_is_sent_once(project: tuple[Path, Ledger]) -> None:
    base, ledger = project
    code = (
        LEDGER
        + """
const [waited, moved] = await Promise.all([ledger.wait({ ms: 300 }), ledger.transfer({ to: "dan", amount: 2 })]);
globalThis.__codemode_result__ = { waited, moved };
"""
    )

    async def body(client: Any) -> Any:
        return await run(client, code)

    response = served(base, body, user=User("accept"))
    assert response["result"] == {"waited": {"waited": 300}, "moved": {"to": "dan", "balance": 98}}
    assert sorted(ledger.tools()) == [
        "transfer",
        "wait",
    ]  # the round waited for `wait`: not sent again


DETERMINISM = (
    LEDGER
    + """
const order = [];
const t0 = Date.now();
const day = new Date().toISOString();
const r = [Math.random(), Math.random()];
setTimeout(() => order.push("timer 20"), 20);
setTimeout(() => order.push("timer 0"), 0);
const waited = ledger.wait({ ms: 10 }).then(() => order.push("wait"));
await new Promise((resolve) => setTimeout(resolve, 60));
await waited;
const t1 = Date.now();
const before = { t0, day, r, order: [...order], t1, later: new Date(t1 + 1).getTime() - 1 };
await ledger.record({ text: JSON.stringify(before) });
const moved = await ledger.transfer({ to: "eve", amount: 3 });
setTimeout(() => order.push("after"), 5);
await new Promise((resolve) => setTimeout(resolve, 20));
globalThis.__codemode_result__ = { before, moved, order, t2: Date.now(), r2: Math.random() };
"""
)


def test_date_random_and_timers_replay_identically_around_an_ask(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project

    async def body(client: Any) -> Any:
        return await run(client, DETERMINISM)

    response = served(base, body, user=User("accept"))
    assert errors(response) == [], response["diagnostics"]
    result = response["result"]
    calls = ledger.calls()
    assert [c["tool"] for c in calls] == ["wait", "record", "transfer"]  # each once
    # What the first round sent upstream is what the resumed round computed again.
    assert json.loads(calls[1]["arguments"]["text"]) == result["before"]
    before = result["before"]
    assert before["t0"] <= before["t1"] == before["later"] <= result["t2"]
    assert abs(before["t0"] / 1000 - time.time()) < 3600  # Date is the real time, not a frozen one
    assert result["r2"] not in before["r"] and all(0 <= x < 1 for x in before["r"])
    assert sorted(before["order"]) == ["timer 0", "timer 20", "wait"]
    assert result["order"] == [*before["order"], "after"]


def test_a_client_that_never_retries_gets_nothing_sent_and_a_late_retry_the_timeout(
    project: tuple[Path, Ledger],
) -> None:
    import mcp_types as types

    base, ledger = project

    async def body(client: Any) -> Any:
        first = await first_round(client, RECORD_THEN_TRANSFER, timeoutMs=3000)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests or {}
        await anyio.sleep(3.5)  # the run's timeoutMs passes with the question unanswered
        sent = ledger.tools()
        late = await retry(
            client, RECORD_THEN_TRANSFER, first.request_state, {key: "accept"}, timeoutMs=3000
        )
        return sent, late.structured_content

    sent, late = served(base, body, user=User())
    assert sent == ["record"]  # the first round's allowed call only
    (timeout,) = errors(late)
    assert timeout["code"] == "SANDBOX_LIMIT" and "timeoutMs" in timeout["message"]
    assert "waiting for the user's answer" in timeout["message"]
    assert trace(late) == [("record", "allowed"), ("transfer", "denied")]
    assert ledger.tools() == ["record"]  # the late accept sent nothing


def test_a_tampered_request_state_is_rejected_and_nothing_is_sent(
    project: tuple[Path, Ledger],
) -> None:
    import mcp_types as types

    base, ledger = project

    async def body(client: Any) -> Any:
        first = await first_round(client, RECORD_THEN_TRANSFER)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests or {}
        state = first.request_state
        assert state is not None
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        bad = await retry(client, RECORD_THEN_TRANSFER, tampered, {key: "accept"})
        other = await retry(
            client, LEDGER + "globalThis.__codemode_result__ = 1;", state, {key: "accept"}
        )
        return bad.structured_content, other.structured_content

    bad, other = served(base, body, user=User())
    (rejected,) = errors(bad)
    assert rejected["code"] == "APPROVAL_STATE_REJECTED" and "altered" in rejected["message"]
    assert bad["result"] is None and bad["toolTrace"] == []
    (wrong_call,) = errors(other)
    assert (
        wrong_call["code"] == "APPROVAL_STATE_REJECTED"
        and "another codemode.run call" in wrong_call["message"]
    )
    assert ledger.tools() == ["record"]


def test_a_client_without_elicitation_is_not_asked_and_told_why(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project

    async def body(client: Any) -> Any:
        return await run(client, RECORD_THEN_TRANSFER)

    response = against_serve(base, body, "--trace", "full", mode="auto")  # no elicitation handler
    moved = response["result"]["moved"]
    assert moved["code"] == "APPROVAL_DENIED" and "does not support elicitation" in moved["message"]
    assert "--approve-all" in moved["message"] + moved["hint"]
    assert ledger.tools() == ["record"]


def _first_state(base: Path, code: str, env: dict[str, str] | None) -> tuple[str, str]:
    """The requestState and the ask's key of `code`'s first round, from one serve process."""
    import mcp_types as types

    async def body(client: Any) -> Any:
        first = await first_round(client, code)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests or {}
        assert first.request_state is not None
        return first.request_state, key

    state, key = served(base, body, user=User(), env=env)
    return state, key


def test_a_retry_resumes_in_another_serve_process_with_the_same_secret(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project
    shared = {"CODEMODE_STATE_SECRET": SECRET}
    state, key = _first_state(base, RECORD_THEN_TRANSFER, shared)  # that process has exited

    async def resume(client: Any) -> Any:
        return (
            await retry(client, RECORD_THEN_TRANSFER, state, {key: "accept"})
        ).structured_content

    response = served(base, resume, user=User(), env=shared)
    assert errors(response) == [] and response["result"]["moved"]["to"] == "bob"
    assert ledger.tools() == ["record", "transfer"]  # record once (first process), transfer once

    ledger.since()
    state, key = _first_state(base, RECORD_THEN_TRANSFER, None)  # a random key of its own
    refused = served(base, resume, user=User(), env=shared)
    (rejected,) = errors(refused)
    assert rejected["code"] == "APPROVAL_STATE_REJECTED" and "another key" in rejected["message"]
    assert "--state-secret" in rejected["hint"] and "CODEMODE_STATE_SECRET" in rejected["hint"]
    assert ledger.tools() == ["record"]


def _reseal(state: str, change: Callable[[dict[str, Any]], None]) -> str:
    """`state` opened with SECRET, changed, sealed again (what only a holder of the key can do)."""
    from mcp.server.request_state import AESGCMRequestStateCodec

    codec = AESGCMRequestStateCodec([SECRET.encode()])
    value = json.loads(zlib.decompress(codec.unseal(state)))
    change(value)
    return str(codec.seal(zlib.compress(json.dumps(value).encode())))


def test_a_resumed_script_that_does_something_else_is_stopped_before_anything_is_sent(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project
    shared = {"CODEMODE_STATE_SECRET": SECRET}
    state, key = _first_state(base, RECORD_THEN_TRANSFER, shared)

    def other_call(value: dict[str, Any]) -> None:  # the first round's call #1 was another one
        value["calls"][0][1] = base64.urlsafe_b64encode(b"x" * 24).decode().rstrip("=")

    async def resume(client: Any) -> Any:
        changed = _reseal(state, other_call)
        return (
            await retry(client, RECORD_THEN_TRANSFER, changed, {key: "accept"})
        ).structured_content

    response = served(base, resume, user=User(), env=shared)
    (diverged,) = errors(response)
    assert diverged["code"] == "RESUME_DIVERGED" and "call #1" in diverged["message"]
    assert ledger.tools() == ["record"]  # the first round's; neither it nor the transfer again


def test_past_the_state_bound_the_ask_is_denied_naming_the_limit(
    project: tuple[Path, Ledger],
) -> None:
    from codemode_gen.runtime.host.resume import MAX_STATE_CHARS

    base, ledger = project
    user = User()
    code = (
        LEDGER
        + f"""
const big = await ledger.blob({{ n: {MAX_STATE_CHARS * 2} }});
let moved;
try {{ moved = await ledger.transfer({{ to: "fay", amount: 1 }}); }} catch (e) {{ moved = e.message; }}
globalThis.__codemode_result__ = {{ size: big.hex.length, moved }};
"""
    )

    async def body(client: Any) -> Any:
        return await run(client, code)

    response = served(base, body, user=user)
    assert response["result"]["size"] == MAX_STATE_CHARS * 2
    moved = response["result"]["moved"]
    assert "there is no way to ask" in moved and "MAX_STATE_CHARS" in moved and "KiB" in moved
    assert user.asked == [] and ledger.tools() == ["blob"]


# ---------------------------------------------------------------------------------- --http


async def http_client(url: str, body: Callable[[Any], Awaitable[T]], user: User) -> T:
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
            streamable_http_client(url, http_client=http),
            read_timeout_seconds=RUN_TIMEOUT,
            elicitation_callback=user,
            client_info=types.Implementation(name="test", version="0"),
        ) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        return await body(client)


def test_serve_http_asks_through_input_required(project: tuple[Path, Ledger]) -> None:
    base, ledger = project
    server = start_serve(base, "--trace", "full")
    user = User("accept", "decline")
    try:
        accepted, declined = anyio.run(http_client, server.url, lambda client: _both(client), user)
    finally:
        server.stop()
    assert accepted["result"]["moved"]["to"] == "bob" and trace(accepted) == [
        ("record", "allowed"),
        ("transfer", "approved"),
    ]
    assert declined["result"]["moved"]["code"] == "APPROVAL_DENIED"
    assert ledger.tools() == ["record", "transfer", "record"] and len(user.asked) == 2


async def _both(client: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return await run(client, RECORD_THEN_TRANSFER), await run(client, RECORD_THEN_TRANSFER)


def test_serve_http_accept_for_the_run_asks_once_in_a_loop_of_20(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project
    server = start_serve(base, "--trace", "full")
    user = User("run", "accept")

    async def body(client: Any) -> Any:
        return await run(client, FOR_RUN_LOOP)

    try:
        response = anyio.run(http_client, server.url, body, user)
    finally:
        server.stop()
    assert errors(response) == [], response["diagnostics"]
    assert ["transfer" in m.message for m in user.asked] == [
        True,
        False,
    ]  # transfer once, close once
    assert [a for _, a in trace(response)].count("approved-for-run") == 39
    assert ledger.tools() == ["transfer"] * 20 + ["close"] + ["transfer"] * 20


def test_serve_http_refuses_a_tampered_state_and_a_retry_after_the_timeout(
    project: tuple[Path, Ledger],
) -> None:
    import mcp_types as types

    base, ledger = project
    server = start_serve(base, "--trace", "full")

    async def body(client: Any) -> Any:
        first = await first_round(client, RECORD_THEN_TRANSFER, timeoutMs=3000)
        assert isinstance(first, types.InputRequiredResult)
        (key,) = first.input_requests or {}
        state = first.request_state
        assert state is not None
        middle = len(state) // 2
        tampered = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1 :]
        bad = await retry(client, RECORD_THEN_TRANSFER, tampered, {key: "accept"}, timeoutMs=3000)
        await anyio.sleep(3.5)  # the client never retries in time
        late = await retry(client, RECORD_THEN_TRANSFER, state, {key: "accept"}, timeoutMs=3000)
        return bad.structured_content, late.structured_content

    try:
        bad, late = anyio.run(http_client, server.url, body, User())
    finally:
        server.stop()
    (rejected,) = errors(bad)
    assert rejected["code"] == "APPROVAL_STATE_REJECTED" and "altered" in rejected["message"]
    (timeout,) = errors(late)
    assert (
        timeout["code"] == "SANDBOX_LIMIT" and "waiting for the user's answer" in timeout["message"]
    )
    assert ledger.tools() == ["record"]  # the transfer was never sent


def test_serve_http_an_ask_once_yes_holds_for_the_run_across_rounds_and_not_beyond(
    project: tuple[Path, Ledger],
) -> None:
    base, ledger = project
    (base / "codemode.toml").write_text(SETTINGS + 'close = "ask-once"\n')
    server = start_serve(base, "--trace", "full")
    user = User()
    code = (
        LEDGER
        + """
const first = await ledger.close({ account: "a" });
const moved = await ledger.transfer({ to: "kim", amount: 1 });
const second = await ledger.close({ account: "b" });
globalThis.__codemode_result__ = { first, moved, second };
"""
    )

    async def body(client: Any) -> Any:
        return await run(client, code), await run(
            client, LEDGER + 'await ledger.close({ account: "c" });'
        )

    try:
        response, again = anyio.run(http_client, server.url, body, user)
    finally:
        server.stop()
    assert errors(response) == [] and errors(again) == []
    # Asked: close (round 1), transfer (round 2, a new request: stateless HTTP has no
    # connection to remember the yes by, the run's sealed state does), then close in the next run.
    assert [("close" in m.message, "transfer" in m.message) for m in user.asked] == [
        (True, False),
        (False, True),
        (True, False),
    ]
    assert trace(response) == [
        ("close", "approved"),
        ("transfer", "approved"),
        ("close", "approved-for-run"),
    ]
    assert ledger.tools() == ["close", "transfer", "close", "close"]


# ------------------------------------------------------------------ two instances behind nginx


NGINX_CONF = """
worker_processes 1;
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  log_format upstreams '$request_method $upstream_addr $status $request_length $msec';
  access_log {dir}/access.log upstreams;
  upstream serve {{
    server {a};
    server {b};
  }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 8m;
    location / {{
      proxy_pass http://serve;
      proxy_http_version 1.1;
      proxy_set_header Host $host;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 180s;
    }}
  }}
}}
"""


def nginx_binary() -> str:
    """nginx, installed from the distribution's packages if it is not there (CI: .ci/run)."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
    )
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "nginx"],
            capture_output=True,
            timeout=600,
            check=False,
        )
        found = shutil.which("nginx") or (
            "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
        )
    if found is None:
        pytest.skip(
            "nginx is not installed and cannot be installed here (apt-get install nginx; .ci/run does)"
        )
    return found


@pytest.fixture
def balanced(tmp_path: Path) -> Iterator[tuple[str, Ledger, Path, list[HttpServe]]]:
    """Two serve --http instances with the same secret, sharing one ledger over HTTP, behind
    nginx's round robin; yields (nginx URL, ledger log, access log, instances)."""
    nginx = nginx_binary()
    log = tmp_path / "ledger-calls.log"
    upstream, base_url = start_http("ledger_server", "--calls-log", str(log))
    base, ledger = make_project(tmp_path / "project", url=f"{base_url}/mcp")
    ledger.path = log
    instances: list[HttpServe] = []
    proxy = None
    try:
        for _ in range(2):
            instances.append(
                start_serve(base, "--trace", "full", extra_env={"CODEMODE_STATE_SECRET": SECRET})
            )
        conf_dir = tmp_path / "nginx"
        conf_dir.mkdir()
        port = free_port()
        hosts = [server.url.removeprefix("http://").removesuffix("/mcp") for server in instances]
        conf = conf_dir / "nginx.conf"
        conf.write_text(NGINX_CONF.format(dir=conf_dir, a=hosts[0], b=hosts[1], port=port))
        proxy = subprocess.Popen(
            [nginx, "-c", str(conf), "-p", str(conf_dir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(conf_dir / "stderr.log").open("wb"),
        )
        deadline = time.monotonic() + PROMPT_S
        while True:
            try:
                import socket

                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proxy.poll() is not None:
                    raise AssertionError(
                        (conf_dir / "error.log").read_text()
                        if (conf_dir / "error.log").exists()
                        else "nginx did not start"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", ledger, conf_dir / "access.log", instances
    finally:
        if proxy is not None:
            proxy.send_signal(signal.SIGQUIT)
            try:
                proxy.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait()
        for server in instances:
            server.stop()
        upstream.kill()
        upstream.wait()


def test_behind_a_load_balancer_the_retry_resumes_on_the_other_instance(
    balanced: tuple[str, Ledger, Path, list[HttpServe]],
) -> None:
    import mcp_types as types

    url, ledger, access, instances = balanced
    code = (
        LEDGER
        + """
const before = await ledger.record({ text: "one" });
const [moved, closed] = await Promise.all([ledger.transfer({ to: "gus", amount: 7 }), ledger.close({ account: "x" })]);
const after = await ledger.record({ text: "two" });
const closedToo = await ledger.close({ account: "y" });
const again = await ledger.transfer({ to: "hal", amount: 1 });
globalThis.__codemode_result__ = { before, moved, closed, after, closedToo, again };
"""
    )

    def logged() -> list[str]:
        return access.read_text().splitlines() if access.exists() else []

    async def upstream_of(request: Awaitable[T]) -> tuple[T, str]:
        """The request's result and the instance nginx sent it to (its access log line, written
        once the response has ended: waited for)."""
        seen = len(logged())
        result = await request
        with anyio.fail_after(PROMPT_S):
            while len(logged()) <= seen:
                await anyio.sleep(0.02)
        return result, logged()[-1].split()[1]

    async def body(client: Any) -> Any:
        await client.list_tools()
        rounds = []
        result, where = await upstream_of(
            client.session.call_tool(TOOL, arguments(code), allow_input_required=True)
        )
        rounds.append(where)
        while isinstance(result, types.InputRequiredResult):
            # `transfer` allowed for the rest of the run: the instance that resumes the last
            # round (not the one that was told) must know it from the sealed state.
            answers: dict[str, Action] = {
                key: "run"
                if "transfer" in str(getattr(request.params, "message", ""))
                else "accept"
                for key, request in (result.input_requests or {}).items()
            }
            result, where = await upstream_of(retry(client, code, result.request_state, answers))
            rounds.append(where)
        return rounds, result.structured_content

    rounds, response = anyio.run(http_client, url, body, User())
    assert errors(response) == [], response["diagnostics"]
    assert response["result"]["again"]["to"] == "hal" and response["result"]["closed"] == {
        "closed": "x"
    }
    # Three requests (two rounds of asks: transfer and close, then close), round robin: each
    # retry reached the other instance.
    assert len(rounds) == 3 and rounds[0] != rounds[1] != rounds[2], access.read_text()
    assert set(rounds) == {
        server.url.removeprefix("http://").removesuffix("/mcp") for server in instances
    }
    calls = ledger.tools()  # each exactly once (the two asked together in either order)
    assert calls in (
        ["record", "transfer", "close", "record", "close", "transfer"],
        ["record", "close", "transfer", "record", "close", "transfer"],
    )
    assert [e["approval"] for e in response["toolTrace"]] == [
        "allowed",
        "approved",
        "approved",
        "allowed",
        "approved",
        "approved-for-run",
    ]


def test_serve_help_names_the_sealing_secret_and_a_short_one_is_refused(tmp_path: Path) -> None:
    shown = subprocess.run(
        [PYTHON, "-m", "codemode_gen", "serve", "--help"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=RUN_TIMEOUT,
    )
    assert "--state-secret" in shown.stdout and "CODEMODE_STATE_SECRET" in shown.stdout
    base, _ = make_project(tmp_path / "p")
    for extra_args, extra_env in (
        (["--state-secret", "short"], {}),
        ([], {"CODEMODE_STATE_SECRET": ""}),
    ):
        refused = subprocess.run(
            [
                PYTHON,
                "-m",
                "codemode_gen",
                "serve",
                "--config",
                str(base / ".mcp.json"),
                *extra_args,
            ],
            capture_output=True,
            text=True,
            env=child_env(**extra_env),
            stdin=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
        )
        assert refused.returncode != 0
        assert "32 characters" in refused.stderr and "openssl rand -hex 32" in refused.stderr
