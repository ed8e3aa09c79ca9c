"""Options several subcommands share, defined once so their names, defaults and help agree."""

from __future__ import annotations

from pathlib import Path

import click

# Every command finds its project the same way (config.project_settings): codemode.toml is the
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
