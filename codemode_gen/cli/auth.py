"""`codemode-gen auth`: log in to OAuth-protected remote servers (login, status, logout).

The login is the user's, not the project's: it is kept in the OS keyring or a private file in
the user's config folder (client/tokenstore.py), never in the project, and `record`, `run`,
`serve` and the Python API use and refresh it by themselves (client/oauth.py). Nothing here
prints a token or a secret.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode_gen.cli.options import config_option
from codemode_gen.errors import UserError

if TYPE_CHECKING:
    from codemode_gen.config import ServerConfig


class LoginFailed(UserError):
    """The login ran and did not succeed (refused, timed out, server down): exit 1."""

    exit_code = 1


def _server(config: Path, server_id: str) -> ServerConfig:
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.mcp_json import load_config

    # Its stderr notes would repeat what the other commands say; its errors stop us, except
    # those of other servers' entries.
    problems: dict[str, UserError] = {}
    configs = load_config(
        config, load_project_settings(config, report=lambda line: None), problems=problems
    )
    if server_id in problems:
        raise problems[server_id]
    found = configs.get(server_id)
    if found is None:
        remote = [sid for sid, c in configs.items() if c.transport != "stdio"]
        raise UserError(
            f"no server {server_id!r} in {config}",
            hint=f"servers that can log in: {', '.join(remote)}"
            if remote
            else 'add an http server with a "url" first',
        )
    return found


@click.group("auth")
def auth() -> None:
    """Log in to OAuth-protected servers; tokens are stored for you (OS keyring, else a private
    file in your config folder) and refreshed by record, run and serve."""


@auth.command("login")
@config_option
@click.argument("server_id", metavar="SERVER")
@click.option(
    "--no-browser",
    is_flag=True,
    help="Only print the login URL (a remote shell, or a browser on another machine).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    metavar="SECONDS",
    help="How long to wait for the browser's redirect [default: 300].",
)
def login(config: Path, server_id: str, no_browser: bool, timeout: float | None) -> None:
    """Log in to SERVER (an http/sse server of the MCP config) with OAuth: discovers its
    authorization server, registers a client (or uses oauth.clientId), opens the browser and
    receives the redirect on 127.0.0.1. A client-credentials server is only checked."""
    import anyio

    from codemode_gen.client.oauth_login import LOGIN_TIMEOUT, LoginError
    from codemode_gen.client.oauth_login import login as do_login

    server = _server(config, server_id)

    def say(text: str) -> None:
        click.echo(text, err=True)

    async def go() -> object:
        return await do_login(
            server, open_browser=not no_browser, timeout=timeout or LOGIN_TIMEOUT, say=say
        )

    try:
        result = anyio.run(go)
    except LoginError as exc:
        raise LoginFailed(f"{server_id}: {exc.message}", hint=exc.hint) from None
    from codemode_gen.client.oauth_login import LoginResult

    assert isinstance(result, LoginResult)
    if result.note is not None:
        click.echo(f"{server_id}: {result.note}")
        return
    parts = []
    if result.expires_at is not None:
        parts.append(f"token valid for {max(0, int(result.expires_at - time.time()))} s")
    parts.append(
        "refreshed automatically"
        if result.refreshable
        else "no refresh token: log in again when it expires"
    )
    if result.scope:
        parts.append(f"scopes: {result.scope}")
    click.echo(f"logged in to {server_id} ({'; '.join(parts)})")
    click.echo(f"  stored in {result.where}")


@auth.command("status")
@config_option
def status(config: Path) -> None:
    """Each server's login state: logged in, expiry, scopes, refreshable (never a secret)."""
    from codemode_gen.client.oauth import auth_status
    from codemode_gen.client.tokenstore import TokenStoreError, open_store
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.mcp_json import load_config

    problems: dict[str, UserError] = {}
    configs = load_config(
        config, load_project_settings(config, report=lambda line: None), problems=problems
    )
    if not configs and not problems:
        raise UserError(f'{config}: "mcpServers" is empty', hint="add a server first")
    try:
        store = open_store()
    except TokenStoreError as exc:
        raise UserError(exc.message, hint=exc.hint) from None
    width = max(len(sid) for sid in [*configs, *problems])
    for sid, server in configs.items():
        state = auth_status(server, store)
        click.echo(f"{sid.ljust(width)}  {state.state}")
        for line in state.details:
            click.echo(f"{' ' * width}    {line}")
    for sid, problem in problems.items():  # e.g. a CI entry whose variables are not set here
        click.echo(f"{sid.ljust(width)}  not usable here: {problem.message}")
        if problem.hint:
            click.echo(f"{' ' * width}    fix: {problem.hint}")


@auth.command("logout")
@config_option
@click.argument("server_id", metavar="SERVER")
def logout(config: Path, server_id: str) -> None:
    """Forget SERVER's login, revoking its tokens where the authorization server supports it."""
    import anyio

    from codemode_gen.client.oauth import LogoutResult
    from codemode_gen.client.oauth import logout as do_logout
    from codemode_gen.client.oauth_login import LoginError

    server = _server(config, server_id)

    async def go() -> LogoutResult:
        return await do_logout(server)

    try:
        result = anyio.run(go)
    except LoginError as exc:
        raise UserError(f"{server_id}: {exc.message}", hint=exc.hint) from None
    if not result.existed:
        click.echo(f"{server_id}: not logged in (nothing stored)")
        return
    revoked = (
        f"; revoked at the authorization server: {', '.join(result.revoked)}"
        if result.revoked
        else ""
    )
    click.echo(f"logged out of {server_id}{revoked}")
    if result.note:
        click.echo(f"  note: {result.note}")
