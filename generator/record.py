"""`codemode-gen record`: connect to servers and write their fixtures.

Per server: initialize result -> server.json, every tools/list page -> tools.json, and the
sample calls -> calls/<tool>.jsonl. Only calls the user asked for (`--samples`, `[[samples]]`)
are made, plus probes of tools that declare `readOnlyHint: true`: one `{}` call of each that has
no required arguments, then one call of each whose required arguments can all be filled
(`fill_input`) from its schema (`examples`, `default`, `const`, the first of an `enum`) or from
what other tools of the server were called with and returned, in this run or recorded before
(a `repo_path` another tool took, an `id` a list returned), up to MAX_PROBE_ROUNDS rounds, so
that a chain such as list_notes → get_note is probed. A tool that already has a successful
recorded call, or a sample in this run, is not probed again; nothing else is ever called.

Safety properties:
- re-recording is idempotent: a call with the same (redacted) input replaces its earlier
  line, other lines stay, at most `max_samples` lines a tool (newest kept);
- a server is written only after it finished, as a whole folder swap
  (`fixtures.write_server_fixtures`), so a crash, timeout or Ctrl-C leaves its old fixtures;
- secrets (`Redactor.for_server`: env/header values, every value taken from an environment
  variable, url credentials, extra patterns) are redacted before writing, and from every line
  printed about the server;
- servers are recorded concurrently and independently: one failing server is reported and
  the others are still written;
- a fixtures path that cannot be written is refused before any server is started.

Failure levels: a *server* failure (cannot connect, tools/list fails, connection lost) writes
nothing for that server; a failed *sample* (unknown tool; an input its inputSchema rejects,
which is never sent; JSON-RPC error, timeout; a tool error, `isError`; a result that breaks
the declared outputSchema) is reported, is not recorded and makes the run fail, but the
server's other recordings are written. A sample may expect a failure (`expect = "error"` or
`"drift"`): it is then recorded as what it is. A failed *probe* is only a warning, since
nobody asked for it (best-effort), and is not recorded either.

Hostile servers (spec §11: server responses are untrusted input):
- a result is kept only if it is JSON (`json_problem`: no NaN/Infinity, no nesting past
  MAX_RECORDED_DEPTH); otherwise that call fails with the reason, the rest stays. A lone
  surrogate (`"\\ud800"`, valid JSON text) is kept: fixtures.py writes it as that escape;
- a result larger than `max_result_bytes` (codemode.toml) is cut (`cap_result`): long strings
  end in TRUNCATION_MARK, long arrays lose their tail, the line gets a `"truncated"` field and
  the report a warning; inference skips such lines;
- a tool definition that is not JSON is left out of tools.json with a warning;
- tool names become calls file names only through `fixtures.calls_file_names`, and reach the
  report only through `shown` (no control characters, bounded).

This module is the recording loop (connect, plan, call, merge, write). Its parts live in their
own owners: generator/samples.py reads `--samples`, generator/probe.py plans the probes,
generator/record_outcome.py judges samples and keeps each server's account,
generator/recorded.py makes and merges calls-file lines, generator/untrusted.py holds the
checks and bounds for server values.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from codemode_gen import dirswap
from codemode_gen.client.session_errors import (
    CallError,
    CallTimeout,
    ConnectError,
)
from codemode_gen.client.sessions import SessionManager
from codemode_gen.config import Sample, ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import SERVER_FILE, load_fixture_set, write_server_fixtures
from codemode_gen.generator.probe import fill_input, probe_input
from codemode_gen.generator.record_outcome import (
    Planned,
    ServerOutcome,
    call_failed,
    call_label,
    plan_samples,
    redact_outcome,
    result_failure,
    summary,
)
from codemode_gen.generator.recorded import input_key, merge_calls, recordable_tools, recorded_call
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.untrusted import json_problem, shown
from codemode_gen.generator.unwrap import unwrap_result

__all__ = [
    "StatusFn",
    "check_fixtures_dir",
    "record_servers",
]

StatusFn = Callable[[str, str], None]  # (server_id, short status text)

# Rounds of probes with filled arguments: each may use what the previous one returned (list →
# get → its details); a server cannot keep `record` calling without end.
MAX_PROBE_ROUNDS = 2


def check_fixtures_dir(path: Path) -> None:
    """Refuse a fixtures folder that cannot be written, before any server is started or called.

    `record` (and `run --record`) writes only after every call was made: a path that is a
    regular file, or in a folder we may not write, would otherwise cost a call of every sample
    of every server and then fail each of them. The folder itself need not exist yet: the
    nearest existing folder above it must then be writable (it is created when written)."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    hint = "pass --fixtures with a folder you can write, or fix `fixtures` in codemode.toml"
    if not existing.is_dir():
        what = (
            "is not a folder"
            if existing == path
            else f"cannot be created: {existing} is not a folder"
        )
        raise UserError(f"{path}: the fixtures path {what}", hint=hint)
    try:
        handle, name = tempfile.mkstemp(prefix=".codemode-write-check-", dir=existing)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        where = "" if existing == path else f" ({existing}, where it would be created)"
        raise UserError(
            f"{path}: cannot write the fixtures folder{where}: {exc.strerror or exc}", hint=hint
        ) from None


class _ServerFailed(Exception):
    pass


async def record_servers(
    configs: Mapping[str, ServerConfig],
    settings: Settings,
    *,
    fixtures_dir: Path,
    samples: Iterable[Sample] = (),
    probe: bool = True,
    max_samples: int | None = None,
    log_dir: Path | None = None,
    status: StatusFn = lambda sid, text: None,
) -> list[ServerOutcome]:
    """Record every server in `configs` concurrently; returns one outcome each, in order.

    Raises UserError, before any server is started, when `fixtures_dir` cannot be written."""
    check_fixtures_dir(fixtures_dir)
    limit = max_samples if max_samples is not None else settings.max_samples
    by_server: dict[str, list[Sample]] = {sid: [] for sid in configs}
    for sample in samples:
        if sample.server in by_server:
            by_server[sample.server].append(sample)
    outcomes = {sid: ServerOutcome(sid) for sid in configs}
    async with SessionManager(configs, log_dir=log_dir) as manager, anyio.create_task_group() as tg:
        for sid, config in configs.items():
            tg.start_soon(
                _record_one,
                manager,
                config,
                settings,
                by_server[sid],
                probe,
                limit,
                fixtures_dir,
                outcomes[sid],
                status,
            )
    return [outcomes[sid] for sid in configs]


async def _record_one(
    manager: SessionManager,
    config: ServerConfig,
    settings: Settings,
    samples: list[Sample],
    probe: bool,
    max_samples: int,
    fixtures_dir: Path,
    outcome: ServerOutcome,
    status: StatusFn,
) -> None:
    sid = config.id
    outcome.log_path = manager.log_path(sid)
    redactor = Redactor.for_server(config, settings.redact_patterns)

    def say(text: str) -> None:  # what we print is redacted like what we write
        status(sid, redactor.text(text))

    try:
        say("connecting")
        try:
            session = await manager.get(sid)
        except ConnectError as exc:
            outcome.log_path = exc.log_path or outcome.log_path
            raise _ServerFailed(exc.reason) from None
        server_problem = json_problem(session.server_json)
        if server_problem is not None:
            raise _ServerFailed(f"its initialize result is not valid JSON: {server_problem}")
        listed = await session.list_tools()
        for warning in session.warnings:
            outcome.notes.append(warning)
        tools, left_out = recordable_tools(listed)
        outcome.warnings.extend(left_out)
        by_name = {t["name"]: t for t in tools}

        planned = plan_samples(samples, by_name, outcome)
        if probe:
            asked = {(s.tool, input_key(s.input)) for s in samples}
            for tool in tools:
                name = tool["name"]
                args = probe_input(tool)
                if args is None or name in config.blocklist or (name, input_key(args)) in asked:
                    continue
                planned.append(Planned(name, args, None))

        # What fills a read-only tool's required arguments (fill_input): the server's recorded
        # calls, then this run's, in order.
        recorded = _quiet_old_calls(fixtures_dir / sid)
        sources: list[tuple[str, Any, Any]] = [
            (name, line.get("input"), unwrap_result(line["result"], config.unwrap))
            for name in sorted(recorded)
            for line in recorded[name]
            if _usable(line)
        ]
        new_calls: dict[str, list[dict[str, Any]]] = {}

        async def make(calls: list[Planned], label: str = "") -> None:
            for index, call in enumerate(calls, start=1):
                say(f"calling {shown(call.tool)} ({index}/{len(calls)}{label})")
                started = time.perf_counter()
                try:
                    result = await session.call_tool(call.tool, call.input)
                except CallTimeout as exc:
                    call_failed(outcome, call, exc.message)
                    continue
                except CallError as exc:
                    if session.closed:
                        raise _ServerFailed(
                            f"connection lost while calling {shown(call.tool)}: {exc.message}"
                        ) from None
                    call_failed(outcome, call, f"protocol error: {exc}")
                    continue
                duration = round((time.perf_counter() - started) * 1000)
                record, problem = recorded_call(
                    call.input, result, duration, redactor, settings.max_result_bytes
                )
                if record is None:
                    call_failed(outcome, call, problem or "not recordable")
                    continue
                failure = result_failure(
                    by_name[call.tool], call, result, record, config.unwrap, outcome
                )
                if failure is not None:
                    call_failed(outcome, call, failure)
                    continue
                if problem is not None:
                    outcome.warnings.append(f"{call_label(call.tool, call.input)}: {problem}")
                new_calls.setdefault(call.tool, []).append(record)
                if _usable(record):
                    sources.append((call.tool, call.input, unwrap_result(result, config.unwrap)))

        await make(planned)
        if probe:
            # Each read-only tool once: not one that was just called or has a good recording.
            done = {call.tool for call in planned} | {
                name for name, lines in recorded.items() if any(map(_usable, lines))
            }
            for round_ in range(1, MAX_PROBE_ROUNDS + 1):
                batch = []
                for tool in tools:
                    name = tool["name"]
                    if name in done or name in config.blocklist:
                        continue
                    args = fill_input(tool, sources)
                    if args is not None:
                        batch.append(Planned(name, args, None))
                        done.add(name)
                if not batch:
                    break
                outcome.notes.append(
                    f"probed with arguments filled from schemas and other calls (round {round_}): "
                    + ", ".join(f"{call_label(c.tool, c.input)}" for c in batch)
                )
                await make(batch, f", probes with filled arguments, round {round_}")

        say("writing fixtures")
        # Read, merge and write under the fixtures folder's lock: a `serve --record` or another
        # `record` flushing this server meanwhile must not lose its calls or ours.
        with dirswap.locked(fixtures_dir):
            # An interrupted earlier record may have left the previous recording hidden: restore
            # it before reading the calls it holds, so they are merged, not lost.
            outcome.notes.extend(dirswap.recover(fixtures_dir / sid))
            old_calls = _old_calls(fixtures_dir / sid, outcome)
            calls: dict[str, list[dict[str, Any]]] = {}
            for name in by_name:
                merged = merge_calls(old_calls.get(name, []), new_calls.get(name, []), max_samples)
                if merged:
                    calls[name] = merged
            dropped = sorted(set(old_calls) - set(by_name))
            if dropped:
                outcome.notes.append(
                    "dropped recorded calls of tools no longer listed: "
                    + ", ".join(shown(name) for name in dropped)
                )
            outcome.notes.extend(
                write_server_fixtures(
                    fixtures_dir,
                    sid,
                    redactor.value(session.server_json),
                    [redactor.value(t) for t in tools],
                    calls,
                )
            )
        outcome.tools = len(tools)
        outcome.calls = sum(len(v) for v in new_calls.values())
        say(summary(outcome))
    except _ServerFailed as exc:
        outcome.error = str(exc)
    except CallError as exc:  # tools/list failed after connecting
        outcome.error = f"tools/list failed: {exc}"
    except UserError as exc:  # e.g. fixtures dir not writable
        outcome.error = exc.message
    except OSError as exc:
        outcome.error = f"cannot write fixtures: {exc}"
    finally:
        redact_outcome(outcome, redactor)
    if outcome.error is not None:
        status(sid, f"failed: {outcome.error}")


def _old_calls(server_dir: Path, outcome: ServerOutcome) -> dict[str, list[dict[str, Any]]]:
    # anything at server.json (a link, a FIFO) is read, so refused by name and said, not skipped
    if not os.path.lexists(server_dir / SERVER_FILE):
        return {}
    try:
        return load_fixture_set(server_dir).calls
    except UserError as exc:
        outcome.notes.append(f"previous fixtures unreadable, replaced: {exc.message}")
        return {}


def _usable(line: Mapping[str, Any]) -> bool:
    """A recorded call that describes the tool: it succeeded and was not cut."""
    result = line.get("result")
    return (
        isinstance(result, dict)
        and result.get("isError") is not True
        and line.get("truncated") is None
    )


def _quiet_old_calls(server_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The server's recorded calls, to fill probe arguments from; nothing when they cannot be
    read (`_old_calls` says why, when they are merged)."""
    if not os.path.lexists(server_dir / SERVER_FILE):
        return {}
    try:
        return load_fixture_set(server_dir).calls
    except UserError:
        return {}
