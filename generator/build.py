"""The pure core of `generate`: fixture sets in, every out/ file's text out. No I/O.

Python builds the data (one model per server: module path, export names, type translations,
doc lines, sample counts, drift); the Jinja templates in templates/ own the layout; the
TypeScript translator (generator/typescript) owns every type expression and doc comment. The
runtime calls `build_outputs` too, for live servers that were never recorded (fixture sets with
no calls), so it must stay pure and cheap.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codemode_gen import SPEC_VERSION
from codemode_gen.config import Settings
from codemode_gen.generator import manifest as mf
from codemode_gen.generator.agent import AgentTool, annotation_tags, box_tag, render_server
from codemode_gen.generator.examples import (
    MAX_PROMPT_EXAMPLE_CHARS,
    Example,
    TextFormat,
    choose_example,
    example_redactor,
    format_phrase,
    text_format,
)
from codemode_gen.generator.fixtures import LIVE_FIELD, FixtureSet, fixtures_hash
from codemode_gen.generator.infer import Inference, unwrapped_samples
from codemode_gen.generator.names import (
    assign_export_names,
    assign_module_paths,
    is_identifier,
    pascal_case,
)
from codemode_gen.generator.output_schema import OutputModel, merge_output
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.templating import render
from codemode_gen.generator.typescript import NameScope, TypeDecl, translate
from codemode_gen.generator.typescript.ast import Ref, walk
from codemode_gen.generator.typescript.compact import cut
from codemode_gen.generator.unwrap import UnwrapMode
from codemode_gen.jsonio import dumps_stable

# out/'s other files (manifest.json and servers/ are generator/manifest.py's).
CODEMODE_DTS = "codemode.d.ts"
TSCONFIG_FILE = "tsconfig.json"
# §5.3.1: an absent or empty inputSchema means "no arguments or {}".
EMPTY_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
# Drift findings quoted in one tool's doc comment (the manifest and report carry all of them);
# bounds the agent-context cost of a server that disagrees with its schema everywhere.
MAX_DRIFT_IN_DOC = 3
# Optional field paths named in one tool's doc comment (bounds comment length).
MAX_OPTIONAL_IN_DOC = 12
# Characters the §6.1 mapping plainly turns into `_` (no "MCP tool name" line for those alone).
_SEPARATORS = re.compile(r"[-.]")
# Server instructions quoted in a .d.ts header (the manifest and discovery's describeServer
# keep them whole): one server's 2 KB of instructions repeated in every agent context is noise.
MAX_INSTRUCTIONS_IN_DTS = 400
# A declaration body shorter than this is printed again instead of becoming an alias of an
# identical declaration: `= string` or an empty open object (`{ [k: string]: unknown; }`)
# costs the agent's context no more than `= OtherToolInput` and is clearer. Longer bodies are
# printed once per module.
MIN_SHARED_BODY_CHARS = 40


@dataclass(frozen=True)
class Outputs:
    """Everything `generate` writes: relative path under out/ -> text, plus the report."""

    files: dict[str, str]
    manifest: mf.Manifest
    report: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ToolModel:
    tool_name: str
    export_name: str
    input_type: str  # the type expression the signature shows
    input_name: str  # the input type's name (declared only when input_decl is None)
    input_decl: TypeDecl | None  # the inlined input type's declaration, for the agent rendering
    input_optional: bool
    output_type: str
    json_type: str | None
    decls: tuple[TypeDecl, ...]
    doc: tuple[str, ...]
    js_doc: tuple[str, ...]
    manifest: mf.ToolEntry
    example: Example | None = None  # a recorded call (generator/examples.py)
    text_format: TextFormat | None = None  # what the text a string result holds is
    vague_output: bool = False  # typed `unknown` or `string`: the type says nothing of the value


@dataclass(frozen=True)
class ServerModel:
    config_id: str
    server_id: str
    module_specifier: str
    doc: tuple[str, ...]
    tools: tuple[ToolModel, ...]
    meta: dict[str, Any]
    manifest: mf.ServerEntry


class _ModuleScope(NameScope):
    """A module's type-name scope that can reserve the tools' root names up front.

    `translate` claims its root name itself; `expect_root` lets exactly that next claim take
    the name reserved earlier instead of a deduplicated `Name2`.
    """

    def __init__(self) -> None:
        super().__init__()
        self._root: str | None = None

    def reserve(self, wanted: str) -> str:
        return super().claim(wanted)

    def expect_root(self, name: str) -> None:
        self._root = name

    def claim(self, wanted: str) -> str:
        if self._root is not None and wanted == self._root:
            self._root = None
            return wanted
        return super().claim(wanted)


def _unwrap_mode(settings: Settings, config_id: str) -> UnwrapMode:
    server = settings.servers.get(config_id)
    return server.unwrap if server is not None else "spec"


# How the doc comment names each box marker (generator/unwrap.py, read_box).
BOX_MARKER_TEXT = {
    "x-dedalus-box": "x-dedalus-box",
    "x-fastmcp-wrap-result": "x-fastmcp-wrap-result",
    "mcp-sdk": "FastMCP's result wrapper",
}


def _blocklist(settings: Settings, config_id: str) -> frozenset[str]:
    server = settings.servers.get(config_id)
    return frozenset(server.blocklist) if server is not None else frozenset()


def _sources(fixture_set: FixtureSet) -> dict[str, str]:
    """File hashes; a live (never recorded) set is hashed from its content instead."""
    if fixture_set.hashes:
        return dict(fixture_set.hashes)
    digest = hashlib.sha256(
        dumps_stable([fixture_set.server_json, fixture_set.tools, fixture_set.calls]).encode()
    ).hexdigest()
    return {f"{fixture_set.config_id}/live": f"sha256:{digest}"}


def _input_schema(tool: Mapping[str, Any], where: str, report: list[str]) -> dict[str, Any]:
    schema = tool.get("inputSchema")
    if isinstance(schema, dict) and schema:
        return schema
    if schema is not None and not isinstance(schema, dict):
        report.append(
            f"{where}: inputSchema ignored (expected an object); typed as an empty object"
        )
    return dict(EMPTY_INPUT_SCHEMA)


def _input_optional(schema: Mapping[str, Any]) -> bool:
    """§5.3.1: an object schema with nothing required may be called with no argument at all."""
    if schema.get("type") not in ("object", None):
        return False
    if any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref", "not", "if", "enum", "const")):
        return False
    if schema.get("type") is None and not ({"properties", "additionalProperties"} & set(schema)):
        return False
    required = schema.get("required")
    return not (isinstance(required, list) and required)


def _provenance_lines(out: OutputModel, json_type: str | None, fmt: TextFormat | None = None) -> list[str]:
    """What the reader of a type must know about where it came from: only the surprising cases.

    A declared outputSchema needs no sentence (it is the normal case, and this text is agent
    context); an inferred or unknown type, a JSON string, and drift do.
    """
    lines: list[str] = []
    if out.source == "inferred":
        n = out.samples
        lines.append(
            f"Output type inferred from {n} recorded sample{'s' * (n != 1)}; it may not cover every case."
        )
        if out.optional:
            shown = ", ".join(out.optional[:MAX_OPTIONAL_IN_DOC])
            more = len(out.optional) - MAX_OPTIONAL_IN_DOC
            lines.append(
                f"Optional fields (absent from some samples): {shown}{f' and {more} more' if more > 0 else ''}."
            )
    if json_type is not None:
        lines.append(
            f"Returns a JSON string of type {json_type}: use JSON.parse(result) as {json_type}."
        )
    elif (phrase := format_phrase(fmt)) is not None:
        lines.append(phrase)
    if out.box is not None:
        field = out.box.field
        where = f".{field}" if is_identifier(field) else f"[{json.dumps(field, ensure_ascii=False)}]"
        marker = BOX_MARKER_TEXT[out.box.marker]
        lines.append(
            f"Boxed by the server ({marker}); returned unboxed (unbox = true, a deviation from spec §5.3.2)."
            if out.unboxed
            else f"Boxed by the server ({marker}): the value is in {where}."
        )
    if out.drift:
        lines.append(
            f"Warning: {len(out.drift)} recorded result(s) do not match the declared outputSchema"
            " (drift); expect values outside this type:"
        )
        lines += [f"- {d}" for d in out.drift[:MAX_DRIFT_IN_DOC]]
    return lines


def _is_string(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" or schema.get("type") == ["string"]


def _build_tool(
    server_id: str,
    tool: dict[str, Any],
    export_name: str,
    names: dict[str, str],
    scope: _ModuleScope,
    out: OutputModel,
    calls: Sequence[dict[str, Any]],
    report: list[str],
    mode: UnwrapMode = "spec",
    redactor: Redactor | None = None,
) -> ToolModel:
    tool_name = tool["name"]
    where = f"{server_id}.{export_name}"
    description = tool.get("description") if isinstance(tool.get("description"), str) else None
    input_schema = _input_schema(tool, where, report)

    decls: list[TypeDecl] = []

    def emit(
        schema: Any, name: str, doc: tuple[str, ...], *, closed: bool = False, derived: tuple[str, ...] = ()
    ) -> str:
        scope.expect_root(name)
        translation = translate(
            schema, name, scope, doc=doc, derived_from=(tool_name, *derived), closed=closed
        )
        if translation.root != name:  # the translator broke its "claims `name`" contract
            raise AssertionError(f"translator renamed root {name!r} to {translation.root!r}")
        decls.extend(translation.decls)
        report.extend(f"{where}: {w}" for w in translation.warnings)
        return translation.root

    # Type docs stay lean (they are agent context); provenance is on the function, once.
    input_type = emit(input_schema, names["input"], (), closed=True)
    # The input type is written where it is used, in the signature (`get_note(input: { id:
    # number })`): a name would only make the reader look it up. A recursive input keeps it.
    input_decl: TypeDecl | None = None
    input_text = input_type
    root = next(d for d in decls if d.name == input_type)
    if not any(
        isinstance(node, Ref) and node.name == input_type
        for d in decls
        if d.node is not None
        for node in walk(d.node)
    ):
        decls.remove(root)
        input_decl, input_text = root, root.text
    json_type: str | None = None
    if out.json_text and out.json_schema is not None:
        json_type = emit(
            out.json_schema, names["json"], (f"The JSON inside the string {export_name} returns.",)
        )
    # What text a string result holds, and one recorded call (generator/examples.py).
    fmt = text_format([s.value for s in unwrapped_samples(calls, mode)], json_text=out.json_text)
    example = choose_example(
        calls, mode, show_input=not _input_optional(input_schema), redactor=redactor or example_redactor(),
        box=out.box if out.unboxed else None,
    )
    provenance = _provenance_lines(out, json_type, fmt)
    output_doc = (f"A string holding JSON of type {json_type}.",) if json_type else ()
    # No schema, no sample: `Promise<unknown>` says it all; a named alias of unknown would not.
    output_type = (
        # An unboxed value's schema is the box's field: a title that only respells the field
        # (pydantic's "Result") says nothing.
        emit(out.schema, names["output"], output_doc, derived=(out.box.field,) if out.box and out.unboxed else ())
        if out.schema is not None
        else "unknown"
    )

    doc: list[str] = []
    raw_annotations = tool.get("annotations")
    annotations: dict[str, Any] = raw_annotations if isinstance(raw_annotations, dict) else {}
    title = tool.get("title") if isinstance(tool.get("title"), str) else annotations.get("title")
    if isinstance(title, str) and title and title != tool_name:
        doc.append(title)  # §6.3: an annotations.title counts as the tool's title
    if description:
        doc.append(description)
    if input_decl is not None and input_decl.doc:
        doc += ["Input: " + " ".join(input_decl.doc)]  # the inlined input schema's own doc
    if export_name != _SEPARATORS.sub("_", tool_name):
        # Only a mapping a reader could not guess (`delete_` for "delete", `a__2`): "get-env" is
        # plainly `get_env`, and __meta__ and discovery keep every canonical name anyway.
        doc.append(f"MCP tool name: {json.dumps(tool_name, ensure_ascii=False)}.")
    tags = annotation_tags(tool.get("annotations"), terse=True)  # §6.3, one line of tags
    if out.box is not None:
        tags.insert(0, box_tag(out.box.field, unboxed=out.unboxed))
    if tags:
        doc.append(" ".join(tags))
    doc += provenance
    if example is not None:
        doc.append(f"Example (a recorded call): await {example.call(export_name)} → {example.result}")

    report.extend(f"{where}: drift: {d}" for d in out.drift)
    report.extend(f"{where}: {w}" for w in out.warnings)

    output: mf.OutputRecord = {
        "source": out.source,
        "declared": out.declared,
        "inferred": out.inferred,
        "samples": out.samples,
        "jsonText": out.json_text,
        "optional": list(out.optional),
        "drift": list(out.drift),
    }
    if fmt is not None:
        output["format"] = fmt
    live = sum(1 for s in unwrapped_samples(calls, mode) if calls[s.line - 1].get(LIVE_FIELD) is True)
    if live and out.source == "inferred":
        output["liveSamples"] = live
    if out.box is not None:
        output["box"] = mf.box_record(out.box, unboxed=out.unboxed)
    types: mf.TypesRecord = {}
    if input_decl is None:
        types["input"] = input_type
    if out.schema is not None:
        types["output"] = output_type
    if json_type:
        types["json"] = json_type
    entry = mf.tool_entry(
        tool_name=tool_name,
        export_name=export_name,
        input_schema=input_schema,
        output=output,
        types=types,
        description=description,
        annotations=tool["annotations"] if isinstance(tool.get("annotations"), dict) else None,
        output_schema=out.schema,
    )
    return ToolModel(
        tool_name=tool_name,
        export_name=export_name,
        input_type=input_text,
        input_name=input_type,
        input_decl=input_decl,
        input_optional=_input_optional(input_schema),
        output_type=output_type,
        json_type=json_type,
        decls=tuple(decls),
        doc=tuple(doc),
        js_doc=(description,) if description else (),
        manifest=entry,
        example=example,
        text_format=fmt,
        vague_output=out.schema is None or _is_string(out.schema),
    )


def _shared_name(title: str | None, members: Sequence[TypeDecl], scope: _ModuleScope) -> str | None:
    """The title identical declarations share, when it can name their body: already one of
    their names, or a free identifier the scope hands out unchanged (not a TS global)."""
    if title is None or not is_identifier(title):
        return None
    if any(m.name == title for m in members):
        return title
    if title in scope:
        return None
    return title if scope.reserve(title) == title else None


def share_identical_types(tools: Sequence[ToolModel], scope: _ModuleScope) -> tuple[ToolModel, ...]:
    """Print each type body once per module: later identical declarations become aliases.

    The module is agent context on every request, and servers repeat types (one `Note` as the
    result of create/get/update_note, and again as a `$defs` helper). Every exported name stays
    (scripts reference `GetNoteOutput`); the body goes to the identical schemas' shared title
    when that is a usable name, else to the alphabetically first declaration. Doc lines the
    body already shows are dropped from the aliases; the rest (what differs) stay on them.
    """
    positions: dict[str, list[tuple[int, int]]] = {}
    for ti, tool in enumerate(tools):
        for di, decl in enumerate(tool.decls):
            if len(decl.text) >= MIN_SHARED_BODY_CHARS:
                positions.setdefault(decl.text, []).append((ti, di))
    replaced: dict[tuple[int, int], TypeDecl] = {}
    inserted: dict[tuple[int, int], TypeDecl] = {}  # a new body, printed before this position
    for text, where in positions.items():  # first-appearance order: deterministic
        if len(where) < 2:
            continue
        members = [tools[ti].decls[di] for ti, di in where]
        titles = {m.title for m in members}
        name = _shared_name(titles.pop() if len(titles) == 1 else None, members, scope)
        if name is None:
            name = min(m.name for m in members)
        body = next((m for m in members if m.name == name), None)
        if body is None:  # a new declaration named after the title; keep the docs all share
            common = tuple(line for line in members[0].doc if all(line in m.doc for m in members))
            body = TypeDecl(
                name, tuple(line for line in common if line != name), text, name, members[0].node
            )
            inserted[where[0]] = body
        for pos, member in zip(where, members, strict=True):
            if member is not body:
                doc = tuple(line for line in member.doc if line not in body.doc and line != name)
                replaced[pos] = TypeDecl(member.name, doc, name, member.title, Ref(name))
    if not replaced:
        return tuple(tools)
    out: list[ToolModel] = []
    for ti, tool in enumerate(tools):
        decls: list[TypeDecl] = []
        for di, decl in enumerate(tool.decls):
            if (ti, di) in inserted:
                decls.append(inserted[(ti, di)])
            decls.append(replaced.get((ti, di), decl))
        out.append(replace(tool, decls=tuple(decls)))
    return tuple(out)


def _agent_tool(model: ToolModel) -> AgentTool:
    entry = model.manifest
    return AgentTool(
        tool_name=model.tool_name,
        export_name=model.export_name,
        input_type=model.input_name,
        input_optional=model.input_optional,
        output_type=model.output_type,
        json_type=model.json_type,
        description=entry.get("description"),
        annotations=entry.get("annotations"),
        output_source=entry["output"]["source"],
        box_field=box["field"] if (box := entry["output"].get("box")) else None,
        unboxed=bool(box and box["unboxed"]),
        example=model.example.line_text(model.export_name) if model.example is not None else None,
        prompt_example=_prompt_example(model),
        text_format=model.text_format,
    )


def _prompt_example(model: ToolModel) -> str | None:
    """The example the prompt's ladder shows (runtime/frontends/prompt.py): a result only where the type
    does not say what it holds (`string`, `unknown`: only a recording shows that); for a typed
    result, the call alone, when the tool has required arguments (how its input looks)."""
    example = model.example
    if example is None:
        return None
    if model.vague_output:
        return example.line_text(model.export_name, limit=MAX_PROMPT_EXAMPLE_CHARS)
    return example.line_text(model.export_name, result=False) if example.input is not None else None


def _build_server(
    fixture_set: FixtureSet, server_id: str, settings: Settings, report: list[str],
    inferences: Mapping[str, Inference] | None = None,
) -> ServerModel:
    config_id = fixture_set.config_id
    mode = _unwrap_mode(settings, config_id)
    unbox = settings.unbox_for(config_id)
    hidden = _blocklist(settings, config_id)
    redactor = example_redactor(settings.redact_patterns)
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    listed = [
        t for t in fixture_set.tools if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    if len(listed) != len(fixture_set.tools):
        report.append(
            f"{server_id}: {len(fixture_set.tools) - len(listed)} tool(s) without a string name skipped"
        )
    for tool in sorted(listed, key=lambda t: t["name"]):  # stable: first listing wins
        if tool["name"] in seen:
            report.append(
                f"{server_id}: tool {json.dumps(tool['name'])} is listed twice; the first entry is used"
            )
        elif tool["name"] not in hidden:
            tools.append(tool)
        seen.add(tool["name"])
    blocked = sorted(hidden & {t["name"] for t in listed})
    if blocked:
        report.append(f"{server_id}: hidden by blocklist: {', '.join(blocked)}")
    exports = assign_export_names(t["name"] for t in tools)
    outputs = {
        t["name"]: merge_output(t, fixture_set.calls.get(t["name"], []), mode, unbox=unbox,
                                inference=(inferences or {}).get(t["name"]))
        for t in tools
    }
    scope = _ModuleScope()
    # Claim every tool's root type names before translating any schema, so a `$defs` name in
    # one tool can never push another tool's `<Export>Input` to a suffixed name.
    names: dict[str, dict[str, str]] = {}
    for tool in tools:
        # `$` or `_` alone has no letters: "ToolInput", not "Input" (claim adds a `T` before a digit)
        stem = pascal_case(exports[tool["name"]]) or "Tool"
        names[tool["name"]] = {
            "input": scope.reserve(stem + "Input"),
            "output": scope.reserve(stem + "Output"),
        }
        if outputs[tool["name"]].json_text:
            names[tool["name"]]["json"] = scope.reserve(stem + "Json")
    models = [
        _build_tool(
            server_id,
            tool,
            exports[tool["name"]],
            names[tool["name"]],
            scope,
            outputs[tool["name"]],
            fixture_set.calls.get(tool["name"], []),
            report,
            mode,
            redactor,
        )
        for tool in tools
    ]
    models = list(share_identical_types(models, scope))
    agent = render_server(
        server_id,
        [_agent_tool(m) for m in models],
        {d.name: d for m in models for d in (*m.decls, *([m.input_decl] if m.input_decl else []))},
    )
    models = [
        replace(m, manifest=m.manifest | {
            "declaration": agent.declarations[m.tool_name], "agent": agent.tools[m.tool_name],
        })
        for m in models
    ]

    info = fixture_set.server_json.get("serverInfo")
    info = info if isinstance(info, dict) else {}
    server_name = info.get("name") if isinstance(info.get("name"), str) else config_id
    version = info.get("version") if isinstance(info.get("version"), str) else None
    instructions = fixture_set.server_json.get("instructions")
    description = instructions if isinstance(instructions, str) and instructions else None
    caps = fixture_set.server_json.get("capabilities")
    capabilities = sorted(caps) if isinstance(caps, dict) else []

    meta: dict[str, Any] = {
        "serverId": server_id,
        "serverName": server_name,
        "tools": [
            {"toolName": m.tool_name, "exportName": m.export_name}
            | ({"description": m.manifest["description"]} if "description" in m.manifest else {})
            for m in models
        ],
    }
    if version is not None:
        meta["serverVersion"] = version
    manifest = mf.server_entry(
        server_id=server_id,
        config_id=config_id,
        server_name=str(server_name),
        capabilities=capabilities,
        unwrap=mode,
        unbox=unbox,
        tools=[m.manifest for m in models],
        # The compact agent rendering (generator/agent.py) the serve prompt is made of: each
        # tool's parts are in its entry (`agent`), the named types they share here.
        agent={"types": agent.types},
        version=version,
        description=description,
    )
    title = json.dumps(server_name, ensure_ascii=False) + (f" {version}" if version else "")
    doc = [f'Server {title}: import from "{mf.module_specifier(server_id)}".']
    if description:
        doc += ["", cut(description, MAX_INSTRUCTIONS_IN_DTS)]
    if mode == "json":
        doc += [
            "",
            'Text results that hold JSON are returned parsed (unwrap = "json", a deviation from spec §5.3.2).',
        ]
    if unbox and any(o.box is not None for o in outputs.values()):
        doc += [
            "",
            "Results the server boxes in a one-field object (tools tagged @unboxed) are returned as"
            " that field's value (unbox = true, a deviation from spec §5.3.2).",
        ]
    return ServerModel(
        config_id=config_id,
        server_id=server_id,
        module_specifier=mf.module_specifier(server_id),
        doc=tuple(doc),
        tools=tuple(models),
        meta=meta,
        manifest=manifest,
    )


def build_outputs(
    fixture_sets: Sequence[FixtureSet],
    settings: Settings | None = None,
    *,
    module_paths: Mapping[str, str] | None = None,
    inferences: Mapping[str, Mapping[str, Inference]] | None = None,
) -> Outputs:
    """Every out/ file for these servers, deterministically: same input, same bytes.

    `module_paths` (config id -> §5.0.1 path) lets the runtime keep the paths it already
    assigned when it builds a subset of servers in memory; by default they are derived from
    the config ids of `fixture_sets`. `inferences` (config id -> tool -> Inference) replaces
    the inference from recorded calls for those tools (the runtime's in-session learning keeps
    merged types, not the calls).
    """
    settings = settings or Settings()
    sets = sorted(fixture_sets, key=lambda s: s.config_id)
    paths = assign_module_paths(s.config_id for s in sets)
    if module_paths:
        paths.update({cid: path for cid, path in module_paths.items() if cid in paths})
        if len(set(paths.values())) != len(paths):
            raise ValueError(f"module_paths are not unique: {sorted(paths.items())}")
    report: list[str] = []
    servers = [
        _build_server(s, paths[s.config_id], settings, report, (inferences or {}).get(s.config_id))
        for s in sorted(sets, key=lambda s: paths[s.config_id])
    ]

    sources: dict[str, str] = {}
    for s in sets:
        sources.update(_sources(s))
    live_sets = [FixtureSet(s.config_id, {}, [], {}, _sources(s)) for s in sets]
    hash_ = fixtures_hash(live_sets)
    generator = mf.generator_info()
    context = {"generator": generator, "fixtures_hash": hash_, "spec_version": SPEC_VERSION}

    files: dict[str, str] = {}
    for server in servers:
        files[mf.module_file(server.server_id)] = render(
            "server.js.j2", server=server, **context
        )
        files[mf.types_file(server.server_id)] = render(
            "server.d.ts.j2", server=server, **context
        )
    files[CODEMODE_DTS] = render("codemode.d.ts.j2", servers=servers, **context)
    files[TSCONFIG_FILE] = render("tsconfig.json.j2", **context)
    manifest = mf.manifest_document(
        fixtures_hash=hash_, sources=sources, servers=[s.manifest for s in servers]
    )
    files[mf.MANIFEST_FILE] = mf.dump_manifest(manifest)
    return Outputs(files=dict(sorted(files.items())), manifest=manifest, report=report)
