"""`codemode-gen check`: type-check an agent script against out/'s declarations.

Prints a JSON list of §3.3.3 diagnostics on stdout (`{severity, code: "TS2339", message,
path: "line:column", hint?}`), the same ones `serve --typecheck` returns as warnings before a
run. A script `run` would refuse before running anything (TypeScript that cannot be erased:
enums, namespaces with values, parameter properties, `<T>x`, `import x = require()`; or a
syntax error of the sandbox's engine) gets exactly `run`'s SYNTAX_ERROR diagnostics instead, and
is not type-checked. Exit codes: 0 no error, 1 errors, 2 usage or setup problem (no TypeScript
compiler and no way to download one: the message says how to get one; no out/codemode.d.ts;
unreadable script).

Without a compiler in the usual places, the pinned TypeScript is downloaded into the user's cache
once, with a line on stderr (runtime/host/tsinstall.py); `--install-typescript` does only that.

The language is the file's extension (.ts/.mts/.cts TypeScript, .js/.mjs/.cjs JavaScript), or
`--lang`; without either (`-`, other names) TypeScript syntax in the script makes it TypeScript.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode_gen.cli.options import config_option, host_options, out_option, read_script
from codemode_gen.errors import UserError
from codemode_gen.host_options import HostOptions

if TYPE_CHECKING:
    from codemode_gen.runtime.diagnostics import Diagnostic

# Bounds the check itself, once the checker has started (its start and a download of TypeScript
# have bounds of their own): milliseconds to seconds (a 2,000-line script on QuickJS: up to
# tens of seconds on a loaded machine); a hang is a bug, reported instead of waiting forever.
CHECK_TIMEOUT_S = 120.0


def render_pretty(diagnostics: list[Diagnostic], script: str) -> str:
    """`file:line:col severity TS1234: message` lines, as editors print them."""
    name = "<stdin>" if script == "-" else script
    lines = []
    for d in diagnostics:
        lines.append(f"{name}:{d.get('path', '1:1')}: {d['severity']} {d['code']}: {d['message']}")
        if d.get("hint"):
            lines.append(f"  hint: {d['hint']}")
    lines.append(f"{sum(d['severity'] == 'error' for d in diagnostics)} type error(s)")
    return "\n".join(lines)


@click.command(name="check")
@config_option
@out_option
@host_options("check")
@click.option(
    "--lang",
    "lang",
    type=click.Choice(["auto", "ts", "js"]),
    default=None,
    help="Check as TypeScript or JavaScript (default: by extension; auto for - and others: "
    "TypeScript if the script uses TypeScript syntax).",
)
@click.option(
    "--pretty/--no-pretty",
    default=None,
    help="Also print `file:line:col` lines for people on stderr (default: on a TTY).",
)
@click.option(
    "--install-typescript",
    "install_only",
    is_flag=True,
    help="Only download the pinned TypeScript into the user's cache if it is not there (for images "
    "built ahead of use, or before going offline), print where it is, and exit.",
)
@click.argument("script", required=False)  # none: the project's skills/
def check(
    config: Path,
    out: Path | None,
    lang: str | None,
    pretty: bool | None,
    install_only: bool,
    script: str | None,
    options: HostOptions,
) -> int:
    """Type-check SCRIPT (a .ts or .js file, or - for stdin) against out/codemode.d.ts (strict);
    without SCRIPT, the project's skills (skills/ beside out/)."""
    tsc = options.tsc
    if install_only:
        from codemode_gen.runtime.host.tsinstall import install_typescript

        click.echo(str(install_typescript().parent.parent))
        return 0
    from codemode_gen.generator.project import load_project_settings

    if script is None:
        return _check_skills(config, out, tsc, pretty)
    from codemode_gen.runtime.host.tsdiagnostics import to_diagnostics
    from codemode_gen.runtime.host.typecheck import check_sync, lang_of

    settings = load_project_settings(config)
    out_dir = out if out is not None else settings.out_dir
    declarations = out_dir / "codemode.d.ts"
    if not declarations.is_file():
        raise UserError(
            f"{declarations}: not found; there is nothing to check against",
            hint="run `codemode-gen generate` first, or pass --out to the generated folder",
        )
    code = read_script(script)
    diagnostics: list[Diagnostic] = asyncio.run(refusals(code))
    if not diagnostics:
        roots = [Path(os.path.abspath(config)).parent, Path(os.path.abspath(out_dir)).parent]
        try:
            result = check_sync(
                code,
                out_dir,
                lang=lang_of(script, lang),
                tsc=tsc,
                roots=roots,
                timeout=CHECK_TIMEOUT_S,
            )
        except UserError:
            raise
        except TimeoutError:
            raise UserError(
                f"the type check did not finish within {CHECK_TIMEOUT_S:.0f} s"
            ) from None
        except Exception as exc:  # the checker process failed: a setup problem, not a type error
            raise UserError(
                f"the type check failed: {exc}",
                hint="check that the TypeScript it found works (`tsc --version`; a damaged download in "
                "the cache: delete its folder), or pass --tsc PATH to another",
            ) from None
        diagnostics = to_diagnostics(result)
    click.echo(json.dumps(diagnostics, ensure_ascii=False, indent=2))
    if pretty if pretty is not None else sys.stderr.isatty():
        click.echo(render_pretty(diagnostics, script), err=True)
    return 1 if any(d["severity"] == "error" for d in diagnostics) else 0


def _check_skills(config: Path, out: Path | None, tsc: str | None, pretty: bool | None) -> int:
    """No SCRIPT: type-check the project's skills (skills/ beside out/) against out/, as
    `generate` does; the same JSON diagnostics, each with its `file`."""
    from codemode_gen.generator.project import load_project_settings
    from codemode_gen.generator.skills import SKILLS_DIR
    from codemode_gen.runtime.diagnostics import ts_code
    from codemode_gen.runtime.host.skills import check_against_out, render

    out_dir = out if out is not None else load_project_settings(config).out_dir
    roots = [Path(os.path.abspath(config)).parent, Path(os.path.abspath(out_dir)).parent]
    skills, result = check_against_out(out_dir, roots=roots, tsc=tsc)
    if not skills:
        raise UserError(
            f"missing SCRIPT (and no skills in {Path(os.path.abspath(out_dir)).parent / SKILLS_DIR} to check)",
            hint="pass a .js or .ts file, or - to read the script from stdin",
        )
    diagnostics: list[Diagnostic] = [
        {
            "severity": "error" if d.get("category") == "error" else "warning",
            "code": ts_code(d.get("code")),
            "message": str(d.get("message", "")),
            "file": str(d.get("file", "")),
            "path": f"{d.get('line', 1)}:{d.get('column', 1)}",
        }
        for d in result.diagnostics
    ]
    click.echo(json.dumps(diagnostics, ensure_ascii=False, indent=2))
    if pretty if pretty is not None else sys.stderr.isatty():
        click.echo(
            "\n".join(
                [
                    *render(result.diagnostics),
                    f"{len(skills)} skill(s), {len(result.errors)} type error(s)",
                ]
            ),
            err=True,
        )
    return 1 if result.errors else 0


async def refusals(code: str) -> list[Diagnostic]:
    """The diagnostics `run` refuses `code` with before running anything ([] when it would run):
    runtime/host/tsinput.py's `runnable`, with the sandbox engine's syntax check made here, as a
    sandbox worker makes it (runtime/sandbox/worker.py `check`)."""
    from codemode_gen.runtime import jsonsafe, script_errors
    from codemode_gen.runtime.host.tsinput import runnable
    from codemode_gen.runtime.limits import Limits
    from codemode_gen.runtime.sandbox.engine import EngineError, new_engine

    async def syntax_errors(text: str) -> list[Diagnostic] | None:
        limits = Limits()
        engine = new_engine(memory_limit=limits.maxMemoryBytes, max_pending_calls=1)
        try:
            engine.check_syntax(jsonsafe.utf8_safe(text))
        except EngineError as exc:
            return [script_errors.syntax_error(exc.message, exc.stack)]
        finally:
            engine.close()
        return None

    _, refused = await runnable(code, syntax_errors)
    return refused
