"""One tool of a server -> its model: types, doc comment and manifest entry.

`generate`'s per-tool step (generator/build.py runs it for every tool of a server, then
builds the module around them). It translates the tool's input and output schemas into the
module's shared name scope (`ModuleScope`, which reserves every tool's root names first), and
writes the one doc comment a reader needs — title, description, tags, where the output type
came from (`_provenance_lines`: only the surprising cases), a recorded example — and the
manifest entry the runtime reads. Kept apart from the server-level assembly because a tool's
model depends only on the tool, its output model and its recorded calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codemode_gen.generator import manifest as mf
from codemode_gen.generator.agent import annotation_tags, box_tag
from codemode_gen.generator.examples import (
    Example,
    TextFormat,
    choose_example,
    example_redactor,
    format_phrase,
    text_format,
)
from codemode_gen.generator.fixtures import LIVE_FIELD
from codemode_gen.generator.infer import unwrapped_samples
from codemode_gen.generator.names import is_identifier
from codemode_gen.generator.output_schema import OutputModel
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.typescript import NameScope, TypeDecl, translate
from codemode_gen.generator.typescript.ast import Ref, walk
from codemode_gen.generator.unwrap import UnwrapMode

__all__ = [
    "BOX_MARKER_TEXT",
    "EMPTY_INPUT_SCHEMA",
    "MAX_DRIFT_IN_DOC",
    "MAX_OPTIONAL_IN_DOC",
    "ModuleScope",
    "ToolModel",
    "build_tool",
]

# §5.3.1: an absent or empty inputSchema means "no arguments or {}".
EMPTY_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
# Drift findings quoted in one tool's doc comment (the manifest and report carry all of them);
# bounds the agent-context cost of a server that disagrees with its schema everywhere.
MAX_DRIFT_IN_DOC = 3
# Optional field paths named in one tool's doc comment (bounds comment length).
MAX_OPTIONAL_IN_DOC = 12
# Characters the §6.1 mapping plainly turns into `_` (no "MCP tool name" line for those alone).
_SEPARATORS = re.compile(r"[-.]")


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


class ModuleScope(NameScope):
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


# How the doc comment names each box marker (generator/unwrap.py, read_box).
BOX_MARKER_TEXT = {
    "x-dedalus-box": "x-dedalus-box",
    "x-fastmcp-wrap-result": "x-fastmcp-wrap-result",
    "mcp-sdk": "FastMCP's result wrapper",
}


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


def _provenance_lines(
    out: OutputModel, json_type: str | None, fmt: TextFormat | None = None
) -> list[str]:
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
        where = (
            f".{field}" if is_identifier(field) else f"[{json.dumps(field, ensure_ascii=False)}]"
        )
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


def build_tool(
    server_id: str,
    tool: dict[str, Any],
    export_name: str,
    names: dict[str, str],
    scope: ModuleScope,
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
        schema: Any,
        name: str,
        doc: tuple[str, ...],
        *,
        closed: bool = False,
        derived: tuple[str, ...] = (),
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
        calls,
        mode,
        show_input=not _input_optional(input_schema),
        redactor=redactor or example_redactor(),
        box=out.box if out.unboxed else None,
    )
    provenance = _provenance_lines(out, json_type, fmt)
    output_doc = (f"A string holding JSON of type {json_type}.",) if json_type else ()
    # No schema, no sample: `Promise<unknown>` says it all; a named alias of unknown would not.
    output_type = (
        # An unboxed value's schema is the box's field: a title that only respells the field
        # (pydantic's "Result") says nothing.
        emit(
            out.schema,
            names["output"],
            output_doc,
            derived=(out.box.field,) if out.box and out.unboxed else (),
        )
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
        doc.append(
            f"Example (a recorded call): await {example.call(export_name)} → {example.result}"
        )

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
    live = sum(
        1 for s in unwrapped_samples(calls, mode) if calls[s.line - 1].get(LIVE_FIELD) is True
    )
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
