"""`codemode-gen record`: record servers from .mcp.json into fixtures/."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TextIO

import click

from codemode_gen.cli.options import config_option
from codemode_gen.errors import CheckFailed, UserError

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
        if first.endswith(":") and "; " in first:  # "...; last lines of its stderr:" -> summary has them
            first = first[: first.rindex("; ")] + " (details below)"
        self.lines[server_id] = first
        if not self.live:
            self.stream.write(f"{server_id}: {first}\n")
            self.stream.flush()
            return
        import time

        now = time.monotonic()
        final = first.startswith(("recorded", "failed"))
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
@click.option("--fixtures", "fixtures_dir", type=click.Path(path_type=Path), default=None,
              help="Fixtures folder [default: codemode.toml `fixtures`, else fixtures/ beside --config].")
@click.option("--server", "servers", multiple=True, metavar="ID",
              help="Record only this server (repeatable). Default: every configured server.")
@click.option("--samples", "samples_path", type=click.Path(path_type=Path), default=None,
              help='Sample calls: a JSON list or JSONL of {"server", "tool", "input"}.')
@click.option("--no-probe", is_flag=True,
              help="Do not call readOnlyHint tools without required arguments automatically.")
@click.option("--max-samples", type=click.IntRange(min=1), default=None,
              help="Recorded calls kept per tool [default: codemode.toml `max_samples`, else 20].")
def record(
    config: Path,
    fixtures_dir: Path | None,
    servers: tuple[str, ...],
    samples_path: Path | None,
    no_probe: bool,
    max_samples: int | None,
) -> None:
    """Connect to MCP servers and record their tools and sample calls into fixtures/."""
    import anyio

    from codemode_gen.config import load_config, project_settings
    from codemode_gen.generator.record import ServerOutcome, load_samples_file, record_servers

    settings = project_settings(config)
    configs = load_config(config, settings)
    if not configs:
        raise UserError(f"{config}: \"mcpServers\" is empty", hint="add a server to record")
    for sid in servers:
        if sid not in configs:
            raise UserError(
                f"--server {sid}: no such server in {config}",
                hint=f"configured servers: {', '.join(configs)}",
            )
    selected = {sid: cfg for sid, cfg in configs.items() if not servers or sid in servers}

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

    target = fixtures_dir if fixtures_dir is not None else settings.fixtures_dir
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
        names = ", ".join(o.server_id for o in failed)
        raise CheckFailed(
            f"{len(failed)} of {len(outcomes)} servers failed: {names}",
            hint="see the reasons above; servers that succeeded were written, failed ones kept their old fixtures",
        )


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
