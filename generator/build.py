"""The pure core of `generate`: fixture sets in, every out/ file's text out. No I/O.

Python builds the data (one model per server: module path, export names, type translations,
doc lines, sample counts, drift); the Jinja templates in templates/ own the layout; the
TypeScript translator (generator/typescript) owns every type expression and doc comment. The
runtime calls `build_outputs` too, for live servers that were never recorded (fixture sets with
no calls), so it must stay pure and cheap.

This module assembles servers and out/ from the per-tool models; the steps it runs live beside
it: generator/tool_model.py (one tool's types, doc comment and manifest entry) and
generator/shared_types.py (identical type bodies printed once per module).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codemode_gen import SPEC_VERSION
from codemode_gen.config import Settings
from codemode_gen.generator import manifest as mf
from codemode_gen.generator.agent import AgentTool, render_server
from codemode_gen.generator.examples import MAX_PROMPT_EXAMPLE_CHARS, example_redactor
from codemode_gen.generator.fixtures import FixtureSet, fixtures_hash
from codemode_gen.generator.infer import Inference
from codemode_gen.generator.names import assign_export_names, assign_module_paths, pascal_case
from codemode_gen.generator.output_schema import merge_output
from codemode_gen.generator.shared_types import share_identical_types
from codemode_gen.generator.templating import render
from codemode_gen.generator.tool_model import ModuleScope, ToolModel, build_tool
from codemode_gen.generator.typescript.compact import cut
from codemode_gen.generator.unwrap import UnwrapMode
from codemode_gen.jsonio import dumps_stable

# out/'s other files (manifest.json, codemode.d.ts and servers/ are generator/manifest.py's).
TSCONFIG_FILE = "tsconfig.json"
# Server instructions quoted in a .d.ts header (the manifest and discovery's describeServer
# keep them whole): one server's 2 KB of instructions repeated in every agent context is noise.
MAX_INSTRUCTIONS_IN_DTS = 400


@dataclass(frozen=True)
class Outputs:
    """Everything `generate` writes: relative path under out/ -> text, plus the report."""

    files: dict[str, str]
    manifest: mf.Manifest
    report: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ServerModel:
    config_id: str
    server_id: str
    module_specifier: str
    doc: tuple[str, ...]
    tools: tuple[ToolModel, ...]
    meta: dict[str, Any]
    manifest: mf.ServerEntry


def _unwrap_mode(settings: Settings, config_id: str) -> UnwrapMode:
    server = settings.servers.get(config_id)
    return server.unwrap if server is not None else "spec"


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
    fixture_set: FixtureSet,
    server_id: str,
    settings: Settings,
    report: list[str],
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
        t["name"]: merge_output(
            t,
            fixture_set.calls.get(t["name"], []),
            mode,
            unbox=unbox,
            inference=(inferences or {}).get(t["name"]),
        )
        for t in tools
    }
    scope = ModuleScope()
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
        build_tool(
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
        replace(
            m,
            manifest=m.manifest
            | {
                "declaration": agent.declarations[m.tool_name],
                "agent": agent.tools[m.tool_name],
            },
        )
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
        files[mf.module_file(server.server_id)] = render("server.js.j2", server=server, **context)
        files[mf.types_file(server.server_id)] = render("server.d.ts.j2", server=server, **context)
    files[mf.CODEMODE_DTS] = render("codemode.d.ts.j2", servers=servers, **context)
    files[TSCONFIG_FILE] = render("tsconfig.json.j2", **context)
    manifest = mf.manifest_document(
        fixtures_hash=hash_, sources=sources, servers=[s.manifest for s in servers]
    )
    files[mf.MANIFEST_FILE] = mf.dump_manifest(manifest)
    return Outputs(files=dict(sorted(files.items())), manifest=manifest, report=report)
