"""What a host that only runs scripts holds: the modules a CodeMode imports to open a session
and run one script on a generated project (each is resident memory for the host's lifetime).
Real subprocess checks of `sys.modules`; the memory figures are bench/runtime.py's section (6)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.runtime_support import PYTHON, REPO

pytestmark = pytest.mark.timeout(120)

#: Imported where they are used, never by a plain run: the module generator and its templates
#: (skill checks, live builds), the recorder (live learning), the TypeScript installer's tarfile,
#: `regex` (the first schema pattern compiled), difflib and argparse (a near miss, a command),
#: the OpenTelemetry metrics API (nothing configured it).
NOT_HELD = (
    "codemode_gen.generator.build",
    "codemode_gen.generator.templating",
    "codemode_gen.generator.record",
    "codemode_gen.generator.probe",
    "codemode_gen.runtime.host.typecheck",
    "codemode_gen.runtime.host.tsinstall",
    "jinja2",
    "regex",
    "tarfile",
    "argparse",
    "difflib",
    "opentelemetry.metrics",
)

HOST = f"""
import asyncio, sys
from pathlib import Path

async def main():
    from codemode_gen import CodeMode

    code = 'import * as notes from "@codemode/servers/notes";\\n' \\
        'globalThis.__codemode_result__ = (await notes.get_note({{id: 1}})).title;'
    async with CodeMode.from_config(Path(".mcp.json")) as cm:
        response = await cm.run(code)
    print(response["result"])
    print([m for m in {NOT_HELD!r} if m in sys.modules])

asyncio.run(main())
"""


def test_a_host_running_a_script_does_not_import_what_only_generating_or_learning_needs() -> None:
    # The bundled demo (its out/ is committed): nothing is generated, nothing is learnt.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(
        [PYTHON, "-c", HOST],
        cwd=REPO,
        env={**env, "CODEMODE_PYTHON": PYTHON},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert out.returncode == 0, out.stderr
    result, held = out.stdout.strip().splitlines()[-2:]
    assert result == "Quarterly planning"
    assert held == "[]", out.stdout
