"""The run limits a request or codemode.toml may set, their defaults and their valid ranges
(spec §3.2.4): one source of truth for the runtime (runtime/limits.py, which enforces them on
every run) and for codemode.toml's validation on load (codemode_toml.py), so a value the file
accepts is a value every run accepts.

Field names are the JSON keys (camelCase): the same names appear in the system prompt, in
`codemode.toml` and in responses.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "DEFAULT_MAX_LOG_BYTES",
    "DEFAULT_MAX_MEMORY_BYTES",
    "DEFAULT_MAX_RESPONSE_CHARS",
    "DEFAULT_MAX_TOOL_CALLS",
    "DEFAULT_TIMEOUT_MS",
    "HARD_MAX_CONCURRENT_CALLS",
    "HARD_MAX_LOG_BYTES",
    "HARD_MAX_MEMORY_BYTES",
    "HARD_MAX_RESPONSE_CHARS",
    "HARD_MAX_TIMEOUT_MS",
    "HARD_MAX_TOOL_CALLS",
    "LIMIT_CHOICES",
    "LIMIT_FLAGS",
    "LIMIT_KEYS",
    "LIMIT_RANGES",
    "MIN_CONCURRENT_CALLS",
    "MIN_MEMORY_BYTES",
    "MIN_RESPONSE_CHARS",
    "MIN_TIMEOUT_MS",
    "TRACE_MODES",
    "TraceMode",
    "coerce_limit",
]

# --- defaults -------------------------------------------------------------------------------

#: Wall-clock budget of one run. Bounds runaway scripts (`while (true) {}`, slow native ops,
#: tool calls that never return) so the caller always gets an answer.
DEFAULT_TIMEOUT_MS = 30_000
#: QuickJS heap budget. Bounds allocation bombs (`'x'.repeat(2**28)`, ever-growing arrays)
#: that would otherwise take the host's memory with them.
DEFAULT_MAX_MEMORY_BYTES = 64 * 1024 * 1024
#: Total UTF-8 bytes of log messages kept. Bounds log floods that would blow up the agent's
#: context window and the host's memory; excess is dropped with a final warning (§3.3.1).
DEFAULT_MAX_LOG_BYTES = 64 * 1024
#: Tool calls per run (enforced by the bridge). Bounds a script that hammers MCP servers in
#: a loop.
DEFAULT_MAX_TOOL_CALLS = 200
#: Tool calls in flight at once; more wait in a JS-side queue. Bounds fan-out such as
#: `Promise.all(ids.map(get))` over 10k ids against one server, and keeps the binding's own
#: pending-call cap (which would abort the run uncatchably) out of reach.
DEFAULT_MAX_CONCURRENT_CALLS = 32
#: Characters of `result` and `logs` (their JSON, as the model reads it) a `serve` response
#: carries; past it both are cut, with markers and a RESPONSE_TRUNCATED warning
#: (runtime/response.py `fit_response`). Bounds a run that would flood the model's own context
#: with data (a dump of every record, a log line per item): about 5,000 tokens, a tenth of a
#: small context window. `serve --max-response-chars`; the Python API and `run` have no budget
#: unless a run or codemode.toml sets this key.
DEFAULT_MAX_RESPONSE_CHARS = 20_000

# --- ceilings: the most a request may ask for ----------------------------------------------

#: A run may not hold a worker process longer than this, whatever it asks for.
HARD_MAX_TIMEOUT_MS = 10 * 60 * 1000
#: Above this a single run could starve the machine (2 cores / shared memory).
HARD_MAX_MEMORY_BYTES = 1024 * 1024 * 1024
#: Logs are returned inline in one JSON response; more than this is never useful.
HARD_MAX_LOG_BYTES = 16 * 1024 * 1024
#: Upper bound on calls per run, against runaway loops on expensive servers.
HARD_MAX_TOOL_CALLS = 100_000
#: The JS engine's pending host-call table is sized from this; keep it small.
HARD_MAX_CONCURRENT_CALLS = 256
#: More than a whole result (16 MiB of JSON) and the logs a run may keep: a budget this large
#: only cuts what no model could read anyway.
HARD_MAX_RESPONSE_CHARS = 32 * 1024 * 1024

# --- floors: below these the sandbox cannot even start --------------------------------------

#: The prelude, the @codemode modules and a small script need a few MiB of heap.
MIN_MEMORY_BYTES = 4 * 1024 * 1024
#: A zero timeout could never run anything; 1 ms is the smallest meaningful deadline.
MIN_TIMEOUT_MS = 1
#: With no call slot every tool call would wait forever in the JS queue.
MIN_CONCURRENT_CALLS = 1
#: Below this the markers saying what was cut would crowd out what was kept.
MIN_RESPONSE_CHARS = 1000

#: key -> (lowest, highest) integer a run accepts.
LIMIT_RANGES: dict[str, tuple[int, int]] = {
    "timeoutMs": (MIN_TIMEOUT_MS, HARD_MAX_TIMEOUT_MS),
    "maxMemoryBytes": (MIN_MEMORY_BYTES, HARD_MAX_MEMORY_BYTES),
    "maxLogBytes": (0, HARD_MAX_LOG_BYTES),
    "maxToolCalls": (0, HARD_MAX_TOOL_CALLS),
    "maxConcurrentCalls": (MIN_CONCURRENT_CALLS, HARD_MAX_CONCURRENT_CALLS),
    "maxResponseChars": (MIN_RESPONSE_CHARS, HARD_MAX_RESPONSE_CHARS),
}
#: Boolean options sent with the limits (not resource bounds).
LIMIT_FLAGS: tuple[str, ...] = ("typecheck",)
#: What `toolTrace` lists (runtime/host/tooltrace.py `shape_trace`): every call, the failed and
#: denied ones (plus a `toolSummary`), or none.
TRACE_MODES: tuple[str, ...] = ("full", "errors", "none")
TraceMode = Literal["full", "errors", "none"]
#: Options that take one of a few strings.
LIMIT_CHOICES: dict[str, tuple[str, ...]] = {"trace": TRACE_MODES}
#: Every key a limits object may set.
LIMIT_KEYS: tuple[str, ...] = (*LIMIT_RANGES, *LIMIT_FLAGS, *LIMIT_CHOICES)


def coerce_limit(key: str, value: Any) -> Any:
    """`value` as a run takes it for `key` (an integral float becomes an int; a flag stays a
    bool or None, a choice one of its strings or None); ValueError with what is wrong and the
    valid range otherwise."""
    if key in LIMIT_FLAGS:
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    if key in LIMIT_CHOICES:
        choices = LIMIT_CHOICES[key]
        if value is not None and value not in choices:
            raise ValueError(f"expected one of {', '.join(map(repr, choices))}, got {value!r}")
        return value
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    low, high = LIMIT_RANGES[key]
    if not low <= value <= high:
        raise ValueError(f"{value} is out of range; use an integer from {low} to {high}")
    return value
