"""What an idle sandbox worker holds: the modules it imports (each one is resident memory in
every worker process, docs/DESIGN.md "Where the sandbox runs"). Real subprocess checks of
`sys.modules`; the memory figures themselves are bench/runtime.py's section (6)."""

from __future__ import annotations

import subprocess
import sys

from codemode_gen.runtime.sandbox import protocol

#: Modules a worker must not load: OpenSSL (`ssl`, `_hashlib`: libcrypto), what
#: importlib.resources and atomic file writes pull in (tempfile, shutil, bz2, lzma), difflib
#: (asked only for a failure's "did you mean"), and the host's layers.
NOT_IN_A_WORKER = (
    "ssl",
    "_hashlib",
    "tempfile",
    "shutil",
    "lzma",
    "bz2",
    "difflib",
    "importlib.resources",
    "multiprocessing",
    "mcp",
    "jsonschema",
    "pydantic",
)

RUN = (
    b'{"op":"run","code":"globalThis.__codemode_result__ = 7","modules":{},"sources":{},'
    b'"limits":{},"budgetMs":30000}\n'
)


def test_a_worker_process_serves_a_run_without_the_modules_it_does_not_need() -> None:
    # Started as the pool starts it (-I, run as __main__), after one run.
    code = (
        "import runpy, sys\n"
        "runpy.run_module('codemode_gen.runtime.sandbox.worker', run_name='__main__')\n"
        f"held = [m for m in {NOT_IN_A_WORKER!r} if sys.modules.get(m) is not None]\n"
        "from codemode_gen.runtime.sandbox import protocol\n"
        "print('held', held, protocol.module_digest('x'), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], input=RUN, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert b'"status":"ok","result":"7"' in out.stdout, out
    # hashlib without OpenSSL gives the same digests (built-in sha256)
    assert f"held [] {protocol.module_digest('x')}".encode() in out.stderr, out.stderr


def test_a_host_importing_the_worker_module_keeps_openssl_hashes() -> None:
    code = (
        "import sys, hashlib, codemode_gen.runtime.sandbox.worker\n"
        "print(sys.modules.get('_hashlib') is not None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_near_miss_still_finds_the_name_meant() -> None:
    # difflib is imported where a near miss is looked for (a failure), not with the module.
    from codemode_gen.runtime.near_miss import closest_names

    assert closest_names("lst_notes", ["list_notes", "get_note"]) == ["list_notes"]


def test_jsbox_run_killable_still_works_in_a_worker_process() -> None:
    # multiprocessing is imported by the stand-in for jsbox's `_killable` on its first call.
    code = (
        "import runpy, sys\n"
        "runpy.run_module('codemode_gen.runtime.sandbox.worker', run_name='__main__')\n"
        "import jsbox\n"
        "print('killable', jsbox.run_killable('6 * 7', timeout=30), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], input=RUN, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert b"killable 42" in out.stderr, out.stderr


def test_a_worker_falls_back_to_jsbox_own_killable_module() -> None:
    # A jsbox asking the stand-in for a name it lacks (here: the stand-in is an empty module):
    # the worker imports jsbox again with its real `_killable` and serves the run.
    code = (
        "import runpy, sys, types\n"
        "sys.modules['jsbox._killable'] = types.ModuleType('jsbox._killable')\n"
        "runpy.run_module('codemode_gen.runtime.sandbox.worker', run_name='__main__')\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], input=RUN, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert b'"status":"ok","result":"7"' in out.stdout, out
