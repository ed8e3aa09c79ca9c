"""The Python API as documented: `async with CodeMode.from_config(...) as cm: await cm.run(...)`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen import CodeMode
from codemode_gen.errors import UserError

from .runtime_support import PYTHON, script

pytestmark = pytest.mark.timeout(120)


def test_from_config_reads_settings_beside_the_config_and_is_reusable(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "slow": {"command": PYTHON, "args": [script("slow"), "stdio"]}}}))
    (tmp_path / "codemode.toml").write_text(
        '[limits]\nmaxToolCalls = 2\n\n[servers.slow]\nblocklist = ["env"]\n'
    )
    code = "import * as slow from '@codemode/servers/slow';\nawait slow.tick();\nglobalThis.__codemode_result__ = typeof slow.env;"

    async def main() -> list[dict[str, Any]]:
        async with CodeMode.from_config(tmp_path / ".mcp.json", out=tmp_path / "out") as cm:
            first = await cm.run(code)
            second = await cm.run("import { tick } from '@codemode/servers/slow';\nfor (;;) await tick();")
            third = await cm.run(code, limits={"maxToolCalls": 10})
            return [first, second, third]

    first, second, third = anyio.run(main)
    assert first["result"] == "undefined"  # blocklist from codemode.toml
    limit = [d for d in second["diagnostics"] if d["severity"] == "error"]
    assert limit[0]["code"] == "SANDBOX_LIMIT" and len(second["toolTrace"]) == 3  # toml default: 2 calls
    assert third["result"] == "undefined" and not [d for d in third["diagnostics"] if d["severity"] == "error"]


def test_from_config_reports_a_missing_config_as_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        CodeMode.from_config(tmp_path / "nope.json")


def test_run_outside_the_context_manager_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {}}')
    cm = CodeMode.from_config(tmp_path / ".mcp.json")
    with pytest.raises(RuntimeError, match="async with"):
        anyio.run(cm.run, "1")
