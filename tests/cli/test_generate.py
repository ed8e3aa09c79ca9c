"""`codemode-gen generate`: writes out/, `--check` exit codes, settings, user errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from codemode_gen.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    captured = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_generate_writes_out_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, stdout, _ = run(["generate", "--fixtures", str(FIXTURES), "--out", str(out)], capsys)
    assert code == 0
    assert "wrote 9 files" in stdout
    assert "notes: 9 tools; output types: 3 declared, 5 inferred, 1 unknown" in stdout
    assert "notes.get_note: drift: /id: expected integer, got string (sample 4)" in stdout
    assert (out / "servers" / "notes.js").is_file() and (out / "codemode.d.ts").is_file()


def test_generate_reports_each_tools_output_type_and_samples_for_the_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    from codemode_gen.codemode_toml import parse_sample

    code, stdout, _ = run(
        ["generate", "--fixtures", str(FIXTURES), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 0
    assert "    declared: get_note, tasks.add, tasks.list\n" in stdout
    assert (
        "    inferred: export-csv (1 sample), render_chart (1 sample), search_notes (3 samples)"
        in stdout
    )
    assert "    unknown: flaky_sync\n" in stdout
    _, _, entries = stdout.partition("4 tool(s) have no output type")
    samples = tomllib.loads(entries.split("\n", 1)[1])["samples"]  # pasteable into codemode.toml
    assert [(s["server"], s["tool"]) for s in samples] == [
        ("notes", "flaky_sync"),
        ("Weird_Server", "a-b"),
        ("Weird_Server", "a.b"),
        ("Weird_Server", "ünïcödé tool"),
    ]
    for i, item in enumerate(samples):
        parse_sample(item, f"samples[{i}]")


def test_generate_reports_coverage_by_origin_learned_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """How many tools have an output type, and from where: a type inferred only from calls a
    live session recorded (`"live": true`, run/serve --record) is counted as learned."""
    import shutil

    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, fixtures)
    chart = fixtures / "notes" / "calls" / "render_chart.jsonl"
    chart.write_text(
        "".join(
            json.dumps({**json.loads(line), "live": True}) + "\n"
            for line in chart.read_text().splitlines()
        )
    )
    code, stdout, _ = run(
        ["generate", "--fixtures", str(fixtures), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 0
    total = "output types: 13 of 17 tools (76%): 4 declared, 8 inferred from samples, 1 learned in sessions (--record), 4 unknown"
    assert total in stdout
    assert "notes: 9 tools; output types: 3 declared, 4 inferred, 1 learned, 1 unknown" in stdout
    assert "    learned: render_chart (1 sample)\n" in stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (entry,) = [
        t for s in manifest["servers"] for t in s["tools"] if t["toolName"] == "render_chart"
    ]
    assert entry["output"]["liveSamples"] == entry["output"]["samples"] == 1


def test_same_fixtures_same_bytes_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert run(["generate", "--fixtures", str(FIXTURES), "--out", str(a)], capsys)[0] == 0
    assert run(["generate", "--fixtures", str(FIXTURES), "--out", str(b)], capsys)[0] == 0
    assert snapshot(a) == snapshot(b)
    assert run(["generate", "--fixtures", str(FIXTURES), "--out", str(a)], capsys)[0] == 0
    assert snapshot(a) == snapshot(b)


def test_check_fresh_is_0_and_stale_missing_extra_is_1_with_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    args = ["generate", "--fixtures", str(FIXTURES), "--out", str(out)]
    run(args, capsys)
    before = snapshot(out)
    code, stdout, _ = run([*args, "--check"], capsys)
    assert (code, "up to date" in stdout) == (0, True)

    (out / "servers" / "notes.d.ts").write_text("// hand-edited\n")
    (out / "tsconfig.json").unlink()
    (out / "servers" / "old.js").write_text("export {};\n")
    edited = snapshot(out)
    code, _, stderr = run([*args, "--check"], capsys)
    assert code == 1
    assert "stale: servers/notes.d.ts" in stderr
    assert "missing: tsconfig.json" in stderr
    assert "extra: servers/old.js" in stderr
    assert "hint: run `codemode-gen generate`" in stderr
    assert snapshot(out) == edited  # --check writes nothing

    assert run(args, capsys)[0] == 0
    assert snapshot(out) == before


def test_check_notices_changed_fixtures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, fixtures)
    out = tmp_path / "out"
    args = ["generate", "--fixtures", str(fixtures), "--out", str(out)]
    run(args, capsys)
    calls = fixtures / "notes" / "calls" / "summary.jsonl"
    calls.write_text(calls.read_text().splitlines()[0] + "\n")
    code, _, stderr = run([*args, "--check"], capsys)
    assert code == 1
    # the fixture hash is in every header, and the sample count changed in notes.d.ts
    assert "stale: servers/notes.d.ts" in stderr and "stale: manifest.json" in stderr


def test_failed_generate_leaves_out_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixtures = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, fixtures)
    out = tmp_path / "out"
    args = ["generate", "--fixtures", str(fixtures), "--out", str(out)]
    run(args, capsys)
    before = snapshot(out)
    (fixtures / "notes" / "tools.json").write_text('[{"name": "x",}]')
    code, _, stderr = run(args, capsys)
    assert code == 2
    assert "tools.json" in stderr and "invalid JSON" in stderr
    assert "Traceback" not in stderr
    assert snapshot(out) == before


def test_missing_fixtures_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, stderr = run(
        ["generate", "--fixtures", str(tmp_path / "nope"), "--out", str(tmp_path / "out")], capsys
    )
    assert code == 2
    assert "fixtures folder not found" in stderr and "hint:" in stderr
    assert not (tmp_path / "out").exists()


def test_settings_unwrap_json_and_default_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(FIXTURES, tmp_path / "recordings")
    (tmp_path / "codemode.toml").write_text(
        'fixtures = "recordings"\nout = "generated"\n[servers.notes]\nunwrap = "json"\n'
    )
    monkeypatch.chdir(tmp_path)
    code, stdout, _ = run(["generate"], capsys)
    assert code == 0, stdout
    dts = (tmp_path / "generated" / "servers" / "notes.d.ts").read_text()
    assert "SearchNotesJson" not in dts
    assert run(["generate", "--check"], capsys)[0] == 0
    assert run(["generate", "--check", "--settings", str(tmp_path / "other.toml")], capsys)[0] == 2


def test_settings_are_the_ones_beside_config_from_any_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lookup rule of every command: codemode.toml beside --config, else defaults rooted at
    # the config's folder; never the working directory's.
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    shutil.copytree(FIXTURES, project / "recordings")
    (project / ".mcp.json").write_text('{"mcpServers": {}}')
    (project / "codemode.toml").write_text('fixtures = "recordings"\nout = "generated"\n')
    elsewhere.mkdir()
    (elsewhere / "codemode.toml").write_text("not = = toml")
    monkeypatch.chdir(elsewhere)
    code, stdout, stderr = run(["generate", "--config", str(project / ".mcp.json")], capsys)
    assert code == 0, stdout + stderr
    assert (project / "generated" / "manifest.json").is_file()
    # Without a codemode.toml: fixtures/ and out/ beside the config.
    (project / "codemode.toml").unlink()
    (project / "recordings").rename(project / "fixtures")
    code, stdout, stderr = run(["generate", "--config", str(project / ".mcp.json")], capsys)
    assert code == 0, stdout + stderr
    assert (project / "out" / "manifest.json").is_file()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["codemode.toml"]


def test_check_hints_at_python_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["generate", "--fixtures", str(FIXTURES), "--out", str(out)]
    assert run([*args, "--python"], capsys)[0] == 0
    assert run([*args, "--python", "--check"], capsys)[0] == 0
    code, _, stderr = run([*args, "--check"], capsys)
    assert code == 1
    assert "extra: python/codemode_models/notes.py" in stderr and "add --python" in stderr


@pytest.mark.slow
def test_output_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    """Set iteration order changes with PYTHONHASHSEED; generated bytes must not."""
    import os
    import subprocess
    import sys

    trees = []
    for seed in ("1", "2"):
        out = tmp_path / f"out{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-m", "codemode_gen", "generate", "--fixtures", str(FIXTURES), "--out", str(out), "--python"],
            check=True, env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        trees.append(snapshot(out))
    assert trees[0] == trees[1]
