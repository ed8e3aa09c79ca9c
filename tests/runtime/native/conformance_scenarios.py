"""The scenarios of tests/runtime/native/test_conformance.py and the host that plays them: a
worker process driven over the real pipe protocol (runtime/sandbox/protocol.py), its messages
written down as the host decodes them.

A scenario is the messages the host sends in turn (each `run` and `check` once the previous one
is answered; `pause`, `resume` at once) and how it reacts to what the worker says (`React`:
replies to calls, a `pause` at a chosen call, a follow-up run from a journal). The host here is
deterministic: it answers every call at once, in order, with what the scenario says.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codemode_gen.runtime.sandbox import protocol

#: Each worker gets this long to play a scenario through, exit included: generous, so a loaded
#: machine never reaches it and a hung worker fails its test instead of hanging the suite.
SCENARIO_TIMEOUT_S = 60.0

SEED = [1, 2, 3, 4]
CLOCK_BASE = 1700000000000
HOST = 'import { callTool } from "@codemode/host";\n'

Message = dict[str, Any]
#: What the host sends: a message (encoded by protocol.encode), or a line as it is.
Outgoing = Message | bytes
#: The host's reaction to one worker message, given the scenario's own state.
React = Callable[[Message, dict[str, Any]], list[Outgoing]]


def run(code: str, **fields: Any) -> Message:
    """A `run` message with a fixed seed and clock base (so Math.random and Date agree)."""
    return {
        "op": protocol.RUN,
        "code": code,
        "modules": {},
        "sources": {},
        "limits": {},
        "seed": SEED,
        "clockBase": CLOCK_BASE,
        **fields,
    }


def reply(call_id: int, value: Any) -> bytes:
    """A reply framed the way the host frames it (protocol.encode_reply)."""
    return protocol.encode_reply(call_id, json.dumps(value))


def echo_tools(msg: Message, state: dict[str, Any]) -> list[Outgoing]:
    """Answer each call with its tool and input, or with the SchemaValidationError the bridge
    gives an input the worker refused to forward (`inputRejected`)."""
    if msg["op"] != protocol.CALL:
        return []
    request = msg["request"]
    if "inputRejected" in request:
        why = json.dumps(request["inputRejected"])
        error = {"errorClass": "SchemaValidationError", "message": "rejected " + why}
        return [reply(msg["id"], {"ok": False, "error": error})]
    return [
        reply(
            msg["id"],
            {"ok": True, "value": {"echo": request.get("input"), "tool": request["toolName"]}},
        )
    ]


def pause_at_call(number: int, replay_run: Callable[[Message], list[Message]]) -> React:
    """Echo calls, but hold call `number` of the first run: send `pause`, and once `paused`
    comes (with the journal), `resume` and answer it. When the first run is done, send the runs
    `replay_run(journal)` makes, in turn, answering their calls too."""

    def react(msg: Message, state: dict[str, Any]) -> list[Outgoing]:
        op = msg["op"]
        if op == protocol.CALL:
            state["calls"] = state.get("calls", 0) + 1
            if "journal" not in state and state["calls"] == number:
                state["held"] = msg
                return [{"op": protocol.PAUSE}]
            return echo_tools(msg, state)
        if op == protocol.PAUSED:
            state["journal"] = msg["journal"]
            return [{"op": protocol.RESUME}, *echo_tools(state.pop("held"), state)]
        if op == protocol.DONE and "journal" in state:
            if "next" not in state:
                state["next"] = replay_run(state["journal"])
            if state["next"]:
                return [state["next"].pop(0)]
        return []

    return react


@dataclass(frozen=True)
class Scenario:
    name: str
    messages: tuple[Message, ...]
    react: React = echo_tools


PAUSE_CODE = HOST + (
    'const a = await callTool("s", "t", 1); const n1 = Date.now(); '
    'const b = await callTool("s", "u", 2); '
    "globalThis.__codemode_result__ = [a, b, Math.random() < 2, Date.now() >= n1];"
)
DIVERGE_CODE = HOST + (
    'const a = await callTool("s", "t", 1); await new Promise((r) => setTimeout(r, 20)); '
    "globalThis.__codemode_result__ = a;"
)
TIMER_CODE = HOST + (
    "const out = []; for (let i = 0; i < 3; i++) { "
    "await new Promise((r) => setTimeout(r, 3)); out.push(await callTool('s', 't', i)); "
    "out.push(Date.now() - 1700000000000 >= 0); } "
    "globalThis.__codemode_result__ = [out, Math.random()];"
)


def replay_then_diverge(journal: Message) -> list[Message]:
    """Replay PAUSE_CODE from its journal's first two events, then replay events the run
    never takes (DIVERGE_CODE): `diverged`."""
    again = run(
        PAUSE_CODE,
        journal=True,
        seed=journal["seed"],
        clockBase=journal["clockBase"],
        replay={"events": [1, 2], "clock": journal["clock"]},
    )
    diverge = run(
        DIVERGE_CODE,
        journal=True,
        replay={"events": [1, 2, 3], "clock": []},
        limits={"timeoutMs": 1000},
    )
    return [again, diverge]


def replay_whole(journal: Message) -> list[Message]:
    """Replay TIMER_CODE from its whole journal (timer and call events, clock readings)."""
    replay = {"events": journal["events"], "clock": journal["clock"]}
    return [
        run(
            TIMER_CODE,
            journal=True,
            seed=journal["seed"],
            clockBase=journal["clockBase"],
            replay=replay,
        )
    ]


def unframed_replies(msg: Message, state: dict[str, Any]) -> list[Outgoing]:
    """Replies the worker cannot slice out by their framing (json.dumps' spaces): the reply
    as a JSON value, then as a JSON string holding it; both are read like a framed one."""
    if msg["op"] != protocol.CALL:
        return []
    state["n"] = state.get("n", 0) + 1
    value = {"ok": True, "value": {"b": 1, "2": [1.5, "é", None], "a": True}}
    body = value if state["n"] % 2 else json.dumps(value)
    return [(json.dumps({"op": protocol.REPLY, "id": msg["id"], "reply": body}) + "\n").encode()]


def _scenarios() -> list[Scenario]:
    def one(name: str, *messages: Message, react: React = echo_tools) -> Scenario:
        return Scenario(name, messages, react)

    limits = {"maxConcurrentCalls": 2}
    return [
        one("ok_result", run("globalThis.__codemode_result__ = 1 + 1;")),
        one(
            "logs_of_every_level",
            run(
                'console.log("héllo", {b: 1, a: [1, 2]}); console.warn("w😀"); console.error(null); '
                'console.debug(1.5); globalThis.__codemode_result__ = "x";'
            ),
        ),
        one(
            "logs_truncated_at_max_log_bytes",
            run(
                'for (let i = 0; i < 20; i++) console.log("é".repeat(7) + i);',
                limits={"maxLogBytes": 40},
            ),
        ),
        one(
            "calls_in_sequence_and_in_parallel",
            run(
                HOST + 'const a = await callTool("s", "t", {x: "é"}); '
                'const [b, c] = await Promise.all([callTool("s", "u", 1), callTool("s", "v", [2])]); '
                "globalThis.__codemode_result__ = [a, b, c];"
            ),
        ),
        # Sorted: whether the 5 ms timer fires before the call's reply is a race in either worker.
        one(
            "timers_and_calls_together",
            run(
                HOST + 'const out = []; setTimeout(() => out.push("t1"), 5); '
                'const p = callTool("s", "t", 1).then(() => out.push("c")); '
                "await new Promise((r) => setTimeout(r, 30)); await p; "
                "out.sort(); out.push(Date.now() >= 1700000000000); "
                "globalThis.__codemode_result__ = out;"
            ),
        ),
        one("thrown_type_error", run('throw new TypeError("bad é");')),
        one("thrown_null", run("throw null;")),
        one("syntax_error", run("let let = 1;")),
        one("missing_module", run('import x from "nope.js";')),
        one(
            "module_sources_held_between_runs",
            run(
                'import { v } from "m.js"; globalThis.__codemode_result__ = v;',
                modules={"m.js": "d1"},
                sources={"d1": "export const v = 41 + 1;"},
            ),
            run(
                'import { v } from "m.js"; globalThis.__codemode_result__ = v * 2;',
                modules={"m.js": "d1"},
            ),
            run("globalThis.__codemode_result__ = 0;", modules={"m.js": "d2"}),
        ),
        one("no_budget_left", run("1", budgetMs=0)),
        one(
            "timeout_while_waiting",
            run(
                HOST + "await new Promise(() => setTimeout(() => {}, 100000));",
                limits={"timeoutMs": 300},
            ),
        ),
        one(
            "unawaited_failures",
            run(HOST + 'callTool("s", "t", 1n === 1n ? {} : 0); callTool(1, 2);'),
        ),
        one(
            "oversize_and_deep_input_rejected",
            run(
                HOST + "let d = 1; for (let i = 0; i < 120; i++) d = [d]; const r = []; "
                'for (const inp of [d, "x".repeat(9 * 1024 * 1024)]) { '
                'try { await callTool("sé", "t", inp); } catch (e) { r.push(e.name + ": " + e.message); } } '
                "globalThis.__codemode_result__ = r;"
            ),
        ),
        one(
            "bad_limits_then_a_good_run",
            run("1", limits={"timeoutMs": "soon"}),
            run("globalThis.__codemode_result__ = 5;"),
        ),
        one(
            "check_syntax",
            {"op": protocol.CHECK, "code": "let let = 1;"},
            {"op": protocol.CHECK, "code": "export const a = 1;"},
        ),
        one(
            "unicode_result",
            run(
                'globalThis.__codemode_result__ = {s: "\\ud800 é 😀 \\u2028", k: [1, null, true]};'
            ),
        ),
        one(
            "pause_resume_replay_diverge",
            run(PAUSE_CODE, journal=True),
            react=pause_at_call(2, replay_then_diverge),
        ),
        one(
            "unframed_replies",
            run(
                HOST + "globalThis.__codemode_result__ = "
                '[await callTool("s", "t", 1), await callTool("s", "t", 2)];'
            ),
            react=unframed_replies,
        ),
        one(
            "idle_wake_on_reply_and_timer",
            run(
                HOST + "const t = setTimeout(() => {}, 100000); "
                'const p = callTool("s", "t", 1).then(() => clearTimeout(t)); await p; '
                "const u = setTimeout(() => {}, 100000); setTimeout(() => clearTimeout(u), 5); "
                "globalThis.__codemode_result__ = 1;"
            ),
        ),
        one(
            "realm_kept_or_rebuilt_by_limits",
            run("globalThis.__codemode_result__ = 1;", limits=limits),
            run(
                "globalThis.__codemode_result__ = 2;", limits={**limits, "maxMemoryBytes": 8388608}
            ),
            run("globalThis.__codemode_result__ = 3;"),
        ),
        one(
            "stray_pause_resume_and_reply_between_runs",
            {"op": protocol.PAUSE},
            {"op": protocol.RESUME},
            {"op": protocol.REPLY, "id": 99, "reply": {"ok": True, "value": 1}},
            run("globalThis.__codemode_result__ = 1;"),
        ),
        one(
            "out_of_memory",
            run(
                'const a = []; for (;;) a.push("x".repeat(100000) + a.length);',
                limits={"maxMemoryBytes": 8388608},
            ),
        ),
        one(
            "out_of_memory_in_a_promise_job",
            run(
                "await null; const a = []; for (;;) a.push([a.length, {}]);",
                limits={"maxMemoryBytes": 8388608},
            ),
        ),
        one("busy_loop_interrupted", run("for (;;) {}", limits={"timeoutMs": 300})),
        one(
            "fan_out_under_the_call_cap",
            run(
                HOST + "const r = await Promise.all(Array.from({length: 60}, "
                '(_, i) => callTool("s", "t" + i, i))); globalThis.__codemode_result__ = r.length;',
                limits={"maxConcurrentCalls": 4},
            ),
        ),
        one("rejected_with_a_string", run('await Promise.reject("nope");')),
        one(
            "timers_journal_replay",
            run(TIMER_CODE, journal=True),
            react=pause_at_call(3, replay_whole),
        ),
    ]


SCENARIOS = _scenarios()


def normalise(msg: Message) -> str:
    """One worker message as the comparison sees it: canonical JSON (the host decodes every line,
    so key order and escaping are invisible to it), with only what is read off the wall clock
    masked: a log entry's `timeMs` and a journal's clock readings (real elapsed time since
    `clockBase`, different on every run of either worker; whether there were any is kept)."""
    msg = copy.deepcopy(msg)
    if msg.get("op") == protocol.LOG and "timeMs" in msg:
        msg["timeMs"] = "<wall clock>"
    journal = msg.get("journal") if msg.get("op") == protocol.PAUSED else None
    if isinstance(journal, dict) and journal.get("clock"):
        journal["clock"] = "<wall clock readings>"
    return json.dumps(msg, sort_keys=True, ensure_ascii=False)


@dataclass
class Transcript:
    """What one worker said in a scenario (normalised, in order), how it ended, its stderr."""

    lines: list[str]
    exit: str = "still running"
    stderr: str = ""

    def comparable(self) -> list[str]:
        return [*self.lines, f"exit: {self.exit}"]


async def play(command: list[str], scenario: Scenario) -> Transcript:
    """Start the worker `command`, play `scenario` against it, tell it to exit; kill it if it
    takes longer than SCENARIO_TIMEOUT_S in all (the transcript then says so)."""
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=protocol.MAX_MESSAGE_BYTES,
        start_new_session=True,
    )
    assert proc.stderr is not None
    stderr = asyncio.ensure_future(proc.stderr.read())
    transcript = Transcript([])
    try:
        await asyncio.wait_for(_converse(proc, scenario, transcript), SCENARIO_TIMEOUT_S)
    except TimeoutError:
        transcript.exit = f"hung: killed after {SCENARIO_TIMEOUT_S:.0f} s"
    finally:
        if proc.returncode is None:  # not reaped: its pid is still its session's
            with contextlib.suppress(ProcessLookupError):  # the session: whatever it started too
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 10)
            transcript.stderr = (await asyncio.wait_for(stderr, 10)).decode(errors="replace")
    return transcript


async def _converse(proc: asyncio.subprocess.Process, scenario: Scenario, out: Transcript) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    state: dict[str, Any] = {}
    queue = list(scenario.messages)
    unanswered = 0  # runs and checks sent and not yet answered (`done`, `checked`)

    def send(item: Outgoing) -> None:
        nonlocal unanswered
        if isinstance(item, dict):
            unanswered += item["op"] in (protocol.RUN, protocol.CHECK)
            item = protocol.encode(item)
        stdin.write(item)

    def send_next() -> None:  # up to and including the next message that is answered
        while queue and not unanswered:
            send(queue.pop(0))

    async def receive() -> Message | None:
        line = await stdout.readline()
        if not line:
            return None
        try:
            msg = protocol.decode(line.rstrip(b"\n"))
        except ValueError:  # the host would take it for a crash (WorkerCrashed): so do we
            out.lines.append(f"malformed: {line[:200]!r}")
            return None
        out.lines.append(normalise(msg))
        return msg

    if (await receive() or {}).get("op") != protocol.READY:
        out.exit = "no ready"
        return
    send_next()
    while unanswered:
        msg = await receive()
        if msg is None:
            break
        if msg["op"] in (protocol.DONE, protocol.CHECKED):
            unanswered -= 1
        for item in scenario.react(msg, state):
            send(item)
        send_next()
        with contextlib.suppress(ConnectionError):  # it died: the next read says so
            await stdin.drain()
    with contextlib.suppress(ConnectionError):
        send({"op": protocol.EXIT})
        await stdin.drain()
    out.exit = f"code {await proc.wait()}"
