"""The compact agent rendering of one server: what a model reads, as opposed to what tsc reads.

Same translation as the committed .d.ts (the `TypeDecl` ASTs `build` made), laid out for a
model's context (spec §4.4, §6.2, §6.3): one signature per tool with its input and output
types inline where they are used once or are short, and named where several tools share them
or they are recursive; the first sentence of the description; annotations as terse tags.
Two renderings come out of it, both deterministic:

- `declarations[tool]`: one tool, self-contained (its signature plus the named types it
  reaches), with notes: what `@codemode/discovery` returns as `declaration`.
- the parts the serve prompt (runtime/frontends/prompt.py) assembles a server's `declare module` block
  from, tool by tool, at whatever level its budget allows: per tool (`tools[tool]`) the
  summary, the tags, the signature with field notes (`noted`, when it has any) and without
  (`signature`), and the named types it reaches; per server (`types`) the text of each named
  type, in first-use order, printed once whichever of its tools are shown.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codemode_gen.generator.examples import format_phrase
from codemode_gen.generator.manifest import NamedType, ToolRendering
from codemode_gen.generator.typescript import TypeDecl
from codemode_gen.generator.typescript import ast as t
from codemode_gen.generator.typescript.compact import first_sentence, one_line, print_compact
from codemode_gen.generator.typescript.cycles import components

__all__ = ["AgentServer", "AgentTool", "annotation_tags", "box_tag", "doc_comment", "render_server"]

# A named type whose one-line text is at most this long is printed where it is used, even when
# several tools share it: `Promise<string[]>` reads better than a name to look up.
SHORT_TYPE_CHARS = 32
# Longest annotation value shown in a tag (non-standard annotations can hold anything).
MAX_TAG_VALUE_CHARS = 40
# MCP's hint annotations (spec §6.3) in the order tags print; others follow alphabetically.
HINT_TAGS = {
    "readOnlyHint": "readOnly",
    "destructiveHint": "destructive",
    "idempotentHint": "idempotent",
    "openWorldHint": "openWorld",
}
# Annotation keys printed as they are in a tag (`@x-vendor=…`); others are JSON-quoted.
_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# The false hint values in the terse rendering: a word each, as short as the true ones.
TERSE_FALSE = {
    "readOnlyHint": "@notReadOnly",
    "destructiveHint": "@nonDestructive",
    "idempotentHint": "@nonIdempotent",
    "openWorldHint": "@closedWorld",
}
# Longest JSON-text type quoted in a tool's summary; a bigger one is named by its shape only.
MAX_JSON_TYPE_CHARS = 120


@dataclass(frozen=True)
class AgentTool:
    """What the agent rendering needs of one tool (tool_model.ToolModel has it all)."""

    tool_name: str
    export_name: str
    input_type: str
    input_optional: bool
    output_type: str
    json_type: str | None
    description: str | None
    annotations: Mapping[str, Any] | None
    output_source: str  # "declared" | "inferred" | "none"
    box_field: str | None = None  # the declared outputSchema boxes the value in this field
    unboxed: bool = False  # ... and the binding returns the inner value (`unbox = true`)
    example: str | None = None  # `// e.g. f({…}) → …` (generator/examples.py): discovery's
    prompt_example: str | None = None  # the prompt's, shorter (only the call for a typed result)
    text_format: str | None = (
        None  # "json" | "python" | "csv" | "markdown": what a text result holds
    )


@dataclass(frozen=True)
class AgentServer:
    declarations: dict[str, str]  # canonical tool name -> self-contained declaration
    tools: dict[str, ToolRendering]  # canonical tool name -> its parts for the serve prompt
    types: list[NamedType]  # the named types the signatures use, first-use order


def annotation_tags(annotations: Mapping[str, Any] | None, *, terse: bool = False) -> list[str]:
    """§6.3 hints as tags, every one the tool declares (the spec's MUST, in every rendering):
    `@readOnly` for true, `@readOnly=false` for false, other annotations as `@name=value`.

    `terse` (doc comments and the agent rendering) keeps the information and drops the words:
    a false hint is one word of its own (`@notReadOnly`, `@nonDestructive`, `@nonIdempotent`,
    `@closedWorld`). A hint that is absent, or not a boolean, is not shown.
    """
    if not isinstance(annotations, Mapping):
        return []
    tags: list[str] = []
    for key, tag in HINT_TAGS.items():
        value = annotations.get(key)
        if value is not True and value is not False:
            continue
        if value:
            tags.append(f"@{tag}")
        else:
            tags.append(TERSE_FALSE[key] if terse else f"@{tag}=false")
    for key in sorted(str(k) for k in annotations if k not in HINT_TAGS and k != "title"):
        text = json.dumps(annotations[key], ensure_ascii=False, sort_keys=True, default=str)
        if len(text) > MAX_TAG_VALUE_CHARS:
            text = text[: MAX_TAG_VALUE_CHARS - 1] + "…"
        name = (
            key
            if _TAG_NAME.fullmatch(key)
            else json.dumps(key[:MAX_TAG_VALUE_CHARS], ensure_ascii=False)
        )
        tags.append(f"@{name}={text}")  # §6.3: every annotation present is surfaced
    return tags


def box_tag(field: str, *, unboxed: bool) -> str:
    """`@boxed result`: the server boxes the value in `{result: …}` and the script gets the box;
    `@unboxed result`: the host takes the value out of the box (`unbox = true`)."""
    name = field if _TAG_NAME.fullmatch(field) else json.dumps(field, ensure_ascii=False)
    return f"@{'unboxed' if unboxed else 'boxed'} {name}"


class _Graph:
    """The server's named types after aliasing: what each name really is, who uses it."""

    def __init__(self, tools: Sequence[AgentTool], decls: Mapping[str, TypeDecl]) -> None:
        self.decls = decls
        self._closed: dict[str, t.TypeNode] = {}
        self.order: list[str] = []  # reachable names, first-use order
        uses: dict[str, int] = {}
        edges: dict[str, set[str]] = {}
        pending = [
            self.target(n)
            for tool in tools
            for n in (tool.input_type, tool.output_type, tool.json_type)
            if n is not None
        ]
        for name in pending:
            uses[name] = uses.get(name, 0) + 1
        queue = list(dict.fromkeys(pending))
        seen = set(queue)
        while queue:
            name = queue.pop(0)
            self.order.append(name)
            node = self._node(name)
            refs = (
                [self.target(r.name) for r in t.walk(node) if isinstance(r, t.Ref)] if node else []
            )
            edges[name] = {r for r in refs if r in decls}
            for ref in refs:
                if ref not in decls:
                    continue
                uses[ref] = uses.get(ref, 0) + 1
                if ref not in seen:
                    seen.add(ref)
                    queue.append(ref)
        recursive = _cyclic(edges)
        self.inline: dict[str, t.TypeNode] = {}
        for name in self.order:
            node = self._node(name)
            if node is None or name in recursive:
                continue
            if uses.get(name, 0) <= 1 or len(print_compact(node)) <= SHORT_TYPE_CHARS:
                self.inline[name] = node
        # Aliases resolve to their target, inlined or by name.
        self.alias: dict[str, t.TypeNode] = {}
        for name in decls:
            target = self.target(name)
            if target != name:
                self.alias[name] = self.inline.get(target, t.Ref(target))
        self.edges = edges

    def _node(self, name: str) -> t.TypeNode | None:
        decl = self.decls.get(name)
        if decl is None or decl.node is None:
            return None
        node = self._closed.get(name)
        if node is None:
            # A model needs no `[k: string]: unknown` to read a result or write an input.
            node = self._closed[name] = t.close_objects(decl.node)
        return node

    def target(self, name: str) -> str:
        """Follow `type A = B` aliases (share_identical_types) to the declaration with the body."""
        seen = {name}
        while True:
            node = self._node(name)
            if type(node) is not t.Ref or node.name not in self.decls or node.name in seen:
                return name
            name = node.name
            seen.add(name)

    def node(self, name: str) -> t.TypeNode:
        return self._node(name) or t.UNKNOWN

    def inline_map(self) -> dict[str, t.TypeNode]:
        return {**self.alias, **self.inline}

    def named_reach(self, roots: Sequence[str]) -> list[str]:
        """Named (not inlined) types reachable from `roots`, in first-use order."""
        found: set[str] = set()
        stack = [self.target(r) for r in roots]
        while stack:
            name = stack.pop()
            if name in found or name not in self.decls:
                continue
            found.add(name)
            stack.extend(self.edges.get(name, ()))
        return [n for n in self.order if n in found and n not in self.inline]


def _cyclic(edges: dict[str, set[str]]) -> set[str]:
    """Names that reach themselves: they must stay named (TS cannot inline a recursive type).

    Those are the names in a strongly connected component of more than one name, or with an
    edge to themselves (one linear pass, as for the translator's alias cycles)."""
    component = components(edges)
    sizes = Counter(component.values())
    return {
        name for name, targets in edges.items() if sizes[component[name]] > 1 or name in targets
    }


def _summary(tool: AgentTool, json_text: str | None) -> str:
    """What a tool does in one line: its description's first sentence, and how to read a JSON
    text result (the type to parse it as, when that is short: `_names_json_type`)."""
    parts = [first_sentence(tool.description)] if tool.description else []
    if _names_json_type(json_text):
        parts.append(f"Returns JSON text: JSON.parse(result) as {json_text}.")
    elif json_text is not None:
        parts.append("Returns JSON text: JSON.parse(result).")
    elif (phrase := format_phrase(tool.text_format, terse=True)) is not None and not _names_format(  # type: ignore[arg-type]
        parts, tool.text_format
    ):
        parts.append(phrase)
    if len(parts) > 1:
        parts[0] = _sentence(parts[0])  # another sentence follows it
    return one_line(" ".join(p for p in parts if p))


def _sentence(text: str) -> str:
    """`text` ending like a sentence, so that another can follow it in the summary."""
    return text if not text or text[-1] in ".!?…:" else text + "."


# Words by which a description already names a text format (then the summary does not again).
FORMAT_WORDS = {"python": ("python",), "csv": ("csv",), "markdown": ("markdown",)}


def _names_format(parts: Sequence[str], fmt: str | None) -> bool:
    text = " ".join(parts).lower()
    return any(word in text for word in FORMAT_WORDS.get(fmt or "", ()))


def _names_json_type(json_text: str | None) -> bool:
    return json_text is not None and len(json_text) <= MAX_JSON_TYPE_CHARS


def _tags(tool: AgentTool, *, prompt: bool = False) -> list[str]:
    """A tool's tags, each on one line. `prompt` (the serve prompt's blocks) leaves out
    `@boxed`: there the result type `{ result: … }` already shows the box, and every character
    is paid on every turn; `@unboxed` stays, since the type no longer shows it."""
    tags = ["@inferred"] if tool.output_source == "inferred" else []  # output type from samples
    if tool.box_field is not None and (tool.unboxed or not prompt):
        tags.append(box_tag(tool.box_field, unboxed=tool.unboxed))
    tags += annotation_tags(tool.annotations, terse=True)
    return [text for text in (one_line(tag) for tag in tags) if text]


def doc_comment(summary: str, tags: Sequence[str]) -> str:
    """The one-line doc comment of a tool (`""` when there is nothing to say). Its parts are
    sanitised one by one (`one_line`) and joined by spaces, so no `*/` can form between them."""
    text = " ".join(part for part in (summary, *tags) if part)
    return f"/** {text} */" if text else ""


def render_server(
    server_id: str, tools: Sequence[AgentTool], decls: Mapping[str, TypeDecl]
) -> AgentServer:
    """The agent rendering of one server's tools; `decls` are the module's named types by name."""
    graph = _Graph(tools, decls)
    inline = graph.inline_map()

    def signature(tool: AgentTool, notes: bool, level: int) -> str:
        node = inline.get(tool.input_type, t.Ref(tool.input_type))
        if tool.input_optional and _no_input(node):
            params = ""
        else:
            text = print_compact(node, notes=notes, level=level, inline=inline)
            params = f"input{'?' if tool.input_optional else ''}: {text}"
        # Notes go on inputs only: they say how to write a correct call; a result's field
        # names and types are what a script needs to use it.
        out = print_compact(t.Ref(tool.output_type), level=level, inline=inline)
        return f"function {tool.export_name}({params}): Promise<{out}>;"

    def json_text(tool: AgentTool) -> str | None:
        return print_compact(t.Ref(tool.json_type), inline=inline) if tool.json_type else None

    def type_decl(name: str, level: int) -> str:
        # Named types are mostly results (inputs are used once, so inlined): no notes.
        node = graph.node(name)
        return f"type {name} = {print_compact(node, level=level, inline=inline)};"

    declarations: dict[str, str] = {}
    parts: dict[str, ToolRendering] = {}
    for tool in tools:
        parsed = json_text(tool)
        summary = _summary(tool, parsed)
        # the types the tool's text names: its signature's, and the JSON text's its summary quotes
        roots = [tool.input_type, tool.output_type]
        if tool.json_type is not None and _names_json_type(parsed):
            roots.append(tool.json_type)
        named = graph.named_reach(roots)
        example = one_line(tool.example) if tool.example else ""
        lines = [doc_comment(summary, _tags(tool)), example, "export " + signature(tool, True, 0)]
        lines += [type_decl(n, 0) for n in named]
        declarations[tool.tool_name] = "\n".join(line for line in lines if line)
        # The prompt's blocks sit one level deep (`declare module "…" {`).
        plain, noted = signature(tool, False, 1), signature(tool, True, 1)
        part: ToolRendering = {"signature": plain}
        if summary:
            part["summary"] = summary
        if tags := _tags(tool, prompt=True):
            part["tags"] = tags
        if noted != plain:
            part["noted"] = noted
        if tool.prompt_example:
            part["example"] = one_line(tool.prompt_example)
        if named:
            part["types"] = named
        parts[tool.tool_name] = part

    types: list[NamedType] = [
        {"name": n, "text": type_decl(n, 1)}
        for n in graph.order
        if n not in graph.inline and n in decls
    ]
    return AgentServer(declarations=declarations, tools=parts, types=types)


def _no_input(node: t.TypeNode) -> bool:
    """An input with nothing to say (§5.3.1: no arguments or `{}`): the signature shows `()`."""
    return (
        isinstance(node, t.Object)
        and not node.properties
        and not node.patterns
        and (node.index is None or node.index == t.UNKNOWN)
    )
