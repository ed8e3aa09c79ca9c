"""Who may reach `serve --http`: the address it listens on, the bearer token, and the
`Host`/`Origin` a request may carry (§11; docs/deploy.md).

Whoever holds the token runs code with the instance's credentials, so an address beyond this
machine is refused without one (`check_exposure`), the token comes from the environment rather
than the command line when it can (`resolve_token`), and a request whose `Host` or `Origin` is
not this server's (DNS rebinding, another site's page) is refused before anything else
(`HostGuard`, which the gate in runtime/frontends/http_gate.py asks first). These checks run
before uvicorn, the SDK or the CodeMode are imported: only the standard library here.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping

from codemode_gen.errors import UserError
from codemode_gen.runtime.jsonsafe import safe_name

__all__ = [
    "TOKEN_ENV",
    "HostGuard",
    "check_exposure",
    "is_loopback",
    "is_loopback_address",
    "parse_listen",
    "resolve_token",
    "valid_origin",
]

# The environment variable that carries the bearer token (keeps it out of `ps` and shell history).
TOKEN_ENV = "CODEMODE_AUTH_TOKEN"
# What an HTTP header can carry as a bearer credential: visible ASCII, no spaces (RFC 6750's
# b64token is a subset); bounds the header the check reads, too.
TOKEN_RE = re.compile(r"[\x21-\x7e]{1,4096}\Z")
# Bounds a header value quoted in a refusal (the client chose it).
MAX_SHOWN_HEADER_CHARS = 200


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
            raise ValueError(
                f"{value!r}: expected HOST:PORT, e.g. 127.0.0.1:8000 (port 0 picks a free one)"
            )
        if ":" in host:
            raise ValueError(f"{value!r}: write an IPv6 address as [ADDRESS]:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(
            f"{value!r}: the port must be a number from 0 to 65535 (0 picks a free one)"
        )
    return host, int(port_text)


def is_loopback_address(text: str) -> bool:
    """Whether `text` is an IP address of this machine's loopback interface: 127.0.0.0/8, ::1,
    or either written as an IPv4-mapped IPv6 address (::ffff:127.0.0.2)."""
    try:
        address = ipaddress.ip_address(
            text.split("%", 1)[0]
        )  # an IPv6 zone (%lo) names no other host
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


def resolve_token(
    option: str | None, environ: Mapping[str, str], allow_unauthenticated: bool
) -> str | None:
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


def check_exposure(
    bound: str, token: str | None, allow_unauthenticated: bool, *, shown: str | None = None
) -> None:
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

    def __init__(
        self, loopback: bool, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()
    ) -> None:
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
                return (
                    421,
                    "misdirected_request",
                    (
                        f"Host {shown!r} is not accepted: this server listens on a loopback address and answers "
                        "only requests for localhost or a loopback address (DNS-rebinding protection); if a proxy "
                        f"forwards this name, start serve with --allowed-host {hint_name}"
                        if self.loopback
                        else f"Host {shown!r} is not one of the --allowed-host names this server was started with; "
                        f"add --allowed-host {hint_name} if it should be"
                    ),
                )
            if name == b"origin" and not self.origin_allowed(raw.decode("latin-1")):
                shown = safe_name(raw.decode("latin-1"), MAX_SHOWN_HEADER_CHARS)
                return (
                    403,
                    "forbidden_origin",
                    (
                        f"Origin {shown!r} is not accepted: a web page from another site may not call this "
                        "server (MCP transport security); if a page of that origin is a client you trust, "
                        f"start serve with --allowed-origin {shown}"
                    ),
                )
        return None
