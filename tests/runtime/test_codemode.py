"""The Python API as documented: `async with CodeMode.from_config(...) as cm: await cm.run(...)`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import load_fixtures
from codemode_gen.runtime.response import Response
from tests.conftest import HANG_S, PROMPT_S
from tests.runtime_support import PYTHON, REPO, script, write_out

pytestmark = pytest.mark.timeout(120)


def test_from_config_reads_settings_beside_the_config_and_is_reusable(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    (tmp_path / "codemode.toml").write_text(
        '[limits]\nmaxToolCalls = 2\n\n[servers.slow]\nblocklist = ["env"]\n'
    )
    code = "import * as slow from '@codemode/servers/slow';\nawait slow.tick();\nglobalThis.__codemode_result__ = typeof slow.env;"

    async def main() -> list[Response]:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            first = await cm.run(code)
            second = await cm.run(
                "import { tick } from '@codemode/servers/slow';\nfor (;;) await tick();"
            )
            third = await cm.run(code, limits={"maxToolCalls": 10})
            return [first, second, third]

    first, second, third = anyio.run(main)
    assert first["result"] == "undefined"  # blocklist from codemode.toml
    limit = [d for d in second["diagnostics"] if d["severity"] == "error"]
    assert (
        limit[0]["code"] == "SANDBOX_LIMIT" and len(second["toolTrace"]) == 3
    )  # toml default: 2 calls
    assert third["result"] == "undefined" and not [
        d for d in third["diagnostics"] if d["severity"] == "error"
    ]


def test_from_config_reports_a_missing_config_as_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        CodeMode.from_config(tmp_path / "nope.json")


def test_run_outside_the_context_manager_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}}')
    cm = CodeMode.from_config(tmp_path / ".mcp.json")
    with pytest.raises(RuntimeError, match="async with"):
        anyio.run(cm.run, "1")


@pytest.mark.slow
def test_s3_2_4_deadline_counts_from_the_call_through_a_slow_connect(tmp_path: Path) -> None:
    # `hang` is requested (§3.2.3), so it is connected before the script starts; it never
    # answers initialize (connect_timeout HANG_S). The host waits a fifth of timeoutMs for it
    # (not counted in the script's time), then the script runs its own timeoutMs: the answer
    # comes within 1.5 x timeoutMs of the call (not at the connect timeout), and names the
    # caller's timeoutMs.
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "notes": {"command": PYTHON, "args": [script("notes_server"), "stdio"]},
                    "hang": {"command": PYTHON, "args": [script("hang_on_initialize"), "stdio"]},
                }
            }
        )
    )
    (tmp_path / "codemode.toml").write_text(f"[servers.hang]\nconnect_timeout = {HANG_S:.0f}\n")

    async def main() -> tuple[float, Response]:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            t = time.monotonic()
            response = await cm.run(
                "for (;;) {}", limits={"timeoutMs": 1000}, requested_capabilities=["hang"]
            )
            return time.monotonic() - t, response

    elapsed, response = anyio.run(main)
    assert elapsed < PROMPT_S, elapsed
    [limit] = [d for d in response["diagnostics"] if d["severity"] == "error"]
    assert limit["code"] == "SANDBOX_LIMIT" and "1000 ms" in limit["message"], limit
    assert any(
        d["code"] == "CAPABILITY_UNAVAILABLE" and "hang" in d["message"]
        for d in response["diagnostics"]
    )


@pytest.mark.slow
def test_s3_3_3_a_slow_connect_the_script_waited_out_is_not_reported(tmp_path: Path) -> None:
    # notes starts later than the fifth of timeoutMs the host waits before the script starts,
    # so the script's first call waits for the connection. The calls succeed and the run ends
    # well: a warning about the connect would be noise for the model. (With a run that then
    # times out, the warning stays: test_s3_2_4_deadline_counts_from_the_call_through_a_slow_connect.)
    delay_s, timeout_ms = 4, 15_000  # the host waits 3 s; the script has 15 s for the rest
    notes = f"sleep {delay_s}; exec {PYTHON} {script('notes_server')}"
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": "sh", "args": ["-c", notes]}}})
    )
    write_out(tmp_path / "out", load_fixtures(REPO / "fixtures"))
    code = "import * as notes from '@codemode/servers/notes';\nglobalThis.__codemode_result__ = (await notes.get_note({ id: 1 })).id;"

    async def main() -> Response:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            response: Response = await cm.run(code, limits={"timeoutMs": timeout_ms})
            return response

    response = anyio.run(main)
    assert response["result"] == 1, response
    assert response["diagnostics"] == [], response["diagnostics"]


def test_s3_3_4_syntax_error_is_answered_without_connecting_servers(tmp_path: Path) -> None:
    # `hang` is imported, requested and missing from out/, and can never connect (connect_timeout
    # HANG_S): a script that cannot parse is answered before any connection is attempted.
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "hang": {"command": PYTHON, "args": [script("hang_on_initialize"), "stdio"]},
                }
            }
        )
    )
    (tmp_path / "codemode.toml").write_text(f"[servers.hang]\nconnect_timeout = {HANG_S:.0f}\n")
    code = "import * as hang from '@codemode/servers/hang';\nconsole.log('never');\nawait hang.ping(;\n"

    async def main() -> tuple[float, Response]:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            t = time.monotonic()
            response = await cm.run(code, requested_capabilities=["hang"])
            return time.monotonic() - t, response

    elapsed, response = anyio.run(main)
    assert elapsed < PROMPT_S, elapsed  # not hang's connect timeout
    [d] = response["diagnostics"]
    assert (
        d["code"] == "SYNTAX_ERROR" and d["severity"] == "error" and d["path"].startswith("3:")
    ), d
    assert (response["logs"], response["result"], response["toolTrace"]) == ([], None, [])


def test_from_config_roots_settings_and_out_at_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent client launches serve from its own working directory: a codemode.toml or out/
    # there must not be picked up; an explicit relative --out stays the caller's.
    project, client = tmp_path / "project", tmp_path / "client"
    project.mkdir()
    client.mkdir()
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"notes": {"command": "python", "args": ["s.py"]}}})
    )
    (project / "codemode.toml").write_text('out = "generated"\n[limits]\ntimeoutMs = 1234\n')
    (client / "codemode.toml").write_text("not = = toml")
    monkeypatch.chdir(client)
    cm = CodeMode.from_config("../project/.mcp.json")
    assert cm.out_dir == project / "generated" and cm.settings.limits == {"timeoutMs": 1234}
    assert cm.configs["notes"].cwd == str(project)
    assert CodeMode.from_config("../project/.mcp.json", out="mine").out_dir == Path("mine")
    (project / "codemode.toml").unlink()
    assert CodeMode.from_config("../project/.mcp.json").out_dir == project / "out"


@pytest.mark.slow
def test_max_workers_from_codemode_toml_and_the_argument(tmp_path: Path) -> None:
    # [sandbox] max_workers = 1: a second concurrent run queues behind the first and, with a
    # timeoutMs shorter than the first run, says the host's cap stopped it; the argument wins.
    # Seconds apart, so that neither outcome depends on how busy the machine is: the short run's
    # SHORT_MS ends seconds before the long run lets its worker go, and is seconds more than a
    # second worker needs to start.
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    (tmp_path / "codemode.toml").write_text("[sandbox]\nmax_workers = 1\n")
    long_ms, short_ms = 6000, 3000
    long = f"import {{ sleep }} from '@codemode/servers/slow';\nawait sleep({{ms: {long_ms}}});\nglobalThis.__codemode_result__ = 'long';"

    async def pair(cm: CodeMode) -> tuple[Response, Response]:
        await cm.run("1;")  # connected and warm
        async with anyio.create_task_group() as tg:
            results: dict[str, Response] = {}

            async def first() -> None:
                results["long"] = await cm.run(long)

            tg.start_soon(first)
            # Until the long run holds its worker (0.2 s in a row: longer than its syntax check
            # holds one), however slow the machine is: not a fixed sleep.
            with anyio.fail_after(10):
                held_since = None
                while held_since is None or anyio.current_time() - held_since < 0.2:
                    busy = cm._sandbox is not None and cm._sandbox.pool.busy > 0
                    held_since = (held_since or anyio.current_time()) if busy else None
                    await anyio.sleep(0.01)
            results["short"] = await cm.run(
                "globalThis.__codemode_result__ = 1;", limits={"timeoutMs": short_ms}
            )
        return results["long"], results["short"]

    async def main() -> list[Any]:
        out: list[Any] = []
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            out.append(await pair(cm))
        async with CodeMode.from_config(
            tmp_path / ".mcp.json", out=tmp_path / "out", max_workers=2
        ) as cm:
            out.append(await pair(cm))
        return out

    (capped_long, capped_short), (free_long, free_short) = anyio.run(main)
    assert capped_long["result"] == "long" and free_long["result"] == "long"
    assert capped_short["result"] is None
    errors = [
        d for d in capped_short["diagnostics"] if d["severity"] == "error"
    ]  # (+ built in memory: no out/)
    assert [d["code"] for d in errors] == ["SANDBOX_LIMIT"]
    assert "at most 1 scripts at once" in errors[0]["message"]
    assert free_short["result"] == 1


@pytest.mark.slow
def test_s3_3_4_syntax_error_on_a_warm_host_answers_as_before_it_connected(tmp_path: Path) -> None:
    # Once every server is connected, the worker's own parse (made before every run) answers a
    # script that does not parse, without the separate check: the response is the very same as
    # the one given before anything connected (never started: no logs, no calls), and the
    # worker serves the next run.
    (tmp_path / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}})
    )
    broken = "import * as slow from '@codemode/servers/slow';\nconsole.log('never');\nawait slow.tick(;\n"
    good = "import * as slow from '@codemode/servers/slow';\nawait slow.tick();\nglobalThis.__codemode_result__ = 1;"

    async def main() -> tuple[Response, Response, Response, Response, bool]:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            cold = await cm.run(broken)
            first = await cm.run(good)
            nothing = cm._catalogs.nothing_to_connect(cm._catalogs.select(broken, []))
            warm = await cm.run(broken)
            after = await cm.run(good)
            return cold, first, warm, after, nothing

    cold, first, warm, after, nothing_to_connect = anyio.run(main)
    assert first["result"] == 1 and after["result"] == 1 and after_ok(after), after
    assert nothing_to_connect  # the warm run took the path without the separate check
    assert warm == cold, (warm, cold)
    [d] = warm["diagnostics"]
    assert d["code"] == "SYNTAX_ERROR" and d["path"].startswith("3:") and warm["logs"] == [], warm


def after_ok(response: Response) -> bool:
    return not [d for d in response["diagnostics"] if d["severity"] == "error"]
