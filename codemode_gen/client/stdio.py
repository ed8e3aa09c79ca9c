"""A hardened stdio transport for the SDK's JSON-RPC dispatcher.

The SDK's `stdio_client` decodes stdout strictly and validates each line with pydantic's JSON
parser; a line it cannot parse (invalid UTF-8, a lone-surrogate escape, JSON nested deeper
than the parser's 200-level limit, a line that is not JSON, a response with both `result`
and `error`) is logged with a traceback and *dropped*, so the request it answered waits out
its whole timeout. Its line buffer is unbounded, too.

This module keeps everything else of the SDK - the process spawn (`stderr` to our log file,
its own process group), the spec's shutdown escalation (close stdin, SIGTERM, SIGKILL of the
tree), both private to the SDK and reached through client/mcp_private.py, the `SessionMessage`
stream contract, and the `JSONRPCDispatcher` that correlates ids,
times out and cancels - and replaces only the two pipe tasks:

- the reader cuts stdout into lines with a bounded buffer (`MAX_FRAME_BYTES`; the rest of a
  longer line is skipped, keeping only its first `FRAME_PEEK_BYTES` to find its id), decodes
  leniently (invalid UTF-8 -> U+FFFD, lone-surrogate escapes -> U+FFFD), measures the nesting
  depth with a linear scan of the brackets outside strings before `json.loads`
  (`MAX_FRAME_DEPTH`), rejects non-JSON numbers, and checks the JSON-RPC envelope itself;
- a frame that fails any of this becomes a JSON-RPC error *for its own request id* (found in
  the parsed object, or by peeking at the frame's top-level members), carrying a `BadFrame`
  as `error.data`, so only that request fails, at once, and the session lives on; a bad frame
  without a usable id (or a bad request/notification from the server) is logged and skipped;
- the writer turns a message the SDK cannot serialise (a lone surrogate, nesting beyond
  pydantic's limit) into an error for that request instead of crashing the connection.

`McpSession` (mcp_session.py) phrases the error with the server id and the method, and salvages
a too-deep `tools/list` page with `parse_pruned`.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.lowlevel
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError, JSONRPCRequest, jsonrpc_message_adapter
from pydantic import ValidationError

from codemode_gen import payload
from codemode_gen.client.mcp_private import drain_stdout, spawn_server_process, stop_server_process
from codemode_gen.jsonio import json_text_depth_exceeds, json_type, number_may_overflow

__all__ = [
    "BAD_FRAME_CODE",
    "FRAME_PEEK_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_FRAME_DEPTH",
    "MAX_SALVAGE_BYTES",
    "BadFrame",
    "FrameDecoder",
    "frame_too_deep",
    "parse_pruned",
    "stdio_transport",
]

# Bounds one stdout line (one JSON-RPC message) held in memory. Generous: a tool result of
# tens of MiB still passes; the rest of a longer line is read and thrown away, never buffered.
MAX_FRAME_BYTES = 64 * 1024 * 1024
# Bounds the nesting depth of one message, the JSON-RPC envelope included (a tools/call
# result's structuredContent starts at level 3, a tool's inputSchema at level 5). This is the
# depth the SDK's own parser accepted, so no message that worked before is refused; it keeps
# the recursive consumers downstream (json, pydantic, the generator) far from Python's
# recursion limit. The runtime bounds what reaches a script more tightly, on its own.
MAX_FRAME_DEPTH = 200
# Bounds what is kept of a line longer than MAX_FRAME_BYTES (its start and its end), enough
# to find the request id it answers.
FRAME_PEEK_BYTES = 64 * 1024
# Bounds the too-deep frames kept for salvage (a tools/list page whose other tools survive):
# pruning walks every token in Python: 0.1 s for a realistic 6 MB page, under 2 s for this
# much of the worst case (nothing but tiny tokens).
MAX_SALVAGE_BYTES = 8 * 1024 * 1024
# Bounds the writer's flush of messages already accepted when the connection shuts down (the
# value of the SDK's stdio_client): a server that stopped reading its stdin must not hold it.
WRITER_FLUSH_TIMEOUT = 0.5
# JSON-RPC code of the error a bad frame becomes (the standard "Parse error").
BAD_FRAME_CODE = -32700
# Bounds the piece of a frame quoted in the server log.
_LOG_PREVIEW_CHARS = 120
# Bounds the top-level members inspected to find a bad frame's id.
_PEEK_MEMBERS = 32

_MiB = 1024 * 1024


@dataclass(frozen=True)
class BadFrame:
    """Why a message could not be used; rides in `ErrorData.data` of the synthesised error.

    An instance of this class (not a value a server can send) is what marks the error as the
    transport's own. `text` is the frame, kept only for a too-deep response small enough to
    salvage (`parse_pruned`)."""

    kind: str  # too-large | too-deep | not-json | invalid | unsendable
    reason: str  # a noun phrase: "JSON nested deeper than 200 levels"
    text: str | None = None


# --------------------------------------------------------------------------- depth scan


def frame_too_deep(raw: bytes | bytearray, limit: int = MAX_FRAME_DEPTH) -> bool:
    """Whether the JSON text `raw` nests more than `limit` arrays/objects, brackets inside
    strings not counted: the shared linear scan (`jsonio.json_text_depth_exceeds`), whose False
    means `json.loads` nests at most `limit` deep even for text that is not JSON."""
    return json_text_depth_exceeds(raw, limit)


# --------------------------------------------------------------------------- lenient text

# Escaped backslash (kept, and keeps the scan aligned), a valid surrogate pair (kept), or a
# lone surrogate escape (replaced by U+FFFD).
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPES = re.compile(
    r"(\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def _replace_lone_surrogates(text: str) -> str:
    if not _SURROGATE_HINT.search(text):
        return text
    return _SURROGATE_ESCAPES.sub(lambda m: m.group(1) or "\\ufffd", text)


class _NonJsonNumber(ValueError):
    pass


def _reject_constant(token: str) -> Any:
    raise _NonJsonNumber(token)


def _checked_float(token: str) -> float:
    value = float(token)
    if value in (float("inf"), float("-inf")):
        raise _NonJsonNumber(token if len(token) <= 40 else token[:40] + "…")
    return value


def _loads(text: str, raw: bytes | bytearray | None = None) -> Any:
    """json.loads for server text: NaN/Infinity and numbers that overflow a float are errors.
    `raw` (the text's bytes) lets the float check be skipped when no number can overflow."""
    if raw is None or number_may_overflow(raw):
        return payload.loads(text, parse_constant=_reject_constant, parse_float=_checked_float)
    return payload.loads(text, parse_constant=_reject_constant)


# --------------------------------------------------------------------------- pruning

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def parse_pruned(text: str, limit: int = MAX_FRAME_DEPTH) -> tuple[Any, str]:
    """Parse too-deep JSON with every array/object deeper than `limit` replaced by a marker
    string; returns (value, marker). The marker is random, so a server cannot forge it.

    Raises ValueError if the text is not JSON even so."""
    marker = f"\x00codemode-gen:too-deep:{secrets.token_hex(8)}"
    pieces: list[str] = []
    last = depth = 0
    skipping = False
    for match in _TOKEN.finditer(text):
        char = text[match.start()]
        if char == '"':
            continue
        if char in "[{":
            depth += 1
            if depth == limit + 1 and not skipping:
                pieces.append(text[last : match.start()])
                pieces.append(json.dumps(marker))
                skipping = True
        else:
            if depth == limit + 1 and skipping:
                skipping = False
                last = match.end()
            depth -= 1
    if skipping:
        raise ValueError("unbalanced brackets")
    pieces.append(text[last:])
    return _loads("".join(pieces)), marker


# --------------------------------------------------------------------------- envelope peek

_WS = r"[ \t\r\n]*"
_OPEN = re.compile(_WS + r"\{")
_MEMBER_KEY = re.compile(_WS + r'"((?:[^"\\]|\\.)*)"' + _WS + ":" + _WS, re.S)
_SCALAR = re.compile(
    r'"(?:[^"\\]|\\.)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null', re.S
)
_MEMBER_END = re.compile(_WS + r"([,}])")
_TAIL_ID = re.compile(
    ","
    + _WS
    + r'"id"'
    + _WS
    + ":"
    + _WS
    + r'(-?[0-9]+|"(?:[^"\\]|\\.)*")'
    + _WS
    + r"\}"
    + _WS
    + r"\Z",
    re.S,
)


def _as_request_id(value: Any) -> int | str | None:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _peek_envelope(head: str, tail: str) -> tuple[bool, int | str | None]:
    """(is a response, its id) of a frame that cannot be parsed, from its top-level members:
    those before the first nested value (`"jsonrpc"` and `"id"` usually lead), else a final
    `"id"` member in `tail`. A frame with `"method"` or `"params"` is the server's own request
    or notification: its id is in the server's numbering, never ours."""
    match = _OPEN.match(head)
    if match is None:
        return False, None
    pos = match.end()
    rid: int | str | None = None
    first_nested: str | None = None
    for _ in range(_PEEK_MEMBERS):
        key = _MEMBER_KEY.match(head, pos)
        if key is None:
            break
        name, pos = key.group(1), key.end()
        if name in ("method", "params"):
            return False, None
        if head[pos : pos + 1] in ("{", "["):
            first_nested = name
            break
        value = _SCALAR.match(head, pos)
        if value is None:
            break
        if name == "id":
            with contextlib.suppress(ValueError):
                rid = _as_request_id(json.loads(value.group()))
            return True, rid
        end = _MEMBER_END.match(head, value.end())
        if end is None or end.group(1) == "}":
            break
        pos = end.end()
    if first_nested in ("result", "error"):
        found = _TAIL_ID.search(tail)
        if found is not None:
            with contextlib.suppress(ValueError):
                rid = _as_request_id(json.loads(found.group(1)))
        return True, rid
    return False, None


# --------------------------------------------------------------------------- decoding


@dataclass
class _Oversize:
    """What is kept of a line longer than MAX_FRAME_BYTES: its start, its end, its size."""

    head: bytearray
    tail: bytearray
    size: int

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.size += len(data)
        room = FRAME_PEEK_BYTES - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail += data[-FRAME_PEEK_BYTES:]
        del self.tail[:-FRAME_PEEK_BYTES]


class _Framer:
    """Cuts a byte stream into lines, holding at most `limit` bytes of one line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.over: _Oversize | None = None

    def feed(self, chunk: bytes) -> list[bytearray | _Oversize]:
        lines: list[bytearray | _Oversize] = []
        view = memoryview(chunk)
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            self._add(view[start : len(chunk) if newline < 0 else newline])
            if newline < 0:
                return lines
            lines.append(self.take())
            start = newline + 1

    def take(self) -> bytearray | _Oversize:
        line: bytearray | _Oversize = self.over if self.over is not None else self.buf
        self.buf, self.over = bytearray(), None
        return line

    def _add(self, data: memoryview) -> None:
        if self.over is not None:
            self.over.feed(data)
        elif len(self.buf) + len(data) > self.limit:
            self.over = _Oversize(bytearray(), bytearray(), 0)
            self.over.feed(self.buf)
            self.over.feed(data)
            self.buf = bytearray()
        else:
            self.buf += data


class FrameDecoder:
    """Turns one stdout line into a `SessionMessage` for the dispatcher (or None to skip it).

    Bad frames answering one of our requests become a JSON-RPC error for that id with a
    `BadFrame` as data; other bad frames are reported to `log` and skipped."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self._noted: set[str] = set()

    def decode(self, line: bytearray | _Oversize) -> Any:
        if isinstance(line, _Oversize):
            head = line.head.decode("utf-8", errors="replace")
            tail = line.tail.decode("utf-8", errors="replace")
            reason = f"a message larger than the {MAX_FRAME_BYTES // _MiB} MiB frame limit ({line.size:,} bytes)"
            return self._bad(BadFrame("too-large", reason), *_peek_envelope(head, tail), head)
        if not line.strip():
            return None
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            text = line.decode("utf-8", errors="replace")
            self._note("utf8", "replaced invalid UTF-8 from the server with U+FFFD")
        fixed = _replace_lone_surrogates(text)
        if fixed != text:
            self._note("surrogate", "replaced lone-surrogate escapes from the server with U+FFFD")
            text = fixed
        if frame_too_deep(line):
            reason = f"JSON nested deeper than {MAX_FRAME_DEPTH} levels"
            keep = text if len(line) <= MAX_SALVAGE_BYTES else None
            return self._bad(BadFrame("too-deep", reason, keep), *self._peek(text), text)
        try:
            value = _loads(text, line)
        except _NonJsonNumber as exc:
            return self._bad(
                BadFrame("not-json", f"a non-JSON number ({exc})"), *self._peek(text), text
            )
        except RecursionError:  # pragma: no cover - the depth scan comes first
            reason = f"JSON nested deeper than {MAX_FRAME_DEPTH} levels"
            return self._bad(BadFrame("too-deep", reason), *self._peek(text), text)
        except ValueError as exc:
            detail = (
                f"{exc.msg}, column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else str(exc)[:120]
            )
            return self._bad(
                BadFrame("not-json", f"a line that is not JSON ({detail})"), *self._peek(text), text
            )
        return self._message(value, text)

    def _peek(self, text: str) -> tuple[bool, int | str | None]:
        return _peek_envelope(text[:FRAME_PEEK_BYTES], text[-FRAME_PEEK_BYTES:])

    def _message(self, value: Any, text: str) -> Any:
        if not isinstance(value, dict):
            return self._bad(
                BadFrame(
                    "invalid", f"a JSON {json_type(value, integer=False)}, not a JSON-RPC message"
                ),
                False,
                None,
                text,
            )
        is_response = "method" not in value
        rid = _as_request_id(value.get("id")) if is_response else None
        reason = None
        if value.get("jsonrpc") != "2.0":
            reason = 'a message without "jsonrpc": "2.0"'
        elif is_response:
            if "result" in value and "error" in value:
                reason = "a response carrying both result and error"
            elif "result" in value:
                if not isinstance(value["result"], dict):
                    reason = f"a result that is not a JSON object ({json_type(value['result'], integer=False)})"
            elif "error" not in value:
                reason = "a response with neither result nor error"
            elif not _error_shape_ok(value["error"]):
                reason = "a malformed error object (it needs an integer code and a string message)"
            if reason is None and rid is None:
                if "result" in value:
                    reason = "a result without a usable id"
                else:  # valid JSON-RPC (the server could not read a request), but nobody waits for it
                    self.log(
                        f"[codemode-gen] the server sent an error without a request id: {text[:_LOG_PREVIEW_CHARS]!r}"
                    )
                    return None
        if reason is None:
            try:
                return SessionMessage(jsonrpc_message_adapter.validate_python(value, by_name=False))
            except ValidationError as exc:
                first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
                where = ".".join(str(p) for p in first.get("loc", ())) or "message"
                reason = f"an invalid JSON-RPC message ({where}: {first.get('msg')})"
        return self._bad(BadFrame("invalid", reason), is_response, rid, text)

    def _bad(self, bad: BadFrame, is_response: bool, rid: int | str | None, text: str) -> Any:
        preview = text[:_LOG_PREVIEW_CHARS] + ("…" if len(text) > _LOG_PREVIEW_CHARS else "")
        if is_response and rid is not None:
            self.log(
                f"[codemode-gen] the answer to request {rid!r} was {bad.reason} (passed to that request): {preview!r}"
            )
            error = ErrorData(code=BAD_FRAME_CODE, message=bad.reason, data=bad)
            return SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=error))
        self.log(f"[codemode-gen] skipped {bad.reason} (no request id to fail): {preview!r}")
        return None

    def _note(self, key: str, text: str) -> None:
        if key not in self._noted:  # once per connection: a chatty server must not flood the log
            self._noted.add(key)
            self.log(f"[codemode-gen] {text} (noted once per connection)")


def _error_shape_ok(error: Any) -> bool:
    if not isinstance(error, dict):
        return False
    code = error.get("code")
    return (
        isinstance(code, int)
        and not isinstance(code, bool)
        and isinstance(error.get("message"), str)
    )


# --------------------------------------------------------------------------- transport


@contextlib.asynccontextmanager
async def stdio_transport(
    params: Any, *, errlog: TextIO, log: Callable[[str], None], process: Any = None
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn the server as the SDK's `stdio_client` does and yield (read, write) streams for
    `JSONRPCDispatcher`; `log` receives one line per bad frame (the server log).

    The process lifecycle is the SDK's own code (spawn in a new process group, stderr to
    `errlog`, shutdown: close stdin, wait, SIGTERM/SIGKILL the tree, all shielded and bounded);
    only the pipe tasks differ. `params` is a `StdioServerParameters`; `process`, that server
    already started the same way (codemode_gen/client/transports.py starts it before importing
    the SDK on a cold start)."""
    if process is None:
        process = await spawn_server_process(params, errlog=errlog)
    # No awaits until the task group is entered (a cancellation here would leak the process).
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    decoder = FrameDecoder(log)
    shutting_down = False
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout, "the server process is spawned with pipes"
        framer = _Framer(MAX_FRAME_BYTES)
        try:
            async with read_stream_writer:
                try:
                    async for chunk in process.stdout:
                        for line in framer.feed(chunk):
                            # A large frame (a 12 MB result) is decoded off the event loop, in
                            # bounded pieces (codemode_gen.payload); frames stay in order.
                            if isinstance(line, bytearray) and len(line) > payload.CHUNK_CHARS:
                                item = await payload.offload(decoder.decode, line)
                            else:
                                item = decoder.decode(line)
                            if item is None:
                                continue
                            try:
                                await read_stream_writer.send(item)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                    last = decoder.decode(framer.take())  # a final line without a newline
                    if last is not None:
                        with contextlib.suppress(
                            anyio.ClosedResourceError, anyio.BrokenResourceError
                        ):
                            await read_stream_writer.send(last)
                finally:
                    await drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError) as exc:
            if not shutting_down:
                log(
                    f"[codemode-gen] reading the server's stdout failed: {type(exc).__name__}: {exc}"
                )

    async def stdin_writer() -> None:
        assert process.stdin, "the server process is spawned with pipes"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    message = session_message.message
                    try:
                        text = message.model_dump_json(by_alias=True, exclude_unset=True)
                        data = (text + "\n").encode("utf-8")
                    except Exception as exc:  # pydantic serialisation errors vary in type
                        detail = str(exc).removeprefix("Error serializing to JSON: ")[:200]
                        bad = BadFrame(
                            "unsendable", f"a message that cannot be serialised as JSON ({detail})"
                        )
                        if isinstance(message, JSONRPCRequest):
                            error = ErrorData(code=BAD_FRAME_CODE, message=bad.reason, data=bad)
                            reply = SessionMessage(
                                JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                            )
                            with contextlib.suppress(
                                anyio.ClosedResourceError, anyio.BrokenResourceError
                            ):
                                await read_stream_writer.send(reply)
                        else:
                            log(f"[codemode-gen] did not send {bad.reason}")
                        continue
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: end the read side so no request hangs.
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        # As the SDK's stdio_client: unblock the reader into its drain, give the writer a
        # bounded moment to flush, stop the server, release the streams.
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await stop_server_process(process)
        for stream in (read_stream, write_stream, read_stream_writer, write_stream_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):  # must finish even when the caller is cancelled
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
