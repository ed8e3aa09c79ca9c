"""Examples from the recordings, and what a string result's text is.

One stage of `generate` (pure, no I/O): a tool's recorded calls in, one short example out, and
for a tool that returns text, the format of that text. A model that reads
`read_query(input: { query: string }): Promise<string>` cannot know that the string is
`"[{'sku': 'PAP-A4-80', 'stock': 420}]"` (Python-literal text, which `JSON.parse` rejects); the
recording that would have told it is right there.

- **Choice** (`choose_example`): deterministic, from the calls file as committed: the first
  call (in line order) that succeeded (not `isError`), was not cut by `record` (`truncated`)
  and returned a value that is not empty (`""`, `[]`, `{}`, null); if every value is empty, the
  first call that succeeded. Its input is shown only when the tool cannot be called without one
  (it has required arguments, or its input is not an object).
- **Redaction**: recordings are redacted when written (generator/redact.py), but a fixture may
  be edited by hand or come from an older recorder, and out/ is committed too: the example is
  redacted again with the project's `redact` patterns, the well-known credential shapes of
  KNOWN_SECRET_PATTERNS, and the value of every field named like a credential
  (`CREDENTIAL_FIELD`: password, token, api_key, …).
- **Bounds**: the input is cut to MAX_EXAMPLE_INPUT_CHARS and the result to
  MAX_EXAMPLE_RESULT_CHARS characters (an ellipsis marks a cut); the compact line the prompt
  and discovery show is at most MAX_EXAMPLE_LINE_CHARS.
- **Text formats** (`text_format`): when every recorded value is a string, each non-empty one
  is classified, first match wins: JSON (an object or array: `infer` types it), Python literal
  (`ast.literal_eval` reads it and it is not JSON: single quotes, None/True/False, tuples),
  CSV (2+ lines, one delimiter out of `,` `;` tab, the same field count, 2 or more, on every
  line), Markdown (a heading, a table rule, a code fence, a link or bold text); else plain text.
  A format is named only when every sample has it; a text that is both JSON and a Python
  literal (`[]`, `[1, 2]`) agrees with either.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from codemode_gen.generator.names import is_identifier
from codemode_gen.generator.redact import Redactor, marker
from codemode_gen.generator.unwrap import (
    Box,
    UnwrapMode,
    parse_json_text,
    unbox_value,
    unwrap_result,
)

__all__ = [
    "CREDENTIAL_FIELD",
    "KNOWN_SECRET_PATTERNS",
    "MAX_EXAMPLE_INPUT_CHARS",
    "MAX_EXAMPLE_LINE_CHARS",
    "MAX_EXAMPLE_RESULT_CHARS",
    "MAX_PROMPT_EXAMPLE_CHARS",
    "Example",
    "TextFormat",
    "choose_example",
    "example_redactor",
    "format_phrase",
    "js_literal",
    "string_literal",
    "text_format",
]

# Longest recorded input shown in an example (agent context; the .d.ts shows it whole up to it).
MAX_EXAMPLE_INPUT_CHARS = 160
# Longest recorded result shown in an example: enough to see the shape of a text (its quotes,
# its first row), short enough to cost little on every request.
MAX_EXAMPLE_RESULT_CHARS = 160
# Longest one-line example (`// e.g. f({…}) → …`) in discovery's declaration; in the prompt,
# where it is paid on every turn, MAX_PROMPT_EXAMPLE_CHARS.
MAX_EXAMPLE_LINE_CHARS = 140
MAX_PROMPT_EXAMPLE_CHARS = 100
# Shortest cut of the result in a one-line example, however long the call before it is.
MIN_EXAMPLE_RESULT_CHARS = 24
# Text longer than this is not parsed to find its format (bounds `literal_eval` and csv time);
# its format is named from shorter samples, or not at all.
MAX_FORMAT_TEXT_CHARS = 200_000
# Deepest nesting `literal_eval` is asked to read (the parser recurses per level: a text of
# 100,000 brackets would end in RecursionError or worse).
MAX_LITERAL_NESTING = 64
# CSV: most lines read to decide (a 100,000-row export is not read to the end).
MAX_CSV_LINES = 200
# Well-known credential shapes, redacted in examples whatever the project's settings say.
KNOWN_SECRET_PATTERNS = (
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}",  # API keys: sk-…, sk-proj-…
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bglpat-[A-Za-z0-9_-]{16,}",  # GitLab
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bAIza[0-9A-Za-z_-]{30,}",  # Google API key
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWT
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\b(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}",
)
# Fields whose value is a credential by their name: an example shows `<redacted:password>`.
CREDENTIAL_FIELD = re.compile(
    r"(?i)^(?:.*[_-])?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|credentials?|auth(?:orization)?|cookie|session[_-]?id)$"
)
ELLIPSIS = "…"

TextFormat = Literal["json", "python", "csv", "markdown"]

_MARKDOWN = re.compile(
    r"^#{1,6} \S|^\|?\s*:?-{3,}:?\s*\||^```|\[[^\]\n]+\]\([^)\s]+\)|\*\*[^*\n]+\*\*", re.MULTILINE
)
_PY_WORDS = re.compile(r"\b(?:None|True|False)\b")


@dataclass(frozen=True)
class Example:
    """One recorded call, ready to show: its 1-based line, the input as a JS object literal
    (None: the tool has no required arguments), and the value the binding returned (cut)."""

    line: int
    input: str | None
    result: str

    def call(self, export_name: str) -> str:
        """`get_note({ id: 2 })`."""
        return f"{export_name}({self.input or ''})"

    def line_text(
        self, export_name: str, *, result: bool = True, limit: int = MAX_EXAMPLE_LINE_CHARS
    ) -> str:
        """The compact one-line example, at most `limit` characters: `// e.g. get_note({ id: 2 })
        → { id: 2, … }`; without the `result`, the call alone. A long input and a long result
        share the room, the result at least half of it (it is what the line is for)."""
        if not result:
            return _cut(f"// e.g. {self.call(export_name)}", limit)
        head = f"// e.g. {export_name}() → "
        room = max(limit - len(head), 2 * MIN_EXAMPLE_RESULT_CHARS)
        given = len(self.input or "")
        shown = min(len(self.result), max(room // 2, room - given))
        args = _cut(self.input, room - shown) if self.input else ""
        return f"// e.g. {export_name}({args}) → {_cut(self.result, shown)}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS


def _redacted_fields(value: Any, depth: int = 0) -> Any:
    """`value` with every credential-named field's value replaced (bounded depth: examples are
    cut afterwards, deeper parts are never shown)."""
    if depth > MAX_LITERAL_NESTING:
        return value
    if isinstance(value, dict):
        return {
            k: marker(k)
            if isinstance(k, str) and CREDENTIAL_FIELD.match(k) and v not in (None, "")
            else _redacted_fields(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redacted_fields(v, depth + 1) for v in value]
    return value


def js_literal(value: Any, limit: int) -> str:
    """`value` as a JS literal a model reads at a glance (identifier keys unquoted, a string
    in the quote that needs fewer escapes), cut to `limit` characters."""
    parts: list[str] = []
    used = [0]

    def emit(text: str) -> bool:
        parts.append(text)
        used[0] += len(text)
        return used[0] <= limit

    def walk(node: Any, depth: int) -> bool:
        if depth > MAX_LITERAL_NESTING:
            return emit(ELLIPSIS)
        if isinstance(node, dict):
            if not node:
                return emit("{}")
            if not emit("{ "):
                return False
            for i, (key, item) in enumerate(node.items()):
                name = key if is_identifier(key) else json.dumps(key, ensure_ascii=False)
                if (i and not emit(", ")) or not emit(f"{name}: ") or not walk(item, depth + 1):
                    return False
            return emit(" }")
        if isinstance(node, list):
            if not emit("["):
                return False
            for i, item in enumerate(node):
                if (i and not emit(", ")) or not walk(item, depth + 1):
                    return False
            return emit("]")
        if isinstance(node, str):
            return emit(string_literal(node))
        return emit(json.dumps(node, ensure_ascii=False))

    walk(value, 0)
    return _cut("".join(parts), limit)


def string_literal(text: str) -> str:
    """A JS string literal of `text`: double quotes, or single ones when that needs fewer
    escapes (JSON text: `'{"a": 1}'`); control characters and line breaks escaped."""
    double = json.dumps(text, ensure_ascii=False)
    if '"' in text and "'" not in text:
        return "'" + double[1:-1].replace('\\"', '"') + "'"
    return double


def text_format(values: Sequence[Any], *, json_text: bool = False) -> TextFormat | None:
    """The format every recorded string value has (module docstring), or None: plain text,
    values that are not all strings, formats that differ, or nothing to go by. A text that is
    both JSON and a Python literal (`[]`, `[1, 2]`) agrees with either."""
    if json_text:
        return "json"
    possible: set[TextFormat] | None = None
    for value in values:
        if not isinstance(value, str):
            return None
        if not value.strip() or len(value) > MAX_FORMAT_TEXT_CHARS:
            continue
        formats = _formats_of(value)
        possible = formats if possible is None else possible & formats
        if not possible:
            return None
    if not possible:
        return None
    return next(fmt for fmt in ("json", "python", "csv", "markdown") if fmt in possible)


def _formats_of(text: str) -> set[TextFormat]:
    stripped = text.strip()
    ok, parsed = parse_json_text(stripped)
    if ok:
        if not isinstance(parsed, dict | list):
            return set()
        return {"json", "python"} if _python_literal(stripped) else {"json"}
    if _python_literal(stripped):
        return {"python"}
    if _csv(stripped):
        return {"csv"}
    if _MARKDOWN.search(stripped):
        return {"markdown"}
    return set()


def _python_literal(text: str) -> bool:
    """Python's repr of a list/dict/tuple (or None), which JSON.parse rejects."""
    if text[0] not in "[({" and text != "None":
        return False
    depth = peak = 0
    for ch in text:  # bound the parser's recursion before calling it
        if ch in "[({":
            depth += 1
            peak = max(peak, depth)
        elif ch in "])}":
            depth -= 1
    if peak > MAX_LITERAL_NESTING:
        return False
    try:
        value = ast.literal_eval(text)
    except Exception:  # SyntaxError, ValueError, MemoryError, RecursionError: not a literal
        return False
    return value is None or isinstance(value, list | dict | tuple)


def _csv(text: str) -> bool:
    lines = [line for line in text.splitlines()[:MAX_CSV_LINES] if line.strip()]
    if len(lines) < 2:
        return False
    for delimiter in (",", "\t", ";"):
        if delimiter not in lines[0]:
            continue
        try:
            counts = {len(row) for row in csv.reader(lines, delimiter=delimiter)}
        except csv.Error:
            continue
        if len(counts) == 1 and counts.pop() >= 2:
            return True
    return False


# How doc comments name a text format other than JSON (JSON text has its own phrase, with the
# type to parse it as): the .d.ts's sentence, and the compact one of the prompt and discovery.
FORMAT_PHRASES: dict[str, tuple[str, str]] = {
    "python": (
        "Returns Python-literal text, not JSON (single quotes, None/True/False): JSON.parse fails on it.",
        "Returns Python-literal text, not JSON.",
    ),
    "csv": ("Returns CSV text: a header line, then one row a line.", "Returns CSV text."),
    "markdown": ("Returns Markdown text.", "Returns Markdown text."),
}


def format_phrase(fmt: TextFormat | None, *, terse: bool = False) -> str | None:
    """The sentence that names a text format other than JSON, or None."""
    phrases = FORMAT_PHRASES.get(fmt or "")
    return None if phrases is None else phrases[1 if terse else 0]


def choose_example(
    calls: Sequence[Mapping[str, Any]],
    mode: UnwrapMode,
    *,
    show_input: bool,
    redactor: Redactor,
    box: Box | None = None,
) -> Example | None:
    """The example of one tool (module docstring), or None when no call succeeded. `box`: the
    binding returns the box's field (`unbox = true`)."""
    first: Example | None = None
    for line, call in enumerate(calls, start=1):
        result = call.get("result")
        if (
            not isinstance(result, Mapping)
            or result.get("isError") is True
            or call.get("truncated") is not None
        ):
            continue
        if "content" not in result and "structuredContent" not in result:
            continue  # no answer kept (a learned tool's input-only line)
        value = unwrap_result(dict(result), mode)
        if box is not None:
            ok, inner = unbox_value(value, box)
            value = inner if ok else value
        example = Example(
            line,
            _shown_input(call.get("input"), redactor) if show_input else None,
            js_literal(_redacted(value, redactor), MAX_EXAMPLE_RESULT_CHARS),
        )
        if value not in ("", [], {}, None):
            return example
        first = first or example
    return first


def _shown_input(value: Any, redactor: Redactor) -> str | None:
    if value is None:
        return None
    return js_literal(_redacted(value, redactor), MAX_EXAMPLE_INPUT_CHARS)


def _redacted(value: Any, redactor: Redactor) -> Any:
    return redactor.value(_redacted_fields(value))


def example_redactor(patterns: Sequence[str] = ()) -> Redactor:
    """The redactor of examples: the project's `redact` patterns and KNOWN_SECRET_PATTERNS."""
    return Redactor(patterns=[*patterns, *KNOWN_SECRET_PATTERNS])
