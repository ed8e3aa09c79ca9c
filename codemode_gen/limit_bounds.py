"""The run limits a request or codemode.toml may set, their defaults and their valid ranges
(spec §3.2.4): one source of truth for the runtime (runtime/limits.py, which enforces them on
every run) and for codemode.toml's validation on load (config.py), so a value the file
accepts is a value every run accepts.

Field names are the JSON keys (camelCase): the same names appear in the system prompt, in
`codemode.toml` and in responses.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_MAX_CONCURRENT_CALLS",
    "DEFAULT_MAX_LOG_BYTES",
    "DEFAULT_MAX_MEMORY_BYTES",
    "DEFAULT_MAX_TOOL_CALLS",
    "DEFAULT_TIMEOUT_MS",
    "HARD_MAX_CONCURRENT_CALLS",
    "HARD_MAX_LOG_BYTES",
    "HARD_MAX_MEMORY_BYTES",
    "HARD_MAX_TIMEOUT_MS",
    "HARD_MAX_TOOL_CALLS",
    "LIMIT_FLAGS",
    "LIMIT_KEYS",
    "LIMIT_RANGES",
    "MIN_CONCURRENT_CALLS",
    "MIN_MEMORY_BYTES",
    "MIN_TIMEOUT_MS",
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

# --- floors: below these the sandbox cannot even start --------------------------------------

#: The prelude, the @codemode modules and a small script need a few MiB of heap.
MIN_MEMORY_BYTES = 4 * 1024 * 1024
#: A zero timeout could never run anything; 1 ms is the smallest meaningful deadline.
MIN_TIMEOUT_MS = 1
#: With no call slot every tool call would wait forever in the JS queue.
MIN_CONCURRENT_CALLS = 1

#: key -> (lowest, highest) integer a run accepts.
LIMIT_RANGES: dict[str, tuple[int, int]] = {
    "timeoutMs": (MIN_TIMEOUT_MS, HARD_MAX_TIMEOUT_MS),
    "maxMemoryBytes": (MIN_MEMORY_BYTES, HARD_MAX_MEMORY_BYTES),
    "maxLogBytes": (0, HARD_MAX_LOG_BYTES),
    "maxToolCalls": (0, HARD_MAX_TOOL_CALLS),
    "maxConcurrentCalls": (MIN_CONCURRENT_CALLS, HARD_MAX_CONCURRENT_CALLS),
}
#: Boolean options sent with the limits (not resource bounds).
LIMIT_FLAGS: tuple[str, ...] = ("typecheck",)
#: Every key a limits object may set.
LIMIT_KEYS: tuple[str, ...] = (*LIMIT_RANGES, *LIMIT_FLAGS)


def coerce_limit(key: str, value: Any) -> Any:
    """`value` as a run takes it for `key` (an integral float becomes an int; a flag stays a
    bool or None); ValueError with what is wrong and the valid range otherwise."""
    if key in LIMIT_FLAGS:
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
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
