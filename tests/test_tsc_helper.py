"""tests/tsc.py itself: batching maps diagnostics back, and CI never skips a missing tsc."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import tsc


def test_missing_tsc_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tsc, "TSC", tmp_path / "no-tsc")
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="npm ci"):
        tsc.require_tsc()


def test_missing_tsc_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tsc, "TSC", tmp_path / "no-tsc")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        tsc.require_tsc()


@pytest.mark.slow
def test_batch_maps_diagnostics_to_snippets_and_lines() -> None:
    result = tsc.check(
        {
            "ok": "type A = string;\nconst a: A = 'x';",
            "bad": "type A = string;\nconst a: A = 1;",
            "same-names-do-not-collide": "type A = number;\nconst a: A = 1;",
            "decl.d.ts": "export type B = { a: string };\nexport declare const b: B;",
        }
    )
    assert (
        result["ok"] == []
        and result["same-names-do-not-collide"] == []
        and result["decl.d.ts"] == []
    )
    assert [(d.line, d.code) for d in result["bad"]] == [(2, "TS2322")]


@pytest.mark.slow
def test_a_syntax_error_fails_the_whole_batch() -> None:
    """tsc stops type-checking every file once one has a syntax error: that must not pass."""
    with pytest.raises(AssertionError, match="syntax errors"):
        tsc.check({"bad": "const a: string = 1;", "broken": "type B = ;"})
