"""Resumable runs (runtime/host/resume.py, runtime/sandbox/worker.py's journal, runtime/frontends/input_required.py):
a journaled run replayed in a fresh worker does exactly what it did, and the state that carries
it is sealed, bounded and refused with a reason.

The replay tests drive real sandbox workers (QuickJS) through `Sandbox.run` with the hooks a
resumable run uses; the host side is a plain async function whose replies come back after random
delays, so the first run's interleaving of replies, timers and clock reads is whatever the
machine made of it, and the replay must match it anyway.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import pytest

from codemode_gen.errors import UserError
from codemode_gen.runtime.frontends.input_required import (
    STATE_SECRET_ENV,
    StateRejected,
    StateSealer,
    resolve_state_secret,
)
from codemode_gen.runtime.host.resume_state import (
    LoggedCall,
    PendingAsk,
    RunState,
    StateError,
    decode_state,
    encode_state,
)
from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool
from codemode_gen.runtime.sandbox.protocol import HostReply
from codemode_gen.runtime.sandbox.run import RunHandle
from tests.runtime.sandbox.test_pool import MODULES

pytestmark = pytest.mark.timeout(120)

SECRET = "0123456789abcdef0123456789abcdef-test"

# Replies, timers, Date and Math.random, interleaved by the replies' random delays; the script
# logs everything it sees, then waits on a call the host answers only in the second run.
SCRIPT = """
import { echo } from "@codemode/servers/notes";
const out = (...values) => console.log(JSON.stringify(values));
out("start", Date.now(), new Date().toISOString(), Math.random());
for (const ms of [0, 3, 7, 12]) setTimeout(() => out("timer", ms, Date.now(), Math.random()), ms);
await Promise.all([1, 2, 3, 4, 5, 6].map(async (n) => {
  const got = await echo({ n });
  out("reply", n, got, Date.now());
  if (n % 2 === 0) { const again = await echo({ n: n * 10 }); out("again", again, Math.random()); }
}));
const clock = [];
for (let i = 0; i < 2000; i++) clock.push(Date.now());
out("clock", clock[0], clock[clock.length - 1]);
const answer = await echo({ stop: true });
out("resumed", answer, Date.now() >= clock[0]);
"""


class Hooks:
    """The sandbox side of a resumable run, as runtime/resume.Resumable has it: pause once the
    host holds the `stop` call, keep the journal, end the run."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields
        self.handle: RunHandle | None = None
        self.paused: dict[str, Any] | None = None

    def run_fields(self) -> dict[str, Any]:
        return self.fields

    def started(self, handle: RunHandle) -> None:
        self.handle = handle

    def on_message(self, message: dict[str, Any]) -> None:
        if message.get("op") == "paused" and self.handle is not None:
            self.paused = message
            self.handle.stop([])
        elif message.get("op") == "diverged" and self.handle is not None:
            self.handle.stop(
                [{"severity": "error", "code": "RESUME_DIVERGED", "message": message["message"]}]
            )


async def first_run(sandbox: Sandbox) -> tuple[list[str], dict[str, Any], dict[int, Any]]:
    hooks = Hooks({"journal": True})
    replies: dict[int, Any] = {}
    seq = 0

    async def host(request: dict[str, Any]) -> HostReply:
        nonlocal seq
        seq += 1
        mine = seq
        if request.get("input", {}).get("stop"):
            assert hooks.handle is not None
            hooks.handle.pause()
            await asyncio.Event().wait()  # the answer comes in the next run
        await asyncio.sleep(random.uniform(0, 0.02))
        reply: HostReply = {
            "ok": True,
            "value": {"n": request["input"]["n"], "at": time.monotonic_ns() % 1000},
        }
        replies[mine] = reply
        return reply

    out = await sandbox.run(
        SCRIPT, MODULES, host, Limits.from_json({"timeoutMs": 20_000}), hooks=hooks
    )
    assert hooks.paused is not None, out
    return [entry["message"] for entry in out["logs"]], hooks.paused, replies


async def replay(sandbox: Sandbox, paused: dict[str, Any], replies: dict[int, Any]) -> Response:
    journal = paused["journal"]
    hooks = Hooks(
        {
            "journal": True,
            "seed": journal["seed"],
            "clockBase": journal["clockBase"],
            "replay": {"events": journal["events"], "clock": journal["clock"]},
        }
    )
    seq = 0

    async def host(request: dict[str, Any]) -> HostReply:
        nonlocal seq
        seq += 1
        if seq in replies:
            return replies[seq]  # at once: the journal decides when the script sees it
        assert request["input"] == {"stop": True}
        return {"ok": True, "value": "approved"}

    return await sandbox.run(
        SCRIPT, MODULES, host, Limits.from_json({"timeoutMs": 20_000}), hooks=hooks
    )


@pytest.mark.usefixtures("sandbox_worker")  # on both workers (tests/conftest.py)
def test_a_journaled_run_replays_identically_in_a_fresh_worker() -> None:
    async def scenario() -> tuple[list[str], dict[str, Any], Response]:
        async with Sandbox(WorkerPool(2)) as sandbox:
            logs, paused, replies = await first_run(sandbox)
            await asyncio.sleep(0.3)  # the human's answer takes a while
            return logs, paused, await replay(sandbox, paused, replies)

    logs, paused, resumed = asyncio.run(asyncio.wait_for(scenario(), 60))
    journal = paused["journal"]
    assert paused["issued"] == 10 and journal["overflow"] is False
    assert journal["events"].count(0) >= 1 and sorted(
        e for e in journal["events"] if e > 0
    ) == list(range(1, 10))
    assert (
        sum(count for _, count in journal["clock"]) >= 2000 and len(journal["clock"]) < 200
    )  # runs of equal ms
    assert resumed["diagnostics"] == [], resumed["diagnostics"]
    again = [entry["message"] for entry in resumed["logs"]]
    assert (
        again[: len(logs)] == logs
    )  # every value, in the same order: replies, timers, clock, random
    (last,) = again[len(logs) :]
    assert json.loads(last) == ["resumed", "approved", True]


@pytest.mark.usefixtures("sandbox_worker")  # on both workers (tests/conftest.py)
def test_a_replay_whose_script_makes_fewer_calls_is_reported_as_diverged() -> None:
    async def scenario() -> Response:
        async with Sandbox(WorkerPool(1)) as sandbox:
            _, paused, replies = await first_run(sandbox)
            journal = dict(paused["journal"])
            journal["events"] = [*journal["events"], 42]  # a reply to a call the script never makes
            return await replay(sandbox, {**paused, "journal": journal}, replies)

    out = asyncio.run(asyncio.wait_for(scenario(), 60))
    (diverged,) = out["diagnostics"]
    assert diverged["code"] == "RESUME_DIVERGED"
    assert diverged["message"] == (
        "the resumed script stopped after 10 tool calls where the earlier round went on to call #42"
    )
    assert "resumed" not in " ".join(entry["message"] for entry in out["logs"])  # stopped there


def test_the_state_round_trips_compressed_and_anything_else_is_refused() -> None:
    state = RunState(
        tool="codemode.run",
        args="abc",
        deadline=time.time() + 60,
        nonce="n1",
        round=1,
        issued=3,
        calls=[
            LoggedCall(
                1,
                "id1",
                json.dumps({"ok": True, "value": "x" * 10_000}),
                {"serverId": "s", "toolName": "t", "durationMs": 1, "ok": True},
            )
        ],
        pending=[PendingAsk(2, "id2", "s", "u")],
        journal={
            "events": [1, 0, -1],
            "clock": [[0, 5], [3, 1]],
            "seed": [1, 2, 3, 4],
            "clockBase": 7,
        },
        for_run=[("demo", "write_query")],
    )
    data = encode_state(state)
    assert len(data) < 1000  # the result's 10,000 characters compress away
    assert decode_state(data) == state
    for junk in (
        b"not zlib",
        __import__("zlib").compress(b'{"v": 99}'),
        __import__("zlib").compress(b"[1]"),
    ):
        with pytest.raises(StateError):
            decode_state(junk)


def test_a_sealed_state_opens_only_with_its_key_unaltered_and_once() -> None:
    state = RunState(
        tool="codemode.run",
        args="abc",
        deadline=time.time() + 60,
        nonce="n2",
        round=1,
        issued=1,
        calls=[],
        pending=[PendingAsk(1, "id", "s", "t")],
        journal={"events": [], "clock": []},
        for_run=[],
    )
    sealer = StateSealer(SECRET)
    token = sealer.seal(encode_state(state))
    assert StateSealer(SECRET).open(token) == state  # another instance with the same secret
    with pytest.raises(StateRejected, match="another key") as other:
        StateSealer(None).open(token)
    assert "--state-secret" in other.value.hint and STATE_SECRET_ENV in other.value.hint
    altered = token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:]
    with pytest.raises(StateRejected, match="altered"):
        sealer.open(altered)
    with pytest.raises(StateRejected, match="not a string"):
        sealer.open(12)
    sealer.use(state)
    with pytest.raises(StateRejected, match="used already"):
        sealer.use(state)


def test_the_sealing_secret_comes_from_the_option_or_the_environment_and_is_never_weak() -> None:
    assert resolve_state_secret(None, {}) is None
    assert resolve_state_secret(SECRET, {STATE_SECRET_ENV: "x"}) == SECRET  # the option wins
    assert resolve_state_secret(None, {STATE_SECRET_ENV: f" {SECRET} "}) == SECRET
    for option, environ in (
        ("short", {}),
        (None, {STATE_SECRET_ENV: ""}),
        (None, {STATE_SECRET_ENV: "x" * 31}),
    ):
        with pytest.raises(UserError, match="32 characters"):
            resolve_state_secret(option, environ)
