"""`codemode-gen run`: execute one agent script against the configured servers.

The §3.3 response JSON on stdout is the contract (scripts and CI parse it); `--pretty` (the
default on a terminal) adds a human rendering of logs and diagnostics on stderr, so stdout
stays parseable either way. Exit codes: 0 no error diagnostic, 1 the script failed, 2 the
command itself was used wrongly (bad --limits, missing script or config).

`--record` appends the run's successful live calls to fixtures/ (runtime/host/learn.py), so the
next `generate` types their outputs. `--replay` runs the script against the recordings in fixtures/ instead of the live servers
(runtime/frontends/replay.py), so agent scripts can be tested offline and deterministically in CI.

Tool calls whose approval policy says "ask" (runtime/host/approval.py; by default every tool that is
not read-only or marked non-destructive) are asked on the terminal when stdin and stderr are
one: server, tool and redacted arguments on stderr, `y/a/N` read without stopping the event loop
(other calls, the run's deadline and progress go on), default No; `a` approves this call and
every later call of the same tool in this run (so a loop asks once). `--approve-all` (alias `--yes`)
approves every such call without asking; without a terminal and without it they are denied, and the script gets
a ToolCallError (code APPROVAL_DENIED) that the response and its toolTrace show.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from codemode_gen import gcpolicy
from codemode_gen.cli.options import config_option, host_options, out_option, read_script
from codemode_gen.errors import UserError
from codemode_gen.host_options import HostOptions

if TYPE_CHECKING:
    from codemode_gen.runtime.host.approval_request import Answer, ApprovalRequest, Approver
    from codemode_gen.runtime.response import Response

# Bounds one answer read from the terminal (bytes): a paste of a whole file is not an answer.
MAX_ANSWER_BYTES = 4096

# Bounds how much of a result the human view prints; the JSON on stdout is always complete.
PRETTY_RESULT_CHARS = 2000

# Columns kept free right of shown arguments (the gutter and a terminal's last column, where a
# character may wrap early), so every piece fits on its own line.
TERMINAL_MARGIN = 4


def parse_limits(text: str | None) -> dict[str, Any] | None:
    """--limits JSON → dict; a mistake names the option and shows a working example."""
    if text is None:
        return None
    example = '--limits \'{"timeoutMs": 5000, "maxToolCalls": 20}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"--limits: invalid JSON at column {exc.colno}: {exc.msg}",
            hint=f"for example {example}",
        ) from None
    if not isinstance(value, dict):
        raise UserError("--limits must be a JSON object", hint=f"for example {example}")
    from codemode_gen.runtime.limits import Limits, LimitsError

    try:
        Limits.from_json(value)
    except LimitsError as exc:
        raise UserError(f"--limits: {exc}", hint=f"for example {example}") from None
    return value


def render_pretty(response: Response) -> str:
    """A people-readable view of a response (logs, diagnostics, trace, result)."""
    lines: list[str] = []
    for entry in response.get("logs", []):
        lines.append(
            f"[{entry.get('timeMs', 0):>6} ms] {entry.get('level', 'log'):5} {entry.get('message', '')}"
        )
    for call in response.get("toolTrace", []) or []:
        status = "ok" if call.get("ok") else f"FAILED {call.get('error', '')}"
        approval = (
            f" [approval: {call['approval']}]"
            if call.get("approval") not in (None, "allowed")
            else ""
        )
        lines.append(
            f"call {call.get('serverId')}.{call.get('toolName')} {call.get('durationMs')} ms {status}{approval}"
        )
    for diag in response.get("diagnostics", []):
        where = f" at {diag['path']}" if diag.get("path") else ""
        cls = f" ({diag['errorClass']})" if diag.get("errorClass") else ""
        lines.append(
            f"{diag.get('severity')}: {diag.get('code')}{cls}{where}: {diag.get('message')}"
        )
        if diag.get("hint"):
            lines.append(f"  hint: {diag['hint']}")
    result = json.dumps(response.get("result"), ensure_ascii=False, indent=2)
    if len(result) > PRETTY_RESULT_CHARS:
        result = result[:PRETTY_RESULT_CHARS] + " …"
    lines.append(f"result: {result}")
    return "\n".join(lines)


def stdio_is_terminal() -> bool:
    """Whether a person can be asked: stdin to read the answer, stderr to show the question."""
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


#: The answers to the terminal's question that approve: this call, or (`a`, for an "ask" tool) every
#: call of the tool for the rest of the run (approval.FOR_RUN).
YES_ANSWERS = ("y", "yes")
ALL_ANSWERS = ("a", "all")


def terminal_approver() -> Approver:
    """An approver asking on this process's terminal: the question on stderr, `y/a/N` from stdin.

    One question at a time (calls in one Promise.all are asked in turn); input typed before a
    question is discarded, so a stray "y" cannot approve a call nobody has seen yet. The answer
    is read by the event loop (a reader on stdin), else by a daemon thread, so the run goes on
    meanwhile and a run that ends while asking leaves nothing behind that blocks the exit."""
    lock = asyncio.Lock()

    async def approve(request: ApprovalRequest) -> Answer:
        async with lock:
            from codemode_gen.runtime.host.approval_policy import describe_annotations
            from codemode_gen.runtime.host.approval_request import ARGUMENTS_HEADING, FOR_RUN

            if request.offers_run:
                question = (
                    f"Allow this call? y = yes, a = all calls of {request.tool_name} in this run,"
                    " N = no [y/a/N] "
                )
            else:  # ask-once: a yes covers the session, which for `run` is this run
                question = "Allow this call (and its later calls in this run)? [y/N] "
            _discard_typeahead()
            # The arguments are the script's: set off as data, cut to the terminal's width so no
            # wrapped piece starts a line without the gutter; the question is ours, last.
            width = _terminal_columns() - TERMINAL_MARGIN
            click.echo(
                f"\napproval needed: {request.config_id}.{request.tool_name}"
                f' ({describe_annotations(request.annotations)}; policy "{request.policy}")\n'
                f"{ARGUMENTS_HEADING}\n{request.arguments_block(width)}\n{question}",
                err=True,
                nl=False,
            )
            try:
                answer = await _read_answer()
            except asyncio.CancelledError:
                click.echo("\n(no answer: the run ended)", err=True)
                raise
            word = answer.strip().lower()
            if request.offers_run and word in ALL_ANSWERS:
                click.echo(
                    f"approved: every call of {request.config_id}.{request.tool_name} in this run",
                    err=True,
                )
                return FOR_RUN
            accepted = word in YES_ANSWERS
            click.echo("approved" if accepted else "denied", err=True)
            return accepted

    return approve


def no_terminal_approver() -> Approver:
    """The approver when nobody can be asked: every call that needs approval is denied, saying
    how to approve them."""
    from codemode_gen.runtime.host.approval_request import ApprovalUnavailable

    async def approve(request: ApprovalRequest) -> bool:
        raise ApprovalUnavailable(
            "stdin/stderr is not a terminal to ask on; run with --approve-all (or --yes) to approve such calls"
        )

    return approve


def _terminal_columns() -> int:
    """The width of the terminal the question goes to (stderr; stdout is often a pipe)."""
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


def _discard_typeahead() -> None:
    with contextlib.suppress(Exception):  # not a terminal, or no termios (Windows)
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)


async def _read_answer() -> str:
    """One line from stdin ("" at end of input), without blocking the event loop."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()

    def readable() -> None:
        try:
            data = os.read(fd, MAX_ANSWER_BYTES)
        except OSError:
            data = b""
        if not answer.done():
            answer.set_result(data.decode("utf-8", "replace"))

    try:
        loop.add_reader(fd, readable)
    except (NotImplementedError, ValueError, OSError):  # no reader on this loop: a daemon thread

        def read() -> None:
            try:
                line = sys.stdin.readline(MAX_ANSWER_BYTES)
            except (OSError, ValueError):
                line = ""
            loop.call_soon_threadsafe(lambda: None if answer.done() else answer.set_result(line))

        threading.Thread(target=read, name="codemode-approval", daemon=True).start()
        return await answer
    try:
        return await answer
    finally:
        loop.remove_reader(fd)


async def _run(
    config: Path,
    out: Path | None,
    code: str,
    limits: dict[str, Any] | None,
    capabilities: list[str],
    *,
    replay: bool = False,
    fixtures: Path | None = None,
    options: HostOptions = HostOptions(),
) -> Response:
    from codemode_gen.runtime.codemode import CodeMode
    from codemode_gen.runtime.host import telemetry_serve

    # An unreachable collector: one marked line per kind a minute, not one per export retry.
    telemetry_serve.install_export_notices(
        lambda line: click.echo(f"codemode-gen run: {line}", err=True)
    )
    if not config.is_file():
        raise UserError(
            f"{config}: MCP server config not found", hint="pass --config PATH to your .mcp.json"
        )
    approver = (
        None
        if options.approve_all
        else (terminal_approver() if stdio_is_terminal() else no_terminal_approver())
    )
    # One run: one sandbox worker (a second would start beside the server and the SDK's import
    # on a cold start, and hold its memory, for nothing).
    cm = CodeMode.from_config(
        config,
        out=out,
        replay=replay,
        fixtures=fixtures,
        approve=approver,
        max_workers=1,
        **options.codemode_kwargs("run"),
    )
    if replay:
        _note_unrecorded(
            list(cm.configs), fixtures if fixtures is not None else cm.settings.fixtures_dir
        )
    async with cm:
        # One run, then exit: no full collection in the middle of its payloads (the watchdog
        # runs on this loop), and none needed after (codemode_gen/gcpolicy.py).
        gcpolicy.install()
        try:
            await cm.prepare_typecheck(
                limits
            )  # a TypeScript download happens before the run's time starts
            response = await cm.run(code, limits=limits, requested_capabilities=capabilities)
            if options.record:  # written after the run already: say what happened
                for note in cm.take_recording_notes():
                    click.echo(f"note: --record: {note}", err=True)
            return response
        except UserError:
            raise
        except (
            Exception
        ) as exc:  # a host bug: still a §3.3 response, one line on stderr, no traceback
            from codemode_gen.runtime.diagnostics import DiagnosticCode, diagnostic
            from codemode_gen.runtime.jsonsafe import clip
            from codemode_gen.runtime.response import not_started

            message = clip(f"codemode-gen failed unexpectedly: {type(exc).__name__}: {exc}", 500)
            click.echo(f"error: {message}", err=True)
            return not_started(
                diagnostic(
                    DiagnosticCode.HOST_ERROR,
                    message,
                    hint="retry the run; if it fails again, report it with this message",
                )
            )


def _note_unrecorded(server_ids: list[str], fixtures_dir: Path) -> None:
    """One stderr line naming the configured servers `--replay` has no recording of: they are
    unavailable to the script (a call throws), and none of them is started."""
    from codemode_gen.runtime.frontends.replay import has_recording

    missing = [sid for sid in server_ids if not has_recording(fixtures_dir, sid)]
    if missing:
        click.echo(
            f"note: --replay: no recording of {', '.join(missing)} in {fixtures_dir}; unavailable in this run"
            f" (record with `codemode-gen record --server {missing[0]}`)",
            err=True,
        )


@click.command(name="run")
@config_option
@out_option
@click.option(
    "--limits",
    "limits",
    default=None,
    metavar="JSON",
    help='Run limits, e.g. \'{"timeoutMs": 5000, "maxToolCalls": 20}\'.',
)
@click.option(
    "--capability",
    "capabilities",
    multiple=True,
    metavar="ID",
    help="Server to connect before the script starts (requestedCapabilities); repeatable.",
)
@click.option(
    "--pretty/--no-pretty",
    default=None,
    help="Also render logs and diagnostics for people on stderr (default: on a TTY).",
)
@click.option(
    "--replay",
    is_flag=True,
    help="Answer tool calls from the recordings in fixtures/ instead of the live servers (none is started).",
)
@click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="With --replay: the recordings [default: codemode.toml `fixtures`, else fixtures/ beside --config].",
)
@host_options("run")
@click.argument("script")
def run(
    config: Path,
    out: Path | None,
    limits: str | None,
    capabilities: tuple[str, ...],
    pretty: bool | None,
    replay: bool,
    fixtures_dir: Path | None,
    script: str,
    options: HostOptions,
) -> int:
    """Run SCRIPT (a .js or .ts file, or - for stdin) in a fresh sandbox; print the response JSON."""
    if fixtures_dir is not None and not replay:
        raise UserError(
            "--fixtures only applies with --replay",
            hint="add --replay to run against the recordings",
        )
    if options.record and replay:
        raise UserError(
            "--record and --replay exclude each other: replayed calls are recordings already",
            hint="drop --replay to record live calls, or --record to replay",
        )
    parsed = parse_limits(limits)
    code = read_script(script)
    response = asyncio.run(
        _run(
            config,
            out,
            code,
            parsed,
            list(capabilities),
            replay=replay,
            fixtures=fixtures_dir,
            options=options,
        )
    )
    from codemode_gen.runtime.jsonsafe import utf8_safe_json

    # Every part is UTF-8-safe already; this keeps a lone surrogate from ever crashing stdout.
    response = utf8_safe_json(response)
    click.echo(json.dumps(response, ensure_ascii=False, indent=2, sort_keys=True))
    if pretty if pretty is not None else sys.stderr.isatty():
        click.echo(render_pretty(response), err=True)
    failed = any(d.get("severity") == "error" for d in response.get("diagnostics", []))
    return 1 if failed else 0
