"""`codemode-gen record`: connect to servers and write their fixtures.

Per server: initialize result -> server.json, every tools/list page -> tools.json, and the
sample calls -> calls/<tool>.jsonl. Only calls the user asked for (`--samples`, `[[samples]]`)
are made, plus probes of tools that declare `readOnlyHint: true`: one `{}` call of each that has
no required arguments, then one call of each whose required arguments can all be filled
(`fill_input`) from its schema (`examples`, `default`, `const`, the first of an `enum`) or from
what other tools of the server were called with and returned, in this run or recorded before
(a `repo_path` another tool took, an `id` a list returned), up to MAX_PROBE_ROUNDS rounds, so
that a chain such as list_notes → get_note is probed. A tool that already has a successful
recorded call, or a sample in this run, is not probed again; nothing else is ever called.

Safety properties:
- re-recording is idempotent: a call with the same (redacted) input replaces its earlier
  line, other lines stay, at most `max_samples` lines a tool (newest kept);
- a server is written only after it finished, as a whole folder swap
  (`fixtures.write_server_fixtures`), so a crash, timeout or Ctrl-C leaves its old fixtures;
- secrets (`Redactor.for_server`: env/header values, every value taken from an environment
  variable, url credentials, extra patterns) are redacted before writing, and from every line
  printed about the server;
- servers are recorded concurrently and independently: one failing server is reported and
  the others are still written;
- a fixtures path that cannot be written is refused before any server is started.

Failure levels: a *server* failure (cannot connect, tools/list fails, connection lost) writes
nothing for that server; a failed *sample* (unknown tool; an input its inputSchema rejects,
which is never sent; JSON-RPC error, timeout; a tool error, `isError`; a result that breaks
the declared outputSchema) is reported, is not recorded and makes the run fail, but the
server's other recordings are written. A sample may expect a failure (`expect = "error"` or
`"drift"`): it is then recorded as what it is. A failed *probe* is only a warning, since
nobody asked for it (best-effort), and is not recorded either.

Hostile servers (spec §11: server responses are untrusted input):
- a result is kept only if it is JSON (`json_problem`: no NaN/Infinity, no nesting past
  MAX_RECORDED_DEPTH); otherwise that call fails with the reason, the rest stays. A lone
  surrogate (`"\\ud800"`, valid JSON text) is kept: fixtures.py writes it as that escape;
- a result larger than `max_result_bytes` (codemode.toml) is cut (`cap_result`): long strings
  end in TRUNCATION_MARK, long arrays lose their tail, the line gets a `"truncated"` field and
  the report a warning; inference skips such lines;
- a tool definition that is not JSON is left out of tools.json with a warning;
- tool names become calls file names only through `fixtures.calls_file_names`, and reach the
  report only through `shown` (no control characters, bounded).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from codemode_gen import dirswap
from codemode_gen.client.session_errors import (
    CallError,
    CallTimeout,
    ConnectError,
)
from codemode_gen.client.sessions import SessionManager
from codemode_gen.codemode_toml import parse_sample
from codemode_gen.config import Sample, ServerConfig, Settings
from codemode_gen.errors import UserError
from codemode_gen.generator.fixtures import SERVER_FILE, load_fixture_set, write_server_fixtures
from codemode_gen.generator.output_schema import schema_mismatches
from codemode_gen.generator.redact import Redactor
from codemode_gen.generator.unwrap import UnwrapMode, parse_json_text, unwrap_result
from codemode_gen.jsonio import iter_jsonl, pointer_token

__all__ = [
    "Sample",
    "ServerOutcome",
    "StatusFn",
    "cap_result",
    "check_fixtures_dir",
    "fill_input",
    "input_key",
    "json_problem",
    "load_samples_file",
    "merge_calls",
    "probe_input",
    "record_servers",
    "recordable_tools",
    "shown",
]

StatusFn = Callable[[str, str], None]  # (server_id, short status text)

# Bounds a --samples file read fully into memory (a wrong path to a huge log file).
MAX_SAMPLES_FILE_BYTES = 50 * 1024 * 1024
# Bounds the nesting of a result or tool definition `record` keeps: the redactor, json.dumps
# and generate's readers recurse per level, and a few hundred levels from a hostile server
# would end in RecursionError (a traceback) instead of a clear error for that call or tool.
MAX_RECORDED_DEPTH = 200
# Shortest string `cap_result` cuts: type tags, ids and MIME types stay whole, so a cut result
# keeps its shape (content block kinds) for inference and readers.
MIN_CUT_STRING_CHARS = 64
# Bounds the serialisations `cap_result` spends lowering the string length (each one is at
# most the size of the result); halving alone reaches MIN_CUT_STRING_CHARS in under 20.
MAX_CUT_ROUNDS = 24
# Array lengths `cap_result` tries, after cutting strings alone was not enough (a result of a
# million small items); an array keeps its first N items.
CUT_ARRAY_ITEMS = (1024, 256, 64, 16, 4, 1)
# Appended to a string `cap_result` cut: visible to anyone reading the fixture or the types.
TRUNCATION_MARK = " [... cut by codemode-gen record: {total} characters in all]"
# Bounds how much of a server-chosen name (a 300-character tool name) one report line quotes.
MAX_SHOWN_CHARS = 80
# Bounds the schema mismatches one failed-sample line lists (an input wrong in 50 places).
MAX_LISTED_MISMATCHES = 3
# Rounds of probes with filled arguments: each may use what the previous one returned (list →
# get → its details); a server cannot keep `record` calling without end.
MAX_PROBE_ROUNDS = 2
# Values (nodes) of one recorded input or result searched for argument values: a huge result
# cannot make planning slow; the rest of it is not searched.
MAX_FILL_NODES = 20_000
# Deepest level of a result searched for argument values.
MAX_FILL_DEPTH = 8
# How a redacted value starts (generator/redact.py `marker`): never sent as a probe argument.
REDACTION_MARK = "<redacted:"


@dataclass
class ServerOutcome:
    """What happened to one server; `error` set means nothing was written for it."""

    server_id: str
    error: str | None = None
    tools: int = 0
    calls: int = 0
    failed_samples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # something was kept only in part or left out (cut results, non-JSON probes or tools)
    warnings: list[str] = field(default_factory=list)
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed_samples


# --------------------------------------------------------------------------- samples


def load_samples_file(path: Path) -> list[Sample]:
    """A JSON list (or JSONL, one object a line) of {"server", "tool", "input"}."""
    try:
        if path.stat().st_size > MAX_SAMPLES_FILE_BYTES:
            raise UserError(f"{path}: samples file is larger than {MAX_SAMPLES_FILE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: samples file not found", hint="check the --samples path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read samples file: {exc}") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
        lines = True
    else:
        lines = False
    if not lines:
        if isinstance(whole, list):
            return [parse_sample(item, f"{path}: [{i}]") for i, item in enumerate(whole)]
        if isinstance(whole, dict):  # JSONL with a single line
            return [parse_sample(whole, f"{path}:1")]
        raise UserError(
            f"{path}: expected a JSON list of samples or JSONL (one sample object a line)",
            hint='for example [{"server": "notes", "tool": "search_notes", "input": {"query": "milk"}}]',
        )
    hint = "a samples file is one JSON list, or one JSON object per line (JSONL)"
    return [
        parse_sample(item, f"{path}:{lineno}")
        for lineno, item in iter_jsonl(text, path, what="samples file", hint=hint)
    ]


def probe_input(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{}` if the tool may be called unasked (readOnlyHint and no required args), else None."""
    annotations = tool.get("annotations")
    if not isinstance(annotations, dict) or annotations.get("readOnlyHint") is not True:
        return None
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return None  # cannot tell what it requires: do not guess
    required = schema.get("required", [])
    if required not in (None, []) and required != ():
        return None
    return {}


def _key_name(name: str) -> str:
    """`repo_path`, `repoPath` and `RepoPath` are one name."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _schema_value(prop: Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, a value the property's own schema offers), first of: `examples`, `default`,
    `const`, the first `enum` value."""
    examples = prop.get("examples")
    if isinstance(examples, list) and examples:
        return True, examples[0]
    for key in ("default", "const"):
        if key in prop:
            return True, prop[key]
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return True, enum[0]
    return False, None


def _found_values(name: str, sources: Sequence[tuple[str, Any, Any]], tool_name: str) -> list[Any]:
    """Values for argument `name`, in a fixed order: what another tool was called with under
    that name, then what another tool returned under that name, or as `id` when the argument
    is `<thing>Id`/`<thing>_id` and the tool that returned it names the thing (`noteId` from
    `list_notes`). Results are searched in JSON text too (a string holding JSON)."""
    wanted = _key_name(name)
    thing = wanted[:-2] if wanted.endswith("id") and len(wanted) > 2 else None
    from_inputs: list[Any] = []
    from_results: list[Any] = []
    for source, args, value in sources:
        if source == tool_name:
            continue
        if isinstance(args, dict):
            from_inputs += [v for k, v in args.items() if isinstance(k, str) and _key_name(k) == wanted]
        owner = _key_name(source)
        stack: list[tuple[Any, int]] = [(value, 0)]
        budget = MAX_FILL_NODES
        while stack and budget > 0:
            node, depth = stack.pop(0)
            budget -= 1
            if isinstance(node, str) and depth == 0 and node[:1] in "[{":
                ok, parsed = parse_json_text(node)
                if ok:
                    stack.append((parsed, 1))
            elif isinstance(node, dict) and depth < MAX_FILL_DEPTH:
                for k, v in node.items():
                    key = _key_name(k) if isinstance(k, str) else ""
                    if key == wanted or (thing and key == "id" and thing in owner):
                        from_results.append(v)
                    stack.append((v, depth + 1))
            elif isinstance(node, list) and depth < MAX_FILL_DEPTH:
                stack.extend((v, depth + 1) for v in node)
    return from_inputs + from_results


def fill_input(tool: Mapping[str, Any], sources: Sequence[tuple[str, Any, Any]]) -> dict[str, Any] | None:
    """An input for a read-only tool's probe with every required argument filled (module
    docstring), or None: not read-only, nothing required (the `{}` probe's case), an argument
    nothing fills, or an input its inputSchema rejects. `sources`: (tool name, input, the
    unwrapped result) of the server's successful calls, in a fixed order. Deterministic: the
    same tools and sources give the same input."""
    annotations = tool.get("annotations")
    schema = tool.get("inputSchema")
    if not isinstance(annotations, dict) or annotations.get("readOnlyHint") is not True or not isinstance(schema, dict):
        return None
    required = schema.get("required")
    props = schema.get("properties")
    if not isinstance(required, list) or not required or not isinstance(props, dict):
        return None
    filled: dict[str, Any] = {}
    for name in required:
        prop = props.get(name) if isinstance(name, str) else None
        if not isinstance(prop, dict):
            return None
        found, value = _schema_value(prop)
        candidates = [value] if found else []
        candidates += _found_values(name, sources, str(tool.get("name")))
        for candidate in candidates:
            if REDACTION_MARK in json.dumps(candidate, default=str):
                continue  # a recorded secret's placeholder is no value to send
            if json_problem(candidate) is None and not schema_mismatches(prop, candidate)[0]:
                filled[name] = candidate
                break
        else:
            return None
    mismatches, unusable = schema_mismatches(schema, filled)
    return filled if not mismatches and unusable is None else None


def input_key(value: Any) -> str:
    """The identity of a call's input: calls with equal keys are one recorded line
    (`merge_calls`, probes, runtime/host/learn.py's in-session samples). Exact JSON, so unlike
    replay's `canonical_json` an input sending 1.0 stays apart from one sending 1 (a server
    may tell them apart). `default=str`: a key never raises on a call's path."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def merge_calls(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], max_samples: int
) -> list[dict[str, Any]]:
    """Old lines stay; a new call replaces an old one with the same input; newest N kept.

    A new call whose result equals the old line's result keeps the old line untouched (its
    recordedAt/durationMs too), so re-recording an unchanged server changes no byte of the
    committed fixtures and does not make `generate --check` stale.
    """
    merged: dict[str, dict[str, Any]] = {}
    for record in old:
        key = input_key(record.get("input"))
        merged.pop(key, None)
        merged[key] = dict(record)
    for record in new:
        key = input_key(record.get("input"))
        previous = merged.get(key)
        if previous is not None and previous.get("result") == record.get("result"):
            continue
        merged.pop(key, None)  # re-inserting moves it to the end: it is the newest
        merged[key] = dict(record)
    records = list(merged.values())
    return records[-max_samples:] if max_samples > 0 else []


# --------------------------------------------------------------------------- untrusted values


def shown(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """A server-chosen string for one report line: printable, bounded, never a terminal escape."""
    out: list[str] = []
    for ch in text[: limit + 1]:
        if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape", "backslashreplace").decode("ascii"))
    result = "".join(out)
    return result if len(text) <= limit else result[:limit] + "…"


def json_problem(value: Any, *, max_depth: int = MAX_RECORDED_DEPTH, text_only: bool = True) -> str | None:
    """Why `value` (decoded from a server's JSON) cannot be written as JSON, or None.

    Catches what Python's JSON decoder lets through: NaN/Infinity (RFC 8259 has no such
    numbers), nesting deeper than `max_depth`, and with `text_only` lone surrogates (JSON text
    may escape one, but it is not Unicode: tool definitions and initialize results become
    generated code and must be text; a recorded result may hold one, written escaped).
    Iterative, so it cannot itself overflow the stack.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, ptr, depth = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                return f"{node!r} (not a JSON number) at {shown(ptr or '/')}"
        elif isinstance(node, str):
            if text_only and _lone_surrogate(node):
                return f"a lone surrogate (not Unicode text) in the string at {shown(ptr or '/')}"
        elif isinstance(node, dict | list):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels at {shown(ptr or '/')}"
            if isinstance(node, dict):
                for key, item in node.items():
                    if not isinstance(key, str) or (text_only and _lone_surrogate(key)):
                        return f"a key that is not Unicode text in the object at {shown(ptr or '/')}"
                    stack.append((item, f"{ptr}/{pointer_token(key)}", depth + 1))
            else:
                stack.extend((item, f"{ptr}/{i}", depth + 1) for i, item in enumerate(node))
        elif node is not None and not isinstance(node, bool | int):
            return f"a {type(node).__name__} value at {shown(ptr or '/')}"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> bool:
    # json.loads joins escaped surrogate pairs into one code point: any surrogate left is lone.
    return _SURROGATE.search(text) is not None


def _json_bytes(value: Any) -> int:
    line = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return len(line.encode("utf-8", "surrogatepass"))


def _cut(value: Any, max_chars: int, max_items: int | None) -> Any:
    """A copy with strings over max_chars cut (and marked) and arrays over max_items cut."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return value
        return value[:max_chars] + TRUNCATION_MARK.format(total=len(value))
    if isinstance(value, dict):
        return {key: _cut(item, max_chars, max_items) for key, item in value.items()}
    if isinstance(value, list):
        items = value if max_items is None else value[:max_items]
        return [_cut(item, max_chars, max_items) for item in items]
    return value


def cap_result(result: Any, max_bytes: int) -> tuple[Any, int | None]:
    """(what to keep of `result`, its original size in bytes if it was cut, else None).

    Strings are cut first, all to one length (so no single one eats the budget): from
    max_bytes characters, lowered by the excess while that is small (one huge text ends just
    under the cap) and halved otherwise, down to MIN_CUT_STRING_CHARS. If that is not enough,
    arrays are cut to their first CUT_ARRAY_ITEMS items. Returns (None, size) when nothing
    that small keeps the shape (the call is then not recorded). `result` must pass
    `json_problem` (its depth is bounded, so the recursive copy is safe).
    """
    size = _json_bytes(result)
    if size <= max_bytes:
        return result, None
    limit = max_bytes
    for _ in range(MAX_CUT_ROUNDS):
        kept = _cut(result, limit, None)
        excess = _json_bytes(kept) - max_bytes
        if excess <= 0:
            return kept, size
        if limit <= MIN_CUT_STRING_CHARS:
            break
        # every cut string loses `excess` more characters, i.e. at least `excess` bytes
        limit = max(limit - excess if excess < limit // 2 else limit // 2, MIN_CUT_STRING_CHARS)
    for items in CUT_ARRAY_ITEMS:
        kept = _cut(result, MIN_CUT_STRING_CHARS, items)
        if _json_bytes(kept) <= max_bytes:
            return kept, size
    return None, size


# --------------------------------------------------------------------------- recording


def recordable_tools(listed: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the tools `record` keeps of a tools/list, a warning for each one left out).

    A definition that is not JSON (`json_problem`) is left out. Shared with `record --check`
    (generator/record_check.py), so the live list it compares is the one `record` would write.
    """
    tools: list[dict[str, Any]] = []
    warnings: list[str] = []
    for tool in listed:
        problem = json_problem(tool)
        if problem is None:
            tools.append(tool)
        else:
            name = tool.get("name")
            label = shown(name) if isinstance(name, str) else "a tool"
            warnings.append(f"tool {label} left out: its definition is not valid JSON: {problem}")
    return tools, warnings


def recorded_call(
    args: Any, result: Any, duration_ms: int, redactor: Redactor, max_result_bytes: int
) -> tuple[dict[str, Any] | None, str | None]:
    """One calls-file line for a successful call (input and result redacted, the result cut to
    `max_result_bytes`), and a note: why there is no line, or that the result was cut. Shared
    by `record` and live recording (`run --record`, `serve --record`): the same format, the same
    redaction, the same bounds."""
    problem = json_problem(result, text_only=False)  # any JSON value round-trips (fixtures.py)
    if problem is not None:
        return None, f"result is not valid JSON: {problem}"
    kept, cut_from = cap_result(redactor.value(result), max_result_bytes)
    if kept is None:
        return None, (
            f"result of {cut_from:,} bytes cannot be cut below max_result_bytes"
            f" ({max_result_bytes:,}) and keep its shape"
        )
    record: dict[str, Any] = {
        "input": redactor.value(args),
        "result": kept,
        "durationMs": duration_ms,
        "recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if cut_from is None:
        return record, None
    kept_bytes = _json_bytes(kept)
    record["truncated"] = {"originalBytes": cut_from, "keptBytes": kept_bytes}
    return record, (
        f"result of {cut_from:,} bytes cut to {kept_bytes:,} (max_result_bytes = {max_result_bytes:,});"
        " the recorded line is marked \"truncated\""
    )


def check_fixtures_dir(path: Path) -> None:
    """Refuse a fixtures folder that cannot be written, before any server is started or called.

    `record` (and `run --record`) writes only after every call was made: a path that is a
    regular file, or in a folder we may not write, would otherwise cost a call of every sample
    of every server and then fail each of them. The folder itself need not exist yet: the
    nearest existing folder above it must then be writable (it is created when written)."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    hint = "pass --fixtures with a folder you can write, or fix `fixtures` in codemode.toml"
    if not existing.is_dir():
        what = "is not a folder" if existing == path else f"cannot be created: {existing} is not a folder"
        raise UserError(f"{path}: the fixtures path {what}", hint=hint)
    try:
        handle, name = tempfile.mkstemp(prefix=".codemode-write-check-", dir=existing)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        where = "" if existing == path else f" ({existing}, where it would be created)"
        raise UserError(f"{path}: cannot write the fixtures folder{where}: {exc.strerror or exc}", hint=hint) from None


class _ServerFailed(Exception):
    pass


@dataclass(frozen=True)
class _Planned:
    """One call `record` makes: a sample the user asked for, or an auto-probe (sample None)."""

    tool: str
    input: Any
    sample: Sample | None


async def record_servers(
    configs: Mapping[str, ServerConfig],
    settings: Settings,
    *,
    fixtures_dir: Path,
    samples: Iterable[Sample] = (),
    probe: bool = True,
    max_samples: int | None = None,
    log_dir: Path | None = None,
    status: StatusFn = lambda sid, text: None,
) -> list[ServerOutcome]:
    """Record every server in `configs` concurrently; returns one outcome each, in order.

    Raises UserError, before any server is started, when `fixtures_dir` cannot be written."""
    check_fixtures_dir(fixtures_dir)
    limit = max_samples if max_samples is not None else settings.max_samples
    by_server: dict[str, list[Sample]] = {sid: [] for sid in configs}
    for sample in samples:
        if sample.server in by_server:
            by_server[sample.server].append(sample)
    outcomes = {sid: ServerOutcome(sid) for sid in configs}
    async with SessionManager(configs, log_dir=log_dir) as manager, anyio.create_task_group() as tg:
        for sid, config in configs.items():
            tg.start_soon(
                _record_one,
                manager,
                config,
                settings,
                by_server[sid],
                probe,
                limit,
                fixtures_dir,
                outcomes[sid],
                status,
            )
    return [outcomes[sid] for sid in configs]


async def _record_one(
    manager: SessionManager,
    config: ServerConfig,
    settings: Settings,
    samples: list[Sample],
    probe: bool,
    max_samples: int,
    fixtures_dir: Path,
    outcome: ServerOutcome,
    status: StatusFn,
) -> None:
    sid = config.id
    outcome.log_path = manager.log_path(sid)
    redactor = Redactor.for_server(config, settings.redact_patterns)

    def say(text: str) -> None:  # what we print is redacted like what we write
        status(sid, redactor.text(text))

    try:
        say("connecting")
        try:
            session = await manager.get(sid)
        except ConnectError as exc:
            outcome.log_path = exc.log_path or outcome.log_path
            raise _ServerFailed(exc.reason) from None
        server_problem = json_problem(session.server_json)
        if server_problem is not None:
            raise _ServerFailed(f"its initialize result is not valid JSON: {server_problem}")
        listed = await session.list_tools()
        for warning in session.warnings:
            outcome.notes.append(warning)
        tools, left_out = recordable_tools(listed)
        outcome.warnings.extend(left_out)
        by_name = {t["name"]: t for t in tools}

        planned = _plan_samples(samples, by_name, outcome)
        if probe:
            asked = {(s.tool, input_key(s.input)) for s in samples}
            for tool in tools:
                name = tool["name"]
                args = probe_input(tool)
                if args is None or name in config.blocklist or (name, input_key(args)) in asked:
                    continue
                planned.append(_Planned(name, args, None))

        # What fills a read-only tool's required arguments (fill_input): the server's recorded
        # calls, then this run's, in order.
        recorded = _quiet_old_calls(fixtures_dir / sid)
        sources: list[tuple[str, Any, Any]] = [
            (name, line.get("input"), unwrap_result(line["result"], config.unwrap))
            for name in sorted(recorded)
            for line in recorded[name]
            if _usable(line)
        ]
        new_calls: dict[str, list[dict[str, Any]]] = {}

        async def make(calls: list[_Planned], label: str = "") -> None:
            for index, call in enumerate(calls, start=1):
                say(f"calling {shown(call.tool)} ({index}/{len(calls)}{label})")
                started = time.perf_counter()
                try:
                    result = await session.call_tool(call.tool, call.input)
                except CallTimeout as exc:
                    _call_failed(outcome, call, exc.message)
                    continue
                except CallError as exc:
                    if session.closed:
                        raise _ServerFailed(
                            f"connection lost while calling {shown(call.tool)}: {exc.message}"
                        ) from None
                    _call_failed(outcome, call, f"protocol error: {exc}")
                    continue
                duration = round((time.perf_counter() - started) * 1000)
                record, problem = recorded_call(call.input, result, duration, redactor, settings.max_result_bytes)
                if record is None:
                    _call_failed(outcome, call, problem or "not recordable")
                    continue
                failure = _result_failure(by_name[call.tool], call, result, record, config.unwrap, outcome)
                if failure is not None:
                    _call_failed(outcome, call, failure)
                    continue
                if problem is not None:
                    outcome.warnings.append(f"{_label(call.tool, call.input)}: {problem}")
                new_calls.setdefault(call.tool, []).append(record)
                if _usable(record):
                    sources.append((call.tool, call.input, unwrap_result(result, config.unwrap)))

        await make(planned)
        if probe:
            # Each read-only tool once: not one that was just called or has a good recording.
            done = {call.tool for call in planned} | {name for name, lines in recorded.items() if any(map(_usable, lines))}
            for round_ in range(1, MAX_PROBE_ROUNDS + 1):
                batch = []
                for tool in tools:
                    name = tool["name"]
                    if name in done or name in config.blocklist:
                        continue
                    args = fill_input(tool, sources)
                    if args is not None:
                        batch.append(_Planned(name, args, None))
                        done.add(name)
                if not batch:
                    break
                outcome.notes.append(
                    f"probed with arguments filled from schemas and other calls (round {round_}): "
                    + ", ".join(f"{_label(c.tool, c.input)}" for c in batch)
                )
                await make(batch, f", probes with filled arguments, round {round_}")

        say("writing fixtures")
        # Read, merge and write under the fixtures folder's lock: a `serve --record` or another
        # `record` flushing this server meanwhile must not lose its calls or ours.
        with dirswap.locked(fixtures_dir):
            # An interrupted earlier record may have left the previous recording hidden: restore
            # it before reading the calls it holds, so they are merged, not lost.
            outcome.notes.extend(dirswap.recover(fixtures_dir / sid))
            old_calls = _old_calls(fixtures_dir / sid, outcome)
            calls: dict[str, list[dict[str, Any]]] = {}
            for name in by_name:
                merged = merge_calls(old_calls.get(name, []), new_calls.get(name, []), max_samples)
                if merged:
                    calls[name] = merged
            dropped = sorted(set(old_calls) - set(by_name))
            if dropped:
                outcome.notes.append(
                    "dropped recorded calls of tools no longer listed: "
                    + ", ".join(shown(name) for name in dropped)
                )
            outcome.notes.extend(
                write_server_fixtures(
                    fixtures_dir,
                    sid,
                    redactor.value(session.server_json),
                    [redactor.value(t) for t in tools],
                    calls,
                )
            )
        outcome.tools = len(tools)
        outcome.calls = sum(len(v) for v in new_calls.values())
        say(_summary(outcome))
    except _ServerFailed as exc:
        outcome.error = str(exc)
    except CallError as exc:  # tools/list failed after connecting
        outcome.error = f"tools/list failed: {exc}"
    except UserError as exc:  # e.g. fixtures dir not writable
        outcome.error = exc.message
    except OSError as exc:
        outcome.error = f"cannot write fixtures: {exc}"
    finally:
        _redact_outcome(outcome, redactor)
    if outcome.error is not None:
        status(sid, f"failed: {outcome.error}")


def _plan_samples(
    samples: list[Sample], by_name: Mapping[str, dict[str, Any]], outcome: ServerOutcome
) -> list[_Planned]:
    """The samples that may be sent. Checked before any call: the tool is listed, the input is
    JSON and the tool's inputSchema accepts it (a rejected input is a failed sample, never sent,
    unless the sample expects an error: then the server's answer to it is what is recorded)."""
    planned: list[_Planned] = []
    for sample in samples:
        tool = by_name.get(sample.tool)
        if tool is None:
            _sample_failed(outcome, sample, "the server lists no such tool")
            continue
        problem = json_problem(sample.input)  # a samples file may hold "\ud800" escapes
        if problem is not None:
            _sample_failed(outcome, sample, f"its input is not valid JSON: {problem}")
            continue
        schema = tool.get("inputSchema")
        if isinstance(schema, dict):
            mismatches, unusable = schema_mismatches(schema, sample.input)
            label = _label(sample.tool, sample.input)
            if unusable is not None:
                outcome.notes.append(f"{label}: input not checked: the tool's inputSchema is {unusable}")
            elif mismatches and sample.expect != "error":
                _sample_failed(
                    outcome, sample, f"input rejected by the tool's inputSchema (not sent): {_listed(mismatches)}"
                )
                continue
            elif mismatches:
                outcome.notes.append(
                    f"{label}: input does not match the tool's inputSchema ({_listed(mismatches)});"
                    ' sent anyway, the sample has expect = "error"'
                )
        planned.append(_Planned(sample.tool, sample.input, sample))
    return planned


def _result_failure(
    tool: Mapping[str, Any],
    call: _Planned,
    result: dict[str, Any],
    record: Mapping[str, Any],
    mode: UnwrapMode,
    outcome: ServerOutcome,
) -> str | None:
    """Why an answered call is not a good sample, or None. A tool error (isError) and a result
    that breaks the tool's declared outputSchema are failures, unless the sample expects them
    (`expect = "error"` / `"drift"`): then it is recorded as such (isError results never define
    an output type; a drifting one is reported by `generate`)."""
    expect = call.sample.expect if call.sample is not None else None
    label = _label(call.tool, call.input)
    if result.get("isError") is True:
        if expect == "error":
            return None
        return f"the tool answered with an error (isError): {_error_text(result)}"
    if expect == "error":
        outcome.notes.append(f'{label}: expect = "error", but the call succeeded; recorded as it is')
    declared = tool.get("outputSchema")
    mismatches: list[str] = []
    if isinstance(declared, dict) and record.get("truncated") is None:  # a cut result has no reliable shape
        found, unusable = schema_mismatches(declared, unwrap_result(result, mode))
        mismatches = found if unusable is None else []  # an unusable schema: generate says so
    if not mismatches:
        if expect == "drift":
            outcome.notes.append(
                f'{label}: expect = "drift", but the result matches the declared outputSchema'
                " (or there is none to check)"
            )
        return None
    if expect == "drift":
        return None
    return f"the result does not match the tool's declared outputSchema: {_listed(mismatches)}"


def _listed(lines: Sequence[str]) -> str:
    return "; ".join(lines[:MAX_LISTED_MISMATCHES]) + (
        f" (and {len(lines) - MAX_LISTED_MISMATCHES} more)" if len(lines) > MAX_LISTED_MISMATCHES else ""
    )


def _error_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return shown(block["text"])
    return "(no text)"


def _label(tool: str, args: Any) -> str:
    return f"{shown(tool)} {shown(input_key(args))}"


def _sample_failed(outcome: ServerOutcome, sample: Sample, reason: str) -> None:
    where = f" (sample from {sample.where})" if sample.where else ""
    outcome.failed_samples.append(f"{_label(sample.tool, sample.input)}: {reason}{where}")


def _call_failed(outcome: ServerOutcome, call: _Planned, reason: str) -> None:
    """A sample that failed fails the run and is not recorded; an auto-probe (nobody asked for
    it) is best-effort: a warning that says so."""
    if call.sample is not None:
        _sample_failed(outcome, call.sample, reason)
    else:
        outcome.warnings.append(
            f"probe {_label(call.tool, call.input)}: {reason} (an automatic probe: not recorded,"
            " not a failure of record)"
        )


def _redact_outcome(outcome: ServerOutcome, redactor: Redactor) -> None:
    """Redact every line `record` prints about a server: an error message quoting its stderr or
    a tool error echoing a secret must not reach the terminal or a CI log."""
    if not redactor:
        return
    if outcome.error is not None:
        outcome.error = redactor.text(outcome.error)
    for lines in (outcome.failed_samples, outcome.notes, outcome.warnings):
        lines[:] = [redactor.text(line) for line in lines]


def _old_calls(server_dir: Path, outcome: ServerOutcome) -> dict[str, list[dict[str, Any]]]:
    # anything at server.json (a link, a FIFO) is read, so refused by name and said, not skipped
    if not os.path.lexists(server_dir / SERVER_FILE):
        return {}
    try:
        return load_fixture_set(server_dir).calls
    except UserError as exc:
        outcome.notes.append(f"previous fixtures unreadable, replaced: {exc.message}")
        return {}


def _usable(line: Mapping[str, Any]) -> bool:
    """A recorded call that describes the tool: it succeeded and was not cut."""
    result = line.get("result")
    return isinstance(result, dict) and result.get("isError") is not True and line.get("truncated") is None


def _quiet_old_calls(server_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The server's recorded calls, to fill probe arguments from; nothing when they cannot be
    read (`_old_calls` says why, when they are merged)."""
    if not os.path.lexists(server_dir / SERVER_FILE):
        return {}
    try:
        return load_fixture_set(server_dir).calls
    except UserError:
        return {}


def _summary(outcome: ServerOutcome) -> str:
    text = f"recorded {outcome.tools} tool{'' if outcome.tools == 1 else 's'}, {outcome.calls} call{'' if outcome.calls == 1 else 's'}"
    if outcome.failed_samples:
        failed = len(outcome.failed_samples)
        text += f", {failed} sample{'' if failed == 1 else 's'} failed"
    if outcome.warnings:
        text += f", {len(outcome.warnings)} warning{'' if len(outcome.warnings) == 1 else 's'}"
    return text
