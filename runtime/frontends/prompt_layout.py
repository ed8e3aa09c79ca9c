"""The ladder the `codemode.run` description's declarations climb within its character budget.

Each tool stands on a ladder: omitted (counted in its server's line) → its import name in a
list → its signature → with its doc comment (the description's first sentence and its tags) →
with a recorded example → with a note per input field. Every tool starts at the bottom and is
raised one step at a time, pass by pass, while the whole text stays within the budget (each
step's cost is exact, not estimated: `Layout` keeps every length the text is made of); the
passes are listed in runtime/frontends/prompt.py's docstring. When even one line per server
does not fit, the server list is cut and the rest counted (`cut_server_list`). The declarations
are the compact agent rendering (generator/agent.py), assembled here tool by tool; the rules
above them are runtime/frontends/prompt_rules.py's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from codemode_gen.generator.agent import doc_comment
from codemode_gen.generator.manifest import module_specifier
from codemode_gen.generator.typescript.compact import cut, first_sentence, one_line
from codemode_gen.generator.typescript.printer import INDENT, string_literal
from codemode_gen.runtime.frontends.prompt_need import need, output_text
from codemode_gen.runtime.frontends.prompt_rules import (
    TAG_KEY,
    Example,
    Rules,
    server_tools,
    tag_kind,
)

__all__ = [
    "DESCRIBED",
    "EXAMPLE",
    "FULL",
    "LEVEL_NAMES",
    "NAME",
    "OMITTED",
    "SIGNATURE",
    "Layout",
    "cut_server_list",
]

# The ladder of one tool (see the module docstring), lowest first.
OMITTED = 0  # counted in its server's line ("3 more")
NAME = 1  # its import name in a list
SIGNATURE = 2  # `function f(input: …): Promise<…>;`
DESCRIBED = 3  # with its doc comment: the description's first sentence and its tags
EXAMPLE = 4  # with a recorded example after the doc comment
FULL = 5  # with a note per input field
LEVEL_NAMES = {
    OMITTED: "omitted",
    NAME: "name",
    SIGNATURE: "signature",
    DESCRIBED: "described",
    EXAMPLE: "example",
    FULL: "full",
}

# Server instructions quoted in a declared server's header once the tools have what they need
# (a server's 2 KB of instructions would cost more than its tools); else the first sentence.
MAX_INSTRUCTIONS_CHARS = 240
MAX_SERVER_SUMMARY_CHARS = 100
# Room kept for the closing "… N more servers" line when even the server list is cut.
MORE_LINE_RESERVE = 200

_FENCE = "```"
_DECLARED_HEAD = f"Servers and their tools (TypeScript declarations)\n{_FENCE}ts\n"
_DECLARED_TAIL = f"{_FENCE}\n"
_LIST_HEAD = "Servers and their tools (import name: the function to call)\n"
_OTHER_HEAD = "Other servers and their tools (import name: the function to call)\n"
_ALSO = "// also: "  # a declared server's tools shown by name only


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
        return output_text(self.entry) in ("string", "unknown")

    @classmethod
    def of(cls, entry: Mapping[str, Any], order: int, type_names: Collection[str]) -> _Tool:
        export = str(entry.get("exportName"))
        tag = entry.get(TAG_KEY)
        approval = (str(tag),) if tag else ()
        parts = entry.get("agent")
        name = export + (f" {tag}" if tag else "")
        if not isinstance(parts, Mapping) or not isinstance(parts.get("signature"), str):
            # an out/ from an older generator: names only
            return cls(
                export,
                order,
                name,
                NAME,
                {},
                (),
                tuple(map(tag_kind, approval)),
                (),
                False,
                False,
                entry,
            )
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
            FULL: doc_line + example_line + INDENT + noted + "\n"
            if doc or example
            else INDENT + noted + "\n",
        }
        types = tuple(t for t in parts.get("types") or () if t in type_names)
        kinds = tuple(map(tag_kind, tags)), tuple(map(tag_kind, approval))
        return cls(
            export,
            order,
            name,
            FULL,
            texts,
            *kinds,
            types,
            bool(summary or tags),
            bool(example),
            entry,
        )

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
        count = len(server_tools(self.entry))
        return f"- {self.server_id} ({count} tool{'s' * (count != 1)})" + (
            f" — {summary}" if summary else ""
        )

    def line(self) -> str:
        return self.line_head + (f": {self.names_text()}" if self.named else "") + "\n"


class Layout:
    """Every tool's step and the exact length of the whole text at those steps."""

    def __init__(
        self, servers: Sequence[Mapping[str, Any]], example: Example, rules: Rules
    ) -> None:
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
                if isinstance(t, Mapping)
                and isinstance(t.get("name"), str)
                and isinstance(t.get("text"), str)
            }
            tools = []
            for tool in server_tools(entry):
                tools.append(_Tool.of(tool, order, type_texts))
                order += 1
            sid = str(entry.get("serverId"))
            summary, instructions = _summary(entry, MAX_SERVER_SUMMARY_CHARS), _instructions(entry)
            self.servers.append(
                _Server(
                    entry,
                    sid,
                    tools,
                    type_texts,
                    f"// {sid}: {summary}\n" if summary else "",
                    f"// {sid}: {instructions}\n" if instructions else "",
                    omitted=len(tools),
                )
            )
        self.owner = {id(t): s for s in self.servers for t in s.tools}
        self.tags: Counter[str] = Counter()  # kinds of the tags shown (`tag_kind`)
        self.counts: Counter[int] = Counter({OMITTED: sum(len(s.tools) for s in self.servers)})
        self.undescribed = 0  # tools at SIGNATURE that have a doc comment to show
        self.declared_servers = 0
        self.server_chars = sum(s.length() for s in self.servers)
        self.total = self._total()

    # --------------------------------------------------------------- lengths

    def _total(self) -> int:
        listed = len(self.servers) - self.declared_servers
        heads = (len(_DECLARED_HEAD) + len(_DECLARED_TAIL) if self.declared_servers else 0) + (
            len(_OTHER_HEAD if self.declared_servers else _LIST_HEAD) if listed else 0
        )
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
        self.undescribed += (level == SIGNATURE and tool.has_doc) - (
            old == SIGNATURE and tool.has_doc
        )
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
        self._pass(
            examples, DESCRIBED, EXAMPLE, budget, lambda t: (not t.vague_output, -t.need, t.order)
        )
        # field notes: a tool without an example goes from its doc comment straight to them
        ready = [
            t for t in tools if t.level == EXAMPLE or (t.level == DESCRIBED and not t.has_example)
        ]
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

    def _pass(
        self,
        tools: Iterable[_Tool],
        start: int,
        step: int,
        budget: int,
        key: Callable[[_Tool], Any],
    ) -> None:
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


def _summary(server: Mapping[str, Any], limit: int) -> str:
    text = server.get("description")
    return first_sentence(text, limit) if isinstance(text, str) else ""


def _instructions(server: Mapping[str, Any]) -> str:
    text = server.get("description")
    if not isinstance(text, str) or not text.strip():
        return ""
    return cut(one_line(text), MAX_INSTRUCTIONS_CHARS)


def cut_server_list(servers: Sequence[Mapping[str, Any]], room: int) -> str:
    """The last step: as many server lines as fit, then how to list the rest."""
    head = f"Servers (module `{module_specifier('<id>')}`)\n"
    tail_template = '… and {n} more servers: call listServers() from "@codemode/discovery", then searchTools("what you need", {{ detail: "full" }}) for declarations.\n'
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
