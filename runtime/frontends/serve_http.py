"""`codemode-gen serve --http HOST:PORT`: the same one tool (§2) over Streamable HTTP.

The transport is the SDK's own (`Server.streamable_http_app`, uvicorn), in its stateless mode:
every HTTP request is served on its own, so any number of instances behind any load balancer
serve any number of agents without sticky sessions. What stateless costs: the server cannot
speak outside a request, so there is no notifications/tools/list_changed push (a server that
connects in the background joins the description of the next tools/list) and no server-to-client
request; notifications that belong to a request (progress) still reach the client on that
request's SSE response, which is why responses are SSE streams, not `json_response`.

One process has one `CodeMode` (runtime/frontends/serve_host.py's `ServeHost`) shared by all its clients: the
upstream MCP sessions are pooled per instance and authenticate with the instance's own
.mcp.json credentials, never the client's, so one instance serves one credential set. Every
codemode.run still gets a fresh sandbox (§1.4). A client proves itself with `Authorization:
Bearer <token>` (`--auth-token` / CODEMODE_AUTH_TOKEN); whoever holds the token runs code with
those credentials, so an address beyond this machine is refused without one (§11).

In front of the SDK's app, `Gate` (runtime/frontends/http_gate.py) checks `Host`/`Origin`
(`HostGuard`: DNS rebinding, other sites' pages), the token, and bounds what a client can make the process hold: a request body
(MAX_REQUEST_BYTES, BODY_TIMEOUT_S), the bytes of requests not yet running (MAX_PENDING_BYTES),
the runs waiting for a sandbox worker (runtime/frontends/admission.py: `--max-queued-runs`, taken in turn
client by client) and open connections (runtime/frontends/http_connections.py: `--max-connections`, a
deadline for every request head). Whatever it refuses gets a JSON body saying why and, for a
busy server, `503` with `Retry-After`.

`GET /metrics` answers the host's metrics in the Prometheus text format (runtime/host/metrics.py),
behind the bearer token like everything but /healthz unless `--public-metrics`; a request's W3C
`traceparent` header becomes the parent of its run's span when its `_meta` carries none
(runtime/host/telemetry_serve.py, docs/observability.md).

Nothing heavy is imported at module level (the standard library and small runtime modules):
the CLI parses `--http` with `parse_listen`, and `serve_http` runs the token and exposure
checks (runtime/frontends/http_access.py) before it imports uvicorn, the SDK or the CodeMode.
This module starts the server: the socket, uvicorn, the gate, shutdown on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.runtime.frontends.admission import Admission
from codemode_gen.runtime.frontends.http_access import (
    TOKEN_ENV,
    HostGuard,
    check_exposure,
    is_loopback_address,
    resolve_token,
)
from codemode_gen.runtime.frontends.http_gate import MAX_REQUEST_BYTES, MCP_PATH, METRICS_PATH, Gate
from codemode_gen.runtime.frontends.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME
from codemode_gen.runtime.host import otel_setup, telemetry_serve
from codemode_gen.runtime.host.offload import Offload

if TYPE_CHECKING:
    from codemode_gen.host_options import HostOptions

__all__ = ["DEFAULT_MAX_QUEUED_RUNS", "HttpOptions", "serve_http"]

# After SIGTERM/SIGINT: how long runs in flight may go on finishing before they are cancelled and
# the upstream servers are stopped (keep it under the process manager's stop timeout, e.g.
# systemd's TimeoutStopSec, default 90 s).
SHUTDOWN_GRACE_S = 20
# How long an idle client connection is kept open: longer than a proxy keeps its idle upstream
# connections (nginx's upstream keepalive_timeout defaults to 60 s), so the proxy closes them
# first and never sends a request on one we are closing (uvicorn's default, 5 s, invites 502s).
KEEP_ALIVE_S = 75
# Runs waiting for a sandbox worker when the operator sets none (--max-queued-runs); a client
# may hold a quarter of them (at least one), so one client cannot fill the queue alone.
DEFAULT_MAX_QUEUED_RUNS = 64
QUEUED_RUNS_PER_CLIENT_SHARE = 4


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


def _resolve(host: str, port: int) -> tuple[Any, ...]:
    """What `host:port` binds to: (family, type, proto, canonname, address)."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, IndexError) as exc:
        raise UserError(
            f"cannot listen on {host}:{port}: {exc}", hint="pass an address of this machine"
        ) from None


def _bind(resolved: tuple[Any, ...], host: str, port: int) -> socket.socket:
    """A listening socket bound here (so `port` 0 is known before uvicorn starts)."""
    family, kind, proto, _, address = resolved
    try:
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise UserError(
            f"cannot listen on {host}:{port}: {exc}", hint="pass an address of this machine"
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="pick another port (0 picks a free one)",
        ) from None
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
    token = resolve_token(
        auth_token, os.environ if environ is None else environ, allow_unauthenticated
    )
    resolved = _resolve(bind_host, port)
    bound = str(resolved[4][0])
    check_exposure(bound, token, allow_unauthenticated, shown=bind_host)
    sock = _bind(resolved, bind_host, port)
    loopback = is_loopback_address(bound)
    guard = HostGuard(loopback, http.allowed_hosts, http.allowed_origins)

    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from codemode_gen.host_options import HostOptions
    from codemode_gen.runtime.frontends.http_connections import (
        ConnectionLimits,
        connection_protocol,
        default_max_connections,
    )
    from codemode_gen.runtime.frontends.serve import build_server
    from codemode_gen.runtime.frontends.serve_host import ServeHost, log_line

    telemetry_serve.install_log_handler(
        log_line
    )  # warnings of the runtime as serve's lines, with trace ids
    if token is None:
        log_line(
            f"no bearer token ({TOKEN_ENV} unset): anyone who can reach {bind_host} can run scripts"
            + (
                " (only programs on this machine: it is a loopback address)"
                if loopback
                else " (--allow-unauthenticated: something in front must authenticate)"
            )
        )
    if (options or HostOptions()).state_secret is None:
        log_line(
            "no --state-secret (CODEMODE_STATE_SECRET unset): a run that waits for an MCP 2026-07-28 client's "
            "approval resumes only in this process; behind a load balancer give every instance the same secret"
        )
    host = ServeHost(
        config,
        out,
        tool_name=tool_name,
        prompt_budget=prompt_budget,
        options=options or HostOptions(),
        announce=False,
    )
    host.check()
    server = build_server(host)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=False,  # SSE: a request's progress notifications reach its client
        host=bind_host,
        max_request_body_size=MAX_REQUEST_BYTES,
        # `Gate` checks Host and Origin for every path (the SDK's check covers only /mcp and
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
        http.max_connections if http.max_connections is not None else default_max_connections(),
        log=log_line,
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

    gate = Gate(app, host, token, guard, admission, offload, public_metrics=http.public_metrics)
    gate.metrics()  # the admission queue's gauge from the start
    if http.public_metrics:
        log_line(f"GET {METRICS_PATH} is served without the bearer token (--public-metrics)")
    listener = Listener(
        uvicorn.Config(
            gate,
            http=connection_protocol(connections),
            log_level="warning",
            access_log=False,
            lifespan="on",
            ws="none",
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
    )

    def on_signal() -> None:
        if listener.should_exit:  # a second signal: stop waiting for the runs in flight
            listener.force_exit = True
        listener.should_exit = True

    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(
            NotImplementedError, RuntimeError, ValueError
        ):  # not main thread / Windows
            loop.add_signal_handler(sig, on_signal)
            handled.append(sig)
    # An instance behind a load balancer warms at once (/healthz turns 200 when it is ready).
    host.start()
    try:
        await listener.serve(sockets=[sock])
    finally:
        await host.aclose()
        await offload.aclose()
        await asyncio.to_thread(
            otel_setup.shutdown
        )  # the last runs' spans, before the process ends
        for sig in handled:
            loop.remove_signal_handler(sig)
        sock.close()
