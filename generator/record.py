"""`codemode-gen record`: connect to servers and write their fixtures.

Per server: initialize result -> server.json, every tools/list page -> tools.json, and the
sample calls -> calls/<tool>.jsonl. Only calls the user asked for (`--samples`, `[[samples]]`)
are made, plus one `{}` probe of each tool that declares `readOnlyHint: true` and has no
required arguments; nothing else is ever called.

Safety properties (issue 2):
- re-recording is idempotent: a call with the same (redacted) input replaces its earlier
  line, other lines stay, at most `max_samples` lines a tool (newest kept);
- a server is written only after it finished, as a whole folder swap
  (`fixtures.write_server_fixtures`), so a crash, timeout or Ctrl-C leaves its old fixtures;
- secrets (configured env/header values, extra patterns) are redacted before writing;
- servers are recorded concurrently and independently: one failing server is reported and
  the others are still written.

Failure levels: a *server* failure (cannot connect, tools/list fails, connection lost) writes
nothing for that server; a failed *sample* (JSON-RPC error, timeout, unknown tool) is
reported and makes the run fail, but the server's other recordings are written; a failed
*probe* is only a note, since nobody asked for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from codemode_gen.config import Sample, ServerConfig, Settings, parse_sample
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import load_fixture_set, write_server_fixtures
from codemode_gen.generator.redact import Redactor
from codemode_gen.jsonio import iter_jsonl

__all__ = [
    "Sample",
    "ServerOutcome",
    "StatusFn",
    "load_samples_file",
    "merge_calls",
    "probe_input",
    "record_servers",
]

StatusFn = Callable[[str, str], None]  # (server_id, short status text)

# Bounds a --samples file read fully into memory (a wrong path to a huge log file).
MAX_SAMPLES_FILE_BYTES = 50 * 1024 * 1024


@dataclass
class ServerOutcome:
    """What happened to one server; `error` set means nothing was written for it."""

    server_id: str
    error: str | None = None
    tools: int = 0
    calls: int = 0
    failed_samples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed_samples


# --------------------------------------------------------------------------- samples


def load_samples_file(path: Path) -> list[Sample]:
    """A JSON list (or JSONL, one object a line) of {"server", "tool", "input"}."""
    try:
        if path.stat().st_size > MAX_SAMPLES_FILE_BYTES:
            raise UserError(f"{path}: samples file is larger than {MAX_SAMPLES_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: samples file not found", hint="check the --samples path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read samples file: {exc}") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
        lines = True
    else:
        lines = False
    if not lines:
        if isinstance(whole, list):
            return [parse_sample(item, f"{path}: [{i}]") for i, item in enumerate(whole)]
        if isinstance(whole, dict):  # JSONL with a single line
            return [parse_sample(whole, f"{path}:1")]
        raise UserError(
            f"{path}: expected a JSON list of samples or JSONL (one sample object a line)",
            hint='for example [{"server": "notes", "tool": "search_notes", "input": {"query": "milk"}}]',
        )
    hint = "a samples file is one JSON list, or one JSON object per line (JSONL)"
    return [
        parse_sample(item, f"{path}:{lineno}")
        for lineno, item in iter_jsonl(text, path, what="samples file", hint=hint)
    ]


def probe_input(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{}` if the tool may be called unasked (readOnlyHint and no required args), else None."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict) or annotations.get("readOnlyHint") is not True:
        return None
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None  # cannot tell what it requires: do not guess
    required = schema.get("required", [])
    if required not in (None, []) and required != ():
        return None
    return {}


def _input_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def merge_calls(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], max_samples: int
) -> list[dict[str, Any]]:
    """Old lines stay; a new call replaces an old one with the same input; newest N kept.

    A new call whose result equals the old line's result keeps the old line untouched (its
    recordedAt/durationMs too), so re-recording an unchanged server changes no byte of the
    committed fixtures and does not make `generate --check` stale.
    """
    merged: dict[str, dict[str, Any]] = {}
    for record in old:
        key = _input_key(record.get("input"))
        merged.pop(key, None)
        merged[key] = dict(record)
    for record in new:
        key = _input_key(record.get("input"))
        previous = merged.get(key)
        if previous is not None and previous.get("result") == record.get("result"):
            continue
        merged.pop(key, None)  # re-inserting moves it to the end: it is the newest
        merged[key] = dict(record)
    records = list(merged.values())
    return records[-max_samples:] if max_samples > 0 else []


# --------------------------------------------------------------------------- recording


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
    """Record every server in `configs` concurrently; returns one outcome each, in order."""
    from codemode_gen.runtime.sessions import SessionManager

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
    manager: Any,
    config: ServerConfig,
    settings: Settings,
    samples: list[Sample],
    probe: bool,
    max_samples: int,
    fixtures_dir: Path,
    outcome: ServerOutcome,
    status: StatusFn,
) -> None:
    from codemode_gen.runtime.sessions import CallError, CallTimeout, ConnectError

    sid = config.id
    outcome.log_path = manager.log_path(sid)
    redactor = Redactor(config.secrets(), settings.redact_patterns)
    try:
        status(sid, "connecting")
        try:
            session = await manager.get(sid)
        except ConnectError as exc:
            outcome.log_path = exc.log_path or outcome.log_path
            raise _ServerFailed(exc.reason) from None
        tools = await session.list_tools()
        for warning in session.warnings:
            outcome.notes.append(warning)
        by_name = {t["name"]: t for t in tools}

        planned: list[tuple[str, Any, bool]] = []  # (tool, input, is_probe)
        for sample in samples:
            if sample.tool not in by_name:
                outcome.failed_samples.append(f"{sample.tool}: the server lists no such tool")
                continue
            planned.append((sample.tool, sample.input, False))
        if probe:
            asked = {(s.tool, _input_key(s.input)) for s in samples}
            for tool in tools:
                name = tool["name"]
                args = probe_input(tool)
                if args is None or name in config.blocklist or (name, _input_key(args)) in asked:
                    continue
                planned.append((name, args, True))

        new_calls: dict[str, list[dict[str, Any]]] = {}
        for index, (tool_name, args, is_probe) in enumerate(planned, start=1):
            status(sid, f"calling {tool_name} ({index}/{len(planned)})")
            started = time.perf_counter()
            try:
                result = await session.call_tool(tool_name, args)
            except CallTimeout as exc:
                _call_failed(outcome, tool_name, args, is_probe, exc.message)
                continue
            except CallError as exc:
                if session.closed:
                    raise _ServerFailed(f"connection lost while calling {tool_name}: {exc.message}") from None
                _call_failed(outcome, tool_name, args, is_probe, str(exc))
                continue
            duration = round((time.perf_counter() - started) * 1000)
            new_calls.setdefault(tool_name, []).append(
                {
                    "input": redactor.value(args),
                    "result": redactor.value(result),
                    "durationMs": duration,
                    "recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            )

        status(sid, "writing fixtures")
        old_calls = _old_calls(fixtures_dir / sid, outcome)
        calls: dict[str, list[dict[str, Any]]] = {}
        for name in by_name:
            merged = merge_calls(old_calls.get(name, []), new_calls.get(name, []), max_samples)
            if merged:
                calls[name] = merged
        dropped = sorted(set(old_calls) - set(by_name))
        if dropped:
            outcome.notes.append(f"dropped recorded calls of tools no longer listed: {', '.join(dropped)}")
        write_server_fixtures(
            fixtures_dir,
            sid,
            redactor.value(session.server_json),
            [redactor.value(t) for t in tools],
            calls,
        )
        outcome.tools = len(tools)
        outcome.calls = sum(len(v) for v in new_calls.values())
        status(sid, _summary(outcome))
    except _ServerFailed as exc:
        outcome.error = str(exc)
        status(sid, f"failed: {outcome.error}")
    except CallError as exc:  # tools/list failed after connecting
        outcome.error = f"tools/list failed: {exc}"
        status(sid, f"failed: {outcome.error}")
    except UserError as exc:  # e.g. fixtures dir not writable
        outcome.error = exc.message
        status(sid, f"failed: {outcome.error}")
    except OSError as exc:
        outcome.error = f"cannot write fixtures: {exc}"
        status(sid, f"failed: {outcome.error}")


def _call_failed(outcome: ServerOutcome, tool: str, args: Any, is_probe: bool, reason: str) -> None:
    text = f"{tool} {_input_key(args)}: {reason}"
    if is_probe:
        outcome.notes.append(f"probe {text} (not recorded)")
    else:
        outcome.failed_samples.append(text)


def _old_calls(server_dir: Path, outcome: ServerOutcome) -> dict[str, list[dict[str, Any]]]:
    if not (server_dir / "server.json").is_file():
        return {}
    try:
        return load_fixture_set(server_dir).calls
    except UserError as exc:
        outcome.notes.append(f"previous fixtures unreadable, replaced: {exc.message}")
        return {}


def _summary(outcome: ServerOutcome) -> str:
    text = f"recorded {outcome.tools} tool{'' if outcome.tools == 1 else 's'}, {outcome.calls} call{'' if outcome.calls == 1 else 's'}"
    if outcome.failed_samples:
        text += f", {len(outcome.failed_samples)} samples failed"
    return text
