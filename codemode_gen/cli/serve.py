"""`codemode-gen serve`: expose Code Mode to an agent host as an MCP server over stdio.

stdout carries the MCP protocol, so nothing else may be printed there; configuration mistakes
are reported on stderr (exit 2) before the server starts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from codemode_gen.cli.options import config_option, out_option
from codemode_gen.errors import UserError


@click.command(name="serve")
@config_option
@out_option
def serve(config: Path, out: Path | None) -> int:
    """Serve one MCP tool, codemode.run, over stdio (sessions are reused across runs)."""
    from codemode_gen.runtime.serve import serve_stdio

    if not config.is_file():
        raise UserError(f"{config}: MCP server config not found", hint="pass --config PATH to your .mcp.json")
    asyncio.run(serve_stdio(config, out))
    return 0
