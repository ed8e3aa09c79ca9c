"""`codemode-gen serve --http HOST:PORT`: the same one tool (§2) over Streamable HTTP.

The transport is the SDK's own (`Server.streamable_http_app`, uvicorn), in its stateless mode:
every HTTP request is served on its own, so any number of instances behind any load balancer
serve any number of agents without sticky sessions. What stateless costs: the server cannot
speak outside a request, so there is no notifications/tools/list_changed push (a server that
connects in the background joins the description of the next tools/list) and no server-to-client
request; notifications that belong to a request (progress) still reach the client on that
request's SSE response, which is why responses are SSE streams, not `json_response`.

One process has one `CodeMode` (runtime/frontends/serve.py's `ServeHost`) shared by all its clients: the
upstream MCP sessions are pooled per instance and authenticate with the instance's own
.mcp.json credentials, never the client's, so one instance serves one credential set. Every
codemode.run still gets a fresh sandbox (§1.4). A client proves itself with `Authorization:
Bearer <token>` (`--auth-token` / CODEMODE_AUTH_TOKEN); whoever holds the token runs code with
those credentials, so an address beyond this machine is refused without one (§11).

In front of the SDK's app, `_Gate` checks `Host`/`Origin` (`HostGuard`: DNS rebinding, other
sites' pages), the token, and bounds what a client can make the process hold: a request body
(MAX_REQUEST_BYTES, BODY_TIMEOUT_S), the bytes of requests not yet running (MAX_PENDING_BYTES),
the runs waiting for a sandbox worker (runtime/frontends/admission.py: `--max-queued-runs`, taken in turn
client by client) and open connections (runtime/frontends/http_connections.py: `--max-connections`, a
deadline for every request head). Whatever it refuses gets a JSON body saying why and, for a
busy server, `503` with `Retry-After`.

`GET /metrics` answers the host's metrics in the Prometheus text format (runtime/host/metrics.py),
behind the bearer token like everything but /healthz unless `--public-metrics`; a request's W3C
`traceparent` header becomes the parent of its run's span when its `_meta` carries none
(runtime/host/telemetry.py, docs/observability.md).

Nothing heavy is imported at module level (the standard library and small runtime modules):
the CLI parses `--http` with `parse_listen`, and `serve_http` runs the token and exposure
checks before it imports uvicorn, the SDK or the CodeMode.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import re
import signal
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.runtime.frontends.admission import TICKET_SCOPE_KEY, Admission, QueueFull, Ticket
from codemode_gen.runtime.frontends.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME
from codemode_gen.runtime.host import otel_setup, telemetry_serve
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
    from codemode_gen.runtime.frontends.serve import HostOptions, ServeHost
    from codemode_gen.runtime.host.metrics import Metrics

__all__ = [
    "DEFAULT_MAX_QUEUED_RUNS", "HEALTH_PATH", "MCP_PATH", "METRICS_PATH", "TOKEN_ENV", "HostGuard", "HttpOptions",
    "check_exposure", "is_loopback", "is_loopback_address", "parse_listen", "resolve_token", "serve_http",
    "valid_origin",
]

MIB = 1024 * 1024
# Where the MCP endpoint and the load balancer's health check live.
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
# Where Prometheus scrapes the metrics (text format 0.0.4).
METRICS_PATH = "/metrics"
METRICS_CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
# The environment variable that carries the bearer token (keeps it out of `ps` and shell history).
TOKEN_ENV = "CODEMODE_AUTH_TOKEN"
# What an HTTP header can carry as a bearer credential: visible ASCII, no spaces (RFC 6750's
# b64token is a subset); bounds the header the check reads, too.
TOKEN_RE = re.compile(r"[\x21-\x7e]{1,4096}\Z")
# After SIGTERM/SIGINT: how long runs in flight may go on finishing before they are cancelled and
# the upstream servers are stopped (keep it under the process manager's stop timeout, e.g.
# systemd's TimeoutStopSec, default 90 s).
SHUTDOWN_GRACE_S = 20
# How long an idle client connection is kept open: longer than a proxy keeps its idle upstream
# connections (nginx's upstream keepalive_timeout defaults to 60 s), so the proxy closes them
# first and never sends a request on one we are closing (uvicorn's default, 5 s, invites 502s).
KEEP_ALIVE_S = 75
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
# Runs waiting for a sandbox worker when the operator sets none (--max-queued-runs); a client
# may hold a quarter of them (at least one), so one client cannot fill the queue alone.
DEFAULT_MAX_QUEUED_RUNS = 64
QUEUED_RUNS_PER_CLIENT_SHARE = 4
# What a busy server asks a client to wait before it retries (Retry-After, and the message).
RETRY_AFTER_S = 5
# Bounds how long a helper process may take to parse a large request's JSON (runtime/host/offload.py).
ENVELOPE_TIMEOUT_S = 10.0
# Bounds a header value quoted in a refusal (the client chose it).
MAX_SHOWN_HEADER_CHARS = 200
# A kind of refusal is told on stderr at most once per this many seconds; at most this many
# kinds are remembered (a Host refusal's kind includes the Host: a scan must not flood the log).
NOTICE_INTERVAL_S = 60.0
MAX_NOTICE_KINDS = 64
# JSON-RPC error codes of the answers the gate gives itself (-32000: the implementation's own).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_BUSY = -32000


@dataclass(frozen=True)
class HttpOptions:
    """serve --http's own flags (HostOptions holds those shared with stdio)."""

    #: Host names (NAME or NAME:PORT, `*` for any) accepted beyond the loopback ones (`HostGuard`).
    allowed_hosts: tuple[str, ...] = ()
    #: Origins (`scheme://host[:port]`, `*` for any) accepted beyond the loopback ones.
    allowed_origins: tuple[str, ...] = ()
    #: Connections open at once (None: http_connections.default_max_connections()).
    max_connections: int | None = None
    #: Runs waiting for a worker, all clients together.
    max_queued_runs: int = DEFAULT_MAX_QUEUED_RUNS
    #: Serve GET /metrics without the bearer token (for a scraper that cannot send one).
    public_metrics: bool = False


def parse_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6; a bare PORT means 127.0.0.1) → (host, port)."""
    text = value.strip()
    if text.isdigit():
        host, port_text = "127.0.0.1", text
    elif text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"{value!r}: write an IPv6 address as [ADDRESS]:PORT")
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{value!r}: expected HOST:PORT, e.g. 127.0.0.1:8000 (port 0 picks a free one)")
        if ":" in host:
            raise ValueError(f"{value!r}: write an IPv6 address as [ADDRESS]:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{value!r}: the port must be a number from 0 to 65535 (0 picks a free one)")
    return host, int(port_text)


def is_loopback_address(text: str) -> bool:
    """Whether `text` is an IP address of this machine's loopback interface: 127.0.0.0/8, ::1,
    or either written as an IPv4-mapped IPv6 address (::ffff:127.0.0.2)."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])  # an IPv6 zone (%lo) names no other host
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def is_loopback(host: str) -> bool:
    """Whether the name or address `host` can only mean this machine: `localhost` in any case
    (RFC 6761 reserves it, with or without the root's trailing dot) or a loopback address. Any
    other name could resolve anywhere, and a DNS-rebinding page can make it resolve here."""
    name = host.strip().rstrip(".").lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name == "localhost" or is_loopback_address(name)


def resolve_token(option: str | None, environ: Mapping[str, str], allow_unauthenticated: bool) -> str | None:
    """The bearer token: `--auth-token`, else CODEMODE_AUTH_TOKEN; None when neither is set.

    One rule for every source. A token that is set but empty or blank would turn authentication
    off without a word, so it is refused unless --allow-unauthenticated says serving without one
    is meant (then there is none); a token no HTTP header can carry is refused always."""
    if option is not None:
        source, value = "--auth-token", option
    elif TOKEN_ENV in environ:
        source, value = f"the environment variable {TOKEN_ENV}", environ[TOKEN_ENV]
    else:
        return None
    if not value.strip():
        if allow_unauthenticated:
            return None
        raise UserError(
            f"{source} is set but empty: serve --http would run without authentication",
            hint=f"set {TOKEN_ENV} to a secret clients send as `Authorization: Bearer <token>` (e.g. "
                 f"`export {TOKEN_ENV}=$(openssl rand -hex 32)`), or unset it and pass "
                 "--allow-unauthenticated if serving without a token is what you mean",
        )
    if not TOKEN_RE.match(value):
        raise UserError(
            f"{source} holds characters an HTTP header cannot carry (spaces, control characters or "
            "non-ASCII) or is over 4096 characters",
            hint=f"set {TOKEN_ENV} to visible ASCII without spaces, e.g. the output of `openssl rand -hex 32`",
        )
    return value


def check_exposure(bound: str, token: str | None, allow_unauthenticated: bool, *, shown: str | None = None) -> None:
    """Refuse to serve beyond this machine without a token: whoever reaches the port could run
    code against the upstream servers with this instance's credentials (§11). `bound` is the
    address the listening socket gets (a name is judged by what it resolves to), `shown` the
    address as the user wrote it."""
    if token is None and not allow_unauthenticated and not is_loopback_address(bound):
        where = bound if shown is None or shown == bound else f"{shown} ({bound})"
        raise UserError(
            f"refusing to listen on {where} without authentication: anyone who can reach it could run "
            "code against your MCP servers with this instance's credentials",
            hint=f"set {TOKEN_ENV} (or --auth-token) to a secret clients send as `Authorization: Bearer "
                 "<token>`, bind to 127.0.0.1, or pass --allow-unauthenticated if something in front of it "
                 "authenticates",
        )


def _split_host(value: str) -> tuple[str, str | None]:
    """`name[:port]` / `[v6]:port` of a Host header or an --allowed-host entry → (name, port)."""
    text = value.strip().lower()
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        name, _, port = text.partition(":")
    else:  # a bare IPv6 address (not valid in a Host header) or a name without a port
        name, port = text, None
    return name.rstrip("."), port or None


def _split_origin(value: str) -> tuple[str, str, str | None] | None:
    """`scheme://host[:port]` → (scheme, host, port), lower-cased, the scheme's default port as
    None (an origin is all three: https://a.example and https://a.example:8443 are two); None
    when it is not one."""
    scheme, sep, rest = value.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        return None
    name, port = _split_host(rest)
    if port == {"http": "80", "https": "443"}[scheme]:
        port = None
    return (scheme, name, port) if name else None


def valid_origin(value: str) -> bool:
    """Whether `value` can be an --allowed-origin entry: `*`, or http(s)://host[:port]."""
    return value.strip() == "*" or _split_origin(value) is not None


class HostGuard:
    """Which `Host` and `Origin` a request may carry (MCP transport spec, "Security Warning":
    servers must validate Origin; DNS rebinding).

    A web page can make a browser send requests to any address, and a DNS-rebinding page can
    make its own name resolve to this machine; neither can choose the `Host` the browser sends
    (its own name) nor hide its `Origin`. So on a loopback address (any of 127.0.0.0/8, ::1,
    `localhost` in any case) `Host` must name this machine: `localhost` or a loopback address,
    any port, or an `--allowed-host`. On any address an `Origin`, when present (browsers send
    it; MCP clients that are programs do not), must be a loopback origin of a loopback server or
    an `--allowed-origin`. A request without `Host` cannot come from a browser and passes.
    """

    def __init__(self, loopback: bool, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
        self.loopback = loopback
        self.any_host = any(h.strip() == "*" for h in allowed_hosts)
        self.hosts = {_split_host(h) for h in allowed_hosts if h.strip() != "*"}
        self.any_origin = any(o.strip() == "*" for o in allowed_origins)
        self.origins = {parsed for o in allowed_origins if (parsed := _split_origin(o)) is not None}
        # On a non-loopback address Host is checked only when the operator named allowed hosts.
        self.check_host = not self.any_host and (loopback or bool(self.hosts))

    def host_allowed(self, value: str) -> bool:
        if not self.check_host:
            return True
        name, port = _split_host(value)
        if self.loopback and is_loopback(name):
            return True
        return (name, port) in self.hosts or (name, None) in self.hosts

    def origin_allowed(self, value: str) -> bool:
        if self.any_origin:
            return True
        parsed = _split_origin(value)
        if parsed is None:  # "null" (a sandboxed frame, a file: page) or garbage
            return False
        if self.loopback and is_loopback(parsed[1]):
            return True  # a page this machine serves, on any port (a local tool's own UI)
        return parsed in self.origins

    def refusal(self, headers: Iterable[tuple[bytes, bytes]]) -> tuple[int, str, str] | None:
        """(status, error, description) when the request must be refused, else None."""
        for name, raw in headers:
            if name == b"host" and not self.host_allowed(raw.decode("latin-1")):
                shown = safe_name(raw.decode("latin-1"), MAX_SHOWN_HEADER_CHARS)
                hint_name = safe_name(_split_host(raw.decode("latin-1"))[0], MAX_SHOWN_HEADER_CHARS)
                return 421, "misdirected_request", (
                    f"Host {shown!r} is not accepted: this server listens on a loopback address and answers "
                    "only requests for localhost or a loopback address (DNS-rebinding protection); if a proxy "
                    f"forwards this name, start serve with --allowed-host {hint_name}"
                    if self.loopback else
                    f"Host {shown!r} is not one of the --allowed-host names this server was started with; "
                    f"add --allowed-host {hint_name} if it should be"
                )
            if name == b"origin" and not self.origin_allowed(raw.decode("latin-1")):
                shown = safe_name(raw.decode("latin-1"), MAX_SHOWN_HEADER_CHARS)
                return 403, "forbidden_origin", (
                    f"Origin {shown!r} is not accepted: a web page from another site may not call this "
                    "server (MCP transport security); if a page of that origin is a client you trust, "
                    f"start serve with --allowed-origin {shown}"
                )
        return None


class _Notices:
    """stderr lines about refused requests: each kind at most once per NOTICE_INTERVAL_S, so a
    flood of bad requests cannot flood the log. A kind that names what the client sent (a Host)
    is `dynamic`: at most MAX_NOTICE_KINDS of those are remembered, the rest not told."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._dynamic = 0

    def say(self, kind: str, text: str, *, dynamic: bool = False) -> None:
        from codemode_gen.runtime.frontends.serve import log_line

        now = time.monotonic()
        if kind not in self._last:
            if dynamic and self._dynamic >= MAX_NOTICE_KINDS:
                return
            self._dynamic += dynamic
        elif now - self._last[kind] < NOTICE_INTERVAL_S:
            return
        self._last[kind] = now
        log_line(text)


# `_Gate._admit`'s answer for a run whose client disconnected while it waited.
_GONE = Ticket(0.0, 0, 0, expired=True)


class _Refused(Exception):
    """A request answered with an error before it reached the SDK."""

    def __init__(self, status: int, code: int, message: str, *, retry: bool = False, close: bool = False) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry, self.close = status, code, message, retry, close


class _Held:
    """The request bytes one request holds before it reaches the SDK, counted in its gate's
    `pending` (bounded by MAX_PENDING_BYTES: 503 beyond) and by MAX_REQUEST_BYTES (413)."""

    def __init__(self, gate: _Gate) -> None:
        self.gate = gate
        self.bytes = 0

    def grow(self, total: int) -> None:
        if total > MAX_REQUEST_BYTES:
            raise _Refused(413, INVALID_REQUEST, (
                f"the request body is over {MAX_REQUEST_BYTES // MIB} MiB: send a shorter script (split the "
                "work into several runs, or fetch large data with tool calls instead of inlining it)"
            ), close=True)
        if self.gate.pending - self.bytes + total > MAX_PENDING_BYTES:
            self.gate.notices.say("pending", (
                f"refused a request: {MAX_PENDING_BYTES // MIB} MiB of requests are already waiting to run "
                "(serve --max-queued-runs bounds how many runs wait)"
            ))
            raise _Refused(503, SERVER_BUSY, (
                f"the server is busy: {MAX_PENDING_BYTES // MIB} MiB of requests are waiting to run; "
                f"retry in {RETRY_AFTER_S} s"
            ), retry=True, close=True)
        self.gate.pending += total - self.bytes
        self.bytes = total

    def release(self) -> None:
        self.gate.pending -= self.bytes
        self.bytes = 0


class _Gate:
    """ASGI wrapper in front of the SDK's app, in this order: `Host`/`Origin` (`HostGuard`, every
    path); `GET /healthz` unauthenticated (it says only ok / starting / error); the bearer token
    (when one is set); then `POST /mcp`: the body is read here (bounded in size, time and
    bytes held), its JSON-RPC envelope looked at off the loop when it is large, and a
    `codemode.run` call waits for admission (runtime/frontends/admission.py) holding only its body."""

    def __init__(self, app: Any, host: ServeHost, token: str | None, guard: HostGuard, admission: Admission,
                 offload: Offload, *, public_metrics: bool = False) -> None:
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
            self.notices.say(f"{error}:{description}", f"refused a request: {description}", dynamic=True)
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
            await _send_json(send, 405, {"error": "method not allowed",
                                         "error_description": "POST JSON-RPC requests to this endpoint"},
                             [(b"allow", b"POST, DELETE")])
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
            raise _Refused(408, INVALID_REQUEST, (
                f"the request body did not arrive within {BODY_TIMEOUT_S:g} s"
            ), close=True) from None
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
                raise _Refused(400, PARSE_ERROR, f"the request is not JSON: {safe_name(str(exc), 200)}") from None
        else:
            try:
                found = await self.offload.envelope(body, time.monotonic() + ENVELOPE_TIMEOUT_S)
            except TimeoutError:  # the helper is busy with others, or this one parses that slowly
                raise _Refused(503, SERVER_BUSY, (
                    f"the server could not read the request within {ENVELOPE_TIMEOUT_S:g} s; retry in {RETRY_AFTER_S} s"
                ), retry=True) from None
            except OffloadFailed as exc:
                self.notices.say("offload", f"cannot look at a request in a helper process: {exc}")
                raise _Refused(503, SERVER_BUSY, f"the server could not read the request; retry in {RETRY_AFTER_S} s",
                               retry=True) from None
            if found is None:
                raise _Refused(400, PARSE_ERROR, "the request is not JSON")
            envelope = found
        if envelope.values > MAX_JSON_VALUES:
            raise _Refused(400, INVALID_REQUEST, (
                f"the request holds over {MAX_JSON_VALUES} JSON values; a codemode.run request is an object "
                "with `code` (one string), `limits` and `requestedCapabilities`"
            ))
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
        waiting = asyncio.ensure_future(self.admission.acquire(client, queued_at + timeout_ms / 1000))
        try:
            gone = await _unless_disconnected(waiting, receive)
        except BaseException:
            gone = True  # this request is being cancelled (shutdown): as good as gone
            raise
        finally:
            if gone and waiting.done() and not waiting.cancelled() and waiting.exception() is None \
                    and waiting.result():
                self.admission.release(client)  # it got a slot just before: the slot goes on
        if gone:
            return _GONE
        try:
            admitted = waiting.result()
        except QueueFull as exc:
            self.notices.say("queue", f"refused a run: the queue is full ({exc.message}; serve --max-queued-runs "
                             "raises the cap)")
            raise _Refused(503, SERVER_BUSY, (
                f"the server is busy: {exc.message}; retry in {RETRY_AFTER_S} s"
                + (" (or wait for your own runs to finish first)" if exc.per_client else "")
            ), retry=True) from None
        return Ticket(queued_at, timeout_ms, self.admission.slots, expired=not admitted)

    async def _refuse(self, send: Any, refused: _Refused, request_id: Any) -> None:
        headers: list[tuple[bytes, bytes]] = []
        if refused.retry:
            headers.append((b"retry-after", str(RETRY_AFTER_S).encode("ascii")))
        if refused.close:  # the rest of the body is not read: the connection cannot carry another request
            headers.append((b"connection", b"close"))
        body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": refused.code, "message": refused.message}}
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
            self._metrics = cm.telemetry.metrics if cm is not None else Metrics()  # a broken config: none recorded
            admission = self.admission
            self._metrics.runs_queued.sources["admission"] = lambda: [(("admission",), admission.queued)]
        return self._metrics

    async def _serve_metrics(self, scope: dict[str, Any], send: Any) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _send_json(send, 405, {"error": "method not allowed"}, [(b"allow", b"GET, HEAD")])
            return
        data = self.metrics().exposition().encode("utf-8")
        await send({
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", METRICS_CONTENT_TYPE), (b"content-length", str(len(data)).encode()),
                        (b"cache-control", b"no-store")],
        })
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else data})

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


async def _send_json(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]],
                     *, head: bool = False) -> None:
    data = json.dumps(body).encode("utf-8")
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                    (b"cache-control", b"no-store"), *headers],
    })
    await send({"type": "http.response.body", "body": b"" if head else data})


def _resolve(host: str, port: int) -> tuple[Any, ...]:
    """What `host:port` binds to: (family, type, proto, canonname, address)."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, IndexError) as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc}", hint="pass an address of this machine") from None


def _bind(resolved: tuple[Any, ...], host: str, port: int) -> socket.socket:
    """A listening socket bound here (so `port` 0 is known before uvicorn starts)."""
    family, kind, proto, _, address = resolved
    try:
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc}", hint="pass an address of this machine") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                        hint="pick another port (0 picks a free one)") from None
    return sock


def _url(sock: socket.socket) -> str:
    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    return f"http://{shown}:{port}{MCP_PATH}"


async def serve_http(
    config: Path,
    out: Path | None,
    *,
    listen: tuple[str, int],
    auth_token: str | None = None,
    allow_unauthenticated: bool = False,
    tool_name: str = DEFAULT_TOOL_NAME,
    prompt_budget: int = DEFAULT_PROMPT_BUDGET,
    options: HostOptions | None = None,
    http: HttpOptions | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Serve the one tool over Streamable HTTP at `listen` until SIGTERM/SIGINT; never exits for
    a bad config (runs answer CONFIG_ERROR, /healthz says "error"). `auth_token` is --auth-token
    as given; CODEMODE_AUTH_TOKEN is read from `environ` (default: the process's)."""
    bind_host, port = listen
    http = http or HttpOptions()
    token = resolve_token(auth_token, os.environ if environ is None else environ, allow_unauthenticated)
    resolved = _resolve(bind_host, port)
    bound = str(resolved[4][0])
    check_exposure(bound, token, allow_unauthenticated, shown=bind_host)
    sock = _bind(resolved, bind_host, port)
    loopback = is_loopback_address(bound)
    guard = HostGuard(loopback, http.allowed_hosts, http.allowed_origins)

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from codemode_gen.runtime.frontends.http_connections import (
        ConnectionLimits,
        connection_protocol,
        default_max_connections,
    )
    from codemode_gen.runtime.frontends.serve import HostOptions, ServeHost, build_server, log_line

    telemetry_serve.install_log_handler(log_line)  # warnings of the runtime as serve's lines, with trace ids
    if token is None:
        log_line(
            f"no bearer token ({TOKEN_ENV} unset): anyone who can reach {bind_host} can run scripts"
            + (" (only programs on this machine: it is a loopback address)" if loopback
               else " (--allow-unauthenticated: something in front must authenticate)")
        )
    if (options or HostOptions()).state_secret is None:
        log_line(
            "no --state-secret (CODEMODE_STATE_SECRET unset): a run that waits for an MCP 2026-07-28 client's "
            "approval resumes only in this process; behind a load balancer give every instance the same secret"
        )
    host = ServeHost(config, out, tool_name=tool_name, prompt_budget=prompt_budget,
                     options=options or HostOptions(), announce=False)
    host.check()
    server = build_server(host)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=False,  # SSE: a request's progress notifications reach its client
        host=bind_host,
        max_request_body_size=MAX_REQUEST_BYTES,
        # `_Gate` checks Host and Origin for every path (the SDK's check covers only /mcp and
        # only the literal 127.0.0.1 / localhost / ::1 binds).
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    admission = Admission(
        host.run_slots(),
        max_queued=http.max_queued_runs,
        max_queued_per_client=max(1, http.max_queued_runs // QUEUED_RUNS_PER_CLIENT_SHARE),
    )
    offload = Offload(1)  # large requests' JSON is parsed there (one at a time; started on need)
    connections = ConnectionLimits(
        http.max_connections if http.max_connections is not None else default_max_connections(), log=log_line,
    )

    class Listener(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # serve_http handles SIGTERM/SIGINT itself (below): uvicorn's own handlers would
            # re-raise the signal once it has stopped, ending the process before the CodeMode
            # (and with it the upstream servers) is closed.
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                log_line(f"listening on {_url(sock)}")

    gate = _Gate(app, host, token, guard, admission, offload, public_metrics=http.public_metrics)
    gate.metrics()  # the admission queue's gauge from the start
    if http.public_metrics:
        log_line(f"GET {METRICS_PATH} is served without the bearer token (--public-metrics)")
    listener = Listener(uvicorn.Config(
        gate,
        http=connection_protocol(connections),
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        timeout_keep_alive=KEEP_ALIVE_S,
    ))

    def on_signal() -> None:
        if listener.should_exit:  # a second signal: stop waiting for the runs in flight
            listener.force_exit = True
        listener.should_exit = True

    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not main thread / Windows
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
    # An instance behind a load balancer warms at once (/healthz turns 200 when it is ready).
    host.start()
    try:
        await listener.serve(sockets=[sock])
    finally:
        await host.aclose()
        await offload.aclose()
        await asyncio.to_thread(otel_setup.shutdown)  # the last runs' spans, before the process ends
        for sig in handled:
            loop.remove_signal_handler(sig)
        sock.close()
