"""Every private name of the `mcp` SDK that codemode-gen relies on, in one place.

The SDK (mcp 2.3) offers no public equivalent for these; each use is kept instead of copying
the SDK's code, so its fixes (the cross-platform kill of a server's process tree, the OAuth
flow) keep reaching us. Because a private name may move in any release, pyproject.toml pins
`mcp` to the tested minor, and tests/client/test_mcp_private.py imports each name listed in
`PRIVATE_NAMES` and checks its signature: an SDK that moved one fails there, by name, before
anything else does.

- stdio process lifecycle (`mcp.client.stdio`): the public `stdio_client` owns both the process
  and the pipe tasks; client/stdio.py replaces only the pipe tasks (a hardened frame reader),
  so it needs the spawn and the spec's shutdown escalation (close stdin, SIGTERM, SIGKILL of
  the tree) as separate steps: `spawn_server_process`, `drain_stdout`, `stop_server_process`.
- OAuth provider hooks (`mcp.client.auth.OAuthClientProvider`): the provider's only public
  entry point is `async_auth_flow`; refreshing when a 401 says so, persisting the expiry and
  never opening a browser outside `auth login` need the steps inside it, which
  client/oauth_provider.py overrides (`_initialize`, `_handle_refresh_response`, `_auth_flow`)
  or calls (`_refresh_token`, `_add_auth_header`). Overrides cannot be wrapped here; they are
  listed so the test guards them too.
- the server session's connection (`mcp.server.session.ServerSession._connection`):
  `serve` keeps approval memory per client connection, and the SDK builds a new session object
  for every request with no public accessor for the connection behind it: `session_connection`.

The SDK is imported inside each function: `serve` and a cold `record` start servers while the
SDK is still importing (client/transports.py), so importing this module must not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

__all__ = [
    "PRIVATE_NAMES",
    "PrivateName",
    "drain_stdout",
    "session_connection",
    "spawn_server_process",
    "stop_server_process",
]


class PrivateName:
    """One private SDK name we use: where it lives, what it must look like, who uses it."""

    def __init__(
        self, module: str, qualname: str, params: tuple[str, ...] | None, kind: str, used_by: str
    ) -> None:
        self.module = module
        self.qualname = qualname
        self.params = params  # parameter names, in order; None for an instance attribute
        self.kind = kind  # "coroutine" | "async generator" | "function" | "attribute"
        self.used_by = used_by

    def __repr__(self) -> str:
        return f"{self.module}.{self.qualname}"


_AUTH = "mcp.client.auth"
_PROVIDER = "client/oauth_provider.py"
PRIVATE_NAMES: tuple[PrivateName, ...] = (
    PrivateName(
        "mcp.client.stdio",
        "_get_executable_command",
        ("command",),
        "coroutine",
        "spawn_server_process",
    ),
    PrivateName(
        "mcp.client.stdio",
        "_create_platform_compatible_process",
        ("command", "args", "env", "errlog", "cwd"),
        "coroutine",
        "spawn_server_process",
    ),
    PrivateName("mcp.client.stdio", "_drain_stdout", ("process",), "coroutine", "drain_stdout"),
    PrivateName(
        "mcp.client.stdio", "_stop_server_process", ("process",), "coroutine", "stop_server_process"
    ),
    PrivateName(_AUTH, "OAuthClientProvider._initialize", ("self",), "coroutine", _PROVIDER),
    PrivateName(
        _AUTH,
        "OAuthClientProvider._handle_refresh_response",
        ("self", "response"),
        "coroutine",
        _PROVIDER,
    ),
    PrivateName(
        _AUTH, "OAuthClientProvider._auth_flow", ("self", "request"), "async generator", _PROVIDER
    ),
    PrivateName(_AUTH, "OAuthClientProvider._refresh_token", ("self",), "coroutine", _PROVIDER),
    PrivateName(
        _AUTH, "OAuthClientProvider._add_auth_header", ("self", "request"), "function", _PROVIDER
    ),
    PrivateName(
        "mcp.server.session", "ServerSession._connection", None, "attribute", "session_connection"
    ),
)


async def spawn_server_process(params: StdioServerParameters, *, errlog: TextIO) -> Any:
    """Start a stdio server exactly as the SDK's `stdio_client` does: the platform's command
    form, the SDK's environment whitelist plus `params.env`, its own process group (POSIX) or
    job object (Windows), stderr to `errlog`."""
    from mcp.client import stdio as sdk

    command = await sdk._get_executable_command(params.command)
    return await sdk._create_platform_compatible_process(
        command=command,
        args=params.args,
        env=sdk.get_default_environment() | (params.env or {}),
        errlog=errlog,
        cwd=params.cwd,
    )


async def drain_stdout(process: Any) -> None:
    """Read and discard what is left on the server's stdout (shielded), so a server flushing
    output at shutdown does not block on a full pipe and miss its chance to exit."""
    from mcp.client import stdio as sdk

    await sdk._drain_stdout(process)


async def stop_server_process(process: Any) -> None:
    """The spec's shutdown escalation, bounded: close stdin, wait, then kill the process tree."""
    from mcp.client import stdio as sdk

    await sdk._stop_server_process(process)


def session_connection(session: Any) -> Any:
    """The per-client connection behind a server-side session object (None if there is none):
    the SDK makes a new session object per request, the connection lives as long as the client."""
    return getattr(session, "_connection", None)
