"""serve --http's resource bounds, against the real CLI on 127.0.0.1 (port 0) with real clients:
the SDK's client over Streamable HTTP, httpx and raw sockets for the ones that misbehave.

What one client can make the process hold is bounded (connections, request bodies, queued runs)
and answered with a clear error beyond; workers are shared in turn between clients; and no
payload within the caps stops the event loop (/healthz keeps answering). Figures (ms, MB) are in
bench/serve_http.py; the assertions here are about behaviour and ordering.
"""

from __future__ import annotations

import json
import resource
import socket
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.runtime.host.tsinput import erase_types
from tests.runtime.frontends.test_serve_http import (
    HEALTHY_TIMEOUT_S,
    MCP_HEADERS,
    TOKEN,
    HttpServe,
    http_get,
    in_client,
    project,
    start_serve,
)
from tests.runtime_support import RUN_TIMEOUT, assert_ok

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

# A run that holds its worker a while (setTimeout: no CPU), and a trivial one.
HOLD_MS = 6000
HOLD = f"await new Promise(r => setTimeout(r, {HOLD_MS})); globalThis.__codemode_result__ = 'held';"
TRIVIAL = "globalThis.__codemode_result__ = 'trivial';"
# Holds its worker for longer than any test waits for it (its client goes away first).
LONG_HOLD = (
    "await new Promise(r => setTimeout(r, 100000)); globalThis.__codemode_result__ = 'held';"
)
# Pauses that only order events (a request reaches the server before the next is sent); the
# assertions hold whichever way the machine's load shifts them.
SETTLE_S = 1.5


def wait_healthy(served: HttpServe) -> None:
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while http_get(served.base + "/healthz").status_code != 200:
        assert time.monotonic() < deadline, served.log.read_text()
        time.sleep(0.1)


def tool_call(code: str, request_id: int = 1, **limits: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {"code": code}
    if limits:
        arguments["limits"] = limits
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "codemode.run", "arguments": arguments},
    }


def result_of(sse_text: str) -> dict[str, Any]:
    """The JSON-RPC result carried by a tools/call's SSE response."""
    for line in sse_text.splitlines():
        if line.startswith("data:") and '"result"' in line:
            result: dict[str, Any] = json.loads(line[5:])["result"]["structuredContent"]
            return result
    raise AssertionError(f"no result in {sse_text[:500]!r}")


# ---------------------------------------------------------------------------- connections


def test_idle_connections_beyond_the_cap_do_not_stop_healthz(tmp_path: Path) -> None:
    # With 256 file descriptors (macOS's default), 300 connections opened and left idle used to
    # exhaust them: the process could not accept /healthz. The default cap is half the limit;
    # beyond it the connections idle longest are closed.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    served = start_serve(
        project(tmp_path), preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    )
    idle: list[socket.socket] = []
    try:
        wait_healthy(served)
        port = int(served.url.rsplit(":", 1)[1].split("/", 1)[0])
        for _ in range(300):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=RUN_TIMEOUT))
        health = http_get(served.base + "/healthz")
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        assert "connections open: closing the ones idle longest" in served.log.read_text()
        assert served.proc.poll() is None
    finally:
        for sock in idle:
            sock.close()
        served.stop()


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off(tmp_path: Path) -> None:
    from codemode_gen.runtime.frontends.http_connections import HEADER_TIMEOUT_S

    served = start_serve(project(tmp_path))
    try:
        port = int(served.url.rsplit(":", 1)[1].split("/", 1)[0])
        slow = socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT_S * 4)
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < HEADER_TIMEOUT_S * 4:
            try:
                slow.sendall(b"X")
                slow.settimeout(1.0)
                if slow.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
        slow.close()
        assert closed, "the slowloris connection should have been closed"
        assert http_get(served.base + "/healthz").status_code in (200, 503)  # still serving
    finally:
        served.stop()


# ---------------------------------------------------------------------------- requests and the queue


def test_over_limit_requests_get_a_clear_error(tmp_path: Path) -> None:
    import httpx2

    served = start_serve(
        project(tmp_path), "--max-workers", "1", "--max-queued-runs", "4"
    )  # one per client
    try:
        wait_healthy(served)

        def post(content: bytes) -> Any:
            return httpx2.post(
                served.url, content=content, headers=MCP_HEADERS, timeout=RUN_TIMEOUT
            )

        # A body over the cap: 413, and the connection is not reused for an unread body.
        huge = post(b'{"x": "' + b"a" * (5 * 1024 * 1024) + b'"}')
        assert huge.status_code == 413 and "over 4 MiB" in huge.json()["error"]["message"]
        # Millions of tiny JSON values (parsing them would stall the loop for a second): 400.
        bomb = post(b"[" + b"[]," * 1_000_000 + b"[]]")
        assert bomb.status_code == 400 and "JSON values" in bomb.json()["error"]["message"]
        # Not JSON at all: a JSON-RPC parse error.
        broken = post(b'{"jsonrpc": ')
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        # GET /mcp would hold an SSE stream open forever in stateless mode: 405.
        assert httpx2.get(served.url, headers=MCP_HEADERS, timeout=RUN_TIMEOUT).status_code == 405

        async def main() -> tuple[Any, Any, Any, list[Any]]:
            async with httpx2.AsyncClient(timeout=RUN_TIMEOUT) as http:

                async def run(client: str, code: str) -> Any:
                    headers = {
                        **MCP_HEADERS,
                        "X-Forwarded-For": client,
                    }  # as a proxy on 127.0.0.1 says
                    return await http.post(
                        served.url, json=tool_call(code, timeoutMs=120_000), headers=headers
                    )

                async with anyio.create_task_group() as tg:
                    held: list[Any] = []

                    async def keep(client: str) -> None:
                        held.append(await run(client, LONG_HOLD))

                    tg.start_soon(keep, "10.0.0.1")  # runs
                    await anyio.sleep(SETTLE_S)
                    tg.start_soon(keep, "10.0.0.1")  # waits
                    await anyio.sleep(SETTLE_S)
                    per_client = await run(
                        "10.0.0.1", TRIVIAL
                    )  # a second one waiting: over its share
                    for other in ("10.0.0.2", "10.0.0.3", "10.0.0.4"):
                        tg.start_soon(keep, other)
                    await anyio.sleep(SETTLE_S)
                    in_all = await run("10.0.0.5", TRIVIAL)  # 4 waiting: the queue is full

                    async def sdk_call(client: Any) -> Any:
                        from mcp.shared.exceptions import MCPError

                        try:
                            await client.call_tool("codemode.run", {"code": TRIVIAL})
                        except MCPError as exc:
                            return exc
                        return None

                    sdk_error = await in_client(
                        served.url, sdk_call, headers={"X-Forwarded-For": "10.0.0.6"}
                    )
                    tg.cancel_scope.cancel()  # the held runs' clients go away: their runs end
            return per_client, in_all, sdk_error, held

        per_client, in_all, sdk_error, held = anyio.run(main)
        for refused in (per_client, in_all):
            assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
            error = refused.json()["error"]
            assert "busy" in error["message"] and "retry in 5 s" in error["message"]
            assert refused.json()["id"] == 1
        assert "per client" in per_client.json()["error"]["message"]
        assert "at most 4" in in_all.json()["error"]["message"]
        assert sdk_error is not None and "busy" in str(sdk_error)  # the SDK surfaces the message
        assert held == []  # the runs that got in were still running or waiting
        assert "queue is full" in served.log.read_text()
        # Their clients went away: the queue empties and the next run goes through.
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            answer = httpx2.post(
                served.url,
                json=tool_call(TRIVIAL, timeoutMs=60_000),
                headers=MCP_HEADERS,
                timeout=RUN_TIMEOUT,
            )
            if answer.status_code == 200:
                break
            assert answer.status_code == 503 and time.monotonic() < deadline, answer.text
            time.sleep(0.5)
        assert result_of(answer.text)["result"] == "trivial"
    finally:
        served.stop()


def test_workers_are_shared_in_turn_between_clients(tmp_path: Path) -> None:
    # One worker; client A (127.0.0.1) has a backlog of four long runs when client B (127.0.0.2)
    # sends a trivial one. B's run is served in its turn, after at most the run of A that holds
    # the worker (and one more if B arrived late), not after A's whole backlog (first come, first
    # served), which also made it fail with SANDBOX_LIMIT once its timeoutMs ran out.
    served = start_serve(project(tmp_path), "--max-workers", "1")
    long_run = "await new Promise(r => setTimeout(r, 2000)); globalThis.__codemode_result__ = 'A';"
    finished: list[str] = []
    try:
        wait_healthy(served)

        async def backlog(client: Any) -> None:
            async def one(index: int) -> None:
                run = await client.call_tool(
                    "codemode.run", {"code": long_run, "limits": {"timeoutMs": 60_000}}
                )
                assert assert_ok(run.structured_content) == "A"
                finished.append(f"A{index}")

            async with anyio.create_task_group() as tg:
                for index in range(4):
                    tg.start_soon(one, index)

        async def trivial(client: Any) -> None:
            run = await client.call_tool(
                "codemode.run", {"code": TRIVIAL, "limits": {"timeoutMs": 60_000}}
            )
            assert assert_ok(run.structured_content) == "trivial"
            finished.append("B")

        async def main() -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(in_client, served.url, backlog)
                await anyio.sleep(SETTLE_S)
                tg.start_soon(lambda: in_client(served.url, trivial, local_address="127.0.0.2"))

        anyio.run(main)
        assert sorted(finished) == ["A0", "A1", "A2", "A3", "B"]
        assert finished.index("B") <= 2, finished
    finally:
        served.stop()


# ---------------------------------------------------------------------------- the event loop


def big_typescript(target_bytes: int) -> str:
    """A TypeScript script of about `target_bytes` that runs (its variables spread over functions:
    QuickJS allows 65534 per scope) and returns 42."""
    blocks, size, index = [], 0, 0
    while size < target_bytes:
        lines = [f"  const v{index + i}: number = ({index + i} as number);" for i in range(1000)]
        block = "(() => {\n" + "\n".join(lines) + "\n})();"
        blocks.append(block)
        size += len(block) + 1
        index += 1000
    return "\n".join(blocks) + "\nglobalThis.__codemode_result__ = 42 as number;\n"


def test_a_large_typescript_script_does_not_stop_healthz(tmp_path: Path) -> None:
    # Erasing 3.4 MB of TypeScript takes seconds of CPU that never lets go of the GIL; on the
    # event loop it stopped /healthz (5.6 s). Now it happens in a helper process: /healthz keeps
    # answering while the script is erased, compiled and run. The bound is relative to the same
    # erase done here, inline, so it holds however loaded the machine is.
    code = big_typescript(3_400_000)
    started = time.perf_counter()
    erase_types(code)
    erase_s = time.perf_counter() - started

    import httpx2

    served = start_serve(project(tmp_path))
    answers: list[float] = []
    try:
        wait_healthy(served)

        async def main() -> Any:
            outcome: list[Any] = []
            done = anyio.Event()

            async def poll() -> None:
                async with httpx2.AsyncClient(timeout=RUN_TIMEOUT) as http:
                    while not done.is_set():
                        if (await http.get(served.base + "/healthz")).status_code == 200:
                            answers.append(time.perf_counter())
                        await anyio.sleep(0.02)

            async def run(client: Any) -> None:
                outcome.append(
                    await client.call_tool(
                        "codemode.run", {"code": code, "limits": {"timeoutMs": 120_000}}
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(poll)
                await anyio.sleep(0.2)
                sent = time.perf_counter()
                await in_client(served.url, run)
                outcome.append(sent)
                outcome.append(time.perf_counter())
                done.set()
            return outcome

        run, sent, received = anyio.run(main)
        assert assert_ok(run.structured_content) == 42
        during = [t for t in answers if sent <= t <= received]
        gaps = [b - a for a, b in zip([sent, *during], [*during, received], strict=True)]
        assert len(during) >= 3, (len(during), received - sent)
        assert max(gaps) < erase_s / 3, (max(gaps), erase_s)
    finally:
        served.stop()


def test_a_run_waiting_past_its_deadline_is_answered_as_before(tmp_path: Path) -> None:
    # A queued run whose timeoutMs runs out before a worker frees answers SANDBOX_LIMIT (the
    # host's cap stopped it, as before the queue), and within 1.5 x its timeoutMs.
    served = start_serve(project(tmp_path), "--max-workers", "1")
    try:
        wait_healthy(served)

        async def main() -> tuple[Any, float]:
            result: list[Any] = []

            async def hold(client: Any) -> None:
                await client.call_tool(
                    "codemode.run", {"code": HOLD, "limits": {"timeoutMs": 60_000}}
                )

            async def short(client: Any) -> None:
                started = time.monotonic()
                run = await client.call_tool(
                    "codemode.run", {"code": TRIVIAL, "limits": {"timeoutMs": 1000}}
                )
                result.extend([run, time.monotonic() - started])

            async with anyio.create_task_group() as tg:
                tg.start_soon(in_client, served.url, hold)
                await anyio.sleep(SETTLE_S)
                await in_client(served.url, short, local_address="127.0.0.2")
            return result[0], result[1]

        run, waited = anyio.run(main)
        diagnostics = run.structured_content["diagnostics"]
        assert [d["code"] for d in diagnostics] == ["SANDBOX_LIMIT"], diagnostics
        assert "at most 1 scripts at once" in diagnostics[0]["message"]
        assert waited < HOLD_MS / 1000  # answered at its own deadline, not when the worker freed
    finally:
        served.stop()


def test_the_token_is_checked_before_a_body_is_read(tmp_path: Path) -> None:
    # Without the token nothing is buffered or queued: 401 at once, whatever the body.
    import httpx2

    served = start_serve(project(tmp_path))
    try:
        answer = httpx2.post(
            served.url,
            content=b"[" * 1000,
            timeout=RUN_TIMEOUT,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}x"},
        )
        assert answer.status_code == 401
    finally:
        served.stop()
