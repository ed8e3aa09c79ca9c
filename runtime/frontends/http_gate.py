"""The ASGI gate in front of the MCP SDK's app in `serve --http`: what a client can make the
process hold before a run starts, and the paths the SDK does not serve.

In order: `Host`/`Origin` (runtime/frontends/http_access.py `HostGuard`, every path); `GET
/healthz` unauthenticated; the bearer token; `GET /metrics` (Prometheus text, runtime/host/metrics.py);
then `POST /mcp`, whose body is read here bounded in size, time and bytes held
(MAX_REQUEST_BYTES, BODY_TIMEOUT_S, MAX_PENDING_BYTES), whose JSON-RPC envelope is looked at
(off the loop when large: runtime/host/offload.py), and whose `codemode.run` call waits for
admission (runtime/frontends/admission.py) holding only its body. Whatever it refuses gets a
JSON body saying why and, for a busy server, `503` with `Retry-After`. Kept apart from the
server's start-up (runtime/frontends/serve_http.py) because these are the per-request bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import time
from typing import TYPE_CHECKING, Any

from codemode_gen.runtime.frontends.admission import TICKET_SCOPE_KEY, Admission, QueueFull, Ticket
from codemode_gen.runtime.frontends.http_access import HostGuard
from codemode_gen.runtime.host import telemetry_serve
from codemode_gen.runtime.host.offload import (
    MAX_JSON_VALUES,
    Envelope,
    Offload,
    OffloadFailed,
    envelope_of,
    structure_bound,
)
from codemode_gen.runtime.jsonsafe import safe_name

if TYPE_CHECKING:
    from codemode_gen.runtime.frontends.serve_host import ServeHost
    from codemode_gen.runtime.host.metrics import Metrics

__all__ = [
    "HEALTH_PATH",
    "MAX_PENDING_BYTES",
    "MAX_REQUEST_BYTES",
    "MCP_PATH",
    "METRICS_PATH",
    "Gate",
]

MIB = 1024 * 1024
# Where the MCP endpoint and the load balancer's health check live.
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
# Where Prometheus scrapes the metrics (text format 0.0.4).
METRICS_PATH = "/metrics"
METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
# The realm named in the 401 challenge (RFC 6750 §3).
AUTH_REALM = "codemode-gen"
# Bounds one request body (the SDK's own default, made explicit: the SDK gets the same cap): a
# script of up to ~4 MB. Every byte of it is held until the request reaches the SDK.
MAX_REQUEST_BYTES = 4 * MIB
# Bounds how long a request body may take to arrive once its head has (a slow upload holds a
# connection and the bytes received so far): 4 MiB needs ~70 KB/s.
BODY_TIMEOUT_S = 60.0
# Bounds the bytes of all requests that have not reached the SDK yet (arriving, looked at, or
# queued for a worker): what clients can make the process hold beyond the runs in progress.
MAX_PENDING_BYTES = 64 * MIB
# What a busy server asks a client to wait before it retries (Retry-After, and the message).
RETRY_AFTER_S = 5
# Bounds how long a helper process may take to parse a large request's JSON (runtime/host/offload.py).
ENVELOPE_TIMEOUT_S = 10.0
# A kind of refusal is told on stderr at most once per this many seconds; at most this many
# kinds are remembered (a Host refusal's kind includes the Host: a scan must not flood the log).
NOTICE_INTERVAL_S = 60.0
MAX_NOTICE_KINDS = 64
# JSON-RPC error codes of the answers the gate gives itself (-32000: the implementation's own).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_BUSY = -32000


class _Notices:
    """stderr lines about refused requests: each kind at most once per NOTICE_INTERVAL_S, so a
    flood of bad requests cannot flood the log. A kind that names what the client sent (a Host)
    is `dynamic`: at most MAX_NOTICE_KINDS of those are remembered, the rest not told."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._dynamic = 0

    def say(self, kind: str, text: str, *, dynamic: bool = False) -> None:
        from codemode_gen.runtime.frontends.serve_host import log_line

        now = time.monotonic()
        if kind not in self._last:
            if dynamic and self._dynamic >= MAX_NOTICE_KINDS:
                return
            self._dynamic += dynamic
        elif now - self._last[kind] < NOTICE_INTERVAL_S:
            return
        self._last[kind] = now
        log_line(text)


# `Gate._admit`'s answer for a run whose client disconnected while it waited.
_GONE = Ticket(0.0, 0, 0, expired=True)


class _Refused(Exception):
    """A request answered with an error before it reached the SDK."""

    def __init__(
        self, status: int, code: int, message: str, *, retry: bool = False, close: bool = False
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry, self.close = (
            status,
            code,
            message,
            retry,
            close,
        )


class _Held:
    """The request bytes one request holds before it reaches the SDK, counted in its gate's
    `pending` (bounded by MAX_PENDING_BYTES: 503 beyond) and by MAX_REQUEST_BYTES (413)."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.bytes = 0

    def grow(self, total: int) -> None:
        if total > MAX_REQUEST_BYTES:
            raise _Refused(
                413,
                INVALID_REQUEST,
                (
                    f"the request body is over {MAX_REQUEST_BYTES // MIB} MiB: send a shorter script (split the "
                    "work into several runs, or fetch large data with tool calls instead of inlining it)"
                ),
                close=True,
            )
        if self.gate.pending - self.bytes + total > MAX_PENDING_BYTES:
            self.gate.notices.say(
                "pending",
                (
                    f"refused a request: {MAX_PENDING_BYTES // MIB} MiB of requests are already waiting to run "
                    "(serve --max-queued-runs bounds how many runs wait)"
                ),
            )
            raise _Refused(
                503,
                SERVER_BUSY,
                (
                    f"the server is busy: {MAX_PENDING_BYTES // MIB} MiB of requests are waiting to run; "
                    f"retry in {RETRY_AFTER_S} s"
                ),
                retry=True,
                close=True,
            )
        self.gate.pending += total - self.bytes
        self.bytes = total

    def release(self) -> None:
        self.gate.pending -= self.bytes
        self.bytes = 0


class Gate:
    """ASGI wrapper in front of the SDK's app, in this order: `Host`/`Origin` (`HostGuard`, every
    path); `GET /healthz` unauthenticated (it says only ok / starting / error); the bearer token
    (when one is set); then `POST /mcp`: the body is read here (bounded in size, time and
    bytes held), its JSON-RPC envelope looked at off the loop when it is large, and a
    `codemode.run` call waits for admission (runtime/frontends/admission.py) holding only its body."""

    def __init__(
        self,
        app: Any,
        host: ServeHost,
        token: str | None,
        guard: HostGuard,
        admission: Admission,
        offload: Offload,
        *,
        public_metrics: bool = False,
    ) -> None:
        self.app = app
        self.public_metrics = public_metrics
        self._metrics: Metrics | None = None
        self.host = host
        self.token = token.encode("ascii") if token is not None else None
        self.guard = guard
        self.admission = admission
        self.offload = offload
        self.notices = _Notices()
        self.pending = 0  # request bytes held before their request reached the SDK

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan: the SDK's session manager
            await self.app(scope, receive, send)
            return
        refusal = self.guard.refusal(scope["headers"])
        if refusal is not None:
            status, error, description = refusal
            self.notices.say(
                f"{error}:{description}", f"refused a request: {description}", dynamic=True
            )
            await _send_json(send, status, {"error": error, "error_description": description}, [])
            return
        if scope["path"] == HEALTH_PATH:
            await self._health(scope, send)
            return
        if scope["path"] == METRICS_PATH and self.public_metrics:
            await self._serve_metrics(scope, send)
            return
        if self.token is not None:
            given = self._credential(scope)
            # hmac.compare_digest: constant time in the token's content (only its length can leak)
            if given is None or not hmac.compare_digest(given, self.token):
                await self._unauthorized(send, missing=given is None)
                return
        if scope["path"] == METRICS_PATH:
            await self._serve_metrics(scope, send)
            return
        if scope["path"] == MCP_PATH and scope["method"] == "GET":
            # Stateless: the server has nothing to say outside a request, so it offers no SSE
            # stream (MCP transport spec: then 405), and no GET holds a connection forever.
            await _send_json(
                send,
                405,
                {
                    "error": "method not allowed",
                    "error_description": "POST JSON-RPC requests to this endpoint",
                },
                [(b"allow", b"POST, DELETE")],
            )
            return
        if scope["path"] == MCP_PATH and scope["method"] == "POST":
            await self._post(scope, receive, send)
            return
        await self.app(scope, receive, send)

    # ------------------------------------------------------------------ POST /mcp

    async def _post(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        held = _Held(self)
        client = _client_key(scope)
        admitted = False
        request_id: Any = None
        try:
            try:
                length = _content_length(scope)
                if length is not None:
                    held.grow(length)
                body = await self._read_body(receive, held, length)
                if body is None:  # the client went away
                    return
                held.grow(len(body))
                envelope = await self._envelope(body)
                request_id = envelope.id
                ticket = None
                if envelope.method == "tools/call" and envelope.tool == self.host.tool_name:
                    ticket = await self._admit(client, envelope, receive)
                    if ticket is _GONE:  # the client went away while its run waited
                        return
                    admitted = ticket is not None and not ticket.expired
            except _Refused as refused:
                await self._refuse(send, refused, request_id)
                return
            # From here the SDK holds the request (its copies of the body and the parsed message),
            # for at most `slots` runs at once: it no longer counts as pending.
            held.release()
            if ticket is not None:
                scope[TICKET_SCOPE_KEY] = ticket
            holder = [body]
            del body  # the SDK's `receive` takes it from `holder`: this frame keeps no copy
            # The request's traceparent header parents its run's span (the SDK hands this
            # context to the handler; a traceparent in the request's _meta wins).
            traced = telemetry_serve.http_context(scope["headers"])
            try:
                await self.app(scope, _replay(holder, receive), send)
            finally:
                telemetry_serve.end_http_context(traced)
        finally:
            held.release()
            if admitted:
                self.admission.release(client)

    async def _read_body(self, receive: Any, held: _Held, length: int | None) -> bytearray | None:
        """The request body (None: the client went away). With a Content-Length it is read into
        one buffer of that size, so a queued run holds its body once, not once plus chunks."""
        body = bytearray(length) if length is not None else bytearray()
        size = 0
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return None
                    chunk = message.get("body", b"")
                    if chunk:
                        end = size + len(chunk)
                        if end > held.bytes:  # no Content-Length, or more than it said
                            held.grow(end)
                        body[size:end] = chunk
                        size = end
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise _Refused(
                408,
                INVALID_REQUEST,
                (f"the request body did not arrive within {BODY_TIMEOUT_S:g} s"),
                close=True,
            ) from None
        if size < len(body):  # shorter than its Content-Length said
            del body[size:]
        return body

    async def _envelope(self, body: bytearray) -> Envelope:
        """What the request is, parsed as the SDK will parse it (pydantic_core), but in a helper
        process when the body could hold enough JSON values to stall the loop."""
        import pydantic_core

        if structure_bound(body) <= MAX_JSON_VALUES:
            try:
                envelope = envelope_of(pydantic_core.from_json(body))
            except ValueError as exc:
                raise _Refused(
                    400, PARSE_ERROR, f"the request is not JSON: {safe_name(str(exc), 200)}"
                ) from None
        else:
            try:
                found = await self.offload.envelope(body, time.monotonic() + ENVELOPE_TIMEOUT_S)
            except TimeoutError:  # the helper is busy with others, or this one parses that slowly
                raise _Refused(
                    503,
                    SERVER_BUSY,
                    (
                        f"the server could not read the request within {ENVELOPE_TIMEOUT_S:g} s; retry in {RETRY_AFTER_S} s"
                    ),
                    retry=True,
                ) from None
            except OffloadFailed as exc:
                self.notices.say("offload", f"cannot look at a request in a helper process: {exc}")
                raise _Refused(
                    503,
                    SERVER_BUSY,
                    f"the server could not read the request; retry in {RETRY_AFTER_S} s",
                    retry=True,
                ) from None
            if found is None:
                raise _Refused(400, PARSE_ERROR, "the request is not JSON")
            envelope = found
        if envelope.values > MAX_JSON_VALUES:
            raise _Refused(
                400,
                INVALID_REQUEST,
                (
                    f"the request holds over {MAX_JSON_VALUES} JSON values; a codemode.run request is an object "
                    "with `code` (one string), `limits` and `requestedCapabilities`"
                ),
            )
        return envelope

    async def _admit(self, client: str, envelope: Envelope, receive: Any) -> Ticket | None:
        """Wait for a run slot (None: the run answers at once without one: its arguments are
        invalid or the config is broken; `_GONE`: the client disconnected while it waited)."""
        if envelope.code_chars is None or not envelope.limits_valid:
            return None
        timeout_ms = self.host.run_timeout_ms(envelope.limits)
        if timeout_ms is None:
            return None
        queued_at = time.monotonic()
        waiting = asyncio.ensure_future(
            self.admission.acquire(client, queued_at + timeout_ms / 1000)
        )
        try:
            gone = await _unless_disconnected(waiting, receive)
        except BaseException:
            gone = True  # this request is being cancelled (shutdown): as good as gone
            raise
        finally:
            if (
                gone
                and waiting.done()
                and not waiting.cancelled()
                and waiting.exception() is None
                and waiting.result()
            ):
                self.admission.release(client)  # it got a slot just before: the slot goes on
        if gone:
            return _GONE
        try:
            admitted = waiting.result()
        except QueueFull as exc:
            self.notices.say(
                "queue",
                f"refused a run: the queue is full ({exc.message}; serve --max-queued-runs "
                "raises the cap)",
            )
            raise _Refused(
                503,
                SERVER_BUSY,
                (
                    f"the server is busy: {exc.message}; retry in {RETRY_AFTER_S} s"
                    + (" (or wait for your own runs to finish first)" if exc.per_client else "")
                ),
                retry=True,
            ) from None
        return Ticket(queued_at, timeout_ms, self.admission.slots, expired=not admitted)

    async def _refuse(self, send: Any, refused: _Refused, request_id: Any) -> None:
        headers: list[tuple[bytes, bytes]] = []
        if refused.retry:
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode("ascii")))
        if (
            refused.close
        ):  # the rest of the body is not read: the connection cannot carry another request
            headers.append((b"connection", b"close"))
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": refused.code, "message": refused.message},
        }
        with contextlib.suppress(OSError, RuntimeError):
            await _send_json(send, refused.status, body, headers)

    # ------------------------------------------------------------------ the rest

    @staticmethod
    def _credential(scope: dict[str, Any]) -> bytes | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credential = value.partition(b" ")
                return credential.strip() if scheme.lower() == b"bearer" else b""
        return None

    async def _unauthorized(self, send: Any, *, missing: bool) -> None:
        # RFC 6750 §3: no error code when the request carried no credential at all.
        challenge = f'Bearer realm="{AUTH_REALM}"' + ("" if missing else ', error="invalid_token"')
        body = {"error": "unauthorized", "error_description": "send Authorization: Bearer <token>"}
        await _send_json(send, 401, body, [(b"www-authenticate", challenge.encode("ascii"))])

    def metrics(self) -> Metrics:
        """The host's metrics (its CodeMode's), with this gate's admission queue among them."""
        if self._metrics is None:
            from codemode_gen.runtime.host.metrics import Metrics

            cm = self.host.codemode()
            self._metrics = (
                cm.telemetry.metrics if cm is not None else Metrics()
            )  # a broken config: none recorded
            admission = self.admission
            self._metrics.runs_queued.sources["admission"] = lambda: [
                (("admission",), admission.queued)
            ]
        return self._metrics

    async def _serve_metrics(self, scope: dict[str, Any], send: Any) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send_json(send, 405, {"error": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        data = self.metrics().exposition().encode("utf-8")
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", METRICS_CONTENT_TYPE),
                    (b"content-length", str(len(data)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send(
            {"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else data}
        )

    async def _health(self, scope: dict[str, Any], send: Any) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send_json(send, 405, {"error": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        # 503 until the sandbox pool is up (a load balancer then sends nothing yet), and for a
        # broken config (every run would be a CONFIG_ERROR; the reason is on stderr).
        if self.host.problem is not None:
            status, state = 503, "error"
        elif self.host.is_ready:
            status, state = 200, "ok"
        else:
            status, state = 503, "starting"
        await _send_json(send, status, {"status": state}, [], head=scope["method"] == "HEAD")


async def _unless_disconnected(task: asyncio.Future[Any], receive: Any) -> bool:
    """Wait for `task`; True when the client disconnected first (`task` is then cancelled and
    done). The request's body has been read, so the client's next message is its disconnect."""
    watching: asyncio.Future[Any] = asyncio.ensure_future(receive())
    try:
        while not task.done():
            await asyncio.wait({task, watching}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                break
            if watching.result().get("type") == "http.disconnect":
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return True
            watching = asyncio.ensure_future(receive())
        return False
    finally:
        for pending in (watching, task):
            if not pending.done():
                pending.cancel()
                await asyncio.gather(pending, return_exceptions=True)


def _client_key(scope: dict[str, Any]) -> str:
    """Who a request is for fair queueing: its remote address (a proxy on 127.0.0.1 that sends
    X-Forwarded-For names the client behind it: uvicorn's proxy headers, FORWARDED_ALLOW_IPS)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


def _replay(holder: list[bytearray], receive: Any) -> Any:
    """The ASGI `receive` the SDK gets: the body read here, once, then the client's own (which
    says when it disconnects). The body leaves `holder` on the way, so only the SDK keeps it."""

    async def replay() -> dict[str, Any]:
        if holder:
            return {"type": "http.request", "body": holder.pop(), "more_body": False}
        return await receive()

    return replay


async def _send_json(
    send: Any,
    status: int,
    body: dict[str, Any],
    headers: list[tuple[bytes, bytes]],
    *,
    head: bool = False,
) -> None:
    data = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b"" if head else data})
