"""The tool catalog of one run: which servers and tools a script can see and call.

Built at run start from out/manifest.json plus the live tool lists the host already holds. The
bridge and @codemode/discovery both read this one object. What the script sees (its server
modules and discovery, built from it before the sandbox starts) is fixed for the run (spec §8.2:
a tools/list_changed during the run must not change it). The object itself changes once per
server at most: a server not connected at the start connects at its first call, and the bridge
replaces that server's tools (out/'s) with this live snapshot for the rest of the run, so a call
is checked against what the server has while discovery still shows out/'s list.

Approval (issue 12, runtime/host/approval.py) is marked here at runtime, never in out/ (which does not
depend on the policy): a tool whose policy is "ask", "ask-once" or (a server default) "deny"
carries `approval` in its discovery definition and a tag in its declaration (`@approval`,
`@approvalOnce`, `@denied`, with what it means: `APPROVAL_NOTES`), so a script can plan such calls; the policy comes from the
server's config (`tool_policy`) when the view is built.

out/ is the committed, typed view; the live server is the truth. When they disagree the live
list wins (a tool that is gone fails as ToolNotFoundError; a new tool gets a binding built in
memory) and the run carries a warning saying which command refreshes out/.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode_gen.config import ServerConfig
from codemode_gen.generator.manifest import (
    Manifest,
    ServerEntry,
    ToolEntry,
    module_file_of,
    module_specifier,
)
from codemode_gen.generator.names import assign_export_names, assign_module_paths, unique_name
from codemode_gen.generator.unwrap import Box, find_box, inner_schema
from codemode_gen.runtime.diagnostics import Diagnostic
from codemode_gen.runtime.host.approval_policy import tool_policy

__all__ = [
    "APPROVAL_NOTES",
    "APPROVAL_TAGS",
    "Catalog",
    "LiveServer",
    "ServerView",
    "ToolView",
    "adopt_built",
    "live_tools",
    "lost_declarations",
    "manifest_views",
    "module_paths_for",
    "shown_policy",
    "stale_message",
    "tag_declaration",
    "tools_from_live",
]

# Bounds how many tool names a stale-out/ warning lists, so a server that renamed hundreds of
# tools does not flood the response.
MAX_NAMES_IN_WARNING = 10
# The tag a declaration (discovery's, the serve prompt's) carries for a tool whose calls are not
# simply sent (runtime/host/approval.py): asked every time, asked once per session, refused.
APPROVAL_TAGS = {"ask": "@approval", "ask-once": "@approvalOnce", "deny": "@denied"}
# What discovery's declarations say after the tag: a script may read them without the serve
# prompt's rule explaining the tags (a prompt cut to its server list shows no tool, so no rule).
APPROVAL_NOTES = {
    "ask": "the user is asked before each call; batch such calls in one Promise.all",
    "ask-once": "the user is asked before the first call per session; batch such calls in one Promise.all",
    "deny": "calls are refused",
}


def shown_policy(config: ServerConfig, tool_name: str, annotations: Any) -> str | None:
    """A tool's approval policy as discovery shows it: None for "allow" (nothing to say)."""
    policy = tool_policy(
        config, tool_name, annotations if isinstance(annotations, Mapping) else None
    )
    return None if policy == "allow" else policy


def tag_declaration(declaration: str, tag: str) -> str:
    """`declaration` (a compact one, generator/agent.py) with `tag` in the one-line doc comment
    of its function, or in a doc comment of its own: `/** Delete a note. @destructive @approval */`.
    Lines before the doc (a learned-type note, runtime/host/learn.py) stay where they are, and so do
    the `// e.g. …` example lines between the doc and the function (generator/examples.py)."""
    lines = declaration.split("\n")
    at = next(
        (i for i, line in enumerate(lines) if line.startswith(("export function ", "function "))), 0
    )
    doc_at = at - 1
    while doc_at >= 0 and lines[doc_at].startswith("// e.g. "):
        doc_at -= 1
    doc = lines[doc_at] if doc_at >= 0 else ""
    if doc.startswith("/**") and doc.endswith("*/"):
        lines[doc_at] = f"{doc[:-2].rstrip()} {tag} */"
    else:
        lines.insert(doc_at + 1, f"/** {tag} */")
    return "\n".join(lines)


@dataclass(frozen=True)
class LiveServer:
    """What a connected server said about itself: initialize result and tools/list."""

    server_json: Mapping[str, Any]
    tools: tuple[Mapping[str, Any], ...]


@dataclass
class ToolView:
    tool_name: str
    export_name: str
    description: str | None = None
    annotations: dict[str, Any] | None = None
    input_schema: Any = None
    output_schema: Any = None  # effective: declared (its boxed field's when unboxed), else inferred
    # The TypeScript declaration generate wrote for this tool; None when unknown or when it was
    # generated from a different definition than the live one (it would describe the wrong tool).
    declaration: str | None = None
    # What the server itself declared, to tell whether out/ was generated from this very tool.
    declared_output_schema: Any = None
    title: str | None = (
        None  # MCP title (or annotations.title): searched, not shown (§4.2.3 has none)
    )
    # The declared outputSchema boxes the value (x-dedalus-box, FastMCP's wrapping), and whether
    # the bridge returns the inner value (the server's `unbox = true`).
    box: Box | None = None
    unboxed: bool = False
    # Live calls of this session the output type was learned from (runtime/host/learn.py); 0 when
    # it comes from the server or from out/.
    learned_calls: int = 0
    # Why learning this tool's type stopped (a bound of runtime/host/learn.py); None while it goes on.
    learning_stopped: str | None = None
    # The approval policy when calls are not simply sent ("ask", "ask-once", "deny"; None:
    # "allow"), from the server's config (`shown_policy`); discovery shows it.
    approval: str | None = None

    def definition(self, *, copy_values: bool = True) -> dict[str, Any]:
        """Full ToolDefinition (§4.2.4); discovery trims it by detail level.

        `copy_values=False` shares the schema and annotation objects: for a caller that only
        serialises the result (the discovery module, once per run), where deep copies of
        every schema were most of the run's set-up time."""
        clone = copy.deepcopy if copy_values else _same
        out: dict[str, Any] = {"toolName": self.tool_name, "exportName": self.export_name}
        if self.description is not None:
            out["description"] = self.description
        if self.annotations:
            out["annotations"] = clone(self.annotations)
        if self.input_schema is not None:
            out["inputSchema"] = clone(self.input_schema)
        if self.output_schema is not None:
            out["outputSchema"] = clone(self.output_schema)
        if self.box is not None:
            out["boxed"] = {"field": self.box.field, "unboxed": self.unboxed}
        if self.declaration is not None:
            tag = APPROVAL_TAGS.get(self.approval or "")
            out["declaration"] = (
                tag_declaration(self.declaration, f"{tag} {APPROVAL_NOTES[str(self.approval)]}")
                if tag
                else self.declaration
            )
        if self.approval is not None:
            out["approval"] = self.approval
        if self.learned_calls:
            out["outputSchemaLearned"] = {"liveCalls": self.learned_calls, "scope": "session"}
            if self.learning_stopped is not None:
                out["outputSchemaLearned"]["stopped"] = self.learning_stopped
        return out


def _same(value: Any) -> Any:
    return value


@dataclass
class ServerView:
    """One server as this run sees it."""

    server_id: str  # §5.0.1 module path: what the agent imports and discovery reports
    config_id: str | None  # .mcp.json key; None when only out/ knows the server
    server_name: str
    version: str | None = None
    description: str | None = None
    capabilities: list[str] = field(default_factory=list)
    tools: dict[str, ToolView] = field(default_factory=dict)  # by canonical tool name
    live: bool = False  # tools come from the live tools/list (else from out/ until first use)
    unavailable: str | None = None  # why the server could not be connected, when known
    auth_failed: bool = False  # the server rejected our credentials (AuthenticationError on use)
    auth_hint: str | None = (
        None  # its fix when the client layer knows it (`codemode-gen auth login ID`)
    )
    module_source: str | None = None  # ES module text of @codemode/servers/<server_id>

    def info(self) -> dict[str, Any]:
        """ServerInfo (§4.2.1)."""
        out: dict[str, Any] = {"serverId": self.server_id, "serverName": self.server_name}
        if self.capabilities:
            out["capabilities"] = list(self.capabilities)
        return out

    def describe(self) -> dict[str, Any]:
        """ServerDescription (§4.2.2)."""
        out = self.info()
        if self.description:
            out["description"] = self.description
        if self.version:
            out["version"] = self.version
        return out


@dataclass
class Catalog:
    servers: dict[str, ServerView] = field(default_factory=dict)  # by server_id
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def visible(self) -> list[ServerView]:
        """Servers discovery lists: configured and not known to be unavailable (§3.2.3)."""
        return [
            v
            for _, v in sorted(self.servers.items())
            if v.config_id is not None and v.unavailable is None
        ]

    def modules(self) -> dict[str, str]:
        return {
            module_specifier(sid): view.module_source
            for sid, view in sorted(self.servers.items())
            if view.module_source is not None
        }


# --------------------------------------------------------------------------- manifest


def capabilities_of(server_json: Mapping[str, Any]) -> list[str]:
    caps = server_json.get("capabilities")
    return sorted(caps) if isinstance(caps, Mapping) else []


def _effective_output(declared: Any, fallback: Any, unbox: bool) -> tuple[Any, Box | None]:
    """(the outputSchema discovery shows, the box): a boxed declared schema describes the box,
    or with `unbox` its field, which is then what the script receives."""
    box = find_box(declared)
    if box is None:
        return (declared if declared is not None else fallback), None
    return (inner_schema(declared, box) if unbox else declared), box


def _tool_from_manifest(entry: ToolEntry, unbox: bool = False) -> ToolView:
    output = entry.get("output")
    annotations = entry.get("annotations")
    # A manifest without provenance cannot tell declared from inferred: assume declared, so
    # that a live tool without an outputSchema counts as changed (never a wrong declaration).
    declared = output.get("declared") if isinstance(output, Mapping) else entry.get("outputSchema")
    box = find_box(declared) if isinstance(declared, Mapping) else None
    output_schema = entry.get("outputSchema")  # effective as generated (generate's `unbox`)
    if box is not None and isinstance(declared, Mapping):  # ... re-derived for this run's setting
        output_schema = inner_schema(declared, box) if unbox else declared
    declaration = _text(entry.get("declaration"))
    recorded = output.get("box") if isinstance(output, Mapping) else None
    if (
        box is not None
        and (isinstance(recorded, Mapping) and recorded.get("unboxed") is True) != unbox
    ):
        declaration = None  # generated for the other `unbox` setting: it would type the wrong value
    return ToolView(
        tool_name=str(entry.get("toolName", "")),
        export_name=str(entry.get("exportName", "")),
        description=_text(entry.get("description")),
        annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
        input_schema=entry.get("inputSchema"),
        output_schema=output_schema,
        declaration=declaration,
        declared_output_schema=declared,
        title=_title(entry.get("title"), annotations),
        box=box,
        unboxed=box is not None and unbox,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _title(title: Any, annotations: Any) -> str | None:
    if isinstance(title, str) and title:
        return title
    nested = annotations.get("title") if isinstance(annotations, Mapping) else None
    return nested if isinstance(nested, str) and nested else None


def _same_source(tool: Mapping[str, Any], prior: ToolView) -> bool:
    """Whether out/ was generated from this very definition, so its declaration still holds.

    Everything a declaration is printed from counts (doc text, annotation tags, input and
    declared output types); an inferred output schema is out/'s own and never differs."""
    annotations = tool.get("annotations")
    return (
        tool.get("inputSchema") == prior.input_schema
        and _text(tool.get("description")) == prior.description
        and (dict(annotations) if isinstance(annotations, Mapping) else None) == prior.annotations
        and tool.get("outputSchema") == prior.declared_output_schema
    )


def tools_from_live(
    tools: Iterable[Mapping[str, Any]],
    blocklist: Iterable[str],
    known: Mapping[str, ToolView] | None = None,
    *,
    unbox: bool = False,
) -> dict[str, ToolView]:
    """Live tools/list → views; export names follow §6.1 over the live set.

    An out/ output schema (possibly inferred from recordings) is kept when the live tool does
    not declare one, so discovery does not lose what generate learned; out/'s declaration is
    kept only while the live tool is the one it was generated from (`_same_source`). A box
    comes from the live declared schema; `unbox` is the server's setting.
    """
    hidden = set(blocklist)
    listed = [t for t in tools if isinstance(t.get("name"), str) and t["name"] not in hidden]
    exports = assign_export_names(t["name"] for t in listed)
    known = known or {}
    views: dict[str, ToolView] = {}
    for tool in listed:
        name = tool["name"]
        prior = known.get(name)
        annotations = tool.get("annotations")
        output_schema, box = _effective_output(
            tool.get("outputSchema"), prior.output_schema if prior else None, unbox
        )
        views[name] = ToolView(
            tool_name=name,
            export_name=exports[name],
            description=_text(tool.get("description")),
            annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
            input_schema=tool.get("inputSchema"),
            output_schema=output_schema,
            declaration=prior.declaration
            if prior is not None and _same_source(tool, prior)
            else None,
            declared_output_schema=tool.get("outputSchema"),
            title=_title(tool.get("title"), annotations),
            box=box,
            unboxed=box is not None and unbox,
        )
    return dict(sorted(views.items()))


def live_tools(
    live: LiveServer, config: ServerConfig, known: Mapping[str, ToolView] | None = None
) -> dict[str, ToolView]:
    """`tools_from_live` over a connected server's snapshot, with its config's blocklist, unbox
    and approval policies."""
    views = tools_from_live(live.tools, config.blocklist, known, unbox=config.unbox)
    for name, view in views.items():
        view.approval = shown_policy(config, name, view.annotations)
    return views


def lost_declarations(
    out_tools: Mapping[str, ToolView], live_tools: Mapping[str, ToolView]
) -> bool:
    """Whether out/ declared a tool whose live definition changed (its declaration was dropped)."""
    return any(
        view.declaration is None and name in out_tools and out_tools[name].declaration is not None
        for name, view in live_tools.items()
    )


def adopt_built(
    tools: Mapping[str, ToolView], entry: Mapping[str, Any], *, export_names: bool
) -> None:
    """Take what an in-memory build says about these tools.

    `export_names=True` when the built module is the one the run imports: its export names win.
    A built declaration fills a gap only: where out/'s still holds (same definition, same
    export) it is kept, since out/'s also knows the output types inferred from recordings."""
    for built in entry.get("tools", []):
        view = tools.get(str(built.get("toolName"))) if isinstance(built, Mapping) else None
        if view is None:
            continue
        export = built.get("exportName")
        declaration = _text(built.get("declaration"))
        if export_names and isinstance(export, str) and export != view.export_name:
            view.export_name = export
            view.declaration = declaration  # out/'s text names the old export
        elif view.declaration is None and export == view.export_name:
            view.declaration = declaration


def _names(names: Iterable[str]) -> str:
    items = sorted(names)
    shown = ", ".join(items[:MAX_NAMES_IN_WARNING])
    return shown + (
        f" (+{len(items) - MAX_NAMES_IN_WARNING} more)" if len(items) > MAX_NAMES_IN_WARNING else ""
    )


def stale_message(
    config_id: str, out_tools: Mapping[str, ToolView], live_tools: Mapping[str, ToolView]
) -> str | None:
    """Describe how out/ differs from the live server, or None when they agree."""
    added = set(live_tools) - set(out_tools)
    removed = set(out_tools) - set(live_tools)
    changed = {
        name
        for name in set(live_tools) & set(out_tools)
        if live_tools[name].input_schema != out_tools[name].input_schema
        or live_tools[name].description != out_tools[name].description
    }
    if not (added or removed or changed):
        return None
    parts = []
    if added:
        parts.append(f"new tools: {_names(added)}")
    if removed:
        parts.append(f"tools gone: {_names(removed)}")
    if changed:
        parts.append(f"changed: {_names(changed)}")
    return f"out/ is stale for server '{config_id}' ({'; '.join(parts)}); using the live tool list"


def manifest_views(
    manifest: Manifest | None,
    out_dir: Path,
    configs: Mapping[str, ServerConfig],
) -> dict[str, ServerView]:
    """Servers described by out/ (a manifest `read_manifest` validated), with their generated
    module text (read from out/servers/; None when the file is missing)."""
    views: dict[str, ServerView] = {}
    if manifest is None:
        return views
    for entry in manifest["servers"]:
        views[entry["serverId"]] = _server_from_manifest(entry, out_dir, configs)
    return views


def _server_from_manifest(
    entry: ServerEntry, out_dir: Path, configs: Mapping[str, ServerConfig]
) -> ServerView:
    config_id = entry.get("configId")
    config = configs.get(config_id) if config_id is not None else None
    blocked = set(config.blocklist) if config is not None else set()
    unbox = config.unbox if config is not None else entry.get("unbox") is True
    tools = {
        t["toolName"]: _tool_from_manifest(t, unbox)
        for t in entry["tools"]
        if t["toolName"] not in blocked
    }
    if config is not None:
        for name, view in tools.items():
            view.approval = shown_policy(config, name, view.annotations)
    try:
        source: str | None = (out_dir / module_file_of(entry)).read_text(encoding="utf-8")
    except OSError:
        source = None
    return ServerView(
        server_id=entry["serverId"],
        config_id=config_id if config is not None else None,
        server_name=entry.get("serverName") or entry.get("configId") or entry["serverId"],
        version=entry.get("version"),
        description=entry.get("description"),
        capabilities=list(entry.get("capabilities", [])),
        tools=dict(sorted(tools.items())),
        module_source=source,
    )


def module_paths_for(
    manifest: Manifest | None, configs: Mapping[str, ServerConfig]
) -> dict[str, str]:
    """configId → module path: out/'s choice where it has one, §5.0.1 otherwise."""
    paths: dict[str, str] = {}
    if manifest is not None:
        for entry in manifest["servers"]:
            if "configId" in entry:
                paths[entry["configId"]] = entry["serverId"]
    fresh = assign_module_paths(list(configs) + [c for c in paths if c not in configs])
    taken = set(paths.values())
    for config_id in configs:
        if config_id not in paths:
            paths[config_id] = unique_name(fresh[config_id], taken, "--")  # §5.0.1 collisions
            taken.add(paths[config_id])
    return paths
