"""Options several subcommands share, defined once so their names, defaults and help agree."""

from __future__ import annotations

from pathlib import Path

import click

config_option = click.option(
    "--config", "config", type=click.Path(path_type=Path), default=Path(".mcp.json"), show_default=True,
    help="MCP server config (.mcp.json / Claude Desktop format).",
)
out_option = click.option(
    "--out", "out", type=click.Path(path_type=Path), default=None,
    help="Generated modules (default: codemode.toml's out, else out/).",
)
