"""`codemode-gen record --check`: compare live servers with the committed fixtures, write nothing.

The I/O half of the drift check; the comparison itself is `generator/drift.py` (pure). Per
server: connect and list the tools through the same `SessionManager` and the same filtering as
`record` (`recordable_tools`), redact them with the same `Redactor`, repeat the recorded samples
`drift.plan_resamples` picks (read-only tools only, each recorded input once, sequentially,
each call bounded by the server's `call_timeout`), and turn each answer into what `record`
would keep of it (`recorded_call`: JSON only, redacted, cut to `max_result_bytes`) before
`drift.check_server` compares. Servers are checked concurrently and independently.

Nothing is written: no fixtures, no staging folder, no `dirswap` recovery (a leftover of an
interrupted record is reported by `fixtures.load_recorded`, not repaired). Only the servers'
stderr logs are written, where every command writes them (outside fixtures/).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import anyio

from codemode_gen.client.mcp_session import McpSession
from codemode_gen.client.session_errors import (
    CallError,
    CallTimeout,
    ConnectError,
)
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import ServerConfig, Settings
from codemode_gen.generator.drift import check_server, plan_resamples
from codemode_gen.generator.drift_findings import Repeated, Resample, ServerCheck
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.record import StatusFn
from codemode_gen.generator.recorded import recordable_tools, recorded_call
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.untrusted import json_problem, shown

__all__ = ["check_servers"]


async def check_servers(
    configs: Mapping[str, ServerConfig],
    settings: Settings,
    recorded: Mapping[str, FixtureSet | None],
    *,
    log_dir: Path | None = None,
    status: StatusFn = lambda sid, text: None,
) -> list[ServerCheck]:
    """Check every server of `configs` against its recording (None: never recorded, so it is
    not even started); one `ServerCheck` each, in the order of `configs`."""
    checks = {sid: ServerCheck(sid) for sid in configs}
    live = {sid: cfg for sid, cfg in configs.items() if recorded.get(sid) is not None}
    for sid in configs:
        if sid not in live:
            checks[sid].not_recorded = True
            status(sid, "not recorded yet")
    if live:
        async with (
            SessionManager(live, log_dir=log_dir) as manager,
            anyio.create_task_group() as tg,
        ):
            for sid, config in live.items():
                fixture_set = recorded[sid]
                assert fixture_set is not None
                tg.start_soon(_check_one, manager, config, settings, fixture_set, checks, status)
    return [checks[sid] for sid in configs]


async def _check_one(
    manager: SessionManager,
    config: ServerConfig,
    settings: Settings,
    fixture_set: FixtureSet,
    checks: dict[str, ServerCheck],
    status: StatusFn,
) -> None:
    sid = config.id
    log_path = manager.log_path(sid)
    # What is compared and what is printed are redacted alike: a stderr tail or an error
    # message quoting a secret must not reach a CI log.
    redactor = Redactor.for_server(config, settings.redact_patterns)
    status(sid, "connecting")
    try:
        session = await manager.get(sid)
        listed = await session.list_tools()
    except ConnectError as exc:
        reason = redactor.text(exc.reason)
        checks[sid] = ServerCheck(sid, unreachable=reason, log_path=exc.log_path or log_path)
        status(sid, f"unreachable: {reason}")
        return
    except CallError as exc:  # connected, but tools/list failed
        reason = redactor.text(f"tools/list failed: {exc}")
        checks[sid] = ServerCheck(sid, unreachable=reason, log_path=log_path)
        status(sid, f"unreachable: {reason}")
        return
    kept, left_out = recordable_tools(listed)
    tools = [redactor.value(tool) for tool in kept]
    notes = [redactor.text(note) for note in (*session.warnings, *left_out)]
    server_json = None
    problem = json_problem(session.server_json)
    if problem is None:
        server_json = redactor.value(session.server_json)
    else:
        notes.append(f"initialize result not compared: it is not valid JSON: {problem}")
    plan, plan_notes = plan_resamples(fixture_set, tools, blocklist=config.blocklist)
    repeated = await _repeat(session, plan, redactor, settings, sid, status)
    check = check_server(
        fixture_set, server_json, tools, repeated, mode=config.unwrap, notes=[*notes, *plan_notes]
    )
    check.log_path = log_path
    check.live_tools = tools
    checks[sid] = check
    status(sid, check.status.replace("-", " "))


async def _repeat(
    session: McpSession,
    plan: list[Resample],
    redactor: Redactor,
    settings: Settings,
    sid: str,
    status: StatusFn,
) -> list[Repeated]:
    """Call each planned sample once, in order; a lost connection leaves the rest unchecked."""
    repeated: list[Repeated] = []
    for index, sample in enumerate(plan, start=1):
        if session.closed:
            repeated.append(Repeated(sample, failed="not repeated: the connection was lost"))
            continue
        status(sid, f"calling {shown(sample.tool)} ({index}/{len(plan)})")
        try:
            result = await session.call_tool(sample.tool, sample.input)
        except CallTimeout as exc:
            repeated.append(Repeated(sample, failed=redactor.text(exc.message)))
            continue
        except CallError as exc:
            reason = f"connection lost: {exc.message}" if session.closed else f"call failed: {exc}"
            repeated.append(Repeated(sample, failed=redactor.text(reason)))
            continue
        record, note = recorded_call(sample.input, result, 0, redactor, settings.max_result_bytes)
        if record is None:
            repeated.append(
                Repeated(sample, unrecordable=f"record would not keep the result: {note}")
            )
        elif record.get("truncated") is not None:
            repeated.append(Repeated(sample, skipped=f"{note}; a cut result has no reliable shape"))
        else:
            repeated.append(Repeated(sample, result=record["result"]))
    return repeated
