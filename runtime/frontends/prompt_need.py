"""Which tools' descriptions the `codemode.run` description shows first: `need`.

`need` ranks how little a tool's name and types say without its description (higher: show its
description first). Points, summed: 2 when every word of its name is generic (`run`, `query`,
`get_data`: GENERIC_WORDS); 3 when it returns `unknown`, 2 when `string` (only the description
says what the text holds); 1 per two optional input fields, at most 2; 1 per three words of its
summary that neither its name nor its input field names contain, at most 3. A tool with no
summary and no tags has no doc comment to show: 0. Ties keep catalog order. The layout
(runtime/frontends/prompt_layout.py) raises tools in this order; bench/prompt.py and the tests
read it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode_gen.runtime.host.discovery import stem, terms

__all__ = ["COMMON_WORDS", "GENERIC_WORDS", "need", "output_text"]

# `need`: words that name no particular thing. A tool named only by them (`run`, `query`,
# `get_data`) says nothing of what it does without its description.
GENERIC_WORDS = frozenset(
    map(
        stem,
        (
            "action",
            "api",
            "call",
            "command",
            "data",
            "do",
            "exec",
            "execute",
            "fetch",
            "get",
            "handle",
            "info",
            "invoke",
            "item",
            "list",
            "operation",
            "perform",
            "process",
            "query",
            "read",
            "request",
            "run",
            "send",
            "set",
            "tool",
            "update",
            "write",
        ),
    )
)
# `need`: summary words too common to say anything a name does not.
COMMON_WORDS = frozenset(
    map(
        stem,
        (
            "a",
            "all",
            "an",
            "and",
            "any",
            "are",
            "as",
            "at",
            "be",
            "by",
            "can",
            "for",
            "from",
            "given",
            "if",
            "in",
            "into",
            "is",
            "it",
            "its",
            "of",
            "on",
            "one",
            "or",
            "our",
            "that",
            "the",
            "this",
            "to",
            "use",
            "when",
            "which",
            "will",
            "with",
            "you",
            "your",
        ),
    )
)


def need(tool: Mapping[str, Any]) -> int:
    """How little a tool's name and types say without its doc comment (see the module docstring);
    `tool` is a manifest tool entry with its agent parts."""
    parts = tool.get("agent")
    if not isinstance(parts, Mapping) or not (parts.get("summary") or parts.get("tags")):
        return 0
    score = 0
    name_words = set(terms(str(tool.get("toolName", ""))))
    if name_words <= GENERIC_WORDS:
        score += 2
    score += {"unknown": 3, "string": 2}.get(output_text(tool), 0)
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    fields = [str(k) for k in properties] if isinstance(properties, Mapping) else []
    required = schema.get("required") if isinstance(schema, Mapping) else None
    required_names = {str(r) for r in required} if isinstance(required, list) else set()
    score += min(sum(1 for f in fields if f not in required_names) // 2, 2)
    known = name_words.union(*(terms(f) for f in fields))
    novel = set(terms(str(parts.get("summary", "")))) - known - COMMON_WORDS
    score += min(sum(1 for w in novel if not w.isdigit()) // 3, 3)
    return score


def output_text(tool: Mapping[str, Any]) -> str:
    """The result type its compact signature shows (`string`, `unknown`, `Note`, …)."""
    parts = tool.get("agent")
    signature = str(parts.get("signature", "")) if isinstance(parts, Mapping) else ""
    return signature.rpartition("): Promise<")[2].removesuffix(">;")
