"""Smoke tests of the demo servers (examples/servers) and the test servers (tests/servers).

Everyone else tests against these processes, so each one is started for real and every
behaviour another test relies on is checked once: with the plain `mcp` client where the SDK can
talk to the server, with raw JSON-RPC over stdio where it cannot (bad_schema, slow). One
process per server, shared by all of that server's checks, keeps the module fast.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import os
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import jsonschema
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import ValidationError

from .conftest import PROMPT_S, PYTHON, RunningServer, server_script

CALL_TIMEOUT = 15.0  # seconds; bounds every request so a broken server fails the test, not hangs it
# Concurrency checks: CONCURRENT_CALLS sleeps of CONCURRENT_SLEEP_MS each end within PROMPT_S only
# when they overlap (one after the other they take twice PROMPT_S).
CONCURRENT_CALLS = 8
CONCURRENT_SLEEP_MS = 2500
HANG_PROBE_SECONDS = 1.0  # how long hang_on_initialize must stay silent for the test to believe it


def _stdio(name: str, *args: str, env: dict[str, str] | None = None) -> Any:
    params = StdioServerParameters(
        command=PYTHON, args=[str(server_script(name)), *args], env=env or None
    )
    return stdio_client(params, errlog=open(os.devnull, "w"))


def _client(target: Any, **kw: Any) -> Client:
    return Client(target, mode="legacy", read_timeout_seconds=CALL_TIMEOUT, **kw)


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _text(result: types.CallToolResult | dict[str, Any]) -> str:
    content = result["content"] if isinstance(result, dict) else _dump(result)["content"]
    assert len(content) == 1 and content[0]["type"] == "text", content
    return str(content[0]["text"])


async def _all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        if not (cursor := page.next_cursor):
            return tools


class RawStdio:
    """Newline-delimited JSON-RPC to a server process, for servers the SDK's models reject."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            message = json.loads(line)
            future = self.pending.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message)

    async def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        await self.proc.stdin.drain()

    async def start_request(
        self, method: str, params: Any = None
    ) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        message: dict[str, Any] = {"id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return self.next_id, future

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        _, future = await self.start_request(method, params)
        return await asyncio.wait_for(future, CALL_TIMEOUT)

    async def call(self, name: str, arguments: Any = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        reply = await self.request("tools/call", params)
        assert "result" in reply, reply
        return dict(reply["result"])

    async def initialize(self) -> dict[str, Any]:
        reply = await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test_servers", "version": "0"},
            },
        )
        await self.send({"method": "notifications/initialized"})
        return dict(reply["result"])


@asynccontextmanager
async def raw_stdio(
    name: str, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[RawStdio]:
    proc = await asyncio.create_subprocess_exec(
        PYTHON,
        str(server_script(name)),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    raw = RawStdio(proc)
    try:
        yield raw
    finally:
        raw.reader.cancel()
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def _png_size(data: bytes) -> tuple[int, int]:
    """Check the PNG signature and every chunk CRC; return (width, height)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, kinds = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, kind
        kinds.append(kind)
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


# --- notes ----------------------------------------------------------------------------------


def test_notes_stdio_every_notable_tool() -> None:
    async def scenario() -> None:
        async with _client(_stdio("notes_server")) as client:
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("notes", "1.0.0")
            assert client.instructions and "notes" in client.instructions.lower()
            tools = {t.name: t for t in await _all_tools(client)}
            assert {"list_notes", "get_note", "create_note", "update_note", "delete_note",
                    "search_notes", "stats", "render_chart", "flaky_sync", "summary",
                    "export-csv", "tasks.add", "tasks.list"} <= set(tools)  # fmt: skip
            for name in ("list_notes", "get_note", "create_note", "tasks.list"):
                assert tools[name].output_schema is not None, name
            for name in ("search_notes", "stats", "render_chart", "summary", "export-csv"):
                assert tools[name].output_schema is None, name  # the undeclared tools
            ro = tools["list_notes"].annotations
            assert ro is not None and ro.read_only_hint is True
            for name in ("update_note", "delete_note"):
                hints = tools[name].annotations
                assert hints is not None and hints.destructive_hint is True, name
            assert tools["list_notes"].input_schema.get("required", []) == []

            listed = (await client.call_tool("list_notes", {"tag": "work"})).structured_content
            assert listed is not None
            assert [n["id"] for n in listed["result"]] == [1, 3, 5]
            schema = tools["list_notes"].output_schema
            assert schema is not None
            jsonschema.validate(listed, schema)

            note = (await client.call_tool("get_note", {"id": 2})).structured_content
            assert note is not None and note["title"] == "Groceries" and note["done"] is False
            assert set(note) >= {"id", "title", "body", "tags", "created"}
            missing = await client.call_tool("get_note", {"id": 99})
            assert missing.is_error and "note 99 not found" in _text(missing)

            hits = json.loads(_text(await client.call_tool("search_notes", {"query": "search"})))
            assert hits and all(set(h) == {"id", "title", "score"} for h in hits)
            assert hits[0]["id"] == 3 and hits == sorted(hits, key=lambda h: -h["score"])
            stats = json.loads(_text(await client.call_tool("stats", {})))
            assert stats["notes"] == 5 and stats["byTag"]["work"] == 3

            chart = _dump(await client.call_tool("render_chart", {}))
            image, caption = chart["content"]
            assert image["type"] == "image" and image["mimeType"] == "image/png"
            assert _png_size(base64.b64decode(image["data"])) == (96, 48)
            assert caption["type"] == "text" and caption["text"].startswith("Notes per tag: work 3")

            failing = await client.call_tool("flaky_sync", {})
            assert failing.is_error and "sync service unreachable" in _text(failing)

            prose = _text(await client.call_tool("summary", {}))
            assert prose.startswith("You have 5 notes")
            with pytest.raises(ValueError):
                json.loads(prose)

            rows = list(csv.reader(io.StringIO(_text(await client.call_tool("export-csv", {})))))
            assert rows[0] == ["id", "title", "tags", "created", "done"] and len(rows) == 6

            tasks = (await client.call_tool("tasks.list", {})).structured_content
            assert tasks is not None and [t["id"] for t in tasks["result"]] == [1, 2, 3]
            added = (
                await client.call_tool("tasks.add", {"title": "Water plants"})
            ).structured_content
            assert added == {"id": 4, "title": "Water plants", "done": False, "due": None}

            created = (
                await client.call_tool(
                    "create_note", {"title": "New", "body": "b", "tags": ["B", "a"]}
                )
            ).structured_content
            assert created is not None and created["id"] == 6 and created["tags"] == ["a", "b"]
            updated = (
                await client.call_tool("update_note", {"id": 6, "done": True})
            ).structured_content
            assert updated is not None and updated["done"] is True and updated["title"] == "New"
            deleted = (await client.call_tool("delete_note", {"id": 6})).structured_content
            assert deleted == {"id": 6, "deleted": True, "remaining": 5}

    anyio.run(scenario)


@pytest.mark.slow
def test_notes_seed_is_deterministic_across_processes() -> None:
    """Two fresh processes answer the same call identically (fixtures must be reproducible)."""

    async def one() -> dict[str, Any]:
        async with _client(_stdio("notes_server")) as client:
            await client.call_tool("create_note", {"title": "x", "body": "y"})
            return _dump(await client.call_tool("list_notes", {}))

    async def scenario() -> None:
        first, second = await asyncio.gather(one(), one())
        assert first == second

    anyio.run(scenario)


@pytest.mark.slow
def test_notes_over_streamable_http_and_sse(start_server: Callable[..., RunningServer]) -> None:
    http, sse = start_server("notes_server", "http"), start_server("notes_server", "sse")
    assert http.base.startswith("http://127.0.0.1:")

    async def scenario() -> None:
        for target in (http.mcp_url, sse_client(sse.sse_url)):
            async with _client(target) as client:
                assert len(await _all_tools(client)) == 13
                note = (await client.call_tool("get_note", {"id": 1})).structured_content
                assert note is not None and note["title"] == "Quarterly planning"
        async with Client(http.mcp_url, read_timeout_seconds=CALL_TIMEOUT) as modern:
            assert modern.protocol_version == "2026-07-28"  # the server serves both eras
            assert json.loads(_text(await modern.call_tool("stats", {})))["notes"] == 5

    anyio.run(scenario)


# --- calendar -------------------------------------------------------------------------------


@pytest.mark.slow
def test_calendar_stdio_tools_and_schema_drift() -> None:
    async def scenario() -> None:
        async with _client(_stdio("calendar_server")) as client:
            assert client.server_info is not None and client.server_info.name == "calendar"
            tools = {t.name: t for t in await _all_tools(client)}
            assert set(tools) == {"list_events", "get_event", "create_event", "free_slots"}
            assert all(t.output_schema for t in tools.values())
            listing = tools["list_events"]
            assert listing.annotations is not None and listing.annotations.read_only_hint
            assert listing.input_schema.get("required") is None

            day = (
                await client.call_tool("list_events", {"from": "2026-03-03", "to": "2026-03-03"})
            ).structured_content
            assert day is not None and [e["title"] for e in day["events"]] == [
                "Dentist",
                "Release go/no-go",
            ]
            assert [e["id"] for e in day["events"]] == [3, 4]  # listing normalises the legacy id

            slots = (
                await client.call_tool("free_slots", {"date": "2026-03-03", "durationMinutes": 60})
            ).structured_content
            assert slots == {
                "date": "2026-03-03",
                "slots": [
                    {"start": "2026-03-03T09:30:00Z", "end": "2026-03-03T15:00:00Z"},
                    {"start": "2026-03-03T15:45:00Z", "end": "2026-03-03T17:00:00Z"},
                ],
            }
            event = (
                await client.call_tool(
                    "create_event",
                    {
                        "title": "Chat",
                        "start": "2026-03-04T10:00:00Z",
                        "end": "2026-03-04T10:30:00Z",
                        "attendees": ["b@example.com", "a@example.com"],
                        "noteId": 2,
                    },
                )
            ).structured_content
            assert event is not None and event["id"] == 6 and event["noteId"] == 2
            assert event["attendees"] == ["a@example.com", "b@example.com"]
            bad = await client.call_tool(
                "create_event",
                {"title": "x", "start": "2026-03-04T11:00:00Z", "end": "2026-03-04T10:00:00Z"},
            )
            assert bad.is_error and "must be after start" in _text(bad)

            ok = (await client.call_tool("get_event", {"id": 1})).structured_content
            assert ok is not None and ok["id"] == 1
            schema = tools["get_event"].output_schema
            assert schema is not None
            jsonschema.validate(ok, schema)
            # Event 4 breaks its declared outputSchema; the strict SDK client refuses it.
            with pytest.raises(RuntimeError, match="get_event"):
                await client.call_tool("get_event", {"id": 4})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool", {})
            assert unknown.value.code == types.INVALID_PARAMS

        async with raw_stdio("calendar_server") as raw:
            await raw.initialize()
            schema = next(
                t["outputSchema"] for t in (await raw.request("tools/list"))["result"]["tools"]
                if t["name"] == "get_event"
            )  # fmt: skip
            drifted = (await raw.call("get_event", {"id": 4}))["structuredContent"]
            assert drifted["id"] == "4" and drifted["importedFrom"] == "ical"
            assert schema["properties"]["id"] == {"type": "integer"}
            with pytest.raises(jsonschema.ValidationError, match="'4' is not of type 'integer'"):
                jsonschema.validate(drifted, schema)

    asyncio.run(scenario())


# --- misbehaving servers --------------------------------------------------------------------


def test_crash_at_start_exits_3_with_a_readable_message() -> None:
    for transport in ("stdio", "http"):
        done = subprocess.run(
            [PYTHON, str(server_script("crash_at_start")), transport, "--port", "0"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT,
        )
        assert done.returncode == 3
        assert done.stdout == ""
        assert "fatal: database file missing" in done.stderr
        assert "listening on" not in done.stderr


@pytest.mark.slow
def test_hang_on_initialize_never_answers() -> None:
    async def scenario() -> None:
        async with raw_stdio("hang_on_initialize") as raw:
            _, answer = await raw.start_request("initialize", {"protocolVersion": "2025-11-25"})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(answer, HANG_PROBE_SECONDS)
            assert raw.proc.stdin is not None
            raw.proc.stdin.close()  # EOF does not make it exit either: the client must kill it
            await asyncio.sleep(0.2)
            assert raw.proc.returncode is None

    asyncio.run(scenario())


def test_bad_schema_lists_through_raw_json_rpc_only() -> None:
    async def scenario() -> None:
        async with raw_stdio("bad_schema") as raw:
            init = await raw.initialize()
            assert init["serverInfo"]["name"] == "bad-schema"
            tools = {t["name"]: t for t in (await raw.request("tools/list"))["result"]["tools"]}
            assert tools["shout"]["inputSchema"]["type"] == "string"
            assert _text(await raw.call("good_echo", {"text": "hi"})) == "hi"
            assert _text(await raw.call("shout", "quiet please")) == "QUIET PLEASE"
            widget = await raw.call("widget", {})
            assert [c["type"] for c in widget["content"]] == ["widget", "text"]
            unknown = await raw.request("tools/call", {"name": "nope", "arguments": {}})
            assert unknown["error"]["code"] == -32602
            missing = await raw.request("resources/list")
            assert missing["error"]["code"] == -32601

        # The reason the server exists: the strict SDK client cannot list it at all.
        with pytest.raises(BaseException) as caught:
            async with _client(_stdio("bad_schema")) as client:
                await client.list_tools()
        leaves = _leaves(caught.value)
        assert any(isinstance(e, ValidationError) for e in leaves), leaves

    asyncio.run(scenario())


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


@pytest.mark.slow
def test_auth_http_rejects_missing_or_wrong_bearer(
    start_server: Callable[..., RunningServer],
) -> None:
    server = start_server("auth_http", "http", "--token", "tok-secret-1234")
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as plain:
            none = await plain.post(server.mcp_url, json=ping)
            assert none.status_code == 401 and none.headers["www-authenticate"].startswith("Bearer")
            wrong = await plain.post(
                server.mcp_url, json=ping, headers={"Authorization": "Bearer nope"}
            )
            assert wrong.status_code == 401
        headers = {"Authorization": "Bearer tok-secret-1234"}
        authed = httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT)
        async with (
            authed,
            _client(streamable_http_client(server.mcp_url, http_client=authed)) as client,
        ):
            assert {t.name for t in await _all_tools(client)} == {"whoami", "echo", "revoke"}
            me = (await client.call_tool("whoami", {})).structured_content
            assert me == {"user": "demo", "tokenSuffix": "1234"}
            assert _text(await client.call_tool("echo", {"message": "hello"})) == "hello"

    anyio.run(scenario)


# --- protocol edge cases --------------------------------------------------------------------


@pytest.mark.slow
def test_paginated_tools_list_has_three_pages() -> None:
    async def scenario() -> None:
        async with _client(_stdio("paginated")) as client:
            sizes, names, cursor = [], [], None
            while True:
                page = await client.list_tools(cursor=cursor)
                sizes.append(len(page.tools))
                names += [t.name for t in page.tools]
                if not (cursor := page.next_cursor):
                    break
            assert sizes == [10, 10, 5]
            assert names == [f"item_{i:02d}" for i in range(1, 26)]
            with pytest.raises(MCPError) as bad:
                await client.list_tools(cursor="not-a-cursor")
            assert bad.value.code == types.INVALID_PARAMS
            assert _text(await client.call_tool("item_25", {"n": 7})) == "item_25 n=7"

    anyio.run(scenario)


@pytest.mark.slow
def test_s8_list_changed_notification_after_add_tool() -> None:
    async def scenario() -> None:
        seen = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                seen.set()

        async with _client(_stdio("list_changed"), message_handler=on_message) as client:
            assert {t.name for t in await _all_tools(client)} == {"ping", "add_tool"}
            assert _text(await client.call_tool("ping", {})) == "pong"
            assert "added fresh" in _text(await client.call_tool("add_tool", {"name": "fresh"}))
            with anyio.fail_after(CALL_TIMEOUT):
                await seen.wait()
            assert "fresh" in {t.name for t in await _all_tools(client)}
            assert _text(await client.call_tool("fresh", {})) == "hello from fresh"
            again = await client.call_tool("add_tool", {"name": "fresh"})
            assert again.is_error and "already exists" in _text(again)

    anyio.run(scenario)


def test_slow_server_call_shapes_concurrency_and_cancellation() -> None:
    async def scenario() -> None:
        async with raw_stdio("slow", env={"SLOW_TEST_VAR": "from-env"}) as raw:
            await raw.initialize()
            tools = {t["name"]: t for t in (await raw.request("tools/list"))["result"]["tools"]}
            assert tools["total"]["inputSchema"]["type"] == "array"  # §5.3.1 non-object root
            assert tools["tick"]["inputSchema"] == {"type": "object"}
            assert tools["book_room"]["inputSchema"]["examples"] == [{"room": "A1", "minutes": 30}]

            started = time.monotonic()
            sleep = {"ms": CONCURRENT_SLEEP_MS}
            slept = await asyncio.gather(
                *(raw.call("sleep", sleep) for _ in range(CONCURRENT_CALLS))
            )
            assert time.monotonic() - started < PROMPT_S  # concurrent, not one after the other
            assert all(r["structuredContent"] == {"slept": CONCURRENT_SLEEP_MS} for r in slept)

            request_id, abandoned = await raw.start_request(
                "tools/call", {"name": "sleep", "arguments": {"ms": 30_000}}
            )
            await asyncio.sleep(0.05)
            await raw.send(
                {"method": "notifications/cancelled", "params": {"requestId": request_id}}
            )
            counts = (await raw.call("cancelled_count", {}))["structuredContent"]
            assert counts == {"cancelled": 1, "interrupted": 1, "sleeping": 0}
            assert not abandoned.done()  # a cancelled request is never answered

            value = {"nested": [1, "two", None, {"three": 3.5}]}
            assert (await raw.call("echo", {"value": value}))["structuredContent"] == {
                "value": value
            }
            assert (await raw.call("total", [1, 2, 3.5]))["structuredContent"] == {
                "total": 6.5,
                "count": 3,
            }
            assert (await raw.call("tick"))["structuredContent"] == {"ticks": 1}
            assert (await raw.call("tick", {}))["structuredContent"] == {"ticks": 2}
            booked = await raw.call("book_room", {"room": "A1", "minutes": 30})
            assert _text(booked) == "booked A1 for 30 minutes"

            beep = (await raw.call("beep", {}))["content"]
            assert [c["type"] for c in beep] == ["audio", "text"] and beep[0][
                "mimeType"
            ] == "audio/wav"
            wav = base64.b64decode(beep[0]["data"])
            assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"

            lines = (await raw.call("lines", {"count": 3}))["content"]
            assert [c["text"] for c in lines] == ["line 1", "line 2", "line 3"]
            rpc = await raw.request("tools/call", {"name": "rpc_error", "arguments": {}})
            assert rpc["error"] == {
                "code": -32050,
                "message": "quota exceeded for tenant demo",
                "data": {"retryAfterMs": 1500},
            }
            failed = await raw.call("tool_error", {})
            assert failed["isError"] is True and "disk full" in _text(failed)
            env = (await raw.call("env", {"name": "SLOW_TEST_VAR"}))["structuredContent"]
            assert env == {"name": "SLOW_TEST_VAR", "value": "from-env"}
            unset = (await raw.call("env", {"name": "SLOW_TEST_UNSET"}))["structuredContent"]
            assert unset["value"] is None

    asyncio.run(scenario())


def test_slow_server_over_http_cancels_too(start_server: Callable[..., RunningServer]) -> None:
    server = start_server("slow", "http")

    async def scenario() -> None:
        async with httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http:

            async def post(message: dict[str, Any]) -> httpx2.Response:
                return await http.post(server.mcp_url, json={"jsonrpc": "2.0", **message})

            init = await post(
                {"id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
            )
            assert init.json()["result"]["serverInfo"]["name"] == "slow"
            assert (await post({"method": "notifications/initialized"})).status_code == 202
            call = asyncio.ensure_future(
                post(
                    {
                        "id": 2,
                        "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"ms": 30_000}},
                    }
                )
            )
            await asyncio.sleep(0.2)
            await post({"method": "notifications/cancelled", "params": {"requestId": 2}})
            answer = await asyncio.wait_for(call, CALL_TIMEOUT)
            assert answer.json()["error"]["code"] == -32800
            total = await post(
                {"id": 3, "method": "tools/call", "params": {"name": "total", "arguments": [2, 2]}}
            )
            assert total.json()["result"]["structuredContent"]["total"] == 4

    asyncio.run(scenario())


def test_test_servers_refuse_non_loopback_hosts() -> None:
    """They have no authentication: the shared command line only accepts loopback addresses."""
    done = subprocess.run(
        [sys.executable, str(server_script("crash_at_start")), "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
    )
    assert done.returncode == 2 and "invalid choice: '0.0.0.0'" in done.stderr


async def _next_event(lines: AsyncIterator[str]) -> tuple[str, str]:
    """The next (event, data) of a text/event-stream."""
    event, data = "message", ""
    async for line in lines:
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line and data:
            return event, data
    raise AssertionError("event stream ended")


def test_slow_server_over_legacy_sse(start_server: Callable[..., RunningServer]) -> None:
    """The raw core speaks legacy HTTP+SSE too: answers arrive as events, concurrently."""
    server = start_server("slow", "sse")

    async def scenario() -> None:
        async with (
            httpx2.AsyncClient(timeout=CALL_TIMEOUT) as http,
            http.stream("GET", server.sse_url) as stream,
        ):
            lines = stream.aiter_lines()
            kind, endpoint = await _next_event(lines)
            assert kind == "endpoint" and endpoint.startswith("/messages/?session_id=")

            async def post(message: dict[str, Any]) -> None:
                sent = await http.post(server.base + endpoint, json={"jsonrpc": "2.0", **message})
                assert sent.status_code == 202

            await post(
                {"id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
            )
            kind, data = await _next_event(lines)
            assert kind == "message" and json.loads(data)["result"]["serverInfo"]["name"] == "slow"
            started = time.monotonic()
            for i in range(1, CONCURRENT_CALLS + 1):
                call = {"name": "sleep", "arguments": {"ms": CONCURRENT_SLEEP_MS}}
                await post({"id": i, "method": "tools/call", "params": call})
            answers = [json.loads((await _next_event(lines))[1]) for _ in range(CONCURRENT_CALLS)]
            assert time.monotonic() - started < PROMPT_S  # concurrent, not one after the other
            assert sorted(a["id"] for a in answers) == list(range(1, CONCURRENT_CALLS + 1))
            await post(
                {"id": 9, "method": "tools/call", "params": {"name": "total", "arguments": [1, 2]}}
            )
            assert (
                json.loads((await _next_event(lines))[1])["result"]["structuredContent"]["total"]
                == 3
            )

    asyncio.run(scenario())
