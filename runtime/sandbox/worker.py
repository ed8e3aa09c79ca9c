"""The Python sandbox worker process: runs agent scripts in QuickJS, one run at a time.

The host starts the native worker instead whenever it was built (runtime/native/, the same
protocol and behaviour: runtime/js/supervisor.js is a port of this module, realm.py and
run_state.py, so a change here is a change there); this one is the fallback for an install
without a C compiler (runtime/sandbox/worker_process.py `worker_kind`).

Why a process: the engine holds the GIL while JS runs and one slow native operation can
outlast its interrupt check by seconds, so the host must be able to kill the sandbox at the
deadline (docs/DESIGN.md, "Where the sandbox runs"). The worker owns no MCP session: every
tool call goes to the host as a message and the worker awaits the reply.

Lifetime: started by `runtime/sandbox/pool.WorkerPool`, it imports the engine, says `ready` and
waits. Each `run` gets a fresh engine realm (spec §1.4: nothing survives from one run to the
next inside JS); the host reuses a worker only after a run that ended cleanly, and kills it
after any timeout, limit, cancellation or crash.

Pipe protocol: runtime/sandbox/protocol.py (message kinds, framing, limits; the host side is
runtime/sandbox/pool.py). This module owns the process: the pipe and the run lifecycle (which
realm, which modules), and it says how a run ended (`done`, raw: the host's outcome.py turns it
into the answer's diagnostics); the engine realm a run uses, with the functions bound into it, is
realm.py, and its clock and journal run_state.py.

Everything from outside that a run's JavaScript observes comes through this module, in an order
it can write down and replay (docs/DESIGN.md, "Deterministic runs"): tool-call replies, the
timer alarm and the clock. JS waits for them through one pump (`__codemode_next__`: at most one
event is pending at a time, so each is seen after the previous one's reactions have all run),
reads the run clock (`__codemode_now__`, whole milliseconds; Date and setTimeout use it) and gets
Math.random's seed and Date's base from the run message. A run started with `journal` writes
down the events it hands over and the clock values it returns; `pause` answers with that
journal (`paused`), and a run started with `replay` hands over the journal's events and clock
values first, in the same order, before anything live: the script then makes the same calls
with the same values up to where the journal ends (runtime/host/resume.py: approvals asked through
MCP's input_required). `check` parses `code` as the agent module without running anything (between
runs only) and answers `checked` with the SyntaxError (or null) that a run of the same code
would meet. Nothing else may write to the protocol stream: fd 1 is redirected to
stderr at start-up. A reply framed by `protocol.encode_reply` is handed to JS as the raw text of
its JSON value, never decoded in Python.

This module must stay cheap to import: no `mcp`, no generator.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    # The worker process never opens a connection: asyncio's optional `ssl` (OpenSSL, ~4.5 MB
    # of RSS per worker) is refused, and asyncio runs without it. Only when started as the
    # worker: a host importing this module keeps its TLS.
    sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]
    # Nor does it need OpenSSL's hashes: without `_hashlib`, hashlib uses its built-in sha256
    # & co. (same digests) and libcrypto is never loaded (~3.5 MB of RSS per worker).
    sys.modules.setdefault("_hashlib", None)  # type: ignore[arg-type]

import asyncio
import contextlib
import itertools
import json
import os
import time
import traceback
from typing import Any

from codemode_gen.runtime import jsonsafe
from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox import protocol
from codemode_gen.runtime.sandbox.engine import (
    Engine,
    EngineError,
    EnginePendingLimit,
    EngineTimeout,
    preload,
    release_memory,
)
from codemode_gen.runtime.sandbox.protocol import MODULE_ERRORS, MODULE_HOST, DoneKind
from codemode_gen.runtime.sandbox.realm import Realm, realm_key
from codemode_gen.runtime.script_errors import AGENT_MODULE

#: A `done`'s fields, and the prelude's report JSON text it carries verbatim (protocol.encode_done).
Done = tuple[dict[str, Any], str | None]
#: How the prelude's report of a run that ended well begins (prelude.js `run`: `status` is its
#: first key): such a report crosses to the host as it is, its result parsed there only.
OK_REPORT_PREFIX = '{"status":"ok"'

#: Prelude phase A, run as one script. url.js is not in it: prelude.js evaluates its text (bound by
#: `Realm.create`) only when a run first reads URL or URLSearchParams.
PRELUDE_FILES = ("prelude.js",)


class Worker:
    def __init__(self, out_fd: int, in_fd: int = 0) -> None:
        self._out = out_fd
        self._in = in_fd
        self._buf = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[dict[str, Any] | None] | None = None
        #: Calls waiting for the host's reply, by the call id on the pipe: which realm and which
        #: of its run's calls (1, 2, ... in the order the script made them).
        self._replies: dict[int, tuple[Realm, int]] = {}
        self._ids = itertools.count(1)
        self._running: Realm | None = None  # the realm of the run in progress (pause/resume)
        self._warm: Realm | None = None
        self._spent: Realm | None = None
        #: Module sources of the last run by digest: the host sends only what is not held here.
        self._held: dict[str, str] = {}
        self.prelude = "\n".join(protocol.js_source(name) for name in PRELUDE_FILES)
        self.errors_js = protocol.js_source(protocol.BUNDLED_MODULES[MODULE_ERRORS])
        self.host_js = protocol.js_source(protocol.BUNDLED_MODULES[MODULE_HOST])
        self.url_js = protocol.js_source("url.js")

    # ---- pipe ---------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        self._write(protocol.encode(message))

    def send_call(self, realm: Realm, seq: int, request_text: Any) -> None:
        """A call message with the JS-made request JSON embedded verbatim (no re-escaping); its
        reply goes to `realm` as call `seq` of its run (`_resolve`)."""
        call_id = next(self._ids)
        self._replies[call_id] = (realm, seq)
        self._write(protocol.encode_call(call_id, request_text))

    def drop_calls(self, realm: Realm) -> None:
        """Forget the calls of `realm` still waiting: a late reply to one is discarded."""
        for call_id in [k for k, (owner, _) in self._replies.items() if owner is realm]:
            del self._replies[call_id]

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._out, view)
            view = view[n:]

    def _on_readable(self) -> None:
        """stdin is readable: take what is there, handle every complete line.

        Read on the event loop itself (not a reader thread): a reply then resolves its future
        in the same loop iteration that sees it, without a thread hop, a self-pipe wake-up
        and a GIL hand-over on every tool call."""
        assert self._inbox is not None
        try:
            chunk = os.read(self._in, protocol.READ_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            assert self._loop is not None
            self._loop.remove_reader(self._in)
            self._inbox.put_nowait(None)
            return
        buf = self._buf
        start = len(buf)
        buf += chunk
        pos = 0
        while True:
            end = buf.find(b"\n", max(pos, start))
            if end < 0:
                break
            self._handle_line(bytes(buf[pos:end]))
            pos = end + 1
            start = pos
        if pos:
            del buf[:pos]

    def _handle_line(self, line: bytes) -> None:
        assert self._inbox is not None
        framed = protocol.decode_reply(line)
        if framed is not None:
            self._resolve(*framed)
            return
        try:
            msg = protocol.decode(line)
        except ValueError:  # not one JSON object (MalformedMessage included): not for us
            return
        op = msg.get("op")
        if op == protocol.REPLY:
            self._resolve(msg.get("id"), msg.get("reply"))
        elif op in (protocol.PAUSE, protocol.RESUME):
            # Read only while JS waits (the loop runs between its turns): the run's state is whole.
            realm = self._running
            if realm is not None:
                realm.pause() if op == protocol.PAUSE else realm.resume()
        else:
            self._inbox.put_nowait(msg)

    def _resolve(self, call_id: Any, reply: Any) -> None:
        entry = self._replies.pop(call_id, None) if isinstance(call_id, int) else None
        if entry is not None:
            realm, seq = entry
            realm.on_reply(seq, reply if isinstance(reply, str) else json.dumps(reply))

    async def serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        os.set_blocking(self._in, False)
        self._loop.add_reader(self._in, self._on_readable)
        await self.prepare_next(Limits())
        self.send({"op": protocol.READY})
        while True:
            msg = await self._inbox.get()
            if msg is None or msg.get("op") == protocol.EXIT:
                return
            if msg.get("op") == protocol.CHECK:
                self.send({"op": protocol.CHECKED, "syntax": await self.check(msg)})
            elif msg.get("op") == protocol.RUN:
                limits = Limits()
                done: Done
                try:
                    limits = Limits.from_json(msg.get("limits") or {})
                    done = await self.run(msg, limits)
                except Exception:  # a bug here must not hang the host: report, stay alive
                    traceback.print_exc(file=sys.stderr)
                    done = {"kind": DoneKind.INTERNAL}, None
                self._write(protocol.encode_done(*done))
                self.free_spent()
                # Most runs share the host's limits: have the next realm ready with the same ones.
                await self.prepare_next(limits)

    # ---- one run ------------------------------------------------------------------------------
    async def check(self, msg: dict[str, Any]) -> dict[str, str] | None:
        """The SyntaxError `run` would meet in `msg["code"]` (protocol.py's `checked`), or None.

        Parses on the warm realm (parsing registers nothing, so the realm stays fresh for the
        next run), building one only when none is waiting."""
        code = jsonsafe.utf8_safe(str(msg.get("code") or ""))
        try:
            if self._warm is None:
                await self.prepare_next(Limits())
            if self._warm is None:
                return None  # no engine to parse with: the run will report the setup failure
            return self._parse(self._warm.engine, code)
        except Exception:  # a bug here must not hang the host: the run reports what it finds
            traceback.print_exc(file=sys.stderr)
        return None

    async def run(self, msg: dict[str, Any], limits: Limits | None = None) -> Done:
        """One run of `msg` (a `run` message) with `limits`, its limits as already read: what
        its `done` says (protocol.py)."""
        t0 = time.monotonic()
        if limits is None:
            limits = Limits.from_json(msg.get("limits") or {})
        budget_ms = msg.get("budgetMs")
        budget_s = limits.timeoutMs / 1000.0
        if (
            isinstance(budget_ms, int | float)
            and not isinstance(budget_ms, bool)
            and budget_ms >= 0
        ):
            budget_s = min(budget_s, budget_ms / 1000.0)
        # Lone surrogates (legal in JSON escapes) cannot cross into the engine: U+FFFD instead.
        code = jsonsafe.utf8_safe(str(msg.get("code") or ""))
        modules = self._take_modules(msg)
        if modules is None:
            return {"kind": DoneKind.LOST_MODULE}, None

        realm, self._warm = self._warm, None
        if realm is None or realm.key != realm_key(limits):
            if realm is not None:
                realm.close()  # built for other limits: free it now, not after the run
            realm = None
            try:
                realm = await Realm.create(self, limits)
            except Exception as exc:
                message = exc.message if isinstance(exc, EngineError) else type(exc).__name__
                return {"kind": DoneKind.SETUP_FAILED, "message": message}, None
        try:
            run_config = realm.begin(t0, limits, msg)
            engine = realm.engine
            # No separate parse: importing the agent module parses it before anything runs, and a
            # SyntaxError it reports is confirmed by a parse then (`_evaluate`).
            for name, source in modules.items():
                engine.add_module(name, source)  # evaluated only if the agent imports it
            engine.add_module(AGENT_MODULE, code)
            run_config["agentModule"] = AGENT_MODULE
            script = f"globalThis.__codemode_start__({json.dumps(json.dumps(run_config))})"
            remaining = budget_s - (time.monotonic() - t0)
            self._running = realm
            return await self._evaluate(engine, code, script, remaining)
        finally:
            self._running = None
            realm.end()
            if self._spent is not None:  # never left for long: `serve` frees it after each run
                self._spent.close()
            self._spent = realm  # closed by `free_spent` once the answer is out

    def _take_modules(self, msg: dict[str, Any]) -> dict[str, str] | None:
        """The run's modules (specifier -> source) from its `modules` table (specifier ->
        digest) and the `sources` it carries; None when a digest is neither sent nor held.

        The host sends a module's text only when this worker does not hold it yet
        (protocol.py): the worker keeps the sources of its last run's table, which is what the
        host assumes it holds."""
        table = msg.get("modules")
        sent = msg.get("sources")
        sent = sent if isinstance(sent, dict) else {}
        modules: dict[str, str] = {}
        held: dict[str, str] = {}
        for name, digest in table.items() if isinstance(table, dict) else ():
            source = self._held.get(digest) if isinstance(digest, str) else None
            if source is None and isinstance(digest, str) and isinstance(sent.get(digest), str):
                # Lone surrogates (legal in JSON escapes) cannot cross into the engine.
                source = jsonsafe.utf8_safe(sent[digest])
            if source is None:
                self._held = {}
                return None
            held[str(digest)] = source
            name = jsonsafe.utf8_safe(str(name))
            if name not in (AGENT_MODULE, MODULE_ERRORS, MODULE_HOST):
                modules[name] = source
        self._held = held
        return modules

    def free_spent(self) -> None:
        """Free the last run's realm and give the memory back to the OS, before anything else
        happens (nothing of a run survives into the next). After `done` is sent: freeing a full
        heap takes a while (~0.35 s for 512 MB)."""
        realm, self._spent = self._spent, None
        if realm is not None:
            realm.close()
        release_memory()

    async def prepare_next(self, limits: Limits) -> None:
        """Build and lock down the realm for the next run while idle (off the request path)."""
        if self._warm is not None and self._warm.key == realm_key(limits):
            return
        if self._warm is not None:
            self._warm.close()
            self._warm = None
        try:
            self._warm = await Realm.create(self, limits)
        except Exception:  # the run will build its own realm and report the failure
            self._warm = None

    async def _evaluate(self, engine: Engine, code: str, script: str, remaining: float) -> Done:
        """Run `script` (the run's start) and say how it ended. What only this realm can tell
        the host comes with it: whether the heap is full, and why the agent module does not
        parse."""
        if remaining <= 0:
            return {"kind": DoneKind.LATE}, None
        try:
            text = await engine.run(script, remaining)
        except EngineTimeout:
            return {"kind": DoneKind.TIMEOUT}, None
        except EnginePendingLimit:
            return {"kind": DoneKind.PENDING_LIMIT}, None
        except EngineError as exc:
            return self._engine_error(engine, exc.name, exc.message), None
        if isinstance(text, str) and text.startswith(OK_REPORT_PREFIX) and text.endswith("}"):
            return {"kind": DoneKind.REPORT}, text
        try:
            report = json.loads(text)
        except (TypeError, ValueError):
            report = None
        if not isinstance(report, dict):
            return self._engine_error(engine, "Error", "no report from the prelude"), None
        outcome: dict[str, Any] = {"kind": DoneKind.REPORT}
        if protocol.needs_heap_probe(report):
            outcome["heapExhausted"] = engine.heap_exhausted()
        error = report.get("error")
        if (
            report.get("status") == "error"
            and isinstance(error, dict)
            and error.get("name") == "SyntaxError"
        ):
            # Thrown while importing the agent module, or by the script (JSON.parse): only the
            # first does not parse.
            outcome["syntax"] = self._parse(engine, code)
        return outcome, text

    @staticmethod
    def _engine_error(engine: Engine, name: str, message: str) -> dict[str, Any]:
        exhausted = "out of memory" not in message and engine.heap_exhausted()
        return {
            "kind": DoneKind.ENGINE_ERROR,
            "name": name,
            "message": message,
            "heapExhausted": exhausted,
        }

    @staticmethod
    def _parse(engine: Engine, code: str) -> dict[str, str] | None:
        """The SyntaxError parsing `code` as the agent module raises, or None."""
        try:
            engine.check_syntax(code)
        except EngineError as exc:
            return {"message": exc.message, "stack": exc.stack}
        return None


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the host process dies, even if JS holds the GIL."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # parent already gone before prctl took effect
            os._exit(0)


def main() -> None:
    _die_with_parent()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol stream
    # A pooled worker has paid the engine's start-up cost before its first run; it never runs
    # a script in a child process of its own (it is the process the host kills).
    preload(child_processes=False)

    worker = Worker(out_fd)
    asyncio.run(worker.serve())


if __name__ == "__main__":
    main()
