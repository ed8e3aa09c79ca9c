"""`codemode-gen run`: execute one agent script against the configured servers.

The §3.3 response JSON on stdout is the contract (scripts and CI parse it); `--pretty` (the
default on a terminal) adds a human rendering of logs and diagnostics on stderr, so stdout
stays parseable either way. Exit codes: 0 no error diagnostic, 1 the script failed, 2 the
command itself was used wrongly (bad --limits, missing script or config).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import click

from codemode_gen.cli.options import config_option, out_option, read_script
from codemode_gen.errors import UserError

# Bounds how much of a result the human view prints; the JSON on stdout is always complete.
PRETTY_RESULT_CHARS = 2000


def parse_limits(text: str | None) -> dict[str, Any] | None:
    """--limits JSON → dict; a mistake names the option and shows a working example."""
    if text is None:
        return None
    example = '--limits \'{"timeoutMs": 5000, "maxToolCalls": 20}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"--limits: invalid JSON at column {exc.colno}: {exc.msg}", hint=f"for example {example}") from None
    if not isinstance(value, dict):
        raise UserError("--limits must be a JSON object", hint=f"for example {example}")
    from codemode_gen.runtime.limits import Limits, LimitsError

    try:
        Limits.from_json(value)
    except LimitsError as exc:
        raise UserError(f"--limits: {exc}", hint=f"for example {example}") from None
    return value


def render_pretty(response: dict[str, Any]) -> str:
    """A people-readable view of a response (logs, diagnostics, trace, result)."""
    lines: list[str] = []
    for entry in response.get("logs", []):
        lines.append(f"[{entry.get('timeMs', 0):>6} ms] {entry.get('level', 'log'):5} {entry.get('message', '')}")
    for call in response.get("toolTrace", []) or []:
        status = "ok" if call.get("ok") else f"FAILED {call.get('error', '')}"
        lines.append(f"call {call.get('serverId')}.{call.get('toolName')} {call.get('durationMs')} ms {status}")
    for diag in response.get("diagnostics", []):
        where = f" at {diag['path']}" if diag.get("path") else ""
        cls = f" ({diag['errorClass']})" if diag.get("errorClass") else ""
        lines.append(f"{diag.get('severity')}: {diag.get('code')}{cls}{where}: {diag.get('message')}")
        if diag.get("hint"):
            lines.append(f"  hint: {diag['hint']}")
    result = json.dumps(response.get("result"), ensure_ascii=False, indent=2)
    if len(result) > PRETTY_RESULT_CHARS:
        result = result[:PRETTY_RESULT_CHARS] + " …"
    lines.append(f"result: {result}")
    return "\n".join(lines)


async def _run(config: Path, out: Path | None, code: str, limits: dict[str, Any] | None,
               capabilities: list[str]) -> dict[str, Any]:
    from codemode_gen.runtime.codemode import CodeMode

    if not config.is_file():
        raise UserError(f"{config}: MCP server config not found", hint="pass --config PATH to your .mcp.json")
    async with CodeMode.from_config(config, out=out) as cm:
        try:
            return await cm.run(code, limits=limits, requested_capabilities=capabilities)
        except UserError:
            raise
        except Exception as exc:  # a host bug: still a §3.3 response, one line on stderr, no traceback
            from codemode_gen.runtime.response import clip, diagnostic, not_started

            message = clip(f"codemode-gen failed unexpectedly: {type(exc).__name__}: {exc}", 500)
            click.echo(f"error: {message}", err=True)
            return not_started(diagnostic(
                "HOST_ERROR", message, hint="retry the run; if it fails again, report it with this message"
            ))


@click.command(name="run")
@config_option
@out_option
@click.option("--limits", "limits", default=None, metavar="JSON",
              help='Run limits, e.g. \'{"timeoutMs": 5000, "maxToolCalls": 20}\'.')
@click.option("--capability", "capabilities", multiple=True, metavar="ID",
              help="Server to connect before the script starts (requestedCapabilities); repeatable.")
@click.option("--pretty/--no-pretty", default=None,
              help="Also render logs and diagnostics for people on stderr (default: on a TTY).")
@click.argument("script")
def run(config: Path, out: Path | None, limits: str | None, capabilities: tuple[str, ...],
        pretty: bool | None, script: str) -> int:
    """Run SCRIPT (a .js or .ts file, or - for stdin) in a fresh sandbox; print the response JSON."""
    parsed = parse_limits(limits)
    code = read_script(script)
    response = asyncio.run(_run(config, out, code, parsed, list(capabilities)))
    from codemode_gen.runtime.response import utf8_safe_json

    # Every part is UTF-8-safe already; this keeps a lone surrogate from ever crashing stdout.
    response = utf8_safe_json(response)
    click.echo(json.dumps(response, ensure_ascii=False, indent=2, sort_keys=True))
    if pretty if pretty is not None else sys.stderr.isatty():
        click.echo(render_pretty(response), err=True)
    failed = any(d.get("severity") == "error" for d in response.get("diagnostics", []))
    return 1 if failed else 0
