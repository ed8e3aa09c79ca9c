"""The `codemode.run` description: the whole system prompt a model gets from `serve`.

It says what the spec requires a host to document (§3.2.1 restrictions, §3.2.3 capability
ids, §3.2.4 limit keys, §3.5 globals and deviations, §5.3.2 unwrapping, §10.1 concurrency)
and carries the declarations of §4.4 — within a character budget, because clients cut long
descriptions (Claude Code at 16,384 characters) and every character is paid on every turn.

The declarations are the compact agent rendering (generator/agent.py), assembled tool by tool
(runtime/frontends/prompt_layout.py) after the rules (runtime/frontends/prompt_rules.py). Each
tool stands on a ladder: omitted (counted in its server's line) → its import name in a list →
its signature → with its doc comment (the description's first sentence and its tags) → with a
note per input field. Every tool starts at the bottom and is raised one step at a time, pass by
pass, while the whole text stays within the budget (each step's cost is exact, not estimated:
`Layout` keeps every length the text is made of):

1. names, in catalog order;
2. signatures, cheapest first, with the named types they need (the most tools a script can
   call without looking anything up);
3. doc comments, neediest first (`need`, runtime/frontends/prompt_need.py);
4. examples, first of the tools whose type says least of their result (`string` and `unknown`
   outputs: only a recording shows what the text holds), then neediest first;
5. field notes, neediest first;
6. each declared server's instructions (up to MAX_INSTRUCTIONS_CHARS) instead of its first
   sentence.

A pass tries every tool and skips the ones that do not fit, so a big signature never blocks
smaller ones. What is left out is said at the end, with counts, and how to read it through
`@codemode/discovery` in the first run (§4.4 allows deferring it); every tag the rendered
declarations carry is explained once in the rules, and only those. When even one line per
server does not fit, the server list is cut and the rest counted (`cut_server_list`).

Tools whose calls wait for a person's approval (runtime/host/approval.py: policy "ask", "ask-once")
are tagged (`@approval`, `@approvalOnce`) at every step from the name up; a tool the policy
denies is left out. This is decided when the prompt is rendered, from the host's policy: out/
never depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode_gen.generator.typescript.compact import cut, first_sentence, one_line
from codemode_gen.runtime.frontends.prompt_defaults import (
    DEFAULT_PROMPT_BUDGET,
    DEFAULT_TOOL_NAME,
    MIN_PROMPT_BUDGET,
)
from codemode_gen.runtime.frontends.prompt_layout import FULL, OMITTED, Layout, cut_server_list
from codemode_gen.runtime.frontends.prompt_rules import (
    TAG_KEY,
    Example,
    Rules,
    counted_id,
    rules_for,
    server_tools,
)
from codemode_gen.runtime.host.catalog import APPROVAL_TAGS

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode

# The tool name and budget defaults live in a light module the CLI imports for its option
# defaults (runtime/frontends/prompt_defaults.py); re-exported here, where they are used.
__all__ = [
    "DEFAULT_PROMPT_BUDGET",
    "DEFAULT_TOOL_NAME",
    "MIN_PROMPT_BUDGET",
    "PromptLayout",
    "approval_policies",
    "layout_prompt",
    "prompt_size",
    "render_prompt",
    "server_block",
    "skills_section",
    "system_prompt",
]

# The share of the budget (percent) the skills section may take: the servers' declarations keep
# the rest, so many skills never push every tool off the ladder.
MAX_SKILLS_SHARE = 20
# A skill's description in its line, at most (its first sentence).
MAX_SKILL_SUMMARY_CHARS = 120


def system_prompt(
    cm: CodeMode, *, tool_name: str = DEFAULT_TOOL_NAME, budget: int = DEFAULT_PROMPT_BUDGET
) -> str:
    """The description `serve` gives its one tool, from `cm`'s out/ and in-memory modules."""
    paths = cm.capability_ids()
    json_servers = sorted(
        paths[cid] for cid, cfg in cm.configs.items() if cfg.unwrap == "json" and cid in paths
    )
    unbox_servers = sorted(
        paths[cid] for cid, cfg in cm.configs.items() if cfg.unbox and cid in paths
    )
    servers = cm.prompt_servers()
    return render_prompt(
        servers,
        tool_name=tool_name,
        budget=budget,
        json_servers=json_servers,
        unbox_servers=unbox_servers,
        host_limits={
            "trace": cm.trace,
            "maxResponseChars": cm.max_response_chars,
            **dict(cm.settings.limits),
            **({"typecheck": True} if cm.typecheck else {}),
        },
        approvals=approval_policies(cm, servers),
        skills=cm.skill_entries(),
    )


def approval_policies(
    cm: CodeMode, servers: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, str]]:
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
        for tool in server_tools(server):
            name = str(tool.get("toolName"))
            annotations = tool.get("annotations")
            policy = (
                "deny"
                if name in blocked
                else cm.approval.policy(
                    config, name, annotations if isinstance(annotations, Mapping) else None
                )
            )
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
        servers,
        tool_name=tool_name,
        budget=budget,
        json_servers=json_servers,
        unbox_servers=unbox_servers,
        host_limits=host_limits,
        approvals=approvals,
        skills=skills,
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
    section = skills_section(
        skills, min(budget * MAX_SKILLS_SHARE // 100, budget - MIN_PROMPT_BUDGET)
    )
    if section:
        inner = layout_prompt(
            servers,
            tool_name=tool_name,
            budget=budget - len(section),
            json_servers=json_servers,
            unbox_servers=unbox_servers,
            host_limits=host_limits,
            approvals=approvals,
        )
        return PromptLayout(inner.text + section, inner.levels, inner.computed + len(section))
    if approvals:
        servers = [_with_approvals(s, approvals.get(str(s.get("serverId"))) or {}) for s in servers]
    ids = [counted_id(s) for s in servers]
    example = Example.of(servers)
    rules = rules_for(tool_name, ids, example, json_servers, unbox_servers, host_limits or {})
    layout = Layout(servers, example, rules)
    if layout.total <= budget:
        layout.climb(budget)
        text = layout.render()
        if len(text) <= budget:  # always, as the lengths are exact (tests check `computed`)
            return PromptLayout(
                text,
                {(s.server_id, t.export): t.level for s in layout.servers for t in s.tools},
                layout.total,
            )
    # not even a line per server: cut the list, count the rest
    text = rules.text(()) + cut_server_list(servers, budget - len(rules.text(())))
    return PromptLayout(
        text, {(s.server_id, t.export): OMITTED for s in layout.servers for t in s.tools}, len(text)
    )


def server_block(server: Mapping[str, Any], level: int = FULL) -> str:
    """One server's `declare module` block with every tool at `level` (SIGNATURE or above): the
    text the prompt shows when the whole server fits at that step."""
    layout = Layout([server], Example.of([server]), Rules("", ()))
    (state,) = layout.servers
    for tool in state.tools:
        layout.set_level(tool, min(level, tool.top))
    return state.block()


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
        signature = one_line(
            str(skill.get("signature") or f"function {function}(input): Promise<unknown>;")
        )
        about = cut(first_sentence(str(skill.get("description") or "")), MAX_SKILL_SUMMARY_CHARS)
        full.append(
            f'- `import {{ {function} }} from "{spec}"`: {signature}'
            + (f" // {about}" if about else "")
            + "\n"
        )
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
        tools.append({**tool, TAG_KEY: tag} if tag is not None else tool)
    return {**server, "tools": tools}


def prompt_size(text: str) -> dict[str, int]:
    """Characters and an approximate token count (4 characters a token) of a description."""
    return {"chars": len(text), "approxTokens": (len(text) + 3) // 4}
