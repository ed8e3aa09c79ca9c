"""MCP progress for a long run (runtime/host/progress.py): a codemode.run request that carries a
progressToken gets notifications/progress, on every finished tool call and as a heartbeat, so a
client that resets its timeout on progress keeps waiting; one without a token gets none.

End to end: a real `codemode-gen serve`, the SDK's client over stdio, real QuickJS and
tests/servers/slow.py. Then the Python API's `progress=` hook, the reporter itself (fake sinks,
short intervals) and the bridge's hook.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.config import ServerConfig
from codemode_gen.runtime.host import progress as progress_mod
from codemode_gen.runtime.host.bridge import Bridge
from codemode_gen.runtime.host.catalog import Catalog, ServerView, ToolView
from codemode_gen.runtime.host.progress import ProgressReporter
from codemode_gen.runtime.sandbox.protocol import HostReply
from tests.conftest import PROMPT_S
from tests.runtime.host.test_bridge import FakeConnector, FakeSession, ok
from tests.runtime_support import HostThread, against_serve, assert_ok, mcp_project, slow_host

pytestmark = pytest.mark.timeout(120)

Sent = tuple[float, float | None, str | None]

# Two calls, then ~2.4 s without any (a timer, not a tool): two call notifications, then at least
# two heartbeats (HEARTBEAT_S apart) before the run ends after ~3 s.
LONG_RUN = (
    "import { sleep } from '@codemode/servers/slow';\n"
    "await sleep({ms: 300});\nawait sleep({ms: 300});\n"
    "await new Promise((resolve) => setTimeout(resolve, 2400));\n"
    "globalThis.__codemode_result__ = 'done';"
)
# Long enough for one call notification and one heartbeat, had it asked for progress.
SHORT_RUN = (
    "import { sleep } from '@codemode/servers/slow';\n"
    "await sleep({ms: 100});\nawait new Promise((resolve) => setTimeout(resolve, 1300));\n"
    "globalThis.__codemode_result__ = 'done';"
)


def check_long_run(sent: list[Sent]) -> None:
    progress = [p for p, _, _ in sent]
    assert progress == sorted(progress) and len(set(progress)) == len(progress), (
        sent
    )  # strictly increasing
    assert all(total is None for _, total, _ in sent)
    messages = [m for _, _, m in sent]
    assert messages[:2] == [
        "1 tool call done; last slow.sleep",
        "2 tool calls done; last slow.sleep",
    ], messages
    heartbeats = [m for m in messages[2:] if m is not None and m.startswith("running ")]
    assert len(heartbeats) >= 2, messages
    assert all(m.endswith("; 2 tool calls done") for m in heartbeats), messages


# --------------------------------------------------------------------------- serve


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mcp_project(tmp_path_factory.mktemp("serve-progress"), slow=["slow", "stdio"])


@pytest.mark.slow
def test_a_run_with_a_progress_token_reports_progress_and_one_without_gets_none(
    project: Path,
) -> None:
    import mcp_types as types

    notified: list[Any] = []  # every notifications/progress the client received

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            notified.append(message.params)

    async def body(client: Any) -> tuple[Any, list[Sent], int, Any, int]:
        await client.call_tool(
            "codemode.run", {"code": "1", "requestedCapabilities": ["slow"]}
        )  # connect
        sent: list[Sent] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            sent.append((progress, total, message))

        # The SDK's client puts a progressToken in the request's _meta when given a callback.
        with_token = await client.call_tool(
            "codemode.run", {"code": LONG_RUN}, progress_callback=on_progress
        )
        await asyncio.sleep(0.1)  # callbacks are spawned tasks: let the last one land
        seen_with = len(notified)
        without = await client.call_tool("codemode.run", {"code": SHORT_RUN})
        await asyncio.sleep(0.1)
        return with_token, sent, seen_with, without, len(notified) - seen_with

    with_token, sent, seen_with, without, seen_without = against_serve(
        project, body, "--out", str(project / "out"), message_handler=on_message
    )
    assert assert_ok(with_token.structured_content) == "done"
    check_long_run(sent)
    assert seen_with == len(sent)
    assert assert_ok(without.structured_content) == "done"
    assert seen_without == 0


# --------------------------------------------------------------------------- Python API


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    yield from slow_host(tmp_path_factory, "progress")


@pytest.mark.slow
def test_codemode_run_progress_hook_hears_calls_and_heartbeats(host: HostThread) -> None:
    sent: list[Sent] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        sent.append((progress, total, message))

    response = host.run(SHORT_RUN, progress=on_progress)
    assert assert_ok(response) == "done"
    messages = [m for _, _, m in sent]
    assert messages[0] == "1 tool call done; last slow.sleep", messages
    assert any(m is not None and m.startswith("running ") for m in messages[1:]), messages


@pytest.mark.slow
def test_a_progress_hook_that_fails_or_hangs_never_affects_the_run(host: HostThread) -> None:
    async def failing(progress: float, total: float | None, message: str | None) -> None:
        raise ConnectionResetError("the client went away")

    async def hanging(progress: float, total: float | None, message: str | None) -> None:
        await asyncio.sleep(3600)

    for hook in (failing, hanging):
        started = time.monotonic()
        response = host.run(SHORT_RUN, progress=hook)  # a call notification, then a heartbeat
        assert time.monotonic() - started < PROMPT_S  # the run's own length, not the hook's hour
        assert assert_ok(response) == "done"
        assert [t["ok"] for t in response["toolTrace"]] == [True]


# --------------------------------------------------------------------------- reporter


class Sink:
    """A progress callback that records what it was sent; `fail`/`block` make it misbehave."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.fail = False
        self.gate: asyncio.Event | None = None  # set: sends wait on it

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise RuntimeError("send failed")
        self.sent.append((progress, total, message))

    @property
    def messages(self) -> list[str | None]:
        return [m for _, _, m in self.sent]


def test_reporter_heartbeats_at_its_interval_with_strictly_increasing_progress() -> None:
    sink = Sink()

    async def go() -> None:
        async with ProgressReporter(sink, interval=0.05):
            await asyncio.sleep(0.32)

    asyncio.run(go())
    assert 3 <= len(sink.sent) <= 7, sink.sent
    assert all(m == "running 0 s; 0 tool calls done" for m in sink.messages)
    progress = [p for p, _, _ in sink.sent]
    assert all(b > a for a, b in itertools.pairwise(progress)) and progress[0] > 0


def test_reporter_reports_a_finished_call_at_once_and_coalesces_a_burst() -> None:
    sink = Sink()

    async def go() -> None:
        async with ProgressReporter(sink, interval=60) as reporter:
            reporter.call_done("notes", "get_note")
            await asyncio.sleep(0.05)
            assert sink.messages == ["1 tool call done; last notes.get_note"]
            sink.gate = asyncio.Event()
            reporter.call_done("notes", "list_notes")  # its send waits on the gate...
            await asyncio.sleep(0.01)
            for i in range(10):  # ...while ten more calls finish
                reporter.call_done("calendar", f"event_{i}")
            sink.gate.set()
            await asyncio.sleep(0.05)

    asyncio.run(go())
    assert sink.messages == [
        "1 tool call done; last notes.get_note",
        "2 tool calls done; last notes.list_notes",
        "12 tool calls done; last calendar.event_9",
    ]


def test_reporter_sends_ad_hoc_notes() -> None:
    sink = Sink()

    async def go() -> None:
        async with ProgressReporter(sink, interval=60) as reporter:
            reporter.note("waiting for the user's approval of notes.delete_note")
            await asyncio.sleep(0.05)

    asyncio.run(go())
    assert sink.messages == ["waiting for the user's approval of notes.delete_note"]


def test_reporter_survives_a_sink_that_fails_or_hangs_and_sends_nothing_after_stop() -> None:
    sink = Sink()

    async def go() -> ProgressReporter:
        reporter = ProgressReporter(sink, interval=0.03, send_timeout=0.05)
        reporter.start()
        sink.fail = True
        await asyncio.sleep(0.1)
        assert sink.sent == [] and reporter.failed >= 1
        sink.fail, sink.gate = False, asyncio.Event()  # hangs: cut off after send_timeout
        await asyncio.sleep(0.15)
        failed = reporter.failed
        assert failed >= 2 and sink.sent == []
        sink.gate = None
        await asyncio.sleep(0.1)
        assert reporter.sent >= 1
        await reporter.stop()
        count = len(sink.sent)
        reporter.call_done("notes", "get_note")  # after stop: recorded, never sent
        await asyncio.sleep(0.1)
        assert len(sink.sent) == count
        return reporter

    reporter = asyncio.run(go())
    assert reporter.calls_done == 1


def test_reporter_cuts_and_sanitises_messages() -> None:
    sink = Sink()

    async def go() -> None:
        async with ProgressReporter(sink, interval=60) as reporter:
            reporter.note("x\u202e" + "y" * 1000)
            await asyncio.sleep(0.05)

    asyncio.run(go())
    [message] = sink.messages
    assert message is not None and "\u202e" not in message
    assert len(message) <= progress_mod.MAX_MESSAGE_CHARS + 1


# --------------------------------------------------------------------------- bridge hook


def test_bridge_tells_on_call_done_of_every_finished_call_and_survives_a_failing_hook() -> None:
    done: list[tuple[str, str]] = []

    def hook(server_id: str, tool_name: str) -> None:
        done.append((server_id, tool_name))
        raise RuntimeError("a broken reporter")

    config = ServerConfig(id="notes", transport="stdio", command="x")
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    view = ServerView(
        server_id="notes",
        config_id="notes",
        server_name="notes",
        live=True,
        tools={"get_note": ToolView("get_note", "get_note", input_schema=schema)},
    )
    bridge = Bridge(
        Catalog(servers={"notes": view}),
        FakeConnector(FakeSession(lambda name, args: ok({"id": 1}))),
        {"notes": config},
        max_tool_calls=None,
        on_call_done=hook,
    )

    async def go() -> list[HostReply]:
        return [
            await bridge.host_call(
                {"op": "call", "serverId": "notes", "toolName": "get_note", "input": {"id": 1}}
            ),
            await bridge.host_call(
                {"op": "call", "serverId": "notes", "toolName": "nope", "input": {}}
            ),
        ]

    first, second = asyncio.run(go())
    assert first == {"ok": True, "value": {"id": 1}}
    assert second["ok"] is False and second["error"]["errorClass"] == "ToolNotFoundError"
    assert done == [("notes", "get_note"), ("notes", "nope")]
