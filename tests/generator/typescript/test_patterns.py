"""generator/typescript/patterns.py: server-written `patternProperties` cannot hang translation (§11)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codemode_gen.generator.typescript import NameScope, translate
from codemode_gen.generator.typescript.patterns import matches_every_name
from tests.conftest import PROMPT_S

CATASTROPHIC = ["^(a|a)*$", "^(a|aa)*$", "^(a+)+$", "^([a-z]+)*$", "^(a|a?)+$", "^(\\w+\\s?)*$"]


def test_catastrophic_patterns_cannot_hang_translation() -> None:
    """Many catastrophic patterns times many names: bounded by the per-match timeout, the
    per-pattern give-up and the translation's regex budget (generous bound: no tight timing)."""
    import time

    names = {"a" * n + "!": {"type": "string"} for n in range(20, 60)}
    schema = {
        "type": "object",
        "properties": names,
        "required": ["a" * 70 + "!"],
        "patternProperties": {f"{p}|x{i}": {"type": "integer"} for i, p in enumerate(CATASTROPHIC)},
        "additionalProperties": False,
    }
    started = time.monotonic()
    result = translate(schema, "Root", NameScope())
    assert time.monotonic() - started < PROMPT_S  # the hang guarded against lasts hours
    assert any("could not be evaluated" in w or "budget" in w for w in result.warnings)
    text = result.decls[0].text
    assert '"' + "a" * 20 + '!"?: string;' in text  # declared: its own type, wider than the schema
    # required, forbidden unless a pattern matches, and no pattern could be told: the union of
    # what the patterns allow (sound), never `never`
    assert '"' + "a" * 70 + '!": number;' in text


def test_matches_every_name_uses_the_bounded_matcher() -> None:
    assert matches_every_name("a*") and matches_every_name("(?:)")
    assert not matches_every_name("^a*$")  # anchored: not "every name"
    assert not matches_every_name("a+") and not matches_every_name("(?i)a*")  # not ECMA: unknown
    assert not matches_every_name("[")  # invalid: unknown, never "every name"


@pytest.mark.slow
def test_generate_finishes_on_a_catastrophic_pattern(tmp_path: Path) -> None:
    """End to end, in a process with a timeout: `generate` on fixtures whose tool declares
    `^(a|a)*$` next to 24- to 40-character property names (5.8 s for the first with `re`,
    4x more every 2 characters)."""
    import subprocess
    import time

    from codemode_gen.generator.fixtures import write_server_fixtures

    properties = {"a" * n + "!": {"type": "string"} for n in range(24, 41, 2)}
    tool = {
        "name": "hostile_tool",
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "patternProperties": {"^(a|a)*$": {"type": "integer"}},
        },
        "outputSchema": {
            "type": "object",
            "properties": properties,
            "patternProperties": {"^(b|b)*$": {"type": "integer"}},
        },
    }
    server = {"serverInfo": {"name": "h", "version": "1"}, "capabilities": {"tools": {}}}
    write_server_fixtures(tmp_path / "fixtures", "hostile", server, [tool], {})
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "codemode_gen", "generate"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert elapsed < PROMPT_S, (
        f"generate took {elapsed:.1f}s"
    )  # the hang guarded against lasts hours
    assert "could not be evaluated" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
