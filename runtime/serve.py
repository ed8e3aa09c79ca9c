"""`codemode-gen serve`: Code Mode as an MCP server with exactly one tool, `codemode.run` (§2).

An agent host connects to this over stdio and sees one tool whose description is the whole
system prompt Code Mode needs (§3.2.1, §3.2.3, §3.2.4, §3.5, §4.4, §5.3.2, §10.1): the
rules, the limits, the capability ids and the TypeScript declarations of every server. Runs
share one `CodeMode`, so MCP sessions stay open between runs (and are refreshed on
tools/list_changed, §8); each run still gets a fresh sandbox (§1.4).

A client launches this from its own working directory, without the project's virtualenv, and
shows our stderr only in a log view; a server that exits or answers with a JSON-RPC error looks
like a flaky connection to its user. So nothing here ever raises into the SDK: a broken or
missing config keeps the server up, its tool description and every run saying what is wrong
(§3.3 `CONFIG_ERROR`), and tools/list never waits on an upstream server (servers out/ lacks
connect in the background and are announced with notifications/tools/list_changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codemode_gen import __version__
from codemode_gen.errors import UserError
from codemode_gen.runtime.codemode import CodeMode
from codemode_gen.runtime.prompt import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME, system_prompt
from codemode_gen.runtime.response import diagnostic, not_started, safe_name, utf8_safe_json

__all__ = [
    "INPUT_SCHEMA", "OUTPUT_SCHEMA", "TOOL_NAME", "TOOL_NAME_RE", "error_response", "load_host",
    "serve_stdio", "system_prompt", "tool_description",
]

TOOL_NAME = DEFAULT_TOOL_NAME
# MCP's tool-name rule (SEP-986): what every conforming client accepts for `--tool-name`.
TOOL_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
# Bounds one stderr line about an unexpected failure: a summary for the client's log view, not
# a dump (a traceback could carry a script's data; stdout, the protocol, never gets any of it).
MAX_LOG_LINE_CHARS = 500

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "JavaScript or TypeScript ES module source (top-level await allowed)."},
        "limits": {
            "type": "object",
            "description": "Optional execution limits; unknown keys are ignored.",
            "properties": {
                **{key: {"type": "integer", "minimum": 0}
                   for key in ("timeoutMs", "maxMemoryBytes", "maxLogBytes", "maxToolCalls", "maxConcurrentCalls")},
                "typecheck": {"type": "boolean", "description": "Type-check the script first (type errors come back as warnings)."},
            },
        },
        "requestedCapabilities": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Server ids to connect before the script starts.",
        },
    },
    "required": ["code"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "object"}},
        "result": {},
        "diagnostics": {"type": "array", "items": {"type": "object"}},
        "toolTrace": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["logs", "result", "diagnostics"],
}


async def handle_run(cm: CodeMode, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """One codemode.run request → §3.3 response; a malformed request is a diagnostic, not a crash."""
    args = dict(arguments or {})
    code = args.get("code")
    problem = None
    if not isinstance(code, str):
        problem = ("/code", "`code` is required and must be a string of JavaScript")
    elif args.get("limits") is not None and not isinstance(args["limits"], dict):
        problem = ("/limits", "`limits` must be an object of integer limits")
    elif args.get("requestedCapabilities") is not None and not (
        isinstance(args["requestedCapabilities"], list)
        and all(isinstance(c, str) for c in args["requestedCapabilities"])
    ):
        problem = ("/requestedCapabilities", "`requestedCapabilities` must be an array of server ids")
    if problem is not None:
        return not_started(diagnostic(
            "INVALID_REQUEST", problem[1],
            hint="send {\"code\": \"<JavaScript>\"} with optional limits and requestedCapabilities",
            path=problem[0],
        ))
    assert isinstance(code, str)
    return await cm.run(code, limits=args.get("limits"), requested_capabilities=args.get("requestedCapabilities"))


def error_response(code: str, message: str, hint: str) -> dict[str, Any]:
    """A §3.3 response for a run that could not start (§3.3.4: never a failed tool call)."""
    return not_started(diagnostic(code, message, hint=hint))


def log_line(text: str) -> None:
    """One line on stderr: what the client's log view shows (white space folded, then cut and
    made terminal-safe as every script-chosen name is: `safe_name`)."""
    line = safe_name(" ".join(text.split()), MAX_LOG_LINE_CHARS - 1)
    with contextlib.suppress(OSError, ValueError):
        print(f"codemode-gen serve: {line}", file=sys.stderr, flush=True)


def load_host(
    config: Path, out: Path | None, *, typecheck: bool = False, tsc: str | None = None
) -> tuple[CodeMode | None, UserError | None]:
    """The CodeMode for `config`, or the configuration error that prevents it."""
    try:
        return CodeMode.from_config(config, out=out, typecheck=typecheck, tsc=tsc), None
    except UserError as exc:
        return None, exc


def _restart_hint(problem: UserError) -> str:
    fix = problem.hint or f"fix {problem.message.split(': ', 1)[0]}"
    return f"{fix}; then restart this MCP server (reconnect it in your MCP client)"


def tool_description(
    cm: CodeMode | None,
    problem: UserError | None,
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    budget: int = DEFAULT_PROMPT_BUDGET,
    on_error: Callable[[UserError], None] | None = None,
) -> str:
    """The description served for the one tool: the system prompt, or what prevents it.

    An unreadable out/ makes every run fail the same way, so the description says that rather
    than silently leaving the declarations out; `on_error` gets the error (for stderr).
    """
    if problem is None and cm is not None:
        try:
            return system_prompt(cm, tool_name=tool_name, budget=budget)
        except UserError as exc:
            if on_error is not None:
                on_error(exc)
            return _broken_description(exc, tool_name)
    assert problem is not None
    return (
        "Code Mode (run JavaScript against MCP servers) is NOT available.\n\n"
        f"Problem: {problem.message}\n"
        f"Fix: {_restart_hint(problem)}.\n\n"
        f"Until then every `{tool_name}` call returns this as a CONFIG_ERROR diagnostic. "
        "Tell the user what is wrong; do not retry.\n"
    )


def _broken_description(problem: UserError, tool_name: str) -> str:
    """The description when out/ (not the config) is unreadable: runs would fail the same way."""
    return (
        "Code Mode (run JavaScript against MCP servers) is NOT available: codemode-gen cannot "
        "read its generated modules.\n\n"
        f"Problem: {problem.message}\n"
        f"Fix: {problem.hint or 'run `codemode-gen generate`'}.\n\n"
        f"Until then every `{tool_name}` call returns this as a CONFIG_ERROR diagnostic.\n"
    )


async def serve_stdio(
    config: Path,
    out: Path | None,
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    prompt_budget: int = DEFAULT_PROMPT_BUDGET,
    typecheck: bool = False,
    tsc: str | None = None,
) -> None:
    """Serve the one tool over stdio until the client disconnects; never exits for a bad config.
    `typecheck`: type-check every run's script first (limits.typecheck's default; the compiler
    starts with the server)."""
    import mcp_types as types
    from mcp.server import NotificationOptions, Server
    from mcp.server.stdio import stdio_server

    cm, problem = load_host(config, out, typecheck=typecheck, tsc=tsc)
    if problem is not None:
        print(problem.render(), file=sys.stderr, flush=True)
        log_line("serving anyway: the tool's description and every run report this error")
    reported: set[str] = set()  # configuration errors already on stderr (once each, not per request)
    listeners: list[Any] = []  # the client session(s) that listed tools: told when the list changes

    def report(exc: UserError) -> None:
        if exc.message not in reported:
            reported.add(exc.message)
            print(exc.render(), file=sys.stderr, flush=True)

    def describe() -> str:
        try:
            return tool_description(cm, problem, tool_name=tool_name, budget=prompt_budget, on_error=report)
        except Exception as exc:  # a bug: still answer, with the reason on stderr
            log_line(f"tools/list: unexpected {type(exc).__name__}: {exc}")
            return (
                f"Code Mode: the description could not be built ({type(exc).__name__}: {exc}). "
                f"`{tool_name}` calls may still work: send {{\"code\": \"<JavaScript ES module>\"}}.\n"
            )

    async def run(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if problem is not None or cm is None:
            assert problem is not None
            return error_response("CONFIG_ERROR", problem.message, _restart_hint(problem))
        try:
            return await handle_run(cm, arguments)
        except UserError as exc:
            report(exc)
            return error_response("CONFIG_ERROR", exc.message, exc.hint or "fix the file it names, then retry")
        except Exception as exc:
            log_line(f"tools/call: unexpected {type(exc).__name__}: {exc}")
            return error_response(
                "HOST_ERROR", f"codemode-gen failed unexpectedly: {type(exc).__name__}: {exc}",
                "retry the run; if it fails again, report it with the server's stderr log",
            )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        session = getattr(ctx, "session", None)
        if session is not None and not any(s is session for s in listeners):
            listeners[:] = [session]  # one stdio connection: the latest request's proxy will do
        return types.ListToolsResult(tools=[types.Tool(
            name=tool_name,
            title="Run Code Mode JavaScript",
            description=describe(),
            input_schema=INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
        )])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != tool_name:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"unknown tool {params.name!r}; the only tool is {tool_name}")],
                is_error=True,
            )
        response = await run(params.arguments)
        try:
            text = json.dumps(response, ensure_ascii=False, sort_keys=True)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate slipped through: it would kill stdout
                log_line("tools/call: response had lone surrogates; replaced")
                response = utf8_safe_json(response)
                text = json.dumps(response, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError, RecursionError) as exc:  # a bug upstream of us: still a §3.3 answer
            log_line(f"tools/call: response is not JSON: {type(exc).__name__}: {exc}")
            response = error_response("HOST_ERROR", f"the run's response could not be serialized: {exc}",
                                      "retry the run; if it fails again, report it with the server's stderr log")
            text = json.dumps(response, ensure_ascii=False, sort_keys=True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=response,
        )

    async def announce(tasks: list[asyncio.Task[Any]]) -> None:
        """Tell a client that already listed tools when a background server joins (its
        declarations are now in the description)."""
        for next_done in asyncio.as_completed(tasks):
            try:
                await next_done
            except Exception:
                continue  # the next run that needs it reports why
            for session in list(listeners):
                with contextlib.suppress(Exception):
                    await session.send_tool_list_changed()

    # A client shuts a server down by closing stdin, then SIGTERM after a grace period, then
    # SIGKILL. Each upstream server runs in a session of its own (out of reach of the client's
    # process-group kill) and closing one that ignores EOF takes a grace period of its own; so a
    # SIGTERM lets the shutdown under way finish (or starts one) instead of orphaning them.
    main = asyncio.current_task()
    shutting_down = terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        if not shutting_down and main is not None:
            main.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not main thread / Windows
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        async with contextlib.AsyncExitStack() as stack:
            background: list[asyncio.Task[Any]] = []
            if cm is not None:
                try:
                    await stack.enter_async_context(cm)
                except Exception as exc:  # e.g. the sandbox's worker cannot start: say so, keep serving
                    cm, problem = None, UserError(
                        f"cannot start the Code Mode host: {type(exc).__name__}: {exc}",
                        hint="check that codemode-gen is installed completely (pip install -e .)",
                    )
                    print(problem.render(), file=sys.stderr, flush=True)
            if cm is not None:
                try:
                    background = cm.connect_in_background()
                except UserError as exc:  # unreadable out/: every run says so
                    report(exc)
            instructions = (
                f"Use the {tool_name} tool: write JavaScript that imports @codemode/servers/* modules."
                if problem is None
                else f"codemode-gen cannot serve: {problem.message} ({_restart_hint(problem)})."
            )
            server: Any = Server(
                "codemode-gen",
                version=__version__,
                instructions=instructions,
                on_list_tools=list_tools,
                on_call_tool=call_tool,
            )
            announcer = asyncio.ensure_future(announce(background))
            try:
                async with stdio_server() as (read, write):
                    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
                    await server.run(read, write, options)
            finally:
                shutting_down = True
                announcer.cancel()
                await asyncio.gather(announcer, return_exceptions=True)
    except asyncio.CancelledError:
        if not terminated:
            raise
