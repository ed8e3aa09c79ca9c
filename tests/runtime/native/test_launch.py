"""runtime/native/launch.py: CONFIG_JSON is exactly INTERFACE.md's, made of the Python worker's
own constants; the command line names the binary, the JS folder and that JSON; and the built
worker (when it is built) starts and says `ready`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.native import launch
from codemode_gen.runtime.native.build import NATIVE_DIR
from codemode_gen.runtime.sandbox import protocol, realm

INTERFACE = NATIVE_DIR / "INTERFACE.md"


def documented_config() -> tuple[list[str], dict[str, list[str]], dict[str, int]]:
    """INTERFACE.md's CONFIG_JSON sketch: its top-level keys in order, the keys of its nested
    objects, and the numbers it writes down."""
    text = INTERFACE.read_text(encoding="utf-8")
    sketch = re.search(r'\{"realmConfig".*?"readChunkBytes": \d+\}', text, re.S)
    assert sketch is not None, "INTERFACE.md lost its CONFIG_JSON sketch"
    body = re.sub(r"//[^\n]*", "", sketch.group(0)[1:-1])  # the comments, the outer braces
    nested = {
        key: re.findall(r'"(\w+)"', inner)
        for key, inner in re.findall(r'"(\w+)": \{([^}]*)\}', body)
    }
    flat = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", body)
    numbers = {key: int(value) for key, value in re.findall(r'"(\w+)": (\d+)', flat)}
    return re.findall(r'"(\w+)"', flat), nested, numbers


def test_the_config_has_exactly_the_keys_interface_md_lists() -> None:
    keys, nested, _ = documented_config()
    config = launch.worker_config()
    assert list(config) == keys
    assert list(config["defaultLimits"]) == nested["defaultLimits"]
    assert config["realmConfig"] == realm.realm_config()  # INTERFACE.md: "(realm.py)"


def test_the_config_values_are_the_python_workers() -> None:
    _, _, numbers = documented_config()
    config = launch.worker_config()
    assert {key: config[key] for key in numbers} == numbers
    defaults = Limits()
    assert config["defaultLimits"] == {
        "timeoutMs": defaults.timeoutMs,
        "maxMemoryBytes": defaults.maxMemoryBytes,
        "maxLogBytes": defaults.maxLogBytes,
        "maxConcurrentCalls": defaults.maxConcurrentCalls,
    }
    assert config["logLevels"] == ["debug", "log", "warn", "error"]
    assert config["readChunkBytes"] == protocol.READ_CHUNK_BYTES
    assert json.loads(json.dumps(config)) == config


def test_the_command_names_the_binary_the_js_folder_and_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "codemode-worker"
    monkeypatch.setattr(launch, "DEFAULT_OUTPUT", binary)
    assert launch.native_worker_path() is None and launch.native_command() is None
    binary.write_text("#!/bin/sh\n")
    assert launch.native_worker_path() is None  # not executable: not a worker
    binary.chmod(0o755)
    assert launch.native_worker_path() == binary
    command = launch.native_command()
    assert command is not None and len(command) == 3
    assert command[0] == str(binary)
    js = Path(command[1])
    assert {"prelude.js", "errors.js", "host.js", "url.js"} <= {p.name for p in js.iterdir()}
    assert (js / "prelude.js").read_text(encoding="utf-8") == protocol.js_source("prelude.js")
    assert json.loads(command[2]) == launch.worker_config()


def test_the_build_command_runs_the_build_module_with_this_interpreter() -> None:
    assert launch.build_command().endswith(" -m codemode_gen.runtime.native.build")


def test_the_built_worker_starts_and_says_ready() -> None:
    command = launch.native_command()
    if command is None:
        pytest.skip(f"the native worker is not built: {launch.build_command()}")
    proc = subprocess.run(command, input=b"", capture_output=True, timeout=60, env=dict(os.environ))
    first = proc.stdout.split(b"\n", 1)[0]
    assert json.loads(first) == {"op": protocol.READY}, proc.stderr.decode(errors="replace")
    assert proc.returncode == 0


def test_the_binary_is_where_build_py_puts_it() -> None:
    # launch.py names it without importing build.py (which setup.py loads by path).
    from codemode_gen.runtime.native import build

    assert (launch.BINARY_NAME, launch.DEFAULT_OUTPUT) == (build.BINARY_NAME, build.DEFAULT_OUTPUT)
