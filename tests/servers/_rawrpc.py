"""A tiny MCP server core written directly on JSON-RPC, for test servers the SDK refuses to be.

The SDK's server validates every inbound request and outbound result against the protocol's
wire schema, so it cannot send a non-object `inputSchema`, an unknown content block type, or
accept a bare array as `arguments`. Real servers do all of these. This core speaks the
handshake-era protocol (initialize, ping, tools/list, tools/call, notifications/cancelled)
over newline-delimited stdio or a minimal Streamable HTTP endpoint (POST /mcp answered with
one JSON body), runs requests concurrently and cancels them on `notifications/cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

KNOWN_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MAX_MESSAGE_BYTES = 1 << 20  # larger requests get a parse error instead of unbounded buffering
MAX_IN_FLIGHT = 256  # bounds concurrent request tasks a flooding client can create

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
    on_cancelled: Callable[[Any], None] | None = None
    in_flight: dict[Any, asyncio.Task[Any]] = field(default_factory=dict)

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
        if len(raw) > MAX_MESSAGE_BYTES:
            return _error(None, RpcError(PARSE_ERROR, "Request too large"))
        try:
            message = json.loads(raw)
        except ValueError:
            return _error(None, RpcError(PARSE_ERROR, "Parse error"))
        return await self.handle(message)

    async def serve_stdio(self) -> None:
        """Newline-delimited JSON-RPC on stdin/stdout; each request runs in its own task."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
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
            except ValueError:  # over MAX_MESSAGE_BYTES: the reader dropped it
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

        if scope["path"].rstrip("/") != "/mcp":
            await respond(404, b"not found", b"text/plain")
            return
        if scope["method"] == "DELETE":
            await respond(200)
            return
        if scope["method"] != "POST":
            await respond(405, b"method not allowed", b"text/plain")
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if len(body) > MAX_MESSAGE_BYTES or not event.get("more_body"):
                break
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


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _error(rid: Any, exc: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": exc.wire()}


def run(server: RawServer, transport: str, host: str, port: int) -> None:
    """Serve on stdio or Streamable HTTP (JSON responses) until stdin closes or Ctrl-C."""
    with contextlib.suppress(KeyboardInterrupt):
        if transport == "stdio":
            asyncio.run(server.serve_stdio())
        else:
            from _serve import serve_asgi  # uvicorn is only needed for http

            asyncio.run(serve_asgi(server.http_app, host, port))
