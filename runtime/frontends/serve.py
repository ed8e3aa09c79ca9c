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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen import __version__, gcpolicy, payload
from codemode_gen.errors import UserError
from codemode_gen.limit_bounds import DEFAULT_MAX_RESPONSE_CHARS, MIN_RESPONSE_CHARS, TRACE_MODES
from codemode_gen.runtime.diagnostics import DiagnosticCode, diagnostic, worker_limit
from codemode_gen.runtime.frontends.admission import TICKET_SCOPE_KEY, Ticket
from codemode_gen.runtime.frontends.prompt_defaults import DEFAULT_PROMPT_BUDGET, DEFAULT_TOOL_NAME
from codemode_gen.runtime.host import otel_setup, telemetry, telemetry_serve
from codemode_gen.runtime.jsonsafe import safe_name, utf8_safe_json
from codemode_gen.runtime.response import not_started

# Only what answering `initialize` needs is imported at start-up: the runtime (CodeMode and the
# prompt renderer, ~100 ms) is imported on the paths that use it.
if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server import Server

    from codemode_gen.runtime.codemode import CodeMode
    from codemode_gen.runtime.frontends.input_required import StateSealer
    from codemode_gen.runtime.host.approval_request import (
        Answer,
        ApprovalRequest,
        Approver,
        Unusable,
    )
    from codemode_gen.runtime.host.progress import ProgressCallback
    from codemode_gen.runtime.host.resume import Resumable
    from codemode_gen.runtime.limits import TraceMode

__all__ = [
    "INPUT_SCHEMA",
    "OUTPUT_SCHEMA",
    "TOOL_NAME",
    "TOOL_NAME_RE",
    "HostOptions",
    "ServeHost",
    "approval_form",
    "build_server",
    "elicitation_approver",
    "error_response",
    "form_answer",
    "load_host",
    "serve_stdio",
    "tool_description",
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
                "maxResponseChars": {"type": "integer", "minimum": MIN_RESPONSE_CHARS,
                                     "description": "Characters of result and logs returned; past it both are cut."},
                "typecheck": {"type": "boolean", "description": "Type-check the script first (type errors come back as warnings)."},
                "trace": {"enum": list(TRACE_MODES),
                          "description": "toolTrace lists every call, only failed ones (plus toolSummary), or none."},
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

# The form of an approval request (elicitation/create, form mode): the answer is the action
# itself (accept / decline / cancel). Claude Code and the SDKs' clients take an object schema
# with no properties; an "ask" tool's form (`approval_form`) adds one boolean, FOR_RUN_FIELD:
# accepted with it true, the tool's further calls in this run go through unasked (approval.FOR_RUN).
APPROVAL_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
APPROVAL_ACTIONS = "Accept to let this one call run; decline to refuse it (the script is told and goes on)."
FOR_RUN_FIELD = "allowForRun"
APPROVAL_ACTIONS_FOR_RUN = (
    "Accept to let this call run (tick the box to let its further calls in this run through too);"
    " decline to refuse it (the script is told and goes on)."
)


def approval_form(request: ApprovalRequest) -> tuple[str, dict[str, Any]]:
    """The message and requestedSchema asking about `request`: a plain accept/decline, or for
    an "ask" tool (`offers_run`) with a checkbox to approve its calls for the rest of the run."""
    from codemode_gen.display import display_string

    if not request.offers_run:
        return request.describe(APPROVAL_ACTIONS), APPROVAL_SCHEMA
    field = {
        "type": "boolean",
        "title": f"Allow every call of {display_string(request.tool_name)} for the rest of this run",
        "description": "Unticked: only this call.",
        "default": False,
    }
    return request.describe(APPROVAL_ACTIONS_FOR_RUN), {"type": "object", "properties": {FOR_RUN_FIELD: field}}


def form_answer(action: str, content: Mapping[str, Any] | None) -> Answer:
    """The approver's answer from an elicitation result: accept → yes (FOR_RUN when the box
    was ticked: only a literal true counts), decline or cancel → no."""
    from codemode_gen.runtime.host.approval_request import FOR_RUN

    if action != "accept":
        return False
    return FOR_RUN if isinstance(content, Mapping) and content.get(FOR_RUN_FIELD) is True else True

# The prompt (runtime/frontends/prompt.py) leaves the response's shape to this schema, which the model reads too.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "object"}, "description": "console.* output, captured."},
        "result": {"description": "The value of globalThis.__codemode_result__ (JSON), else null."},
        "diagnostics": {
            "type": "array", "items": {"type": "object"},
            "description": "Errors (script errors included) and warnings: {severity, code, message, hint?, path?}.",
        },
        "toolTrace": {"type": "array", "items": {"type": "object"}, "description": "The script's tool calls."},
        "toolSummary": {"type": "object", "description": "Calls per tool and failures, when toolTrace lists only failed calls."},
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
) -> dict[str, Any]:
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
        problem = ("/requestedCapabilities", "`requestedCapabilities` must be an array of server ids")
    if problem is not None:
        return not_started(diagnostic(
            DiagnosticCode.INVALID_REQUEST, problem[1],
            hint="send {\"code\": \"<JavaScript>\"} with optional limits and requestedCapabilities",
            path=problem[0],
        ))
    assert isinstance(code, str)
    response = await cm.run(code, limits=args.get("limits"), requested_capabilities=args.get("requestedCapabilities"),
                            progress=progress, approve=approve, approval_session=approval_session, started=started,
                            resumable=resumable)
    for note in cm.take_recording_notes():  # serve --record: what was written, or why not
        log_line(f"record: {note}")
    return response


def approval_answer(result: Any) -> Answer | Unusable:
    """The user's answer to `approval_form`, the same on every protocol version
    (elicitation/create's result, an input_required retry's inputResponses entry): `form_answer`'s,
    or why the client's response cannot count as an answer."""
    from codemode_gen.runtime.host.approval_request import Unusable

    if isinstance(result, Mapping):
        action, content = result.get("action"), result.get("content")
    else:
        action, content = getattr(result, "action", None), getattr(result, "content", None)
    if action in ("accept", "decline", "cancel"):
        return form_answer(action, content if isinstance(content, Mapping) else None)
    return Unusable("the MCP client's response to the approval request was not an elicitation result")


def elicitation_approver(session: Any, request_id: Any = None) -> Approver:
    """An approver (runtime/host/approval.py) that asks the person at the MCP client: one
    `elicitation/create` request in form mode, on the stream of request `request_id` (the
    codemode.run being served). Accept → True (FOR_RUN with the form's box ticked: `form_answer`);
    decline or cancel → False. A connection that
    cannot carry a server-to-client request, or a client without form elicitation, raises
    ApprovalUnavailable: the call is denied and the message says why."""
    from mcp.shared.exceptions import MCPError, NoBackChannelError

    from codemode_gen.runtime.host.approval_request import ApprovalUnavailable, Unusable

    async def approve(request: ApprovalRequest) -> Answer:
        channel = session is not None and getattr(session, "can_send_request", False)
        # A 2026-07-28 client is asked here only when it cannot show the form (input_required
        # otherwise): say that, not that the transport has no back-channel. A stateless HTTP
        # request on 2025-11-25 does not know the client's capabilities: the channel is why.
        if session is not None and (channel or _modern(session)) and not _elicits_forms(session):
            raise ApprovalUnavailable(NO_ELICITATION)
        if not channel:
            raise ApprovalUnavailable(_no_channel(session))
        message, schema = approval_form(request)
        try:
            result = await session.elicit_form(message, schema, related_request_id=request_id)
        except NoBackChannelError:
            raise ApprovalUnavailable(_no_channel(session)) from None
        except MCPError as exc:  # e.g. a client that declared elicitation and then refused it
            raise ApprovalUnavailable(f"the MCP client could not ask the user: {safe_name(exc.message, 300)}") from None
        answer = approval_answer(result)
        if isinstance(answer, Unusable):
            raise ApprovalUnavailable(answer)
        return answer

    return approve


def _no_channel(session: Any) -> str:
    """Why a 2025-11-25 connection without a back-channel cannot ask: stateless HTTP (a
    2026-07-28 connection is asked through input_required instead: `_modern`)."""
    return (
        "serve --http is stateless and cannot send a client on MCP 2025-11-25 an elicitation request (a "
        "client on MCP 2026-07-28 is asked through input_required, a 2025-11-25 one over stdio; serve "
        "--approve-all approves such calls without asking)"
    )


def _modern(session: Any) -> bool:
    """Whether the connection speaks MCP 2026-07-28 or later (no server-to-client requests)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return str(getattr(session, "protocol_version", "") or "") in MODERN_PROTOCOL_VERSIONS


NO_ELICITATION = (
    "the MCP client does not support elicitation, so the user cannot be asked "
    "(serve --approve-all approves such calls without asking)"
)


def _elicits_forms(session: Any) -> bool:
    """Whether the client declared form-mode elicitation: `elicitation: {}` (2025-06-18, forms
    only) or `elicitation: {form: {}}`; a client that declared only `url` cannot show a form."""
    elicitation = getattr(getattr(session, "client_capabilities", None), "elicitation", None)
    if elicitation is None:
        return False
    return getattr(elicitation, "form", None) is not None or getattr(elicitation, "url", None) is None


def _ticket(ctx: Any) -> Ticket | None:
    """The admission ticket serve --http's gate left in the HTTP request's scope (None over stdio)."""
    scope = getattr(getattr(ctx, "request", None), "scope", None)
    ticket = scope.get(TICKET_SCOPE_KEY) if isinstance(scope, dict) else None
    return ticket if isinstance(ticket, Ticket) else None


def error_response(code: DiagnosticCode, message: str, hint: str) -> dict[str, Any]:
    """A §3.3 response for a run that could not start (§3.3.4: never a failed tool call)."""
    return not_started(diagnostic(code, message, hint=hint))


def response_text(response: dict[str, Any]) -> tuple[dict[str, Any], str]:
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
    except (TypeError, ValueError, RecursionError) as exc:  # a bug upstream of us: still a §3.3 answer
        log_line(f"tools/call: response is not JSON: {type(exc).__name__}: {exc}")
        response = error_response(DiagnosticCode.HOST_ERROR, f"the run's response could not be serialized: {exc}",
                                  "retry the run; if it fails again, report it with the server's stderr log")
        text = json.dumps(response, ensure_ascii=False, sort_keys=True)
    return response, text


def log_line(text: str) -> None:
    """One line on stderr: what the client's log view shows (white space folded, then cut and
    made terminal-safe as every script-chosen name is: `safe_name`). A line written during a
    run ends with its trace id (runtime/host/telemetry.py), which leads to the run's trace."""
    line = safe_name(" ".join(text.split()), MAX_LOG_LINE_CHARS - 1)
    with contextlib.suppress(OSError, ValueError):
        print(f"codemode-gen serve: {line}{telemetry_serve.log_suffix()}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class HostOptions:
    """How serve builds its CodeMode (the serve command's flags), passed whole through the
    transports so a new flag is one field, not one more parameter on every layer."""

    #: Type-check every run's script first (limits.typecheck's default), with this compiler.
    typecheck: bool = False
    tsc: str | None = None
    #: Sandbox worker processes running at once (None: codemode.toml's, else two per CPU).
    max_workers: int | None = None
    #: Append successful live calls to fixtures/ (runtime/host/learn.py).
    record: bool = False
    #: Approve every tool call that needs approval without asking (runtime/host/approval.py); a
    #: "deny" policy still denies.
    approve_all: bool = False
    #: The response is made for a model (limits.trace and limits.maxResponseChars unless a run's
    #: limits or codemode.toml say otherwise): toolTrace lists the failed and denied calls plus a
    #: toolSummary, and result and logs together stay within this many characters.
    trace: TraceMode = "errors"
    max_response_chars: int = DEFAULT_MAX_RESPONSE_CHARS
    #: Seals the state of runs waiting for approval on MCP 2026-07-28 (`--state-secret`,
    #: CODEMODE_STATE_SECRET): the same on every instance that may get a retry; None: a random
    #: key of this process (runtime/frontends/input_required.py).
    state_secret: str | None = None
    #: Runs may propose a skill (`saveSkill` of @codemode/skills): written to skills/ only once
    #: the user approves it through the same channel as destructive calls (README "Skills").
    skills_writable: bool = False


def load_host(
    config: Path, out: Path | None, options: HostOptions = HostOptions()
) -> tuple[CodeMode | None, UserError | None]:
    """The CodeMode for `config`, or the configuration error that prevents it."""
    from codemode_gen.runtime.codemode import CodeMode

    try:
        return CodeMode.from_config(
            config, out=out, typecheck=options.typecheck, tsc=options.tsc, max_workers=options.max_workers,
            record=options.record, approve_all=options.approve_all, trace=options.trace,
            max_response_chars=options.max_response_chars, skills_writable=options.skills_writable,
        ), None
    except UserError as exc:
        return None, exc


def check_config(config: Path) -> UserError | None:
    """What `load_host` would refuse, found without importing the runtime: `initialize` says
    it in the instructions and must not wait for more (the same files CodeMode.from_config reads)."""
    from codemode_gen.config import load_config
    from codemode_gen.generator.project import load_project_settings

    try:  # quietly: load_host says the notes when it loads the same files
        load_config(config, load_project_settings(config, report=lambda line: None))
    except UserError as exc:
        return exc
    return None


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
        from codemode_gen.runtime.frontends.prompt import system_prompt

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


class ServeHost:
    """The one CodeMode of a serve process, shared by all its clients, and what is wrong when
    there is none; the handlers of `build_server` use nothing else.

    It comes up in steps, so that no step waits for a later one: `check()` reads the config
    (for `initialize`'s instructions); `describe()` (tools/list) constructs the CodeMode, which
    needs no sandbox (the description is built from out/manifest.json); `start()` enters it in a
    task of its own — the sandbox worker pool, then the background connections of the servers
    out/ lacks — and `ready()` (tools/call) awaits that. `announce`: tell the clients that
    listed tools when a background server joins (stdio; a stateless HTTP server has no channel
    outside a request to say it on).
    """

    def __init__(
        self,
        config: Path,
        out: Path | None,
        *,
        tool_name: str = DEFAULT_TOOL_NAME,
        prompt_budget: int = DEFAULT_PROMPT_BUDGET,
        options: HostOptions = HostOptions(),
        announce: bool = True,
    ) -> None:
        self.config = config
        self.out = out
        self.tool_name = tool_name
        self.prompt_budget = prompt_budget
        self.options = options
        self.announce = announce
        self.problem: UserError | None = None  # set: every run is a CONFIG_ERROR saying it
        self.listeners: list[Any] = []  # the client session(s) that listed tools: told when the list changes
        self._cm: CodeMode | None = None
        self._entered: CodeMode | None = None  # the CodeMode while it is entered (runs go to it)
        self._task: asyncio.Task[None] | None = None  # holds the CodeMode entered (anyio: one task)
        self._ready = asyncio.Event()  # entered, or failed to: ready() returns
        self._stop = asyncio.Event()
        self._closing = False
        self._reported: set[str] = set()  # configuration errors already on stderr (once each, not per request)
        self._sealer: StateSealer | None = None

    # ------------------------------------------------------------------ start-up

    def check(self) -> UserError | None:
        """Read the config (not the runtime); a problem goes to stderr and serving goes on."""
        self.problem = check_config(self.config)
        if self.problem is not None:
            self.report(self.problem)
            log_line("serving anyway: the tool's description and every run report this error")
        return self.problem

    def instructions(self) -> str:
        if self.problem is None:
            return f"Use the {self.tool_name} tool: write JavaScript that imports @codemode/servers/* modules."
        return f"codemode-gen cannot serve: {self.problem.message} ({_restart_hint(self.problem)})."

    def codemode(self) -> CodeMode | None:
        """The CodeMode, constructed on first need (imports the runtime); None when the config
        or its start failed (`problem` says why)."""
        if self._cm is None and self.problem is None:
            self._cm, problem = load_host(self.config, self.out, self.options)
            if problem is not None:  # the files changed since check(): as if check() had failed
                self.problem = problem
                self.report(problem)
            elif self._cm is not None:  # its runs' spans name the tool; a line per run on stderr
                self._cm.telemetry.tool_name = self.tool_name
                self._cm.telemetry.run_log = log_line
        return self._cm if self.problem is None else None

    def start(self) -> None:
        """Enter the CodeMode in the background, once (idempotent; no-op while closing)."""
        if self._task is None and not self._closing:
            self._task = asyncio.ensure_future(self._hold())

    async def ready(self) -> CodeMode | None:
        """The entered CodeMode, once it is (starting it if nothing did yet); None when there is
        none: `problem` says why, or the server is shutting down."""
        self.start()
        await self._ready.wait()
        return self._entered

    @property
    def is_ready(self) -> bool:
        return self._entered is not None

    async def _hold(self) -> None:
        """Enter the CodeMode, serve until aclose(), exit it: in one task, as anyio's task groups
        (the MCP sessions) require."""
        entered = False
        try:
            cm = self.codemode()
            if cm is None:
                return
            async with cm:
                entered = True
                try:
                    background = cm.connect_in_background()
                except UserError as exc:  # unreadable out/: every run says so
                    self.report(exc)
                    background = []
                self._entered = cm
                self._ready.set()
                announcer = asyncio.ensure_future(self._announce(background)) if self.announce and background else None
                # A long-running host: no automatic full collection in the middle of a run's
                # payload; the host collects between runs (codemode_gen/gcpolicy.py).
                gcpolicy.install()
                collector = asyncio.ensure_future(gcpolicy.collect_periodically(lambda: cm.runs_in_progress > 0))
                try:
                    await self._stop.wait()
                finally:
                    self._entered = None
                    for task in (announcer, collector):
                        if task is not None:
                            task.cancel()
                            await asyncio.gather(task, return_exceptions=True)
        except Exception as exc:
            if entered:  # closing the sessions or the sandbox failed: the process is ending anyway
                log_line(f"shutdown: unexpected {type(exc).__name__}: {exc}")
            else:  # e.g. the sandbox's worker cannot start: say so, keep serving
                self.problem = UserError(
                    f"cannot start the Code Mode host: {type(exc).__name__}: {exc}",
                    hint="check that codemode-gen is installed completely (pip install -e .)",
                )
                self.report(self.problem)
        finally:
            self._entered = None
            self._ready.set()

    async def _announce(self, tasks: list[asyncio.Task[Any]]) -> None:
        """Tell a client that already listed tools when a background server joins (its
        declarations are now in the description)."""
        for next_done in asyncio.as_completed(tasks):
            try:
                await next_done
            except Exception:
                continue  # the next run that needs it reports why
            for session in list(self.listeners):
                with contextlib.suppress(Exception):
                    await session.send_tool_list_changed()

    async def aclose(self) -> None:
        """Exit the CodeMode (upstream servers stopped, sandbox workers reaped); idempotent."""
        self._closing = True
        self._stop.set()
        task = self._task
        if task is None:
            self._ready.set()  # never started: a late ready() answers instead of waiting forever
            return
        if not self._ready.is_set():
            task.cancel()  # still entering: CodeMode.__aenter__ undoes what it started
        await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------------ per request

    def report(self, exc: UserError) -> None:
        if exc.message not in self._reported:
            self._reported.add(exc.message)
            print(exc.render(), file=sys.stderr, flush=True)

    def expired(self, ticket: Ticket) -> None:
        """A run that waited for admission past its deadline (answered without running): its
        metrics, as a run that timed out (runtime/host/telemetry.py)."""
        cm = self.codemode()
        if cm is not None:
            waited = max(0.0, time.monotonic() - ticket.queued_at)
            metrics = cm.telemetry.metrics
            metrics.queue_wait.observe(waited, "admission")
            metrics.runs.add(telemetry.TIMEOUT)
            metrics.run_duration.observe(waited, telemetry.TIMEOUT)

    def run_slots(self) -> int:
        """How many runs this host runs at once: its sandbox's worker cap (--max-workers, else
        [sandbox] max_workers, else two per CPU), as CodeMode sizes its pool."""
        if self.options.max_workers is not None:
            return self.options.max_workers
        cm = self.codemode()
        if cm is not None and cm.settings.max_workers is not None:
            return cm.settings.max_workers
        from codemode_gen.runtime.sandbox.pool import default_max_workers

        return default_max_workers()

    def run_timeout_ms(self, limits: Mapping[str, Any] | None) -> int | None:
        """The timeoutMs a run asking for `limits` gets (the project's [limits] under them);
        None when it cannot start anyway (invalid limits, a broken config): it is answered at
        once without a worker."""
        cm = self.codemode()
        if cm is None:
            return None
        from codemode_gen.runtime.limits import Limits, LimitsError

        try:
            return Limits.from_json({**dict(cm.settings.limits), **dict(limits or {})}).timeoutMs
        except (LimitsError, TypeError, ValueError):
            return None

    def sealer(self) -> StateSealer:
        """What seals the state of runs waiting for approval (MCP 2026-07-28), made on first use."""
        if self._sealer is None:
            from codemode_gen.runtime.frontends.input_required import StateSealer

            self._sealer = StateSealer(self.options.state_secret)
        return self._sealer

    def describe(self) -> str:
        """The tool's description; never waits (no sandbox, no upstream server)."""
        try:
            return tool_description(self.codemode(), self.problem, tool_name=self.tool_name,
                                    budget=self.prompt_budget, on_error=self.report)
        except Exception as exc:  # a bug: still answer, with the reason on stderr
            log_line(f"tools/list: unexpected {type(exc).__name__}: {exc}")
            return (
                f"Code Mode: the description could not be built ({type(exc).__name__}: {exc}). "
                f"`{self.tool_name}` calls may still work: send {{\"code\": \"<JavaScript ES module>\"}}.\n"
            )


def build_server(host: ServeHost) -> Server[Any]:
    """The SDK's low-level MCP server with the one tool, over `host`; any transport runs it."""
    import mcp_types as types
    from mcp.server import Server

    tool_name = host.tool_name
    # One approval session (ask-once memory) per client connection: the SDK builds a new session
    # proxy for every request, so the key is a token tied to the connection behind it.
    client_keys: weakref.WeakKeyDictionary[Any, object] = weakref.WeakKeyDictionary()

    def approval_session(session: Any) -> Hashable:
        connection = getattr(session, "_connection", None)  # the SDK's per-client Connection
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
    ) -> dict[str, Any]:
        if ticket is not None and ticket.expired and not (resumable is not None and resumable.prior is not None):
            host.expired(ticket)  # counted in the metrics as a run that timed out
            return not_started(worker_limit(ticket.timeout_ms, ticket.slots))  # serve --http queued it too long
        cm = await host.ready()
        if cm is None:
            problem = host.problem
            if problem is None:
                return error_response(DiagnosticCode.HOST_ERROR, "codemode-gen serve is shutting down",
                                      "retry the run once the server is back")
            return error_response(DiagnosticCode.CONFIG_ERROR, problem.message, _restart_hint(problem))
        try:
            return await handle_run(cm, arguments, progress=progress, approve=approve, approval_session=session_key,
                                    started=None if ticket is None else ticket.queued_at, resumable=resumable)
        except UserError as exc:
            host.report(exc)
            return error_response(DiagnosticCode.CONFIG_ERROR, exc.message, exc.hint or "fix the file it names, then retry")
        except Exception as exc:
            log_line(f"tools/call: unexpected {type(exc).__name__}: {exc}")
            return error_response(
                DiagnosticCode.HOST_ERROR, f"codemode-gen failed unexpectedly: {type(exc).__name__}: {exc}",
                "retry the run; if it fails again, report it with the server's stderr log",
            )

    async def initialized(ctx: Any, params: Any) -> None:
        host.start()  # the client is set up: warm the sandbox pool while it lists tools

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        host.start()  # a 2026-07-28 client sends no notifications/initialized
        session = getattr(ctx, "session", None)
        if host.announce and session is not None and not any(s is session for s in host.listeners):
            host.listeners[:] = [session]  # one stdio connection: the latest request's proxy will do
        return types.ListToolsResult(tools=[types.Tool(
            name=tool_name,
            title="Run Code Mode JavaScript",
            description=host.describe(),
            input_schema=INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
        )])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != tool_name:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"unknown tool {params.name!r}; the only tool is {tool_name}")],
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
        if _modern(session) and (params.request_state is not None or (
                _elicits_forms(session) and not host.options.approve_all)):
            from codemode_gen.runtime.frontends.input_required import (
                input_required_result,
                resumable_call,
            )

            made = resumable_call(
                params.name, params.arguments, params.request_state, params.input_responses, host.sealer(),
                answer=approval_answer, cannot_ask=None if _elicits_forms(session) else NO_ELICITATION,
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

    async def _tool_result_async(response: dict[str, Any]) -> types.CallToolResult:
        # Encoding walks the whole response: a large one (a 12 MB result) off the event loop.
        if payload.is_large(response):
            response, text = await payload.offload(response_text, response)
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=response)
        return _tool_result(response)

    def _tool_result(response: dict[str, Any]) -> types.CallToolResult:
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
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
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

    telemetry_serve.install_log_handler(log_line)  # warnings of the runtime as serve's lines, with trace ids
    host = ServeHost(config, out, tool_name=tool_name, prompt_budget=prompt_budget, options=options, announce=True)
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

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not main thread / Windows
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        try:
            async with stdio_server() as (read, write):
                init = server.create_initialization_options(NotificationOptions(tools_changed=True))
                await server.run(read, write, init)
        finally:
            shutting_down = True
            await host.aclose()
            await asyncio.to_thread(otel_setup.shutdown)  # the last runs' spans, before the process ends
    except asyncio.CancelledError:
        if not terminated:
            raise

