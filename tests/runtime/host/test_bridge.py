"""runtime/host/bridge.py: every host reply a script's tool call can get, with a fake connector and
fake sessions (no server process, no QuickJS)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import pytest

from codemode_gen.client.session_errors import (
    AuthError,
    CallAuthError,
    CallError,
    CallTimeout,
    ConnectError,
)
from codemode_gen.config import ServerConfig
from codemode_gen.generator.unwrap import Box
from codemode_gen.runtime.host.bridge import Bridge
from codemode_gen.runtime.host.catalog import Catalog, LiveServer, ServerView, ToolView
from codemode_gen.runtime.host.tooltrace import MAX_SUMMARY_TOOLS, OTHER_TOOLS
from codemode_gen.runtime.limits import (
    MAX_JSON_DEPTH,
    MAX_TRACE_ENTRIES,
    MAX_TRACE_ERROR_CHARS,
    SandboxLimitExceeded,
)
from codemode_gen.runtime.sandbox.protocol import HostReply

NOTE_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


class FakeSession:
    """Answers tools/call from a function of (tool name, arguments); records the calls."""

    def __init__(self, answer: Callable[[str, Any], Any]) -> None:
        self.answer = answer
        self.closed = False
        self.calls: list[tuple[str, Any, float | None]] = []

    async def call_tool(
        self, name: str, arguments: Any, *, timeout: float | None = None
    ) -> dict[str, Any]:
        self.calls.append((name, arguments, timeout))
        result = self.answer(name, arguments)
        if isinstance(result, BaseException):
            raise result
        if asyncio.iscoroutine(result):
            return await result
        return result


class FakeConnector:
    """CodeMode's part the bridge uses: sessions and live tool lists, by config id."""

    def __init__(
        self, session: FakeSession, live: LiveServer | BaseException | None = None
    ) -> None:
        self.session_obj = session
        self.live_answer = live
        self.sessions_asked = 0
        self.lives_asked = 0

    async def session(self, config_id: str) -> FakeSession:
        self.sessions_asked += 1
        return self.session_obj

    async def live(self, config_id: str) -> LiveServer:
        self.lives_asked += 1
        if isinstance(self.live_answer, BaseException):
            raise self.live_answer
        assert self.live_answer is not None, "the test's view is live: the bridge must not re-list"
        return self.live_answer


def ok(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ignored"}], "structuredContent": value}


def make(
    answer: Callable[[str, Any], Any] = lambda name, args: ok({"id": 1}),
    *,
    live: bool = True,
    live_answer: LiveServer | BaseException | None = None,
    max_tool_calls: int | None = None,
    config: ServerConfig | None = None,
    tools: dict[str, ToolView] | None = None,
    redact_patterns: tuple[str, ...] = (),
) -> tuple[Bridge, FakeConnector, FakeSession]:
    config = config or ServerConfig(
        id="notes", transport="stdio", command="x", blocklist=("secret",), call_timeout=7.0
    )
    view = ServerView(
        server_id="notes",
        config_id="notes",
        server_name="notes",
        live=live,
        tools=tools
        if tools is not None
        else {"get_note": ToolView("get_note", "get_note", input_schema=NOTE_SCHEMA)},
    )
    catalog = Catalog(servers={"notes": view, "archive": ServerView("archive", None, "archive")})
    session = FakeSession(answer)
    connector = FakeConnector(session, live_answer)
    ticks = iter(range(0, 10_000_000, 5))
    bridge = Bridge(
        catalog,
        connector,
        {"notes": config},
        max_tool_calls=max_tool_calls,
        clock=lambda: next(ticks) / 1000,
        redact_patterns=redact_patterns,
    )
    return bridge, connector, session


def call(
    bridge: Bridge, tool: str = "get_note", server: str = "notes", **request: Any
) -> HostReply:
    body = {"op": "call", "serverId": server, "toolName": tool, **request}
    if "input" not in request and "inputRejected" not in request:
        body["input"] = {"id": 1}
    return asyncio.run(bridge.host_call(body))


def error(reply: HostReply) -> dict[str, Any]:
    assert reply["ok"] is False, reply
    assert "_summary" not in reply["error"]
    return reply["error"]


def test_a_call_is_validated_dispatched_unwrapped_and_traced() -> None:
    bridge, connector, session = make()
    assert call(bridge) == {"ok": True, "value": {"id": 1}}
    assert call(bridge, input={"id": 2}) == {"ok": True, "value": {"id": 1}}
    assert session.calls == [("get_note", {"id": 1}, 7.0), ("get_note", {"id": 2}, 7.0)]
    assert connector.sessions_asked == 1  # the run keeps the session it obtained
    assert bridge.trace[0] == {
        "serverId": "notes",
        "toolName": "get_note",
        "durationMs": 5,
        "ok": True,
    }
    assert bridge.diagnostics() == []


def test_text_results_are_unwrapped_per_s5_3_2() -> None:
    bridge, _, _ = make(lambda name, args: {"content": [{"type": "text", "text": "hello"}]})
    assert call(bridge) == {"ok": True, "value": "hello"}


def test_unsupported_request() -> None:
    bridge, _, session = make()
    reply = asyncio.run(bridge.host_call({"op": "eval"}))
    assert (
        error(reply)["errorClass"] == "ToolCallError"
        and "unsupported host request" in error(reply)["message"]
    )
    assert session.calls == [] and bridge.trace == []


def test_unknown_server_suggests_a_close_name() -> None:
    bridge, _, _ = make()
    err = error(call(bridge, server="note"))
    assert err["errorClass"] == "ServerNotFoundError" and "did you mean 'notes'?" in err["hint"]
    assert bridge.trace[-1]["error"] == "ServerNotFoundError: no such server"
    err = error(call(bridge, server="archive"))  # in out/ but not configured
    assert "not configured in the MCP config" in err["message"]


def test_unknown_and_blocked_tools() -> None:
    bridge, _, session = make()
    err = error(call(bridge, tool="get_notes"))
    assert err["errorClass"] == "ToolNotFoundError" and err["hint"] == "did you mean 'get_note'?"
    err = error(call(bridge, tool="secret"))
    assert (
        err["errorClass"] == "ToolNotFoundError"
        and "blocked by the host's configuration" in err["message"]
    )
    assert session.calls == []


def test_first_call_of_a_server_takes_the_live_tool_list_once() -> None:
    listed = LiveServer(
        server_json={},
        tools=({"name": "get_note", "inputSchema": NOTE_SCHEMA}, {"name": "new_tool"}),
    )
    tools = {
        "gone": ToolView("gone", "gone"),
        "get_note": ToolView("get_note", "get_note", input_schema=NOTE_SCHEMA),
    }
    bridge, connector, _ = make(live=False, live_answer=listed, tools=tools)
    assert (
        error(call(bridge, tool="gone"))["errorClass"] == "ToolNotFoundError"
    )  # gone since generate
    assert call(bridge)["ok"] and call(bridge, tool="new_tool", input={})["ok"]
    assert connector.lives_asked == 1 and bridge.catalog.servers["notes"].live


@pytest.mark.parametrize(
    ("failure", "error_class", "text"),
    [
        (
            ConnectError("notes", "command not found: x"),
            "ServerNotFoundError",
            "not connected: command not found: x",
        ),
        (
            AuthError("notes", "HTTP 401", status=401),
            "AuthenticationError",
            "rejected the connection: HTTP 401",
        ),
        (CallError(-32603, "boom"), "ServerNotFoundError", "tools/list failed: boom"),
    ],
)
def test_a_server_that_cannot_connect_fails_every_call_the_same_way(
    failure: BaseException, error_class: str, text: str
) -> None:
    bridge, connector, session = make(live=False, live_answer=failure)
    for _ in range(2):
        err = error(call(bridge))
        assert (
            err["errorClass"] == error_class
            and text in err["message"]
            and err["serverId"] == "notes"
        )
    assert connector.lives_asked == 1 and session.calls == []


def test_invalid_input_is_a_schema_validation_error_and_nothing_is_sent() -> None:
    bridge, _, session = make()
    err = error(call(bridge, input={"id": "one"}))
    assert (
        err["errorClass"] == "SchemaValidationError"
        and err["path"] == "/id"
        and err["serverId"] == "notes"
    )
    assert bridge.trace[-1]["error"].startswith("SchemaValidationError at /id")
    err = error(call(bridge, inputRejected={"reason": "depth"}))
    assert err["errorClass"] == "SchemaValidationError"
    assert [d["code"] for d in bridge.diagnostics()] == ["BRIDGE_LIMIT"]
    assert session.calls == []


@pytest.mark.parametrize(
    ("failure", "error_class", "fields", "summary"),
    [
        (
            CallTimeout(None, "timed out"),
            "ToolCallError",
            {"code": "timeout"},
            "ToolCallError: timeout after 7 s",
        ),
        (
            CallError(-32602, "bad params"),
            "ToolCallError",
            {"code": -32602},
            "ToolCallError: JSON-RPC error -32602: bad params",
        ),
        (
            CallAuthError(None, "token revoked", status=403),
            "AuthenticationError",
            {"code": 403},
            "AuthenticationError (403): token revoked",
        ),
        (
            ConnectError("notes", "connection refused"),
            "ToolCallError",
            {},
            "ToolCallError: connection failed: connection refused",
        ),
    ],
)
def test_session_failures_map_to_error_classes(
    failure: BaseException, error_class: str, fields: dict[str, Any], summary: str
) -> None:
    bridge, _, _ = make(lambda name, args: failure)
    err = error(call(bridge))
    assert err["errorClass"] == error_class and err["toolName"] == "get_note"
    assert {k: err.get(k) for k in fields} == fields
    assert bridge.trace[-1]["error"] == summary


def test_is_error_result_carries_the_server_content() -> None:
    content = [{"type": "text", "text": "note 1 not found"}]
    bridge, _, _ = make(lambda name, args: {"content": content, "isError": True})
    err = error(call(bridge))
    assert err["errorClass"] == "ToolCallError" and "note 1 not found" in err["message"]
    assert err["content"] == content and "code" not in err
    assert bridge.trace[-1]["error"] == "ToolCallError: note 1 not found"


def test_s3_3_2_a_failed_entry_says_the_servers_message_redacted_on_one_line_and_cut() -> None:
    """The trace's `error` summary carries what the server said (isError text, JSON-RPC
    message), with the server's secrets and codemode.toml's `redact` patterns replaced, white
    space folded, cut to MAX_TRACE_ERROR_CHARS with a marker; the script's error keeps it all."""
    secret = "s3cr3t-token-value"
    config = ServerConfig(id="notes", transport="stdio", command="x", env={"API_KEY": secret})
    text = f"upstream said:\n  bad key {secret} for account acct-12345\n" + "detail " * 200
    bridge, _, _ = make(
        lambda name, args: {"content": [{"type": "text", "text": text}], "isError": True},
        config=config,
        redact_patterns=("acct-[0-9]+",),
    )
    err = error(call(bridge))
    assert secret in err["message"]  # the script sees the server's own answer
    summary = bridge.trace[-1]["error"]
    assert summary.startswith(
        "ToolCallError: upstream said: bad key <redacted:API_KEY> for account <redacted:pattern> detail"
    )
    assert secret not in summary and "acct-12345" not in summary and "\n" not in summary
    head, marker = summary.split("…[+")
    assert len(head) == MAX_TRACE_ERROR_CHARS and marker.endswith(" chars]")
    bridge, _, _ = make(
        lambda name, args: CallError(-32000, f"no such account {secret}"), config=config
    )
    error(call(bridge))
    assert (
        bridge.trace[-1]["error"]
        == "ToolCallError: JSON-RPC error -32000: no such account <redacted:API_KEY>"
    )


def test_counts_tally_every_call_per_tool_and_the_failed_ones() -> None:
    """`counts` (the toolSummary of a response listing only failures) counts calls the trace no
    longer lists, and at most MAX_SUMMARY_TOOLS tool names (script-chosen names included)."""
    bridge, _, _ = make()
    for _ in range(3):
        call(bridge)
    error(call(bridge, input={"id": "x"}))
    for n in range(MAX_SUMMARY_TOOLS + 5):
        error(call(bridge, tool=f"nope{n}"))
    counts = bridge.counts
    assert counts.calls["notes.get_note"] == 4 and counts.failed == 1 + MAX_SUMMARY_TOOLS + 5
    assert len(counts.calls) == MAX_SUMMARY_TOOLS + 1 and counts.calls[OTHER_TOOLS] == 6


def test_malformed_and_too_deep_results_are_refused() -> None:
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 5):
        deep = [deep]
    bridge, _, _ = make(lambda name, args: ok({"deep": deep}))
    assert "nested deeper" in error(call(bridge))["message"]
    assert [d["code"] for d in bridge.diagnostics()] == ["BRIDGE_LIMIT"]
    bridge, _, _ = make(lambda name, args: ["not", "a", "result"])
    assert "malformed result" in error(call(bridge))["message"]


def test_s11_a_result_is_refused_at_the_same_depth_whether_small_or_large() -> None:
    """A small result is measured on the event loop in one walk (payload.depth_if_small), a
    large one in a thread by its own depth check: both refuse exactly past MAX_JSON_DEPTH."""
    from codemode_gen import payload

    def result(depth: int, pad: int) -> dict[str, Any]:
        deep: Any = 1
        for _ in range(depth):
            deep = [deep]
        return ok({"deep": deep, "pad": list(range(pad))})

    for pad in (0, payload.INLINE_NODES):
        answers = [result(d, pad) for d in range(MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH + 3)]
        answers.append(result(3, pad))
        bridge, _, _ = make(functools.partial(lambda queue, name, args: queue.pop(0), answers))
        refused = ["error" in call(bridge) for _ in range(6)]
        # {"structuredContent": {"deep": <d lists>}}: the value nests d + 1 deep, the result
        # d + 2, and the result object itself is the level MAX_JSON_DEPTH does not count
        assert refused == [False] * 3 + [True] * 3, pad
        # a small one's reply is known small: not walked again to decide where it is encoded
        assert type(call(bridge)) is (payload.Small if pad == 0 else dict)


def test_max_tool_calls_ends_the_run() -> None:
    bridge, _, session = make(max_tool_calls=1)
    assert call(bridge)["ok"]
    with pytest.raises(SandboxLimitExceeded) as info:
        call(bridge)
    assert info.value.limit == "maxToolCalls" and len(session.calls) == 1
    assert bridge.trace[-1]["error"] == "SandboxLimitError: maxToolCalls"


def test_unboxing_returns_the_field_and_says_so_when_it_is_missing() -> None:
    box = Box("result", "x-dedalus-box")
    tools = {
        "count": ToolView("count", "count", input_schema={"type": "object"}, box=box, unboxed=True)
    }
    answers = iter([ok({"result": 3}), ok({"other": 1}), ok({"other": 2})])
    bridge, _, _ = make(lambda name, args: next(answers), tools=tools)
    assert call(bridge, tool="count", input={}) == {"ok": True, "value": 3}
    assert call(bridge, tool="count", input={}) == {"ok": True, "value": {"other": 1}}
    call(bridge, tool="count", input={})
    assert [d["code"] for d in bridge.diagnostics()] == ["UNBOX_MISMATCH"]  # once per tool


def test_trace_is_bounded_and_says_so() -> None:
    bridge, _, _ = make()

    async def many() -> None:
        for _ in range(MAX_TRACE_ENTRIES + 3):
            await bridge.host_call(
                {"op": "call", "serverId": "notes", "toolName": "get_note", "input": {"id": 1}}
            )

    asyncio.run(many())
    assert len(bridge.trace) == MAX_TRACE_ENTRIES and bridge.trace_dropped == 3
    assert [d["code"] for d in bridge.diagnostics()] == ["TOOL_TRACE_TRUNCATED"]


def test_aclose_cancels_calls_in_flight_and_refuses_later_ones() -> None:
    async def never() -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    bridge, _, session = make(lambda name, args: never())

    async def scenario() -> HostReply:
        task = asyncio.ensure_future(
            bridge.host_call(
                {"op": "call", "serverId": "notes", "toolName": "get_note", "input": {"id": 1}}
            )
        )
        while not session.calls:
            await asyncio.sleep(0)
        await bridge.aclose()
        assert task.cancelled()
        return await bridge.host_call(
            {"op": "call", "serverId": "notes", "toolName": "get_note", "input": {"id": 1}}
        )

    late = asyncio.run(scenario())
    assert "the run has ended" in error(late)["message"]
    assert bridge.trace == [
        {
            "serverId": "notes",
            "toolName": "get_note",
            "durationMs": 5,
            "ok": False,
            "error": "ToolCallError: cancelled when the run ended",
        }
    ]
    assert len(session.calls) == 1
