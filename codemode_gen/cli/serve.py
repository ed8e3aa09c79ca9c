"""`codemode-gen serve`: expose Code Mode to an agent host as an MCP server over stdio, or over
Streamable HTTP with `--http HOST:PORT` (runtime/frontends/serve_http.py; docs/deploy.md).

Over stdio, stdout carries the MCP protocol, so nothing else may be printed there. A
configuration mistake does not stop the server: a client shows our stderr only in a log view
and takes a server that exits for a flaky connection, so the error goes to stderr *and* into
the tool's description and every run (runtime/frontends/serve.py).

`--print-prompt` and `--print-config` answer on stdout and exit without serving: the first
shows exactly what the model will read, the second how to register this very command (with
absolute paths, since clients launch it from their own working directory and without the
project's virtualenv).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shlex
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from codemode_gen.children import python_module_command
from codemode_gen.cli.options import config_option, host_options, out_option
from codemode_gen.host_options import HostOptions
from codemode_gen.runtime import limits as limit_defaults
from codemode_gen.runtime.frontends.prompt_defaults import (
    DEFAULT_PROMPT_BUDGET,
    DEFAULT_TOOL_NAME,
    MIN_PROMPT_BUDGET,
)

# Option defaults come from runtime/frontends/prompt_defaults.py, not runtime/frontends/prompt.py, and everything of
# the runtime is imported where it is used: serve must answer `initialize` about as fast as a
# plain MCP server, before anything needs the prompt renderer or the sandbox.

# The key the snippets register the server under in each client's config.
SERVER_KEY = "codemode"
# Codex gives a server this long to start and list its tools (its default, 10 s, is close to
# what a cold start with imports and the sandbox's warm-up takes on a slow machine).
CODEX_STARTUP_TIMEOUT_SEC = 30
# Codex cuts a tool call after tool_timeout_sec (default 60 s); a run may take up to the hard
# maximum timeoutMs and answers within 1.5x of it (the run's watchdog), so allow that.
CODEX_TOOL_TIMEOUT_SEC = math.ceil(limit_defaults.HARD_MAX_TIMEOUT_MS / 1000 * 1.5)
CLIENTS = ("claude-code", "cursor", "codex", "json")


def _check_tool_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from codemode_gen.runtime.frontends.serve import TOOL_NAME_RE

    if not TOOL_NAME_RE.match(value):
        raise click.BadParameter(
            f"{value!r} is not a valid MCP tool name: use 1-128 characters from A-Z a-z 0-9 . _ - "
            "(SEP-986); for model APIs that reject dots (OpenAI), use codemode_run",
        )
    return value


def _check_listen(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[str, int] | None:
    if value is None:
        return None
    from codemode_gen.runtime.frontends.http_access import parse_listen

    try:
        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _check_host(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    for host in value:
        text = host.strip()
        if not text or any(c.isspace() or c in "/@" for c in text):
            raise click.BadParameter(
                f"{host!r}: give a host name as a client sends it in Host, e.g. "
                "codemode.example.com or codemode.example.com:443 (`*` for any)"
            )
    return value


def _check_origin(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    from codemode_gen.runtime.frontends.http_access import valid_origin

    for origin in value:
        if not valid_origin(origin):
            raise click.BadParameter(
                f"{origin!r}: give an origin as a browser sends it, "
                "scheme://host[:port] (e.g. https://app.example.com), or `*` for any"
            )
    return value


def self_command() -> list[str]:
    """How to start the codemode-gen that is running now, from any directory and environment.

    The console script by absolute path when that is how we were started (a client has no
    virtualenv on its PATH), else this interpreter with `-P -m codemode_gen`.
    """
    argv0 = sys.argv[0] if sys.argv else ""
    if Path(argv0).name in ("codemode-gen", "codemode-gen.exe"):
        found = (
            argv0
            if (os.sep in argv0 or (os.altsep and os.altsep in argv0))
            else shutil.which(argv0)
        )
        if found and os.path.isfile(found):
            return [os.path.abspath(found)]
    return python_module_command(
        "codemode_gen", absolute=True
    )  # -P: the client's cwd cannot shadow it


def serve_command(
    config: Path,
    out: Path | None,
    tool_name: str,
    prompt_budget: int,
    options: HostOptions | None = None,
) -> list[str]:
    """The full `serve` command line with absolute paths (options only when not the default)."""
    argv = [*self_command(), "serve", "--config", os.path.abspath(config)]
    if out is not None:
        argv += ["--out", os.path.abspath(out)]
    if tool_name != DEFAULT_TOOL_NAME:
        argv += ["--tool-name", tool_name]
    if prompt_budget != DEFAULT_PROMPT_BUDGET:
        argv += ["--prompt-budget", str(prompt_budget)]
    argv += (options or HostOptions()).argv()
    return argv


def _toml_string(text: str) -> str:
    # JSON escapes are TOML basic-string escapes; TOML also forbids a raw DEL.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def client_snippet(client: str, argv: list[str]) -> str:
    """What to paste (or run) to register `argv` as an MCP server in `client`."""
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    if client == "claude-code":
        spec = json.dumps({"type": "stdio", **entry}, ensure_ascii=False)
        return f"claude mcp add-json -s user {SERVER_KEY} {shlex.quote(spec)}\n"
    if client == "codex":
        args = ", ".join(_toml_string(a) for a in entry["args"])
        return (
            "# ~/.codex/config.toml\n"
            f"[mcp_servers.{SERVER_KEY}]\n"
            f"command = {_toml_string(entry['command'])}\n"
            f"args = [{args}]\n"
            f"startup_timeout_sec = {CODEX_STARTUP_TIMEOUT_SEC}\n"
            f"tool_timeout_sec = {CODEX_TOOL_TIMEOUT_SEC}\n"
            # Codex sends its first model request without waiting for servers still starting:
            # without this the model's first turn may have no codemode tool.
            "required = true\n"
        )
    # cursor (~/.cursor/mcp.json) and the generic format share Claude Desktop's shape
    return json.dumps({"mcpServers": {SERVER_KEY: entry}}, ensure_ascii=False, indent=2) + "\n"


def _print_prompt(
    config: Path, out: Path | None, tool_name: str, prompt_budget: int, options: HostOptions
) -> None:
    from codemode_gen.runtime.frontends.prompt import prompt_size
    from codemode_gen.runtime.frontends.serve_host import load_host, tool_description

    cm, problem = load_host(
        config,
        out,
        HostOptions(
            typecheck=options.typecheck,
            approve_all=options.approve_all,
            trace=options.trace,
            max_response_chars=options.max_response_chars,
        ),
    )
    if problem is not None:
        click.echo(problem.render(), err=True)
    text = tool_description(
        cm,
        problem,
        tool_name=tool_name,
        budget=prompt_budget,
        on_error=lambda exc: click.echo(exc.render(), err=True),
    )
    sys.stdout.write(text)
    sys.stdout.flush()
    size = prompt_size(text)
    click.echo(
        f"{size['chars']} characters, ~{size['approxTokens']} tokens (chars/4); budget {prompt_budget}",
        err=True,
    )


@click.command(name="serve")
@config_option
@out_option
@click.option(
    "--tool-name",
    "tool_name",
    default=DEFAULT_TOOL_NAME,
    show_default=True,
    callback=_check_tool_name,
    help="Name of the one tool (codemode_run for clients whose model API rejects dots).",
)
@click.option(
    "--prompt-budget",
    "prompt_budget",
    type=click.IntRange(min=MIN_PROMPT_BUDGET),
    default=DEFAULT_PROMPT_BUDGET,
    show_default=True,
    help="Characters the tool description may use (Claude Code cuts at 16,384).",
)
@click.option(
    "--print-prompt",
    "print_prompt",
    is_flag=True,
    help="Print the tool description exactly as served (its size on stderr) and exit.",
)
@click.option(
    "--print-config",
    "print_config",
    type=click.Choice(CLIENTS),
    default=None,
    help="Print the snippet that registers this serve command in a client, and exit.",
)
@host_options("serve")
@click.option(
    "--http",
    "listen",
    default=None,
    metavar="HOST:PORT",
    callback=_check_listen,
    help="Serve over Streamable HTTP at http://HOST:PORT/mcp instead of stdio (stateless; "
    "port 0 picks a free one; GET /healthz for load balancers). See docs/deploy.md.",
)
# CODEMODE_AUTH_TOKEN is read by serve_http itself, not by click: click takes an empty variable
# for an unset one, and an empty token must be refused, not mean "no authentication".
@click.option(
    "--auth-token",
    "auth_token",
    default=None,
    metavar="TOKEN",
    help="With --http: require `Authorization: Bearer TOKEN` on every request; default: the "
    "CODEMODE_AUTH_TOKEN environment variable (prefer it: a command line is visible to "
    "other users). An empty token is refused.",
)
@click.option(
    "--allow-unauthenticated",
    "allow_unauthenticated",
    is_flag=True,
    help="With --http: serve without a token on a non-loopback address (only behind something "
    "that authenticates), or with CODEMODE_AUTH_TOKEN set but empty.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    callback=_check_host,
    help="With --http: also accept requests whose Host header is NAME (e.g. the name a reverse "
    "proxy forwards); repeatable; `*` accepts any. On a loopback address only localhost and "
    "loopback addresses are accepted otherwise (DNS-rebinding protection).",
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    callback=_check_origin,
    help="With --http: also accept requests from web pages of ORIGIN (scheme://host[:port]); "
    "repeatable; `*` accepts any. Requests with another Origin header are refused.",
)
@click.option(
    "--max-connections",
    "max_connections",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --http: connections open at once; beyond it the one idle longest is closed "
    "(default: half the open-file limit, at most 1024).",
)
@click.option(
    "--max-queued-runs",
    "max_queued_runs",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="With --http: runs waiting for a sandbox worker, all clients together (a client may "
    "hold a quarter); more are answered 503 with Retry-After (default: 64).",
)
@click.option(
    "--public-metrics",
    "public_metrics",
    is_flag=True,
    help="With --http: serve GET /metrics (Prometheus text format) without the bearer token, for a "
    "scraper that cannot send one; it shows run counts and tool names, no script or tool data. "
    "See docs/observability.md.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    config: Path,
    out: Path | None,
    tool_name: str,
    prompt_budget: int,
    print_prompt: bool,
    print_config: str | None,
    listen: tuple[str, int] | None,
    auth_token: str | None,
    allow_unauthenticated: bool,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    max_connections: int | None,
    max_queued_runs: int | None,
    public_metrics: bool,
    options: HostOptions,
) -> int:
    """Serve one MCP tool, codemode.run, over stdio or Streamable HTTP (sessions are reused across runs)."""
    from codemode_gen.runtime.frontends.input_required import resolve_state_secret

    options = replace(options, state_secret=resolve_state_secret(options.state_secret, os.environ))
    if listen is None:
        # (CODEMODE_AUTH_TOKEN may be set for other reasons; stdio ignores it.)
        given = {
            "--auth-token": auth_token is not None,
            "--allow-unauthenticated": allow_unauthenticated,
            "--allowed-host": bool(allowed_hosts),
            "--allowed-origin": bool(allowed_origins),
            "--max-connections": max_connections is not None,
            "--max-queued-runs": max_queued_runs is not None,
            "--public-metrics": public_metrics,
        }
        for flag, present in given.items():
            if present:
                raise click.UsageError(f"{flag} only applies with --http HOST:PORT")
    elif print_config is not None:
        raise click.UsageError(
            "--print-config registers a stdio server; for --http, give your client the URL "
            "(and the token) instead"
        )
    if print_config is not None:
        if not config.is_file():
            click.echo(
                f"warning: {os.path.abspath(config)} does not exist yet; serve will report it",
                err=True,
            )
        argv = serve_command(config, out, tool_name, prompt_budget, options)
        sys.stdout.write(client_snippet(print_config, argv))
        return 0
    if print_prompt:
        _print_prompt(config, out, tool_name, prompt_budget, options)
        return 0
    if listen is not None:
        from codemode_gen.runtime.frontends.serve_http import (
            DEFAULT_MAX_QUEUED_RUNS,
            HttpOptions,
            serve_http,
        )

        http = HttpOptions(
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            max_connections=max_connections,
            max_queued_runs=DEFAULT_MAX_QUEUED_RUNS if max_queued_runs is None else max_queued_runs,
            public_metrics=public_metrics,
        )
        # serve_http checks the token and the exposure first, before anything heavy is imported.
        asyncio.run(
            serve_http(
                config,
                out,
                listen=listen,
                auth_token=auth_token,
                allow_unauthenticated=allow_unauthenticated,
                tool_name=tool_name,
                prompt_budget=prompt_budget,
                options=options,
                http=http,
            )
        )
        return 0
    from codemode_gen.runtime.frontends.serve import serve_stdio

    asyncio.run(
        serve_stdio(config, out, tool_name=tool_name, prompt_budget=prompt_budget, options=options)
    )
    return 0
