"""Approval of tool calls a script makes (issue 12): which calls need a person's yes, and asking.

A script runs unattended, but some tools change or destroy things. Every call goes through the
run's bridge (runtime/host/bridge.py), which asks this module's `ApprovalGate` after the input was
validated and before anything is sent; a call that is not approved is never sent, and the
script gets a `ToolCallError` with code `APPROVAL_DENIED` it can catch (§10: only limits end a
run).

Policy per tool (`tool_policy`, pure): the tool's own entry in codemode.toml
(`[servers.<id>.approval] <tool> = "..."`), else the server's default (`approval = "..."` or
`"*" = "..."` in that table), else the project default (`approval = "..."` at the top); "auto"
there means "from the tool's MCP annotations":

- `readOnlyHint: true` → allow;
- `destructiveHint: false` (and not read-only) → allow: the server says it only adds;
- anything else → ask. This fails closed: a tool without annotations, or with `readOnlyHint:
  false` and no `destructiveHint` (which the MCP spec then defaults to true), is asked for.

Why a tool without annotations is asked before every call, not once per session: in the real
catalogs (tests/data/catalogs) the servers that annotate nothing are the ones that post, push and
write (github `push_files`, slack `slack_post_message`, sqlite `write_query`, puppeteer
`puppeteer_evaluate`), and a yes given to one script must not cover another script's calls
later in the session. What keeps this livable: every question of an "ask" tool offers to
approve the tool's further calls for the rest of the run (`FOR_RUN`), so a loop asks once; the
project decides for good in codemode.toml, and `record`, `generate` and `codemode-gen policy`
print the policy with the lines that change it (`policy_table`). Where nobody can be asked it
stays a denial (fail closed), whose hint says the same lines.

Annotations are the server's own claims; a server that lies about them is only contained by an
explicit entry in codemode.toml. A per-tool `deny` hides the tool altogether (config.py adds it
to the server's blocklist: no binding, no declaration, not in discovery), so the gate only sees a
`deny` that came from a default (`"*" = "deny"`): such calls are refused without asking.

Asking is the host's business: an `Approver` is `async (ApprovalRequest) -> Answer`: True (this
call), False, or `FOR_RUN` ("run": this call and every later call of the same tool in the same
run, which the gate then lets through without asking, "approved-for-run"; offered for "ask"
tools, `ApprovalRequest.offers_run`). `run` asks on the terminal (cli/run.py: `a`), `serve`
through MCP elicitation (a checkbox of the form), the Python API takes any callable.
An approver that cannot ask (no terminal, a client without elicitation) raises
`ApprovalUnavailable`; one that raises anything else counts as a no. No approver at all → no
(fail closed), unless the host was built with `approve_all` (`run --yes`, `serve
--approve-all`).

`ask-once` remembers an accept for the rest of the session (the host's lifetime, or the client
session `serve` names), by server config id and tool name; a decline is never remembered. Asks
of the same tool are serialised, so two calls in one `Promise.all` are asked in turn and an
ask-once accept of the first lets the second through without asking; an approver marked
`asks_in_batches` (serve's on MCP 2026-07-28 connections, runtime/host/resume.py: every call waiting
at once is asked in one input_required round) is not serialised. The wait counts within
the run's timeoutMs: a run still waiting when it runs out ends as any run that times out.

Every call that reached the gate carries its decision into toolTrace (`"approval"`): "allowed"
(by policy), "approved" (asked, accepted, or approved by `approve_all`), "approved-for-session"
(an ask-once accept remembered), "approved-for-run" (an earlier `FOR_RUN` answer of this run),
"denied". Arguments are shown to the person asked, never
written to the trace; what they see is redacted like fixtures (the server's env/header values
and codemode.toml's `redact` patterns), cut at `MAX_ARGUMENTS_CHARS`, and shown as data: one
line of JSON with every character that could hide text or fake a line break escaped, set off
behind a gutter after the host's own words (codemode_gen/display.py), so nothing a script
writes can read as the host's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterable,
    Mapping,
    MutableSet,
    Sequence,
)
from dataclasses import dataclass
from typing import Any, Literal

# What codemode.toml may say (a Policy, or "auto": from the tool's annotations) lives with the
# config that parses it.
from codemode_gen import payload
from codemode_gen.config import (
    APPROVAL_SETTINGS,
    ApprovalSetting,
    ServerConfig,
    ServerSettings,
    Settings,
)
from codemode_gen.display import GUTTER, data_block, display_json, display_string
from codemode_gen.generator.redact import Redactor
from codemode_gen.runtime import jsonsafe
from codemode_gen.settings_schema import SettingsSource

__all__ = [
    "APPROVAL_SETTINGS",
    "DENIED_CODE",
    "FOR_RUN",
    "MAX_ARGUMENTS_CHARS",
    "Answer",
    "ApprovalGate",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalSetting",
    "ApprovalUnavailable",
    "Approver",
    "Decision",
    "DenyReason",
    "Policy",
    "PolicySource",
    "ToolPolicy",
    "Unusable",
    "denial_message",
    "describe_annotations",
    "explain_policy",
    "policy_from_annotations",
    "policy_table",
    "toml_line",
    "tool_policy",
]

log = logging.getLogger(__name__)

#: What a tool's calls get: sent at once, sent after a yes (every call / the first per session),
#: or never sent.
Policy = Literal["allow", "ask", "ask-once", "deny"]
#: A call's outcome at the gate, as toolTrace's `approval` shows it.
Decision = Literal["allowed", "approved", "approved-for-session", "approved-for-run", "denied"]
#: Why a tool has its policy: one of its MCP annotations, a line of codemode.toml (or the
#: blocklist), or the default for a tool whose annotations say nothing ("auto" asks).
PolicySource = Literal["annotation", "config", "default"]
#: Why a call was denied: the person said no; nobody could be asked; no answer before the run's
#: timeoutMs; a default `deny` policy; the approver failed.
DenyReason = Literal["declined", "unavailable", "timeout", "policy", "error"]
#: The `code` of the ToolCallError a denied call throws in the script.
DENIED_CODE = "APPROVAL_DENIED"

# Bounds the arguments shown to the person asked (characters of their JSON): a script can pass
# megabytes, which neither a terminal nor an elicitation dialog can show usefully.
MAX_ARGUMENTS_CHARS = 1000
# Bounds the approval sessions remembered at once (ask-once accepts, by session key): a `serve`
# over HTTP with ever new clients cannot grow host memory; the oldest session is forgotten
# (its tools are asked again).
MAX_APPROVAL_SESSIONS = 256
# Bounds the tool names shown in a message or prompt (they come from the server).
MAX_SHOWN_NAME_CHARS = 200
# Characters of shown arguments per line of an elicitation message: clients lay the message out
# in dialogs of unknown width, and a line the dialog wraps again would start without the gutter
# that marks it as data. Narrow enough for a small dialog, wide enough for JSON to read.
ELICITATION_DATA_WIDTH = 60


class ApprovalUnavailable(Exception):
    """Raised by an approver that has no way to ask (no terminal, a client without
    elicitation): the call is denied, and the message says why."""


@dataclass(frozen=True)
class ApprovalRequest:
    """What the person asked gets to see: who wants to call what, with which arguments.

    `server_id` is the module path scripts import (`@codemode/servers/<server_id>`),
    `config_id` the server's key in .mcp.json and codemode.toml; `arguments_text` is the
    arguments' JSON on one line, redacted, cut at MAX_ARGUMENTS_CHARS, with every character
    that could hide text or break the line escaped (`display_json`); `policy` is "ask" or
    "ask-once". Every text field is safe to print on a terminal; show the arguments with
    `arguments_block`, after the host's own words.
    """

    server_id: str
    config_id: str
    tool_name: str
    arguments_text: str
    annotations: Mapping[str, Any] | None
    policy: Policy

    @property
    def offers_run(self) -> bool:
        """Whether the approver may answer `FOR_RUN`: an "ask" tool's calls are asked one by
        one, so a yes for the rest of the run spares the questions of a loop (an "ask-once"
        yes already covers the session)."""
        return self.policy == "ask"

    def describe(self, question: str = "", *, width: int = ELICITATION_DATA_WIDTH) -> str:
        """The message for a person: the host's words (who wants to call what; `question`),
        then the arguments set off as data, last (`arguments_block`)."""
        once = " (ask-once: a yes approves this tool for the rest of the session)" if self.policy == "ask-once" else ""
        flags = describe_annotations(self.annotations)
        return (
            f"A script wants to call tool {display_string(self.tool_name)} of server"
            f" {display_string(self.config_id)}{f' ({flags})' if flags else ''}{once}.\n"
            f"{question + chr(10) if question else ''}"
            f"{ARGUMENTS_HEADING}\n{self.arguments_block(width)}"
        )

    def arguments_block(self, width: int) -> str:
        """The arguments as lines of at most `width` characters, each behind the data gutter."""
        return data_block(self.arguments_text, width)


#: The line before shown arguments: what they are, so that nothing in them reads as ours.
ARGUMENTS_HEADING = (
    f"Arguments, as the script wrote them (JSON; secrets redacted; unusual characters escaped; "
    f"every line starts with {GUTTER.strip()}):"
)


#: The answer that approves this call and every later call of the same tool in the same run
#: ("allow `write_query` for the rest of this run"); counts as a plain yes where not offered.
FOR_RUN: Literal["run"] = "run"
#: What an approver answers: True (send this call), FOR_RUN, or False (anything else is no).
Answer = bool | Literal["run"]


class Unusable(str):
    """Why a client's response cannot count as an answer (it is not one): never FOR_RUN, though
    a str, so an answer and this are told apart by type."""


#: Asks a person. May raise ApprovalUnavailable (no way to ask).
Approver = Callable[[ApprovalRequest], Awaitable[Answer]]


@dataclass(frozen=True)
class ApprovalOutcome:
    """The gate's answer for one call: `decision` (for toolTrace), and for a denial why."""

    decision: Decision
    policy: Policy
    reason: DenyReason | None = None
    detail: str | None = None  # what the approver said when it could not ask or failed

    @property
    def sent(self) -> bool:
        return self.decision != "denied"


# --------------------------------------------------------------------------- policy


def policy_from_annotations(annotations: Mapping[str, Any] | None) -> Policy:
    """"auto": allow read-only tools and tools that say they destroy nothing; ask the rest.

    Only literal booleans count: a server sending `"readOnlyHint": "true"` is not trusted with
    the lenient reading."""
    hints = annotations if isinstance(annotations, Mapping) else {}
    if hints.get("readOnlyHint") is True:
        return "allow"
    if hints.get("destructiveHint") is False:
        return "allow"
    return "ask"


def tool_policy(
    config: ServerConfig,
    tool_name: str,
    annotations: Mapping[str, Any] | None,
    project_default: ApprovalSetting = "auto",
) -> Policy:
    """The policy of one tool: its own entry, else the server's default, else `project_default`
    (which load_config already folded into `config.approval_default`; it matters for configs
    built by hand), with "auto" resolved from the tool's annotations."""
    setting: str | None = config.approval.get(tool_name)
    if setting is None:
        setting = config.approval_default
    if setting is None:
        setting = project_default
    return _resolved(setting, annotations)


def _resolved(setting: str, annotations: Mapping[str, Any] | None) -> Policy:
    if setting == "auto":
        return policy_from_annotations(annotations)
    if setting in ("allow", "ask", "ask-once", "deny"):
        return setting  # type: ignore[return-value]
    return "ask"  # unreachable for validated configs; never fail open


@dataclass(frozen=True)
class ToolPolicy:
    """One row of the policy table (`codemode-gen policy`): a tool's policy and why it has it.

    `source` is what decided: "annotation" (`detail` names it: `destructiveHint: true`),
    "config" (`detail` is the codemode.toml line, `line` where it is when known) or "default"
    (auto, and the annotations say nothing either way)."""

    config_id: str
    tool_name: str
    policy: Policy
    source: PolicySource
    detail: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.config_id, "tool": self.tool_name, "policy": self.policy,
                               "why": self.source, "detail": self.detail}
        if self.line is not None:
            out["line"] = self.line
        return out


def explain_policy(
    config_id: str,
    server: ServerSettings | None,
    project_default: ApprovalSetting,
    tool_name: str,
    annotations: Mapping[str, Any] | None,
    *,
    source: SettingsSource | None = None,
) -> ToolPolicy:
    """`tool_policy` with its reason, from codemode.toml's settings (`server`: its
    `[servers.<id>]`, None when it has none), as `load_config` folds them: a tool on the
    blocklist (a per-tool "deny" is one) is denied, else its own entry, the server's default,
    the project's default, "auto" from the annotations. `source` (the file the settings came
    from) gives each config reason its line, and a server default the form it was written in."""
    server = server if server is not None else ServerSettings()

    def config(setting: str, text: str, *keys: str) -> ToolPolicy:
        return ToolPolicy(config_id, tool_name, _resolved(setting, annotations), "config", text,
                          source.line(keys) if source is not None else None)

    table = f"[servers.{_toml_key(config_id)}]"
    own = server.approval.get(tool_name)
    if tool_name in server.blocklist and own != "deny":
        return config("deny", f"{table} blocklist", "servers", config_id, "blocklist")
    if own is not None and own != "auto":
        return config(own, toml_line(config_id, tool_name, own), "servers", config_id, "approval", tool_name)
    if own is None and server.approval_default not in (None, "auto"):
        default = str(server.approval_default)
        written = _server_entry(source, config_id)
        if isinstance(written, Mapping):
            return config(default, f"[servers.{_toml_key(config_id)}.approval] \"*\" = \"{default}\"",
                          "servers", config_id, "approval", "*")
        return config(default, f"{table} approval = \"{default}\"", "servers", config_id, "approval")
    if own is None and server.approval_default is None and project_default != "auto":
        return config(project_default, f"approval = \"{project_default}\"", "approval")
    policy = policy_from_annotations(annotations)
    hints = annotations if isinstance(annotations, Mapping) else {}
    for key, value in (("readOnlyHint", True), ("destructiveHint", False), ("destructiveHint", True)):
        if hints.get(key) is value:
            return ToolPolicy(config_id, tool_name, policy, "annotation", f"{key}: {str(value).lower()}")
    if hints.get("readOnlyHint") is False:
        return ToolPolicy(config_id, tool_name, policy, "annotation",
                          "readOnlyHint: false, no destructiveHint (MCP reads it as true)")
    return ToolPolicy(config_id, tool_name, policy, "default",
                      "no annotations" if not hints else "annotations say nothing of reads or destruction")


def _server_entry(source: SettingsSource | None, config_id: str) -> Any:
    """What codemode.toml wrote as `[servers.<id>] approval`: a string, a table, or None."""
    servers = source.data.get("servers") if source is not None else None
    table = servers.get(config_id) if isinstance(servers, Mapping) else None
    return table.get("approval") if isinstance(table, Mapping) else None


def policy_table(
    settings: Settings, servers: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]
) -> list[ToolPolicy]:
    """Every tool's `explain_policy` under `settings`, for servers given as (config id, their
    recorded tools/list entries); in server and tool order."""
    rows = []
    for config_id, tools in sorted(servers, key=lambda s: s[0]):
        server = settings.servers.get(config_id)
        for tool in sorted((t for t in tools if isinstance(t.get("name"), str)), key=lambda t: str(t["name"])):
            annotations = tool.get("annotations")
            rows.append(explain_policy(config_id, server, settings.approval, str(tool["name"]),
                                       annotations if isinstance(annotations, Mapping) else None,
                                       source=settings.source))
    return rows


def toml_line(config_id: str, tool_name: str, setting: ApprovalSetting) -> str:
    """The codemode.toml table header and entry (one line, as in a hint) that give one tool
    `setting`, keys quoted where TOML needs it."""
    return f"[servers.{_toml_key(config_id)}.approval] {_toml_key(tool_name)} = \"{setting}\""


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def describe_annotations(annotations: Mapping[str, Any] | None) -> str:
    """What the tool's annotations say about it, in two or three words for a prompt."""
    if not isinstance(annotations, Mapping):
        return "no annotations"
    if annotations.get("readOnlyHint") is True:
        return "read-only"
    if annotations.get("destructiveHint") is True:
        return "destructive"
    if annotations.get("destructiveHint") is False:
        return "not destructive"
    return "may be destructive"


# --------------------------------------------------------------------------- the gate


class ApprovalGate:
    """One host's approvals: policies, the ask-once memory, and the asking itself.

    `approve` is the host's approver (a run may bring its own, `decide(approve=...)`);
    `approve_all` approves every ask without asking anyone (and wins over any approver);
    `project_default` applies to configs without a default of their own; `redact_patterns`
    are codemode.toml's `redact` regexes, applied to the arguments shown.
    """

    def __init__(
        self,
        *,
        approve: Approver | None = None,
        approve_all: bool = False,
        project_default: ApprovalSetting = "auto",
        redact_patterns: Iterable[str] = (),
    ) -> None:
        self.approve = approve
        self.approve_all = approve_all
        self.project_default = project_default
        self.redact_patterns = tuple(redact_patterns)
        # session key -> (config id, tool name) approved for the rest of that session
        self._remembered: OrderedDict[Hashable, set[tuple[str, str]]] = OrderedDict()
        # (session key, config id, tool name) -> the lock that serialises asking it and how many
        # calls hold or wait for it (dropped at 0: ever new sessions cannot grow this)
        self._locks: dict[tuple[Hashable, str, str], tuple[asyncio.Lock, int]] = {}
        self._redactors: dict[str, tuple[ServerConfig, Redactor]] = {}

    def policy(self, config: ServerConfig, tool_name: str, annotations: Mapping[str, Any] | None) -> Policy:
        return tool_policy(config, tool_name, annotations, self.project_default)

    def remembered(self, config_id: str, tool_name: str, session: Hashable = None) -> bool:
        """Whether an ask-once accept of this tool holds for `session`."""
        return (config_id, tool_name) in self._remembered.get(session, ())

    def forget(self, session: Hashable = None) -> None:
        """Drop what `session` approved (a client session that ended)."""
        self._remembered.pop(session, None)

    def request(
        self,
        server_id: str,
        config: ServerConfig,
        tool_name: str,
        arguments: Any,
        annotations: Mapping[str, Any] | None,
        policy: Policy,
    ) -> ApprovalRequest:
        """The request shown for one call: names sanitised, arguments redacted and cut."""
        return ApprovalRequest(
            server_id=jsonsafe.safe_name(server_id, MAX_SHOWN_NAME_CHARS),
            config_id=jsonsafe.safe_name(config.id, MAX_SHOWN_NAME_CHARS),
            tool_name=jsonsafe.safe_name(tool_name, MAX_SHOWN_NAME_CHARS),
            arguments_text=self.arguments_text(config, arguments),
            annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
            policy=policy,
        )

    def arguments_text(self, config: ServerConfig, arguments: Any) -> str:
        """`arguments` as JSON for a person: secrets redacted, cut, printable."""
        cached = self._redactors.get(config.id)
        if cached is None or cached[0] is not config:
            cached = (config, Redactor.for_server(config, self.redact_patterns))
            self._redactors[config.id] = cached
        # One line whatever the script put in it: JSON escapes the controls, display_json the
        # separators, format characters and the rest that JSON leaves raw.
        return display_json(cached[1].value(arguments), MAX_ARGUMENTS_CHARS)

    async def decide(
        self,
        *,
        server_id: str,
        config: ServerConfig,
        tool_name: str,
        arguments: Any,
        annotations: Mapping[str, Any] | None,
        approve: Approver | None = None,
        session: Hashable = None,
        run: MutableSet[tuple[str, str]] | None = None,
        deadline: float | None = None,
        on_wait: Callable[[ApprovalRequest], None] | None = None,
        always_ask: bool = False,
    ) -> ApprovalOutcome:
        """Whether this call may be sent; asks when the policy says so.

        `always_ask`: a person is asked whatever the policies, `--approve-all` and earlier
        answers say (a run proposing a skill for the repository: never written silently).

        `approve` (a run's own approver) replaces the host's; `session` keys the ask-once
        memory; `run` is the run's own memory of (config id, tool name) approved `FOR_RUN`
        (the bridge's: it ends with the run; None: such answers count as a plain yes);
        `deadline` (`time.monotonic()` seconds, the run's timeoutMs) bounds the wait for the
        lock and the answer; `on_wait` is told just before a person is asked (progress)."""
        policy: Policy = "ask" if always_ask else self.policy(config, tool_name, annotations)
        if always_ask:
            run = None  # a yes "for the rest of the run" covers this one proposal only
        if policy == "allow":
            return ApprovalOutcome("allowed", policy)
        if policy == "deny":
            return ApprovalOutcome("denied", policy, "policy")
        key = (config.id, tool_name)
        if policy == "ask-once" and self.remembered(*key, session=session):
            return ApprovalOutcome("approved-for-session", policy)
        if run is not None and key in run:
            return ApprovalOutcome("approved-for-run", policy)
        if self.approve_all and not always_ask:
            if policy == "ask-once":
                self._remember(session, key)
            return ApprovalOutcome("approved", policy)
        approver = approve if approve is not None else self.approve
        if approver is None:
            return ApprovalOutcome("denied", policy, "unavailable", "no approver was given to this host")
        # Redacting and showing the arguments walks them: large ones off the event loop.
        if payload.is_large(arguments):
            request = await payload.offload(self.request, server_id, config, tool_name, arguments, annotations, policy)
        else:
            request = self.request(server_id, config, tool_name, arguments, annotations, policy)
        try:
            return await _within(deadline, self._ask(approver, request, key, session, run, on_wait))
        except TimeoutError:
            return ApprovalOutcome("denied", policy, "timeout")

    async def _ask(
        self,
        approver: Approver,
        request: ApprovalRequest,
        key: tuple[str, str],
        session: Hashable,
        run: MutableSet[tuple[str, str]] | None,
        on_wait: Callable[[ApprovalRequest], None] | None,
    ) -> ApprovalOutcome:
        """The asking itself, one call of this tool (in this session) at a time."""
        policy = request.policy
        # An approver that asks in batches (input_required: every call waiting is asked in one
        # round) must see them all at once, so no lock per tool there.
        batched = getattr(approver, "asks_in_batches", False) is True
        async with contextlib.nullcontext() if batched else self._tool_lock((session, *key)):
            # Asked while this call waited for the lock: an ask-once yes covers it too, and so
            # does a yes for the rest of this run (the other calls of a Promise.all).
            if policy == "ask-once" and self.remembered(*key, session=session):
                return ApprovalOutcome("approved-for-session", policy)
            if run is not None and key in run:
                return ApprovalOutcome("approved-for-run", policy)
            if on_wait is not None:
                try:
                    on_wait(request)
                except Exception as exc:  # progress is a courtesy
                    log.debug("approval on_wait failed: %s: %s", type(exc).__name__, exc)
            try:
                accepted = await approver(request)
            except ApprovalUnavailable as exc:
                return ApprovalOutcome("denied", policy, "unavailable", str(exc) or None)
            except Exception as exc:  # an approver that fails says no
                log.warning("approver failed for %s.%s: %s: %s", request.config_id, request.tool_name,
                            type(exc).__name__, jsonsafe.clip(str(exc), 300))
                return ApprovalOutcome("denied", policy, "error", jsonsafe.clip(f"{type(exc).__name__}: {exc}", 300))
            # Only True and FOR_RUN approve: a truthy "yes" or 1 from a careless callback is no.
            for_run = isinstance(accepted, str) and accepted == FOR_RUN
            if accepted is not True and not for_run:
                return ApprovalOutcome("denied", policy, "declined")
            if for_run and run is not None:
                run.add(key)
            if policy == "ask-once":
                self._remember(session, key)
                # ... and for the rest of this run whatever the session: a run asked through
                # input_required resumes on any instance, in a session of its own (stateless
                # HTTP), and its run set travels in its sealed state (runtime/host/resume.py).
                if batched and run is not None:
                    run.add(key)
            return ApprovalOutcome("approved", policy)

    @contextlib.asynccontextmanager
    async def _tool_lock(self, slot: tuple[Hashable, str, str]) -> AsyncIterator[None]:
        """Hold the lock that serialises asking about one tool in one session; the lock is
        dropped once no call holds or waits for it."""
        lock, users = self._locks.get(slot) or (asyncio.Lock(), 0)
        self._locks[slot] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[slot]
            if users <= 1:
                del self._locks[slot]
            else:
                self._locks[slot] = (lock, users - 1)

    def _remember(self, session: Hashable, key: tuple[str, str]) -> None:
        tools = self._remembered.get(session)
        if tools is None:
            tools = self._remembered[session] = set()
            while len(self._remembered) > MAX_APPROVAL_SESSIONS:
                self._remembered.popitem(last=False)
        else:
            self._remembered.move_to_end(session)
        tools.add(key)


async def _within(deadline: float | None, awaitable: Awaitable[ApprovalOutcome]) -> ApprovalOutcome:
    if deadline is None:
        return await awaitable
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise TimeoutError
    return await asyncio.wait_for(awaitable, remaining)


def denial_message(outcome: ApprovalOutcome, server_id: str, config_id: str, tool_name: str) -> tuple[str, str]:
    """The ToolCallError message and hint of a denied call (for the script and the agent):
    what happened, and what the user can change: the codemode.toml line that allows the tool
    and, where nobody could be asked, the host options that approve without asking."""
    where = f"{server_id}.{jsonsafe.safe_name(tool_name, MAX_SHOWN_NAME_CHARS)}"
    why = {
        "declined": "the user declined it",
        "unavailable": "it needs approval and there is no way to ask: "
        + (outcome.detail or "no approver"),
        "timeout": "no answer to the approval request before the run's timeoutMs ran out",
        "policy": "the host's approval policy denies it",
        "error": "asking for approval failed" + (f": {outcome.detail}" if outcome.detail else ""),
    }.get(outcome.reason or "", "it was not approved")
    message = f"{where} was not called: {why} (approval policy \"{outcome.policy}\")"
    line = toml_line(config_id, tool_name, "allow")
    change = {
        "declined": f"If such calls are fine, the user can allow them in codemode.toml: {line}",
        "timeout": f"A run with a larger limits.timeoutMs gives the user longer to answer; codemode.toml can allow"
        f" it: {line}",
        "policy": f"Only the user can allow it, in codemode.toml: {line}",
    }.get(outcome.reason or "", f"The user can allow it in codemode.toml ({line}), or start the host with"
          " serve --approve-all / run --yes to approve such calls without asking")
    hint = f"do not retry this call in this run; continue without it or tell the user what it would do. {change}"
    return message, hint
