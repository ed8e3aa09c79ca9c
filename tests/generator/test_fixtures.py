"""generator/fixtures.py: the on-disk recording format, read and written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codemode_gen.errors import UserError
from codemode_gen.generator import fixtures
from codemode_gen.generator.fixtures import (
    MAX_FIXTURE_DEPTH,
    calls_file_name,
    fixtures_hash,
    load_fixture_set,
    load_fixtures,
    load_recorded,
    tool_name_from_calls_file,
    write_server_fixtures,
)

SERVER = {
    "serverInfo": {"name": "demo", "version": "1.0"},
    "capabilities": {"tools": {}},
    "protocolVersion": "2025-11-25",
}
TOOLS = [
    {"name": "b.tool", "inputSchema": {"type": "object"}},
    {"name": "a/tool", "inputSchema": {"type": "object"}},
]
CALL = {
    "input": {},
    "result": {"content": [{"type": "text", "text": "hi"}]},
    "durationMs": 3,
    "recordedAt": "2026-11-22T00:00:00Z",
}


@pytest.mark.parametrize("name", ["get_note", "a/b", "..", ".hidden", "with space", "ünï", "x%y"])
def test_calls_file_name_is_safe_and_reversible(name: str) -> None:
    file_name = calls_file_name(name)
    assert "/" not in file_name and not file_name.startswith(".")
    assert tool_name_from_calls_file(file_name) == name


def test_write_then_load_round_trips_and_sorts(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL], "b.tool": []})
    loaded = load_fixture_set(tmp_path / "demo")
    assert [t["name"] for t in loaded.tools] == ["a/tool", "b.tool"]
    assert loaded.calls == {"a/tool": [CALL]}
    assert set(loaded.hashes) == {
        "demo/server.json",
        "demo/tools.json",
        "demo/calls/a%2Ftool.jsonl",
    }
    text = (tmp_path / "demo" / "tools.json").read_text()
    assert text.endswith("}\n]\n") and json.loads(text)[0]["name"] == "a/tool"


def test_rewrite_replaces_the_whole_server_folder(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS[:1], {})
    loaded = load_fixture_set(tmp_path / "demo")
    assert loaded.calls == {} and len(loaded.tools) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # no staging leftovers


def test_failed_write_keeps_the_old_recording(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    before = (tmp_path / "demo" / "tools.json").read_bytes()
    with pytest.raises(TypeError):
        write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [{"input": object()}]})
    assert (tmp_path / "demo" / "tools.json").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


def test_hash_changes_with_content_not_order(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "a", SERVER, TOOLS, {})
    write_server_fixtures(tmp_path, "b", SERVER, TOOLS, {})
    sets = load_fixtures(tmp_path)
    assert [s.config_id for s in sets] == ["a", "b"]
    first = fixtures_hash(sets)
    assert fixtures_hash(list(reversed(sets))) == first
    write_server_fixtures(tmp_path, "b", SERVER, TOOLS[:1], {})
    assert fixtures_hash(load_fixtures(tmp_path)) != first


def test_missing_folder_and_bad_files_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="fixtures folder not found"):
        load_fixtures(tmp_path / "nope")
    with pytest.raises(UserError, match="no recorded servers"):
        load_fixtures(tmp_path)
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    (tmp_path / "demo" / "tools.json").write_text('[{"name": "x",}]')
    with pytest.raises(UserError, match=r"tools.json:1:\d+: invalid JSON"):
        load_fixtures(tmp_path)
    (tmp_path / "demo" / "tools.json").write_text('{"name": "x"}')
    with pytest.raises(UserError, match="expected a JSON array of tools"):
        load_fixtures(tmp_path)
    (tmp_path / "demo" / "tools.json").write_text("[]")
    (tmp_path / "demo" / "calls" / "a%2Ftool.jsonl").write_text('{"input": {}}\n')
    with pytest.raises(UserError, match=r"a%2Ftool.jsonl:1: a recorded call must be an object"):
        load_fixtures(tmp_path)


# --------------------------------------------------------------------------- any JSON value (spec §11)

# Every character `str.splitlines` ends a line at, and lone surrogates (valid JSON text: "\ud800").
LINE_BREAKERS = "".join(
    chr(c) for c in range(sys.maxunicode + 1) if len(f"a{chr(c)}b".splitlines()) > 1
)
AWKWARD = (
    LINE_BREAKERS + "\udc00\ud800 \udfff \udbff \U0001f600 \ufeff\u200e"
)  # no high+low pair: that is one character


def test_s11_every_line_terminator_and_lone_surrogate_round_trips(tmp_path: Path) -> None:
    calls = {
        "a/tool": [
            {
                **CALL,
                "input": {AWKWARD: AWKWARD},
                "result": {
                    "content": [{"type": "text", "text": AWKWARD}],
                    "structuredContent": {AWKWARD: [AWKWARD]},
                },
            },
            {**CALL, "input": {"n": 2}},
        ],
        "lone\ud800" + "x" * 200: [
            {**CALL, "input": {"k": "\u2028"}}
        ],  # a hashed file: its `tool` field
    }
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, calls)
    for path in (tmp_path / "demo" / "calls").iterdir():
        text = path.read_bytes().decode("utf-8")  # UTF-8 text, lone surrogates escaped
        lines = text.splitlines()  # even the most eager line splitter sees one call a line
        assert (
            len(lines)
            == len(text.split("\n")) - 1
            == len(calls["a/tool" if "@" not in path.name else "lone\ud800" + "x" * 200])
        )
    assert load_fixture_set(tmp_path / "demo").calls == calls


def test_recordings_written_with_raw_separators_still_read(tmp_path: Path) -> None:
    """The writer used to put U+2028/U+2029/U+0085 raw into a line; readers split on "\\n" only."""
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
    (tmp_path / "demo" / "calls").mkdir()
    raw = {**CALL, "result": {"content": [{"type": "text", "text": "a\u2028b\u2029c\x85d"}]}}
    line = json.dumps(raw, ensure_ascii=False)
    assert "\u2028" in line
    (tmp_path / "demo" / "calls" / "a%2Ftool.jsonl").write_text(
        line + "\r\n" + line + "\n", encoding="utf-8"
    )
    assert load_fixture_set(tmp_path / "demo").calls == {"a/tool": [raw, raw]}


def test_tool_list_and_initialize_result_must_be_unicode_text(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
    (tmp_path / "demo" / "tools.json").write_text('[{"name": "t", "description": "x\\ud800"}]')
    with pytest.raises(
        UserError, match=r"tools.json: a lone surrogate escape .* at /0/description"
    ):
        load_fixture_set(tmp_path / "demo")
    before = (tmp_path / "demo" / "tools.json").read_bytes()
    with pytest.raises(
        UserError, match=r"server.json: the initialize result holds a lone surrogate"
    ):
        write_server_fixtures(tmp_path, "demo", {"instructions": "\udc00"}, TOOLS, {})
    assert (tmp_path / "demo" / "tools.json").read_bytes() == before  # nothing written


def test_the_writer_keeps_within_what_readers_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = {**CALL, "input": {"i": 0}}
    big = {**CALL, "input": {"i": 1}, "result": {"content": [{"type": "text", "text": "x" * 500}]}}
    deep: object = 1
    for _ in range(MAX_FIXTURE_DEPTH):
        deep = [deep]
    too_deep = {**CALL, "input": {"i": 2}, "result": {"structuredContent": {"d": deep}}}
    monkeypatch.setattr(fixtures, "MAX_CALLS_LINE_BYTES", 600)
    notes = write_server_fixtures(
        tmp_path, "demo", SERVER, TOOLS, {"a/tool": [small, big, too_deep, small]}
    )
    assert [n.split(": ", 1)[1] for n in notes] == [
        "a recorded call left out: its line would be 618 bytes, over 600, which readers refuse",
        f"a recorded call left out: its line would be nested deeper than {MAX_FIXTURE_DEPTH} levels, which readers refuse",
    ]
    assert load_fixture_set(tmp_path / "demo").calls == {"a/tool": [small, small]}

    monkeypatch.setattr(fixtures, "MAX_CALLS_FILE_BYTES", 250)
    lines = [{**CALL, "input": {"i": i}} for i in range(5)]
    notes = write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": lines})
    assert any("the 3 oldest recorded call(s) left out" in note for note in notes), notes
    assert load_fixture_set(tmp_path / "demo").calls == {"a/tool": lines[3:]}  # the newest kept

    monkeypatch.setattr(fixtures, "MAX_TOOLS_JSON_BYTES", 100)
    with pytest.raises(
        UserError, match=r"tools.json: the tool list would be \d+ bytes; readers take at most 100"
    ):
        write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
    monkeypatch.undo()
    assert load_fixture_set(tmp_path / "demo").calls == {
        "a/tool": lines[3:]
    }  # the previous recording stays


def test_a_fixture_line_may_nest_as_deep_as_record_keeps() -> None:
    from codemode_gen.generator.untrusted import MAX_RECORDED_DEPTH

    assert MAX_FIXTURE_DEPTH == MAX_RECORDED_DEPTH + 1  # a kept result, inside its line


def test_anything_named_like_a_server_is_read_or_refused_never_ignored(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
    (tmp_path / "file").write_text("{}")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(UserError, match=r"file: server recording folder is not a folder"):
        load_recorded(tmp_path, ["file"])
    with pytest.raises(UserError, match=r"dangling: server recording folder is a symbolic link"):
        load_recorded(tmp_path, ["dangling"])
    assert load_recorded(tmp_path, ["absent"]) == {"absent": None}
    assert [s.config_id for s in load_fixtures(tmp_path)] == [
        "demo"
    ]  # a file in fixtures/ is no server
    (tmp_path.parent / f"{tmp_path.name}-link").symlink_to(
        tmp_path
    )  # the folder the user chose may be a link
    assert [s.config_id for s in load_fixtures(tmp_path.parent / f"{tmp_path.name}-link")] == [
        "demo"
    ]


# --------------------------------------------------------------------------- hostile tool names
# (spec §11, server text is untrusted: a 300-character name once failed the whole server with
# "File name too long")

HOSTILE_NAMES = [
    "long_" + "x" * 295,
    "ü" * 60,  # short, but its percent-encoding is 360 characters
    "a/b/../../c",
    "../escape",
    "nul\x00byte",
    "ctl\x01\x1b[31mred\x7f",
    "ünïcødé-名前",
    ".hidden",
    "..",
    "",
    "con",
    "NUL.txt",
    "lone\ud800surrogate",
    "x~y",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_calls_file_names_are_safe_bounded_and_stable(name: str) -> None:
    from codemode_gen.generator.fixtures import MAX_CALLS_FILE_NAME_CHARS

    file_name = calls_file_name(name)
    assert file_name == calls_file_name(name)  # stable: depends on the name only
    assert file_name.endswith(".jsonl") and len(file_name) <= MAX_CALLS_FILE_NAME_CHARS
    assert file_name.isascii() and file_name.isprintable()
    assert "/" not in file_name and "\\" not in file_name and not file_name.startswith(".")
    assert file_name.split(".", 1)[0].upper() not in {"CON", "NUL"}


def test_short_safe_names_keep_their_existing_file_names() -> None:
    """Recordings made before stay byte-identical: short names are percent-encoded as ever."""
    assert calls_file_name("get_note") == "get_note.jsonl"
    assert calls_file_name("tasks.list") == "tasks.list.jsonl"
    assert calls_file_name("a/tool") == "a%2Ftool.jsonl"
    assert calls_file_name("..") == "%2E..jsonl"
    assert calls_file_name("x" * 122) == "x" * 122 + ".jsonl"  # the longest plain name
    assert "@" in calls_file_name("x" * 123)
    assert calls_file_name("x~y") == "x~y.jsonl"  # `quote` keeps "~": still plain, still decoded


def test_names_differing_only_in_case_get_distinct_files() -> None:
    from codemode_gen.generator.fixtures import calls_file_names

    files = calls_file_names(["Case", "case", "other"])
    assert files["other"] == "other.jsonl"
    assert len({f.lower() for f in files.values()}) == 3  # distinct on macOS and Windows too
    assert files["Case"].startswith("Case@") and files["case"].startswith("case@")


def test_hostile_names_round_trip_through_write_and_load(tmp_path: Path) -> None:
    names = [n for n in HOSTILE_NAMES if "\ud800" not in n] + ["Case", "case", "plain"]
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in names]
    calls = {n: [{**CALL, "input": {"i": i}}] for i, n in enumerate(names)}
    write_server_fixtures(tmp_path, "demo", SERVER, tools, calls)
    calls_dir = tmp_path / "demo" / "calls"
    files = sorted(p.name for p in calls_dir.iterdir())
    assert len(files) == len(names)
    assert all(p.parent == calls_dir for p in calls_dir.rglob("*"))  # nothing escaped calls/
    loaded = load_fixture_set(tmp_path / "demo")
    assert loaded.calls == calls  # the canonical names, and no `tool` field in the records
    hashed = {
        json.loads((calls_dir / f).read_text(encoding="utf-8"))["tool"] for f in files if "@" in f
    }
    assert hashed == {"long_" + "x" * 295, "ü" * 60, "", "con", "NUL.txt", "Case", "case"}
    assert (calls_dir / "plain.jsonl").read_text() == json.dumps(
        {**CALL, "input": {"i": len(names) - 1}}, sort_keys=True, separators=(",", ":")
    ) + "\n"


def test_older_long_plain_file_names_still_read(tmp_path: Path) -> None:
    """A long name an earlier version wrote percent-encoded (it fit in 255 bytes) still loads."""
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
    name = "y" * 200
    (tmp_path / "demo" / "calls").mkdir()
    (tmp_path / "demo" / "calls" / f"{name}.jsonl").write_text(json.dumps(CALL) + "\n")
    assert load_fixture_set(tmp_path / "demo").calls == {name: [CALL]}


def test_calls_files_that_cannot_be_attributed_are_user_errors(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    calls_dir = tmp_path / "demo" / "calls"
    hashed = calls_dir / calls_file_name("z" * 300)
    assert "@" in hashed.name
    hashed.write_text(json.dumps(CALL) + "\n")
    with pytest.raises(UserError, match="cannot tell which tool"):
        load_fixture_set(tmp_path / "demo")
    hashed.write_text(json.dumps({**CALL, "tool": "a/tool"}) + "\n")
    with pytest.raises(UserError, match="holds calls of tool 'a/tool'"):
        load_fixture_set(tmp_path / "demo")
    hashed.write_text(
        json.dumps({**CALL, "tool": "p"}) + "\n" + json.dumps({**CALL, "tool": "q"}) + "\n"
    )
    with pytest.raises(UserError, match=r":2: `tool` must be the same tool name"):
        load_fixture_set(tmp_path / "demo")


# --------------------------------------------------------------------------- swap and recovery


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_failed_final_rename_rolls_back_and_leaves_nothing_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from codemode_gen import dirswap

    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    before = {p.name: p.read_bytes() for p in (tmp_path / "demo").rglob("*") if p.is_file()}
    real_replace = os.replace
    target = tmp_path / "demo"

    def failing(src: object, dst: object) -> None:
        if Path(str(dst)) == target and ".new-" in Path(str(src)).name:  # the last step only
            raise OSError(28, "No space left on device")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(dirswap.os, "replace", failing)
    with pytest.raises(OSError, match="No space left"):
        write_server_fixtures(tmp_path, "demo", SERVER, TOOLS[:1], {})
    after = {p.name: p.read_bytes() for p in (tmp_path / "demo").rglob("*") if p.is_file()}
    assert after == before
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # no .demo.old-* / .demo.new-*


def test_failed_rollback_is_reported_and_recovered_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from codemode_gen import dirswap
    from codemode_gen.generator.fixtures import leftover_notes

    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    real_replace = os.replace
    target = tmp_path / "demo"

    def failing(src: object, dst: object) -> None:
        if Path(str(dst)) == target:  # neither the new version nor the old one can move in
            raise OSError(5, "Input/output error")
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(dirswap.os, "replace", failing)
    with pytest.raises(
        UserError, match=r"nor the previous one back .* it is kept in .*\.demo\.old-"
    ):
        write_server_fixtures(tmp_path, "demo", SERVER, TOOLS[:1], {})
    monkeypatch.undo()
    assert not target.exists()
    # generate does not skip the hidden copy silently: it refuses, naming it and the fix
    with pytest.raises(UserError, match=r"demo: missing; an interrupted record left") as info:
        load_fixtures(tmp_path)
    assert "record --server demo" in (info.value.hint or "")
    assert any("previous version of demo" in note for note in leftover_notes(tmp_path))
    # the next write (record) restores it first, then replaces it
    notes = dirswap.recover(target)
    assert notes and notes[0].startswith(f"restored {target}")
    assert load_fixture_set(target).calls == {"a/tool": [CALL]}
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]


def test_leftovers_of_a_crashed_run_are_recovered_or_removed(tmp_path: Path) -> None:
    from codemode_gen.generator.fixtures import leftover_notes

    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    write_server_fixtures(tmp_path, "other", SERVER, TOOLS, {})
    # a crash while staging, and one after the swap but before the cleanup
    (tmp_path / ".demo.new-abcd1234" / "calls").mkdir(parents=True)
    (tmp_path / ".demo.old-efgh5678" / "demo").mkdir(parents=True)
    (tmp_path / ".other.old-zz_z9999").mkdir()  # crashed between mkdtemp and the rename
    assert [s.config_id for s in load_fixtures(tmp_path)] == ["demo", "other"]  # nothing lost
    notes = leftover_notes(tmp_path)
    assert len(notes) == 3 and all("the next `codemode-gen record --server" in n for n in notes)
    swap_notes = write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {"a/tool": [CALL]})
    assert sorted(swap_notes) == [
        "removed .demo.new-abcd1234: an unfinished new version left by an interrupted run",
        "removed .demo.old-efgh5678: a superseded old version left by an interrupted run",
    ]
    assert _hidden(tmp_path) == [".other.old-zz_z9999"]  # another server's: left to its record
    write_server_fixtures(tmp_path, "other", SERVER, TOOLS, {})
    assert _hidden(tmp_path) == []


def test_a_server_id_that_looks_like_a_leftover_is_not_confused(tmp_path: Path) -> None:
    write_server_fixtures(tmp_path, "a.new-abcd1234", SERVER, TOOLS, {})
    write_server_fixtures(tmp_path, "a", SERVER, TOOLS, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "a.new-abcd1234"]


def test_a_swap_waits_for_another_process_and_gives_up_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two records at once: the folder lock keeps one from deleting the other's staging as a
    "leftover"; a lock held too long is a clear error, not a hang."""
    import subprocess
    import sys

    from codemode_gen import dirswap

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        monkeypatch.setattr(dirswap, "LOCK_TIMEOUT_S", 0.3)
        with pytest.raises(UserError, match="another codemode-gen process has been writing here"):
            write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})
        assert list(tmp_path.iterdir()) == []
    finally:
        holder.kill()
        holder.wait(timeout=10)
    write_server_fixtures(tmp_path, "demo", SERVER, TOOLS, {})  # released with its process
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]
