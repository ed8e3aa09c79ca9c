"""Recordings played back as an MCP server: `codemode-gen replay` and `run --replay`.

Agent scripts are tested against servers that need credentials, a network or state a CI runner
does not have. `record` already holds what those servers answered (fixtures/, committed), so a
replay server answers the same way, offline and deterministically, over the real MCP path: any
MCP client (and `.mcp.json`) can start it, and `run --replay` swaps every configured server for
one (`replay_configs`, runtime/host/replay_configs.py), so the sessions, bridge and sandbox a
script meets are the live ones.

What a replay server answers (docs/config.md, "codemode-gen replay"):

- `initialize`: the recorded serverInfo (name, version, title, description, websiteUrl, icons) and
  instructions. Capabilities: `tools` only, without listChanged, whatever the server declared:
  prompts and resources are not recorded, and the tool list never changes.
- `tools/list`: tools.json in one page. Sessions of the handshake era (protocol 2025-11-25 and
  before, the era of every recording) get it verbatim, fields the SDK does not know included
  (`build_server`); a 2026-07-28 session gets the SDK's typed rendering, without a definition
  its models refuse (noted on stderr).
- `tools/call`: the recorded result (verbatim, as above) whose input equals the call's arguments
  (`canonical_json`: sorted keys, no white space, integral numbers written as integers, so `1.0`
  is `1` as in JavaScript; missing arguments are `{}`). When a tool holds two lines with one input, the last
  (newest) wins. Anything else is an `isError` result saying why: an unknown tool, a tool with
  no recorded call, or an input with no recording, which names the closest recorded inputs
  (`closest`). Never a JSON-RPC error: a script sees a ToolCallError it can catch.
- Redaction: `record` replaced secrets by `<redacted:NAME>` in inputs and results. A recorded
  input that holds a placeholder matches only a call sending that very text (replay never knew
  the secret); a result is returned with its placeholders.
- Truncation: a result `record` cut (`"truncated"` on the line) is returned as recorded, its cut
  strings ending in record's marker, and stderr notes it; it is what the recording holds.
- Lone surrogates: a recorded string may hold one (`"\\ud800"` is valid JSON text). The Python
  MCP SDK neither writes nor reads one (pydantic refuses it; its writer failing on one ended the
  session), so it is served as U+FFFD, the character codemode-gen's own client makes of it when
  a live server sends it; a recorded input holding one matches a call sending U+FFFD there.
  Stderr notes it at start-up. Everything else is served as recorded.
- The recording is read by generator/fixtures.py (regular files only, no links, bounded, depth
  checked): a file it refuses makes the replay exit 2 with the reason before serving, and
  `run --replay` reports that server unavailable with it.

Layering: this module reads fixtures only through generator/fixtures.py and imports the MCP SDK
only where it serves, so `load_replay` (all the CLI checks before serving) stays fast.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import (
    TOOLS_FILE,
    FixtureSet,
    load_recorded,
    recorded_server_ids,
)
from codemode_gen.jsonio import canonical_json, without_lone_surrogates

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = [
    "MAX_CLOSEST",
    "Recording",
    "Replay",
    "build_server",
    "canonical_json",
    "closest_recordings",
    "has_recording",
    "load_replay",
    "serve_stdio",
]

# Recorded inputs a mismatch message names, closest first.
MAX_CLOSEST = 3
# Bounds one input (the call's or a recorded one) quoted in a message: inputs can be megabytes.
MAX_SHOWN_INPUT_CHARS = 300
# Bounds the edit distance work of ranking one recorded input: only this many leading characters
# of each canonical JSON are compared (quadratic: ~10 ms a pair at the cap, pure Python; most
# pairs are pruned or far shorter, see closest_recordings).
MAX_DISTANCE_CHARS = 256
# Bounds the tool names an "unknown tool" message lists.
MAX_TOOL_NAMES_SHOWN = 20
# Bounds one stderr line of the replay server (it goes to the client's log view).
MAX_LOG_LINE_CHARS = 500
# Marks a secret `record` replaced (generator/redact.py); such inputs only match literally.
_REDACTED_MARK = "<redacted:"


def _shown(text: str, limit: int = MAX_SHOWN_INPUT_CHARS) -> str:
    """`text` for a message: cut to `limit`, lone surrogates escaped (they cannot be sent)."""
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _log(text: str) -> None:
    line = _shown(" ".join(text.split()), MAX_LOG_LINE_CHARS)
    with contextlib.suppress(OSError, ValueError):
        print(f"codemode-gen replay: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Recording:
    """One recorded call of a tool (a line of its calls file)."""

    line: int  # 1-based line in the calls file (the order of `record`: oldest first)
    input: Any
    key: str  # canonical_json(input)
    result: dict[str, Any]
    truncated: bool  # record cut the result to max_result_bytes

    @property
    def redacted(self) -> bool:
        return _REDACTED_MARK in self.key


def _levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute: 1 each), two rows at a time."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _overlap(arguments: Any, recorded: Any) -> tuple[int, int]:
    """(top-level keys with an equal value, top-level keys in common) of two inputs."""
    same = shared = 0
    if isinstance(arguments, dict) and isinstance(recorded, dict):
        for name, value in arguments.items():
            if name in recorded:
                shared += 1
                same += canonical_json(value) == canonical_json(recorded[name])
    return same, shared


def closest_recordings(
    arguments: Any, recordings: list[Recording], limit: int = MAX_CLOSEST
) -> list[Recording]:
    """The `limit` recordings closest to `arguments`, closest first: most top-level keys with an
    equal value, then most top-level keys in common, then the smallest edit distance of the
    canonical JSON (first MAX_DISTANCE_CHARS characters), then the earliest line.

    Exact, but distances are computed only while they can still matter: candidates are visited
    best overlap first and, within one overlap, by the length difference of their texts (a lower
    bound of the distance), stopping once no later one can enter the result."""
    text = canonical_json(arguments)[:MAX_DISTANCE_CHARS]
    visits = []
    for recording in recordings:
        same, shared = _overlap(arguments, recording.input)
        bound = abs(len(text) - len(recording.key[:MAX_DISTANCE_CHARS]))
        visits.append(((-same, -shared), bound, recording.line, recording))
    visits.sort(key=lambda v: v[:3])
    ranked: list[tuple[tuple[int, int], int, int, Recording]] = []
    for overlap, bound, line, recording in visits:
        if len(ranked) >= limit:
            worst = ranked[limit - 1]
            if overlap > worst[0] or (overlap == worst[0] and bound > worst[1]):
                break  # every later candidate ranks below the current last one
        distance = _levenshtein(text, recording.key[:MAX_DISTANCE_CHARS])
        ranked.append((overlap, distance, line, recording))
        ranked.sort(key=lambda r: r[:3])
        del ranked[limit:]
    return [r[3] for r in ranked]


@dataclass
class Replay:
    """What one replay server answers, decided from its fixture set alone (no I/O, no MCP)."""

    server_id: str
    server_json: dict[str, Any]
    tools: list[dict[str, Any]]
    # tool name -> canonical input -> recording (the last line of an input wins)
    recordings: dict[str, dict[str, Recording]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # start-up notes for stderr
    told_truncated: set[tuple[str, str]] = field(
        default_factory=set, repr=False
    )  # (tool, input) noted once

    @classmethod
    def from_fixture_set(cls, fixture_set: FixtureSet) -> Replay:
        # what can be sent: lone surrogates as U+FFFD (see the module docstring)
        recorded = {
            "server": fixture_set.server_json,
            "tools": fixture_set.tools,
            "calls": fixture_set.calls,
        }
        sendable = without_lone_surrogates(recorded)
        recordings: dict[str, dict[str, Recording]] = {}
        for tool, lines in sendable["calls"].items():
            by_key: dict[str, Recording] = {}
            for line, record in enumerate(lines, 1):
                value = record.get("input", {})
                key = canonical_json(value)
                by_key.pop(key, None)  # re-inserted: the newest line of an input wins, in order
                by_key[key] = Recording(line, value, key, record["result"], "truncated" in record)
            recordings[tool] = by_key
        replay = cls(fixture_set.config_id, sendable["server"], list(sendable["tools"]), recordings)
        if sendable is not recorded:
            replay.notes.append(
                "the recording holds lone surrogates (\\ud800-style escapes, not Unicode text; the Python MCP SDK"
                " neither sends nor reads one): served as U+FFFD, as codemode-gen's client reads them from a live server"
            )
        listed = {tool["name"] for tool in replay.tools}
        unlisted = sorted(set(recordings) - listed)
        if unlisted:
            replay.notes.append(
                f"calls recorded for tools not in {TOOLS_FILE} are not served: "
                + ", ".join(_shown(repr(name), 80) for name in unlisted[:MAX_TOOL_NAMES_SHOWN])
            )
        return replay

    @property
    def calls_count(self) -> int:
        return sum(len(by_key) for by_key in self.recordings.values())

    def closest(self, tool: str, arguments: Any) -> list[Recording]:
        """The recorded inputs of `tool` closest to `arguments` (at most MAX_CLOSEST), best first."""
        return closest_recordings(arguments, list(self.recordings.get(tool, {}).values()))

    def call(self, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The CallToolResult (wire JSON) for a tools/call: the recording, or an isError saying
        why there is none."""
        args: Any = dict(arguments) if arguments is not None else {}
        if not any(t["name"] == tool for t in self.tools):
            names = [t["name"] for t in self.tools]
            shown = ", ".join(_shown(name, 80) for name in names[:MAX_TOOL_NAMES_SHOWN])
            more = (
                f" and {len(names) - MAX_TOOL_NAMES_SHOWN} more"
                if len(names) > MAX_TOOL_NAMES_SHOWN
                else ""
            )
            return _error(
                f"replay of '{self.server_id}': the recording has no tool {_shown(repr(tool), 80)} "
                f"(recorded tools: {shown or 'none'}{more})"
            )
        by_key = self.recordings.get(tool)
        if not by_key:
            return _error(
                f"replay of '{self.server_id}': tool {_shown(repr(tool), 80)} has no recorded call, so no "
                "input of it can be replayed. Record one: add a sample "
                f'{{"server": {_shown(json.dumps(self.server_id), 80)}, "tool": {_shown(json.dumps(tool), 80)},'
                ' "input": {...}} ([[samples]] in codemode.toml or --samples FILE) and run'
                f" `codemode-gen record --server {self.server_id}`"
            )
        key = canonical_json(args)
        found = by_key.get(key)
        if found is not None:
            if found.truncated and (tool, key) not in self.told_truncated:
                self.told_truncated.add((tool, key))
                _log(
                    f"{tool} {_shown(key, 120)}: replaying a result record cut to max_result_bytes "
                    "(its long strings end in the cut marker)"
                )
            return copy.deepcopy(found.result)
        lines = [
            f"replay of '{self.server_id}': no recorded call of {_shown(repr(tool), 80)} has this input: {_shown(key)}",
            f"closest recorded inputs ({min(len(by_key), MAX_CLOSEST)} of {len(by_key)}):",
        ]
        for recording in self.closest(tool, args):
            note = (
                " (redacted when recorded: matches only this exact text)"
                if recording.redacted
                else ""
            )
            lines.append(f"  {_shown(recording.key)}{note}")
        lines.append(
            f"Replay answers only recorded inputs (same JSON, key order aside). Send one of these, or record "
            f"this input (a sample in codemode.toml or --samples, then `codemode-gen record --server {self.server_id}`)."
        )
        return _error("\n".join(lines))


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


# --------------------------------------------------------------------------- loading


def has_recording(fixtures_dir: Path, server_id: str) -> bool:
    """Whether `fixtures_dir` holds a recording (a folder) of `server_id`."""
    return server_id in recorded_server_ids(fixtures_dir)


def load_replay(fixtures_dir: Path, server_id: str) -> Replay:
    """The replay of `server_id` from `fixtures_dir`; every problem is a UserError naming the
    folder or file and the fix (the CLI exits 2 with it before serving)."""
    if (
        not server_id
        or server_id in (".", "..")
        or any(c in server_id for c in "/\\\0")
        or server_id.startswith(".")
    ):
        raise UserError(
            f"--server {server_id!r}: not a server id",
            hint="pass the .mcp.json key of a recorded server, e.g. --server notes",
        )
    hint = f"run `codemode-gen record --server {server_id}` again"
    try:  # every format problem is the reader's UserError, naming the file (and line)
        fixture_set = load_recorded(fixtures_dir, [server_id])[server_id]
    except OSError as exc:
        where = exc.filename or fixtures_dir / server_id
        raise UserError(f"{where}: cannot read recording: {exc.strerror}", hint=hint) from None
    if fixture_set is None:
        recorded = recorded_server_ids(fixtures_dir)
        raise UserError(
            f"{fixtures_dir / server_id}: no recording of server '{server_id}' in {fixtures_dir}"
            f" (recorded: {', '.join(recorded) or 'none'})",
            hint=f"run `codemode-gen record --server {server_id}`, or pass the id of a recorded server",
        )
    return Replay.from_fixture_set(fixture_set)


# --------------------------------------------------------------------------- serving


def _server_identity(replay: Replay) -> dict[str, Any]:
    """Server(...) keyword arguments from the recorded serverInfo and instructions; a field the
    SDK refuses is left out (with a note), never fatal."""
    import mcp_types as types
    from pydantic import ValidationError

    info = replay.server_json.get("serverInfo")
    info = dict(info) if isinstance(info, dict) else {}
    info["name"] = (
        info.get("name")
        if isinstance(info.get("name"), str) and info.get("name")
        else replay.server_id
    )
    info["version"] = info.get("version") if isinstance(info.get("version"), str) else ""
    try:
        impl = types.Implementation.model_validate(info, by_name=False)
    except ValidationError:
        replay.notes.append(
            "the recorded serverInfo has fields the MCP SDK refuses; serving its name and version only"
        )
        impl = types.Implementation(name=info["name"], version=info["version"])
    instructions = replay.server_json.get("instructions")
    return {
        "name": impl.name,
        "version": impl.version,
        "title": impl.title,
        "description": impl.description,
        "website_url": impl.website_url,
        "icons": impl.icons,
        "instructions": instructions if isinstance(instructions, str) else None,
    }


def _sendable(method: str, version: str, data: dict[str, Any]) -> str | None:
    """Why the SDK would refuse to send `data` as the result of `method` at protocol `version`
    (its typed model, then that version's schema), or None when it sends it."""
    import mcp_types as types
    from mcp_types.methods import serialize_server_result
    from pydantic import ValidationError

    model = types.ListToolsResult if method == "tools/list" else types.CallToolResult
    try:
        dumped = model.model_validate(data, by_name=False).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        serialize_server_result(method, version, dumped)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"{'/'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg')}"
    except (
        KeyError,
        ValueError,
    ) as exc:  # a version the SDK does not know: it answers the error itself
        return f"protocol {version}: {exc}"
    return None


def build_server(replay: Replay) -> Server[Any]:
    """The SDK's low-level MCP server answering from `replay` (any transport can run it).

    The SDK re-validates every answer and drops what its models do not know (a custom
    annotation hint, a field of a newer spec), and refuses a definition a lenient client had
    recorded. A replay must answer what was recorded, byte for byte, or the runtime would see a
    changed tool where there is none. So the handlers answer through the SDK (validation of the
    request, the handshake gate, errors, the 2026-07-28 envelope) with what it accepts, and for a
    handshake-era session, the era every recording comes from, the `verbatim` middleware then
    puts the recorded JSON itself in the response.
    """
    import mcp_types as types
    from mcp.server import Server
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    recorded_tools = {"tools": replay.tools}
    tool_lists: dict[str, types.ListToolsResult] = {}  # protocol version -> the tools the SDK sends
    # request id -> the recorded answer `verbatim` substitutes for the SDK's (set by a handler)
    answers: dict[Any, dict[str, Any]] = {}

    def tool_list(version: str) -> types.ListToolsResult:
        if version not in tool_lists:
            kept = []
            for tool in replay.tools:
                problem = _sendable("tools/list", version, {"tools": [tool]})
                if problem is None:
                    kept.append(tool)
                else:
                    era = (
                        "to 2026-07-28 clients"
                        if version in MODERN_PROTOCOL_VERSIONS
                        else "verbatim only"
                    )
                    _log(
                        f"tool {_shown(repr(tool['name']), 80)} breaks the MCP schema of protocol {version}"
                        f" ({problem}): served {era}"
                    )
            tool_lists[version] = types.ListToolsResult.model_validate(
                {"tools": kept}, by_name=False
            )
        return tool_lists[version].model_copy(deep=True)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        answers[ctx.request_id] = recorded_tools
        return tool_list(ctx.protocol_version)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = replay.call(params.name, params.arguments)
        answers[ctx.request_id] = result
        problem = _sendable("tools/call", ctx.protocol_version, result)
        if problem is None:
            return types.CallToolResult.model_validate(result, by_name=False)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            _log(
                f"{params.name}: the recorded result breaks the MCP schema of protocol {ctx.protocol_version} ({problem})"
            )
        # what the SDK sends in its place: a handshake-era session gets the recording instead
        return types.CallToolResult(
            content=[
                types.TextContent(
                    type="text",
                    text=(
                        f"replay of '{replay.server_id}': the recorded result of {_shown(repr(params.name), 80)} for this "
                        f"input breaks the MCP schema of protocol {ctx.protocol_version} ({problem}), so it is only replayed "
                        "to handshake-era clients (protocol 2025-11-25 and before)"
                    ),
                )
            ],
            is_error=True,
        )

    async def verbatim(ctx: Any, call_next: Any) -> Any:
        """Innermost middleware: after the SDK answered, a handshake-era session gets the
        recorded JSON instead of the SDK's re-serialisation of it."""
        try:
            result = await call_next(ctx)
            recorded = answers.get(ctx.request_id)
            if recorded is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                return copy.deepcopy(recorded)
            return result
        finally:
            if ctx.request_id is not None:
                answers.pop(ctx.request_id, None)

    server: Server[Any] = Server(
        **_server_identity(replay), on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.middleware.append(verbatim)
    return server


async def serve_stdio(replay: Replay) -> None:
    """Serve `replay` over stdio until the client closes stdin."""
    from mcp.server import NotificationOptions
    from mcp.server.stdio import stdio_server

    server = build_server(replay)
    for note in replay.notes:
        _log(note)
    _log(
        f"serving '{replay.server_id}': {len(replay.tools)} tools, {replay.calls_count} recorded inputs"
    )
    async with stdio_server() as (read, write):
        # No listChanged: a recording never changes while it is served.
        await server.run(read, write, server.create_initialization_options(NotificationOptions()))
