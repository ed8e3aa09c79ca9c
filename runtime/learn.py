"""Learning from live calls: output types for the rest of the session, and recordings to keep.

A tool that declares no outputSchema and was never recorded types as `Promise<unknown>`: the
agent has to run it, log the result, read it and write the script again. One call is enough
to know the shape (output-type-inference-article.md), and the host sees every call anyway.

- `Learner` (every host: serve and the Python API): after a successful call of a tool that has
  neither a declared nor an inferred output type, its result becomes a sample; runs that start
  after it see the type inferred from the samples so far, in `getTool`/`searchTools`
  (`outputSchema`, `declaration`) marked as learned in this session. The inference is
  `generate`'s own (an in-memory build with the samples as recorded calls: the same depth guard,
  property-name filter and merging), so what a session learns is what `generate` would write
  after recording the same calls. Kept in memory only.
- `LiveRecorder` (`run --record`, `serve --record`, `CodeMode(record=True)`): every successful
  live call is appended to fixtures/<server>/calls/ in `record`'s format, with its redaction,
  per-tool cap and idempotence (`merge_calls`), the server's folder replaced as a whole
  (`write_server_fixtures`), so a later `generate` types it and the type is reviewed in git.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import SERVER_FILE, load_fixture_set, write_server_fixtures
from codemode_gen.generator.record import (
    check_fixtures_dir,
    input_key,
    json_problem,
    merge_calls,
    recorded_call,
    shown,
)
from codemode_gen.generator.redact import Redactor
from codemode_gen.runtime.catalog import LiveServer, ToolView

__all__ = ["Learner", "LiveRecorder", "learned_note"]

#: Samples kept per tool for in-session inference: enough to see optional fields and unions,
#: bounded so a tool called in a loop all day does not grow host memory.
MAX_LEARNED_SAMPLES = 20
#: A result larger than this (JSON bytes) is not kept as a sample: one page of a huge listing
#: would otherwise sit in host memory for the whole session; its shape is learned from
#: smaller calls.
MAX_LEARNED_RESULT_BYTES = 1024 * 1024
#: Tools whose samples a session keeps at most (across servers): bounds memory for a host that
#: calls thousands of distinct untyped tools.
MAX_LEARNED_TOOLS = 1000


def learned_note(calls: int) -> str:
    """The line that marks a learned declaration (TypeScript comment)."""
    plural = "" if calls == 1 else "s"
    return (
        f"// output type learned from {calls} live call{plural} in this session "
        "(not in out/: record it with --record, then run `codemode-gen generate`)"
    )


class Learner:
    """Samples of untyped tools' results, by config id and tool name; `version` changes
    whenever a run would see something new (the host's catalog cache keys on it)."""

    def __init__(self, max_samples: int = MAX_LEARNED_SAMPLES) -> None:
        self.max_samples = max_samples
        self.version = 0
        self._samples: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}  # cid -> tool -> input key -> call
        self._tools = 0

    def wants(self, tool: ToolView) -> bool:
        """Whether a result of this tool teaches anything: it has no output type of its own
        (declared or inferred from recordings), or only one learned here."""
        return tool.output_schema is None or tool.learned_calls > 0

    def observe(self, config_id: str, tool: ToolView, arguments: Any, result: Any) -> None:
        """A successful call's wire result (before unwrapping, as `record` stores it)."""
        if not self.wants(tool) or not isinstance(result, dict) or result.get("isError") is True:
            return
        if json_problem(result) is not None:
            return
        try:
            size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")))
        except (TypeError, ValueError):
            return
        if size > MAX_LEARNED_RESULT_BYTES:
            return
        by_tool = self._samples.setdefault(config_id, {})
        calls = by_tool.get(tool.tool_name)
        if calls is None:
            if self._tools >= MAX_LEARNED_TOOLS:
                return
            calls = by_tool[tool.tool_name] = {}
            self._tools += 1
        key = input_key(arguments)
        previous = calls.pop(key, None)
        calls[key] = {"input": arguments, "result": result}
        while len(calls) > self.max_samples:
            del calls[next(iter(calls))]
        if previous is None or previous["result"] != result:
            self.version += 1

    def samples(self, config_id: str) -> dict[str, list[dict[str, Any]]]:
        """The calls learned for one server, as `record` would list them, by tool name."""
        return {name: list(calls.values()) for name, calls in sorted(self._samples.get(config_id, {}).items())}

    def servers(self) -> list[str]:
        return sorted(cid for cid, tools in self._samples.items() if tools)


@dataclass
class _Pending:
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class LiveRecorder:
    """Successful live calls, written to fixtures/ in `record`'s format when `flush`ed (once
    per run, after it: never on a tool call's path)."""

    def __init__(self, fixtures_dir: Path, settings: Settings, configs: Mapping[str, ServerConfig]) -> None:
        # Before any server starts: a path that cannot be written would lose every call of the
        # session, one note per run (UserError, like `record`).
        check_fixtures_dir(Path(fixtures_dir))
        self.fixtures_dir = Path(fixtures_dir)
        self.settings = settings
        self.configs = configs
        self._pending: dict[str, _Pending] = {}
        self._redactors: dict[str, Redactor] = {}

    def add(self, config_id: str, tool_name: str, arguments: Any, result: Any, duration_ms: int) -> None:
        config = self.configs.get(config_id)
        if config is None or not isinstance(result, dict) or result.get("isError") is True:
            return
        redactor = self._redactors.get(config_id)
        if redactor is None:
            redactor = self._redactors[config_id] = Redactor.for_server(config, self.settings.redact_patterns)
        pending = self._pending.setdefault(config_id, _Pending())
        record, problem = recorded_call(arguments, result, duration_ms, redactor, self.settings.max_result_bytes)
        if problem is not None:
            pending.notes.append(f"{config_id}.{shown(tool_name)}: {problem}")
        if record is not None:
            pending.calls.setdefault(tool_name, []).append(record)

    def flush(self, lives: Mapping[str, LiveServer]) -> list[str]:
        """Write what the last run recorded; returns notes for the user (never raises for a
        server whose fixtures cannot be written: the note says why, the next flush retries)."""
        notes: list[str] = []
        pending, self._pending = self._pending, {}
        for config_id, batch in sorted(pending.items()):
            said = list(batch.notes)
            if batch.calls:
                try:
                    said.extend(self._write(config_id, batch.calls, lives.get(config_id)))
                except (UserError, OSError) as exc:
                    reason = exc.message if isinstance(exc, UserError) else str(exc)
                    said.append(f"{config_id}: recorded calls not written: {reason}")
                    retry = self._pending.setdefault(config_id, _Pending())
                    for name, records in batch.calls.items():
                        retry.calls.setdefault(name, [])[:0] = records
            redactor = self._redactors.get(config_id)  # printed like written: redacted
            notes.extend(redactor.text(note) if redactor is not None else note for note in said)
        return notes

    def _write(self, config_id: str, new: dict[str, list[dict[str, Any]]], live: LiveServer | None) -> list[str]:
        server_dir = self.fixtures_dir / config_id
        notes: list[str] = []
        # anything at server.json (a link, a FIFO) is read, so refused by name, never replaced
        if os.path.lexists(server_dir / SERVER_FILE):
            existing = load_fixture_set(server_dir)
            server_json, tools, old = existing.server_json, existing.tools, existing.calls
        elif live is not None:
            # Never recorded: the session's own initialize result and tool list, as `record`
            # would write them.
            redactor = self._redactors[config_id]
            server_json = redactor.value(dict(live.server_json))
            tools = [redactor.value(dict(t)) for t in live.tools if json_problem(t) is None]
            old = {}
            notes.append(f"{config_id}: no recording yet; wrote {server_dir} from the live session")
        else:
            return [f"{config_id}: recorded calls not written: no recording and no live tool list"]
        listed = {t.get("name") for t in tools}
        calls = {name: list(records) for name, records in old.items()}
        for name, records in new.items():
            if name not in listed:
                notes.append(
                    f"{config_id}.{shown(name)}: not in {server_dir}/tools.json, call not recorded"
                    " (run `codemode-gen record` to add the tool)"
                )
                continue
            calls[name] = merge_calls(calls.get(name, []), records, self.settings.max_samples)
        notes.extend(write_server_fixtures(self.fixtures_dir, config_id, server_json, tools, calls))
        return notes
