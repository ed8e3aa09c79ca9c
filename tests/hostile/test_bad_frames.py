"""Spec §11, server responses are untrusted (the SDK's stdio transport dropped frames it could not
parse): a server that answers with
frames a client cannot use (tests/hostile/bad_frames_server.py, raw bytes, no SDK).

Each bad frame must fail *its own* request at once - not after the call timeout (60 s here) -
with an error naming the server and the reason, and the session must serve the next call;
bad bytes that can be repaired (invalid UTF-8, lone surrogates) are repaired; in tools/list one
too-deep tool schema becomes unknown with a warning instead of losing the server. Checked
through `SessionManager`, `codemode-gen record`, `codemode-gen run` and `codemode-gen serve`.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.client import stdio
from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.session_errors import BadFrameError, CallError
from codemode_gen.client.sessions import SessionManager
from codemode_gen.client.stdio import MAX_FRAME_DEPTH, frame_too_deep, parse_pruned
from codemode_gen.config import ServerConfig

from .script_support import PROMPT_S, against_serve

pytestmark = pytest.mark.timeout(120)

SERVER = Path(__file__).resolve().parent / "bad_frames_server.py"
PYTHON = sys.executable
CLI = [PYTHON, "-m", "codemode_gen"]
CALL_TIMEOUT = 60.0  # what a dropped frame would cost
FAST = PROMPT_S  # "at once" on a busy machine: far below CALL_TIMEOUT

# tool -> what the error must say
FAILING = {
    "deep_result": f"JSON nested deeper than {MAX_FRAME_DEPTH} levels",
    "deep_id_last": f"JSON nested deeper than {MAX_FRAME_DEPTH} levels",
    "not_json": "a line that is not JSON",
    "both": "both result and error",
    "neither": "neither result nor error",
    "non_json_number": "a non-JSON number (NaN)",
}


def config(*args: str) -> ServerConfig:
    return ServerConfig(
        id="bad",
        transport="stdio",
        command=PYTHON,
        args=(str(SERVER), "stdio", *args),
        call_timeout=CALL_TIMEOUT,
    )


async def good_calls(session: McpSession) -> int:
    result = await session.call_tool("good", {})
    calls: int = result["structuredContent"]["calls"]
    return calls


def assert_clean(text: str) -> None:
    assert "Traceback" not in text and "ValidationError" not in text, text[-3000:]


# --------------------------------------------------------------------------- SessionManager


@pytest.mark.parametrize("tool", sorted(FAILING))
def test_a_bad_frame_fails_its_own_call_at_once_and_the_session_goes_on(
    tmp_path: Path, tool: str
) -> None:
    async def go() -> None:
        async with SessionManager({"bad": config()}, log_dir=tmp_path) as manager:
            session = await manager.get("bad")
            before = await good_calls(session)
            started = time.monotonic()
            with pytest.raises(CallError) as info:
                await session.call_tool(tool, {})
            assert time.monotonic() - started < FAST
            err = info.value
            assert isinstance(err, BadFrameError)
            assert (
                "server 'bad' answered tools/call with" in err.message
                and FAILING[tool] in err.message
            )
            assert err.frame is None  # a call keeps no copy of the bad frame
            assert not session.closed
            assert await good_calls(session) == before + 2  # same process: nothing restarted
            assert await manager.get("bad") is session

    anyio.run(go)
    log = (tmp_path / "bad.stderr.log").read_text(encoding="utf-8")
    assert FAILING[tool] in log  # the server log says what happened, with a preview of the frame
    assert_clean(log)


def test_invalid_utf8_and_lone_surrogates_are_repaired_not_dropped(tmp_path: Path) -> None:
    async def go() -> tuple[str, str]:
        async with SessionManager({"bad": config()}, log_dir=tmp_path) as manager:
            session = await manager.get("bad")
            with anyio.fail_after(FAST):
                utf8 = (await session.call_tool("invalid_utf8", {}))["content"][0]["text"]
                surrogates = (await session.call_tool("lone_surrogate", {}))["content"][0]["text"]
            return utf8, surrogates

    utf8, surrogates = anyio.run(go)
    assert utf8 == "café \ufffd\ufffd end"
    # the lone escapes became U+FFFD; a valid pair and an escaped backslash are untouched
    assert surrogates == "a\ufffdb \ufffd \U0001f600 \\ud800"
    for text in (utf8, surrogates):
        text.encode("utf-8")  # no lone surrogate left to crash a writer downstream
        json.dumps(text, ensure_ascii=False).encode("utf-8")


def test_frames_without_a_request_id_are_logged_and_skipped(tmp_path: Path) -> None:
    async def go() -> list[str]:
        async with SessionManager({"bad": config()}, log_dir=tmp_path) as manager:
            session = await manager.get("bad")
            with anyio.fail_after(FAST):
                texts = [
                    (await session.call_tool(name, {}))["content"][0]["text"]
                    for name in ("garbage_then_good", "bad_notification")
                ]
            assert not session.closed
            return texts

    assert anyio.run(go) == ["after the garbage", "after the notification"]
    log = (tmp_path / "bad.stderr.log").read_text(encoding="utf-8")
    assert "skipped a line that is not JSON" in log and "this line is not JSON at all" in log
    assert f"skipped JSON nested deeper than {MAX_FRAME_DEPTH} levels" in log


def test_a_frame_over_the_size_cap_fails_its_call_with_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio, "MAX_FRAME_BYTES", 1024 * 1024)

    async def go() -> None:
        async with SessionManager({"bad": config()}, log_dir=tmp_path) as manager:
            session = await manager.get("bad")
            fits = await session.call_tool("huge", {"bytes": 1024 * 1024 - 200})
            assert len(fits["content"][0]["text"]) == 1024 * 1024 - 200
            started = time.monotonic()
            with pytest.raises(BadFrameError) as info:
                await session.call_tool("huge", {"bytes": 8 * 1024 * 1024})
            assert time.monotonic() - started < FAST
            assert "larger than the 1 MiB frame limit" in info.value.message
            assert (await session.call_tool("huge", {"bytes": 10}))["content"][0][
                "text"
            ] == "x" * 10

    anyio.run(go)


def test_a_request_that_cannot_be_serialised_fails_alone(tmp_path: Path) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(400):
        node["a"] = {}
        node = node["a"]

    async def go() -> None:
        async with SessionManager({"bad": config()}, log_dir=tmp_path) as manager:
            session = await manager.get("bad")
            for value in (deep, "lone \ud800 surrogate"):
                with anyio.fail_after(FAST), pytest.raises(BadFrameError) as info:
                    await session.call_tool("echo", {"value": value})
                assert info.value.kind == "unsendable"
                assert info.value.message.startswith("cannot send tools/call to server 'bad'")
            assert (await session.call_tool("echo", {"value": [1]}))["structuredContent"] == {
                "value": [1]
            }

    anyio.run(go)


def test_tools_list_keeps_every_tool_and_types_the_too_deep_one_as_unknown(tmp_path: Path) -> None:
    async def go() -> tuple[list[dict[str, Any]], list[str]]:
        async with SessionManager({"bad": config("--deep-tool")}, log_dir=tmp_path) as manager:
            with anyio.fail_after(FAST):
                session = await manager.get("bad")
            tools = await session.list_tools()
            assert (await session.call_tool("deep_schema", {}))["content"][0][
                "text"
            ] == "deep_schema ok"
            assert await good_calls(session) == 2
            return tools, list(session.warnings)

    tools, warnings = anyio.run(go)
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) >= {"good", "deep_result", "echo", "deep_schema", "odd_text"}
    assert by_name["deep_schema"] == {
        "name": "deep_schema",
        "description": "Its schema is nested far too deeply.",
        "inputSchema": {},
        "annotations": {"readOnlyHint": True},
    }
    assert by_name["good"]["inputSchema"] == {"type": "object", "properties": {}}  # untouched
    assert by_name["odd_text"]["description"] == "café \ufffd bytes \ufffd escape"
    assert warnings == [
        f"tool 'deep_schema': inputSchema nested deeper than {MAX_FRAME_DEPTH} levels: typed as unknown"
    ]


# --------------------------------------------------------------------------- the pieces


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _random_json(rng: random.Random, depth: int) -> Any:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, None, "[{", 'q"[', "\\", "\\\\]", "}\\u005b"])
    if rng.random() < 0.5:
        return [_random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f'k{i}["': _random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_depth_scan_is_exact_and_ignores_brackets_in_strings() -> None:
    rng = random.Random(8)
    for _ in range(2000):
        value = _random_json(rng, rng.randint(0, 10))
        raw = json.dumps(value).encode()
        for limit in (0, 1, 2, 3, 6):
            assert frame_too_deep(raw, limit) == (_depth(value) > limit), (raw, limit)
    at_limit = ("[" * MAX_FRAME_DEPTH + "]" * MAX_FRAME_DEPTH).encode()
    assert not frame_too_deep(at_limit) and frame_too_deep(b"[" + at_limit + b"]")
    assert not frame_too_deep(b'["' + b"[" * 5000 + b'"]')  # inside a string
    assert frame_too_deep(b"[" * 10_000_000)  # unterminated: still caught, quickly


def test_parse_pruned_replaces_only_what_is_too_deep() -> None:
    value = {"ok": [1, {"b": 2}], "deep": {"a": {"a": {"a": 1}}}, "s": "[[[["}
    pruned, marker = parse_pruned(json.dumps(value), 3)
    assert pruned == {"ok": [1, {"b": 2}], "deep": {"a": {"a": marker}}, "s": "[[[["}
    with pytest.raises(ValueError):
        parse_pruned('{"a": [[[[', 2)


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def project(tmp_path: Path) -> Path:
    servers = {"bad": {"command": PYTHON, "args": [str(SERVER), "stdio", "--deep-tool"]}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return tmp_path


def cli(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=110,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


@pytest.mark.slow
def test_record_finishes_fast_and_keeps_every_good_tool(project: Path) -> None:
    from codemode_gen.generator.fixtures import calls_file_name

    started = time.monotonic()
    proc = cli(project, "record")
    elapsed = time.monotonic() - started
    assert elapsed < CALL_TIMEOUT / 2, (
        f"record took {elapsed:.1f}s"
    )  # no call waited out its timeout
    assert proc.returncode == 0, proc.stdout + proc.stderr  # failed probes do not fail the server
    assert_clean(proc.stdout + proc.stderr)
    out = proc.stdout
    assert "recorded 1 of 1 servers" in out
    for tool, reason in FAILING.items():
        assert tool in out and reason in out, (tool, out)
    assert "deep_schema" in out and "typed as unknown" in out

    folder = project / "fixtures" / "bad"
    tools = {t["name"]: t for t in json.loads((folder / "tools.json").read_text(encoding="utf-8"))}
    assert tools["deep_schema"]["inputSchema"] == {} and "good" in tools and len(tools) == 15
    for name in (
        "good",
        "invalid_utf8",
        "lone_surrogate",
        "garbage_then_good",
        "bad_notification",
        "deep_schema",
    ):
        assert (folder / "calls" / calls_file_name(name)).is_file(), name
    for name in FAILING:
        assert not (folder / "calls" / calls_file_name(name)).exists(), name
    line = json.loads(
        (folder / "calls" / calls_file_name("lone_surrogate")).read_text(encoding="utf-8")
    )
    assert line["result"]["content"][0]["text"] == "a\ufffdb \ufffd \U0001f600 \\ud800"


RUN_SCRIPT = """
import * as bad from '@codemode/servers/bad';
async function attempt(fn) {
  try { return {value: await fn()}; } catch (e) { return {name: e.name, message: e.message}; }
}
const out = {};
for (const name of %s) out[name] = await attempt(() => bad[name]());
out.after = await bad.good();
globalThis.__codemode_result__ = out;
"""


def _check_run_response(response: dict[str, Any]) -> None:
    result = response["result"]
    for tool, reason in FAILING.items():
        assert result[tool]["name"] == "ToolCallError", result[tool]
        assert reason in result[tool]["message"] and "'bad'" in result[tool]["message"], result[
            tool
        ]
    assert result["after"]["calls"] == len(FAILING) + 1  # the same session served the next call
    slowest = max(entry.get("durationMs", 0) for entry in response["toolTrace"])
    assert slowest < FAST * 1000, response["toolTrace"]


@pytest.mark.slow
def test_run_throws_tool_call_error_and_the_next_call_succeeds(project: Path) -> None:
    (project / "script.js").write_text(RUN_SCRIPT % json.dumps(sorted(FAILING)), encoding="utf-8")
    proc = cli(project, "run", "--no-pretty", "script.js")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_clean(proc.stdout + proc.stderr)
    _check_run_response(json.loads(proc.stdout))


@pytest.mark.slow
def test_serve_answers_a_run_with_bad_frames(project: Path) -> None:
    code = RUN_SCRIPT % json.dumps(sorted(FAILING))

    async def go(client: Any) -> Any:
        first = await client.call_tool(
            "codemode.run", {"code": code, "requestedCapabilities": ["bad"]}
        )
        again = await client.call_tool(
            "codemode.run",
            {
                "code": "import { good } from '@codemode/servers/bad';\n"
                "globalThis.__codemode_result__ = (await good()).calls;",
            },
        )
        return first, again

    first, again = against_serve(project, go)
    assert not first.is_error
    _check_run_response(first.structured_content)
    assert again.structured_content["result"] == len(FAILING) + 2  # serve kept the session
    assert_clean((project / "serve.stderr.log").read_text(encoding="utf-8"))
