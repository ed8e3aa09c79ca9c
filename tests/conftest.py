"""Shared helpers for tests that start real MCP server processes.

Servers over HTTP/SSE are started on 127.0.0.1 with `--port 0`; every server script prints
`listening on http://127.0.0.1:<port>` to stderr once the socket accepts, and we also check
the port accepts before handing it out. The `start_server` fixture kills them at teardown;
`launch_server` (for module-scoped fixtures, through runtime_support.start_http) leaves that to
its caller.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from codemode_gen.config import ServerConfig
from codemode_gen.runtime.sandbox.worker_process import (
    NATIVE_WORKER_BINARY,
    WORKER_ENV,
    WorkerKind,
    is_worker_cmdline,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "servers"
TEST_SERVERS = REPO / "tests" / "servers"
PYTHON = sys.executable
# Bounds how long a test waits for a server's readiness line (cold imports on a busy machine).
SERVER_START_TIMEOUT = 30.0
# Tests assert behaviour, never speed (bench/ measures speed; CI shares two busy cores). Where a
# test must tell "ended because the behaviour under test worked" from "did not", the broken case
# takes HANG_S or forever and the test allows PROMPT_S: a margin no scheduling delay on a loaded
# machine reaches, and still far from the broken case.
PROMPT_S = 10.0
HANG_S = 60.0
# The bundled notes server's tools (examples/servers/notes_server.py) in tools/list order: what discovery
# and a session list for it.
NOTES_TOOLS = [
    "create_note",
    "delete_note",
    "export-csv",
    "flaky_sync",
    "get_note",
    "list_notes",
    "render_chart",
    "search_notes",
    "stats",
    "summary",
    "tasks.add",
    "tasks.list",
    "update_note",
]

_READY = re.compile(r"listening on (http://\S+?):(\d+)")
# Where a type check finds no TypeScript it downloads one (runtime/host/tsinstall.py): tests never
# write the user's cache, and reach the registry only where they say so (tests/runtime/host/test_tsinstall.py).
UNREACHABLE_REGISTRY = "http://127.0.0.1:9"


def pytest_sessionstart(session: pytest.Session) -> None:
    """CODEMODE_SANDBOX_WORKER=native (.ci/run) tests the native worker: without it, stop now
    with the reason, not with every sandbox test failing one by one."""
    from codemode_gen.runtime.native import launch

    if os.environ.get("CODEMODE_SANDBOX_WORKER", "").strip().lower() == "native" and (
        launch.native_worker_path() is None
    ):
        pytest.exit(
            "CODEMODE_SANDBOX_WORKER=native, but the install did not build the native sandbox "
            f"worker ({launch.DEFAULT_OUTPUT}): run `{launch.build_command()}` to see why",
            returncode=1,
        )


@pytest.fixture(scope="session", autouse=True)
def _no_download_into_the_users_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from codemode_gen.runtime.host.tsinstall import CACHE_ENV, REGISTRY_ENV

    saved = {name: os.environ.get(name) for name in (CACHE_ENV, REGISTRY_ENV)}
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("codemode-cache"))
    os.environ[REGISTRY_ENV] = UNREACHABLE_REGISTRY
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def _no_login_in_the_users_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """OAuth logins of tests go to a private folder of the run, never the user's keyring or
    config folder (tests that test the keyring say so: tests/client/test_oauth.py)."""
    from codemode_gen.client.tokenstore import AUTH_DIR_ENV, STORE_ENV

    saved = {name: os.environ.get(name) for name in (AUTH_DIR_ENV, STORE_ENV)}
    folder = tmp_path_factory.mktemp("codemode-auth")
    folder.chmod(0o700)
    os.environ[AUTH_DIR_ENV] = str(folder)
    os.environ[STORE_ENV] = "file"
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def server_script(name: str) -> Path:
    """examples/servers/<name>.py or tests/servers/<name>.py."""
    for folder in (EXAMPLES, TEST_SERVERS):
        path = folder / f"{name}.py"
        if path.is_file():
            return path
    raise FileNotFoundError(name)


def stdio_config(server_id: str, name: str, *args: str, **fields: Any) -> ServerConfig:
    return ServerConfig(
        id=server_id,
        transport="stdio",
        command=PYTHON,
        args=(str(server_script(name)), "stdio", *args),
        **fields,
    )


def child_pids(parent: int | None = None) -> set[int]:
    """Live (non-zombie) processes whose parent is `parent` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, ppid = fields[0], int(fields[1])
        if ppid == parent and state != "Z":
            found.add(int(entry))
    return found


def sandbox_worker_pids(parent: int | None = None) -> set[int]:
    """Live sandbox worker processes (Python or native) whose parent is `parent` (default: this
    process)."""
    return set(sandbox_workers(parent))


def sandbox_workers(parent: int | None = None) -> dict[int, WorkerKind]:
    """The kind of each live sandbox worker process whose parent is `parent` (default: this
    process), told by its command line (worker_process.is_worker_cmdline): the native binary's
    name, else the Python worker's module."""
    found: dict[int, WorkerKind] = {}
    for pid in child_pids(parent):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if is_worker_cmdline(cmdline):
            binary = cmdline.split(b"\0", 1)[0].rsplit(b"/", 1)[-1]
            found[pid] = "native" if binary == NATIVE_WORKER_BINARY.encode() else "python"
    return found


# --- both sandbox workers ------------------------------------------------------------------------
# The suite runs on one worker (CI: CODEMODE_SANDBOX_WORKER=native); the modules that test the
# worker's own behaviour run on both, the Python one being the fallback of installs without a C
# compiler. Such a module asks for `sandbox_worker` (pytestmark, or its Sandbox fixture does):
# each of its tests runs once per kind, ids `native` and `python`.


@pytest.fixture(scope="module", params=["native", "python"])
def sandbox_worker(request: pytest.FixtureRequest) -> Iterator[WorkerKind]:
    """The sandbox worker kind the test runs on: CODEMODE_SANDBOX_WORKER is set to it while the
    module's tests of that kind run. Module-scoped, so a module's Sandbox fixture can depend on
    it (it is then built once per kind: a pool never serves a test of the other kind);
    `_sandbox_workers_are_of_the_kind_claimed` checks every such test."""
    from codemode_gen.runtime.native import launch

    kind: WorkerKind = request.param
    if kind == "native" and launch.native_worker_path() is None:
        pytest.skip(
            f"the native sandbox worker is not built ({launch.DEFAULT_OUTPUT}): "
            f"run `{launch.build_command()}`"
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(WORKER_ENV, kind)
        yield kind


@pytest.fixture(autouse=True)
def _sandbox_workers_are_of_the_kind_claimed(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that runs on `sandbox_worker`, every live sandbox worker process of this
    process is of that kind: a pool started under another setting and kept (a fixture of wider
    scope that does not depend on `sandbox_worker`) is caught here. Other tests leave no worker
    behind (their pools are closed, which reaps them), so none is of another kind by right."""
    if "sandbox_worker" not in request.fixturenames or not sys.platform.startswith("linux"):
        yield
        return
    kind = request.getfixturevalue("sandbox_worker")
    yield
    wrong = {pid: other for pid, other in sandbox_workers().items() if other != kind}
    assert not wrong, f"the test runs on the {kind} sandbox worker, but these are not: {wrong}"


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class RunningServer:
    def __init__(self, proc: subprocess.Popen[str], base: str) -> None:
        self.proc = proc
        self.base = base  # e.g. http://127.0.0.1:41234

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def sse_url(self) -> str:
        return f"{self.base}/sse"


def _drain(stream: Any) -> None:
    for _line in stream:
        pass


def launch_server(
    name: str, transport: str, *extra: str, env: Mapping[str, str] | None = None
) -> RunningServer:
    """Start test server `name` over "http" or "sse" on a free loopback port, once it accepts.
    The caller kills it (`start_server` does at teardown)."""
    proc = subprocess.Popen(
        [PYTHON, str(server_script(name)), transport, "--port", "0", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    found: list[re.Match[str]] = []

    def read_ready() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = _READY.search(line)
            if match:
                found.append(match)
                return

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(SERVER_START_TIMEOUT)
    if not found:
        proc.kill()
        proc.wait(timeout=10)
        raise RuntimeError(f"{name} {transport} did not start: {''.join(lines)[-2000:]}")
    threading.Thread(target=_drain, args=(proc.stderr,), daemon=True).start()
    host, port = found[0].group(1), int(found[0].group(2))
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while True:  # the readiness line should mean this already holds; make sure
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait(timeout=10)
                raise
            time.sleep(0.05)
    return RunningServer(proc, f"{host}:{port}")


@pytest.fixture
def start_server() -> Iterator[Callable[..., RunningServer]]:
    """start_server(name, "http"|"sse", *extra_args, env=...) -> RunningServer, killed after."""
    started: list[subprocess.Popen[str]] = []

    def start(
        name: str, transport: str, *extra: str, env: dict[str, str] | None = None
    ) -> RunningServer:
        server = launch_server(name, transport, *extra, env=env)
        started.append(server.proc)
        return server

    yield start
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
