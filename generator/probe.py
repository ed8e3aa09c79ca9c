"""Auto-probes: which read-only tools `record` may call unasked, and with what input.

Only tools that declare `readOnlyHint: true` are ever probed: with `{}` when nothing is required
(`probe_input`), otherwise with every required argument filled (`fill_input`) from the tool's own
schema (`examples`, `default`, `const`, the first of an `enum`) or from what other tools of the
server were called with and returned (a `repo_path` another tool took, an `id` a list returned),
so that a chain such as list_notes → get_note is probed. Kept apart from the recording loop
(generator/record.py) because it is a pure, deterministic planner: the same tools and sources
give the same input, which tests and bench/coverage.py check without a server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from codemode_gen.generator.output_schema import schema_mismatches
from codemode_gen.generator.untrusted import json_problem
from codemode_gen.generator.unwrap import parse_json_text

__all__ = ["MAX_FILL_DEPTH", "MAX_FILL_NODES", "REDACTION_MARK", "fill_input", "probe_input"]

# Values (nodes) of one recorded input or result searched for argument values: a huge result
# cannot make planning slow; the rest of it is not searched.
MAX_FILL_NODES = 20_000
# Deepest level of a result searched for argument values.
MAX_FILL_DEPTH = 8
# How a redacted value starts (generator/redact.py `marker`): never sent as a probe argument.
REDACTION_MARK = "<redacted:"


def probe_input(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{}` if the tool may be called unasked (readOnlyHint and no required args), else None."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict) or annotations.get("readOnlyHint") is not True:
        return None
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None  # cannot tell what it requires: do not guess
    required = schema.get("required", [])
    if required not in (None, []) and required != ():
        return None
    return {}


def _key_name(name: str) -> str:
    """`repo_path`, `repoPath` and `RepoPath` are one name."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _schema_value(prop: Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, a value the property's own schema offers), first of: `examples`, `default`,
    `const`, the first `enum` value."""
    examples = prop.get("examples")
    if isinstance(examples, list) and examples:
        return True, examples[0]
    for key in ("default", "const"):
        if key in prop:
            return True, prop[key]
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return True, enum[0]
    return False, None


def _found_values(name: str, sources: Sequence[tuple[str, Any, Any]], tool_name: str) -> list[Any]:
    """Values for argument `name`, in a fixed order: what another tool was called with under
    that name, then what another tool returned under that name, or as `id` when the argument
    is `<thing>Id`/`<thing>_id` and the tool that returned it names the thing (`noteId` from
    `list_notes`). Results are searched in JSON text too (a string holding JSON)."""
    wanted = _key_name(name)
    thing = wanted[:-2] if wanted.endswith("id") and len(wanted) > 2 else None
    from_inputs: list[Any] = []
    from_results: list[Any] = []
    for source, args, value in sources:
        if source == tool_name:
            continue
        if isinstance(args, dict):
            from_inputs += [
                v for k, v in args.items() if isinstance(k, str) and _key_name(k) == wanted
            ]
        owner = _key_name(source)
        stack: list[tuple[Any, int]] = [(value, 0)]
        budget = MAX_FILL_NODES
        while stack and budget > 0:
            node, depth = stack.pop(0)
            budget -= 1
            if isinstance(node, str) and depth == 0 and node[:1] in "[{":
                ok, parsed = parse_json_text(node)
                if ok:
                    stack.append((parsed, 1))
            elif isinstance(node, dict) and depth < MAX_FILL_DEPTH:
                for k, v in node.items():
                    key = _key_name(k) if isinstance(k, str) else ""
                    if key == wanted or (thing and key == "id" and thing in owner):
                        from_results.append(v)
                    stack.append((v, depth + 1))
            elif isinstance(node, list) and depth < MAX_FILL_DEPTH:
                stack.extend((v, depth + 1) for v in node)
    return from_inputs + from_results


def fill_input(
    tool: Mapping[str, Any], sources: Sequence[tuple[str, Any, Any]]
) -> dict[str, Any] | None:
    """An input for a read-only tool's probe with every required argument filled (module
    docstring), or None: not read-only, nothing required (the `{}` probe's case), an argument
    nothing fills, or an input its inputSchema rejects. `sources`: (tool name, input, the
    unwrapped result) of the server's successful calls, in a fixed order. Deterministic: the
    same tools and sources give the same input."""
    annotations = tool.get("annotations")
    schema = tool.get("inputSchema")
    if (
        not isinstance(annotations, dict)
        or annotations.get("readOnlyHint") is not True
        or not isinstance(schema, dict)
    ):
        return None
    required = schema.get("required")
    props = schema.get("properties")
    if not isinstance(required, list) or not required or not isinstance(props, dict):
        return None
    filled: dict[str, Any] = {}
    for name in required:
        prop = props.get(name) if isinstance(name, str) else None
        if not isinstance(prop, dict):
            return None
        found, value = _schema_value(prop)
        candidates = [value] if found else []
        candidates += _found_values(name, sources, str(tool.get("name")))
        for candidate in candidates:
            if REDACTION_MARK in json.dumps(candidate, default=str):
                continue  # a recorded secret's placeholder is no value to send
            if json_problem(candidate) is None and not schema_mismatches(prop, candidate)[0]:
                filled[name] = candidate
                break
        else:
            return None
    mismatches, unusable = schema_mismatches(schema, filled)
    return filled if not mismatches and unusable is None else None
