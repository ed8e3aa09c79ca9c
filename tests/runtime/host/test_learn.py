"""runtime/host/learn.py through the Python API: output types learned from live calls, shown to the
runs after them, and live calls recorded to fixtures/ (real server processes, real QuickJS)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.generator.fixtures import load_fixture_set
from codemode_gen.runtime.response import Response
from tests.runtime_support import PYTHON, script

pytestmark = pytest.mark.timeout(120)

PROBE = (
    "import { getTool, searchTools } from '@codemode/discovery';\n"
    "const t = await getTool('slow', 'echo');\n"
    "const found = (await searchTools('answer the value given', { detail: 'full' })).results"
    ".find((r) => r.toolName === 'echo');\n"
    "globalThis.__codemode_result__ = { schema: t.outputSchema ?? null, learned: t.outputSchemaLearned ?? null,"
    " declaration: t.declaration, searched: found.outputSchemaLearned ?? null };"
)


def echo(value: Any) -> str:
    return (
        "import { echo } from '@codemode/servers/slow';\n"
        f"globalThis.__codemode_result__ = await echo({{ value: {json.dumps(value)} }});"
    )


def project(tmp_path: Path, toml: str = "") -> Path:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    if toml:
        (tmp_path / "codemode.toml").write_text(toml)
    return tmp_path / ".mcp.json"


def test_an_untyped_tools_output_type_is_learned_from_one_call_and_refined(tmp_path: Path) -> None:
    config = project(tmp_path)

    async def main() -> list[dict[str, Any]]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            before = await cm.run(PROBE, requested_capabilities=["slow"])
            called = await cm.run(echo({"id": 7, "tags": ["a"]}))
            once = await cm.run(PROBE)
            await cm.run(echo({"id": 8, "tags": [], "note": "x"}))
            twice = await cm.run(PROBE)
            return [before["result"], called["result"], once["result"], twice["result"]]

    before, called, once, twice = anyio.run(main)
    assert (
        before["schema"] is None
        and before["learned"] is None
        and "Promise<unknown>" in before["declaration"]
    )
    assert called == {"value": {"id": 7, "tags": ["a"]}}
    value = once["schema"]["properties"]["value"]
    assert value["properties"]["id"] == {"type": "integer"} and set(value["required"]) == {
        "id",
        "tags",
    }
    assert once["learned"] == once["searched"] == {"liveCalls": 1, "scope": "session"}
    assert once["declaration"].startswith("// output type learned from 1 live call in this session")
    assert "Promise<{ value: { id: number; tags: string[] } }>" in once["declaration"]
    # the call it was learned from is the declaration's example (generator/examples.py)
    assert (
        '\n// e.g. echo({ value: { id: 7, tags: ["a"] } }) → { value: { id: 7, tags: ["a"] } }\n'
        in once["declaration"]
    )
    # A second call with another shape refines it: the samples are merged, as generate does.
    assert twice["learned"] == {"liveCalls": 2, "scope": "session"}
    assert "note?: string" in twice["declaration"]


def test_declared_output_types_are_not_relearned(tmp_path: Path) -> None:
    config = project(tmp_path)
    probe = (
        "import { getTool } from '@codemode/discovery';\nconst t = await getTool('slow', 'total');\n"
        "globalThis.__codemode_result__ = [t.outputSchemaLearned ?? null, t.outputSchema];"
    )

    async def main() -> tuple[Any, Any]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            first = await cm.run(probe, requested_capabilities=["slow"])
            await cm.run("import { total } from '@codemode/servers/slow'; await total([1, 2]);")
            return first["result"], (await cm.run(probe))["result"]

    first, after = anyio.run(main)
    assert after == first and after[0] is None


def test_record_writes_redacted_calls_once_and_generate_types_them(tmp_path: Path) -> None:
    config = project(tmp_path, 'redact = ["sk-[A-Za-z0-9]+"]\n')
    secret = {"id": 1, "token": "sk-abcdefghij", "ok": True}

    async def main() -> list[str]:
        notes: list[str] = []
        for _ in range(2):  # the same call twice, in two sessions: one line
            async with CodeMode.from_config(config, out=tmp_path / "out", record=True) as cm:
                response = await cm.run(echo(secret))
                assert response["result"] == {"value": secret}
                notes += cm.take_recording_notes()
        return notes

    notes = anyio.run(main)
    assert notes == [
        f"slow: no recording yet; wrote {tmp_path / 'fixtures' / 'slow'} from the live session"
    ]
    recorded = load_fixture_set(tmp_path / "fixtures" / "slow")
    lines = recorded.calls["echo"]
    assert len(lines) == 1
    text = json.dumps(lines[0])
    assert "sk-abcdefghij" not in text and "<redacted" in text
    assert lines[0]["input"]["value"]["id"] == 1 and isinstance(lines[0]["durationMs"], int)
    assert lines[0]["live"] is True  # recorded by a session: generate counts its type as learned
    assert {t["name"] for t in recorded.tools} >= {"echo", "total"}

    from codemode_gen.cli import main as cli

    with pytest.raises(SystemExit) as exc:
        cli(["generate", "--config", str(config)])
    assert exc.value.code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    tool = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert (
        tool["output"]["source"] == "inferred"
        and tool["output"]["samples"] == tool["output"]["liveSamples"] == 1
    )


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from codemode_gen.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


def test_run_record_then_generate_types_an_unknown_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path, 'redact = ["sk-[A-Za-z0-9]+"]\n')
    assert cli(["record", "--config", str(config), "--no-probe"], capsys)[0] == 0
    assert cli(["generate", "--config", str(config)], capsys)[0] == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    echo_entry = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert echo_entry["output"]["source"] == "none"
    agent = tmp_path / "agent.js"
    agent.write_text(echo({"id": 3, "key": "sk-secretvalue1"}))
    for _ in range(2):  # the same call twice: one recorded line
        code, stdout, _ = cli(
            ["run", "--config", str(config), "--record", "--no-pretty", str(agent)], capsys
        )
        assert code == 0 and json.loads(stdout)["result"] == {
            "value": {"id": 3, "key": "sk-secretvalue1"}
        }
    lines = (tmp_path / "fixtures" / "slow" / "calls" / "echo.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "sk-secretvalue1" not in lines[0] and "<redacted" in lines[0]
    code, stdout, _ = cli(["generate", "--config", str(config)], capsys)
    assert code == 0 and "echo (1 sample)" in stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    echo_entry = next(t for t in manifest["servers"][0]["tools"] if t["toolName"] == "echo")
    assert echo_entry["output"]["source"] == "inferred"
    assert "Promise<{ value: { id: number; key: string } }>" in echo_entry["declaration"]


def test_run_record_and_replay_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = project(tmp_path)
    (tmp_path / "a.js").write_text("1;")
    code, _, err = cli(
        ["run", "--config", str(config), "--record", "--replay", str(tmp_path / "a.js")], capsys
    )
    assert code == 2 and "exclude each other" in err


def test_one_serve_session_learns_the_type_through_a_real_client_and_records_it(
    tmp_path: Path,
) -> None:
    from tests.runtime_support import against_serve

    project(tmp_path)

    async def body(client: Any) -> list[Any]:
        out = []
        for code in (PROBE, echo({"id": 1, "tags": ["x"]}), PROBE):
            response = await client.call_tool(
                "codemode.run", {"code": code, "requestedCapabilities": ["slow"]}
            )
            out.append(response.structured_content["result"])
        return out

    before, called, after = against_serve(tmp_path, body, "--record")
    assert before["schema"] is None and "Promise<unknown>" in before["declaration"]
    assert called == {"value": {"id": 1, "tags": ["x"]}}
    assert after["learned"] == {"liveCalls": 1, "scope": "session"}
    assert "Promise<{ value: { id: number; tags: string[] } }>" in after["declaration"]
    # --record: the call is in fixtures/ for `generate`.
    recorded = load_fixture_set(tmp_path / "fixtures" / "slow")
    assert [line["input"] for line in recorded.calls["echo"]] == [
        {"value": {"id": 1, "tags": ["x"]}}
    ]


def test_live_recording_refuses_a_hostile_recording_instead_of_replacing_it(tmp_path: Path) -> None:
    """A FIFO (or link) at server.json is named, not taken for "never recorded" (which would
    replace the folder and its recorded calls) nor read (which would block)."""
    import os

    from codemode_gen.config import ServerConfig, Settings
    from codemode_gen.generator.fixtures import write_server_fixtures
    from codemode_gen.runtime.host.learn import LiveRecorder

    line = {
        "input": {},
        "result": {"content": []},
        "durationMs": 1,
        "recordedAt": "2026-01-01T00:00:00Z",
    }
    write_server_fixtures(
        tmp_path, "s", {"serverInfo": {"name": "s"}}, [{"name": "t"}], {"t": [line]}
    )
    (tmp_path / "s" / "server.json").unlink()
    os.mkfifo(tmp_path / "s" / "server.json")
    recorder = LiveRecorder(
        tmp_path, Settings(), {"s": ServerConfig(id="s", transport="stdio", command="x")}
    )
    recorder.add("s", "t", {"n": 1}, {"content": [{"type": "text", "text": "a\u2028b"}]}, 1)
    (note,) = recorder.flush({})
    assert "not written" in note and "server.json: server recording is a named pipe" in note
    assert (tmp_path / "s" / "calls" / "t.jsonl").read_text() == json.dumps(
        line, sort_keys=True, separators=(",", ":")
    ) + "\n"


# --------------------------------------------------------------------------- concurrent recording


@pytest.mark.slow
def test_serve_record_keeps_every_call_of_48_concurrent_runs(tmp_path: Path) -> None:
    """Concurrent runs flush the same server's recording: each flush reads, merges and writes
    it under the fixtures folder's lock, so no run's call overwrites another's."""
    from tests.runtime_support import against_serve

    project(tmp_path, "max_samples = 100\n")
    runs = 48

    async def body(client: Any) -> list[Any]:
        results: list[Any] = [None] * runs

        async def one(i: int) -> None:
            response = await client.call_tool(
                "codemode.run", {"code": echo({"n": i}), "requestedCapabilities": ["slow"]}
            )
            results[i] = response.structured_content

        async with anyio.create_task_group() as tg:
            for i in range(runs):
                tg.start_soon(one, i)
        return results

    responses = against_serve(tmp_path, body, "--record")
    assert all(r["result"] == {"value": {"n": i}} for i, r in enumerate(responses)), responses
    assert not [d for r in responses for d in r["diagnostics"] if d["code"] == "RECORDING_FAILED"]
    recorded = load_fixture_set(tmp_path / "fixtures" / "slow")
    assert sorted(line["input"]["value"]["n"] for line in recorded.calls["echo"]) == list(
        range(runs)
    )


_FLUSHER = """
import sys
from pathlib import Path
from codemode_gen.config import ServerConfig, Settings
from codemode_gen.runtime.host.learn import LiveRecorder

fixtures, tag, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
configs = {"s": ServerConfig(id="s", transport="stdio", command="unused")}
recorder = LiveRecorder(fixtures, Settings(max_samples=1000), configs)
for i in range(count):  # one flush per call: as many read-merge-writes as possible
    recorder.add("s", "echo", {"who": tag, "i": i}, {"content": [], "structuredContent": {"i": i}}, 1, run=i)
    assert recorder.flush({}, run=i) == [], i
"""


@pytest.mark.slow
def test_two_processes_recording_one_server_concurrently_lose_no_call(tmp_path: Path) -> None:
    """Two hosts recording into one fixtures/ (two `serve --record` on a project): the flock on
    the folder spans each read-merge-write, across processes."""
    import subprocess
    import sys

    from codemode_gen.generator.fixtures import write_server_fixtures

    fixtures = tmp_path / "fixtures"
    write_server_fixtures(
        fixtures,
        "s",
        {"serverInfo": {"name": "s", "version": "1"}},
        [{"name": "echo", "inputSchema": {"type": "object"}}],
        {},
    )
    count = 25
    procs = [
        subprocess.Popen([sys.executable, "-c", _FLUSHER, str(fixtures), tag, str(count)])
        for tag in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    recorded = load_fixture_set(fixtures / "s")
    got = sorted((line["input"]["who"], line["input"]["i"]) for line in recorded.calls["echo"])
    assert got == sorted((tag, i) for tag in ("a", "b") for i in range(count))


def test_calls_that_cannot_be_recorded_are_a_diagnostic_of_their_run(tmp_path: Path) -> None:
    # A fixtures folder that cannot be written is refused before any server starts; one that
    # stops being writable while serving (here: replaced by a file) fails the flush of the run.
    config = project(tmp_path)
    blocked = tmp_path / "fixtures-here"
    blocked.mkdir()

    async def main() -> tuple[Response, list[str]]:
        async with CodeMode.from_config(config, out=tmp_path / "out", record=blocked) as cm:
            blocked.rmdir()
            blocked.write_text("a file where fixtures/ should be\n")
            response = await cm.run(echo({"n": 1}), requested_capabilities=["slow"])
            return response, cm.take_recording_notes()

    response, notes = anyio.run(main)
    assert response["result"] == {"value": {"n": 1}}  # the call itself succeeded
    failed = [d for d in response["diagnostics"] if d["code"] == "RECORDING_FAILED"]
    assert (
        len(failed) == 1
        and failed[0]["severity"] == "warning"
        and "not written" in failed[0]["message"]
    )
    assert any("not written" in note for note in notes)  # and the host's log says so


# --------------------------------------------------------------------------- bounded learning


def _blob(seed: int, items: int) -> dict[str, Any]:
    rows = [
        {"id": seed * 10_000 + i, "name": f"row {i}", "tags": ["a"] * (i % 3)} for i in range(items)
    ]
    if seed % 2:
        for row in rows:
            row["note"] = "odd"
    return {"content": [], "structuredContent": {"rows": rows, "page": seed}}


def test_learner_keeps_the_merged_type_not_the_samples() -> None:
    """Many large samples: the learner's state stays the size of the type (not of the results)
    and the type reflects every sample (as generate infers it from the same calls)."""
    import tracemalloc

    from codemode_gen.generator.infer import infer_output
    from codemode_gen.runtime.host.learn import Learner

    learner = Learner()
    tracemalloc.start()
    try:
        for seed in range(60):
            result = _blob(seed, 2000)  # ~100 KB of JSON each, ~6 MB in all
            learner.observe("s", "blob", "spec", {"seed": seed}, result)
            del result
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    learned = learner.learned("s")["blob"]
    assert held < 1024 * 1024, held  # the samples alone were ~6 MB of JSON
    assert learner.learned_bytes < 4096
    # Every sample counts: `note` (odd seeds only) is optional, and the type is generate's.
    expected = infer_output([{"input": {}, "result": _blob(s, 3)} for s in range(4)])
    assert learned.inference.schema == expected.schema
    assert "rows[].note" in learned.inference.optional and learned.stopped is None


@pytest.mark.slow
def test_a_type_that_outgrows_its_bound_stops_learning_and_discovery_says_so(
    tmp_path: Path,
) -> None:
    from codemode_gen.runtime.host.learn import MAX_LEARNED_SCHEMA_BYTES

    config = project(tmp_path)
    # Every call brings 150 new keys: the merged type grows by ~5 KiB a call.
    calls = MAX_LEARNED_SCHEMA_BYTES // (150 * 30) + 3
    codes = [echo({f"call{n}_field_{k}": k for k in range(150)}) for n in range(calls)]

    async def main() -> tuple[Any, Any]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            await cm.run(codes[0], requested_capabilities=["slow"])
            first = (await cm.run(PROBE))["result"]
            for code in codes[1:]:
                await cm.run(code)
            return first, (await cm.run(PROBE))["result"]

    first, last = anyio.run(main)
    assert first["learned"] == {"liveCalls": 1, "scope": "session"}
    stopped = last["learned"]["stopped"]
    assert "grew past" in stopped and "learning stopped" in last["declaration"]
    assert 1 < last["learned"]["liveCalls"] < calls  # the last type within the bound stays
    assert len(json.dumps(last["schema"], separators=(",", ":"))) <= MAX_LEARNED_SCHEMA_BYTES


def test_a_settled_type_is_merged_from_calls_at_doubling_intervals() -> None:
    """Every call until the type has MAX_LEARNED_SAMPLES calls, then the calls numbered by a
    power of two: a loop of a thousand calls merges ~25 results, not a thousand."""
    from codemode_gen.runtime.host.learn import MAX_LEARNED_SAMPLES, Learner

    learner = Learner()
    offered = []
    for n in range(1, 1001):
        if learner.offer("s", "blob"):
            offered.append(n)
            learner.observe("s", "blob", "spec", {}, _blob(n, 2))
    assert offered[:MAX_LEARNED_SAMPLES] == list(range(1, MAX_LEARNED_SAMPLES + 1))
    assert offered[MAX_LEARNED_SAMPLES:] == [32, 64, 128, 256, 512]
    # what was merged still has both shapes (`note` on odd seeds): the type is generate's
    assert "rows[].note" in learner.learned("s")["blob"].inference.optional
    assert learner.offer("s", "other")  # another tool counts on its own


def test_a_result_past_the_node_bound_is_not_merged_at_all() -> None:
    from codemode_gen.generator.infer import MAX_INFER_NODES, MergedSamples
    from codemode_gen.runtime.host.learn import Learner

    huge = _blob(1, MAX_INFER_NODES // 4)  # ~5 values a row
    merged = MergedSamples()
    assert merged.add(_blob(2, 3), whole=True)
    before = merged.inference()
    assert not merged.add(huge, whole=True)
    assert merged.inference() == before and merged.samples == 1
    assert merged.add(huge)  # without `whole`: merged, the excess typed unknown (generate)
    learner = Learner()
    learner.observe("s", "blob", "spec", {}, huge)
    assert learner.learned("s") == {}


def test_a_run_that_times_out_after_its_call_still_teaches_the_next_run(tmp_path: Path) -> None:
    """A run's results are learned after it ends, however it ends (here: its timeout, the worker
    killed); the next run waits for them before it builds its catalog."""
    config = project(tmp_path)
    stuck = echo({"id": 1, "tags": ["a"]}) + "\nwhile (true) {}"

    async def main() -> tuple[Response, Response]:
        async with CodeMode.from_config(config, out=tmp_path / "out") as cm:
            # connected first: the timeout below is the loop's, not the server's start
            await cm.run("1", requested_capabilities=["slow"])
            timed_out = await cm.run(stuck, limits={"timeoutMs": 1500})
            probe = await cm.run(PROBE)
            assert cm._learning._held == 0
            return timed_out, probe

    timed_out, probe = anyio.run(main)
    from codemode_gen.runtime.diagnostics import hit_limit

    assert hit_limit(timed_out["diagnostics"], "timeoutMs") and timed_out["toolTrace"][0]["ok"]
    assert probe["result"]["learned"] == {"liveCalls": 1, "scope": "session"}
