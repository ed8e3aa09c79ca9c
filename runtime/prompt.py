"""The `codemode.run` description: the whole system prompt a model gets from `serve`.

It says what the spec requires a host to document (§3.2.1 restrictions, §3.2.3 capability
ids, §3.2.4 limit keys, §3.5 globals and deviations, §5.3.2 unwrapping, §10.1 concurrency)
and carries the declarations of §4.4 — within a character budget, because clients cut long
descriptions (Claude Code at 16,384 characters) and every character is paid on every turn.
The declarations are the compact agent rendering (generator/agent.py), degraded in steps when
the catalog is too big: signatures with notes → signatures alone → tool names per server →
servers only. §4.4 allows deferring the rest; the prompt then says exactly how to fetch it
through `@codemode/discovery` in the first run.

Tools whose calls wait for a person's approval (runtime/approval.py: policy "ask", "ask-once")
are tagged in the declarations (`@approval`, `@approvalOnce`) and one rule says what that means,
only when some tool has it; a tool the policy denies is left out. This is decided when the
prompt is rendered, from the host's policy: out/ never depends on it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codemode_gen import SPEC_VERSION
from codemode_gen.generator.manifest import module_specifier
from codemode_gen.generator.typescript.compact import cut, first_sentence, one_line
from codemode_gen.generator.typescript.printer import INDENT
from codemode_gen.runtime import limits as limit_defaults
from codemode_gen.runtime.catalog import APPROVAL_TAGS
from codemode_gen.runtime.prompt_defaults import (
    DEFAULT_PROMPT_BUDGET,
    DEFAULT_TOOL_NAME,
    MIN_PROMPT_BUDGET,
)

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode

# The tool name and budget defaults live in a light module the CLI imports for its option
# defaults (runtime/prompt_defaults.py); re-exported here, where they are used.
__all__ = [
    "DEFAULT_PROMPT_BUDGET", "DEFAULT_TOOL_NAME", "MIN_PROMPT_BUDGET", "prompt_size", "render_prompt", "system_prompt",
]

# Server instructions quoted with full signatures (a server's 2 KB of instructions would cost
# more than its tools); the lower tiers quote the first sentence only.
MAX_INSTRUCTIONS_CHARS = 240
MAX_SERVER_SUMMARY_CHARS = 100
# Characters of capability ids listed in the rules; more servers than fit are named by count.
MAX_CAPABILITY_IDS_CHARS = 600
# Room kept for the closing "… N more servers" line when even the server list is cut.
MORE_LINE_RESERVE = 200

_FENCE = "```"
NAMES_HINT = "Only tool names are listed here"
MIXED_HINT = "The servers listed by tool name only have no declarations here"
# The key a tool entry carries its approval tag under while the prompt is rendered.
_TAG_KEY = "_approvalTag"
# A top-level line of a `declare module` block (generator/agent.py `render_server`): a tool's
# doc comment, its signature, a named type; deeper lines continue the item above.
_ITEM = re.compile(r"(?:/\*\*|function |type )")
_FUNCTION = re.compile(r"function ([A-Za-z_$][A-Za-z0-9_$]*)\(")


def system_prompt(cm: CodeMode, *, tool_name: str = DEFAULT_TOOL_NAME, budget: int = DEFAULT_PROMPT_BUDGET) -> str:
    """The description `serve` gives its one tool, from `cm`'s out/ and in-memory modules."""
    paths = cm.capability_ids()
    json_servers = sorted(paths[cid] for cid, cfg in cm.configs.items() if cfg.unwrap == "json" and cid in paths)
    unbox_servers = sorted(paths[cid] for cid, cfg in cm.configs.items() if cfg.unbox and cid in paths)
    servers = cm.prompt_servers()
    return render_prompt(
        servers,
        tool_name=tool_name,
        budget=budget,
        json_servers=json_servers,
        unbox_servers=unbox_servers,
        host_limits={**dict(cm.settings.limits), **({"typecheck": True} if cm.typecheck else {})},
        approvals=approval_policies(cm, servers),
    )


def approval_policies(cm: CodeMode, servers: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """server id → tool name → approval policy of the tools not simply sent ("ask", "ask-once",
    "deny"), as `cm`'s approval gate decides them; a blocklisted tool out/ still has (generated
    before the blocklist said so) counts as "deny". A host that approves everything
    (`approve_all`: serve --approve-all) asks nobody, so only "deny" is left."""
    approve_all = cm.approval.approve_all
    out: dict[str, dict[str, str]] = {}
    for server in servers:
        config = cm.configs.get(str(server.get("configId")))
        if config is None:
            continue
        blocked = set(config.blocklist)
        policies: dict[str, str] = {}
        for tool in _tools(server):
            name = str(tool.get("toolName"))
            annotations = tool.get("annotations")
            policy = "deny" if name in blocked else cm.approval.policy(
                config, name, annotations if isinstance(annotations, Mapping) else None)
            if policy == "deny" or (policy != "allow" and not approve_all):
                policies[name] = policy
        if policies:
            out[str(server.get("serverId"))] = policies
    return out


def render_prompt(
    servers: Sequence[Mapping[str, Any]],
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    budget: int = DEFAULT_PROMPT_BUDGET,
    json_servers: Sequence[str] = (),
    unbox_servers: Sequence[str] = (),
    host_limits: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The description for these servers (out/manifest.json entries), at most `budget` chars.

    Pure, so that `--print-prompt`, the tests and bench/prompt.py measure what is served.
    `json_servers` / `unbox_servers`: server ids with `unwrap = "json"` / `unbox = true`, the
    deviations from §5.3.2 the rules must then document (nothing is added without them).
    `approvals`: server id → tool name → approval policy ("ask", "ask-once": tagged; "deny":
    left out; others: as is), as `approval_policies` computes them.
    """
    budget = max(budget, MIN_PROMPT_BUDGET)
    if approvals:
        servers = [_with_approvals(s, approvals.get(str(s.get("serverId"))) or {}) for s in servers]
    ids = [_counted(s) for s in servers]
    example = _example_call(servers)
    tags = {str(t[_TAG_KEY]) for s in servers for t in _tools(s) if _TAG_KEY in t}
    rules = _rules(tool_name, ids, example, json_servers, unbox_servers, host_limits or {}, tags)
    room = budget - len(rules)
    for tier in (_full, _plain):
        text = tier(servers, example)
        if text is not None and len(text) <= room:
            return rules + text
    mixed = _mixed(servers, example, room)
    if mixed is not None:
        return rules + mixed
    text = _servers_only(servers, example)
    return rules + (text if len(text) <= room else _cut_server_list(servers, room))


# ---------------------------------------------------------------------------------- rules


def _limits_line(host_limits: Mapping[str, Any]) -> str:
    rows = [
        ("timeoutMs", limit_defaults.DEFAULT_TIMEOUT_MS, limit_defaults.HARD_MAX_TIMEOUT_MS),
        ("maxMemoryBytes", limit_defaults.DEFAULT_MAX_MEMORY_BYTES, limit_defaults.HARD_MAX_MEMORY_BYTES),
        ("maxLogBytes", limit_defaults.DEFAULT_MAX_LOG_BYTES, limit_defaults.HARD_MAX_LOG_BYTES),
        ("maxToolCalls", limit_defaults.DEFAULT_MAX_TOOL_CALLS, limit_defaults.HARD_MAX_TOOL_CALLS),
        ("maxConcurrentCalls", limit_defaults.DEFAULT_MAX_CONCURRENT_CALLS, limit_defaults.HARD_MAX_CONCURRENT_CALLS),
    ]
    def short(n: int) -> str:  # 1073741824 -> 2^30, 600000 -> 6e5: the prompt's budget is tight
        if n >= 1 << 16 and n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
        digits = str(n)
        if n >= 10_000 and digits[1:].strip("0") == "":
            return f"{digits[0]}e{len(digits) - 1}"
        return digits

    parts = [f"{key} {short(host_limits.get(key, default))} (≤{short(ceiling)})" for key, default, ceiling in rows]
    typecheck = (  # a boolean option, not a bound (runtime/typecheck.py)
        "typecheck: on (type errors come back as warnings)" if host_limits.get("typecheck")
        else "typecheck: true warns of type errors"
    )
    fixed = (  # the host's fixed caps (runtime/limits.py), not keys
        f"Caps: result {limit_defaults.MAX_RESULT_BYTES >> 20} MB, "
        f"input {limit_defaults.MAX_INPUT_BYTES >> 20} MB/{limit_defaults.MAX_JSON_DEPTH} deep."
    )
    return (
        "- `limits` (unknown keys ignored): " + ", ".join(parts) + "; over: SANDBOX_LIMIT. "
        + typecheck + ". " + fixed
    )


def _example_call(servers: Sequence[Mapping[str, Any]]) -> tuple[str, str, str]:
    """(server id, export, tool) of a real tool to show in the rules, so examples are callable."""
    for server in servers:
        tools = server.get("tools")
        if isinstance(tools, list) and tools and isinstance(tools[0], Mapping):
            return str(server.get("serverId")), str(tools[0].get("exportName")), str(tools[0].get("toolName"))
    sid = str(servers[0].get("serverId")) if servers else "notes"
    return sid, "some_tool", "some_tool"


def _rules(
    tool_name: str,
    ids: Sequence[str],
    example: tuple[str, str, str],
    json_servers: Sequence[str],
    unbox_servers: Sequence[str],
    host_limits: Mapping[str, Any],
    approval_tags: Collection[str] = (),
) -> str:
    sid, export, _ = example
    alias = _alias(sid)
    lines = [
        f"Runs a JavaScript or TypeScript ES module in a fresh QuickJS sandbox where MCP servers are modules of async functions: one script calls many tools, returns only what matters (Code Mode spec {SPEC_VERSION}; tool `{tool_name}`).",
        # Servers and how to discover them come first: some clients cut descriptions short.
        "Servers: " + _id_list(ids) + '. Declarations below; in any run, `import { listServers, listTools, getTool, searchTools } from "@codemode/discovery"`: `searchTools("words", { detail: "full" })` ranks tools, with `declaration`, `inputSchema`, `outputSchema`.',
        "",
        "Rules",
        f'- `import * as {alias} from "{module_specifier(sid)}"`; `await {alias}.{export}(input)` takes one input object (no parameters: `()`). Top-level await works. Nothing persists between runs.',
        "- Return data: `globalThis.__codemode_result__ = value` (JSON, else null). console.* output is captured: log summaries, not dumps.",
        "- Results are unwrapped: `structuredContent` if present; else a single text block's string; else (images, audio, several blocks) the MCP result `{content}`, binary as base64.",
        '- Inputs are validated. A failed call throws (SchemaValidationError, ToolCallError, … from "@codemode/errors", with a `hint`): catch it and go on. Only a limit ends a run.',
        "- `Promise.all` runs calls concurrently (maxConcurrentCalls at once). A run ends when the module is done and no call or timer pends.",
        "- Globals: standard built-ins, URL, URLSearchParams, TextEncoder/TextDecoder, setTimeout/clearTimeout. No fetch/network, setInterval, eval, Function constructors, require, process; built-in prototypes are frozen.",
        _limits_line(host_limits),
        "- `requestedCapabilities`: server ids to connect first (not counted in timeoutMs).",
        "- Response: `{logs, result, diagnostics: [{severity, code, message, hint?, path?}], toolTrace}`; script errors are diagnostics.",
    ]
    if approval_tags:
        lines.append(_approval_rule(approval_tags))
    if json_servers:
        lines.append(
            "- Deviation: for " + ", ".join(f"`{s}`" for s in json_servers)
            + " a single text block holding valid JSON is returned parsed."
        )
    if unbox_servers:
        lines.append(
            "- Deviation: for " + ", ".join(f"`{s}`" for s in unbox_servers)
            + " a value the server boxes in a one-field object (`@unboxed <field>` tools) is returned as that field's value."
        )
    return "\n".join(lines) + "\n\n"


def _approval_rule(tags: Collection[str]) -> str:
    """The one rule that explains the approval tags shown (only those)."""
    ask, once = APPROVAL_TAGS["ask"], APPROVAL_TAGS["ask-once"]
    if ask not in tags:
        return f"- `{once}`: a tool's first call per session waits for the user's OK (within timeoutMs): batch them."
    first = f" (`{once}`: the first per session)" if once in tags else ""
    return f"- `{ask}` calls wait for the user's OK{first}, within timeoutMs: batch them."


# ---------------------------------------------------------------------------------- approvals


def _with_approvals(server: Mapping[str, Any], policies: Mapping[str, str]) -> Mapping[str, Any]:
    """`server` as the prompt shows it under these policies: denied tools left out, asking
    ones tagged (in its tool list and in its rendered declarations)."""
    if not policies or not isinstance(server.get("tools"), list):
        return server
    tools: list[Any] = []
    edits: dict[str, str | None] = {}  # export name → its tag, or None: leave the tool out
    for tool in server["tools"]:
        policy = policies.get(str(tool.get("toolName"))) if isinstance(tool, Mapping) else None
        if policy == "deny":
            edits[str(tool.get("exportName"))] = None
            continue
        tag = APPROVAL_TAGS.get(policy or "")  # the tags discovery's declarations carry too
        if tag is not None:
            edits[str(tool.get("exportName"))] = tag
            tool = {**tool, _TAG_KEY: tag}
        tools.append(tool)
    if not edits:
        return server
    out = {**server, "tools": tools}
    agent = server.get("agent")
    if isinstance(agent, Mapping):
        out["agent"] = {
            **agent,
            **{key: _edit_block(agent[key], edits, doc=key == "full")
               for key in ("full", "plain") if isinstance(agent.get(key), str)},
        }
    return out


def _edit_block(block: str, edits: Mapping[str, str | None], *, doc: bool) -> str:
    """A `declare module` block (generator/agent.py) with tools left out (None) or tagged: in
    the tool's doc comment (`doc`, the "full" block; one is added if it has none), else after
    its signature (`// @approval`, the "plain" block, which has no comments)."""
    lines = block.split("\n")
    if len(lines) < 2:
        return block
    items: list[list[str]] = []  # top-level items of the body: [doc,] signature lines / a type
    for line in lines[1:-1]:
        top = line.startswith(INDENT) and _ITEM.match(line, len(INDENT)) is not None
        joins_doc = bool(items) and items[-1][0].lstrip().startswith("/**") and len(items[-1]) == 1
        if top and not (joins_doc and line.startswith(INDENT + "function ")):
            items.append([line])
        elif items:
            items[-1].append(line)
        else:
            items.append([line])
    body: list[str] = []
    for item in items:
        found = next((m for m in (_FUNCTION.match(x, len(INDENT)) for x in item[:2]) if m), None)
        export = found.group(1) if found is not None else None
        if export is None or export not in edits:
            body += item
            continue
        tag = edits[export]
        if tag is None:
            continue
        item = list(item)
        if not doc:
            item[-1] = f"{item[-1]} // {tag}"
        elif item[0].lstrip().startswith("/**") and item[0].endswith("*/"):
            item[0] = f"{item[0][:-2].rstrip()} {tag} */"
        else:
            item.insert(0, f"{INDENT}/** {tag} */")
        body += item
    return "\n".join([lines[0], *body, lines[-1]])


def _counted(server: Mapping[str, Any]) -> str:
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
            return ", ".join(shown) + f" and {len(ids) - len(shown)} more (listServers() lists them all)"
        shown.append(sid)
    return ", ".join(shown) or "(none configured)"


def _alias(server_id: str) -> str:
    """A JS identifier for `import * as <alias>` in examples."""
    alias = "".join(ch if ch.isalnum() else "_" for ch in server_id) or "server"
    return "_" + alias if alias[0].isdigit() else alias


# ---------------------------------------------------------------------------------- tiers


def _summary(server: Mapping[str, Any], limit: int) -> str:
    text = server.get("description")
    return first_sentence(text, limit) if isinstance(text, str) else ""


def _instructions(server: Mapping[str, Any]) -> str:
    text = server.get("description")
    if not isinstance(text, str) or not text.strip():
        return ""
    return cut(one_line(text), MAX_INSTRUCTIONS_CHARS)


def _tools(server: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tools = server.get("tools")
    return [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) else []


def _unknown_line(server: Mapping[str, Any]) -> str:
    sid = server.get("serverId")
    return f'// {sid}: not generated yet; its tools: (await listTools("{sid}", {{ detail: "full" }})).map(t => t.declaration)'


def _block(server: Mapping[str, Any], key: str) -> str | None:
    """One server's declarations at a tier ("full" or "plain"), with its header comment."""
    if "tools" not in server:
        return _unknown_line(server)
    agent = server.get("agent")
    if not isinstance(agent, Mapping) or not isinstance(agent.get(key), str):
        return None  # an out/ from an older generator: only the tiers that need no rendering
    head = _instructions(server) if key == "full" else _summary(server, MAX_SERVER_SUMMARY_CHARS)
    return (f"// {server.get('serverId')}: {head}\n" if head else "") + agent[key]


def _fenced(blocks: Sequence[str]) -> str:
    body = "\n".join(blocks).replace(_FENCE, "'''")  # server text must not close the fence
    return f"Servers and their tools (TypeScript declarations)\n{_FENCE}ts\n{body}\n{_FENCE}\n"


def _declarations(servers: Sequence[Mapping[str, Any]], key: str) -> str | None:
    blocks = [_block(server, key) for server in servers]
    if any(b is None for b in blocks):
        return None
    return _fenced([b for b in blocks if b is not None])


def _mixed(servers: Sequence[Mapping[str, Any]], example: tuple[str, str, str], room: int) -> str | None:
    """Every server by its tool names, and as many as then fit by their signatures.

    The step between "signatures for all" and "names for all": with 16 servers the names take
    a third of the budget, and the rest is better spent on whole declarations than left empty.
    Cheapest servers first (most servers fully typed), each with notes if that fits, else
    without; deterministic for a given catalog and budget.
    """
    names = _names(servers, example)
    if len(names) > room:
        return None
    full = {i: _block(s, "full") for i, s in enumerate(servers) if "tools" in s}
    plain = {i: _block(s, "plain") for i, s in enumerate(servers) if "tools" in s}
    lines = {i: _server_line(s, with_tools=True) for i, s in enumerate(servers)}
    chosen: dict[int, str] = {}
    overhead = len(_fenced([])) + len(_fetch_hint(MIXED_HINT, example)) - len(_fetch_hint(NAMES_HINT, example))
    used = len(names) + overhead
    for i in sorted(plain, key=lambda i: (len(plain[i] or ""), i)):
        for block in (full[i], plain[i]):
            if block is not None and used + len(block) + 1 - len(lines[i]) - 1 <= room:
                chosen[i] = block
                used += len(block) + 1 - len(lines[i]) - 1
                break
    while chosen:
        rest = [lines[i] for i in range(len(servers)) if i not in chosen]
        text = _fenced([chosen[i] for i in sorted(chosen)])
        if rest:
            text += "Other servers and their tools (import name: the function to call)\n" + "\n".join(rest) + "\n"
        text += _fetch_hint(MIXED_HINT, example)
        if len(text) <= room:  # the estimate above is close; this makes the budget exact
            return text
        chosen.popitem()
    return names


def _full(servers: Sequence[Mapping[str, Any]], example: tuple[str, str, str]) -> str | None:
    return _declarations(servers, "full")


def _plain(servers: Sequence[Mapping[str, Any]], example: tuple[str, str, str]) -> str | None:
    text = _declarations(servers, "plain")
    return None if text is None else text + _fetch_hint("The signatures above have no descriptions", example)


def _names(servers: Sequence[Mapping[str, Any]], example: tuple[str, str, str]) -> str:
    lines = ["Servers and their tools (import name: the function to call)"]
    for server in servers:
        lines.append(_server_line(server, with_tools=True))
    return "\n".join(lines) + "\n" + _fetch_hint(NAMES_HINT, example)


def _servers_only(servers: Sequence[Mapping[str, Any]], example: tuple[str, str, str]) -> str:
    lines = [f"Servers (module `{module_specifier('<id>')}`)"]
    for server in servers:
        lines.append(_server_line(server, with_tools=False))
    return "\n".join(lines) + "\n" + _fetch_hint("Only servers are listed here", example, search=True)




def _server_line(server: Mapping[str, Any], *, with_tools: bool) -> str:
    sid = server.get("serverId")
    tools = _tools(server)
    summary = _summary(server, MAX_SERVER_SUMMARY_CHARS)
    if "tools" not in server:
        return f"- {sid}: not generated yet; call listTools(\"{sid}\")"
    head = f"- {sid} ({len(tools)} tool{'s' * (len(tools) != 1)})" + (f" — {summary}" if summary else "")
    if not with_tools:
        return head
    return head + ": " + ", ".join(
        str(t.get("exportName")) + (f" {t[_TAG_KEY]}" if _TAG_KEY in t else "") for t in tools)


def _fetch_hint(what: str, example: tuple[str, str, str], *, search: bool = False) -> str:
    sid, export, _ = example
    calls = (
        'const { results } = await searchTools("what you need", { detail: "full" }); '
        'console.log(results.map((t) => `${t.serverId}: ${t.declaration}`).join("\\n"));'
    )
    if not search:
        calls += f' — or all of one server: (await listTools("{sid}", {{ detail: "full" }})).map((t) => t.declaration)'
    return (
        f"{what}: before calling a tool, read its TypeScript declaration (parameters, types, result) in a first run: "
        f'`import {{ searchTools, listTools, getTool }} from "@codemode/discovery"; {calls}`. '
        f'One tool: `(await getTool("{sid}", "{export}")).declaration`.\n'
    )


def _cut_server_list(servers: Sequence[Mapping[str, Any]], room: int) -> str:
    """The last step: as many server lines as fit, then how to list the rest."""
    head = f"Servers (module `{module_specifier('<id>')}`)\n"
    tail_template = "… and {n} more servers: call listServers() from \"@codemode/discovery\", then searchTools(\"what you need\", {{ detail: \"full\" }}) for declarations.\n"
    lines: list[str] = []
    used = len(head) + MORE_LINE_RESERVE
    for server in servers:
        line = _server_line(server, with_tools=False) + "\n"
        if used + len(line) > room:
            break
        lines.append(line)
        used += len(line)
    rest = len(servers) - len(lines)
    return head + "".join(lines) + (tail_template.format(n=rest) if rest else "")


def prompt_size(text: str) -> dict[str, int]:
    """Characters and an approximate token count (4 characters a token) of a description."""
    return {"chars": len(text), "approxTokens": (len(text) + 3) // 4}
