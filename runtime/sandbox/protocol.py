"""The sandbox ⇄ worker pipe protocol: message kinds, framing, limits. Both sides use this module.

The host (runtime/sandbox/pool.py) starts each worker (runtime/sandbox/worker.py) with pipes on its stdin and
stdout; they exchange one JSON object per line, `op` naming the kind. Lines are ASCII
(`ensure_ascii`), except a `call`, which embeds the JS-made request as UTF-8 (`encode_call`):

host → worker (stdin)
    {"op": "run", "code", "modules", "sources", "limits", "budgetMs"?}
                                                              run `code` as the agent module
    {"op": "reply", "id", "reply": <JSON value>}              the answer to a `call`
    {"op": "check", "code"}                                   parse only (between runs)
    {"op": "pause"} / {"op": "resume"}                        hold / go on handing events to JS
    {"op": "exit"}                                            stop (so does end of input)
worker → host (stdout)
    {"op": "ready"}                                           engine imported, first realm built
    {"op": "log", "level", "message", "timeMs"}               one console entry, streamed
    {"op": "logs_truncated"}                                  maxLogBytes reached
    {"op": "call", "id", "request": <JSON value>}             a tool call for the host's bridge
    {"op": "done", "kind", ...}                               the run ended: how (`DoneKind`),
                                                              raw; the host composes the answer
    {"op": "checked", "syntax": null | {"message", "stack"}}  the parse error `run` would meet
    {"op": "paused", "issued", "journal"}                     held, once JS waits: its calls so far
                                                              and (journaled runs) the journal
    {"op": "diverged", "message"}                             a replayed run did not redo its journal

A run message may also carry `seed` (4 uint32: Math.random), `clockBase` (Unix ms: Date's base),
`journal` (true: write down the events JS takes and the clock values it reads) and `replay` (a
`paused` journal to hand over first): runtime/host/resume.py resumes a run on any instance that way.

`modules` maps each module specifier of the run to the digest of its text, `sources` maps
digests to texts for only those the worker does not hold: a worker holds the sources of its last
run's table, so an unchanged catalog's modules (hundreds of KB with discovery) cross the pipe
once per worker, not once per run. Both sides track that table in lockstep.

`budgetMs` is the time left until the caller's deadline when the host sent the run (the host may
have spent part of `limits.timeoutMs` connecting servers or starting the worker): the script is
interrupted after min(budgetMs, timeoutMs), and a timeout is still reported as the caller's
`timeoutMs`. `check` lets the host skip connecting servers for a script that can never start.

`done` says what happened, not what to tell the model: the host turns it into the run's result
and diagnostics (runtime/sandbox/outcome.py), holding the code and module texts that needs. Its
`kind` is one of `DoneKind`; `setup_failed` adds `message`; `engine_error` adds `name`,
`message` and `heapExhausted`; `report` adds the prelude's `report` (`{"status": "ok" | "error" |
"setup_error", "result": <JSON text>, "resultError", "error", "unawaited"}`, prelude.js) and,
when the report does not say why the run failed (`needs_heap_probe`), `heapExhausted` (a small
allocation failed: the heap is full) and, for an `error` named SyntaxError, `syntax` (what
re-parsing the agent module raised, or null: the script threw it while running). Only the
worker can tell those two: they need the run's realm.

A call's request and its reply are JSON values embedded as they are (JS produced or consumes
them as JSON text), so a tool call is encoded and decoded once per side, not twice:
`encode_call` and `encode_reply` frame the text without re-escaping it, and `decode_reply` slices
the reply's text out of a line framed by `encode_reply` without decoding it in Python. A reply
given as a JSON string is still accepted as that text. So is the prelude's report in `done`
(`encode_done`): a run's result is parsed once, by the host, not by the worker first.

This module must stay cheap to import: the worker imports it (no `mcp`, no generator).
"""

from __future__ import annotations

import hashlib
import json
import pkgutil
from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any, NotRequired, TypedDict

from codemode_gen import payload
from codemode_gen.runtime.jsonsafe import utf8_safe

# host → worker
RUN = "run"
REPLY = "reply"
CHECK = "check"
EXIT = "exit"
PAUSE = "pause"
RESUME = "resume"
# worker → host
READY = "ready"
LOG = "log"
LOGS_TRUNCATED = "logs_truncated"
CALL = "call"
DONE = "done"
CHECKED = "checked"
PAUSED = "paused"
DIVERGED = "diverged"


class DoneKind:
    """How a run ended, as `done`'s `kind` says (the module docstring lists each one's fields)."""

    LATE = "late"  # the run's time was gone before the script could start
    TIMEOUT = "timeout"  # interrupted at the deadline
    PENDING_LIMIT = "pending_limit"  # the engine refused another pending host call
    LOST_MODULE = "lost_module"  # a module digest neither sent nor held (a host/worker mismatch)
    INTERNAL = "internal"  # a bug in the worker, reported on its stderr
    SETUP_FAILED = "setup_failed"  # the realm could not be built
    ENGINE_ERROR = "engine_error"  # the engine failed outside the prelude's report
    REPORT = "report"  # the prelude reported the run


#: The two modules every realm holds besides a run's own (the worker adds them; the host maps
#: stack frames into them), and their files in runtime/js/. The agent's module name is
#: script_errors.AGENT_MODULE.
MODULE_ERRORS = "@codemode/errors"
MODULE_HOST = "@codemode/host"
BUNDLED_MODULES = {MODULE_ERRORS: "errors.js", MODULE_HOST: "host.js"}


def js_source(file: str) -> str:
    """The text of runtime/js/<file>, read by both sides: the worker loads it into realms, the
    host maps stack frames into it."""
    # pkgutil, not importlib.resources: that one imports tempfile, shutil, bz2, lzma and
    # random (~0.9 MB of RSS per worker) for what is here one file read.
    data = pkgutil.get_data("codemode_gen.runtime", f"js/{file}")
    if data is None:
        raise FileNotFoundError(f"codemode_gen.runtime/js/{file}")
    return data.decode("utf-8")


#: Longest line the host accepts from a worker (a run's result can be as big as the JS heap).
MAX_MESSAGE_BYTES = 1024 * 1024 * 1024 + 1024 * 1024
#: Lines longer than this are decoded off the host's event loop (`decode_async`): a call's
#: 8 MB input or a run's 16 MB result parsed on the loop stalled every other run.
LARGE_MESSAGE_BYTES = payload.CHUNK_CHARS
#: Bytes the worker takes from stdin per read; a run message bigger than this (modules) arrives
#: in several reads and is reassembled, so this only trades syscalls against one buffer's size.
READ_CHUNK_BYTES = 256 * 1024

#: How `encode_reply` frames a reply, so that `decode_reply` can slice its JSON text out.
REPLY_PREFIX = b'{"op":"reply","id":'
REPLY_SEPARATOR = b',"reply":'


class HostReply(TypedDict):
    """What the host answers one tool call of the script with (DESIGN.md, sandbox ⇄ host): made
    by the host's bridge (runtime/host/call_replies.py, upstream.py), sent to the worker as the
    `reply` of its `call`; the prelude settles the call's promise with `value` or throws the
    `@codemode/errors` class `error` names."""

    ok: bool
    #: The tool's result as the script sees it (§5.3.2), when `ok`.
    value: NotRequired[Any]
    #: When not `ok`: `errorClass`, `message`, `hint` and the class's fields (`serverId`,
    #: `toolName`, `code`, a SchemaValidationError's `path`…; open-ended, as the classes are).
    error: NotRequired[dict[str, Any]]


#: What the host answers a call with: the bridge's entry point for one run (`request` is the
#: worker's decoded call request; the result is the reply the script's promise settles with).
HostCall = Callable[[dict[str, Any]], Awaitable[HostReply]]


#: Total size of the module texts whose digests are remembered (`module_digest`): bounds the
#: host memory kept alive for them (a 5,000-tool catalog's discovery module is ~6 MB).
MAX_DIGESTED_BYTES = 64 * 1024 * 1024
_digests: dict[str, str] = {}
_digested_bytes = 0


def module_table(
    modules: Mapping[str, str], held: Container[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """A run message's `modules` (specifier -> digest) and `sources` (digest -> text, for the
    digests not in `held`, what the worker holds)."""
    table = {name: module_digest(source) for name, source in modules.items()}
    return table, {digest: modules[name] for name, digest in table.items() if digest not in held}


def module_digest(source: str) -> str:
    """A module text's digest, computed once per text: runs of one catalog pass the very same
    str objects, whose hash Python caches, so a lookup costs no pass over the text."""
    global _digested_bytes
    digest = _digests.get(source)
    if digest is None:
        if _digested_bytes + len(source) > MAX_DIGESTED_BYTES:
            _digests.clear()
            _digested_bytes = 0
        digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        _digests[source] = digest
        _digested_bytes += len(source)
    return digest


class MalformedMessage(ValueError):
    """A protocol line that is JSON but not one object, or nested too deep to parse."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("malformed message" + detail)
        self.detail = detail  # "" or a parenthesised reason: " (nested too deep)"


#: `json.dumps` with separators builds a new encoder per call; every message uses this one.
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def encode(message: dict[str, Any]) -> bytes:
    """One message as its line: compact ASCII JSON and a newline."""
    return (_ENCODER.encode(message) + "\n").encode("ascii")


def encode_reply(call_id: Any, body: str) -> bytes:
    """`{"op":"reply","id":N,"reply":<body>}` with `body` the reply's ASCII JSON text, framed
    the way `decode_reply` slices it: encoded once, never decoded by the worker."""
    if isinstance(call_id, int) and not isinstance(call_id, bool) and call_id >= 0:
        return b'{"op":"reply","id":%d,"reply":%s}\n' % (call_id, body.encode("ascii"))
    return encode({"op": REPLY, "id": call_id, "reply": body})


def encode_call(call_id: int, request_text: Any) -> bytes:
    """A call message with the JS-made request JSON embedded verbatim (no re-escaping)."""
    if isinstance(request_text, str):
        try:
            return b'{"op":"call","id":%d,"request":%s}\n' % (call_id, request_text.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate slipped through: escape it as text
            pass
    return encode({"op": CALL, "id": call_id, "request": str(request_text)})


def encode_done(outcome: Mapping[str, Any], report_text: str | None = None) -> bytes:
    """A `done` line: `outcome`'s fields, with the prelude's report JSON text (if any) embedded
    verbatim as `report`, the way `encode_call` embeds a request."""
    head = _ENCODER.encode({"op": DONE, **outcome})
    if report_text is None:
        return (head + "\n").encode("ascii")
    # JSON.stringify escapes lone surrogates; one that slipped through becomes U+FFFD, as
    # everywhere a JS string meets UTF-8.
    report = utf8_safe(report_text).encode("utf-8")
    return b'%s,"report":%s}\n' % (head[:-1].encode("ascii"), report)


def needs_heap_probe(report: Mapping[str, Any]) -> bool:
    """Whether a `done` with this prelude report carries `heapExhausted`: for a setup failure, or
    a failure that came back without a message (QuickJS may throw null when it cannot even
    allocate an Error). The worker probes the heap only then; the host reads it only then."""
    status = report.get("status")
    if status == "setup_error":
        return True
    error = report.get("error")
    if status != "error" or not isinstance(error, dict):
        return False
    return not error.get("isError") and str(error.get("text") or "") in ("null", "undefined", "")


def decode_reply(line: bytes) -> tuple[int, str] | None:
    """(call id, the reply's JSON text) of a line framed by `encode_reply`; None for any other
    line (which `decode` then reads as usual)."""
    if line.startswith(REPLY_PREFIX) and line.endswith(b"}"):
        head, sep, body = line[len(REPLY_PREFIX) : -1].partition(REPLY_SEPARATOR)
        if sep and head.isdigit() and body:
            try:
                return int(head), body.decode("utf-8")
            except UnicodeDecodeError:
                return None
    return None


def decode(line: bytes) -> dict[str, Any]:
    """One message from its line (without the newline). Raises ValueError for a line that is
    not JSON, MalformedMessage for JSON that is not an object or is nested too deep to parse."""
    try:
        msg = payload.loads(line)  # one C call for a short line, bounded pieces for a long one
    except RecursionError:
        raise MalformedMessage(" (nested too deep)") from None
    if not isinstance(msg, dict):
        raise MalformedMessage()
    return msg


async def decode_async(line: bytes) -> dict[str, Any]:
    """`decode`, in the payload threads for a line over LARGE_MESSAGE_BYTES (parsing it is
    O(line) and must not hold up the event loop: other runs, the watchdog)."""
    if len(line) > LARGE_MESSAGE_BYTES:
        return await payload.offload(decode, line)
    return decode(line)
