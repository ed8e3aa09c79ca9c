"""`codemode-gen generate`: fixtures/ -> out/ (typed modules, codemode.d.ts, manifest), offline."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from codemode_gen.cli.options import fixtures_read_option, project_config_option
from codemode_gen.errors import CheckFailed, UserError

# Report lines printed before "... and N more" (the full list is in out/manifest.json).
MAX_REPORT_LINES = 40
# Where a tool's output type comes from, in report order (`coverage`), and how the report says it.
ORIGINS = ("declared", "inferred", "learned", "unknown")
ORIGIN_LABELS = {
    "declared": "declared",
    "inferred": "inferred from samples",
    "learned": "learned in sessions (--record)",
    "unknown": "unknown",
}


def _share(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "-"


def coverage(servers: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """origin -> the tools (`name (N samples)` for inferred and learned ones) whose output type
    comes from there: the outputSchema the server declares; inference from recorded samples;
    the same from calls a live session recorded (`run`/`serve --record`: every sample is one);
    none (`Promise<unknown>`)."""
    out: dict[str, list[str]] = {origin: [] for origin in ORIGINS}
    for server in servers:
        for tool in server.get("tools", []):
            output = tool.get("output", {})
            source = output.get("source")
            name = str(tool["toolName"])
            if source == "declared":
                out["declared"].append(name)
            elif source == "inferred":
                samples = int(output.get("samples", 0))
                origin = "learned" if output.get("liveSamples", 0) >= samples > 0 else "inferred"
                out[origin].append(f"{name} ({samples} sample{'' if samples == 1 else 's'})")
            else:
                out["unknown"].append(name)
    return out


def _echo_report(lines: list[str]) -> None:
    for line in lines[:MAX_REPORT_LINES]:
        click.echo(f"  {line}")
    if len(lines) > MAX_REPORT_LINES:
        click.echo(f"  ... and {len(lines) - MAX_REPORT_LINES} more (see out/manifest.json)")


@click.command("generate")
@project_config_option
@fixtures_read_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder to write [default: codemode.toml `out`, else out/ beside --config].",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 listing stale, missing or extra files if out/ is not up to date.",
)
@click.option(
    "--python",
    "with_python",
    is_flag=True,
    help="Also write pydantic models of every tool's input and output to out/python/.",
)
@click.option(
    "--settings",
    "settings_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Project settings [default: the codemode.toml beside --config, if present].",
)
def generate(
    config: Path,
    fixtures_dir: Path | None,
    out_dir: Path | None,
    check: bool,
    with_python: bool,
    settings_path: Path | None,
) -> int:
    """Generate typed ES modules, codemode.d.ts and manifest.json from recorded fixtures."""
    from codemode_gen.cli.policy import policy_rows, summary_lines
    from codemode_gen.generator import emit
    from codemode_gen.generator.build import build_outputs
    from codemode_gen.generator.emit import PYTHON_DIR, check_outputs, write_outputs
    from codemode_gen.generator.fixtures import leftover_notes, load_fixtures
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.generator.sample_hint import sample_entry

    settings = load_project_settings(config, settings_path, fixtures_dir=fixtures_dir)
    fixtures = fixtures_dir if fixtures_dir is not None else settings.fixtures_dir
    out = out_dir if out_dir is not None else settings.out_dir
    fixture_sets = load_fixtures(fixtures)
    outputs = build_outputs(fixture_sets, settings)
    # Hidden folders an interrupted record/generate left: nothing is lost (load_fixtures refuses
    # a server hidden in one), but they are said, not silently skipped.
    for note in leftover_notes(fixtures):
        click.echo(f"note: {note}", err=True)
    if with_python:
        from codemode_gen.generator.python_models import add_python_models

        outputs = add_python_models(outputs)
    # Skills (skills/ beside out/): type-checked against these declarations, then added (§ README "Skills").
    from codemode_gen.runtime.host.skills import with_skills

    project_dir = Path(os.path.abspath(out)).parent
    skill_notes: list[str] = []
    outputs = with_skills(
        outputs,
        project_dir,
        roots=[project_dir, Path(os.path.abspath(config)).parent],
        out_dir=Path(out),
        notes=skill_notes,
    )
    for note in skill_notes:
        click.echo(f"note: {note}", err=True)

    if check:
        for note in emit.leftover_notes(out):
            click.echo(f"note: {note}", err=True)
        problems = check_outputs(out, outputs)
        if problems:
            click.echo(
                f"{out}: {len(problems)} file(s) differ from what `generate` would write:", err=True
            )
            for line in problems:
                click.echo(f"  {line}", err=True)
            hint = (
                f"run `codemode-gen generate{' --python' if with_python else ''}` and commit {out}/"
            )
            if not with_python and any(p.startswith(f"extra: {PYTHON_DIR}/") for p in problems):
                hint += f" (or add --python: {out}/{PYTHON_DIR}/ exists)"
            raise CheckFailed(f"{out} is out of date with {fixtures}", hint=hint)
        click.echo(f"{out}: up to date ({len(outputs.files)} files)")
        return 0

    notes: list[str] = []
    try:
        removed = write_outputs(out, outputs, notes=notes)
    except OSError as exc:  # disk full, permissions: the previous out/ is still in place
        raise UserError(
            f"{out}: cannot write: {exc.strerror or exc}",
            hint=f"nothing was changed in {out}/; fix the cause and run `codemode-gen generate` again",
        ) from None
    for note in notes:
        click.echo(f"note: {note}", err=True)
    servers = outputs.manifest["servers"]
    tools = sum(len(s["tools"]) for s in servers)
    skills: list[Any] = list(outputs.manifest.get("skills", []))  # type: ignore[call-overload]
    click.echo(
        f"wrote {len(outputs.files)} files to {out}/ ({len(servers)} servers, {tools} tools"
        + (f", {len(skills)} skill{'' if len(skills) == 1 else 's'}" if skills else "")
        + ")"
    )
    for rel in removed:
        click.echo(f"  removed stale {rel}")
    unknown: list[str] = []
    origins = coverage(servers)
    typed = sum(len(names) for origin, names in origins.items() if origin != "unknown")
    click.echo(
        f"output types: {typed} of {tools} tools ({_share(typed, tools)}): "
        + ", ".join(f"{len(origins[o])} {ORIGIN_LABELS[o]}" for o in ORIGINS)
    )
    for server in servers:
        by_origin = coverage([server])
        counts = ", ".join(f"{len(by_origin[o])} {o}" for o in ORIGINS if by_origin[o])
        click.echo(f"  {server['serverId']}: {len(server['tools'])} tools; output types: {counts}")
        for origin in ORIGINS:
            if by_origin[origin]:
                click.echo(f"    {origin}: {', '.join(by_origin[origin])}")
        for tool in server["tools"]:
            if tool["output"]["source"] == "none":
                unknown.append(
                    sample_entry(
                        server.get("configId", server["serverId"]),
                        tool["toolName"],
                        tool.get("inputSchema"),
                        tool.get("annotations"),
                    )
                )
    # Which tools will wait for the user's yes, and the lines that decide them (cli/policy.py).
    for line in summary_lines(policy_rows(settings, fixture_sets), settings):
        click.echo(line)
    if outputs.report:
        click.echo("warnings and drift:")
        _echo_report(outputs.report)
    if unknown:
        click.echo(
            f"{len(unknown)} tool(s) have no output type (scripts get Promise<unknown>). One recorded "
            "call is enough: add these to codemode.toml, fill in real inputs, then run "
            "`codemode-gen record` and `codemode-gen generate` (or run scripts with `--record`):"
        )
        click.echo("")
        click.echo("\n\n".join(unknown))
    return 0
