"""Spec §5: generated per-server modules, call shapes (§5.3.1) and unwrapping (§5.3.2).

Bindings come from the real generator (in memory for servers out/ lacks) and run in real
QuickJS against real servers: tests/servers/slow.py and the demo notes server.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from tests.runtime_support import HostThread, assert_ok, stdio

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostThread]:
    base = tmp_path_factory.mktemp("s5")
    configs = {
        "slow": stdio("slow", "slow"),
        "notes": stdio("notes", "notes_server"),
        "Notes_JSON": stdio("Notes_JSON", "notes_server", unwrap="json"),
    }
    h = HostThread(configs, base / "out", base / "logs")
    yield h
    h.close()


def test_s5_0_1_module_path_is_normalised(host: HostThread) -> None:
    r = host.run(
        "import { __meta__ } from '@codemode/servers/notes-json';\n"
        "import { listServers } from '@codemode/discovery';\n"
        "globalThis.__codemode_result__ = [__meta__.serverId, (await listServers()).map(s => s.serverId)];"
    )
    meta_id, ids = assert_ok(r)
    assert meta_id == "notes-json"
    assert ids == ["notes", "notes-json", "slow"]


def test_s5_1_one_async_function_per_tool_and_frozen_meta(host: HostThread) -> None:
    code = (
        "import * as slow from '@codemode/servers/slow';\n"
        "const fns = Object.keys(slow).filter(k => k !== '__meta__');\n"
        "const asyncFns = fns.filter(k => slow[k].constructor.name === 'AsyncFunction');\n"
        "let replaced = true; try { slow.__meta__.serverId = 'x'; } catch (e) { replaced = false; }\n"
        "globalThis.__codemode_result__ = {fns: fns.sort(), asyncFns: asyncFns.length,"
        " frozen: Object.isFrozen(slow.__meta__) && Object.isFrozen(slow.__meta__.tools)"
        " && fns.every(k => Object.isFrozen(slow[k])), replaced,"
        " meta: slow.__meta__};"
    )
    result = assert_ok(host.run(code))
    tools = [
        "beep",
        "book_room",
        "cancelled_count",
        "echo",
        "env",
        "lines",
        "peak",
        "rpc_error",
        "sleep",
        "tick",
        "tool_error",
        "total",
    ]
    assert result["fns"] == tools and result["asyncFns"] == len(tools)
    assert result["frozen"] is True and result["replaced"] is False
    meta = result["meta"]
    assert meta["serverId"] == "slow" and isinstance(meta["serverName"], str)
    assert [t["toolName"] for t in meta["tools"]] == tools
    assert all(set(t) <= {"toolName", "exportName", "description"} for t in meta["tools"])


def test_s5_2_meta_maps_tool_names_to_export_names(host: HostThread) -> None:
    r = host.run(
        "import { __meta__ } from '@codemode/servers/notes';\nglobalThis.__codemode_result__ = __meta__.tools;"
    )
    names = {t["toolName"]: t["exportName"] for t in assert_ok(r)}
    assert names["export-csv"] == "export_csv" and names["tasks.add"] == "tasks_add"


def test_s5_3_1_no_argument_tool_accepts_nothing_and_empty_object(host: HostThread) -> None:
    r = host.run(
        "import { tick } from '@codemode/servers/slow';\n"
        "const a = await tick(); const b = await tick({});\n"
        "globalThis.__codemode_result__ = b.ticks - a.ticks;"
    )
    assert assert_ok(r) == 1


def test_s5_3_1_non_object_root_schema_takes_the_value_itself(host: HostThread) -> None:
    r = host.run(
        "import { total } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await total([1, 2, 3.5]);"
    )
    assert assert_ok(r) == {"total": 6.5, "count": 3}


def test_s5_3_2_rule1_structured_content_wins(host: HostThread) -> None:
    r = host.run(
        "import { sleep } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await sleep({ms: 1});"
    )
    assert assert_ok(r) == {"slept": 1}


def test_s5_3_2_rule2_single_text_block_is_the_string(host: HostThread) -> None:
    r = host.run(
        "import { book_room } from '@codemode/servers/slow';\n"
        "import { search_notes } from '@codemode/servers/notes';\n"
        "const a = await book_room({room: 'A1', minutes: 30});\n"
        "const b = await search_notes({query: 'milk'});\n"
        "globalThis.__codemode_result__ = [typeof a, typeof b, b];"
    )
    kind_a, kind_b, text = assert_ok(r)
    assert (kind_a, kind_b) == ("string", "string")
    assert text.startswith("[")  # JSON inside a text block stays a string by spec


def test_s5_3_2_json_unwrap_option_parses_json_text(host: HostThread) -> None:
    r = host.run(
        "import { search_notes, summary } from '@codemode/servers/notes-json';\n"
        "const hits = await search_notes({query: 'milk'});\n"
        "const prose = await summary();\n"
        "globalThis.__codemode_result__ = [Array.isArray(hits), hits[0].title, typeof prose];"
    )
    assert assert_ok(r) == [True, "Groceries", "string"]


def test_s5_3_2_rule3_audio_returns_full_result_with_base64(host: HostThread) -> None:
    r = host.run(
        "import { beep } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await beep();"
    )
    result = assert_ok(r)
    audio = [b for b in result["content"] if b["type"] == "audio"]
    assert audio and base64.b64decode(audio[0]["data"])[:4] == b"RIFF"
    assert any(b["type"] == "text" for b in result["content"])


def test_s5_3_2_rule3_image_returns_full_result_with_base64(host: HostThread) -> None:
    r = host.run(
        "import { render_chart } from '@codemode/servers/notes';\nglobalThis.__codemode_result__ = await render_chart();"
    )
    result = assert_ok(r)
    image = [b for b in result["content"] if b["type"] == "image"]
    assert image and base64.b64decode(image[0]["data"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_s5_3_2_rule4_several_text_blocks_return_the_full_result(host: HostThread) -> None:
    r = host.run(
        "import { lines } from '@codemode/servers/slow';\nglobalThis.__codemode_result__ = await lines({count: 2});"
    )
    result = assert_ok(r)
    assert [b["type"] for b in result["content"]] == ["text", "text"]


def test_s10_one_script_composes_calls_across_servers(host: HostThread) -> None:
    r = host.run(
        "import { echo } from '@codemode/servers/slow';\n"
        "import { get_note } from '@codemode/servers/notes';\n"
        "const note = await get_note({id: 2});\n"
        "globalThis.__codemode_result__ = await echo({value: note.title});"
    )
    assert assert_ok(r) == {"value": "Groceries"}
    assert {t["serverId"] for t in r["toolTrace"]} == {"notes", "slow"}
