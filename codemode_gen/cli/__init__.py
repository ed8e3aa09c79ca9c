"""The `codemode-gen` command line.

Subcommands live one per module in this package and are imported only when invoked, so
`--help` does not pay for importing mcp or jsbox. Each module exposes a click command
named like the file; register it in `_COMMANDS`.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from codemode_gen import __version__
from codemode_gen.errors import UserError

# name -> (module, short help). Order is the order shown in --help.
_COMMANDS: dict[str, tuple[str, str]] = {
    "record": (
        "record",
        "Record MCP servers (tools and sample calls) into fixtures/; --check: report drift.",
    ),
    "generate": (
        "generate",
        "Generate typed modules, codemode.d.ts and manifest.json from fixtures/ into out/.",
    ),
    "run": (
        "run",
        "Run an agent script in a fresh sandbox against the live servers (or --replay recordings).",
    ),
    "check": (
        "check",
        "Type-check an agent script against out/'s declarations (TypeScript compiler).",
    ),
    "skill": (
        "skill",
        "Skills: `skill save NAME SCRIPT` (a script that worked -> skills/NAME.ts), `skill test [NAME]` (--replay).",
    ),
    "policy": (
        "policy",
        "Print every recorded tool's approval policy and why (offline, from codemode.toml and fixtures/).",
    ),
    "serve": (
        "serve",
        "Serve Code Mode (one tool, codemode.run) as an MCP server over stdio or HTTP.",
    ),
    "auth": (
        "auth",
        "Log in to OAuth-protected servers (login SERVER, status, logout SERVER); tokens refresh by themselves.",
    ),
    "replay": (
        "replay",
        "Serve a server's recordings (fixtures/) as an MCP server over stdio, offline.",
    ),
    "types": ("types", "Print a standalone TypeScript .d.ts for any JSON Schema file."),
    "doctor": (
        "doctor",
        "Say which sandbox worker runs scripts (native or Python) and how to build the native one.",
    ),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(f"codemode_gen.cli.{entry[0]}")
        command: click.Command = getattr(module, entry[0])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in _COMMANDS.items()]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="codemode-gen")
def cli() -> None:
    """Turn MCP servers into typed JavaScript APIs and run agent scripts against them."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user mistakes become one message and exit code, never a traceback."""
    try:
        rv: Any = cli.main(args=argv, prog_name="codemode-gen", standalone_mode=False)
    except UserError as exc:
        click.echo(exc.render(), err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
