"""`codemode-gen serve`: Code Mode as an MCP server with exactly one tool, `codemode.run` (§2).

An agent host connects to this over stdio (or Streamable HTTP: runtime/frontends/serve_http.py) and sees
one tool whose description is the whole system prompt Code Mode needs (§3.2.1, §3.2.3, §3.2.4,
§3.5, §4.4, §5.3.2, §10.1): the rules, the limits, the capability ids and the TypeScript
declarations of every server. Runs share one `CodeMode`, so MCP sessions stay open between runs
(and are refreshed on tools/list_changed, §8); each run still gets a fresh sandbox (§1.4).

A client launches this from its own working directory, without the project's virtualenv, and
shows our stderr only in a log view; a server that exits or answers with a JSON-RPC error looks
like a flaky connection to its user. So nothing here ever raises into the SDK: a broken or
missing config keeps the server up, its tool description and every run saying what is wrong
(§3.3 `CONFIG_ERROR`), and tools/list never waits on an upstream server (servers out/ lacks
connect in the background and are announced with notifications/tools/list_changed).

Clients also give a server only seconds to start (Codex sent its first model request before a
1.8 s start had answered), so `initialize` waits for nothing but the config check: the runtime
is imported by the first tools/list, and the CodeMode (sandbox worker pool, background
connections) is entered in a task of its own once the client has initialized (`ServeHost`);
a tools/call that arrives before it is ready awaits it, tools/list never does.

Tool calls that need a person's yes (runtime/host/approval.py: policy "ask"/"ask-once") are asked
through the client, as a form (accept or decline; an "ask" tool's form has one checkbox, to
approve the tool's further calls for the rest of the run) naming the server, the tool and its
arguments (redacted, cut: `approval_form`). On a 2025-11-25 connection that is an
`elicitation/create` request on the codemode.run request's own stream. On a 2026-07-28
connection (stdio or `--http`) the codemode.run call answers with an `input_required` result
instead, the asks of the calls waiting at once together, and the client's retry with the
answers resumes the run, on any instance holding the same sealing secret
(runtime/frontends/input_required.py, runtime/host/resume.py). A client that did not declare the elicitation
capability, or a 2025-11-25 connection with no way to send the client a request (stateless
`--http`), cannot be asked: such calls are denied (fail closed) unless `--approve-all`.
Ask-once accepts last for the client connection.

What the model reads: the tools/call result carries the §3.3 response twice, as
structuredContent (what a client that reads it shows, and what the TypeScript SDK validates
against OUTPUT_SCHEMA) and as the one text content block (its JSON, compact with sorted keys:
what Claude Code and most clients show). Both are the same response, so it is made for the
model before either is written (CodeMode.run with serve's defaults, `HostOptions`): toolTrace
lists the failed and denied calls plus a toolSummary of all (`limits.trace`, `--trace`), and
the JSON of result and logs together stays within `limits.maxResponseChars` characters
(`--max-response-chars`), cut with markers and a RESPONSE_TRUNCATED warning past it
(runtime/host/tooltrace.py `shape_trace`, runtime/response.py `fit_response`).

This module is the MCP side: the tool's schemas, its handlers (`build_server`) and the stdio
transport. The CodeMode they share, its options and its start-up are runtime/frontends/serve_host.py's;
the approval form and how the client is asked, runtime/frontends/serve_approval.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import weakref
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen import __version__, payload
from codemode_gen.client.mcp_private import session_connection
from codemode_gen.errors import UserError
from codemode_gen.host_options import HostOptions
from codemode_gen.limit_bounds import MIN_RESPONSE_CHARS, TRACE_MODES
from codemode_gen.runtime.diagnostics import DiagnosticCode, diagnostic, worker_limit
from codemode_gen.runtime.frontends.admission import TICKET_SCOPE_KEY, Ticket
from codemode_gen.runtime.frontends.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME
from codemode_gen.runtime.frontends.serve_approval import (
    NO_ELICITATION,
    approval_answer,
    approval_form,
    elicitation_approver,
    elicits_forms,
    is_modern,
)
from codemode_gen.runtime.frontends.serve_host import ServeHost, log_line, restart_hint
from codemode_gen.runtime.host import otel_setup, telemetry_serve
from codemode_gen.runtime.jsonsafe import utf8_safe_json
from codemode_gen.runtime.response import Response, not_started

# Only what answering `initialize` needs is imported at start-up: the runtime (CodeMode and the
# prompt renderer, ~100 ms) is imported on the paths that use it.
if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server import Server

    from codemode_gen.runtime.codemode import CodeMode
    from codemode_gen.runtime.host.approval_request import Approver
    from codemode_gen.runtime.host.progress import ProgressCallback
    from codemode_gen.runtime.host.resume import Resumable

__all__ = [
    "INPUT_SCHEMA",
    "OUTPUT_SCHEMA",
    "TOOL_NAME",
    "TOOL_NAME_RE",
    "build_server",
    "error_response",
    "handle_run",
    "response_text",
    "serve_stdio",
]

TOOL_NAME = DEFAULT_TOOL_NAME
# MCP's tool-name rule (SEP-986): what every conforming client accepts for `--tool-name`.
TOOL_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "JavaScript or TypeScript ES module source (top-level await allowed).",
        },
        "limits": {
            "type": "object",
            "description": "Optional execution limits; unknown keys are ignored.",
            "properties": {
                **{
                    key: {"type": "integer", "minimum": 0}
                    for key in (
                        "timeoutMs",
                        "maxMemoryBytes",
                        "maxLogBytes",
                        "maxToolCalls",
                        "maxConcurrentCalls",
                    )
                },
                "maxResponseChars": {
                    "type": "integer",
                    "minimum": MIN_RESPONSE_CHARS,
                    "description": "Characters of result and logs returned; past it both are cut.",
                },
                "typecheck": {
                    "type": "boolean",
                    "description": "Type-check the script first (type errors come back as warnings).",
                },
                "trace": {
                    "enum": list(TRACE_MODES),
                    "description": "toolTrace lists every call, only failed ones (plus toolSummary), or none.",
                },
            },
        },
        "requestedCapabilities": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Server ids to connect before the script starts (the wait is not counted in timeoutMs).",
        },
    },
    "required": ["code"],
}


# The prompt (runtime/frontends/prompt.py) leaves the response's shape to this schema, which the model reads too.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {
            "type": "array",
            "items": {"type": "object"},
            "description": "console.* output, captured.",
        },
        "result": {"description": "The value of globalThis.__codemode_result__ (JSON), else null."},
        "diagnostics": {
            "type": "array",
            "items": {"type": "object"},
            "description": "Errors (script errors included) and warnings: {severity, code, message, hint?, path?}.",
        },
        "toolTrace": {
            "type": "array",
            "items": {"type": "object"},
            "description": "The script's tool calls.",
        },
        "toolSummary": {
            "type": "object",
            "description": "Calls per tool and failures, when toolTrace lists only failed calls.",
        },
    },
    "required": ["logs", "result", "diagnostics"],
}


async def handle_run(
    cm: CodeMode,
    arguments: Mapping[str, Any] | None,
    *,
    progress: ProgressCallback | None = None,
    approve: Approver | None = None,
    approval_session: Hashable = None,
    started: float | None = None,
    resumable: Resumable | None = None,
) -> Response:
    """One codemode.run request → §3.3 response; a malformed request is a diagnostic, not a crash.
    `progress`: where the run's progress notifications go (CodeMode.run), when the client asked;
    `approve` / `approval_session`: who is asked about calls that need approval, and whose
    ask-once accepts they are (CodeMode.run; `elicitation_approver`); `started`: when the run's
    timeoutMs began to count, if before (CodeMode.run: serve --http's queue); `resumable`: a
    run that may wait for answers between requests (CodeMode.run: MCP 2026-07-28)."""
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
        problem = (
            "/requestedCapabilities",
            "`requestedCapabilities` must be an array of server ids",
        )
    if problem is not None:
        return not_started(
            diagnostic(
                DiagnosticCode.INVALID_REQUEST,
                problem[1],
                hint='send {"code": "<JavaScript>"} with optional limits and requestedCapabilities',
                path=problem[0],
            )
        )
    assert isinstance(code, str)
    response = await cm.run(
        code,
        limits=args.get("limits"),
        requested_capabilities=args.get("requestedCapabilities"),
        progress=progress,
        approve=approve,
        approval_session=approval_session,
        started=started,
        resumable=resumable,
    )
    for note in cm.take_recording_notes():  # serve --record: what was written, or why not
        log_line(f"record: {note}")
    return response


def _ticket(ctx: Any) -> Ticket | None:
    """The admission ticket serve --http's gate left in the HTTP request's scope (None over stdio)."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    ticket = scope.get(TICKET_SCOPE_KEY) if isinstance(scope, dict) else None
    return ticket if isinstance(ticket, Ticket) else None


def error_response(code: DiagnosticCode, message: str, hint: str) -> Response:
    """A §3.3 response for a run that could not start (§3.3.4: never a failed tool call)."""
    return not_started(diagnostic(code, message, hint=hint))


def response_text(response: Response) -> tuple[Response, str]:
    """The response as the text content of the tools/call result (and the response itself,
    repaired if it had to be): UTF-8-safe JSON, whatever upstream let through."""
    try:
        text = payload.dumps(response, ensure_ascii=False, sort_keys=True)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate slipped through: it would kill stdout
            log_line("tools/call: response had lone surrogates; replaced")
            response = utf8_safe_json(response)
            text = payload.dumps(response, ensure_ascii=False, sort_keys=True)
    except (
        TypeError,
        ValueError,
        RecursionError,
    ) as exc:  # a bug upstream of us: still a §3.3 answer
        log_line(f"tools/call: response is not JSON: {type(exc).__name__}: {exc}")
        response = error_response(
            DiagnosticCode.HOST_ERROR,
            f"the run's response could not be serialized: {exc}",
            "retry the run; if it fails again, report it with the server's stderr log",
        )
        text = json.dumps(response, ensure_ascii=False, sort_keys=True)
    return response, text


def build_server(host: ServeHost) -> Server[Any]:
    """The SDK's low-level MCP server with the one tool, over `host`; any transport runs it."""
    import mcp_types as types
    from mcp.server import Server

    tool_name = host.tool_name
    # One approval session (ask-once memory) per client connection: the SDK builds a new session
    # proxy for every request, so the key is a token tied to the connection behind it.
    client_keys: weakref.WeakKeyDictionary[Any, object] = weakref.WeakKeyDictionary()

    def approval_session(session: Any) -> Hashable:
        connection = session_connection(session)  # the SDK's per-client Connection
        if connection is None:
            return None
        try:
            return client_keys.setdefault(connection, object())
        except TypeError:  # not weakly referable: one session for the host (stdio: one client)
            return None

    async def run(
        arguments: Mapping[str, Any] | None,
        progress: ProgressCallback | None = None,
        approve: Approver | None = None,
        session_key: Hashable = None,
        ticket: Ticket | None = None,
        resumable: Resumable | None = None,
    ) -> Response:
        if (
            ticket is not None
            and ticket.expired
            and not (resumable is not None and resumable.prior is not None)
        ):
            host.expired(ticket)  # counted in the metrics as a run that timed out
            return not_started(
                worker_limit(ticket.timeout_ms, ticket.slots)
            )  # serve --http queued it too long
        cm = await host.ready()
        if cm is None:
            problem = host.problem
            if problem is None:
                return error_response(
                    DiagnosticCode.HOST_ERROR,
                    "codemode-gen serve is shutting down",
                    "retry the run once the server is back",
                )
            return error_response(
                DiagnosticCode.CONFIG_ERROR, problem.message, restart_hint(problem)
            )
        try:
            return await handle_run(
                cm,
                arguments,
                progress=progress,
                approve=approve,
                approval_session=session_key,
                started=None if ticket is None else ticket.queued_at,
                resumable=resumable,
            )
        except UserError as exc:
            host.report(exc)
            return error_response(
                DiagnosticCode.CONFIG_ERROR,
                exc.message,
                exc.hint or "fix the file it names, then retry",
            )
        except Exception as exc:
            log_line(f"tools/call: unexpected {type(exc).__name__}: {exc}")
            return error_response(
                DiagnosticCode.HOST_ERROR,
                f"codemode-gen failed unexpectedly: {type(exc).__name__}: {exc}",
                "retry the run; if it fails again, report it with the server's stderr log",
            )

    async def initialized(ctx: Any, params: Any) -> None:
        host.start()  # the client is set up: warm the sandbox pool while it lists tools

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        host.start()  # a 2026-07-28 client sends no notifications/initialized
        session = getattr(ctx, "session", None)
        if host.announce and session is not None and not any(s is session for s in host.listeners):
            host.listeners[:] = [
                session
            ]  # one stdio connection: the latest request's proxy will do
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool_name,
                    title="Run Code Mode JavaScript",
                    description=host.describe(),
                    input_schema=INPUT_SCHEMA,
                    output_schema=OUTPUT_SCHEMA,
                )
            ]
        )

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != tool_name:
            return types.CallToolResult(
                content=[
                    types.TextContent(
                        type="text",
                        text=f"unknown tool {params.name!r}; the only tool is {tool_name}",
                    )
                ],
                is_error=True,
            )
        # A progressToken in the request's _meta asks for progress while the run lasts: the SDK's
        # report_progress sends notifications/progress with it (on the request's own stream). A
        # notifications/cancelled for the request cancels this handler, which ends the run.
        # A call that needs approval is asked of the client's user (elicitation, on this request's
        # stream); the wait counts within the run's timeoutMs and is told as progress.
        # On a 2026-07-28 connection the client is asked through an input_required result instead
        # (runtime/frontends/input_required.py): the run ends to wait, and the retry resumes it.
        session = getattr(ctx, "session", None)
        asked = (getattr(ctx, "meta", None) or {}).get("progress_token") is not None
        resumable = None
        if is_modern(session) and (
            params.request_state is not None
            or (elicits_forms(session) and not host.options.approve_all)
        ):
            from codemode_gen.runtime.frontends.input_required import (
                input_required_result,
                resumable_call,
            )

            made = resumable_call(
                params.name,
                params.arguments,
                params.request_state,
                params.input_responses,
                host.sealer(),
                answer=approval_answer,
                cannot_ask=None if elicits_forms(session) else NO_ELICITATION,
            )
            if isinstance(made, dict):
                return _tool_result(made)
            resumable = made
        response = await run(
            params.arguments,
            session.report_progress if asked and session is not None else None,
            elicitation_approver(session, getattr(ctx, "request_id", None)),
            approval_session(session),
            _ticket(ctx),
            resumable,
        )
        if resumable is not None and resumable.suspension is not None:
            return input_required_result(resumable.suspension, approval_form)
        return await _tool_result_async(response)

    async def _tool_result_async(response: Response) -> types.CallToolResult:
        # Encoding walks the whole response: a large one (a 12 MB result) off the event loop.
        if payload.is_large(response):
            response, text = await payload.offload(response_text, response)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], structured_content=response
            )
        return _tool_result(response)

    def _tool_result(response: Response) -> types.CallToolResult:
        response, text = response_text(response)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=response,
        )

    server: Server[Any] = Server(
        "codemode-gen",
        version=__version__,
        instructions=host.instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, initialized
    )
    return server


async def serve_stdio(
    config: Path,
    out: Path | None,
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    prompt_budget: int = DEFAULT_PROMPT_BUDGET,
    options: HostOptions = HostOptions(),
) -> None:
    """Serve the one tool over stdio until the client disconnects; never exits for a bad config."""
    from mcp.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    telemetry_serve.install_log_handler(
        log_line
    )  # warnings of the runtime as serve's lines, with trace ids
    host = ServeHost(
        config,
        out,
        tool_name=tool_name,
        prompt_budget=prompt_budget,
        options=options,
        announce=True,
    )
    host.check()
    server = build_server(host)

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

    with contextlib.suppress(
        NotImplementedError, RuntimeError, ValueError
    ):  # not main thread / Windows
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        try:
            async with stdio_server() as (read, write):
                init = server.create_initialization_options(NotificationOptions(tools_changed=True))
                await server.run(read, write, init)
        finally:
            shutting_down = True
            await host.aclose()
            await asyncio.to_thread(
                otel_setup.shutdown
            )  # the last runs' spans, before the process ends
    except asyncio.CancelledError:
        if not terminated:
            raise
