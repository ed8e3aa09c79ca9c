"""A tiny MCP server core written directly on JSON-RPC, for test servers the SDK refuses to be.

The SDK's server validates every inbound request and outbound result against the protocol's
wire schema, so it cannot send a non-object `inputSchema`, an unknown content block type, or
accept a bare array as `arguments`. Real servers do all of these. This core speaks the
handshake-era protocol (initialize, ping, tools/list, tools/call, notifications/cancelled)
over newline-delimited stdio, a minimal Streamable HTTP endpoint (POST /mcp answered with one
JSON body) or legacy HTTP+SSE (GET /sse, POST /messages/?session_id=...), runs requests
concurrently and cancels them on `notifications/cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MAX_MESSAGE_BYTES = 1 << 20  # larger requests get a parse error instead of unbounded buffering
MAX_IN_FLIGHT = 256  # bounds concurrent request tasks a flooding client can create
MAX_SSE_SESSIONS = 64  # bounds open legacy-SSE streams (each holds a queue and a task)
MAX_SSE_BACKLOG = 1024  # answers queued for a slow SSE reader before new POSTs are refused

INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, PARSE_ERROR = -32600, -32601, -32602, -32700
REQUEST_CANCELLED = -32800  # only ever sent on HTTP, where every POST needs an answer


class RpcError(Exception):
    """Raise from a tool to answer with a JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


ToolHandler = Callable[[str, Any], Awaitable[dict[str, Any]]]


@dataclass
class RawServer:
    name: str
    version: str
    tools: list[dict[str, Any]]
    call_tool: ToolHandler
    instructions: str | None = None
    # Largest request accepted (a server built to take huge inputs raises it).
    max_message_bytes: int = MAX_MESSAGE_BYTES
    on_cancelled: Callable[[Any], None] | None = None
    in_flight: dict[Any, asyncio.Task[Any]] = field(default_factory=dict)
    sse_sessions: dict[str, asyncio.Queue[bytes]] = field(default_factory=dict)
    background: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, message: Any) -> dict[str, Any] | None:
        """One message in, at most one answer out (None for notifications and cancelled calls)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, RpcError(INVALID_REQUEST, "Invalid Request"))
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            if method == "notifications/cancelled" and isinstance(params, dict):
                if self.on_cancelled is not None:
                    self.on_cancelled(params.get("requestId"))
                task = self.in_flight.get(_key(params.get("requestId")))
                if task is not None:
                    task.cancel()
            return None
        rid = message["id"]
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            return _error(
                rid, RpcError(-32000, f"too many requests in flight (max {MAX_IN_FLIGHT})")
            )
        task = asyncio.current_task()
        if task is not None:
            self.in_flight[_key(rid)] = task
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": await self._dispatch(method, params)}
        except RpcError as exc:
            return _error(rid, exc)
        finally:
            self.in_flight.pop(_key(rid), None)

    async def _dispatch(self, method: Any, params: Any) -> dict[str, Any]:
        if method == "initialize":
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            result: dict[str, Any] = {
                "protocolVersion": asked if asked in KNOWN_VERSIONS else KNOWN_VERSIONS[-1],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.name, "version": self.version},
            }
            if self.instructions:
                result["instructions"] = self.instructions
            return result
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "tools/call":
            if not isinstance(params, dict) or not isinstance(params.get("name"), str):
                raise RpcError(INVALID_PARAMS, "tools/call needs params.name")
            return await self.call_tool(params["name"], params.get("arguments"))
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def handle_bytes(self, raw: bytes) -> dict[str, Any] | None:
        if len(raw) > self.max_message_bytes:
            return _error(None, RpcError(PARSE_ERROR, "Request too large"))
        try:
            message = json.loads(raw)
        except ValueError:
            return _error(None, RpcError(PARSE_ERROR, "Parse error"))
        return await self.handle(message)

    async def serve_stdio(self) -> None:
        """Newline-delimited JSON-RPC on stdin/stdout; each request runs in its own task."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=self.max_message_bytes)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        tasks: set[asyncio.Task[None]] = set()

        async def answer(line: bytes) -> None:
            with contextlib.suppress(asyncio.CancelledError):
                reply = await self.handle_bytes(line)
                if reply is not None:
                    sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
                    sys.stdout.buffer.flush()

        while True:
            try:
                line = await reader.readline()
            except ValueError:  # over max_message_bytes: the reader dropped it
                continue
            if not line:
                break
            if line.strip():
                task = asyncio.create_task(answer(line))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await asyncio.sleep(0)  # let the request register before the next line (a cancel)
        for task in tasks:
            task.cancel()

    async def http_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Minimal Streamable HTTP: POST /mcp gets one application/json answer, 202 for notifications."""
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                done = event["type"] == "lifespan.shutdown"
                await send({"type": event["type"] + ".complete"})
                if done:
                    return
        if scope["type"] != "http":
            return

        async def respond(
            status: int, body: bytes = b"", ctype: bytes = b"application/json"
        ) -> None:
            headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        path = scope["path"].rstrip("/")
        if path == "/sse" and scope["method"] == "GET":
            await self._sse_stream(receive, send)
            return
        if path == "/messages" and scope["method"] == "POST":
            await self._sse_post(scope, receive, respond)
            return
        if path != "/mcp":
            await respond(404, b"not found", b"text/plain")
            return
        if scope["method"] == "DELETE":
            await respond(200)
            return
        if scope["method"] != "POST":
            await respond(405, b"method not allowed", b"text/plain")
            return
        body = await _read_body(receive)
        try:
            reply = await self.handle_bytes(body)
        except asyncio.CancelledError:
            message = json.loads(body)
            cancelled = RpcError(REQUEST_CANCELLED, "Request cancelled")
            await respond(200, json.dumps(_error(message.get("id"), cancelled)).encode())
            return
        if reply is None:
            await respond(202)
        else:
            await respond(200, json.dumps(reply).encode())

    async def _sse_stream(self, receive: Receive, send: Send) -> None:
        """Legacy SSE: announce the POST endpoint, then stream every answer as a message event."""
        if len(self.sse_sessions) >= MAX_SSE_SESSIONS:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        session = secrets.token_hex(16)
        queue: asyncio.Queue[bytes] = asyncio.Queue(MAX_SSE_BACKLOG)
        self.sse_sessions[session] = queue
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        endpoint = f"event: endpoint\ndata: /messages/?session_id={session}\n\n".encode()
        await send({"type": "http.response.body", "body": endpoint, "more_body": True})
        disconnected = asyncio.ensure_future(_disconnect(receive))
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getter, disconnected}, return_when=asyncio.FIRST_COMPLETED
                )
                if getter not in done:
                    getter.cancel()
                    return
                event = b"event: message\ndata: " + getter.result() + b"\n\n"
                await send({"type": "http.response.body", "body": event, "more_body": True})
        finally:
            disconnected.cancel()
            self.sse_sessions.pop(session, None)

    async def _sse_post(
        self, scope: Scope, receive: Receive, respond: Callable[..., Awaitable[None]]
    ) -> None:
        query = dict(
            part.split("=", 1) for part in scope["query_string"].decode().split("&") if "=" in part
        )
        queue = self.sse_sessions.get(query.get("session_id", ""))
        if queue is None:
            await respond(404, b"unknown session", b"text/plain")
            return
        if queue.full():
            await respond(503, b"session backlog full", b"text/plain")
            return
        body = await _read_body(receive)
        await respond(202, b"Accepted", b"text/plain")

        async def answer() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                reply = await self.handle_bytes(body)
                if reply is not None:
                    await queue.put(json.dumps(reply).encode())

        task = asyncio.create_task(answer())
        self.background.add(task)
        task.add_done_callback(self.background.discard)


async def _read_body(receive: Receive) -> bytes:
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if len(body) > MAX_MESSAGE_BYTES or not event.get("more_body"):
            return body


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _error(rid: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": exc.wire()}


def run(server: RawServer, transport: str, host: str, port: int) -> None:
    """Serve on stdio, Streamable HTTP (JSON answers) or legacy SSE until EOF or Ctrl-C."""
    with contextlib.suppress(KeyboardInterrupt):
        if transport == "stdio":
            asyncio.run(server.serve_stdio())
        else:
            from _asgi import serve_asgi  # uvicorn is only needed for http/sse

            asyncio.run(serve_asgi(server.http_app, host, port))
