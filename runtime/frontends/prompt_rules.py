"""The rules the `codemode.run` description opens with (runtime/frontends/prompt.py), and the
tags its declarations carry.

The rules say what the spec requires a host to document (§3.2.1 restrictions, §3.2.3 capability
ids, §3.2.4 limit keys with the defaults a run gets here, §3.5 globals and deviations, §5.3.2
unwrapping, §10.1 concurrency), with examples that use the catalog's real tools so each runs as
printed (`Example`). Their length depends only on which tag kinds the declarations show (one
line explains those, and only those: `Rules.length`), which is what lets the layout
(runtime/frontends/prompt_layout.py) keep the whole text's length exact as tools climb.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from codemode_gen import SPEC_VERSION
from codemode_gen.generator.manifest import module_specifier
from codemode_gen.runtime import limits as limit_defaults
from codemode_gen.runtime.host.catalog import APPROVAL_TAGS

__all__ = ["TAG_KEY", "Example", "Rules", "counted_id", "rules_for", "server_tools", "tag_kind"]

# Characters of capability ids listed in the rules; more servers than fit are named by count.
MAX_CAPABILITY_IDS_CHARS = 600
# The key a tool entry carries its approval tag under while the prompt is rendered.
TAG_KEY = "_approvalTag"
# MCP's hint tags (generator/agent.py `annotation_tags`, terse): true ones, then the false
# values that differ from MCP's defaults; `@name=value` is any other annotation.
_HINTS_TRUE = ("@readOnly", "@destructive", "@idempotent", "@openWorld")
_HINTS_FALSE = ("@notReadOnly", "@nonDestructive", "@nonIdempotent", "@closedWorld")
_OTHER_ANNOTATION = "@name=value"
_UNBOXED = "@unboxed"  # explained by the unbox deviation rule


@dataclass
class Example:
    """The real tools the prompt's examples use, so that each runs as printed."""

    server_id: str
    export: str  # any tool of it: read with getTool
    call: str | None  # a read-only tool needing no input, if any: called in the rules

    @classmethod
    def of(cls, servers: Sequence[Mapping[str, Any]]) -> Example:
        first: tuple[str, str] | None = None
        for server in servers:
            for tool in server_tools(server):
                if first is None:
                    first = (str(server.get("serverId")), str(tool.get("exportName")))
                if _callable_unasked(tool):
                    return cls(
                        str(server.get("serverId")),
                        str(tool.get("exportName")),
                        str(tool.get("exportName")),
                    )
        if first is not None:
            return cls(first[0], first[1], None)
        return cls(str(servers[0].get("serverId")) if servers else "notes", "some_tool", None)

    @property
    def alias(self) -> str:
        """A JS identifier for `import * as <alias>`."""
        alias = "".join(ch if ch.isalnum() else "_" for ch in self.server_id) or "server"
        return "_" + alias if alias[0].isdigit() else alias

    def calling_rule(self) -> str:
        spec = module_specifier(self.server_id)
        if self.call is not None:
            code = f'import * as {self.alias} from "{spec}"; await {self.alias}.{self.call}({{}})'
            return f"- `{code}`: a tool takes one input object (none: `()`)."
        return (
            f'- `import * as {self.alias} from "{spec}"`, then `await` a tool with one input object'
            " (none: `()`)."
        )

    @cached_property
    def fetch_hint(self) -> str:
        sid, export = self.server_id, self.export
        search = (
            'import { searchTools, listTools, getTool } from "@codemode/discovery"; '
            'const { results } = await searchTools("what you need", { detail: "full" }); '
            'console.log(results.map((t) => t.serverId + ": " + t.declaration).join("\\n"));'
        )
        return (
            f"Read a tool's declaration before calling it, in a first run: `{search}` "
            f'One server: `(await listTools("{sid}", {{ detail: "full" }})).map((t) => t.exportName + ": " + t.declaration)`; '
            f'one tool: `(await getTool("{sid}", "{export}")).declaration`.\n'
        )


def _callable_unasked(tool: Mapping[str, Any]) -> bool:
    """A read-only tool that needs no input and no approval: safe to call in an example."""
    annotations = tool.get("annotations")
    schema = tool.get("inputSchema")
    return (
        isinstance(annotations, Mapping)
        and annotations.get("readOnlyHint") is True
        and TAG_KEY not in tool
        and isinstance(schema, Mapping)
        and schema.get("type") == "object"
        and not schema.get("required")
    )


@dataclass
class Rules:
    """The rules before the declarations; the tags line depends on the tags shown."""

    head: str
    tail: tuple[str, ...]  # rule lines after the tags line
    _lengths: dict[frozenset[str], int] = field(default_factory=dict)

    def text(self, kinds: Collection[str]) -> str:
        """The rules with the tags line for these tag kinds (`tag_kind`)."""
        if not self.head:
            return ""
        line = _tags_rule(kinds)
        return "\n".join([self.head, *([line] if line else []), *self.tail]) + "\n\n"

    def length(self, kinds: Collection[str]) -> int:
        key = frozenset(kinds)
        known = self._lengths.get(key)
        if known is None:
            known = self._lengths[key] = len(self.text(key))
        return known


def _limits_line(host_limits: Mapping[str, Any]) -> str:
    """Every key the host honours (§3.2.4 MUST), with the default a run gets here."""
    rows = [
        ("timeoutMs", limit_defaults.DEFAULT_TIMEOUT_MS),
        ("maxMemoryBytes", limit_defaults.DEFAULT_MAX_MEMORY_BYTES),
        ("maxLogBytes", limit_defaults.DEFAULT_MAX_LOG_BYTES),
        ("maxToolCalls", limit_defaults.DEFAULT_MAX_TOOL_CALLS),
        ("maxConcurrentCalls", limit_defaults.DEFAULT_MAX_CONCURRENT_CALLS),
    ]

    def short(n: int) -> str:  # 1073741824 -> 2^30, 600000 -> 6e5: the prompt's budget is tight
        if n >= 1 << 16 and n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
        digits = str(n)
        if n >= 10_000 and digits[1:].strip("0") == "":
            return f"{digits[0]}e{len(digits) - 1}"
        return digits

    # Ceilings and the fixed caps (runtime/limits.py) are left to the messages that name them:
    # an out-of-range value is INVALID_LIMITS with the range, a cap hit a SANDBOX_LIMIT.
    parts = [f"{key} {short(host_limits.get(key, default))}" for key, default in rows]
    # The host-defined keys (§3.2.4): what the response carries, whether the script is checked.
    budget = host_limits.get("maxResponseChars", limit_defaults.DEFAULT_MAX_RESPONSE_CHARS)
    trace = str(host_limits.get("trace", "errors"))
    others = ", ".join(m for m in limit_defaults.TRACE_MODES if m != trace)
    typecheck = "typecheck on" if host_limits.get("typecheck") else "typecheck true"
    return (
        "- `limits` (unknown keys ignored): " + ", ".join(parts) + " (over: SANDBOX_LIMIT), "
        f"maxResponseChars {short(budget) if budget is not None else 'off'} (result+logs cut past it), "
        f"trace {trace} (or {others}), {typecheck} (type errors as warnings)."
    )


def rules_for(
    tool_name: str,
    ids: Sequence[str],
    example: Example,
    json_servers: Sequence[str],
    unbox_servers: Sequence[str],
    host_limits: Mapping[str, Any],
) -> Rules:
    # `requestedCapabilities` and the response's fields are said by the tool's input and
    # output schemas (runtime/frontends/serve.py), which the model reads with this description.
    head = [
        f"Runs a JavaScript or TypeScript ES module in a fresh QuickJS sandbox where MCP servers are modules of async functions: one script calls many tools, returns only what matters (Code Mode spec {SPEC_VERSION}; tool `{tool_name}`).",
        # Servers and how to discover them come first: some clients cut descriptions short.
        "Servers: "
        + _id_list(ids)
        + '. Declarations below; in any run, `import { listServers, listTools, getTool, searchTools } from "@codemode/discovery"`: `(await searchTools("words", { detail: "full" })).results` ranks tools: `{serverId, toolName, exportName, declaration, …}`.',
        "",
        "Rules",
        example.calling_rule() + " Top-level await works. Nothing persists between runs.",
        "- Return data: set `globalThis.__codemode_result__` (JSON, else null). console.* output is captured: log summaries, not dumps.",
        "- Results are unwrapped: `structuredContent` if present; else a single text block's string; else (images, audio, several blocks) the MCP result `{content}`, binary as base64.",
        '- Inputs are validated. A failed call throws (SchemaValidationError, ToolCallError, … from "@codemode/errors", with a `hint`): catch it and go on. Only a limit ends a run.',
        "- `Promise.all` runs calls concurrently (maxConcurrentCalls at once). A run ends when the module is done and no call or timer pends.",
        "- Globals: standard built-ins, URL, URLSearchParams, TextEncoder/TextDecoder, setTimeout/clearTimeout. No fetch/network, setInterval, eval, Function constructors, require, process; built-in prototypes are frozen.",
        _limits_line(host_limits),
    ]
    tail = []
    if json_servers:
        tail.append(
            "- Deviation: for "
            + ", ".join(f"`{s}`" for s in json_servers)
            + " a single text block holding valid JSON is returned parsed."
        )
    if unbox_servers:
        tail.append(
            "- Deviation: for "
            + ", ".join(f"`{s}`" for s in unbox_servers)
            + " a value the server boxes in a one-field object (`@unboxed <field>` tools) is returned as that field's value."
        )
    return Rules("\n".join(head), tuple(tail))


def tag_kind(tag: str) -> str:
    if tag.startswith(_UNBOXED + " "):
        return _UNBOXED
    if (
        tag in _HINTS_TRUE
        or tag in _HINTS_FALSE
        or tag in APPROVAL_TAGS.values()
        or tag == "@inferred"
    ):
        return tag
    return _OTHER_ANNOTATION


def _tags_rule(kinds: Collection[str]) -> str:
    """The one rule that explains the tags the declarations show (their `tag_kind`s, only
    those); "" for none."""
    true = [f"`{t}`" for t in _HINTS_TRUE if t in kinds]
    false = [f"`{t}`" for t in _HINTS_FALSE if t in kinds]
    parts = []
    if true:
        parts.append(
            " ".join(true) + " are MCP hints" + (f" ({' '.join(false)}: false)" if false else "")
        )
    elif false:
        parts.append(" ".join(false) + ": MCP hints, false")
    if _OTHER_ANNOTATION in kinds:
        parts.append(f"`{_OTHER_ANNOTATION}`: other annotations")
    if "@inferred" in kinds:
        parts.append("`@inferred`: result type inferred from samples")
    ask, once = APPROVAL_TAGS["ask"], APPROVAL_TAGS["ask-once"]
    # Calls reach the approval gate together only from one Promise.all: their asks then overlap
    # (or one answer for the rest of the run covers them) instead of coming one by one.
    if ask in kinds:
        first = f" (`{once}`: the first per session)" if once in kinds else ""
        parts.append(
            f"`{ask}` calls wait for the user's OK{first}, within timeoutMs: batch them in one Promise.all"
        )
    elif once in kinds:
        parts.append(
            f"`{once}`: a tool's first call per session waits for the user's OK (within timeoutMs): "
            "batch them in one Promise.all"
        )
    return "- Tags: " + "; ".join(parts) + "." if parts else ""


def counted_id(server: Mapping[str, Any]) -> str:
    """`notes` (13 tools): a capability id (§3.2.3) and how big the server is."""
    tools = server.get("tools")
    count = f" ({len(tools)} tool{'s' * (len(tools) != 1)})" if isinstance(tools, list) else ""
    return f"`{server.get('serverId')}`{count}"


def _id_list(ids: Sequence[str]) -> str:
    """The capability ids (§3.2.3), bounded: with hundreds of servers the rest is listServers()."""
    shown: list[str] = []
    used = 0
    for sid in ids:
        used += len(sid) + 4
        if used > MAX_CAPABILITY_IDS_CHARS:
            return (
                ", ".join(shown)
                + f" and {len(ids) - len(shown)} more (listServers() lists them all)"
            )
        shown.append(sid)
    return ", ".join(shown) or "(none configured)"


def server_tools(server: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = server.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []
