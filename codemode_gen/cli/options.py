"""Options (and the script argument) several subcommands share, defined once so their names,
defaults, help and messages agree."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from codemode_gen.errors import UserError

# Every command finds its project the same way (mcp_json.project_settings): codemode.toml is the
# one beside --config (else all defaults), and fixtures/ and out/ default to that folder.
config_option = click.option(
    "--config", "config", type=click.Path(path_type=Path), default=Path(".mcp.json"), show_default=True,
    help="MCP server config (.mcp.json / Claude Desktop format); codemode.toml is the one beside it.",
)
# `generate` reads no server: its --config only names the project, by the same rule.
project_config_option = click.option(
    "--config", "config", type=click.Path(path_type=Path), default=Path(".mcp.json"), show_default=True,
    help="The project's MCP config: codemode.toml beside it, fixtures/ and out/ in its folder "
         "(the file itself is not read).",
)
out_option = click.option(
    "--out", "out", type=click.Path(path_type=Path), default=None,
    help="Generated modules (default: codemode.toml's out, else out/).",
)


def read_script(script: str) -> str:
    """The SCRIPT argument of `run` and `check`: a file's UTF-8 text, or stdin for `-`."""
    if script == "-":
        return sys.stdin.read()
    try:
        return Path(script).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{script}: script not found", hint="pass a .js or .ts file, or - to read the script from stdin") from None
    except IsADirectoryError:
        raise UserError(f"{script}: is a directory, not a script", hint="pass a .js or .ts file") from None
    except UnicodeDecodeError:
        raise UserError(f"{script}: not UTF-8 text", hint="save the script as UTF-8") from None
    except OSError as exc:
        raise UserError(f"{script}: cannot read script: {exc.strerror}") from None
