"""Spec §8: tools/list_changed refreshes the tool index before the next run (§8.1) and never
changes the tool set of a run in flight (§8.2). Real server: tests/servers/list_changed.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.runtime_support import HostThread, assert_ok, fixture_set, stdio, write_out

pytestmark = pytest.mark.timeout(120)

# Lets the notification sent just before add_tool's answer be processed by the session.
SETTLE_S = 0.3

DURING = """
import * as lc from '@codemode/servers/{sid}';
import {{ listTools }} from '@codemode/discovery';
await lc.add_tool({{name: '{name}'}});
await new Promise(r => setTimeout(r, 200));
const again = await import('@codemode/servers/{sid}');
globalThis.__codemode_result__ = {{
  discovery: (await listTools('{sid}', {{detail: 'name'}})).map(t => t.toolName),
  bindings: Object.keys(again).filter(k => k !== '__meta__'),
}};
"""

AFTER = """
import {{ listTools }} from '@codemode/discovery';
import * as lc from '@codemode/servers/{sid}';
globalThis.__codemode_result__ = {{
  discovery: (await listTools('{sid}', {{detail: 'name'}})).map(t => t.toolName),
  answer: await lc['{name}'](),
}};
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s8")
    out = base / "out"
    write_out(
        out,
        [
            fixture_set(
                "recorded",
                [
                    {
                        "name": "add_tool",
                        "inputSchema": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        },
                    },
                    {"name": "ping", "inputSchema": {"type": "object", "properties": {}}},
                ],
            )
        ],
    )
    configs = {"live": stdio("live", "list_changed"), "recorded": stdio("recorded", "list_changed")}
    # Tools added at run time have no annotations: approval would ask (runtime/host/approval.py).
    h = HostThread(configs, out, base / "logs", approve_all=True)
    yield h
    h.close()


@pytest.mark.parametrize("sid", ["live", "recorded"])
@pytest.mark.slow
def test_s8_2_in_flight_run_keeps_its_tool_set_and_s8_1_next_run_sees_the_change(
    host: HostThread, sid: str
) -> None:
    name = f"fresh_{sid}"
    during = assert_ok(host.run(DURING.format(sid=sid, name=name)))
    assert name not in during["discovery"] and "ping" in during["discovery"]
    assert name not in during["bindings"]
    time.sleep(SETTLE_S)
    r = host.run(AFTER.format(sid=sid, name=name))
    after = assert_ok(r)
    assert name in after["discovery"]
    assert after["answer"] == f"hello from {name}"
    if sid == "recorded":  # out/ knows only the original tools: the run says so
        stale = [d for d in r["diagnostics"] if d["code"] == "STALE_OUT"]
        assert stale and name in stale[0]["message"]
