"""`codemode-gen skill`: save a script that worked as a skill, test skills against the recordings.

A skill is skills/<name>.ts|js beside out/ (README "Skills"): `save` writes its skeleton from a
script, `generate` type-checks it and declares it as `@codemode/skills/<name>`, `test` runs its
examples (its doc comment's @example blocks, skills/<name>.test.ts|js) with --replay, so CI checks
skills without the servers.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode_gen.cli.options import config_option, out_option, read_script
from codemode_gen.errors import CheckFailed, UserError

if TYPE_CHECKING:
    from codemode_gen.runtime.response import Response

#: Bounds one example run of `skill test` (its own limits may be lower).
TEST_TIMEOUT_MS = 60_000


def _out_dir(config: Path, out: Path | None) -> Path:
    from codemode_gen.generator.project import load_project_settings

    return out if out is not None else load_project_settings(config).out_dir


@click.group(name="skill")
def skill() -> None:
    """Skills: scripts that worked, kept as typed, reviewed, tested functions (skills/<name>.ts)."""


@skill.command(name="save")
@config_option
@out_option
@click.option(
    "--lang",
    "lang",
    type=click.Choice(["ts", "js"]),
    default=None,
    help="Write skills/NAME.ts or .js (default: the script's extension, else ts).",
)
@click.option(
    "--description",
    default=None,
    help="The doc comment's first sentence (default: the script's leading comment).",
)
@click.option("--force", is_flag=True, help="Replace skills/NAME.ts|js if it exists.")
@click.argument("name")
@click.argument("script")
def save(
    config: Path,
    out: Path | None,
    lang: str | None,
    description: str | None,
    force: bool,
    name: str,
    script: str,
) -> int:
    """Turn SCRIPT (a file, or - for stdin) into the skill skeleton skills/NAME.ts."""
    from codemode_gen.generator.skills import MAX_SKILL_BYTES, check_name, skeleton, write_skill

    check_name(name)
    code = read_script(script)
    if len(code.encode("utf-8")) > MAX_SKILL_BYTES:
        raise UserError(
            f"{script}: larger than a skill may be ({MAX_SKILL_BYTES} bytes)",
            hint="a skill is one function a person reviews: keep data out of it",
        )
    chosen = lang or ("js" if script.endswith((".js", ".mjs")) else "ts")
    text = skeleton(
        name,
        code,
        lang=chosen,
        origin="<stdin>" if script == "-" else Path(script).name,
        description=description,
    )
    project_dir = Path(os.path.abspath(_out_dir(config, out))).parent
    target = write_skill(project_dir, name, text, lang=chosen, replace_existing=force)
    click.echo(f"wrote {target}")
    click.echo(
        "next: review it (type its parameters and result, add an @example), then "
        "`codemode-gen generate` (type-checks it) and `codemode-gen skill test " + name + "`"
    )
    return 0


@skill.command(name="test")
@config_option
@out_option
@click.option("--live", is_flag=True, help="Call the live servers instead of replaying fixtures/.")
@click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The recordings [default: codemode.toml `fixtures`, else fixtures/ beside --config].",
)
@click.argument("name", required=False)
def test(
    config: Path, out: Path | None, live: bool, fixtures_dir: Path | None, name: str | None
) -> int:
    """Run the examples of skill NAME (default: every skill) against the recordings (--replay)."""
    from codemode_gen.generator import skills as sk
    from codemode_gen.runtime.host.skills import skill_entries, test_scripts

    out_dir = _out_dir(config, out)
    project_dir = Path(os.path.abspath(out_dir)).parent
    skills = sk.load_skills(project_dir)
    if name is not None:
        sk.check_name(name)
        skills = [s for s in skills if s.name == name]
        if not skills:
            raise UserError(
                f"no skill {name} in {project_dir / sk.SKILLS_DIR}",
                hint="`codemode-gen skill save NAME SCRIPT` makes one",
            )
    if not skills:
        click.echo(f"no skills in {project_dir / sk.SKILLS_DIR}")
        return 0
    from codemode_gen.generator.manifest import read_manifest

    generated = {e["name"]: e.get("sourceHash") for e in skill_entries(read_manifest(out_dir))}
    stale = [s.file for s in skills if generated.get(s.name) != s.digest]
    if stale:
        raise UserError(
            f"{', '.join(stale)}: not generated as it is now (out/ runs the generated module)",
            hint="run `codemode-gen generate` first",
        )
    jobs = [(s, label, code) for s in skills for label, code in test_scripts(project_dir, s)]
    results = asyncio.run(
        _run_all(config, out, [code for _, _, code in jobs], replay=not live, fixtures=fixtures_dir)
    )
    failed = 0
    untested = [s.name for s in skills if not any(job[0] is s for job in jobs)]
    for (_, label, _), response in zip(jobs, results, strict=True):
        errors = [d for d in response.get("diagnostics", []) if d.get("severity") == "error"]
        calls = len(response.get("toolTrace", []))
        if errors:
            failed += 1
            click.echo(
                f"FAIL {label} ({calls} tool calls): {errors[0].get('code')}: {errors[0].get('message')}"
            )
        else:
            click.echo(f"ok   {label} ({calls} tool calls)")
    for skill_name in untested:
        click.echo(
            f"note: skill {skill_name} has no example (an @example in its doc comment, or "
            f"skills/{skill_name}.test.ts)",
            err=True,
        )
    click.echo(
        f"{len(jobs) - failed} of {len(jobs)} example(s) passed"
        + (" (replayed)" if not live else "")
    )
    if failed:
        raise CheckFailed(
            f"{failed} skill example(s) failed",
            hint="see the lines above; fix the skill or re-record",
        )
    return 0


async def _run_all(
    config: Path, out: Path | None, scripts: list[str], *, replay: bool, fixtures: Path | None
) -> list[Response]:
    from codemode_gen.runtime.codemode import CodeMode

    if not config.is_file():
        raise UserError(
            f"{config}: MCP server config not found", hint="pass --config PATH to your .mcp.json"
        )
    cm = CodeMode.from_config(config, out=out, replay=replay, fixtures=fixtures, approve_all=True)
    responses = []
    async with cm:
        for code in scripts:  # one fresh sandbox per example (§1.4)
            responses.append(await cm.run(code, limits={"timeoutMs": TEST_TIMEOUT_MS}))
    return responses
