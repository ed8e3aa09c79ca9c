"""`codemode-gen record`: record servers from .mcp.json into fixtures/."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from codemode_gen.cli.options import config_option
from codemode_gen.errors import CheckFailed, CheckIncomplete, UserError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from codemode_gen.config import ServerConfig, Settings

# Last status lines of `record --check` (drift.CheckStatus, spelled with spaces): drawn at once.
_CHECK_VERDICTS = ("up to date", "drift", "incomplete", "unreachable", "not recorded")
# Redraws of the live status block are skipped if they come faster than this (seconds):
# bounds terminal churn when a server answers hundreds of probe calls quickly.
_MIN_REDRAW_INTERVAL = 0.05


class _Progress:
    """One status line per server: redrawn in place on a TTY, plain appended lines otherwise."""

    def __init__(self, server_ids: list[str], stream: TextIO, live: bool) -> None:
        self.stream = stream
        self.live = live
        self.lines = {sid: "waiting" for sid in server_ids}
        self.width = max((len(s) for s in server_ids), default=0)
        self.drawn = 0
        self.last_draw = 0.0

    def __call__(self, server_id: str, text: str) -> None:
        first = text.splitlines()[0] if text else ""
        if (
            first.endswith(":") and "; " in first
        ):  # "...; last lines of its stderr:" -> summary has them
            first = first[: first.rindex("; ")] + " (details below)"
        self.lines[server_id] = first
        if not self.live:
            self.stream.write(f"{server_id}: {first}\n")
            self.stream.flush()
            return
        import time

        now = time.monotonic()
        final = first.startswith(("recorded", "failed", *_CHECK_VERDICTS))
        if not final and now - self.last_draw < _MIN_REDRAW_INTERVAL:
            return
        self.last_draw = now
        self._draw()

    def _draw(self) -> None:
        columns = shutil.get_terminal_size((80, 24)).columns
        out = []
        if self.drawn:
            out.append(f"\x1b[{self.drawn}F")  # back to the first line of the block
        for sid, text in self.lines.items():
            line = f"{sid.ljust(self.width)}  {text}"
            if len(line) >= columns:  # a wrapped line would break the cursor arithmetic
                line = line[: max(columns - 2, 1)] + "…"
            out.append(f"\x1b[2K{line}\n")
        self.stream.write("".join(out))
        self.stream.flush()
        self.drawn = len(self.lines)

    def finish(self) -> None:
        if self.live:
            self._draw()


@click.command("record")
@config_option
@click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Fixtures folder [default: codemode.toml `fixtures`, else fixtures/ beside --config].",
)
@click.option(
    "--server",
    "servers",
    multiple=True,
    metavar="ID",
    help="Record (or --check) only this server (repeatable). Default: every configured server.",
)
@click.option(
    "--samples",
    "samples_path",
    type=click.Path(path_type=Path),
    default=None,
    help='Sample calls: a JSON list or JSONL of {"server", "tool", "input", "expect"?}.',
)
@click.option(
    "--no-probe",
    is_flag=True,
    help="Do not call readOnlyHint tools without required arguments automatically.",
)
@click.option(
    "--max-samples",
    type=click.IntRange(min=1),
    default=None,
    help="Recorded calls kept per tool [default: codemode.toml `max_samples`, else 20].",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing: compare the live servers with fixtures/ (tools, schemas, "
    "descriptions, result shapes of read-only samples). Exit 0 match, 1 drift, "
    "3 could not check (unreachable, failed call), 2 configuration error.",
)
def record(
    config: Path,
    fixtures_dir: Path | None,
    servers: tuple[str, ...],
    samples_path: Path | None,
    no_probe: bool,
    max_samples: int | None,
    check: bool,
) -> None:
    """Connect to MCP servers and record their tools and sample calls into fixtures/.

    \b
    Exit status without --check:
      0  every server and every sample call was recorded
      1  a server could not be recorded, or a sample call failed (rejected input, tool
         error, JSON-RPC error, timeout, output breaking its outputSchema); everything
         else was still written
      2  configuration error (.mcp.json, codemode.toml, samples, fixtures folder not writable);
         no server was started

    With --check, nothing is written: each server is compared with its recording (tools added
    or removed; descriptions, titles, annotations, input and output schemas changed; the result
    shapes of recorded samples of readOnlyHint tools, called again) and a report is printed.
    A configured server without fixtures is drift ("not recorded yet"); an unreachable server
    or a failed sample call is not drift but "could not check".

    \b
    Exit status with --check:
      0  every server matches its fixtures
      1  drift in at least one server (whatever else happened)
      2  configuration error (.mcp.json, codemode.toml, --server, fixtures folder)
      3  no drift seen, but a server was unreachable or a sample call failed
    """
    import anyio

    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.generator.record import record_servers
    from codemode_gen.generator.record_outcome import ServerOutcome
    from codemode_gen.generator.samples import load_samples_file
    from codemode_gen.mcp_json import load_config

    # Tool names unknown to the recordings are warnings here: recording refreshes them.
    settings = load_project_settings(config, fixtures_dir=fixtures_dir, unknown_tools="warn")
    configs = load_config(config, settings)
    if not configs:
        raise UserError(f'{config}: "mcpServers" is empty', hint="add a server to record")
    for sid in servers:
        if sid not in configs:
            raise UserError(
                f"--server {sid}: no such server in {config}",
                hint=f"configured servers: {', '.join(configs)}",
            )
    selected = {sid: cfg for sid, cfg in configs.items() if not servers or sid in servers}
    target = fixtures_dir if fixtures_dir is not None else settings.fixtures_dir

    if check:
        given = [
            name
            for name, value in (
                ("--samples", samples_path),
                ("--no-probe", no_probe or None),
                ("--max-samples", max_samples),
            )
            if value is not None
        ]
        if given:
            raise UserError(
                f"--check calls no new samples and writes nothing: it takes no {', '.join(given)}",
                hint="drop those options, or run `codemode-gen record` without --check to record",
            )
        _check(config, configs, selected, settings, target, all_servers=not servers)
        return

    samples = list(settings.samples)
    if samples_path is not None:
        samples += load_samples_file(samples_path)
    for sample in samples:
        if sample.server not in configs:
            source = samples_path if samples_path is not None else settings.path
            raise UserError(
                f"{source}: a sample names server {sample.server!r}, which is not in {config}",
                hint=f"configured servers: {', '.join(configs)}",
            )

    stderr = sys.stderr
    progress = _Progress(list(selected), stderr, live=stderr.isatty())

    async def go() -> list[ServerOutcome]:
        return await record_servers(
            selected,
            settings,
            fixtures_dir=target,
            samples=samples,
            probe=not no_probe,
            max_samples=max_samples,
            status=progress,
        )

    outcomes = anyio.run(go)
    progress.finish()

    out = sys.stdout
    written = [o for o in outcomes if o.error is None]
    failed = [o for o in outcomes if not o.ok]
    out.write(f"recorded {len(written)} of {len(outcomes)} servers into {target}/\n")
    for o in outcomes:
        if o.error is None:
            out.write(f"  {o.server_id}: {_n(o.tools, 'tool')}, {_n(o.calls, 'call')} recorded\n")
        for warning in o.warnings:
            out.write(f"  warning: {o.server_id}: {warning}\n")
        for note in o.notes:
            out.write(f"  note: {o.server_id}: {note}\n")
    if written:  # which of the recorded tools will wait for the user's yes (cli/policy.py)
        from codemode_gen.cli.policy import policy_rows, summary_lines
        from codemode_gen.generator.fixtures import load_recorded

        try:
            recorded = load_recorded(target, [o.server_id for o in written])
        except UserError as exc:  # just written, so hardly; the recording stands either way
            out.write(f"note: the approval summary could not read {target}/: {exc.message}\n")
        else:
            sets = [s for s in recorded.values() if s is not None]
            for line in summary_lines(policy_rows(settings, sets), settings):
                out.write(f"{line}\n")
    if failed:
        out.write("failed:\n")
        for o in failed:
            if o.error is not None:
                out.write(f"  {o.server_id}: {o.error}\n")
                if o.log_path is not None:
                    out.write(f"    (server log: {o.log_path})\n")
            for failure in o.failed_samples:
                out.write(f"  {o.server_id}: sample {failure}\n")
        out.flush()
        down = [o.server_id for o in outcomes if o.error is not None]
        sample_servers = [o.server_id for o in written if o.failed_samples]
        count = sum(len(o.failed_samples) for o in written)
        parts = []
        if down:
            parts.append(
                f"{len(down)} of {_n(len(outcomes), 'server')} not recorded ({', '.join(down)}):"
                " nothing written for them, their old fixtures kept"
            )
        if count:
            parts.append(
                f"{_n(count, 'sample call')} failed ({', '.join(sample_servers)}): not recorded"
            )
        hint = "see the reasons above; everything else was recorded and written"
        if count:
            hint += (
                '; a sample meant to fail says so in its entry: expect = "error" (a tool error)'
                ' or expect = "drift" (a result that breaks the declared outputSchema)'
            )
        raise CheckFailed("; ".join(parts), hint=hint)


def _check(
    config: Path,
    configs: Mapping[str, ServerConfig],
    selected: Mapping[str, ServerConfig],
    settings: Settings,
    target: Path,
    *,
    all_servers: bool,
) -> None:
    """`record --check`: the report on stdout, the verdict as the exit status (see `record`)."""
    import anyio

    from codemode_gen.generator.drift import exit_status, render_report
    from codemode_gen.generator.drift_findings import ServerCheck
    from codemode_gen.generator.fixtures import load_recorded, recorded_server_ids
    from codemode_gen.generator.record_check import check_servers

    recorded = load_recorded(target, selected)  # before connecting: unreadable fixtures are exit 2
    stderr = sys.stderr
    progress = _Progress(list(selected), stderr, live=stderr.isatty())

    async def go() -> list[ServerCheck]:
        return await check_servers(selected, settings, recorded, status=progress)

    checks = anyio.run(go)
    progress.finish()

    out = sys.stdout
    out.write(f"checked {_n(len(checks), 'server')} against {target}/ (nothing written):\n")
    for line in render_report(checks, target):
        out.write(f"{line}\n")
    if all_servers:
        for sid in recorded_server_ids(target):
            if sid not in configs:
                out.write(
                    f"note: {target / sid}/ is recorded but not configured in {config}; not checked\n"
                )
    broken = _skills_broken_by_drift(checks, settings, target)
    for line in broken:
        out.write(f"{line}\n")
    out.flush()
    status = exit_status(checks)
    drifted = sorted(c.server_id for c in checks if c.status in ("drift", "not-recorded"))
    if broken:
        raise CheckFailed(
            f"drift in {', '.join(drifted) or 'the servers'} breaks skills/ ({len(broken) - 1} type error(s))",
            hint="fix the skills against the live tools (record again, `codemode-gen generate`, then the "
            "errors above point at the lines), or ask the server's owner about the change",
        )
    unchecked = sorted(c.server_id for c in checks if c.status in ("unreachable", "incomplete"))
    also = f"; could not check {', '.join(unchecked)}" if unchecked else ""
    if status == 1:
        raise CheckFailed(
            f"drift in {len(drifted)} of {_n(len(checks), 'server')}: {', '.join(drifted)}{also}",
            hint="if the change is expected, record again (`codemode-gen record"
            f" {' '.join(f'--server {sid}' for sid in drifted)}`), review the diff of {target}/,"
            " run `codemode-gen generate` and commit both",
        )
    if status == 3:
        raise CheckIncomplete(
            f"no drift seen, but {len(unchecked)} of {_n(len(checks), 'server')} could not be"
            f" checked (completely): {', '.join(unchecked)}",
            hint="an unreachable server or a failed sample call is not drift; see the reasons"
            " above, fix the connection and run the check again",
        )
    out.write(f"no drift: the {_n(len(checks), 'server')} checked match {target}/\n")


def _skills_broken_by_drift(checks: Sequence[Any], settings: Settings, target: Path) -> list[str]:
    """The skills (skills/ beside out/) that would not type-check against the live tools of the
    servers that drifted: a header line, then `skills/x.ts:line:col error TS…` lines; [] when
    nothing drifted, there are no skills, or they all still check."""
    import os

    from codemode_gen.generator import skills as sk
    from codemode_gen.generator.build import build_outputs
    from codemode_gen.generator.fixtures import FixtureSet, load_fixtures
    from codemode_gen.generator.manifest import CODEMODE_DTS

    live = {
        c.server_id: c.live_tools
        for c in checks
        if c.status == "drift" and c.live_tools is not None
    }
    project = Path(os.path.abspath(settings.out_dir)).parent
    skills = sk.load_skills(project) if live else []
    if not skills:
        return []
    from codemode_gen.runtime.host.skills import check_skills, render

    sets = []
    for fixture_set in load_fixtures(target):
        tools = live.get(fixture_set.config_id)
        if tools is not None:
            names = {t.get("name") for t in tools}
            fixture_set = FixtureSet(
                fixture_set.config_id,
                fixture_set.server_json,
                tools,
                {k: v for k, v in fixture_set.calls.items() if k in names},
            )
        sets.append(fixture_set)
    result = check_skills(
        skills, build_outputs(sets, settings).files[CODEMODE_DTS], roots=[project]
    )
    if not result.errors:
        return []
    return [
        "skills broken by this drift (type-checked against the live tools):",
        *(f"  {line}" for line in render(result.errors)),
    ]


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
