"""The `codemode.run` description: the whole system prompt a model gets from `serve`.

It says what the spec requires a host to document (§3.2.1 restrictions, §3.2.3 capability
ids, §3.2.4 limit keys, §3.5 globals and deviations, §5.3.2 unwrapping, §10.1 concurrency)
and carries the declarations of §4.4 — within a character budget, because clients cut long
descriptions (Claude Code at 16,384 characters) and every character is paid on every turn.

The declarations are the compact agent rendering (generator/agent.py), assembled here tool by
tool. Each tool stands on a ladder: omitted (counted in its server's line) → its import name
in a list → its signature → with its doc comment (the description's first sentence and its
tags) → with a note per input field. Every tool starts at the bottom and is raised one step at
a time, pass by pass, while the whole text stays within the budget (each step's cost is exact,
not estimated: `_Layout` keeps every length the text is made of):

1. names, in catalog order;
2. signatures, cheapest first, with the named types they need (the most tools a script can
   call without looking anything up);
3. doc comments, neediest first (`need`);
4. examples, first of the tools whose type says least of their result (`string` and `unknown`
   outputs: only a recording shows what the text holds), then neediest first;
5. field notes, neediest first;
6. each declared server's instructions (up to MAX_INSTRUCTIONS_CHARS) instead of its first
   sentence.

A pass tries every tool and skips the ones that do not fit, so a big signature never blocks
smaller ones. What is left out is said at the end, with counts, and how to read it through
`@codemode/discovery` in the first run (§4.4 allows deferring it); every tag the rendered
declarations carry is explained once in the rules, and only those. When even one line per
server does not fit, the server list is cut and the rest counted (`_cut_server_list`).

`need` ranks how little a tool's name and types say without its description (higher: show its
description first). Points, summed: 2 when every word of its name is generic (`run`, `query`,
`get_data`: GENERIC_WORDS); 3 when it returns `unknown`, 2 when `string` (only the description
says what the text holds); 1 per two optional input fields, at most 2; 1 per three words of its
summary that neither its name nor its input field names contain, at most 3. A tool with no
summary and no tags has no doc comment to show: 0. Ties keep catalog order.

Tools whose calls wait for a person's approval (runtime/host/approval.py: policy "ask", "ask-once")
are tagged (`@approval`, `@approvalOnce`) at every step from the name up; a tool the policy
denies is left out. This is decided when the prompt is rendered, from the host's policy: out/
never depends on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from codemode_gen import SPEC_VERSION
from codemode_gen.generator.agent import doc_comment
from codemode_gen.generator.manifest import module_specifier
from codemode_gen.generator.typescript.compact import cut, first_sentence, one_line
from codemode_gen.generator.typescript.printer import INDENT, string_literal
from codemode_gen.runtime import limits as limit_defaults
from codemode_gen.runtime.frontends.prompt_defaults import (
    DEFAULT_PROMPT_BUDGET,
    DEFAULT_TOOL_NAME,
    MIN_PROMPT_BUDGET,
)
from codemode_gen.runtime.host.catalog import APPROVAL_TAGS
from codemode_gen.runtime.host.discovery import stem, terms

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode

# The tool name and budget defaults live in a light module the CLI imports for its option
# defaults (runtime/frontends/prompt_defaults.py); re-exported here, where they are used.
__all__ = [
    "DEFAULT_PROMPT_BUDGET", "DEFAULT_TOOL_NAME", "DESCRIBED", "EXAMPLE", "FULL", "LEVEL_NAMES", "MIN_PROMPT_BUDGET", "NAME", "OMITTED",
    "SIGNATURE", "PromptLayout", "approval_policies", "layout_prompt", "need", "prompt_size", "render_prompt",
    "server_block", "system_prompt",
]

# The ladder of one tool (see the module docstring), lowest first.
OMITTED = 0  # counted in its server's line ("3 more")
NAME = 1  # its import name in a list
SIGNATURE = 2  # `function f(input: …): Promise<…>;`
DESCRIBED = 3  # with its doc comment: the description's first sentence and its tags
EXAMPLE = 4  # with a recorded example after the doc comment
FULL = 5  # with a note per input field
LEVEL_NAMES = {
    OMITTED: "omitted", NAME: "name", SIGNATURE: "signature", DESCRIBED: "described", EXAMPLE: "example",
    FULL: "full",
}

# Server instructions quoted in a declared server's header once the tools have what they need
# (a server's 2 KB of instructions would cost more than its tools); else the first sentence.
MAX_INSTRUCTIONS_CHARS = 240
MAX_SERVER_SUMMARY_CHARS = 100
# The share of the budget (percent) the skills section may take: the servers' declarations keep
# the rest, so many skills never push every tool off the ladder.
MAX_SKILLS_SHARE = 20
# A skill's description in its line, at most (its first sentence).
MAX_SKILL_SUMMARY_CHARS = 120
# Characters of capability ids listed in the rules; more servers than fit are named by count.
MAX_CAPABILITY_IDS_CHARS = 600
# Room kept for the closing "… N more servers" line when even the server list is cut.
MORE_LINE_RESERVE = 200

# `need`: words that name no particular thing. A tool named only by them (`run`, `query`,
# `get_data`) says nothing of what it does without its description.
GENERIC_WORDS = frozenset(map(stem, (
    "action", "api", "call", "command", "data", "do", "exec", "execute", "fetch", "get", "handle", "info",
    "invoke", "item", "list", "operation", "perform", "process", "query", "read", "request", "run", "send",
    "set", "tool", "update", "write",
)))
# `need`: summary words too common to say anything a name does not.
COMMON_WORDS = frozenset(map(stem, (
    "a", "all", "an", "and", "any", "are", "as", "at", "be", "by", "can", "for", "from", "given", "if", "in",
    "into", "is", "it", "its", "of", "on", "one", "or", "our", "that", "the", "this", "to", "use", "when",
    "which", "will", "with", "you", "your",
)))

_FENCE = "```"
_DECLARED_HEAD = f"Servers and their tools (TypeScript declarations)\n{_FENCE}ts\n"
_DECLARED_TAIL = f"{_FENCE}\n"
_LIST_HEAD = "Servers and their tools (import name: the function to call)\n"
_OTHER_HEAD = "Other servers and their tools (import name: the function to call)\n"
_ALSO = "// also: "  # a declared server's tools shown by name only
# The key a tool entry carries its approval tag under while the prompt is rendered.
_TAG_KEY = "_approvalTag"
# MCP's hint tags (generator/agent.py `annotation_tags`, terse): true ones, then the false
# values that differ from MCP's defaults; `@name=value` is any other annotation.
_HINTS_TRUE = ("@readOnly", "@destructive", "@idempotent", "@openWorld")
_HINTS_FALSE = ("@notReadOnly", "@nonDestructive", "@nonIdempotent", "@closedWorld")
_OTHER_ANNOTATION = "@name=value"
_UNBOXED = "@unboxed"  # explained by the unbox deviation rule


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
        host_limits={"trace": cm.trace, "maxResponseChars": cm.max_response_chars, **dict(cm.settings.limits),
                     **({"typecheck": True} if cm.typecheck else {})},
        approvals=approval_policies(cm, servers),
        skills=cm.skill_entries(),
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


@dataclass(frozen=True)
class PromptLayout:
    """A rendered prompt and how far each tool got on the ladder: (server id, export name) →
    OMITTED … FULL (bench/prompt.py and the tests read it)."""

    text: str
    levels: dict[tuple[str, str], int]
    computed: int  # the length the layout accounted for (equal to len(text): tests check it)

    def count(self, level: int) -> int:
        """Tools shown at least at `level`."""
        return sum(1 for shown in self.levels.values() if shown >= level)


def render_prompt(
    servers: Sequence[Mapping[str, Any]],
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    budget: int = DEFAULT_PROMPT_BUDGET,
    json_servers: Sequence[str] = (),
    unbox_servers: Sequence[str] = (),
    host_limits: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Mapping[str, str]] | None = None,
    skills: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The description for these servers (out/manifest.json entries), at most `budget` chars.

    Pure, so that `--print-prompt`, the tests and bench/prompt.py measure what is served.
    `json_servers` / `unbox_servers`: server ids with `unwrap = "json"` / `unbox = true`, the
    deviations from §5.3.2 the rules must then document (nothing is added without them).
    `approvals`: server id → tool name → approval policy ("ask", "ask-once": tagged; "deny":
    left out; others: as is), as `approval_policies` computes them. `skills`: out/'s skill
    entries (manifest `skills`), listed after the servers (`skills_section`).
    """
    return layout_prompt(
        servers, tool_name=tool_name, budget=budget, json_servers=json_servers, unbox_servers=unbox_servers,
        host_limits=host_limits, approvals=approvals, skills=skills,
    ).text


def layout_prompt(
    servers: Sequence[Mapping[str, Any]],
    *,
    tool_name: str = DEFAULT_TOOL_NAME,
    budget: int = DEFAULT_PROMPT_BUDGET,
    json_servers: Sequence[str] = (),
    unbox_servers: Sequence[str] = (),
    host_limits: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Mapping[str, str]] | None = None,
    skills: Sequence[Mapping[str, Any]] = (),
) -> PromptLayout:
    """`render_prompt`, with the level each tool was rendered at."""
    budget = max(budget, MIN_PROMPT_BUDGET)
    # The servers' part keeps at least MIN_PROMPT_BUDGET (a smaller budget leaves skills to discovery).
    section = skills_section(skills, min(budget * MAX_SKILLS_SHARE // 100, budget - MIN_PROMPT_BUDGET))
    if section:
        inner = layout_prompt(servers, tool_name=tool_name, budget=budget - len(section), json_servers=json_servers,
                              unbox_servers=unbox_servers, host_limits=host_limits, approvals=approvals)
        return PromptLayout(inner.text + section, inner.levels, inner.computed + len(section))
    if approvals:
        servers = [_with_approvals(s, approvals.get(str(s.get("serverId"))) or {}) for s in servers]
    ids = [_counted(s) for s in servers]
    example = _Example.of(servers)
    rules = _rules(tool_name, ids, example, json_servers, unbox_servers, host_limits or {})
    layout = _Layout(servers, example, rules)
    if layout.total <= budget:
        layout.climb(budget)
        text = layout.render()
        if len(text) <= budget:  # always, as the lengths are exact (tests check `computed`)
            return PromptLayout(text, {(s.server_id, t.export): t.level for s in layout.servers for t in s.tools},
                                layout.total)
    # not even a line per server: cut the list, count the rest
    text = rules.text(()) + _cut_server_list(servers, budget - len(rules.text(())))
    return PromptLayout(text, {(s.server_id, t.export): OMITTED for s in layout.servers for t in s.tools}, len(text))


def server_block(server: Mapping[str, Any], level: int = FULL) -> str:
    """One server's `declare module` block with every tool at `level` (SIGNATURE or above): the
    text the prompt shows when the whole server fits at that step."""
    layout = _Layout([server], _Example.of([server]), _Rules("", ()))
    (state,) = layout.servers
    for tool in state.tools:
        layout.set_level(tool, min(level, tool.top))
    return state.block()


# ---------------------------------------------------------------------------------- need


def need(tool: Mapping[str, Any]) -> int:
    """How little a tool's name and types say without its doc comment (see the module docstring);
    `tool` is a manifest tool entry with its agent parts."""
    parts = tool.get("agent")
    if not isinstance(parts, Mapping) or not (parts.get("summary") or parts.get("tags")):
        return 0
    score = 0
    name_words = set(terms(str(tool.get("toolName", ""))))
    if name_words <= GENERIC_WORDS:
        score += 2
    score += {"unknown": 3, "string": 2}.get(_output_text(tool), 0)
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    fields = [str(k) for k in properties] if isinstance(properties, Mapping) else []
    required = schema.get("required") if isinstance(schema, Mapping) else None
    required_names = {str(r) for r in required} if isinstance(required, list) else set()
    score += min(sum(1 for f in fields if f not in required_names) // 2, 2)
    known = name_words.union(*(terms(f) for f in fields))
    novel = set(terms(str(parts.get("summary", "")))) - known - COMMON_WORDS
    score += min(sum(1 for w in novel if not w.isdigit()) // 3, 3)
    return score


def _output_text(tool: Mapping[str, Any]) -> str:
    """The result type its compact signature shows (`string`, `unknown`, `Note`, …)."""
    parts = tool.get("agent")
    signature = str(parts.get("signature", "")) if isinstance(parts, Mapping) else ""
    return signature.rpartition("): Promise<")[2].removesuffix(">;")


# ---------------------------------------------------------------------------------- skills

_SKILLS_HEAD = "Skills: tested functions of this project; import one instead of writing it again\n"


def skills_section(skills: Sequence[Mapping[str, Any]], room: int) -> str:
    """The skills out/ holds, at most `room` characters: each skill's import line with its
    signature and description's first sentence while they fit, then by name, then counted
    ("and N more: listSkills() in @codemode/discovery"). "" when there are none or no room."""
    if not skills:
        return ""
    full = []
    names = []
    for skill in skills:
        name, spec = str(skill.get("name")), str(skill.get("specifier"))
        function = str(skill.get("function") or name)
        signature = one_line(str(skill.get("signature") or f"function {function}(input): Promise<unknown>;"))
        about = cut(first_sentence(str(skill.get("description") or "")), MAX_SKILL_SUMMARY_CHARS)
        full.append(f'- `import {{ {function} }} from "{spec}"`: {signature}' + (f" // {about}" if about else "") + "\n")
        names.append(f'- `import {{ {function} }} from "{spec}"`\n')
    lines: list[str] = []
    used = len(_SKILLS_HEAD) + 1
    for i in range(len(skills)):
        more = len(skills) - i - 1
        tail = len(f"- and {more} more: listSkills() in @codemode/discovery\n") if more else 0
        for candidate in (full[i], names[i]):
            if used + len(candidate) + tail <= room:
                lines.append(candidate)
                used += len(candidate)
                break
        else:
            rest = len(skills) - i
            lines.append(f"- and {rest} more: listSkills() in @codemode/discovery\n")
            break
    if not lines or lines[0].startswith("- and"):
        return ""
    text = "\n" + _SKILLS_HEAD + "".join(lines)
    return text if len(text) <= room else ""


# ---------------------------------------------------------------------------------- layout


@dataclass(eq=False)
class _Tool:
    """One tool on the ladder: its text at each step, and where it stands."""

    export: str
    order: int  # catalog position across all servers: the tie-break everywhere
    name: str  # as listed: `delete_note` or `delete_note @approval`
    top: int  # the highest step it has text for (NAME without an agent rendering)
    texts: dict[int, str]  # SIGNATURE / DESCRIBED / FULL → its lines in a block
    doc_tags: tuple[str, ...]  # kinds of the tags its doc comment shows (DESCRIBED and FULL)
    name_tags: tuple[str, ...]  # kinds of the tags shown from NAME up (its approval tag)
    types: tuple[str, ...]  # named types its signature needs
    has_doc: bool  # a doc comment would add something (a summary or tags)
    has_example: bool  # the EXAMPLE step adds a recorded example line
    entry: Mapping[str, Any]  # its manifest entry
    level: int = OMITTED

    @cached_property
    def need(self) -> int:
        """`need(entry)`, computed for the tools a pass ranks by it only."""
        return need(self.entry)

    @cached_property
    def vague_output(self) -> bool:
        """Its signature returns `string` or `unknown`: only an example shows what it holds."""
        return _output_text(self.entry) in ("string", "unknown")

    @classmethod
    def of(cls, entry: Mapping[str, Any], order: int, type_names: Collection[str]) -> _Tool:
        export = str(entry.get("exportName"))
        tag = entry.get(_TAG_KEY)
        approval = (str(tag),) if tag else ()
        parts = entry.get("agent")
        name = export + (f" {tag}" if tag else "")
        if not isinstance(parts, Mapping) or not isinstance(parts.get("signature"), str):
            # an out/ from an older generator: names only
            return cls(export, order, name, NAME, {}, (), tuple(map(_tag_kind, approval)), (), False, False, entry)
        summary = str(parts.get("summary") or "")
        tags = tuple(str(t) for t in parts.get("tags") or ())
        plain = str(parts["signature"])
        noted = str(parts.get("noted") or plain)
        doc = doc_comment(summary, (*tags, *approval))
        signature_line = INDENT + plain + (f" // {tag}" if tag else "") + "\n"
        doc_line = INDENT + doc + "\n" if doc else ""
        example = str(parts.get("example") or "")
        example_line = INDENT + example + "\n" if example else ""
        described = doc_line + INDENT + plain + "\n" if doc else signature_line
        texts = {
            SIGNATURE: signature_line,
            DESCRIBED: described,
            # a tool with nothing to add at a step takes it at no cost
            EXAMPLE: doc_line + example_line + INDENT + plain + "\n" if example else described,
            FULL: doc_line + example_line + INDENT + noted + "\n" if doc or example else INDENT + noted + "\n",
        }
        types = tuple(t for t in parts.get("types") or () if t in type_names)
        kinds = tuple(map(_tag_kind, tags)), tuple(map(_tag_kind, approval))
        return cls(export, order, name, FULL, texts, *kinds, types, bool(summary or tags), bool(example), entry)

    def shown_tags(self, level: int) -> tuple[str, ...]:
        if level >= DESCRIBED:
            return (*self.doc_tags, *self.name_tags)
        return self.name_tags if level >= NAME else ()


@dataclass(eq=False)
class _Server:
    """One server's part of the text, with the lengths it is made of kept up to date."""

    entry: Mapping[str, Any]
    server_id: str
    tools: list[_Tool]
    type_texts: dict[str, str]  # name → its line in the block, first-use order
    summary_head: str  # `// id: first sentence\n`, or ""
    instructions_head: str  # `// id: instructions (cut)\n`, or ""
    instructions: bool = False  # the header quotes the instructions
    declared: int = 0  # tools at SIGNATURE or above
    declared_chars: int = 0  # their lines
    type_uses: Counter[str] = field(default_factory=Counter)
    type_chars: int = 0  # lines of the named types in use
    named: int = 0  # tools at NAME
    name_chars: int = 0  # their names
    omitted: int = 0

    @property
    def known(self) -> bool:
        return "tools" in self.entry

    def names_text(self) -> str:
        """`a, b, 3 more`: the tools shown by name, then how many are not shown at all."""
        names = [t.name for t in self.tools if t.level == NAME]
        return ", ".join(names + ([f"{self.omitted} more"] if self.omitted else []))

    def names_length(self) -> int:
        pieces = self.named + (1 if self.omitted else 0)
        more = len(f"{self.omitted} more") if self.omitted else 0
        return self.name_chars + more + 2 * max(pieces - 1, 0)

    def length(self) -> int:
        """Characters of this server's part, as `block()` / `line()` render it."""
        if not self.declared:
            return len(self.line_head) + ((2 + self.names_length()) if self.named else 0) + 1
        also = len(INDENT + _ALSO) + self.names_length() + 1 if self.named or self.omitted else 0
        head = self.instructions_head if self.instructions else self.summary_head
        return len(head) + len(self._open()) + self.declared_chars + also + self.type_chars + 2

    def _open(self) -> str:
        return f"declare module {string_literal(module_specifier(self.server_id))} {{\n"

    def block(self) -> str:
        head = self.instructions_head if self.instructions else self.summary_head
        lines = [head, self._open()]
        lines += [t.texts[t.level] for t in self.tools if t.level >= SIGNATURE]
        if self.named or self.omitted:
            lines.append(INDENT + _ALSO + self.names_text() + "\n")
        lines += [text for name, text in self.type_texts.items() if self.type_uses[name]]
        lines.append("}\n")
        return "".join(lines).replace(_FENCE, "'''")  # server text must not close the fence

    @cached_property
    def line_head(self) -> str:
        """`- notes (13 tools) — first sentence`: how the server's line starts."""
        if not self.known:
            return f'- {self.server_id}: not generated yet; call listTools("{self.server_id}")'
        summary = _summary(self.entry, MAX_SERVER_SUMMARY_CHARS)
        count = len(_tools(self.entry))
        return f"- {self.server_id} ({count} tool{'s' * (count != 1)})" + (f" — {summary}" if summary else "")

    def line(self) -> str:
        return self.line_head + (f": {self.names_text()}" if self.named else "") + "\n"


class _Layout:
    """Every tool's step and the exact length of the whole text at those steps."""

    def __init__(self, servers: Sequence[Mapping[str, Any]], example: _Example, rules: _Rules) -> None:
        self.example = example
        self.rules = rules
        self.servers: list[_Server] = []
        order = 0
        for entry in servers:
            agent = entry.get("agent")
            named_types = agent.get("types") if isinstance(agent, Mapping) else None
            type_texts = {
                str(t["name"]): INDENT + str(t["text"]) + "\n"
                for t in (named_types if isinstance(named_types, list) else ())
                if isinstance(t, Mapping) and isinstance(t.get("name"), str) and isinstance(t.get("text"), str)
            }
            tools = []
            for tool in _tools(entry):
                tools.append(_Tool.of(tool, order, type_texts))
                order += 1
            sid = str(entry.get("serverId"))
            summary, instructions = _summary(entry, MAX_SERVER_SUMMARY_CHARS), _instructions(entry)
            self.servers.append(_Server(
                entry, sid, tools, type_texts,
                f"// {sid}: {summary}\n" if summary else "",
                f"// {sid}: {instructions}\n" if instructions else "",
                omitted=len(tools),
            ))
        self.owner = {id(t): s for s in self.servers for t in s.tools}
        self.tags: Counter[str] = Counter()  # kinds of the tags shown (`_tag_kind`)
        self.counts: Counter[int] = Counter({OMITTED: sum(len(s.tools) for s in self.servers)})
        self.undescribed = 0  # tools at SIGNATURE that have a doc comment to show
        self.declared_servers = 0
        self.server_chars = sum(s.length() for s in self.servers)
        self.total = self._total()

    # --------------------------------------------------------------- lengths

    def _total(self) -> int:
        listed = len(self.servers) - self.declared_servers
        heads = (len(_DECLARED_HEAD) + len(_DECLARED_TAIL) if self.declared_servers else 0) + (
            len(_OTHER_HEAD if self.declared_servers else _LIST_HEAD) if listed else 0)
        return self.rules.length(self.tags) + heads + self.server_chars + len(self.hint())

    def hint(self) -> str:
        """What is left out, in counts, and how to read it (§4.4 deferral); "" when nothing is."""
        missing = []
        if self.undescribed:
            missing.append(_plural(self.undescribed, "signature") + " without a /** description */")
        if self.counts[NAME]:
            missing.append(_plural(self.counts[NAME], "tool") + " by name only")
        if self.counts[OMITTED]:
            missing.append(_plural(self.counts[OMITTED], "tool") + " not listed")
        if not missing:
            return ""
        return "Not shown here: " + ", ".join(missing) + ". " + self.example.fetch_hint

    # --------------------------------------------------------------- steps

    def set_level(self, tool: _Tool, level: int) -> None:
        """Move `tool` to `level`, keeping every length exact."""
        server = self.owner[id(tool)]
        before, was_declared = server.length(), server.declared > 0
        old = tool.level
        for tag in tool.shown_tags(old):
            self.tags[tag] -= 1
            if not self.tags[tag]:
                del self.tags[tag]
        self.tags.update(tool.shown_tags(level))
        self.counts[old] -= 1
        self.counts[level] += 1
        self.undescribed += (level == SIGNATURE and tool.has_doc) - (old == SIGNATURE and tool.has_doc)
        if old >= SIGNATURE:
            server.declared -= 1
            server.declared_chars -= len(tool.texts[old])
            for name in tool.types:
                server.type_uses[name] -= 1
                if not server.type_uses[name]:
                    server.type_chars -= len(server.type_texts[name])
        elif old == NAME:
            server.named -= 1
            server.name_chars -= len(tool.name)
        else:
            server.omitted -= 1
        if level >= SIGNATURE:
            server.declared += 1
            server.declared_chars += len(tool.texts[level])
            for name in tool.types:
                if not server.type_uses[name]:
                    server.type_chars += len(server.type_texts[name])
                server.type_uses[name] += 1
        elif level == NAME:
            server.named += 1
            server.name_chars += len(tool.name)
        else:
            server.omitted += 1
        tool.level = level
        self.declared_servers += (server.declared > 0) - was_declared
        self.server_chars += server.length() - before
        self.total = self._total()

    def _try(self, tool: _Tool, level: int, budget: int) -> None:
        old = tool.level
        self.set_level(tool, level)
        if self.total > budget:
            self.set_level(tool, old)

    def climb(self, budget: int) -> None:
        """The passes of the module docstring."""
        tools = [t for s in self.servers for t in s.tools]
        self._pass(tools, OMITTED, NAME, budget, lambda t: t.order)
        self._pass(tools, NAME, SIGNATURE, budget, lambda t: (self._alone(t), t.order))
        self._pass(tools, SIGNATURE, DESCRIBED, budget, lambda t: (-t.need, t.order))
        examples = [t for t in tools if t.has_example]
        self._pass(examples, DESCRIBED, EXAMPLE, budget, lambda t: (not t.vague_output, -t.need, t.order))
        # field notes: a tool without an example goes from its doc comment straight to them
        ready = [t for t in tools if t.level == EXAMPLE or (t.level == DESCRIBED and not t.has_example)]
        for tool in sorted(ready, key=lambda t: (-t.need, t.order)):
            if tool.top >= FULL:
                self._try(tool, FULL, budget)
        for server in self.servers:
            if server.declared and server.instructions_head != server.summary_head:
                grows = len(server.instructions_head) - len(server.summary_head)
                if self.total + grows <= budget:
                    server.instructions = True
                    self.server_chars += grows
                    self.total += grows

    def _alone(self, tool: _Tool) -> int:
        """What a tool's signature costs with the named types it needs, as if none were shown."""
        types = self.owner[id(tool)].type_texts
        return len(tool.texts[SIGNATURE]) + sum(len(types[name]) for name in tool.types)

    def _pass(self, tools: Iterable[_Tool], start: int, step: int, budget: int, key: Callable[[_Tool], Any]) -> None:
        for tool in sorted((t for t in tools if t.level == start and t.top >= step), key=key):
            self._try(tool, step, budget)

    # --------------------------------------------------------------- text

    def render(self) -> str:
        declared = [s for s in self.servers if s.declared]
        listed = [s for s in self.servers if not s.declared]
        text = self.rules.text(self.tags)
        if declared:
            text += _DECLARED_HEAD + "".join(s.block() for s in declared) + _DECLARED_TAIL
        if listed:
            text += (_OTHER_HEAD if declared else _LIST_HEAD) + "".join(s.line() for s in listed)
        return text + self.hint()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


# ---------------------------------------------------------------------------------- rules


@dataclass
class _Example:
    """The real tools the prompt's examples use, so that each runs as printed."""

    server_id: str
    export: str  # any tool of it: read with getTool
    call: str | None  # a read-only tool needing no input, if any: called in the rules

    @classmethod
    def of(cls, servers: Sequence[Mapping[str, Any]]) -> _Example:
        first: tuple[str, str] | None = None
        for server in servers:
            for tool in _tools(server):
                if first is None:
                    first = (str(server.get("serverId")), str(tool.get("exportName")))
                if _callable_unasked(tool):
                    return cls(str(server.get("serverId")), str(tool.get("exportName")), str(tool.get("exportName")))
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
        return (f'- `import * as {self.alias} from "{spec}"`, then `await` a tool with one input object'
                " (none: `()`).")

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
        isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True
        and _TAG_KEY not in tool
        and isinstance(schema, Mapping) and schema.get("type") == "object" and not schema.get("required")
    )


@dataclass
class _Rules:
    """The rules before the declarations; the tags line depends on the tags shown."""

    head: str
    tail: tuple[str, ...]  # rule lines after the tags line
    _lengths: dict[frozenset[str], int] = field(default_factory=dict)

    def text(self, kinds: Collection[str]) -> str:
        """The rules with the tags line for these tag kinds (`_tag_kind`)."""
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


def _rules(
    tool_name: str,
    ids: Sequence[str],
    example: _Example,
    json_servers: Sequence[str],
    unbox_servers: Sequence[str],
    host_limits: Mapping[str, Any],
) -> _Rules:
    # `requestedCapabilities` and the response's fields are said by the tool's input and
    # output schemas (runtime/frontends/serve.py), which the model reads with this description.
    head = [
        f"Runs a JavaScript or TypeScript ES module in a fresh QuickJS sandbox where MCP servers are modules of async functions: one script calls many tools, returns only what matters (Code Mode spec {SPEC_VERSION}; tool `{tool_name}`).",
        # Servers and how to discover them come first: some clients cut descriptions short.
        "Servers: " + _id_list(ids) + '. Declarations below; in any run, `import { listServers, listTools, getTool, searchTools } from "@codemode/discovery"`: `(await searchTools("words", { detail: "full" })).results` ranks tools: `{serverId, toolName, exportName, declaration, …}`.',
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
            "- Deviation: for " + ", ".join(f"`{s}`" for s in json_servers)
            + " a single text block holding valid JSON is returned parsed."
        )
    if unbox_servers:
        tail.append(
            "- Deviation: for " + ", ".join(f"`{s}`" for s in unbox_servers)
            + " a value the server boxes in a one-field object (`@unboxed <field>` tools) is returned as that field's value."
        )
    return _Rules("\n".join(head), tuple(tail))


def _tag_kind(tag: str) -> str:
    if tag.startswith(_UNBOXED + " "):
        return _UNBOXED
    if tag in _HINTS_TRUE or tag in _HINTS_FALSE or tag in APPROVAL_TAGS.values() or tag == "@inferred":
        return tag
    return _OTHER_ANNOTATION


def _tags_rule(kinds: Collection[str]) -> str:
    """The one rule that explains the tags the declarations show (their `_tag_kind`s, only
    those); "" for none."""
    true = [f"`{t}`" for t in _HINTS_TRUE if t in kinds]
    false = [f"`{t}`" for t in _HINTS_FALSE if t in kinds]
    parts = []
    if true:
        parts.append(" ".join(true) + " are MCP hints" + (f" ({' '.join(false)}: false)" if false else ""))
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
        parts.append(f"`{ask}` calls wait for the user's OK{first}, within timeoutMs: batch them in one Promise.all")
    elif once in kinds:
        parts.append(f"`{once}`: a tool's first call per session waits for the user's OK (within timeoutMs): "
                     "batch them in one Promise.all")
    return "- Tags: " + "; ".join(parts) + "." if parts else ""


# ---------------------------------------------------------------------------------- approvals


def _with_approvals(server: Mapping[str, Any], policies: Mapping[str, str]) -> Mapping[str, Any]:
    """`server` as the prompt shows it under these policies: denied tools left out, asking
    ones tagged."""
    if not policies or not isinstance(server.get("tools"), list):
        return server
    tools: list[Any] = []
    for tool in server["tools"]:
        policy = policies.get(str(tool.get("toolName"))) if isinstance(tool, Mapping) else None
        if policy == "deny":
            continue
        tag = APPROVAL_TAGS.get(policy or "")  # the tags discovery's declarations carry too
        tools.append({**tool, _TAG_KEY: tag} if tag is not None else tool)
    return {**server, "tools": tools}


# ---------------------------------------------------------------------------------- servers


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


def _cut_server_list(servers: Sequence[Mapping[str, Any]], room: int) -> str:
    """The last step: as many server lines as fit, then how to list the rest."""
    head = f"Servers (module `{module_specifier('<id>')}`)\n"
    tail_template = "… and {n} more servers: call listServers() from \"@codemode/discovery\", then searchTools(\"what you need\", {{ detail: \"full\" }}) for declarations.\n"
    lines: list[str] = []
    used = len(head) + MORE_LINE_RESERVE
    for server in servers:
        line = _Server(server, str(server.get("serverId")), [], {}, "", "").line_head + "\n"
        if used + len(line) > room:
            break
        lines.append(line)
        used += len(line)
    rest = len(servers) - len(lines)
    return head + "".join(lines) + (tail_template.format(n=rest) if rest else "")


def prompt_size(text: str) -> dict[str, int]:
    """Characters and an approximate token count (4 characters a token) of a description."""
    return {"chars": len(text), "approxTokens": (len(text) + 3) // 4}
