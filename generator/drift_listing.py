"""Listing drift: the initialize result and the tools/list compared with the fixtures.

One stage of `record --check` (drift.py). A tool added or removed, or changed in a field
`generate` reads (COMPARED_FIELDS), and the server's `instructions`, compared as canonical JSON
(key order and `1` vs `1.0` do not matter) and reported as JSON pointers with old -> new, or
for text around its first difference. Kept apart from result drift (drift_results.py): this
stage needs no call, only the two listings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from codemode_gen.generator.drift_findings import (
    ABSENT,
    MAX_VALUE_CHARS,
    Finding,
    FindingKind,
    short_json,
)
from codemode_gen.generator.untrusted import shown
from codemode_gen.jsonio import canonical_json as canonical
from codemode_gen.jsonio import pointer_token

__all__ = ["COMPARED_FIELDS", "MAX_DIFF_LINES", "compare_server", "compare_tools", "json_diff"]

# The tool fields `generate` reads, in report order, and the finding kind of each.
COMPARED_FIELDS: tuple[tuple[str, FindingKind], ...] = (
    ("description", "description"),
    ("title", "title"),
    ("annotations", "annotations"),
    ("inputSchema", "input-schema"),
    ("outputSchema", "output-schema"),
)
# Differences listed per changed field (one changed schema can differ in hundreds of places);
# the rest are counted in one "... more" line.
MAX_DIFF_LINES = 8
# Characters of unchanged text shown before the first difference of a changed description.
TEXT_CONTEXT_CHARS = 20


def json_diff(old: Any, new: Any, limit: int = MAX_DIFF_LINES) -> list[str]:
    """Where two JSON values differ, as `<pointer>: <old> -> <new>` lines (added/removed keys
    say so), in key order; at most `limit` lines plus one counting the rest."""
    lines: list[str] = []
    count = [0]

    def emit(text: str) -> None:
        count[0] += 1
        if len(lines) < limit:
            lines.append(text)

    def walk(a: Any, b: Any, ptr: str) -> None:
        if canonical(a) == canonical(b):
            return
        where = shown(ptr or "/")
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                sub = f"{ptr}/{pointer_token(key)}"
                if key not in b:
                    emit(f"{shown(sub)}: removed (was {short_json(a[key])})")
                elif key not in a:
                    emit(f"{shown(sub)}: added {short_json(b[key])}")
                else:
                    walk(a[key], b[key], sub)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for index, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{ptr}/{index}")
        else:
            emit(f"{where}: {short_json(a)} -> {short_json(b)}")

    walk(old, new, "")
    if count[0] > len(lines):
        lines.append(f"... and {count[0] - len(lines)} more differences")
    return lines


def _text_change(old: Any, new: Any) -> str:
    """`"old" -> "new"`, both cut around their first difference so a long text shows it."""
    if not isinstance(old, str) or not isinstance(new, str):
        return f"{short_json(old)} -> {short_json(new)}"
    same = 0
    for a, b in zip(old, new, strict=False):
        if a != b:
            break
        same += 1
    start = max(0, same - TEXT_CONTEXT_CHARS)

    def part(text: str) -> str:
        piece = text[start : start + MAX_VALUE_CHARS]
        quoted = shown(json.dumps(piece, ensure_ascii=False), MAX_VALUE_CHARS + 10)
        return (
            ("…" if start else "") + quoted + ("…" if start + MAX_VALUE_CHARS < len(text) else "")
        )

    return f"{part(old)} -> {part(new)}"


def compare_server(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[Finding]:
    """Server-level drift: the initialize result's `instructions` (serverInfo's version and
    capabilities change with every upgrade and say nothing about the tools: not compared)."""
    old, new = recorded.get("instructions", ABSENT), live.get("instructions", ABSENT)
    if canonical(None if old is ABSENT else old) == canonical(None if new is ABSENT else new):
        return []
    return [Finding(None, "instructions", f"instructions changed: {_text_change(old, new)}")]


def compare_tools(
    recorded: Sequence[Mapping[str, Any]], live: Sequence[Mapping[str, Any]]
) -> list[Finding]:
    """Tools added, removed, or changed in a field `generate` reads; sorted by tool name."""
    old = {t["name"]: t for t in recorded if isinstance(t.get("name"), str)}
    new = {t["name"]: t for t in live if isinstance(t.get("name"), str)}
    findings: list[Finding] = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            findings.append(Finding(name, "tool-added", "tool added (not in the fixtures)"))
            continue
        if name not in new:
            findings.append(
                Finding(name, "tool-removed", "tool removed (the server no longer lists it)")
            )
            continue
        for key, kind in COMPARED_FIELDS:
            a, b = old[name].get(key, ABSENT), new[name].get(key, ABSENT)
            if canonical(None if a is ABSENT else a) == canonical(None if b is ABSENT else b):
                continue  # absent and null mean the same to `generate`
            if kind in ("description", "title") or a is ABSENT or b is ABSENT:
                findings.append(Finding(name, kind, f"{key} changed: {_text_change(a, b)}"))
                continue
            findings.extend(
                Finding(name, kind, f"{key} changed at {line}") for line in json_diff(a, b)
            )
    return findings
