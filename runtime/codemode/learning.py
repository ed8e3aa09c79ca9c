"""Where live tool results go besides the script: learned output types, and fixtures/ (record).

Every successful live call teaches later runs the tool's output type (runtime/host/learn.py),
and with `record` is also written to fixtures/. Both walk the result, so they run in one thread
of their own, in call order, never on the event loop; at most MAX_PENDING_OBSERVATIONS results
wait for it, so results cannot pile up in host memory faster than the thread keeps up.

Learning alone waits for the run to end: what a run learns is for the runs after it, and a
merge running beside the script competes with it for the GIL (a 64 KiB result made each call
of a loop ~1.8x slower). A run's results are kept (not large ones: those are learned at once,
and none past MAX_PENDING_OBSERVATIONS) until it has answered, then learned in the thread; the
next run waits for them before it builds its catalog. An agent's runs are seconds apart, so
it never waits. Recording is not deferred: a run says which of its calls were not written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from codemode_gen.config import ServerConfig, Settings
from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.codemode.builds import Builder
from codemode_gen.runtime.host.catalog import Catalog, LiveServer, ToolView
from codemode_gen.runtime.host.learn import (
    MAX_PENDING_RECORD_BYTES,
    Learner,
    LiveRecorder,
    learned_note,
)

log = logging.getLogger(__name__)

# Live results waiting to be learned from or recorded (runtime/host/learn.py: walks of the result,
# done in one thread per host): past it the next call's result waits for a slot before the
# script gets it, instead of results piling up in host memory faster than the thread keeps up.
MAX_PENDING_OBSERVATIONS = 8


class LearningSink:
    """Learning from and recording the live results of tool calls, off the event loop."""

    def __init__(
        self,
        configs: Mapping[str, ServerConfig],
        settings: Settings,
        *,
        record: bool | Path,
        builder: Builder,
        lives: Callable[[], Mapping[str, LiveServer]],
    ) -> None:
        """`record`: also write the calls to fixtures/ (True: the settings' fixtures dir, or a
        folder); `lives()`: each server's last tool-list snapshot (what a recording and a learned
        build describe)."""
        self.configs = configs
        self._builder = builder
        self._lives = lives
        self.learner = Learner()
        self.recorder: LiveRecorder | None = None
        if record is not False:
            fixtures_dir = settings.fixtures_dir if record is True else Path(record)
            self.recorder = LiveRecorder(fixtures_dir, settings, configs)
        self._notes: list[str] = []
        # One thread, at most MAX_PENDING_OBSERVATIONS at once; (config id, tool) being learned from.
        self._observer: ThreadPoolExecutor | None = None
        self._observing: set[asyncio.Future[None]] = set()
        self._slots: asyncio.Semaphore | None = None
        self._learning: set[tuple[str, str]] = set()
        # run -> its results waiting for it to end (`release`); how many are waiting in all;
        # the merges of ended runs' results under way (what the next run waits for)
        self._deferred: dict[Hashable, list[tuple[str, Any, str, Any, dict[str, Any]]]] = {}
        self._held = 0
        self._released: set[asyncio.Future[None]] = set()
        self._flushing: asyncio.Task[list[str]] | None = (
            None  # a flush past MAX_PENDING_RECORD_BYTES
        )

    async def aclose(self) -> None:
        """Finish the observations under way and write what was recorded. What ended runs kept
        only to learn from is dropped if not merged yet: no run comes after this one to see it."""
        self._deferred.clear()
        self._held = 0
        for job in self._released:
            job.cancel()  # one a thread has started runs to its end (a few small results)
        if self._observing:
            await asyncio.gather(*self._observing, return_exceptions=True)
        if self._flushing is not None:
            await asyncio.gather(self._flushing, return_exceptions=True)
        if self.recorder is not None:
            await self.flush()
        if self._observer is not None:
            self._observer.shutdown(wait=False)
            self._observer = None

    async def on_result(
        self,
        run: Hashable,
        observed: list[asyncio.Future[None]],
        config_id: str,
        tool: ToolView,
        arguments: Any,
        result: dict[str, Any],
        duration_ms: int,
        large: bool,
    ) -> None:
        """Every successful live call (the bridge's hook): merged into the tool's learned type,
        and a line for fixtures/ when recording. Both walk the result, so they run in the
        observation thread, never on the event loop; this waits only while
        MAX_PENDING_OBSERVATIONS results are waiting for it already. Learning alone, of a
        result that is not `large` (payload.is_large), waits for the run's end (`release`)."""
        key = (config_id, tool.tool_name)
        if self.recorder is None and not large:
            if (
                self._held < MAX_PENDING_OBSERVATIONS
                and self.learner.wants(tool)
                and self.learner.offer(config_id, tool.tool_name)
            ):
                mode = self.configs[config_id].unwrap
                item = (config_id, mode, tool.tool_name, arguments, result)
                self._deferred.setdefault(run, []).append(item)
                self._held += 1
            return
        # One result per tool waits to be learned from at a time: later ones would only queue
        # behind it (learning needs a few samples, not every one of a tight loop).
        learn = (
            self.learner.wants(tool)
            and key not in self._learning
            and self.learner.offer(config_id, tool.tool_name)
        )
        if not learn and self.recorder is None:
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(MAX_PENDING_OBSERVATIONS)
        slots = self._slots
        await slots.acquire()
        if learn:
            self._learning.add(key)
        mode = self.configs[config_id].unwrap
        job = self._in_thread(
            self._observe,
            run,
            config_id,
            mode,
            tool.tool_name,
            learn,
            arguments,
            result,
            duration_ms,
        )
        observed.append(job)

        def done(_: asyncio.Future[None]) -> None:
            slots.release()
            if learn:
                self._learning.discard(key)
            recorder = self.recorder
            if (
                recorder is not None
                and recorder.pending_bytes > MAX_PENDING_RECORD_BYTES
                and (self._flushing is None or self._flushing.done())
            ):  # too much waiting for the run's end: write it now
                self._flushing = asyncio.ensure_future(self.flush())

        job.add_done_callback(done)

    def release(self, run: Hashable) -> None:
        """The run has ended (answered, failed or cancelled): learn from the results it kept."""
        items = self._deferred.pop(run, None)
        if not items:
            return
        job = self._in_thread(self._learn_all, items)
        self._released.add(job)

        def done(_: asyncio.Future[None]) -> None:
            self._held = max(0, self._held - len(items))
            self._released.discard(job)

        job.add_done_callback(done)

    def _in_thread(self, fn: Callable[..., None], *args: Any) -> asyncio.Future[None]:
        """`fn(*args)` in the observation thread (one, started on first use, so results are
        handled in call order), counted in `_observing` until it ends (`aclose` waits for it)."""
        if self._observer is None:
            self._observer = ThreadPoolExecutor(1, thread_name_prefix="codemode-observe")
        job = asyncio.get_running_loop().run_in_executor(self._observer, fn, *args)
        self._observing.add(job)
        job.add_done_callback(self._observing.discard)
        return job

    async def settled(self) -> None:
        """Wait for what ended runs kept to learn from (before a run builds its catalog, so that
        it sees their types); at once when nothing is under way. Runs still going are not waited
        for: what they learn is for the runs that start after they end."""
        if self._released:
            await asyncio.gather(*self._released, return_exceptions=True)

    def _learn_all(self, items: list[tuple[str, Any, str, Any, dict[str, Any]]]) -> None:
        """In the observation thread: one ended run's results, in call order."""
        for config_id, mode, tool_name, arguments, result in items:
            self._observe(None, config_id, mode, tool_name, True, arguments, result, 0)

    def _observe(
        self,
        run: Hashable,
        config_id: str,
        mode: Any,
        tool_name: str,
        learn: bool,
        arguments: Any,
        result: dict[str, Any],
        duration_ms: int,
    ) -> None:
        """In the observation thread: learning and recording never fail a call or a run."""
        try:
            if learn:
                self.learner.observe(config_id, tool_name, mode, arguments, result)
            if self.recorder is not None:
                self.recorder.add(config_id, tool_name, arguments, result, duration_ms, run)
        except Exception as exc:
            log.warning(
                "learning from %s.%s failed: %s: %s",
                config_id,
                tool_name,
                type(exc).__name__,
                jsonsafe.clip(str(exc), 300),
            )

    async def flush(self, run: Hashable = None) -> list[str]:
        """Write the calls recorded so far (after each run: never on a call's path; a no-op
        without `record`); returns why calls of `run` are not in fixtures/ (empty: all are).
        Every note also goes to the log and `take_notes`."""
        if self.recorder is None:
            return []
        failures = await asyncio.to_thread(self.recorder.flush, dict(self._lives()), run)
        notes = self.recorder.take_notes()
        self._notes.extend(notes)
        for note in notes:
            (
                log.warning
                if "not recorded" in note or "not written" in note or "dropped" in note
                else log.info
            )("record: %s", note)
        return failures

    def take_notes(self) -> list[str]:
        """What live recording had to say since the last call (written, skipped, failed)."""
        notes, self._notes = self._notes, []
        return notes

    def apply(self, catalog: Catalog) -> None:
        """Give this run's catalog the output types learned from earlier runs' calls: tools that
        have none of their own get the type (and declaration) `generate` would infer from the
        same calls, marked as learned (`ToolView.learned_calls`)."""
        servers = self.learner.servers()
        if not servers:
            return
        lives = self._lives()
        for config_id in servers:
            view = next((v for v in catalog.servers.values() if v.config_id == config_id), None)
            live = lives.get(config_id)
            if view is None or live is None or view.unavailable is not None:
                continue
            learned = self.learner.learned(config_id)
            entry = self._builder.learned_entry(
                config_id, view.server_id, live, learned, self.learner.version
            )
            built = {t.get("toolName"): t for t in entry.get("tools", [])} if entry else {}
            tools = dict(view.tools)
            for name, got in learned.items():
                tool, output_tool = tools.get(name), built.get(name)
                if tool is None or output_tool is None or not self.learner.wants(tool):
                    continue
                output = output_tool.get("output")
                if not isinstance(output, Mapping) or output.get("source") != "inferred":
                    continue
                declaration = output_tool.get("declaration")
                if (
                    isinstance(declaration, str)
                    and output_tool.get("exportName") == tool.export_name
                ):
                    declaration = f"{learned_note(got.calls, got.stopped)}\n{declaration}"
                else:
                    declaration = tool.declaration
                tools[name] = replace(
                    tool,
                    output_schema=output_tool.get("outputSchema"),
                    declaration=declaration,
                    learned_calls=got.calls,
                    learning_stopped=got.stopped,
                )
            view.tools = tools
