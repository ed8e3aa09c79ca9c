"""Spec §11 and §3.3: lone surrogates, and script-controlled text meeting quadratic host code.

A server id or tool name with a lone surrogate (legal in a JS string) reached toolTrace as is:
`codemode-gen run` crashed with UnicodeEncodeError and `serve` exited. Every script-chosen
string is now sanitised before it enters the trace or a message (§3.3.2, §11: no host-object
or terminal subversion), and `run`/`serve` always write UTF-8.

The worker's stack-trace regex was quadratic in the `stack` string, which a script controls
(`throw {stack: ...}`): an immediate throw was reported as a timeout. Stack parsing is now
linear and bounded, and so is every other host walk over script text (error messages, names
passed to difflib). §3.3.4: the failure is the script's own UNCAUGHT_EXCEPTION, at once.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.runtime import jsonsafe, script_errors
from codemode_gen.runtime.limits import MAX_DIAGNOSTIC_CHARS, MAX_NAME_CHARS

from .script_support import (
    PROMPT_S,
    TICKS,
    HostThread,
    assert_section_3_3,
    assert_still_serves,
    codes,
    errors,
    run_cli,
    serve_run,
    serve_session,
    timed,
    within_deadline,
)

pytestmark = pytest.mark.timeout(180)

TIMEOUT_MS = 4000
# What an immediate throw may take at most, however hostile its text: scheduling slack, never a
# quadratic pass over it (minutes) nor the run's timeout.
FAST_S = PROMPT_S

HOSTILE_NAMES = """
import { callTool } from '@codemode/host';
const names = [
  ['s\\ud800', 'tick'], ['s', 'tick\\udc00'], ['\\udfff', '\\ud83d'],
  ['s\\u001b[31mred', 'tick\\r\\nforged'], ['s\\u202eevil', 'tick\\u0000'],
];
const seen = [];
for (const [server, tool] of names) {
  try { await callTool(server, tool, {}); seen.push('no error'); }
  catch (e) { seen.push([e.name, e.message, e.serverId, e.toolName]); }
}
globalThis.__codemode_result__ = seen;
"""


def clean(text: str) -> bool:
    """No lone surrogate, no control or bidi character."""
    return jsonsafe.safe_name(text, len(text) + 1) == text and not any(
        0xD800 <= ord(c) <= 0xDFFF for c in text
    )


def test_s3_3_2_lone_surrogates_and_control_characters_in_names_never_reach_the_trace(
    host: HostThread,
) -> None:
    before = assert_still_serves(host)
    response, elapsed = timed(host, HOSTILE_NAMES, limits={"timeoutMs": TIMEOUT_MS})
    assert within_deadline(elapsed, TIMEOUT_MS)
    assert not errors(response), response["diagnostics"]
    assert_section_3_3(response)
    seen = response["result"]
    assert [s[0] for s in seen] == [
        "ServerNotFoundError",
        "ToolNotFoundError",
        "ServerNotFoundError",
        "ServerNotFoundError",
        "ServerNotFoundError",
    ]
    for _name, message, server_id, tool_name in seen:
        for text in (message, server_id, tool_name or ""):
            assert clean(text), text
    trace = response["toolTrace"]
    assert [t["serverId"] for t in trace] == [
        "s\ufffd",
        "s",
        "\ufffd",
        "s\ufffd[31mred",
        "s\ufffdevil",
    ]
    assert [t["toolName"] for t in trace] == [
        "tick",
        "tick\ufffd",
        "\ufffd",
        "tick\ufffd\ufffdforged",
        "tick\ufffd",
    ]
    assert all(clean(t["serverId"]) and clean(t["toolName"]) and clean(t["error"]) for t in trace)
    assert_still_serves(host, before)  # nothing was sent: `tick` never ran


def test_s7_2_hostile_property_names_are_sanitised_in_paths(host: HostThread) -> None:
    code = (
        "import { records } from '@codemode/servers/s';\n"
        "const key = '\\ud800' + 'k'.repeat(1e6);\n"
        "try { await records({items: [{id: 1, [key]: 2}]}); } catch (e) {\n"
        "  globalThis.__codemode_result__ = {name: e.name, path: e.path, message: e.message}; }"
    )
    response, _ = timed(host, code, limits={"timeoutMs": TIMEOUT_MS})
    result = response["result"]
    assert result["name"] == "SchemaValidationError"
    assert result["path"].startswith("/items/0/\ufffdkkk") and len(result["path"]) < 1000
    assert clean(result["message"]) and len(result["message"]) < 2000
    [trace] = response["toolTrace"]
    assert clean(trace["error"]) and len(trace["error"]) <= 300
    json.dumps(response, ensure_ascii=False).encode("utf-8")


def test_s11_huge_names_cost_nothing_quadratic(host: HostThread) -> None:
    """A megabyte name: bounded in messages and trace, and no difflib over it (quadratic)."""
    code = (
        "import { callTool } from '@codemode/host';\nconst big = 'n'.repeat(1e6);\nconst out = [];\n"
        "for (const [s, t] of [[big, 'tick'], ['s', big]]) {\n"
        "  try { await callTool(s, t, {}); } catch (e) { out.push([e.name, e.message.length]); } }\n"
        "globalThis.__codemode_result__ = out;"
    )
    response, elapsed = timed(host, code, limits={"timeoutMs": TIMEOUT_MS})
    assert elapsed < FAST_S
    assert [r[0] for r in response["result"]] == ["ServerNotFoundError", "ToolNotFoundError"]
    assert all(length < 2 * MAX_NAME_CHARS + 200 for _, length in response["result"])
    assert all(
        len(t["serverId"]) <= MAX_NAME_CHARS + 1 and len(t["toolName"]) <= MAX_NAME_CHARS + 1
        for t in response["toolTrace"]
    )


@pytest.mark.parametrize(
    "throw",
    [
        # the old frame regex backtracked quadratically on each of these
        "const e = new Error('boom'); e.stack = 'at ' + ' ('.repeat(200000) + 'x'; throw e;",
        "throw {message: 'boom', stack: 'at a' + ' '.repeat(400000) + 'b'};",
        "const e = new Error('boom'); e.stack = ('    at f (agent.js:1:' + '1'.repeat(5000) + 'x)\\n').repeat(2000); throw e;",
        # a million frames, and a message of 20 MB
        "const e = new Error('boom'); e.stack = '    at f (agent.js:1:1)\\n'.repeat(1e6); throw e;",
        "throw new Error('boom' + 'x'.repeat(2e7));",
        "throw new Error('module not found: ' + 'm'.repeat(2e7));",
    ],
)
def test_s3_3_4_an_immediate_throw_is_reported_at_once_whatever_its_text(
    host: HostThread, throw: str
) -> None:
    response, elapsed = timed(
        host,
        "console.log('before');\n" + throw,
        limits={"timeoutMs": TIMEOUT_MS, "maxMemoryBytes": 256 << 20},
    )
    assert elapsed < FAST_S, elapsed
    [error] = errors(response)
    assert error["code"] in ("UNCAUGHT_EXCEPTION", "IMPORT_FAILURE"), error  # not SANDBOX_LIMIT
    assert "boom" in error["message"] or "cannot import" in error["message"]
    assert len(error["message"]) <= MAX_DIAGNOSTIC_CHARS + 100
    assert response["logs"][0]["message"] == "before"
    assert_still_serves(host)


# The regexes map_stack used before (quadratic on long lines): the reference for its semantics.
_OLD_FRAME = re.compile(r"^\s*at (?P<fn>.*?) \((?P<loc>.*)\)\s*$|^\s*at (?P<bare>.*?)\s*$")
_OLD_LOC = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::(?P<col>\d+))?$")


def _old_map_stack(stack: str, modules: list[str]) -> list[str]:
    known = (set(modules) | {"agent.js"}) - {"@codemode/errors"}
    frames = []
    for line in stack.splitlines():
        m = _OLD_FRAME.match(line)
        if not m:
            continue
        fn = m.group("fn")
        loc = m.group("loc") if fn is not None else m.group("bare")
        lm = _OLD_LOC.match(loc or "")
        if lm is None or lm.group("file") not in known:
            continue
        frames.append(f"    at {fn} ({loc})" if fn is not None else f"    at {loc}")
    return frames[:20]


def test_s3_3_stack_frames_are_mapped_as_before() -> None:
    """The linear frame parser keeps the old regexes' semantics (checked on random stacks)."""
    stack = (
        "Error: x\n    at inner (agent.js:3:7)\n    at f (a (b)) (agent.js:9:1)\n"
        "    at agent.js:12\n    at run (eval_script:1:1)\n    at g (@codemode/host:1:2)\n"
    )
    assert script_errors.map_stack(stack, ["@codemode/host"]) == [
        "    at inner (agent.js:3:7)",
        "    at agent.js:12",
        "    at g (@codemode/host:1:2)",
    ]
    assert script_errors.agent_location(stack) == "3:7"
    assert (
        script_errors.agent_location("    at x (agent.js:" + "1" * 2000 + ")") is None
    )  # over MAX_FRAME_CHARS
    rng = random.Random(8)
    hits = 0

    def pick(*options: str) -> str:
        return rng.choice(options)

    for _ in range(3000):
        lines = []
        for _ in range(rng.randint(1, 4)):
            loc = pick("agent.js", "agent.js", "@codemode/host", "agent.js:1", "", "x", " agent.js")
            loc += pick(":", ":", ":", "", "::") + pick("1", "23", "23", "", "x")
            loc += pick("", ":4", ":4", ":", ":4:5", ": 4")
            fn = pick("f", "f", "", "a (b)", "x y", "(", ")", "f )")
            frame = pick(f"{fn} ({loc})", f"{fn} ({loc})", loc, loc, f"{fn} ({loc}", f"{fn}({loc})")
            lines.append(
                pick("", "    ", "    ", "\t")
                + pick("at ", "at ", "at ", "at", "At ", "at  ")
                + frame
                + pick("", "", " ", ")", "\r")
            )
        stack = "\n".join(lines)
        expected = _old_map_stack(stack, ["@codemode/host"])
        hits += bool(expected)
        assert script_errors.map_stack(stack, ["@codemode/host"]) == expected, repr(stack)
    assert hits > 200  # the samples do exercise mapped frames


# ---------------------------------------------------------------------------- the CLI and serve


@pytest.mark.slow
def test_s3_3_run_cli_prints_utf8_for_hostile_names_and_stacks(project: Path) -> None:
    code = (
        HOSTILE_NAMES
        + "\nconsole.log('\\ud800 alone');\nthrow {message: 'x', stack: 'at a' + ' '.repeat(400000) + 'b'};\n"
    )
    proc, response = run_cli(project, code, "--pretty")
    assert proc.returncode == 1
    assert codes(response, "error") == ["UNCAUGHT_EXCEPTION"]
    assert response["logs"][0]["message"] == "\ufffd alone"
    assert response["toolTrace"][0]["serverId"] == "s\ufffd"
    assert "\x1b" not in proc.stderr  # --pretty shows the trace: no escape sequence from a name


@pytest.mark.slow
def test_s3_3_serve_survives_hostile_names(project: Path) -> None:
    async def body(client: Any) -> Any:
        hostile = await serve_run(client, HOSTILE_NAMES)
        after = await serve_run(
            client, "import { tick } from '@codemode/servers/s';\nawait tick();\n" + TICKS
        )
        return hostile, after

    hostile, after = serve_session(project, body)
    assert [t["serverId"] for t in hostile["toolTrace"]][:3] == ["s\ufffd", "s", "\ufffd"]
    assert after["result"] == 1 and not errors(after)
