"""The project's settings as every command loads them, tool names checked against fixtures/.

`mcp_json.project_settings` checks codemode.toml on its own (keys, values, server ids of
`.mcp.json`); a tool name can only be checked against the server's tools, which the
recordings hold (fixtures/<id>/tools.json). This module adds that check
(settings_schema.check_tool_names) and applies its outcome: a tool written by its export name
(`delete_file`, as scripts and the prompt show it) is set for its MCP tool (`delete-file`), in
the blocklist, the approval tables and the samples alike, so a `deny` never misses its tool.

Every command that reads codemode.toml (record, generate, run, serve, check, replay) and
`CodeMode.from_config` load it through `load_project_settings`; tests/test_settings_schema.py
checks that nothing else calls `project_settings` or `load_settings`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from codemode_gen.config import Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import TOOLS_FILE
from codemode_gen.generator.names import assign_export_names
from codemode_gen.jsonio import read_json
from codemode_gen.mcp_json import project_settings
from codemode_gen.settings_schema import check_tool_names, tool_entries

__all__ = [
    "UnknownTools",
    "load_project_settings",
    "recorded_export_names",
    "with_recorded_tool_names",
]

#: What a tool name the recording lacks is: an error, or a warning (`record`: the recording is
#: about to be refreshed, and a new tool must not stop it).
UnknownTools = Literal["error", "warn"]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def load_project_settings(
    config_path: Path,
    settings_path: Path | None = None,
    *,
    fixtures_dir: Path | None = None,
    report: Callable[[str], None] = _stderr,
    unknown_tools: UnknownTools = "error",
) -> Settings:
    """`project_settings`, then its tool names checked against the recordings in
    `fixtures_dir` (default: the settings' own); notes and warnings go to `report` (stderr).
    `unknown_tools="warn"`: a name the recording lacks is a warning, not an error (`record`,
    which is about to refresh the recordings)."""
    settings = project_settings(config_path, settings_path)
    return with_recorded_tool_names(
        settings,
        fixtures_dir if fixtures_dir is not None else settings.fixtures_dir,
        report=report,
        unknown_tools=unknown_tools,
    )


def recorded_export_names(fixtures_dir: Path, config_id: str) -> dict[str, str] | None:
    """MCP tool name -> export name for a recorded server (over all its recorded tools, as the
    prompt showed them before any was hidden); None when it has no readable recording."""
    path = fixtures_dir / config_id / TOOLS_FILE
    if not path.is_file():
        return None
    try:
        tools = read_json(path, what="tool list recording")
    except UserError:  # an unreadable recording: generate reports it; here it cannot be used
        return None
    if not isinstance(tools, list):
        return None
    return assign_export_names(
        t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)
    )


def with_recorded_tool_names(
    settings: Settings,
    fixtures_dir: Path,
    *,
    report: Callable[[str], None] = _stderr,
    unknown_tools: UnknownTools = "error",
) -> Settings:
    """`settings` with every tool name checked against the recordings and export names
    replaced by the MCP names they stand for (see the module docstring)."""
    source = settings.source
    if source is None:
        return settings
    servers = sorted({sid for sid, _, _ in tool_entries(source.data)})
    recorded = {sid: recorded_export_names(fixtures_dir, sid) for sid in servers}
    where = {sid: str(fixtures_dir / sid / TOOLS_FILE) for sid in servers}
    check = check_tool_names(source, recorded, where, strict=unknown_tools != "warn")
    for line in check.warnings:
        report(f"warning: {line}")
    for line in check.notes:
        report(f"note: {line}")
    return _renamed(settings, check.renames)


def _renamed(settings: Settings, renames: Mapping[str, Mapping[str, str]]) -> Settings:
    if not renames:
        return settings

    def names(sid: str) -> Mapping[str, str]:
        return renames.get(sid, {})

    servers = {}
    for sid, server in settings.servers.items():
        mapping = names(sid)
        blocklist = tuple(dict.fromkeys(mapping.get(tool, tool) for tool in server.blocklist))
        approval = {mapping.get(tool, tool): setting for tool, setting in server.approval.items()}
        servers[sid] = replace(server, blocklist=blocklist, approval=MappingProxyType(approval))
    samples = tuple(replace(s, tool=names(s.server).get(s.tool, s.tool)) for s in settings.samples)
    return replace(settings, servers=MappingProxyType(servers), samples=samples)
