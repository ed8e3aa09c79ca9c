"""Learning from live calls: output types for the rest of the session, and recordings to keep.

A tool that declares no outputSchema and was never recorded types as `Promise<unknown>`: the
agent has to run it, log the result, read it and write the script again. One call is enough
to know the shape (output-type-inference-article.md), and the host sees every call anyway.

- `Learner` (every host: serve and the Python API): after a successful call of a tool that has
  neither a declared nor an inferred output type, its result is merged into the tool's learned
  type; runs that start after it see that type in `getTool`/`searchTools` (`outputSchema`,
  `declaration`) marked as learned in this session. The inference is `generate`'s own (genson
  with the same depth guard, map detection and merging, `infer.MergedSamples`), so what a
  session learns is what `generate` would write after recording the same calls. Only the merged
  type is kept, never the results (80 results of 0.9 MiB kept as samples made `serve` 550 MiB
  larger), and it is bounded by size: a tool whose type outgrows MAX_LEARNED_SCHEMA_BYTES (or
  all learned types MAX_LEARNED_BYTES) stops being learned, keeps its last type, and
  discovery says so. Merging walks the result: the host does it off the event loop.
- `LiveRecorder` (`run --record`, `serve --record`, `CodeMode(record=True)`): every successful
  live call is appended to fixtures/<server>/calls/ in `record`'s format, with its redaction,
  per-tool cap and idempotence (`merge_calls`), the server's folder replaced as a whole
  (`write_server_fixtures`), so a later `generate` types it and the type is reviewed in git.
  A flush reads the recording, merges every pending call and writes it back under the
  fixtures folder's lock (`dirswap.locked`: threads of this host and other processes), so
  concurrent runs and two `serve --record` on one project never overwrite each other's calls;
  a call that cannot be written is reported to the run that made it, never dropped silently.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from codemode_gen import dirswap
from codemode_gen.config import ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import (
    LIVE_FIELD,
    SERVER_FILE,
    load_fixture_set,
    write_server_fixtures,
)
from codemode_gen.generator.infer import MAX_INFER_NODES, Inference, MergedSamples
from codemode_gen.generator.recorded import merge_calls, recorded_call
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.untrusted import json_problem, shown
from codemode_gen.generator.unwrap import UnwrapMode
from codemode_gen.payload import at_most
from codemode_gen.runtime.host.catalog import LiveServer, ToolView

__all__ = ["Learned", "Learner", "LiveRecorder", "learned_note"]

#: Calls counted per learned tool: enough to see optional fields and unions; past it a call
#: changes what runs see only when it changes the type (each change rebuilds the run catalog),
#: and only the tool's calls numbered by a power of two (32nd, 64th, ...) are merged (`offer`):
#: every merge walks the whole result, ~4 ms of CPU for 64 KiB, and a type that held over this
#: many calls rarely changes.
MAX_LEARNED_SAMPLES = 20
#: Bounds one tool's learned type (its merged schema as JSON): a tool whose results keep
#: bringing new shapes (ever new keys) would grow it, and genson's state behind it, without
#: end. Past it that tool is no longer learned: it keeps its last type and discovery says so.
MAX_LEARNED_SCHEMA_BYTES = 32 * 1024
#: Bounds all learned types of a host together (JSON bytes of their schemas; genson's state is
#: a small multiple): a host calling thousands of untyped tools. Past it no other tool is learned.
MAX_LEARNED_BYTES = 2 * 1024 * 1024
#: A result of more JSON values than this is not learned from: merging walks every value (off
#: the event loop, but competing for the GIL with it); its shape is learned from smaller calls.
#: The merge's own bounded copy checks it (`MergedSamples.add(whole=True)`): no walk of its own.
MAX_LEARNED_RESULT_NODES = MAX_INFER_NODES
#: Tools a session learns at most (across servers), whatever their types' sizes.
MAX_LEARNED_TOOLS = 1000
#: Bytes of JSON of an input kept as a learned tool's example (its declaration shows one).
MAX_EXAMPLE_INPUT_BYTES = 512
#: Bytes of JSON of a result kept as a learned tool's example (its declaration shows it, cut
#: by generator/examples.py): the first call's result when it is this small, else a later one.
MAX_EXAMPLE_RESULT_BYTES = 4096
#: Bytes of recorded lines a recorder holds before writing them: past it the host flushes at
#: once instead of after the run, so a run of many large calls never holds them all in memory
#: (each line is already cut to `max_result_bytes`).
MAX_PENDING_RECORD_BYTES = 16 * 1024 * 1024


def learned_note(calls: int, stopped: str | None = None) -> str:
    """The line that marks a learned declaration (TypeScript comment)."""
    plural = "" if calls == 1 else "s"
    note = (
        f"// output type learned from {calls} live call{plural} in this session "
        "(not in out/: record it with --record, then run `codemode-gen generate`)"
    )
    return note if stopped is None else f"{note}; learning stopped: {stopped}"


@dataclass(frozen=True)
class Learned:
    """What a session learned about one tool's output, as runs see it."""

    inference: Inference
    calls: int  # calls merged (counted up to MAX_LEARNED_SAMPLES, then only when the type changed)
    example: Any  # a small input of a learned call, for the declaration's example; None if none
    stopped: str | None = None  # why the type no longer changes (a bound), or None
    example_result: Any = None  # a small wire result of the same call; None if none yet

    def example_call(self) -> dict[str, Any]:
        """A calls-file line of the example (generator/examples.py chooses from calls lines):
        its input, and its result when one was small enough to keep (else `{}`: no example)."""
        return {
            "input": self.example,
            "result": self.example_result if self.example_result is not None else {},
        }


@dataclass
class _State:
    merged: MergedSamples
    learned: Learned
    size: int  # JSON bytes of the learned schema or of the merge behind it, the larger


class Learner:
    """The output types learned from live calls, by config id and tool name; `version` changes
    whenever a run would see something new (the host's catalog cache keys on it).

    `observe` walks the result: call it off the event loop (one thread at a time: it is not
    reentrant); `learned` and `version` may be read from the loop meanwhile."""

    def __init__(self, max_samples: int = MAX_LEARNED_SAMPLES) -> None:
        self.max_samples = max_samples
        self.version = 0
        self._tools: dict[str, dict[str, _State]] = {}  # cid -> tool -> state
        self._count = 0
        self._bytes = 0
        # (config id, tool) -> calls offered, counted only once its type has MAX_LEARNED_SAMPLES
        # calls (so at most one entry per learned tool)
        self._offered: dict[tuple[str, str], int] = {}

    def wants(self, tool: ToolView) -> bool:
        """Whether a result of this tool teaches anything: it has no output type of its own
        (declared or inferred from recordings), or only one learned here."""
        return tool.output_schema is None or tool.learned_calls > 0

    def offer(self, config_id: str, tool_name: str) -> bool:
        """Whether the result of this call of a tool that `wants` learning is worth merging (ask
        once per successful call; no walk, so on the event loop): every call until its type
        has `max_samples` calls, then the calls whose number is a power of two."""
        state = self._tools.get(config_id, {}).get(tool_name)
        if state is None or state.learned.calls < self.max_samples:
            return True
        if state.learned.stopped is not None:
            return False
        key = (config_id, tool_name)
        offered = self._offered[key] = self._offered.get(key, state.learned.calls) + 1
        return offered & (offered - 1) == 0

    def observe(
        self, config_id: str, tool_name: str, mode: UnwrapMode, arguments: Any, result: Any
    ) -> None:
        """Merge a successful call's wire result (before unwrapping, as `record` stores it)."""
        if not isinstance(result, dict) or result.get("isError") is True:
            return
        state = self._tools.get(config_id, {}).get(tool_name)
        if state is not None and state.learned.stopped is not None:
            return
        if state is None and self._count >= MAX_LEARNED_TOOLS:
            return
        # Merge into a copy (bounded by the type's size), so a bound that is crossed keeps the
        # last type within it.
        merged = copy.deepcopy(state.merged) if state is not None else MergedSamples(mode)
        if not merged.add(result, whole=True):  # False too past MAX_LEARNED_RESULT_NODES
            return
        inference = merged.inference()
        # The merge's own state, not only the type: a map of ever new keys stays a small type
        # while the merge behind it keeps every key (infer.MergedSamples.state_bytes).
        size = max(
            len(json.dumps(inference.schema, separators=(",", ":"), default=str)),
            merged.state_bytes(),
        )
        old_size = state.size if state is not None else 0
        stopped = None
        if size > MAX_LEARNED_SCHEMA_BYTES:
            stopped = f"its type grew past {MAX_LEARNED_SCHEMA_BYTES // 1024} KiB (results of ever new shapes)"
        elif self._bytes - old_size + size > MAX_LEARNED_BYTES:
            stopped = (
                f"the session's learned types reached {MAX_LEARNED_BYTES // (1024 * 1024)} MiB"
            )
        if stopped is not None:
            if state is not None:
                state.learned = replace(state.learned, stopped=stopped)
                self.version += 1
            return
        example = state.learned.example if state is not None else None
        example_result = state.learned.example_result if state is not None else None
        if example_result is None and _small_json(result, MAX_EXAMPLE_RESULT_BYTES):
            # input and result of one call, so that the example is true as a whole
            example, example_result = (
                (copy.deepcopy(arguments) if _small_json(arguments) else None),
                copy.deepcopy(result),
            )
        elif example is None and _small_json(arguments):
            example = copy.deepcopy(arguments)
        before = state.learned.calls if state is not None else 0
        changed = state is None or inference.schema != state.learned.inference.schema
        calls = before + 1 if changed or before < self.max_samples else before
        learned = Learned(inference, calls, example, example_result=example_result)
        if state is None:
            self._tools.setdefault(config_id, {})[tool_name] = _State(merged, learned, size)
            self._count += 1
        else:
            state.merged, state.learned, state.size = merged, learned, size
        self._bytes += size - old_size
        if changed or calls != before:
            self.version += 1

    def learned(self, config_id: str) -> dict[str, Learned]:
        """The tools learned for one server, by tool name."""
        return {
            name: state.learned for name, state in sorted(self._tools.get(config_id, {}).items())
        }

    def servers(self) -> list[str]:
        return sorted(cid for cid, tools in self._tools.items() if tools)

    @property
    def learned_bytes(self) -> int:
        """JSON bytes of every learned schema (what MAX_LEARNED_BYTES bounds)."""
        return self._bytes


def _small_json(value: Any, limit: int = MAX_EXAMPLE_INPUT_BYTES) -> bool:
    # JSON of `limit` characters holds at most limit // 2 + 1 values and keys as `at_most`
    # counts them (each takes a character and a separator; a long string, counted once per
    # STRING_CHARS_PER_NODE characters, takes more): a larger value is refused that early.
    if not at_most(value, limit // 2 + 1):
        return False
    try:
        return len(json.dumps(value, ensure_ascii=False)) <= limit
    except (TypeError, ValueError, RecursionError):
        return False


@dataclass
class _Record:
    """One recorded call waiting to be written, and the run it belongs to."""

    tool: str
    line: dict[str, Any]
    size: int  # JSON bytes of the line, about
    run: Hashable


class LiveRecorder:
    """Successful live calls, written to fixtures/ in `record`'s format when `flush`ed (after
    each run, or at once past MAX_PENDING_RECORD_BYTES: never on a tool call's path).

    `add` and `flush` walk or write payloads: call them off the event loop. They are
    thread-safe: pending calls are shared under a mutex, and a flush holds the fixtures
    folder's lock from reading a recording to writing it back."""

    def __init__(
        self, fixtures_dir: Path, settings: Settings, configs: Mapping[str, ServerConfig]
    ) -> None:
        # Before any server starts: a path that cannot be written would lose every call of the
        # session, one note per run (UserError, like `record`). Imported here: `record` brings
        # the prober and output-schema checks, which a host that does not learn never uses.
        from codemode_gen.generator.record import check_fixtures_dir

        check_fixtures_dir(Path(fixtures_dir))
        self.fixtures_dir = Path(fixtures_dir)
        self.settings = settings
        self.configs = configs
        self._pending: dict[str, list[_Record]] = {}
        self._pending_bytes = 0
        self._mutex = threading.Lock()
        self._redactors: dict[str, Redactor] = {}
        self._notes: list[str] = []  # for the log: cut results, servers recorded from live sessions
        # run -> server -> why some of its calls are not in fixtures/ (yet): its diagnostics
        self._failures: dict[Hashable, dict[str, str]] = {}

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def add(
        self,
        config_id: str,
        tool_name: str,
        arguments: Any,
        result: Any,
        duration_ms: int,
        run: Hashable = None,
    ) -> None:
        config = self.configs.get(config_id)
        if config is None or not isinstance(result, dict) or result.get("isError") is True:
            return
        with self._mutex:
            redactor = self._redactors.get(config_id)
            if redactor is None:
                redactor = self._redactors[config_id] = Redactor.for_server(
                    config, self.settings.redact_patterns
                )
        record, problem = recorded_call(
            arguments, result, duration_ms, redactor, self.settings.max_result_bytes
        )
        if record is not None:
            record[LIVE_FIELD] = True  # learned in a session: `generate` says so (coverage)
        where = f"{config_id}.{shown(tool_name)}"
        size = 0
        if record is not None:
            try:
                size = len(
                    json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
                )
            except (TypeError, ValueError, RecursionError):
                record, problem = None, "the result cannot be written as JSON"
        with self._mutex:
            if record is None:
                self._fail(
                    run,
                    f"{where}:unrecordable",
                    self._redact(config_id, f"{where}: call not recorded: {problem}"),
                )
                return
            if problem is not None:
                self._notes.append(self._redact(config_id, f"{where}: {problem}"))
            self._pending.setdefault(config_id, []).append(_Record(tool_name, record, size, run))
            self._pending_bytes += size

    def take_notes(self) -> list[str]:
        with self._mutex:
            notes, self._notes = self._notes, []
        return notes

    def flush(self, lives: Mapping[str, LiveServer], run: Hashable = None) -> list[str]:
        """Write every pending call (whichever run made it); returns why calls of `run` are not
        in fixtures/ (empty when all of them are). Never raises for a server whose fixtures
        cannot be written: its calls stay pending (up to MAX_PENDING_RECORD_BYTES) for the next
        flush, and every run that made one is told."""
        try:
            # One lock for the whole flush: calls are taken under it, so calls added meanwhile by
            # other runs are merged too and no other writer is between a read and its write;
            # and a flush that finds its run's calls taken by another one waits until that one
            # has written them (or failed, and said so).
            with dirswap.locked(self.fixtures_dir):
                with self._mutex:
                    batches, self._pending, self._pending_bytes = self._pending, {}, 0
                for config_id, batch in sorted(batches.items()):
                    try:
                        self._write(config_id, batch, lives.get(config_id))
                    except BaseException as exc:
                        self._requeue(config_id, batch)
                        if not isinstance(exc, UserError | OSError):
                            raise
                        self._failed_flush(
                            config_id, exc.message if isinstance(exc, UserError) else str(exc)
                        )
        except (UserError, OSError) as exc:  # the folder cannot be locked (or created)
            with self._mutex:
                waiting = sorted(self._pending)
            for config_id in waiting:
                self._failed_flush(
                    config_id, exc.message if isinstance(exc, UserError) else str(exc)
                )
        with self._mutex:
            failures = self._failures.pop(run, {})
        return list(failures.values())

    def _redact(self, config_id: str, note: str) -> str:
        """A note is printed like calls are written: without the server's secrets."""
        redactor = self._redactors.get(config_id)
        return redactor.text(note) if redactor is not None else note

    def _fail(self, run: Hashable, key: str, note: str) -> None:
        """Tell `run` (and the log) that some of its calls are not recorded; under the mutex."""
        self._failures.setdefault(run, {})[key] = note
        self._notes.append(note)

    def _requeue(self, config_id: str, batch: list[_Record]) -> None:
        """Calls that could not be written wait for the next flush, the oldest dropped (and
        reported) past MAX_PENDING_RECORD_BYTES."""
        with self._mutex:
            queue = self._pending.setdefault(config_id, [])
            queue[:0] = batch
            self._pending_bytes += sum(r.size for r in batch)
            while self._pending_bytes > MAX_PENDING_RECORD_BYTES and queue:
                dropped = queue.pop(0)
                self._pending_bytes -= dropped.size
                self._fail(
                    dropped.run,
                    f"{config_id}:dropped",
                    f"{config_id}: recorded calls dropped: fixtures/ could not be written and more than"
                    f" {MAX_PENDING_RECORD_BYTES // (1024 * 1024)} MiB of calls were waiting",
                )
            if not queue:
                del self._pending[config_id]

    def _failed_flush(self, config_id: str, reason: str) -> None:
        with self._mutex:
            waiting = self._pending.get(config_id, [])
            note = self._redact(
                config_id,
                f"{config_id}: {len(waiting)} recorded call(s) not written to"
                f" {self.fixtures_dir}: {reason} (kept; the next run's flush retries)",
            )
            for run in {r.run for r in waiting}:
                self._fail(run, f"{config_id}:write", note)
            if not waiting:
                self._notes.append(
                    self._redact(config_id, f"{config_id}: recorded calls not written: {reason}")
                )

    def _write(self, config_id: str, batch: list[_Record], live: LiveServer | None) -> None:
        server_dir = self.fixtures_dir / config_id
        notes = dirswap.recover(server_dir)  # an interrupted swap: restore before reading
        # anything at server.json (a link, a FIFO) is read, so refused by name, never replaced
        if os.path.lexists(server_dir / SERVER_FILE):
            existing = load_fixture_set(server_dir)
            server_json, tools, old = existing.server_json, existing.tools, existing.calls
        elif live is not None:
            # Never recorded: the session's own initialize result and tool list, as `record`
            # would write them.
            with self._mutex:
                redactor = self._redactors[config_id]
            server_json = redactor.value(dict(live.server_json))
            tools = [redactor.value(dict(t)) for t in live.tools if json_problem(t) is None]
            old = {}
            notes.append(f"{config_id}: no recording yet; wrote {server_dir} from the live session")
        else:
            raise UserError(f"{server_dir}: no recording and no live tool list to start one from")
        listed = {t.get("name") for t in tools}
        calls = {name: list(records) for name, records in old.items()}
        new: dict[str, list[dict[str, Any]]] = {}
        for record in batch:
            if record.tool not in listed:
                note = (
                    f"{config_id}.{shown(record.tool)}: not in {server_dir}/tools.json, call not recorded"
                    " (run `codemode-gen record` to add the tool)"
                )
                with self._mutex:
                    self._fail(
                        record.run,
                        f"{config_id}.{record.tool}:unlisted",
                        self._redact(config_id, note),
                    )
                continue
            new.setdefault(record.tool, []).append(record.line)
        for name, records in new.items():
            calls[name] = merge_calls(calls.get(name, []), records, self.settings.max_samples)
        notes.extend(write_server_fixtures(self.fixtures_dir, config_id, server_json, tools, calls))
        with self._mutex:
            self._notes.extend(self._redact(config_id, note) for note in notes)
            for run in {r.run for r in batch}:  # written: earlier failed attempts are moot
                failures = self._failures.get(run)
                if failures is not None:
                    failures.pop(f"{config_id}:write", None)
