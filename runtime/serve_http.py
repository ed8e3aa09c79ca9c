"""`codemode-gen serve --http HOST:PORT`: the same one tool (§2) over Streamable HTTP.

The transport is the SDK's own (`Server.streamable_http_app`, uvicorn), in its stateless mode:
every HTTP request is served on its own, so any number of instances behind any load balancer
serve any number of agents without sticky sessions. What stateless costs: the server cannot
speak outside a request, so there is no notifications/tools/list_changed push (a server that
connects in the background joins the description of the next tools/list) and no server-to-client
request; notifications that belong to a request (progress) still reach the client on that
request's SSE response, which is why responses are SSE streams, not `json_response`.

One process has one `CodeMode` (runtime/serve.py's `ServeHost`) shared by all its clients: the
upstream MCP sessions are pooled per instance and authenticate with the instance's own
.mcp.json credentials, never the client's, so one instance serves one credential set. Every
codemode.run still gets a fresh sandbox (§1.4). A client proves itself with `Authorization:
Bearer <token>` (`--auth-token` / CODEMODE_AUTH_TOKEN); whoever holds the token runs code with
those credentials, so an address beyond this machine is refused without one (§11).

Only the standard library is imported at module level: the CLI parses `--http` with
`parse_listen`, and `serve_http` runs the token and exposure checks before it imports uvicorn,
the SDK or the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.runtime.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME

if TYPE_CHECKING:
    from codemode_gen.runtime.serve import HostOptions, ServeHost

__all__ = [
    "HEALTH_PATH", "MCP_PATH", "TOKEN_ENV", "check_exposure", "check_token", "is_loopback", "parse_listen",
    "serve_http",
]

# Where the MCP endpoint and the load balancer's health check live.
MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
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


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (a name other than localhost could
    resolve anywhere, so it is not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token(token: str | None) -> str | None:
    """The bearer token as given (None: no authentication); a token no header can carry is an error."""
    if token is None:
        return None
    if not TOKEN_RE.match(token):
        raise UserError(
            f"the auth token (--auth-token / {TOKEN_ENV}) is empty or holds characters an HTTP header "
            "cannot carry",
            hint="use visible ASCII without spaces, e.g. the output of `openssl rand -hex 32`",
        )
    return token


def check_exposure(host: str, token: str | None, allow_unauthenticated: bool) -> None:
    """Refuse to serve beyond this machine without a token: whoever reaches the port could run
    code against the upstream servers with this instance's credentials (§11)."""
    if token is None and not allow_unauthenticated and not is_loopback(host):
        raise UserError(
            f"refusing to listen on {host} without authentication: anyone who can reach it could run "
            "code against your MCP servers with this instance's credentials",
            hint=f"set {TOKEN_ENV} (or --auth-token) to a secret clients send as `Authorization: Bearer "
                 "<token>`, bind to 127.0.0.1, or pass --allow-unauthenticated if something in front of it "
                 "authenticates",
        )


class _Gate:
    """ASGI wrapper: `GET /healthz` unauthenticated (it says only ok / starting / error), every
    other request only with the bearer token (when one is set)."""

    def __init__(self, app: Any, host: ServeHost, token: str | None) -> None:
        self.app = app
        self.host = host
        self.token = token.encode("ascii") if token is not None else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan: the SDK's session manager
            await self.app(scope, receive, send)
            return
        if scope["path"] == HEALTH_PATH:
            await self._health(scope, send)
            return
        if self.token is not None:
            given = self._credential(scope)
            # hmac.compare_digest: constant time in the token's content (only its length can leak)
            if given is None or not hmac.compare_digest(given, self.token):
                await self._unauthorized(send, missing=given is None)
                return
        await self.app(scope, receive, send)

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


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket bound here (so `port` 0 is known before uvicorn starts)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, IndexError) as exc:
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
) -> None:
    """Serve the one tool over Streamable HTTP at `listen` until SIGTERM/SIGINT; never exits for
    a bad config (runs answer CONFIG_ERROR, /healthz says "error")."""
    bind_host, port = listen
    token = check_token(auth_token)
    check_exposure(bind_host, token, allow_unauthenticated)
    sock = _bind(bind_host, port)

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from codemode_gen.runtime.serve import HostOptions, ServeHost, build_server, log_line

    host = ServeHost(config, out, tool_name=tool_name, prompt_budget=prompt_budget,
                     options=options or HostOptions(), announce=False)
    host.check()
    server = build_server(host)
    # The SDK checks Host/Origin against DNS rebinding on a loopback address. A bearer token is
    # what a rebinding web page cannot send, so with one the check is off: a load balancer on
    # the same machine may then forward whatever Host it likes.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False) if token is not None else None
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=False,  # SSE: a request's progress notifications reach its client
        host=bind_host,
        transport_security=security,
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

    listener = Listener(uvicorn.Config(
        _Gate(app, host, token),
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
        for sig in handled:
            loop.remove_signal_handler(sig)
        sock.close()
