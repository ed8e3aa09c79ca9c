"""`codemode-gen replay`: serve one server's recordings as an MCP server over stdio.

Everything that can be wrong with the command line or the fixtures is checked before the MCP SDK
is even imported, so a client (or `run --replay`) starting a replay of a server that was never
recorded gets one clear line on stderr and exit status 2 at once, not a half-started server.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from codemode_gen.cli.options import project_config_option


@click.command("replay")
@project_config_option
@click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Recorded fixtures [default: codemode.toml `fixtures`, else fixtures/ beside --config].",
)
@click.option(
    "--server",
    "server_id",
    required=True,
    metavar="ID",
    help="The recorded server to replay (its folder in fixtures/, the .mcp.json key).",
)
def replay(config: Path, fixtures_dir: Path | None, server_id: str) -> int:
    """Answer MCP requests from a server's recordings: tools/list from tools.json, tools/call
    with the recorded result of an equal input (else an isError naming the closest ones)."""
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.runtime.frontends.replay import load_replay, serve_stdio

    if fixtures_dir is None:  # codemode.toml only says where the recordings are
        # Its stderr is a client's log: notes would repeat what other commands say; errors stop it.
        fixtures_dir = load_project_settings(config, report=lambda line: None).fixtures_dir
    recording = load_replay(fixtures_dir, server_id)
    asyncio.run(serve_stdio(recording))
    return 0
