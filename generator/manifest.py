"""out/manifest.json: the one contract between `generate` (which writes it) and the runtime
(which reads it to find the committed modules, their tools and their declarations).

This module owns everything about it:
- paths: the manifest's file name, `servers/<path>.js` / `.d.ts` under out/, and the module
  specifier prefix `@codemode/servers/` every server module is imported under (MODULE_PREFIX,
  defined in codemode_gen itself: the sandbox needs it too);
- typed records: `Manifest`, `ServerEntry`, `ToolEntry` and their parts, the JSON shape
  (docs/DESIGN.md, "out/manifest.json");
- the writer: `box_record`, `tool_entry`, `server_entry`, `manifest_document`, `dump_manifest`
  (generator/build.py and tool_model.py build every entry through them);
- the validating reader: `read_manifest(out_dir)` gives a manifest the runtime can index without
  second-guessing, None when out/ has none, or a `UserError` naming the file, the bad field and
  the fix (an invalid, hand-edited or foreign manifest.json never reaches the runtime).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NotRequired, Required, TypedDict

from codemode_gen import MODULE_PREFIX, SPEC_VERSION, __version__
from codemode_gen.errors import UserError
from codemode_gen.generator.unwrap import Box, BoxMarker, UnwrapMode
from codemode_gen.jsonio import dumps_stable, read_json

__all__ = [
    "GENERATOR_NAME",
    "MANIFEST_FILE",
    "SERVERS_DIR",
    "AgentRendering",
    "BoxRecord",
    "GeneratorInfo",
    "Manifest",
    "NamedType",
    "OutputRecord",
    "ServerEntry",
    "ToolEntry",
    "ToolRendering",
    "TypesRecord",
    "box_record",
    "dump_manifest",
    "generator_info",
    "manifest_document",
    "manifest_path",
    "module_file",
    "module_file_of",
    "module_specifier",
    "read_manifest",
    "server_entry",
    "tool_entry",
    "types_file",
    "written_by_codemode_gen",
]

GENERATOR_NAME = "codemode-gen"
MANIFEST_FILE = "manifest.json"
# out/'s declarations of every module (written by generator/build.py); named here, where readers
# of out/ that never build (the runtime's skills) find it without importing the generator.
CODEMODE_DTS = "codemode.d.ts"
SERVERS_DIR = "servers"
# What to do about a manifest the runtime cannot use.
REGENERATE_HINT = (
    "regenerate it with `codemode-gen generate` (or pass the --out folder generate writes)"
)


# --------------------------------------------------------------------------- paths


def module_specifier(server_id: str) -> str:
    """What a script imports: `@codemode/servers/<server id>`."""
    return MODULE_PREFIX + server_id


def module_file(server_id: str) -> str:
    """The ES module's path relative to out/."""
    return f"{SERVERS_DIR}/{server_id}.js"


def types_file(server_id: str) -> str:
    """The declarations' path relative to out/."""
    return f"{SERVERS_DIR}/{server_id}.d.ts"


def module_file_of(entry: ServerEntry) -> str:
    """The module path a server entry names (out/-relative), its default when it names none."""
    return entry.get("module") or module_file(entry["serverId"])


def manifest_path(out_dir: Path) -> Path:
    return out_dir / MANIFEST_FILE


# --------------------------------------------------------------------------- records


class GeneratorInfo(TypedDict):
    name: str
    version: str


class BoxRecord(TypedDict):
    """`output.box`: the declared outputSchema boxes the value (see "Boxed results")."""

    field: str
    marker: BoxMarker
    unboxed: bool


class OutputRecord(TypedDict):
    """`output`: where a tool's output type came from."""

    source: Literal["declared", "inferred", "none"]
    declared: dict[str, Any] | None
    inferred: dict[str, Any] | None
    samples: int  # non-isError recorded calls
    liveSamples: NotRequired[int]  # ... of them recorded by a live session (`--record`), when any
    jsonText: bool
    optional: list[str]
    drift: list[str]
    box: NotRequired[BoxRecord]
    format: NotRequired[Literal["json", "python", "csv", "markdown"]]  # what a text result holds


class TypesRecord(TypedDict, total=False):
    """`types`: the TypeScript names the committed .d.ts exports for a tool."""

    input: str  # only when the input type is recursive (else it is written in the signature)
    output: str  # only when there is an output schema
    json: str  # the parsed shape of a JSON text result


class ToolRendering(TypedDict, total=False):
    """`agent`: one tool's parts of the serve prompt's `declare module` block (generator/agent.py)."""

    summary: str  # the description's first sentence (and how to parse JSON text), one line
    tags: list[str]  # `@readOnly`, `@inferred`, … each on one line
    signature: Required[str]  # `function f(input: …): Promise<…>;` without field notes
    noted: str  # the same with a note per input field, when some field has one (may span lines)
    example: str  # `// e.g. f({…}) → …`: one recorded call (generator/examples.py), one line
    types: list[str]  # the server's named types (`AgentRendering.types`) it uses


class ToolEntry(TypedDict, total=False):
    toolName: Required[str]
    exportName: Required[str]
    description: str
    title: str  # not written by generate; read when present (MCP `title`)
    annotations: dict[str, Any]
    inputSchema: dict[str, Any]
    outputSchema: dict[str, Any]  # effective (merged) schema: what the script receives
    output: OutputRecord
    types: TypesRecord
    declaration: str  # the compact agent rendering of this one tool, self-contained
    agent: ToolRendering


class NamedType(TypedDict):
    name: str
    text: str  # `type Name = …;`


class AgentRendering(TypedDict):
    types: list[NamedType]  # the named types of the server's signatures, first-use order


class ServerEntry(TypedDict, total=False):
    serverId: Required[str]  # §5.0.1 module path
    configId: str  # the .mcp.json key, the fixtures folder name
    serverName: str
    version: str
    description: str  # the server's instructions
    capabilities: list[str]
    unwrap: UnwrapMode
    unbox: bool  # only when the server unboxes
    module: str  # out/-relative path of the ES module
    types: str  # out/-relative path of the .d.ts
    tools: Required[list[ToolEntry]]
    agent: AgentRendering


class Manifest(TypedDict):
    generator: GeneratorInfo
    specVersion: str
    fixturesHash: str
    sources: dict[str, str]
    servers: list[ServerEntry]


# --------------------------------------------------------------------------- writer


def box_record(box: Box, *, unboxed: bool) -> BoxRecord:
    return {"field": box.field, "marker": box.marker, "unboxed": unboxed}


def tool_entry(
    *,
    tool_name: str,
    export_name: str,
    input_schema: dict[str, Any],
    output: OutputRecord,
    types: TypesRecord,
    description: str | None = None,
    annotations: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    declaration: str | None = None,
) -> ToolEntry:
    """One tool's entry; absent optional values are left out (never null)."""
    entry: ToolEntry = {
        "toolName": tool_name,
        "exportName": export_name,
        "inputSchema": input_schema,
        "output": output,
        "types": types,
    }
    if description is not None:
        entry["description"] = description
    if annotations is not None:
        entry["annotations"] = annotations
    if output_schema is not None:
        entry["outputSchema"] = output_schema
    if declaration is not None:
        entry["declaration"] = declaration
    return entry


def server_entry(
    *,
    server_id: str,
    config_id: str,
    server_name: str,
    capabilities: list[str],
    unwrap: UnwrapMode,
    unbox: bool,
    tools: list[ToolEntry],
    agent: AgentRendering,
    version: str | None = None,
    description: str | None = None,
) -> ServerEntry:
    """One server's entry, with the paths of its generated files."""
    entry: ServerEntry = {
        "serverId": server_id,
        "configId": config_id,
        "serverName": server_name,
        "capabilities": capabilities,
        "unwrap": unwrap,
        "module": module_file(server_id),
        "types": types_file(server_id),
        "tools": tools,
        "agent": agent,
    }
    if unbox:
        entry["unbox"] = True
    if version is not None:
        entry["version"] = version
    if description is not None:
        entry["description"] = description
    return entry


def generator_info() -> GeneratorInfo:
    """Who wrote out/: also each generated file's header."""
    return {"name": GENERATOR_NAME, "version": __version__}


def manifest_document(
    *, fixtures_hash: str, sources: Mapping[str, str], servers: Sequence[ServerEntry]
) -> Manifest:
    return {
        "generator": generator_info(),
        "specVersion": SPEC_VERSION,
        "fixturesHash": fixtures_hash,
        "sources": dict(sorted(sources.items())),
        "servers": list(servers),
    }


def dump_manifest(manifest: Manifest) -> str:
    """The text of out/manifest.json: stable, so the same fixtures give the same bytes."""
    return dumps_stable(manifest)


# --------------------------------------------------------------------------- reader


def written_by_codemode_gen(out_dir: Path) -> bool:
    """Whether out_dir holds a manifest.json that generate wrote (valid or not otherwise)."""
    try:
        data = json.loads(manifest_path(out_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return _generator_name(data) == GENERATOR_NAME


def _generator_name(data: Any) -> Any:
    generator = data.get("generator") if isinstance(data, dict) else None
    return generator.get("name") if isinstance(generator, dict) else None


class _Invalid(Exception):
    def __init__(self, pointer: str, expected: str) -> None:
        super().__init__(f"{pointer or '/'} must be {expected}")


def _check(value: Any, pointer: str, kind: type, expected: str) -> None:
    if not isinstance(value, kind):
        raise _Invalid(pointer, expected)


def _optional(entry: Mapping[str, Any], key: str, pointer: str, kind: type, expected: str) -> None:
    if key in entry:
        _check(entry[key], f"{pointer}/{key}", kind, expected)


def _relative_file(value: Any, pointer: str) -> None:
    """A generated file's path: inside out/ (relative, no `..`), so reading it stays there."""
    _check(value, pointer, str, "a string")
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise _Invalid(pointer, "a path inside out/ (like servers/<id>.js)")


def _check_tool(tool: Any, pointer: str) -> None:
    _check(tool, pointer, dict, "an object")
    for key in ("toolName", "exportName"):
        _check(tool.get(key), f"{pointer}/{key}", str, "a string")
    for key in ("description", "title", "declaration"):
        _optional(tool, key, pointer, str, "a string")
    for key in ("annotations", "output", "types"):
        _optional(tool, key, pointer, dict, "an object")
    agent = tool.get("agent")
    if agent is not None:
        _check(agent, f"{pointer}/agent", dict, "an object")
        _check(agent.get("signature"), f"{pointer}/agent/signature", str, "a string")
        for key in ("summary", "noted", "example"):
            _optional(agent, key, f"{pointer}/agent", str, "a string")
        for key in ("tags", "types"):
            _strings(agent.get(key, []), f"{pointer}/agent/{key}")


def _strings(value: Any, pointer: str) -> None:
    _check(value, pointer, list, "a list of strings")
    for i, item in enumerate(value):
        _check(item, f"{pointer}/{i}", str, "a string")


def _check_server(server: Any, pointer: str) -> None:
    _check(server, pointer, dict, "an object")
    server_id = server.get("serverId")
    _check(server_id, f"{pointer}/serverId", str, "a string")
    if not server_id:
        raise _Invalid(f"{pointer}/serverId", "a non-empty string")
    for key in ("configId", "serverName", "version", "description"):
        _optional(server, key, pointer, str, "a string")
    _optional(server, "unbox", pointer, bool, "true or false")
    if "unwrap" in server and server["unwrap"] not in ("spec", "json"):
        raise _Invalid(f"{pointer}/unwrap", '"spec" or "json"')
    capabilities = server.get("capabilities", [])
    _check(capabilities, f"{pointer}/capabilities", list, "a list of strings")
    for i, capability in enumerate(capabilities):
        _check(capability, f"{pointer}/capabilities/{i}", str, "a string")
    for key in ("module", "types"):
        if key in server:
            _relative_file(server[key], f"{pointer}/{key}")
    agent = server.get("agent")
    if agent is not None:
        _check(agent, f"{pointer}/agent", dict, "an object")
        types = agent.get("types", [])
        _check(types, f"{pointer}/agent/types", list, "a list of named types")
        for i, named in enumerate(types):
            _check(named, f"{pointer}/agent/types/{i}", dict, "an object")
            for key in ("name", "text"):
                _check(named.get(key), f"{pointer}/agent/types/{i}/{key}", str, "a string")
    tools = server.get("tools")
    _check(tools, f"{pointer}/tools", list, "a list of tool entries")
    for i, tool in enumerate(tools):
        _check_tool(tool, f"{pointer}/tools/{i}")


def _validate(data: Any) -> Manifest:
    """`data` as a Manifest, or _Invalid naming the first field that is wrong."""
    _check(data, "", dict, "an object")
    servers = data.get("servers")
    _check(servers, "/servers", list, "a list of server entries")
    seen: set[str] = set()
    for i, server in enumerate(servers):
        _check_server(server, f"/servers/{i}")
        if server["serverId"] in seen:
            raise _Invalid(
                f"/servers/{i}/serverId", f"unique ({server['serverId']!r} is listed twice)"
            )
        seen.add(server["serverId"])
    manifest: Manifest = data
    return manifest


def read_manifest(out_dir: Path) -> Manifest | None:
    """out/manifest.json, validated; None when out/ has none (not generated yet).

    A file that is not JSON, was not written by codemode-gen (no `"generator": {"name":
    "codemode-gen"}`) or has a field the runtime cannot use is a UserError naming the file, the
    field and the fix."""
    path = manifest_path(out_dir)
    if not path.is_file():
        return None
    try:
        data = read_json(path, what="generated manifest")
    except UserError as exc:
        raise UserError(exc.message, hint=REGENERATE_HINT) from None
    if _generator_name(data) != GENERATOR_NAME:
        raise UserError(
            f'{path}: not a codemode-gen manifest (it has no "generator": {{"name": "{GENERATOR_NAME}"}};'
            " another tool's file, or not a manifest at all)",
            hint=REGENERATE_HINT,
        )
    try:
        return _validate(data)
    except _Invalid as exc:
        raise UserError(
            f"{path}: not a valid codemode-gen manifest: {exc}", hint=REGENERATE_HINT
        ) from None
