"""How the host starts the native sandbox worker: where its binary is, its command line, and the
constants it runs with.

The native worker (INTERFACE.md: the C shell worker.c, the supervisor runtime/js/supervisor.js)
is started as `codemode-worker JS_DIR CONFIG_JSON`. CONFIG_JSON carries the host's constants,
taken here from the modules that own them for the Python worker (realm.py, engine.py,
run_state.py, limits.py, logs.py, screen.py, protocol.py), so no number is written twice and both
workers always run with the same ones. The binary is built at install time by build.py (or by
hand: `build_command()`); without it the host starts the Python worker
(runtime/sandbox/worker_process.py chooses).

Imported with the host's worker handle (worker_process.py): nothing here is imported until it
is used. The Python worker's modules that own the constants are read by the first native start
(`worker_config`), and build.py (subprocess, hashing, threads) only by a build.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
from pathlib import Path
from typing import Any

import codemode_gen.runtime
from codemode_gen.children import python_module_command

#: The module that builds the binary (runtime/native/build.py).
BUILD_MODULE = "codemode_gen.runtime.native.build"
#: The binary's name (build.py's BINARY_NAME: that file imports nothing of the package, since
#: setup.py loads it by path): the host tells its native workers' processes apart by it.
BINARY_NAME = "codemode-worker"
#: Where build.py puts the binary (its DEFAULT_OUTPUT).
DEFAULT_OUTPUT = Path(__file__).resolve().parent / BINARY_NAME

__all__ = [
    "BINARY_NAME",
    "DEFAULT_OUTPUT",
    "build_command",
    "js_dir",
    "native_command",
    "native_worker_path",
    "worker_config",
]


def worker_config() -> dict[str, Any]:
    """CONFIG_JSON (INTERFACE.md), from the Python worker's own constants."""
    from codemode_gen.runtime import limits, logs, screen
    from codemode_gen.runtime.sandbox import engine, protocol, realm, run_state

    defaults = limits.Limits()
    return {
        "realmConfig": realm.realm_config(),
        "defaultLimits": {
            "timeoutMs": defaults.timeoutMs,
            "maxMemoryBytes": defaults.maxMemoryBytes,
            "maxLogBytes": defaults.maxLogBytes,
            "maxConcurrentCalls": defaults.maxConcurrentCalls,
        },
        "extraPendingCalls": realm.EXTRA_PENDING_CALLS,
        "preludeTimeoutMs": round(realm.PRELUDE_TIMEOUT_S * 1000),
        "maxInputBytes": limits.MAX_INPUT_BYTES,
        "maxJsonDepth": limits.MAX_JSON_DEPTH,
        "maxForwardedNameChars": screen.MAX_FORWARDED_NAME_CHARS,
        "maxJournalEvents": run_state.MAX_JOURNAL_EVENTS,
        "maxJournalClockRuns": run_state.MAX_JOURNAL_CLOCK_RUNS,
        "logLevels": list(logs.LOG_LEVELS),
        "logEntryOverheadBytes": limits.LOG_ENTRY_OVERHEAD_BYTES,
        "minLogEntries": limits.MIN_LOG_ENTRIES,
        "heapProbeBytes": engine.HEAP_PROBE_BYTES,
        "releaseThresholdBytes": engine.RELEASE_THRESHOLD_BYTES,
        "maxSettledInARow": engine.MAX_SETTLED_IN_A_ROW,
        "readChunkBytes": protocol.READ_CHUNK_BYTES,
    }


@functools.cache
def _config_text() -> str:
    return json.dumps(worker_config(), separators=(",", ":"))


def js_dir() -> Path:
    """runtime/js of the package (prelude.js, errors.js, host.js, url.js, supervisor.js)."""
    return Path(codemode_gen.runtime.__file__).resolve().parent / "js"


def native_worker_path() -> Path | None:
    """The built binary, if it is there and executable."""
    path = DEFAULT_OUTPUT
    return path if path.is_file() and os.access(path, os.X_OK) else None


def native_command() -> list[str] | None:
    """The native worker's argv (`[binary, JS_DIR, CONFIG_JSON]`), or None when it is not built.
    The binary's name, `codemode-worker`, is what tells its processes apart."""
    binary = native_worker_path()
    if binary is None:
        return None
    return [str(binary), str(js_dir()), _config_text()]


def build_command() -> str:
    """The command that builds the binary, with this interpreter, from any directory (`-P`: a
    checkout's ./codemode_gen cannot shadow the package; codemode_gen/children.py)."""
    return shlex.join(python_module_command(BUILD_MODULE, absolute=True))
