"""write_outputs / check_outputs: all-or-nothing out/ replacement and staleness detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode_gen.generator.build import Outputs, build_outputs
from codemode_gen.generator.emit import check_outputs, write_outputs
from codemode_gen.generator.fixtures import load_fixtures

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"


@pytest.fixture(scope="module")
def outputs() -> Outputs:
    return build_outputs(load_fixtures(FIXTURES))


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_write_then_check_is_clean(tmp_path: Path, outputs: Outputs) -> None:
    out = tmp_path / "out"
    assert write_outputs(out, outputs) == []
    assert snapshot(out) == {rel: text.encode() for rel, text in outputs.files.items()}
    assert check_outputs(out, outputs) == []
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left behind


def test_check_names_stale_missing_and_extra_files(tmp_path: Path, outputs: Outputs) -> None:
    out = tmp_path / "out"
    write_outputs(out, outputs)
    (out / "servers" / "notes.d.ts").write_text("// edited\n")
    (out / "manifest.json").unlink()
    (out / "servers" / "gone.js").write_text("export {};\n")
    (out / "README.md").write_text("mine\n")  # not owned by generate: never reported
    assert check_outputs(out, outputs) == [
        "missing: manifest.json",
        "stale: servers/notes.d.ts",
        "extra: servers/gone.js",
    ]
    assert check_outputs(tmp_path / "nowhere", outputs)[0] == "missing: codemode.d.ts"


def test_write_removes_stale_owned_files_and_keeps_user_files(
    tmp_path: Path, outputs: Outputs
) -> None:
    out = tmp_path / "out"
    write_outputs(out, outputs)
    (out / "servers" / "old-server.js").write_text("export {};\n")
    (out / "python").mkdir()
    (out / "python" / "old.py").write_text("x = 1\n")
    (out / "README.md").write_text("mine\n")
    (out / "scripts").mkdir()
    (out / "scripts" / "a.ts").write_text("export {};\n")
    removed = write_outputs(out, outputs)
    assert removed == ["python/old.py", "servers/old-server.js"]
    assert (out / "README.md").read_text() == "mine\n"
    assert (out / "scripts" / "a.ts").exists()
    assert check_outputs(out, outputs) == []


def test_failed_write_leaves_previous_out_intact(tmp_path: Path, outputs: Outputs) -> None:
    out = tmp_path / "out"
    write_outputs(out, outputs)
    (out / "README.md").write_text("mine\n")
    before = snapshot(out)
    # a path that escapes out/ is refused half-way through staging (files are written in order)
    broken = Outputs(files={**outputs.files, "zz/../../escape.txt": "x"}, manifest=outputs.manifest)
    with pytest.raises(ValueError, match="escapes out/"):
        write_outputs(out, broken)
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not (tmp_path / "escape.txt").exists()


def test_out_that_is_a_file_is_a_user_error(tmp_path: Path, outputs: Outputs) -> None:
    from codemode_gen.errors import UserError

    target = tmp_path / "out"
    target.write_text("not a folder")
    with pytest.raises(UserError, match="not a folder"):
        write_outputs(target, outputs)
    assert target.read_text() == "not a folder"


def test_refuses_to_replace_a_folder_it_did_not_write(
    tmp_path: Path, outputs: Outputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode_gen.errors import UserError

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "tsconfig.json").write_text("{}\n")
    (project / "src" / "main.ts").write_text("export {};\n")
    before = snapshot(project)
    monkeypatch.chdir(project)
    with pytest.raises(UserError, match="current folder"):
        write_outputs(Path("."), outputs)
    with pytest.raises(UserError, match="not written by codemode-gen"):
        write_outputs(Path("src"), outputs)
    assert snapshot(project) == before
    write_outputs(Path("empty"), outputs)  # new folder: fine
    (project / "empty2").mkdir()
    write_outputs(Path("empty2"), outputs)  # empty folder: fine
    write_outputs(Path("empty2"), outputs)  # our own output: fine
    assert check_outputs(project / "empty2", outputs) == []


# --------------------------------------------------------------------------- swap and recovery
# (one swap helper with rollback, codemode_gen/dirswap.py, shared with fixtures/: docs/DESIGN.md "Folder swaps")


def test_failed_final_rename_restores_out_and_leaves_nothing_hidden(
    tmp_path: Path, outputs: Outputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from codemode_gen import dirswap

    out = tmp_path / "out"
    write_outputs(out, outputs)
    (out / "README.md").write_text("mine\n")
    before = snapshot(out)
    real_replace = os.replace

    def failing(src: object, dst: object) -> None:
        if Path(str(dst)) == out and ".new-" in Path(str(src)).name:  # the last rename only
            raise OSError(18, "Invalid cross-device link")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(dirswap.os, "replace", failing)
    changed = Outputs(files={**outputs.files, "manifest.json": "{}\n"}, manifest=outputs.manifest)
    with pytest.raises(OSError, match="cross-device"):
        write_outputs(out, changed)
    assert snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_out_left_hidden_by_a_crash_is_restored_by_the_next_generate(
    tmp_path: Path, outputs: Outputs
) -> None:
    from codemode_gen.generator.emit import leftover_notes

    out = tmp_path / "out"
    write_outputs(out, outputs)
    (out / "README.md").write_text("mine\n")
    # a crash between "out -> .out.old-*/out" and "staging -> out"
    holder = tmp_path / ".out.old-abcd1234"
    holder.mkdir()
    out.rename(holder / "out")
    (tmp_path / ".out.new-efgh5678" / "servers").mkdir(parents=True)
    assert any("restores out/" in note for note in leftover_notes(out))
    notes: list[str] = []
    write_outputs(out, outputs, notes=notes)
    assert (out / "README.md").read_text() == "mine\n"  # the user's file came back with it
    assert check_outputs(out, outputs) == []
    assert any(note.startswith(f"restored {out}") for note in notes)
    assert any("removed .out.new-efgh5678" in note for note in notes)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert leftover_notes(out) == []
