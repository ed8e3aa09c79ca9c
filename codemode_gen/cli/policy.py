"""`codemode-gen policy`: every recorded tool's approval policy and why; and the short summary
`record` and `generate` print.

A new project's first run should not be a wall of denials nobody saw coming: most servers
annotate nothing, and "auto" asks before every call of such a tool (runtime/host/approval.py says
why), which is a denial wherever nobody can be asked. So the commands that see the tools first
say which ones will ask, and the codemode.toml lines that decide them for good; this command
prints the whole table (server, tool, policy, why: an annotation, a codemode.toml line, or the
default for unannotated tools), offline, from codemode.toml and fixtures/ as `generate` reads
them. What a host's flags do on top (`--approve-all` on `run` and `serve`) is not in the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode_gen.cli.options import fixtures_read_option, project_config_option

if TYPE_CHECKING:
    from codemode_gen.config import Settings
    from codemode_gen.generator.fixtures import FixtureSet
    from codemode_gen.runtime.host.approval_policy import ToolPolicy

# Bounds the tools the record/generate summary lists (one codemode.toml line each): a catalog of
# hundreds of unannotated tools would bury the rest of the output; `codemode-gen policy` has them all.
MAX_SUMMARY_TOOLS = 8
# Bounds a name in a table column (they come from servers): the rest of the row stays readable.
MAX_COLUMN_CHARS = 40

_WILL_ASK = ("ask", "ask-once")


def policy_rows(settings: Settings, sets: Iterable[FixtureSet]) -> list[ToolPolicy]:
    """The policy table of the recorded servers `sets` under `settings`."""
    from codemode_gen.runtime.host.approval_policy import policy_table

    return policy_table(settings, [(s.config_id, s.tools) for s in sets])


def _show(text: str) -> str:
    """A server's name for a terminal: hidden characters escaped (codemode_gen/display.py);
    JSON-style escapes are TOML's too, so a quoted key stays what it names."""
    from codemode_gen.display import escape_hidden

    return escape_hidden(text)


def summary_lines(rows: Sequence[ToolPolicy], settings: Settings | None = None) -> list[str]:
    """What `record` and `generate` print: how many tools will ask, then at most
    MAX_SUMMARY_TOOLS of them as the codemode.toml lines that allow them, each with its policy
    and reason. `settings` (their file) says where the lines go when the table exists already."""
    from codemode_gen.runtime.host.approval_policy import toml_line

    asking = [r for r in rows if r.policy in _WILL_ASK]
    denied = sum(1 for r in rows if r.policy == "deny")
    if not asking:
        rest = f"{len(rows) - denied} sent at once" + (f", {denied} denied" if denied else "")
        return [
            f"approval: no tool asks the user before a call ({rest}; `codemode-gen policy` shows why)"
        ]
    every = sum(1 for r in asking if r.policy == "ask")
    when = (
        "before every call"
        if every == len(asking)
        else "once per session"
        if not every
        else f"({every} before every call, {len(asking) - every} once per session)"
    )
    lines = [
        f"approval: {len(asking)} of {len(rows)} tools ask the user {when}; where nobody can be asked"
        " (`run` without a terminal, a client without elicitation) their calls are denied.",
        '  To decide for good, add to codemode.toml ("allow": never ask, "ask-once": once per session,'
        ' "deny": hide the tool):',
    ]
    table = None
    for row in asking[:MAX_SUMMARY_TOOLS]:
        header, entry = toml_line(row.config_id, row.tool_name, "allow").split("] ", 1)
        if header != table:
            table = header
            lines.append(f"    {_show(header)}]{_table_note(settings, row.config_id)}")
            written = _written_default(settings, row.config_id)
            if isinstance(
                written, str
            ):  # `approval = "ask"` under [servers.<id>]: moves into the table
                lines.append(
                    f'    "*" = "{written}"  # instead of approval = "{written}" under {_show(header.removesuffix(".approval"))}]'
                )
        lines.append(f'    {_show(entry)}  # now "{row.policy}": {_show(row.detail)}')
    more = len(asking) - MAX_SUMMARY_TOOLS
    tail = f"and {more} more: " if more > 0 else ""
    lines.append(f"  {tail}`codemode-gen policy` lists every tool's policy and why.")
    return lines


def _written_default(settings: Settings | None, config_id: str) -> object:
    """What codemode.toml wrote as `[servers.<id>] approval` (a string, a table), else None."""
    source = settings.source if settings is not None else None
    servers = source.data.get("servers") if source is not None else None
    table = servers.get(config_id) if isinstance(servers, dict) else None
    return table.get("approval") if isinstance(table, dict) else None


def _table_note(settings: Settings | None, config_id: str) -> str:
    """A note after a table header the file has already (TOML takes a table once)."""
    return (
        "  # already in codemode.toml: add the lines there"
        if isinstance(_written_default(settings, config_id), dict)
        else ""
    )


def table_lines(rows: Sequence[ToolPolicy], settings_name: str) -> list[str]:
    """The policy table for people: one row per tool, columns aligned."""

    def cell(text: str) -> str:
        text = _show(text)
        return text if len(text) <= MAX_COLUMN_CHARS else text[: MAX_COLUMN_CHARS - 1] + "…"

    def why(row: ToolPolicy) -> str:
        if row.source != "config":
            return f"{row.source}: {_show(row.detail)}"
        where = f" ({settings_name}:{row.line})" if row.line is not None else ""
        return f"config{where}: {_show(row.detail)}"

    body = [(cell(r.config_id), cell(r.tool_name), r.policy, why(r)) for r in rows]
    head = ("server", "tool", "policy", "why")
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(3)]
    return [
        "  ".join(
            value.ljust(widths[i]) if i < 3 else value for i, value in enumerate(line)
        ).rstrip()
        for line in [head, *body]
    ]


@click.command("policy")
@project_config_option
@click.option(
    "--settings",
    "settings_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Project settings [default: the codemode.toml beside --config, if present].",
)
@fixtures_read_option
@click.option(
    "--server",
    "servers",
    multiple=True,
    metavar="ID",
    help="Only this recorded server (repeatable). Default: every recorded server.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='Print the table as JSON: [{"server", "tool", "policy", "why", "detail", "line"?}].',
)
def policy(
    config: Path,
    settings_path: Path | None,
    fixtures_dir: Path | None,
    servers: tuple[str, ...],
    as_json: bool,
) -> int:
    """Print every recorded tool's approval policy and why (annotation, codemode.toml line, default).

    Offline, like `generate`: reads codemode.toml and fixtures/. "ask" tools wait for the user's
    yes before every call, "ask-once" before the first per session; "deny" tools are hidden.
    Change one with a line in codemode.toml: [servers.<id>.approval] <tool> = "allow".
    """
    from codemode_gen.errors import UserError
    from codemode_gen.generator.fixtures import load_fixtures
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.mcp_json import server_ids

    settings = load_project_settings(config, settings_path, fixtures_dir=fixtures_dir)
    fixtures = fixtures_dir if fixtures_dir is not None else settings.fixtures_dir
    sets = load_fixtures(fixtures)
    recorded = [s.config_id for s in sets]
    for sid in servers:
        if sid not in recorded:
            raise UserError(
                f"--server {sid}: not recorded in {fixtures}",
                hint=f"recorded servers: {', '.join(recorded)}; record it with `codemode-gen record --server {sid}`",
            )
    for sid in server_ids(config) or ():
        if sid not in recorded and (not servers or sid in servers):
            click.echo(
                f"note: {sid} is configured but not recorded: not in the table"
                f" (`codemode-gen record --server {sid}`)",
                err=True,
            )
    rows = policy_rows(settings, [s for s in sets if not servers or s.config_id in servers])
    if as_json:
        click.echo(json.dumps([r.to_json() for r in rows], ensure_ascii=False, indent=1))
        return 0
    name = settings.path.name if settings.path is not None else "codemode.toml"
    for line in table_lines(rows, name):
        click.echo(line)
    if any(r.source == "default" for r in rows):
        click.echo(
            'default: the tool has no annotations that say it only reads or destroys nothing, and "auto"'
            " asks before every call of such a tool (docs/config.md says why)."
        )
    counts = {
        p: sum(1 for r in rows if r.policy == p) for p in ("allow", "ask", "ask-once", "deny")
    }
    click.echo(
        f"{len(rows)} tools: "
        + ", ".join(f"{n} {p}" for p, n in counts.items() if n)
        + '. Change one in codemode.toml: [servers.<id>.approval] <tool> = "allow" | "ask" | "ask-once" | "deny".'
    )
    return 0
