"""Host side of the sandbox: runs one agent script in a pooled worker process.

`Sandbox.run(code, modules, host_call, limits)` returns the §3.3 fields `{logs, result,
diagnostics}` (the bridge adds `toolTrace`). It never raises for anything the script does.

Guarantees the worker alone cannot give:
- the deadline is the caller's: one monotonic instant per run (`deadline=`, in
  `time.monotonic()` seconds; by default `Sandbox.run`'s start + `limits.timeoutMs`). Waiting
  for a worker (a cold start when the pool is empty), the worker's own interrupt timeout (it
  gets the time left, `budgetMs`) and the watchdog all derive from it, and every message names
  the caller's `limits.timeoutMs`. The response comes within `WATCHDOG_FACTOR` × timeoutMs of
  the deadline's start even when the script is stuck in one slow native operation: the
  watchdog kills the worker, keeps the log entries already streamed and answers
  `SANDBOX_LIMIT`;
- a `SandboxLimitExceeded` raised by `host_call` (or a `SandboxLimitError` reply) ends the
  run at once (§10: only limits abort a script), the worker is killed;
- cancelling `run()` kills the worker; in every abnormal end the in-flight `host_call` tasks
  are cancelled (§7.4), so MCP calls get cancelled too.

A run that may be resumed elsewhere (runtime/host/resume.py: approvals asked through MCP's
input_required) passes `hooks`: fields of the run message (a journal to keep, one to replay),
the worker's `paused` and `diverged` messages, and a `RunHandle` to pause the worker, let it go
on, or end the run at once with diagnostics of its own (so does a host call raising
`RunStopped`).

Worker reuse: a worker serves runs one after another with a fresh QuickJS realm each time
(§1.4), and is only returned to the pool after a run that ended by itself; after a timeout,
limit, cancellation or crash it is killed and replaced. `MAX_RUNS_PER_WORKER` recycles it
anyway, bounding whatever a long-lived native heap might accumulate.

This module owns the pool (which worker serves which run, how many exist, when they start and
stop) and `Sandbox`, the entry point that fixes a run's deadline; the dialogue of one run with
its worker is run.py, the worker process's start and pipes worker_process.py.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping

from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox import outcome, protocol
from codemode_gen.runtime.sandbox.idle import trim_idle
from codemode_gen.runtime.sandbox.protocol import HostCall
from codemode_gen.runtime.sandbox.run import Run, RunHooks
from codemode_gen.runtime.sandbox.worker_process import WorkerCrashed, WorkerProcess
from codemode_gen.runtime.waits import queue_wait

log = logging.getLogger(__name__)

#: The response must arrive within 1.5× of timeoutMs (spec §3.2.4, §7.4; the bound is docs/DESIGN.md's
#: "Deadline"). The worker stops the script
#: itself at the deadline (1.0×); the watchdog kills the process at WATCHDOG_FACTOR × timeoutMs
#: after the deadline's start, which leaves time to kill and answer. Waiting for a worker to
#: start is bounded by the same instant.
WATCHDOG_FACTOR = 1.2
#: Warm workers kept waiting. Each is a Python process with the engine imported (~20 MB);
#: two cover a run in progress plus the next one on a 2-core machine.
DEFAULT_POOL_SIZE = 2
#: Runs one worker process serves before it is replaced; bounds slow leaks in the native
#: engine or the worker's Python heap across many runs. A worker grows ~0.5 MB over 1,000 varied
#: runs (calls, logs, errors, 100,000-object heaps, timers, URL), and its start costs ~0.1 s of
#: CPU: recycling every 100 runs cost 0.6-1 ms of worker CPU per run (of ~6.5) over 1,000 empty
#: runs back to back, and 6-11% of their wall time.
MAX_RUNS_PER_WORKER = 1000
#: How long a worker beyond the warm `size` stays idle before it is stopped. A burst of
#: concurrent runs starts up to max_workers processes; keeping them for a while means the next
#: burst reuses them instead of paying a process start (~0.1 s of CPU) per extra worker.
IDLE_WORKER_TTL_S = 30.0


def default_max_workers() -> int:
    """Scripts running at once when nobody says: two per CPU. A run holds its worker while it
    awaits tool calls (mostly I/O), so one per core would queue runs that use no CPU; memory
    stays bounded by max_workers x (worker process + limits.maxMemoryBytes)."""
    return 2 * max(1, os.cpu_count() or 1)


class WorkerPool:
    """Worker processes for runs: at most `max_workers` alive at once (busy, idle or starting),
    `size` of them kept idle and ready (engine imported, next realm prepared) so a run does not
    pay process start-up on its request path; more stay idle after a burst, for
    IDLE_WORKER_TTL_S.

    `start()` fills the idle set; a clean run gives its worker back; killed or recycled workers
    are replaced in the background. When all `max_workers` are busy, `acquire` queues (first
    come, first served): a released worker, or the slot of one that was killed, goes straight to
    the longest waiter. Bound to the event loop that first uses it."""

    def __init__(self, size: int = DEFAULT_POOL_SIZE, *, max_workers: int | None = None) -> None:
        self.max_workers = max(1, max_workers if max_workers is not None else default_max_workers())
        self.size = max(0, min(size, self.max_workers))
        self._idle: list[WorkerProcess] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._busy = 0  # workers handed out (or being started for a run) and not yet released
        # Runs waiting for a worker, oldest first; each gets a worker or a free slot (None).
        self._waiters: collections.deque[asyncio.Future[WorkerProcess | None]] = collections.deque()
        self._trimmer: asyncio.Task[None] | None = None
        self._retiring: set[asyncio.Task[None]] = set()  # retired workers being reaped
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def idle(self) -> int:
        """Workers ready for a run (started and waiting), or starting to be."""
        return len(self._idle) + len(self._starting)

    @property
    def waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())

    def saturated(self) -> bool:
        """Whether every worker slot is taken by a run (so a new run has to queue)."""
        return self._busy >= self.max_workers

    def _alive(self) -> int:
        return self._busy + len(self._idle) + len(self._starting)

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Workers of a previous (closed) loop cannot be awaited here: kill them by pid.
            for w in self._idle:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.proc.pid, signal.SIGKILL)
            self._idle.clear()
            self._starting.clear()
            self._waiters.clear()
            self._busy = 0
            self._trimmer = None
            self._loop = loop

    async def start(self) -> None:
        """Start workers up to `size` and wait until they are ready (warm-up)."""
        self.warm()
        if self._starting:
            await asyncio.gather(*self._starting, return_exceptions=True)

    def warm(self) -> None:
        """Start workers up to `size` in the background."""
        self._check_loop()
        self._fill()

    def _fill(self) -> None:
        if self._closed:
            return
        while (
            len(self._idle) + len(self._starting) < self.size and self._alive() < self.max_workers
        ):
            task = asyncio.get_running_loop().create_task(self._start_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _start_one(self) -> None:
        try:
            worker = await WorkerProcess.start()
        except (OSError, WorkerCrashed) as exc:
            log.error("cannot start a sandbox worker: %s", exc)
            return
        try:
            await worker.wait_ready()
        except (OSError, WorkerCrashed, TimeoutError, ValueError) as exc:
            log.error("sandbox worker failed to start: %s", exc)
            await worker.reap()
            return
        except BaseException:
            await worker.reap()
            raise
        if self._closed:
            await worker.reap()
            return
        self._idle.append(worker)
        # A run may be queued for it: the pool was full when it asked, and this is the refill.
        self._hand_idle()

    async def acquire(self) -> WorkerProcess:
        """A ready worker: an idle one, else one that is starting, else a new one while fewer
        than `max_workers` are alive, else the next one released (queued, first come first
        served). Cancelling the wait (a deadline) leaves the queue."""
        if self._closed:
            raise RuntimeError("WorkerPool is closed")
        self._check_loop()
        ready = await self._take_ready()
        if ready is not None:
            return ready
        if self._alive() < self.max_workers and not self._waiters:
            self._busy += 1
            return await self._start_for_run()
        waiter: asyncio.Future[WorkerProcess | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            given = await waiter
        except asyncio.CancelledError:
            self._abandon(waiter)
            raise
        if given is not None:
            return given  # its slot was handed over with it
        return await self._start_for_run()  # a slot was handed over: _busy counts it

    async def _start_for_run(self) -> WorkerProcess:
        """Start a worker in a slot already counted in `_busy` (released again on failure)."""
        try:
            worker = await WorkerProcess.start()
            try:
                await worker.wait_ready()
            except BaseException:
                await worker.reap()
                raise
        except BaseException:
            self._free_slot()
            raise
        return worker

    def _abandon(self, waiter: asyncio.Future[WorkerProcess | None]) -> None:
        """A queued run gave up: leave the queue; what it was handed goes to the next one."""
        with contextlib.suppress(ValueError):
            self._waiters.remove(waiter)
        if waiter.done() and not waiter.cancelled():
            given = waiter.result()
            if given is None:
                self._free_slot()
            else:
                self._put_back(given)

    def _next_waiter(self) -> asyncio.Future[WorkerProcess | None] | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _free_slot(self) -> None:
        """A busy slot ends (its worker was killed, or never started): the next queued run gets
        the slot to start a worker in; with none waiting, the pool refills."""
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result(None)
            return
        self._busy -= 1
        self._fill()

    def _put_back(self, worker: WorkerProcess, *, first: bool = False) -> None:
        """A reusable worker from a busy slot: to the next queued run, else idle."""
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result(worker)
            return
        self._busy -= 1
        worker.idle_since = time.monotonic()
        if first:
            self._idle.insert(0, worker)
        else:
            self._idle.append(worker)
        if len(self._idle) > self.size and self._trimmer is None:
            self._trimmer = asyncio.get_running_loop().create_task(self._trim())

    async def _trim(self) -> None:
        """Stop the workers idle beyond `size` for IDLE_WORKER_TTL_S (the oldest idle first)."""
        try:
            await trim_idle(
                self._idle,
                self.size,
                IDLE_WORKER_TTL_S,
                closed=lambda: self._closed,
                stop=lambda worker: worker.reap(),
            )
        finally:
            self._trimmer = None

    def _hand_idle(self) -> None:
        """Give idle workers to queued runs (a refill finished while runs were waiting)."""
        while self._idle and self._waiters:
            waiter = self._next_waiter()
            if waiter is None:
                return
            self._busy += 1
            waiter.set_result(self._idle.pop(0))

    async def acquire_idle(self) -> WorkerProcess | None:
        """An idle ready worker, or None (never starts a process: one already starting, e.g.
        the warm-up, is waited for; with none idle or starting, None at once)."""
        if self._closed:
            return None
        self._check_loop()
        return await self._take_ready()

    async def _take_ready(self) -> WorkerProcess | None:
        """An idle worker, counted busy; else, unless runs are queued (they come first), the
        next of those starting once it is ready; None when there is neither."""
        while True:
            worker = await self._pop_idle()
            if worker is not None:
                self._busy += 1
                return worker
            starting = [t for t in self._starting if not t.done()]
            if not starting or self._waiters:
                return None
            await asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED)

    async def _pop_idle(self) -> WorkerProcess | None:
        """The first idle worker still alive (dead ones are reaped on the way), else None."""
        while self._idle:
            candidate = self._idle.pop(0)
            if candidate.alive():
                return candidate
            await candidate.reap()
        return None

    async def release(self, worker: WorkerProcess, reusable: bool, *, ran: bool = True) -> None:
        """Return a worker from `acquire`/`acquire_idle` after a clean run, or kill it.

        After a syntax check (`ran=False`: not counted towards MAX_RUNS_PER_WORKER) the worker
        goes back first in line, so the run that follows gets it: it is idle with its realm
        ready, while a worker that just finished a run is still building its next realm."""
        if ran:
            worker.runs += 1
        keep = (
            reusable
            and not self._closed
            and worker.alive()
            and worker.runs < MAX_RUNS_PER_WORKER
            and asyncio.get_running_loop() is self._loop
        )
        if keep:  # idle beyond `size` only until IDLE_WORKER_TTL_S (`_trim`)
            self._put_back(worker, first=not ran)
            return
        if reusable and worker.alive() and not self._closed and worker.runs >= MAX_RUNS_PER_WORKER:
            # Retired after a clean run: its run has answered, so it goes in the background (a
            # reap takes tens of ms) and its slot is free for a replacement at once.
            worker.kill()
            task = asyncio.get_running_loop().create_task(worker.reap())
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)
            self._free_slot()
            return
        try:
            await worker.reap()
        finally:
            self._free_slot()

    async def aclose(self) -> None:
        self._closed = True
        if self._trimmer is not None:
            self._trimmer.cancel()
            with contextlib.suppress(BaseException):
                await self._trimmer
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(BaseException):
                await task
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.cancel()
        idle, self._idle = self._idle, []
        for w in idle:
            await w.reap()
        for task in list(self._retiring):
            with contextlib.suppress(BaseException):
                await task


class Sandbox:
    """Runs agent scripts; one instance serves many runs (concurrently, one worker each)."""

    def __init__(
        self,
        pool: WorkerPool | None = None,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        max_workers: int | None = None,
    ) -> None:
        self._pool = pool if pool is not None else WorkerPool(pool_size, max_workers=max_workers)

    @property
    def pool(self) -> WorkerPool:
        return self._pool

    async def start(self, *, wait: bool = True) -> None:
        """Optional warm-up: start the pooled workers now instead of on the first run; with
        `wait=False` they start in the background (a server answering its client first)."""
        if wait:
            await self._pool.start()
        else:
            self._pool.warm()

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(
        self,
        code: str,
        modules: Mapping[str, str],
        host_call: HostCall,
        limits: Limits,
        *,
        deadline: float | None = None,
        hooks: RunHooks | None = None,
    ) -> resp.Response:
        """Run `code` as the ES module `agent.js`, `modules` importable by specifier.

        `deadline` is when the caller's `limits.timeoutMs` runs out, in `time.monotonic()`
        seconds (a host that did work for the run first, e.g. connecting servers, passes the
        deadline it fixed when its run started); default: now + timeoutMs. `hooks`: a run that
        may be paused and resumed (see the module's docstring).
        Returns `{logs, result, diagnostics}`; raises only `asyncio.CancelledError` (after
        killing the worker) when the caller cancels.
        """
        if deadline is None:
            deadline = time.monotonic() + limits.timeoutMs / 1000.0
        kill_at = _kill_at(deadline, limits)
        try:
            # Waiting for a worker (queued behind max_workers runs, or a cold start) counts
            # within the run's timeoutMs.
            with queue_wait("worker"):
                worker = await self._acquire_until(deadline)
        except TimeoutError:
            if self._pool.saturated():
                return resp.build_response(
                    [], None, [diag.worker_limit(limits.timeoutMs, self._pool.max_workers)]
                )
            # No worker was ready before the deadline (a slow cold start): the caller's
            # deadline wins over starting the script at all.
            return resp.build_response([], None, [diag.start_limit(limits.timeoutMs)])
        except (WorkerCrashed, OSError, ValueError) as exc:
            log.error("cannot start a sandbox worker: %s", exc)
            return resp.build_response(
                [], None, [diag.sandbox_error("the sandbox could not be started")]
            )
        run = Run(worker, host_call, limits, hooks)
        reusable = False
        try:
            outcome = await run.execute(code, dict(modules), deadline, kill_at)
            reusable = run.clean
            return outcome
        finally:
            # A caller cancelled again and again (an anyio cancel scope) interrupts each await
            # here: the worker is killed first and its slot is released whatever happens.
            if not reusable:
                worker.kill()
            try:
                await run.cancel_calls()
            finally:
                await self._pool.release(worker, reusable)

    async def check_syntax(
        self, code: str, *, deadline: float | None = None
    ) -> list[diag.Diagnostic] | None:
        """The `SYNTAX_ERROR` diagnostics of `code` as `run` would report them, or None when it
        parses (or the check could not be made: `run` then reports whatever it finds).

        Lets a host skip costly per-run work (connecting servers) for a script that can never
        start. One round trip (~0.3 ms) to an idle pooled worker (the host never imports the
        engine; a worker of the warm-up still starting is waited for); when none is idle or
        starting (all busy, or no pool) the check is skipped rather than paying a process start,
        and the run reports the error itself. Waits at most until `deadline`
        (`time.monotonic()` seconds).
        """
        try:
            worker = await asyncio.wait_for(self._pool.acquire_idle(), _seconds_until(deadline))
        except TimeoutError:
            return None
        if worker is None:
            return None
        reusable = False
        try:
            remaining = _seconds_until(deadline)
            worker.send({"op": protocol.CHECK, "code": code})
            await worker.drain()
            msg = await asyncio.wait_for(worker.recv(), remaining)
            if msg.get("op") != protocol.CHECKED:
                return None
            diagnostics = outcome.checked(msg)  # MalformedOutcome is a ValueError
            reusable = True
            return diagnostics or None
        except (WorkerCrashed, ValueError, TimeoutError, ConnectionError, BrokenPipeError):
            return None
        finally:
            if not reusable:
                worker.kill()
            await self._pool.release(worker, reusable, ran=False)

    async def _acquire_until(self, until: float) -> WorkerProcess:
        """A ready worker, or TimeoutError at `until` (`time.monotonic()` seconds). Awaited in
        this task (no task of its own, as `wait_for` makes): an idle worker costs no loop turn."""
        async with asyncio.timeout(_seconds_until(until)):
            return await self._pool.acquire()


def _seconds_until(deadline: float | None) -> float | None:
    """The time left until `deadline` (`time.monotonic()` seconds) as a wait_for timeout."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _kill_at(deadline: float, limits: Limits) -> float:
    """The watchdog instant: WATCHDOG_FACTOR × timeoutMs after the deadline's start."""
    return deadline + limits.timeoutMs / 1000.0 * (WATCHDOG_FACTOR - 1.0)
