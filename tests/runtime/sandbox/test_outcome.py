"""How the host reads a run's ending (runtime/sandbox/outcome.py): the worker says what happened,
raw, and the host composes the §3.3 response's result and diagnostics (§7's codes).

The worker's real answers are exercised end to end by the pool's tests (tests/runtime/sandbox/
test_pool.py, the hostile suite); here, a stand-in worker process speaks the protocol with
answers the real one never gives, and the host must turn each into a SANDBOX_ERROR, replace the
worker and go on, never raise.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox import outcome, protocol
from codemode_gen.runtime.sandbox.protocol import DoneKind
from codemode_gen.runtime.sandbox.run import Run
from codemode_gen.runtime.sandbox.worker_process import WorkerProcess

pytestmark = pytest.mark.timeout(60)

# A worker that says `ready`, then answers every run with the line it was given (argv[1]).
STAND_IN = """
import sys
sys.stdout.write('{"op":"ready"}\\n'); sys.stdout.flush()
for line in sys.stdin:
    if '"op":"run"' in line:
        sys.stdout.write(sys.argv[1] + "\\n"); sys.stdout.flush()
"""


async def run_against(done_line: str, code: str = "") -> tuple[dict[str, Any], Run, bool]:
    """A run against the stand-in answering with `done_line`: its response, its handle, and
    whether the host killed the worker."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        STAND_IN,
        done_line,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    worker = WorkerProcess(proc)
    try:
        await worker.wait_ready()

        async def host_call(request: dict[str, Any]) -> Any:
            raise AssertionError("no call expected")

        run = Run(worker, host_call, Limits())
        now = time.monotonic()
        response = await run.execute(code, {}, now + 30, now + 36)
        if not run.clean:  # a worker in doubt is killed: reap it (a sound one is not waited for)
            await asyncio.wait_for(proc.wait(), 30)
        return dict(response), run, not worker.alive()
    finally:
        await worker.reap()


MALFORMED = {
    "an unknown kind": {"op": "done", "kind": "exploded"},
    "no kind": {"op": "done", "result": 1, "diagnostics": []},
    "a report that is not an object": {"op": "done", "kind": "report", "report": "ok"},
    "a syntax error that is not an object": {
        "op": "done",
        "kind": "report",
        "report": {"status": "error", "error": {"name": "SyntaxError"}},
        "syntax": ["unexpected token"],
    },
}


@pytest.mark.parametrize("done", MALFORMED.values(), ids=list(MALFORMED))
def test_s7_a_malformed_ending_is_a_sandbox_error_and_the_worker_goes(done: dict[str, Any]) -> None:
    response, run, killed = asyncio.run(run_against(json.dumps(done)))
    assert response["result"] is None
    [diagnostic] = response["diagnostics"]
    assert diagnostic["code"] == "SANDBOX_ERROR"
    assert "malformed response" in diagnostic["message"]
    assert run.clean is False and killed


def test_s3_3_a_well_formed_ending_from_a_stand_in_is_composed_and_the_worker_kept() -> None:
    # The same stand-in with the line a real worker sends for a result of 7 crossing verbatim.
    line = protocol.encode_done(
        {"kind": DoneKind.REPORT}, '{"status":"ok","result":"7","unawaited":null}'
    )
    response, run, killed = asyncio.run(run_against(line.decode().rstrip("\n")))
    assert response["result"] == 7 and response["diagnostics"] == []
    assert run.clean is True and not killed


LIMITS = Limits()


def codes(answer: outcome.Answer) -> list[str]:
    """Each diagnostic's code, and the limit a SANDBOX_LIMIT names."""
    names = ("timeoutMs", "maxMemoryBytes", "maxConcurrentCalls")
    return [
        d["code"] + "".join(f":{n}" for n in names if n in d["message"] + d.get("hint", ""))
        if d["code"] == "SANDBOX_LIMIT"
        else d["code"]
        for d in answer[1]
    ]


@pytest.mark.parametrize(
    ("done", "expected"),
    [
        ({"kind": "late"}, ["SANDBOX_LIMIT:timeoutMs"]),
        ({"kind": "timeout"}, ["SANDBOX_LIMIT:timeoutMs"]),
        ({"kind": "pending_limit"}, ["SANDBOX_LIMIT:maxConcurrentCalls"]),
        ({"kind": "lost_module"}, ["SANDBOX_ERROR"]),
        ({"kind": "internal"}, ["SANDBOX_ERROR"]),
        (
            {"kind": "setup_failed", "message": "InternalError: out of memory"},
            ["SANDBOX_LIMIT:maxMemoryBytes"],
        ),
        ({"kind": "setup_failed", "message": "TypeError"}, ["SANDBOX_ERROR"]),
        (
            {"kind": "engine_error", "name": "Error", "message": "x", "heapExhausted": True},
            ["SANDBOX_LIMIT:maxMemoryBytes"],
        ),
        (
            {
                "kind": "engine_error",
                "name": "Error",
                "message": "promise never settled",
                "heapExhausted": False,
            },
            ["UNSETTLED_PROMISE"],
        ),
        (
            {"kind": "engine_error", "name": "Error", "message": "x", "heapExhausted": False},
            ["SANDBOX_ERROR"],
        ),
    ],
)
def test_s7_each_kind_of_ending_has_its_code(done: dict[str, Any], expected: list[str]) -> None:
    assert codes(outcome.compose(done, "", {}, LIMITS)) == expected


def test_s7_a_failure_without_a_message_is_out_of_memory_only_when_the_heap_probe_says_so() -> None:
    report = {"status": "error", "error": {"isError": False, "text": "null"}, "unawaited": None}
    # The worker probes exactly when the host will read the probe.
    assert protocol.needs_heap_probe(report)
    full = {"kind": "report", "report": report, "heapExhausted": True}
    assert codes(outcome.compose(full, "", {}, LIMITS)) == ["SANDBOX_LIMIT:maxMemoryBytes"]
    thrown = {"kind": "report", "report": report, "heapExhausted": False}
    assert codes(outcome.compose(thrown, "throw null;", {}, LIMITS)) == ["UNCAUGHT_EXCEPTION"]
    assert not protocol.needs_heap_probe(
        {"status": "error", "error": {"isError": True, "text": ""}}
    )
    assert not protocol.needs_heap_probe({"status": "ok", "result": "1"})


def test_s7_a_syntax_error_is_one_only_when_the_worker_says_the_module_does_not_parse() -> None:
    report = {
        "status": "error",
        "error": {"name": "SyntaxError", "message": "bad", "isError": True},
    }
    parsed = {"kind": "report", "report": report, "syntax": None}  # thrown by JSON.parse
    assert codes(outcome.compose(parsed, "JSON.parse('{')", {}, LIMITS)) == ["UNCAUGHT_EXCEPTION"]
    broken = {**parsed, "syntax": {"message": "unexpected token", "stack": "    at check:2:5\n"}}
    [syntax] = outcome.compose(broken, "\nlet = ;", {}, LIMITS)[1]
    assert syntax["code"] == "SYNTAX_ERROR" and syntax["path"] == "2:5"
    assert outcome.checked({"op": "checked", "syntax": None}) == []
    assert outcome.checked({"op": "checked", "syntax": broken["syntax"]}) == [syntax]
    with pytest.raises(outcome.MalformedOutcome):
        outcome.checked({"op": "checked", "syntax": "bad"})


def test_s3_3_a_result_text_is_parsed_once_by_the_host_and_bounded() -> None:
    ok = {"kind": "report", "report": {"status": "ok", "result": '{"a":[1,2]}'}}
    assert outcome.result_text(ok) == '{"a":[1,2]}'
    assert outcome.compose(ok, "", {}, LIMITS) == ({"a": [1, 2]}, [])
    deep = {"kind": "report", "report": {"status": "ok", "result": "[" * 101 + "]" * 101}}
    assert codes(outcome.compose(deep, "", {}, LIMITS)) == ["RESULT_NOT_SERIALIZABLE"]


def test_a_report_with_a_lone_surrogate_still_crosses_the_pipe() -> None:
    # The prelude's JSON.stringify escapes a lone surrogate, which the host repairs; should one
    # reach the worker's text unescaped anyway, it becomes U+FFFD rather than breaking the line.
    for report in (
        '{"status":"ok","result":"\\"\ud800\\""}',
        '{"status":"ok","result":"\\"\\\\ud800\\""}',
    ):
        line = protocol.encode_done({"kind": "report"}, report)
        result, _ = outcome.compose(protocol.decode(line.rstrip(b"\n")), "", {}, LIMITS)
        assert result == "\ufffd", ascii(result)
