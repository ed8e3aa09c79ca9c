"""The `record --samples` file: the calls a user asks `record` to make, read and checked.

A samples file is a JSON list or JSONL of `{"server", "tool", "input"}`; each item is parsed by
`codemode_toml.parse_sample`, as `[[samples]]` in codemode.toml are, so both sources give the same
`Sample`. Kept apart from the recording loop because reading it is the CLI's first step and
must fail with a clear UserError (missing, too large, not JSON) before any server is started.
"""

from __future__ import annotations

import json
from pathlib import Path

from codemode_gen.codemode_toml import parse_sample
from codemode_gen.config import Sample
from codemode_gen.errors import UserError
from codemode_gen.jsonio import iter_jsonl

__all__ = ["MAX_SAMPLES_FILE_BYTES", "load_samples_file"]

# Bounds a --samples file read fully into memory (a wrong path to a huge log file).
MAX_SAMPLES_FILE_BYTES = 50 * 1024 * 1024


def load_samples_file(path: Path) -> list[Sample]:
    """A JSON list (or JSONL, one object a line) of {"server", "tool", "input"}."""
    try:
        if path.stat().st_size > MAX_SAMPLES_FILE_BYTES:
            raise UserError(f"{path}: samples file is larger than {MAX_SAMPLES_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{path}: samples file not found", hint="check the --samples path"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read samples file: {exc}") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
        lines = True
    else:
        lines = False
    if not lines:
        if isinstance(whole, list):
            return [parse_sample(item, f"{path}: [{i}]") for i, item in enumerate(whole)]
        if isinstance(whole, dict):  # JSONL with a single line
            return [parse_sample(whole, f"{path}:1")]
        raise UserError(
            f"{path}: expected a JSON list of samples or JSONL (one sample object a line)",
            hint='for example [{"server": "notes", "tool": "search_notes", "input": {"query": "milk"}}]',
        )
    hint = "a samples file is one JSON list, or one JSON object per line (JSONL)"
    return [
        parse_sample(item, f"{path}:{lineno}")
        for lineno, item in iter_jsonl(text, path, what="samples file", hint=hint)
    ]
