"""runtime/sandbox/pool.py: real worker processes running real QuickJS (jsbox).

`host_call` here is the host side written as a plain async function (what the bridge does in
production); nothing of QuickJS or MCP is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits, SandboxLimitExceeded
from codemode_gen.runtime.response import Response
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool, protocol
from codemode_gen.runtime.sandbox.worker_process import WorkerKind
from tests.conftest import HANG_S, PROMPT_S, sandbox_worker_pids, sandbox_workers

NOTES = """
import { callTool, deepFreeze } from "@codemode/host";
export async function echo(input) { return callTool("notes", "echo", input); }
export async function slow(input) { return callTool("notes", "slow", input); }
export async function fail(input) { return callTool("notes", "fail", input); }
export const __meta__ = deepFreeze({ serverId: "notes", tools: [{ toolName: "echo", exportName: "echo" }] });
deepFreeze([echo, slow, fail]);  // as generated modules do (templates/server.js.j2)
"""
MODULES = {"@codemode/servers/notes": NOTES}


class Host:
    """A host side that echoes, sleeps or fails, and records what it saw."""

    def __init__(self, barrier: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.cancelled = 0
        # With `barrier`, a `slow` call returns once that many calls are in flight at once (or
        # after PROMPT_S): concurrency proven by overlap, not by timing.
        self.barrier = barrier
        self._all_in: asyncio.Event | None = None

    async def __call__(self, request: dict[str, Any]) -> protocol.HostReply:
        self.requests.append(request)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            tool = request["toolName"]
            if tool == "slow" and self.barrier:
                self._all_in = self._all_in or asyncio.Event()
                if self.active >= self.barrier:
                    self._all_in.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._all_in.wait(), PROMPT_S)
                return {"ok": True, "value": request.get("input")}
            if tool == "slow":
                await asyncio.sleep(request.get("input", {}).get("ms", 100) / 1000)
                return {"ok": True, "value": request.get("input")}
            if tool == "fail":
                return {
                    "ok": False,
                    "error": {
                        "errorClass": "ToolCallError",
                        "message": "boom",
                        "hint": "try again",
                        "code": -32000,
                    },
                }
            return {"ok": True, "value": request.get("input")}
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1


# Every test here runs on both sandbox workers (tests/conftest.py `sandbox_worker`).
pytestmark = pytest.mark.usefixtures("sandbox_worker")


@pytest.fixture(scope="module")
def env(sandbox_worker: WorkerKind) -> Iterator[tuple[asyncio.AbstractEventLoop, Sandbox]]:
    """A warm pool of `sandbox_worker`'s kind, shared by the module's tests of that kind."""
    loop = asyncio.new_event_loop()
    sandbox = Sandbox(WorkerPool(2))
    loop.run_until_complete(sandbox.start())
    yield loop, sandbox
    loop.run_until_complete(sandbox.aclose())
    loop.close()


def run(
    env: tuple[asyncio.AbstractEventLoop, Sandbox], code: str, host: Any = None, **limits: Any
) -> Response:
    loop, sandbox = env
    return loop.run_until_complete(
        sandbox.run(code, MODULES, host or Host(), Limits.from_json({"timeoutMs": 5000, **limits}))
    )


def codes(response: Response) -> list[str]:
    return [d["code"] for d in response["diagnostics"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/cmdline")
def test_the_pool_runs_the_workers_of_the_kind_the_test_is_for(
    env: Any, sandbox_worker: WorkerKind
) -> None:
    assert run(env, "globalThis.__codemode_result__ = 1;")["result"] == 1
    kinds = sandbox_workers()
    assert kinds and set(kinds.values()) == {sandbox_worker}, kinds


def test_s3_2_1_module_semantics_with_top_level_await(env: Any) -> None:
    host = Host()
    r = run(
        env,
        """
import { echo } from "@codemode/servers/notes";
const got = await echo({ q: "hi" });
export const unused = 1;
globalThis.__codemode_result__ = { got, kinds: [typeof eval, typeof setTimeout] };
""",
        host,
    )
    assert r["diagnostics"] == []
    assert r["result"] == {"got": {"q": "hi"}, "kinds": ["undefined", "function"]}
    assert host.requests == [
        {"op": "call", "serverId": "notes", "toolName": "echo", "input": {"q": "hi"}}
    ]


def test_s3_2_2_result_is_null_when_unset(env: Any) -> None:
    r = run(env, "const x = 1;")
    assert r == {"logs": [], "result": None, "diagnostics": []}


def test_input_absent_when_called_without_argument(env: Any) -> None:
    host = Host()
    run(env, 'import { echo } from "@codemode/servers/notes"; await echo();', host)
    assert host.requests == [{"op": "call", "serverId": "notes", "toolName": "echo"}]


def test_s7_1_error_reply_becomes_class_with_fields_and_script_continues(env: Any) -> None:
    r = run(
        env,
        """
import { fail, echo } from "@codemode/servers/notes";
import { ToolCallError, CodemodeError } from "@codemode/errors";
let caught;
try { await fail({}); } catch (e) {
  caught = { name: e.name, message: e.message, hint: e.hint, code: e.code, serverId: e.serverId, toolName: e.toolName,
             isTCE: e instanceof ToolCallError, isBase: e instanceof CodemodeError, isError: e instanceof Error };
}
globalThis.__codemode_result__ = { caught, after: await echo(1) };
""",
    )
    assert r["diagnostics"] == []
    assert r["result"] == {
        "caught": {
            "name": "ToolCallError",
            "message": "boom",
            "hint": "try again",
            "code": -32000,
            "serverId": "notes",
            "toolName": "fail",
            "isTCE": True,
            "isBase": True,
            "isError": True,
        },
        "after": 1,
    }


def test_s3_3_4_uncaught_codemode_error_carries_class_and_hint(env: Any) -> None:
    r = run(
        env,
        'import { fail } from "@codemode/servers/notes";\nconsole.log("before");\nawait fail({});\n',
    )
    assert r["result"] is None
    [d] = r["diagnostics"]
    assert d["code"] == "UNCAUGHT_EXCEPTION"
    assert d["errorClass"] == "ToolCallError"
    assert d["hint"] == "try again"
    assert d["path"] == "3:7"
    assert [e["message"] for e in r["logs"]] == ["before"]


def test_s10_1_promise_all_runs_calls_concurrently(env: Any) -> None:
    host = Host(barrier=20)
    r = run(
        env,
        """
import { slow } from "@codemode/servers/notes";
const out = await Promise.all(Array.from({ length: 20 }, (_, i) => slow({ i })));
globalThis.__codemode_result__ = out.map((o) => o.i);
""",
        host,
        timeoutMs=int(HANG_S * 1000),
    )
    assert r["result"] == list(range(20))
    assert host.max_active == 20  # all twenty in flight at once: the barrier let them go together


def test_concurrent_calls_are_capped_in_js_with_a_queue(env: Any) -> None:
    host = Host()
    r = run(
        env,
        """
import { slow } from "@codemode/servers/notes";
const out = await Promise.all(Array.from({ length: 30 }, (_, i) => slow({ ms: 20, i })));
globalThis.__codemode_result__ = out.length;
""",
        host,
        maxConcurrentCalls=3,
    )
    assert r["diagnostics"] == [] and r["result"] == 30
    assert host.max_active == 3


def test_fire_and_forget_calls_and_timers_finish_before_the_run_ends(env: Any) -> None:
    host = Host()
    r = run(
        env,
        """
import { slow } from "@codemode/servers/notes";
slow({ ms: 100 }).then(() => console.log("call done"));
setTimeout(() => console.log("timer done"), 150);
const t = setTimeout(() => console.log("never"), 10);
clearTimeout(t);
""",
        host,
    )
    assert r["diagnostics"] == []
    assert [e["message"] for e in r["logs"]] == ["call done", "timer done"]


def test_timers_fire_in_due_then_creation_order(env: Any) -> None:
    r = run(
        env,
        """
const order = [];
setTimeout(() => order.push("c"), 30);
setTimeout(() => order.push("a"), 0);
setTimeout(() => order.push("b"), 0);
setTimeout((x, y) => order.push(x + y), 10, "d", "e");
await new Promise((resolve) => setTimeout(resolve, 60));
globalThis.__codemode_result__ = order;
""",
    )
    assert r["result"] == ["a", "b", "de", "c"]


def test_s7_4_host_limit_ends_run_keeps_logs_and_cancels_in_flight_calls(env: Any) -> None:
    host = Host()

    async def limited(request: dict[str, Any]) -> protocol.HostReply:
        if request["toolName"] == "echo":
            raise SandboxLimitExceeded("maxToolCalls", 3, "too many tool calls")
        return await host(request)

    r = run(
        env,
        f"""
import {{ slow, echo }} from "@codemode/servers/notes";
console.log("started");
const pending = slow({{ ms: {HANG_S * 1000} }});
try {{ await echo(1); }} catch (e) {{ console.log("caught?!"); }}
await pending;
""",
        limited,
    )
    assert r["result"] is None
    [d] = r["diagnostics"]
    assert d["code"] == "SANDBOX_LIMIT" and d["errorClass"] == "SandboxLimitError"
    assert "maxToolCalls" in d["message"]
    assert [e["message"] for e in r["logs"]] == ["started"]
    assert host.cancelled == 1


def test_sandbox_limit_error_reply_also_ends_the_run(env: Any) -> None:
    async def limited(request: dict[str, Any]) -> protocol.HostReply:
        return {
            "ok": False,
            "error": {
                "errorClass": "SandboxLimitError",
                "message": "over",
                "limit": "maxToolCalls",
                "value": 0,
            },
        }

    r = run(
        env,
        'import { echo } from "@codemode/servers/notes";\ntry { await echo(1); } catch {}\nglobalThis.__codemode_result__ = 1;',
        limited,
    )
    assert r["result"] is None and codes(r) == ["SANDBOX_LIMIT"]


def test_host_exception_does_not_leak_into_the_sandbox(env: Any) -> None:
    async def broken(request: dict[str, Any]) -> protocol.HostReply:
        raise RuntimeError("secret at /home/host/codemode_gen/runtime/bridge.py line 12")

    r = run(
        env,
        """
import { echo } from "@codemode/servers/notes";
try { await echo(1); } catch (e) { globalThis.__codemode_result__ = [e.name, e.message, String(e.stack)]; }
""",
        broken,
    )
    name, message, stack = r["result"]
    assert name == "ToolCallError"
    assert "secret" not in message and ".py" not in message and ".py" not in stack


def test_s3_2_4_timeout_of_a_busy_loop(env: Any) -> None:
    t = time.monotonic()
    r = run(env, 'console.log("spinning"); while (true) {}', timeoutMs=500)
    assert time.monotonic() - t < PROMPT_S  # the loop never ends by itself
    [d] = r["diagnostics"]
    assert d["code"] == "SANDBOX_LIMIT" and "timeoutMs" in d["message"]
    assert r["logs"][0]["message"] == "spinning"


def test_watchdog_kills_a_worker_stuck_in_one_native_operation(env: Any) -> None:
    # One splice over a million elements per iteration: the engine's interrupt check does not
    # run inside the native call, so without the watchdog this runs for minutes.
    t = time.monotonic()
    r = run(
        env,
        """
console.log("before the stuck loop");
const a = new Array(1e6).fill(0);
for (;;) { a.splice(0, 1); a.push(0); }
""",
        timeoutMs=500,
        maxMemoryBytes=256 * 1024 * 1024,
    )
    elapsed = time.monotonic() - t
    assert elapsed < PROMPT_S, elapsed
    assert codes(r) == ["SANDBOX_LIMIT"] and r["result"] is None
    assert [e["message"] for e in r["logs"]] == ["before the stuck loop"]
    # The pool replaced the killed worker: the next run works.
    assert run(env, "globalThis.__codemode_result__ = 2;")["result"] == 2


def test_s3_2_4_memory_limit(env: Any) -> None:
    r = run(
        env,
        'console.log("go"); const a = []; for (;;) a.push("x".repeat(1000) + a.length);',
        maxMemoryBytes=8 * 1024 * 1024,
    )
    assert codes(r) == ["SANDBOX_LIMIT"]
    assert "maxMemoryBytes" in r["diagnostics"][0]["message"]
    assert r["logs"][0]["message"] == "go"


def test_memory_limit_when_the_engine_loses_the_error(env: Any) -> None:
    # A Map growing until OOM comes back from the engine without a message.
    r = run(
        env,
        "const m = new Map(); for (let i = 0; ; i++) m.set(i, [i]);",
        maxMemoryBytes=8 * 1024 * 1024,
    )
    assert codes(r) == ["SANDBOX_LIMIT"]


def test_s1_4_fresh_runtime_per_run(env: Any) -> None:
    first = run(
        env, "globalThis.leak = 41; globalThis.__codemode_result__ = typeof globalThis.leak;"
    )
    assert first["result"] == "number"
    for _ in range(3):  # whichever pooled worker serves the run
        r = run(env, "globalThis.__codemode_result__ = typeof globalThis.leak;")
        assert r["result"] == "undefined"


def test_s3_3_1_log_truncation_keeps_prefix_and_warns(env: Any) -> None:
    r = run(env, 'for (let i = 0; i < 1000; i++) console.log("line " + i);', maxLogBytes=100)
    logs = r["logs"]
    assert sum(len(e["message"].encode()) for e in logs[:-1]) == 100
    assert logs[0]["message"] == "line 0"
    assert (
        logs[-1]["level"] == "warn"
        and "maxLogBytes" in logs[-1]["message"]
        and "100" in logs[-1]["message"]
    )
    assert r["diagnostics"] == []


def test_cancelling_run_kills_the_worker_and_cancels_host_calls(env: Any) -> None:
    loop, sandbox = env
    host = Host()

    async def scenario() -> None:
        task = asyncio.ensure_future(
            sandbox.run(
                'import { slow } from "@codemode/servers/notes"; await slow({ ms: 10000 });',
                MODULES,
                host,
                Limits.from_json({"timeoutMs": 20000}),
            )
        )
        while not host.requests:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    loop.run_until_complete(scenario())
    assert host.cancelled == 1
    assert run(env, "globalThis.__codemode_result__ = 3;")["result"] == 3


def test_concurrent_runs_use_separate_workers(env: Any) -> None:
    loop, sandbox = env

    host = Host(barrier=3)  # one host for the three runs: each call returns once all three are in

    async def both() -> list[dict[str, Any]]:
        code = 'import { slow } from "@codemode/servers/notes"; globalThis.__codemode_result__ = (await slow({ n: %d })).n;'
        return await asyncio.gather(
            *(
                sandbox.run(code % i, MODULES, host, Limits(timeoutMs=int(HANG_S * 1000)))
                for i in range(3)
            )
        )

    results = loop.run_until_complete(both())
    assert [r["result"] for r in results] == [0, 1, 2]
    assert host.max_active == 3


def test_lone_surrogates_cross_the_boundary_safely(env: Any) -> None:
    host = Host()
    r = run(
        env,
        r"""
import { echo } from "@codemode/servers/notes";
const back = await echo({ s: "a\uD800b" });
console.log("x\uDC00y");
globalThis.__codemode_result__ = { same: back.s === "a\uD800b", s: back.s };
""",
        host,
    )
    assert r["diagnostics"] == []
    assert r["result"]["same"] is True
    assert r["result"]["s"] == "a\ufffdb"
    assert r["logs"][0]["message"] == "x\ufffdy"
    json.dumps(r, ensure_ascii=False).encode("utf-8")


def test_s7_4_timeout_while_awaiting_a_tool_call_cancels_it(env: Any) -> None:
    host = Host()
    t = time.monotonic()
    r = run(
        env,
        f'import {{ slow }} from "@codemode/servers/notes";\nconsole.log("waiting");\nawait slow({{ ms: {HANG_S * 1000} }});',
        host,
        timeoutMs=300,
    )
    assert time.monotonic() - t < PROMPT_S
    assert codes(r) == ["SANDBOX_LIMIT"] and "timeoutMs" in r["diagnostics"][0]["message"]
    assert [e["message"] for e in r["logs"]] == ["waiting"]
    assert host.cancelled == 1


def test_deep_recursion_is_a_catchable_error_not_a_crash(env: Any) -> None:
    r = run(
        env,
        """
function f(n) { return f(n + 1) + 1; }
let caught = null;
try { f(0); } catch (e) { caught = e.name; }
globalThis.__codemode_result__ = caught;
f(0);
""",
    )
    assert codes(r) == ["UNCAUGHT_EXCEPTION"]
    assert "call stack" in r["diagnostics"][0]["message"]
    assert run(env, "globalThis.__codemode_result__ = 4;")["result"] == 4


def test_pending_timers_are_capped(env: Any) -> None:
    r = run(
        env,
        """
let err = null;
try { for (let i = 0; i < 20000; i++) setTimeout(() => {}, 1); } catch (e) { err = e.name + ": " + e.message; }
globalThis.__codemode_result__ = err;
""",
    )
    assert r["diagnostics"] == []
    assert r["result"].startswith("RangeError: too many pending timers")


@pytest.mark.slow
def test_pool_reuses_warm_workers_and_replaces_killed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from codemode_gen.runtime.sandbox import pool as sandbox_module

    started: list[object] = []
    original = sandbox_module.WorkerProcess.start

    async def counting_start() -> Any:
        worker = await original()
        started.append(worker)
        return worker

    monkeypatch.setattr(sandbox_module.WorkerProcess, "start", staticmethod(counting_start))

    async def scenario() -> None:
        async with Sandbox(WorkerPool(2)) as sandbox:
            assert len(started) == 2
            for i in range(5):
                r = await sandbox.run(
                    f"globalThis.__codemode_result__ = {i};", {}, Host(), Limits()
                )
                assert r["result"] == i
            assert len(started) == 2  # clean runs: the same warm processes served every run
            await sandbox.run("while (true) {}", {}, Host(), Limits(timeoutMs=200))
            r = await sandbox.run(
                "const a = new Array(1e6).fill(0); for (;;) { a.splice(0, 1); a.push(0); }",
                {},
                Host(),
                Limits(timeoutMs=200, maxMemoryBytes=256 * 1024 * 1024),
            )
            assert codes(r) == ["SANDBOX_LIMIT"]
            await asyncio.sleep(0.5)
            assert len(started) == 3  # only the killed worker was replaced

    asyncio.run(scenario())


def test_lone_surrogate_in_source_does_not_break_the_worker(env: Any) -> None:
    r = run(env, 'globalThis.__codemode_result__ = "a\ud800b".length; // \udfff')
    assert r["diagnostics"] == [] and r["result"] == 3


# How long the tests below make a worker start: long enough that no scheduling delay of a
# loaded machine can be mistaken for it.
SLOW_START_S = 4.0


def _slow_worker_starts(monkeypatch: pytest.MonkeyPatch, finished: list[float]) -> None:
    """Every worker start takes SLOW_START_S more (the real process still starts); `finished`
    gets the monotonic time each start ended."""
    from codemode_gen.runtime.sandbox import pool as sandbox_module

    original = sandbox_module.WorkerProcess.start

    async def slow_start() -> Any:
        await asyncio.sleep(SLOW_START_S)
        worker = await original()
        finished.append(time.monotonic())
        return worker

    monkeypatch.setattr(sandbox_module.WorkerProcess, "start", staticmethod(slow_start))


@pytest.mark.slow
def test_s3_2_4_cold_pool_start_counts_against_the_callers_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An empty pool: the run starts a worker on its request path. That wait is the caller's
    # time too: a busy loop is stopped at timeoutMs counted from the call (here while the script
    # has had ~1 s), not from the worker's start (which would give it 5 s), and the message
    # names the timeoutMs the caller gave.
    finished: list[float] = []
    _slow_worker_starts(monkeypatch, finished)
    timeout_s = SLOW_START_S + 1.0

    async def scenario() -> tuple[float, Response]:
        async with Sandbox(pool_size=0) as sandbox:
            r = await sandbox.run(
                "for (;;) {}", {}, Host(), Limits(timeoutMs=int(timeout_s * 1000))
            )
            return time.monotonic(), r

    ended, r = asyncio.run(scenario())
    [started] = finished
    # Counted from the worker's start, the script would have had timeout_s (5 s) of its own.
    assert ended - started < timeout_s - SLOW_START_S / 2, ended - started
    [d] = r["diagnostics"]
    assert d["code"] == "SANDBOX_LIMIT" and d["errorClass"] == "SandboxLimitError"
    assert f"{int(timeout_s * 1000)} ms" in d["message"] and r["result"] is None


def test_s3_2_4_deadline_fixed_by_the_caller_bounds_the_run_and_messages_keep_timeout_ms(
    env: Any,
) -> None:
    # A host that spent most of timeoutMs before the sandbox (connecting servers) passes the
    # deadline it fixed; the script gets only what is left, the message the caller's 2000 ms.
    loop, sandbox = env
    timeout_ms = int(HANG_S * 1000)
    t = time.monotonic()
    r = loop.run_until_complete(
        sandbox.run(
            'console.log("spinning"); for (;;) {}',
            {},
            Host(),
            Limits(timeoutMs=timeout_ms),
            deadline=t + 0.3,
        )
    )
    elapsed = time.monotonic() - t
    assert elapsed < PROMPT_S, elapsed  # stopped at the caller's deadline, not after timeoutMs
    [d] = r["diagnostics"]
    assert (
        d["code"] == "SANDBOX_LIMIT"
        and f"{timeout_ms} ms" in d["message"]
        and str(timeout_ms - 300) not in d["message"]
    )
    assert [e["message"] for e in r["logs"]] == ["spinning"]


def test_s3_2_4_a_deadline_already_past_still_answers_sandbox_limit_promptly(env: Any) -> None:
    loop, sandbox = env
    t = time.monotonic()
    r = loop.run_until_complete(
        sandbox.run(
            "globalThis.__codemode_result__ = 1;",
            {},
            Host(),
            Limits(timeoutMs=1000),
            deadline=t - 0.5,
        )
    )
    assert time.monotonic() - t < PROMPT_S
    assert (
        codes(r) == ["SANDBOX_LIMIT"]
        and "1000 ms" in r["diagnostics"][0]["message"]
        and r["result"] is None
    )


@pytest.mark.slow
def test_s3_2_4_a_worker_start_slower_than_the_deadline_cannot_stretch_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A loaded machine can take longer than timeoutMs to start a worker: the run answers at the
    # watchdog instant anyway, before the (real, late) worker process is even there.
    finished: list[float] = []
    _slow_worker_starts(monkeypatch, finished)

    async def scenario() -> tuple[float, Response]:
        async with Sandbox(pool_size=0) as sandbox:
            r = await sandbox.run(
                "globalThis.__codemode_result__ = 1;", {}, Host(), Limits(timeoutMs=300)
            )
            return time.monotonic(), r

    answered, r = asyncio.run(scenario())
    assert not finished or answered < finished[0]  # answered while the worker was still starting
    assert codes(r) == ["SANDBOX_LIMIT"] and "300 ms" in r["diagnostics"][0]["message"]


def test_s3_3_4_check_syntax_reports_what_the_run_would_without_running(env: Any) -> None:
    loop, sandbox = env
    bad = 'import { echo } from "@codemode/servers/notes";\nconsole.log("never");\nconst x = ;\n'
    checked = loop.run_until_complete(sandbox.check_syntax(bad))
    ran = run(env, bad)
    assert checked is not None and checked == ran["diagnostics"]
    assert checked[0]["code"] == "SYNTAX_ERROR" and checked[0]["path"].startswith("3:")
    assert ran["logs"] == [] and ran["result"] is None
    # Module syntax: top-level await and imports parse; checking runs nothing and leaves the
    # worker fit for the next run.
    good = 'import { echo } from "@codemode/servers/notes";\nglobalThis.__codemode_result__ = await echo({ a: 1 });'
    assert loop.run_until_complete(sandbox.check_syntax(good)) is None
    host = Host()
    assert run(env, good, host)["result"] == {"a": 1} and len(host.requests) == 1


def test_s3_3_4_a_syntax_error_thrown_while_running_is_the_scripts_own_exception(env: Any) -> None:
    # The run parses the agent module only as it imports it: a SyntaxError the script throws
    # (JSON.parse) after logging is an uncaught exception with its logs, not SYNTAX_ERROR.
    r = run(env, 'console.log("before");\nJSON.parse("{oops");\n')
    assert codes(r) == ["UNCAUGHT_EXCEPTION"] and "SyntaxError" in r["diagnostics"][0]["message"]
    assert [entry["message"] for entry in r["logs"]] == ["before"]
    thrown = run(env, 'throw { name: "SyntaxError", message: "mine" };\n')
    assert codes(thrown) == ["UNCAUGHT_EXCEPTION"]


def test_check_syntax_gives_up_at_the_deadline(env: Any) -> None:
    loop, sandbox = env
    t = time.monotonic()
    assert loop.run_until_complete(sandbox.check_syntax("const x = ;", deadline=t - 1.0)) is None
    assert time.monotonic() - t < PROMPT_S


def test_check_syntax_never_starts_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # With no idle worker the check is skipped (the run reports the error itself): a syntax
    # check must not cost a process start on a busy or empty pool.
    from codemode_gen.runtime.sandbox import pool as sandbox_module

    started: list[object] = []
    original = sandbox_module.WorkerProcess.start

    async def counting_start() -> Any:
        worker = await original()
        started.append(worker)
        return worker

    monkeypatch.setattr(sandbox_module.WorkerProcess, "start", staticmethod(counting_start))

    async def scenario() -> tuple[Any, Response]:
        async with Sandbox(pool_size=0) as sandbox:
            checked = await sandbox.check_syntax("const x = ;")
            assert started == []
            return checked, await sandbox.run("const x = ;", {}, Host(), Limits())

    checked, r = asyncio.run(scenario())
    assert checked is None and codes(r) == ["SYNTAX_ERROR"] and len(started) == 1


def test_the_run_after_a_syntax_check_gets_the_checked_worker() -> None:
    # The worker that just finished a run is still building its next realm; the checked one is
    # idle and ready, so the pool hands it out next (and a check does not count as a run).
    async def scenario() -> None:
        pool = WorkerPool(2)
        await pool.start()
        try:
            first = await pool.acquire()
            await pool.release(first, True)  # a run: goes to the back
            checked = await pool.acquire_idle()
            assert checked is not None and checked is not first
            await pool.release(checked, True, ran=False)
            assert await pool.acquire() is checked and checked.runs == 0
            await pool.release(checked, True)
        finally:
            await pool.aclose()

    asyncio.run(scenario())


def test_a_retired_worker_is_reaped_after_its_run_has_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker that served its MAX_RUNS_PER_WORKER runs is replaced; its last run answers without
    # waiting for the process to be reaped, and closing the pool waits for that reap.
    from codemode_gen.runtime.sandbox import pool as pool_module

    monkeypatch.setattr(pool_module, "MAX_RUNS_PER_WORKER", 2)
    original_reap = pool_module.WorkerProcess.reap
    let_reap = asyncio.Event()
    reaped: list[int] = []

    async def held_reap(self: Any) -> None:
        await let_reap.wait()
        await original_reap(self)
        reaped.append(self.proc.pid)

    monkeypatch.setattr(pool_module.WorkerProcess, "reap", held_reap)

    async def scenario() -> None:
        sandbox = Sandbox(pool_size=1)
        await sandbox.start()
        try:
            for value in (1, 2, 3):
                r = await sandbox.run(
                    f"globalThis.__codemode_result__ = {value};", {}, Host(), Limits()
                )
                assert r["result"] == value and r["diagnostics"] == []
                # After the second run its worker is retiring; the third runs on a replacement.
                assert len(sandbox.pool._retiring) == (0 if value == 1 else 1)
            assert reaped == []  # the second run answered while its worker's reap was held
        finally:
            let_reap.set()
            await sandbox.aclose()
        assert len(reaped) >= 2  # the retired worker, then the replacement at close

    asyncio.run(scenario())


# --- pre-initialised realms (the next run's realm is built and loaded between runs) ------------


def test_s1_4_pre_initialised_realms_keep_nothing_of_the_previous_run(env: Any) -> None:
    # Run N tries to leave state everywhere a prepared realm could carry it: globals, builtin
    # prototypes, the preloaded @codemode modules and a server module's exports.
    tamper = """
import * as notes from "@codemode/servers/notes";
import * as E from "@codemode/errors";
import * as host from "@codemode/host";
const tried = [];
const attempt = (name, fn) => { try { fn(); tried.push(name); } catch (e) { /* frozen */ } };
globalThis.leak = 1;
attempt("proto", () => { Object.prototype.polluted = 1; });
attempt("array", () => { Array.prototype.extra = 1; });
attempt("errors", () => { E.ToolCallError.extra = 1; });
attempt("hasInstance", () => Object.defineProperty(E.ToolCallError, Symbol.hasInstance, { value: () => true }));
attempt("host", () => { host.callTool.extra = 1; });
attempt("binding", () => { notes.echo.extra = 1; });
attempt("meta", () => { notes.__meta__.serverId = "x"; });
globalThis.__codemode_result__ = { tried, frozen: Object.isFrozen(notes.echo) };
"""
    first = run(env, tamper)
    assert first["diagnostics"] == [] and first["result"] == {"tried": [], "frozen": True}
    probe = """
import * as notes from "@codemode/servers/notes";
import * as E from "@codemode/errors";
globalThis.__codemode_result__ = [typeof globalThis.leak, typeof ({}).polluted, typeof [].extra,
  typeof E.ToolCallError.extra, typeof notes.echo.extra, notes.__meta__.serverId];
"""
    for _ in range(3):  # whichever pooled worker (and prepared realm) serves the run
        r = run(env, probe)
        assert r["result"] == ["undefined"] * 5 + ["notes"]


def test_a_module_is_evaluated_only_when_imported(env: Any) -> None:
    # A broken module that the script does not import costs nothing and breaks nothing.
    loop, sandbox = env
    modules = {**MODULES, "@codemode/servers/broken": "throw new Error('evaluated');"}
    ok = loop.run_until_complete(
        sandbox.run("globalThis.__codemode_result__ = 1;", modules, Host(), Limits())
    )
    assert ok["result"] == 1 and ok["diagnostics"] == []
    bad = loop.run_until_complete(
        sandbox.run("import '@codemode/servers/broken';", modules, Host(), Limits())
    )
    assert codes(bad) == ["UNCAUGHT_EXCEPTION"] and "evaluated" in bad["diagnostics"][0]["message"]


def test_module_sources_cross_the_pipe_once_per_worker() -> None:
    sent: list[dict[str, Any]] = []

    async def scenario() -> list[Any]:
        async with Sandbox(WorkerPool(1, max_workers=1)) as sandbox:
            worker = sandbox.pool._idle[0]
            original = worker.send

            def spy(message: dict[str, Any]) -> None:
                sent.append(message)
                original(message)

            worker.send = spy  # type: ignore[method-assign]  # observe the real messages
            script = 'import { __meta__ } from "@codemode/servers/notes"; globalThis.__codemode_result__ = __meta__.serverId;'
            results: list[Any] = [
                await sandbox.run(script, MODULES, Host(), Limits()) for _ in range(2)
            ]
            changed = {
                "@codemode/servers/notes": NOTES.replace('serverId: "notes"', 'serverId: "renamed"')
            }
            results.append(await sandbox.run(script, changed, Host(), Limits()))
            # Back to the first text: the worker let it go with the last run's table, so it comes
            # again and is what the run imports (the native worker keeps a module's UTF-8 only
            # while the supervisor keeps its text: realm.c `text_of`).
            results.append(await sandbox.run(script, MODULES, Host(), Limits()))
            # The host believes the worker holds a text it does not: the run fails cleanly and
            # the worker is replaced (never a run with the wrong module).
            worker.held.add(protocol.module_digest(NOTES + "\n// other"))
            other = {"@codemode/servers/notes": NOTES + "\n// other"}
            results.append(await sandbox.run(script, {**other}, Host(), Limits()))
            results.append(worker.alive())
            results.append(await sandbox.run(script, other, Host(), Limits()))
            return results

    first, second, renamed, back, lost, alive, recovered = asyncio.run(scenario())
    assert [first["result"], second["result"], renamed["result"], back["result"]] == [
        "notes",
        "notes",
        "renamed",
        "notes",
    ]
    runs = [m for m in sent if m.get("op") == "run"]
    assert [len(m["sources"]) for m in runs[:4]] == [1, 0, 1, 1]
    assert runs[0]["modules"] == runs[1]["modules"] != runs[2]["modules"]
    assert codes(lost) == ["SANDBOX_ERROR"] and alive is False
    assert recovered["result"] == "notes" and recovered["diagnostics"] == []


# --- the worker cap: at most max_workers runs at once, the rest queue within their timeoutMs ----


def worker_processes() -> set[int]:
    """Pids of this process's live sandbox workers (from /proc: the real processes)."""
    return sandbox_worker_pids()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes through /proc")
def test_sixteen_concurrent_runs_never_exceed_the_worker_cap() -> None:
    cap = 3
    host = Host()

    async def scenario() -> tuple[list[Response], int, int]:
        peak_processes = peak_busy = 0
        others = worker_processes()  # e.g. the module's `env` pool
        async with Sandbox(WorkerPool(2, max_workers=cap)) as sandbox:
            runs = [
                asyncio.ensure_future(
                    sandbox.run(
                        'import { slow } from "@codemode/servers/notes"; await slow({ ms: 150 });'
                        " globalThis.__codemode_result__ = 1;",
                        MODULES,
                        host,
                        Limits.from_json({"timeoutMs": 20_000}),
                    )
                )
                for _ in range(16)
            ]
            while not all(r.done() for r in runs):
                peak_processes = max(peak_processes, len(worker_processes() - others))
                peak_busy = max(peak_busy, sandbox.pool.busy)
                await asyncio.sleep(0.02)
            assert sandbox.pool.busy == 0 and sandbox.pool.waiting == 0
            return [r.result() for r in runs], peak_processes, peak_busy

    results, peak_processes, peak_busy = asyncio.run(scenario())
    assert [r["result"] for r in results] == [1] * 16, [r["diagnostics"] for r in results]
    assert peak_processes <= cap and peak_busy <= cap and host.max_active <= cap
    assert host.max_active == cap  # the cap is also what runs in parallel


def test_a_run_that_cannot_get_a_worker_in_time_gets_sandbox_limit() -> None:
    async def scenario() -> tuple[Response, Response, Response, int]:
        async with Sandbox(WorkerPool(1, max_workers=1)) as sandbox:
            long = asyncio.ensure_future(
                sandbox.run(
                    'import { slow } from "@codemode/servers/notes"; await slow({ ms: 1500 }); globalThis.__codemode_result__ = "long";',
                    MODULES,
                    Host(),
                    Limits.from_json({"timeoutMs": 10_000}),
                )
            )
            await asyncio.sleep(0.2)
            queued = await sandbox.run(
                "globalThis.__codemode_result__ = 1;",
                MODULES,
                Host(),
                Limits.from_json({"timeoutMs": 300}),
            )
            # A queued run that is cancelled leaves the queue without taking a slot with it.
            abandoned = asyncio.ensure_future(sandbox.run("1;", MODULES, Host(), Limits()))
            await asyncio.sleep(0.1)
            abandoned.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await abandoned
            first = await long
            after = await sandbox.run(
                "globalThis.__codemode_result__ = 2;", MODULES, Host(), Limits()
            )
            return first, queued, after, sandbox.pool.busy

    first, queued, after, busy = asyncio.run(scenario())
    assert first["result"] == "long" and after["result"] == 2 and busy == 0
    assert queued["result"] is None and codes(queued) == ["SANDBOX_LIMIT"]
    message = queued["diagnostics"][0]["message"]
    assert "at most 1 scripts at once" in message and "timeoutMs = 300" in message
    assert "max_workers" in queued["diagnostics"][0]["hint"]


def test_workers_beyond_the_warm_size_stay_for_the_next_burst_then_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from codemode_gen.runtime.sandbox import pool as sandbox_module

    monkeypatch.setattr(sandbox_module, "IDLE_WORKER_TTL_S", 0.3)

    async def scenario() -> tuple[int, int, bool]:
        pool = WorkerPool(1, max_workers=3)
        try:
            burst = await asyncio.gather(*(pool.acquire() for _ in range(3)))
            for worker in burst:
                await pool.release(worker, True)
            kept = len(pool._idle)  # all three: a next burst reuses them
            again = await asyncio.gather(*(pool.acquire() for _ in range(3)))
            reused = {id(w) for w in again} == {id(w) for w in burst}
            for worker in again:
                await pool.release(worker, True)
            await asyncio.sleep(0.8)
            return kept, len(pool._idle), reused
        finally:
            await pool.aclose()

    kept, after_ttl, reused = asyncio.run(scenario())
    assert (kept, after_ttl, reused) == (3, 1, True)
