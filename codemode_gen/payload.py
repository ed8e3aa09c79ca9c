"""Large JSON payloads without stalling an event loop.

A host serving many runs on one asyncio loop must not spend long stretches on one payload: a
12 MB tool result parsed, walked and encoded on the loop stopped `/healthz`, every other run
and the sandbox watchdog for seconds. Moving the work to a thread is not enough on its own:
`json.loads` and `json.dumps` are single C calls that hold the GIL from start to end (a 12 MB
`json.loads` in a thread stalls the loop exactly as long as on it). So this module:

- runs payload work in a small, bounded pool of threads (`offload`), and
- parses and encodes large JSON in bounded pieces (`loads`, `dumps`): each C call handles at
  most CHUNK_CHARS of text or INLINE_NODES values, and the Python code between the calls gives
  the GIL back to the loop (every switch interval). The results are exactly those of
  `json.loads` / `json.dumps` (same values, same text, same errors); small payloads take the
  one-call path.

Pure-Python walks (validation, depth checks, learning, redaction) release the GIL by
themselves between bytecodes: they only need to be off the loop (`offload`) and bounded.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from json import JSONDecodeError
from typing import Any, TypeVar

__all__ = [
    "CHUNK_CHARS",
    "INLINE_NODES",
    "PAYLOAD_THREADS",
    "Small",
    "at_most",
    "depth_if_small",
    "dumps",
    "is_large",
    "loads",
    "node_count",
    "offload",
]

T = TypeVar("T")

# json's own whitespace pattern and C string scanner (not in its typed API).
_WHITESPACE: Any = json.decoder.WHITESPACE  # type: ignore[attr-defined]
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

#: Text parsed by one C call at most (a bounded GIL hold: about a millisecond); larger texts
#: are parsed value by value, each value of at most this size in one call.
CHUNK_CHARS = 128 * 1024
#: Values encoded (or walked) in one go at most: a container holding more is encoded child by
#: child. Also what counts as a large payload (`is_large`): one worth a thread.
INLINE_NODES = 20_000
#: A string counts as one value per this many characters (encoding it is one C call whose
#: time grows with its length).
STRING_CHARS_PER_NODE = 256
#: Threads doing payload work at once (across runs): bounds the CPU that concurrent large
#: payloads take from the loop's own thread on a small machine.
PAYLOAD_THREADS = 2

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(PAYLOAD_THREADS, thread_name_prefix="codemode-payload")
        return _pool


async def offload(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in the payload threads. Cancelling the awaiting task leaves a call
    that already started to finish on its own (its result is dropped); `fn` must not touch
    loop-bound state."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), partial(fn, *args, **kwargs))


# --------------------------------------------------------------------------- sizes


#: Values of one level `_survey` looks at between two checks of its count.
_SURVEY_SLICE = 512


def _survey(value: Any, limit: int) -> tuple[int, int] | None:
    """(JSON values in `value`, how deep it nests containers), or None as soon as there are more
    than `limit` values (so the walk itself is bounded: about `limit` steps). Values are counted
    as JSON has them: every value and every key, a long string once per STRING_CHARS_PER_NODE
    characters (encoding it is one C call whose time grows with its length); depth as
    jsonsafe.json_depth_exceeds counts it (`[]` is 1). Level by level: any depth is safe."""
    count = 0
    depth = 0
    level = [value]
    while level:
        count += len(level)
        if count > limit:
            return None
        below: list[Any] = []
        nested = False
        # In slices: a level of 16,000 records stops after the slice that passes `limit` (what
        # `below` holds is counted with the next level), not after all 80,000 of their values.
        for start in range(0, len(level), _SURVEY_SLICE):
            for item in level[start : start + _SURVEY_SLICE]:
                if isinstance(item, dict):
                    count += len(item)  # the keys
                    below.extend(item.values())
                    nested = True
                elif isinstance(item, list):
                    below.extend(item)
                    nested = True
                elif isinstance(item, str) and len(item) > STRING_CHARS_PER_NODE:
                    count += len(item) // STRING_CHARS_PER_NODE
            if count + len(below) > limit:
                return None
        depth += nested
        level = below
    return count, depth


def node_count(value: Any, limit: int) -> int | None:
    """The JSON values in `value` (long strings weigh more: STRING_CHARS_PER_NODE), or None as
    soon as there are more than `limit` (so the walk itself is bounded)."""
    survey = _survey(value, limit)
    return None if survey is None else survey[0]


def depth_if_small(value: Any, limit: int = INLINE_NODES) -> int | None:
    """How deep `value` nests containers when it holds at most `limit` values (`node_count`);
    None past that (a large value: see `is_large`). One walk answers both questions a tool
    result raises on the event loop: whether it is worth a thread, and whether it nests too
    deep for the sandbox."""
    survey = _survey(value, limit)
    return None if survey is None else survey[1]


class Small(dict[str, Any]):
    """A JSON object whose maker has measured it (`depth_if_small`) and found at most about
    INLINE_NODES values: `is_large` says False without walking it again. Never grown after."""

    __slots__ = ()


def at_most(value: Any, limit: int) -> bool:
    """Whether `value` holds at most `limit` JSON values (stops counting past it)."""
    return node_count(value, limit) is not None


def is_large(value: Any) -> bool:
    """A value worth moving off the event loop (more than INLINE_NODES values)."""
    if type(value) is Small:
        return False
    return not at_most(value, INLINE_NODES)


# --------------------------------------------------------------------------- decoding


@lru_cache(maxsize=16)
def _decoder(
    parse_constant: Callable[[str], Any] | None, parse_float: Callable[[str], Any] | None
) -> json.JSONDecoder:
    return json.JSONDecoder(parse_constant=parse_constant, parse_float=parse_float)


def loads(
    text: str | bytes | bytearray,
    *,
    parse_constant: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
) -> Any:
    """`json.loads(text)` (same options, values and errors) in bounded C calls: for a text longer
    than CHUNK_CHARS, the containers that do not fit in CHUNK_CHARS are walked here and their
    elements parsed one C call each."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    decoder = _decoder(parse_constant, parse_float)
    if len(text) <= CHUNK_CHARS:
        return decoder.decode(text)
    return _ChunkedParser(text, decoder).parse()


# Characters at a window's end within which a parsed value may have been cut short.
_EDGE = 3


def _ws(text: str, idx: int) -> int:
    return int(_WHITESPACE.match(text, idx).end())  # matches the empty string at least


class _ChunkedParser:
    """One large text: values that fit in a window of CHUNK_CHARS are parsed by the C scanner
    within that window (bounded); larger containers are walked here with an explicit stack,
    their elements parsed a window's run at a time (`_run_of`), not one C call each."""

    def __init__(self, text: str, decoder: json.JSONDecoder) -> None:
        self.text = text
        self.scan: Callable[[str, int], tuple[Any, int]] = decoder.scan_once  # type: ignore[attr-defined]
        self.strict = decoder.strict
        self.window = ""
        self.base = 0
        self.memo: dict[str, str] = {}
        # `_run_of`: per container (by id: each lives as long as the parse), no run is tried
        # before this index; `wasted`: characters of the runs that did not parse to their end.
        self.no_runs_before: dict[int, int] = {}
        self.wasted = 0

    def parse(self) -> Any:
        text = self.text
        idx = _ws(text, 0)
        value, idx = self._value(idx)
        idx = _ws(text, idx)
        if idx != len(text):
            raise JSONDecodeError("Extra data", text, idx)
        return value

    def _small(self, idx: int) -> tuple[Any, int] | None:
        """The value at `idx` parsed in one C call over a window of at most CHUNK_CHARS, or None
        when it does not end within a window that starts at it."""
        fresh = self.base == idx and bool(self.window)  # a window starts here already
        if not self.base <= idx < self.base + len(self.window):
            self._slide(idx)
            fresh = True
        while True:
            local = idx - self.base
            whole = self.base + len(self.window) >= len(self.text)  # the window reaches the end
            try:
                value, end = self.scan(self.window, local)
            except StopIteration:
                if whole:
                    raise JSONDecodeError("Expecting value", self.text, idx) from None
            except JSONDecodeError as exc:
                if whole:
                    raise JSONDecodeError(exc.msg, self.text, exc.pos + self.base) from None
            else:
                # A value ending near the window's edge may go on: a number cut in two ("1." or
                # "1e+" of "1.5e+10" scan as 1).
                if whole or end < len(self.window) - _EDGE:
                    return value, end + self.base
            if fresh:
                return None
            self._slide(idx)
            fresh = True

    def _slide(self, idx: int) -> None:
        self.window = self.text[idx : idx + CHUNK_CHARS]
        self.base = idx

    def _run_of(
        self, top: list[Any] | dict[str, Any], start: int, sep: str
    ) -> tuple[list[Any] | dict[str, Any], int] | None:
        """The elements (or members) of `top` from `start` up to the last `sep` within a window,
        parsed in one C call, and where the last of them ends; None when there is no such run.

        `sep` is how two elements met in the text so far (the last character of one, the comma
        and blanks, the first character of the next). The run is the window cut after the last
        character before its last `sep`, wrapped in brackets: when that parses to the end, the
        scanner stood after a whole element of this container at the cut (the same characters,
        scanned from the same state), so these are its elements. When it does not (the cut fell
        inside an element), the caller goes on element by element: this container tries no run
        again within that window, and no container tries one while the parses thrown away
        exceed the text before `start` (the C work stays within twice the text's)."""
        if start < self.no_runs_before.get(id(top), 0) or self.wasted > start:
            return None
        self._slide(start)
        cut = self.window.rfind(sep)
        if cut <= 0:
            return None
        list_run = isinstance(top, list)
        run = ("[" if list_run else "{") + self.window[: cut + 1] + ("]" if list_run else "}")
        try:
            value, end = self.scan(run, 0)
        except (StopIteration, ValueError, RecursionError):  # one level deeper than alone
            end = -1
        if end != len(run):
            self.no_runs_before[id(top)] = start + CHUNK_CHARS
            self.wasted += len(run)
            return None
        return value, start + cut + 1

    def _scalar(self, idx: int) -> tuple[Any, int]:
        """A string or number longer than a window: one C call, bounded by its own length."""
        if self.text.startswith('"', idx):
            return scanstring(self.text, idx + 1, self.strict)
        try:
            return self.scan(self.text, idx)
        except StopIteration:
            raise JSONDecodeError("Expecting value", self.text, idx) from None

    def _value(self, idx: int) -> tuple[Any, int]:
        got = self._small(idx)
        if got is not None:
            return got
        if self.text[idx : idx + 1] not in ("[", "{"):
            return self._scalar(idx)
        return self._container(idx)

    def _container(self, idx: int) -> tuple[Any, int]:
        text = self.text
        stack: list[tuple[list[Any] | dict[str, Any], str | None]] = []
        top: list[Any] | dict[str, Any] = [] if text[idx] == "[" else {}
        key: str | None = None
        idx += 1
        state = "start"
        while True:
            closer = "]" if isinstance(top, list) else "}"
            if state in ("start", "after"):
                end = idx
                idx = _ws(text, idx)
                char = text[idx : idx + 1]
                if char == closer:  # the container ends
                    idx += 1
                    done: Any = top
                    if not stack:
                        return done, idx
                    top, key = stack.pop()
                    if isinstance(top, list):
                        top.append(done)
                    else:
                        top[key] = done  # type: ignore[index]
                    state = "after"
                    continue
                if state == "after":
                    if char != ",":
                        raise JSONDecodeError("Expecting ',' delimiter", text, idx)
                    idx = _ws(text, idx + 1)
                    run = self._run_of(top, idx, text[end - 1 : idx + 1])
                    if run is not None:
                        elements, idx = run
                        if isinstance(top, list):
                            top.extend(elements)
                        else:
                            top.update(elements)
                        continue  # state stays "after": at the comma after the run
            # an element (a member of an object: its key first)
            if isinstance(top, dict):
                if not text.startswith('"', idx):
                    raise JSONDecodeError(
                        "Expecting property name enclosed in double quotes", text, idx
                    )
                key, idx = scanstring(text, idx + 1, self.strict)
                key = self.memo.setdefault(key, key)
                idx = _ws(text, idx)
                if not text.startswith(":", idx):
                    raise JSONDecodeError("Expecting ':' delimiter", text, idx)
                idx = _ws(text, idx + 1)
            got = self._small(idx)
            if got is None and text[idx : idx + 1] in ("[", "{"):
                stack.append((top, key))
                top = [] if text[idx] == "[" else {}
                idx += 1
                state = "start"
                continue
            value, idx = got if got is not None else self._scalar(idx)
            if isinstance(top, list):
                top.append(value)
            else:
                top[key] = value  # type: ignore[index]
            state = "after"


# --------------------------------------------------------------------------- encoding


@lru_cache(maxsize=8)
def _encoder(ensure_ascii: bool, sort_keys: bool) -> json.JSONEncoder:
    return json.JSONEncoder(ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=(",", ":"))


def dumps(value: Any, *, ensure_ascii: bool = True, sort_keys: bool = False) -> str:
    """`json.dumps(value, ensure_ascii=..., sort_keys=..., separators=(",", ":"))`, the same text,
    with no C call encoding more than INLINE_NODES values: larger containers are encoded child
    by child, small children in batches."""
    encoder = _encoder(ensure_ascii, sort_keys)
    if at_most(value, INLINE_NODES):
        return encoder.encode(value)
    sizes = _sizes(value)  # once, bottom-up: re-counting each level would be quadratic in depth
    parts: list[str] = []
    stack: list[Iterator[Any]] = [_pieces(value, encoder, sizes)]
    while stack:
        try:
            piece = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(piece, _Big):
            stack.append(_pieces(piece.value, encoder, sizes))
        else:
            parts.append(piece)
    return "".join(parts)


class _Big:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _weight(value: Any, sizes: dict[int, int]) -> int:
    if isinstance(value, dict | list):
        return sizes[id(value)]
    if isinstance(value, str) and len(value) > STRING_CHARS_PER_NODE:
        return 1 + len(value) // STRING_CHARS_PER_NODE
    return 1


def _sizes(value: Any) -> dict[int, int]:
    """`node_count` of every container in `value`, by id, in one walk (iterative: any depth).

    Two flat loops, no call per value: the containers in pre-order, then each summed after its
    children (reversed pre-order). This walk is the Python-speed part of `dumps` (~35 ms per MB
    of small objects), so it is kept tight."""
    if not isinstance(value, dict | list):
        return {}
    order: list[Any] = []
    stack: list[Any] = [value]
    pop, push, visit = stack.pop, stack.append, order.append
    containers = (dict, list)
    while stack:
        item = pop()
        visit(item)  # a container shared by two parents is visited (and summed) under each
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, containers):
                push(child)
    sizes: dict[int, int] = {}
    per_node = STRING_CHARS_PER_NODE
    for item in reversed(order):  # every child before its parent
        if isinstance(item, dict):
            total, children = 1 + len(item), item.values()
        else:
            total, children = 1, item
        for child in children:
            if isinstance(child, containers):
                total += sizes[id(child)]
            elif isinstance(child, str) and len(child) > per_node:
                total += 1 + len(child) // per_node
            else:
                total += 1
        sizes[id(item)] = total
    return sizes


def _pieces(value: Any, encoder: json.JSONEncoder, sizes: dict[int, int]) -> Iterator[Any]:
    """The text of one container in pieces: strings, and `_Big` children to encode in turn."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):  # json's own key coercion: rare, small
            yield encoder.encode(value)
            return
        yield "{"
        batch: Any = {}
    elif isinstance(value, list):
        yield "["
        batch = []
    else:
        yield encoder.encode(value)
        return
    first = True
    nodes = 0

    def flush() -> Iterator[str]:
        nonlocal first, batch, nodes
        if batch:
            text = encoder.encode(batch)[1:-1]
            yield text if first else "," + text
            first = False
            batch = {} if isinstance(value, dict) else []
            nodes = 0

    if isinstance(value, dict):
        items: Any = sorted(value.items()) if encoder.sort_keys else value.items()
    else:
        items = ((None, v) for v in value)
    for key, child in items:
        weight = _weight(child, sizes)
        count = weight if weight <= INLINE_NODES else None
        if count is None or nodes + count > INLINE_NODES:
            yield from flush()
        if count is None:  # a large child: encoded piece by piece itself
            head = "" if first else ","
            yield head + (encoder.encode(key) + ":" if key is not None else "")
            first = False
            yield _Big(child)
            continue
        nodes += count
        if isinstance(batch, dict):
            batch[key] = child
        else:
            batch.append(child)
    yield from flush()
    yield "}" if isinstance(value, dict) else "]"
