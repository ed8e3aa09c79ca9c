"""The fixtures/ format: the one place that knows how recordings sit on disk.

`record` writes it, `generate` reads it, the runtime builds the same shape from a live
session. Layout (docs/DESIGN.md, "fixtures/"):

    fixtures/<configId>/server.json          initialize result
    fixtures/<configId>/tools.json           every tool, verbatim wire JSON, sorted by name
    fixtures/<configId>/calls/<file>.jsonl   one recorded call a line

Calls file names (`calls_file_names`): a tool name is untrusted server text, so it never
becomes a path as is. A short name is percent-encoded (everything outside `[A-Za-z0-9._-]`,
and a leading dot), which is reversible, so such files carry nothing else and recordings made
before stay byte-identical. A name whose encoding would be long, one that is not valid Unicode
or a Windows device name, and names that differ only in case (one file on macOS and Windows)
get `<readable prefix>@<sha-256 prefix>.jsonl` instead, and every line of that file names its
tool in a `"tool"` field. Readers take the `tool` field when present, else decode the name.

A server's folder is replaced as a whole through `codemode_gen.dirswap` (staged next to it,
then swapped, with rollback), so a failed or interrupted record leaves the previous recording
in place, and the next record restores or removes whatever an interrupted one left.

Recordings are untrusted input (a pull request can change them), and every reader (`generate`,
`replay` and `run --replay`, `record`'s merge of old calls, `record --check`, `run --record`)
reads them here only: folders and files inside fixtures/ must be real folders and regular
files, never symbolic links (fixtures/ itself may be one: it is the path the user chose);
each file is read through `jsonio.read_untrusted_file` (never blocks, at most its cap) and
parsed with `jsonio.parse_json_bytes` (UTF-8, depth before parsing, RFC 8259 numbers), and
every problem is a UserError naming the file (and line). The writer keeps within the same
caps, so whatever `record` writes, every reader reads.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from codemode_gen import dirswap
from codemode_gen.errors import UserError
from codemode_gen.jsonio import (
    atomic_write_text,
    dumps_line,
    dumps_stable,
    iter_jsonl,
    json_text_depth_exceeds,
    parse_json_bytes,
    pointer_token,
    read_untrusted_file,
)

SERVER_FILE = "server.json"
TOOLS_FILE = "tools.json"
CALLS_DIR = "calls"
CALLS_SUFFIX = ".jsonl"
# Field of a calls line naming its tool, written when the file name cannot be decoded.
TOOL_FIELD = "tool"
# Marks a line a live session recorded (`run --record`, `serve --record`, runtime/host/learn.py), not
# `record`: `generate` counts the types learned that way apart (its coverage report).
LIVE_FIELD = "live"

# Characters kept as they are in a calls file name; everything else is percent-encoded so
# that any tool name (slashes, spaces, "..") maps to one safe, reversible file name.
_SAFE_CHARS = re.compile(r"[A-Za-z0-9_.-]")
# Characters kept in the readable prefix of a hashed calls file name; the rest become "_".
_PREFIX_SAFE_CHARS = re.compile(r"[A-Za-z0-9_-]")
# Bounds a calls file name (suffix included): a 300-character tool name made `record` fail for
# its whole server with "File name too long" (NAME_MAX is 255 bytes on most filesystems, 143 on
# eCryptfs, and Windows paths are limited as a whole). Longer encodings are hashed instead.
MAX_CALLS_FILE_NAME_CHARS = 128
# Bounds the readable part of a hashed calls file name (the rest is the hash and suffix).
HASHED_PREFIX_CHARS = 40
# Hex digits of SHA-256 in a hashed calls file name: 128 bits, so no server can craft two tool
# names that share a file (a birthday search would need ~2^64 attempts).
HASH_HEX_CHARS = 32
# Separates a hashed name's prefix from its hash; percent-encoding never leaves a raw "@"
# (only "~" survives `quote` besides _SAFE_CHARS), so a hashed name never equals a plain one.
_HASH_MARK = "@"
# Caps on what a reader takes of one fixture file (checked on its size before reading, and
# while reading), so a link to /dev/zero or a huge file a pull request added is refused, never
# read until memory runs out. Far above what `record` writes (its results are cut to
# max_result_bytes, 256 KiB by default), and the writer stays within them.
# An initialize result: serverInfo, capabilities, instructions (a few KB in practice).
MAX_SERVER_JSON_BYTES = 16 * 1024 * 1024
# Every tool of one server (the client keeps at most 10,000; real lists are well under 1 MB).
MAX_TOOLS_JSON_BYTES = 64 * 1024 * 1024
# One tool's calls file: max_samples lines (20 by default).
MAX_CALLS_FILE_BYTES = 256 * 1024 * 1024
# One recorded call (a line of a calls file): its input and its result (one MCP message at most,
# 64 MiB: client/stdio.py MAX_FRAME_BYTES).
MAX_CALLS_LINE_BYTES = 64 * 1024 * 1024
# Bounds the nesting a reader accepts in one file or line: parsers and generate's walkers
# recurse per level (a 100,000-deep file crashed them), and the MCP SDK cannot serialise a
# replayed answer nested past about 250 levels (the replay server died). `record` keeps values
# nested at most MAX_RECORDED_DEPTH (200, generator/untrusted.py) deep, one level more inside their
# line or the tools array.
MAX_FIXTURE_DEPTH = 201

# Names Windows reserves for devices whatever the extension (`nul.jsonl` is the NUL device).
_WINDOWS_DEVICES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
)


@dataclass
class FixtureSet:
    """Everything recorded for one server."""

    config_id: str
    server_json: dict[str, Any]
    tools: list[dict[str, Any]]
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # "<configId>/<relative path>" -> "sha256:<hex>" of the file bytes that were read
    hashes: dict[str, str] = field(default_factory=dict)


def _percent_encoded(tool_name: str) -> str | None:
    """The reversible encoding of `tool_name`; None for a name that is not valid Unicode."""
    try:
        encoded = "".join(
            ch if _SAFE_CHARS.fullmatch(ch) else quote(ch, safe="") for ch in tool_name
        )
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 encoding
        return None
    if encoded.startswith("."):  # never a hidden file, never "." or ".."
        encoded = "%2E" + encoded[1:]
    return encoded


def hashed_calls_file_name(tool_name: str) -> str:
    """`<readable prefix>@<hash>.jsonl`: bounded, ASCII, never hidden, for any string."""
    # no dots: never hidden, and never a Windows device name before its first dot (`NUL.txt`)
    head = tool_name[:HASHED_PREFIX_CHARS]
    prefix = "".join(ch if _PREFIX_SAFE_CHARS.fullmatch(ch) else "_" for ch in head)
    digest = hashlib.sha256(tool_name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}{_HASH_MARK}{digest[:HASH_HEX_CHARS]}{CALLS_SUFFIX}"


def calls_file_name(tool_name: str) -> str:
    """Filesystem-safe, bounded file name for a tool's recorded calls (one tool on its own).

    Percent-encoded (reversible: `tool_name_from_calls_file`) when that is short and safe,
    else `hashed_calls_file_name`. `calls_file_names` also separates names that differ only
    in case; use it when writing a server's files.
    """
    # every character encodes to at least one: a longer name is never plain (and a megabyte
    # name is not encoded character by character)
    encoded = _percent_encoded(tool_name) if len(tool_name) < MAX_CALLS_FILE_NAME_CHARS else None
    if (
        encoded
        and len(encoded) + len(CALLS_SUFFIX) <= MAX_CALLS_FILE_NAME_CHARS
        and encoded.split(".", 1)[0].upper() not in _WINDOWS_DEVICES
    ):
        return encoded + CALLS_SUFFIX
    return hashed_calls_file_name(tool_name)


def calls_file_names(tool_names: Iterable[str]) -> dict[str, str]:
    """tool name -> calls file name for one server: safe, bounded and collision-free.

    Names whose plain file names are equal ignoring case (`Foo`, `foo`) would share one file
    on case-insensitive filesystems (macOS, Windows): they all take the hashed form.
    """
    names = {name: calls_file_name(name) for name in tool_names}
    folded = Counter(file.lower() for file in names.values())
    for name, file in names.items():
        if folded[file.lower()] > 1:
            names[name] = hashed_calls_file_name(name)
    if len({file.lower() for file in names.values()}) != len(names):  # a 128-bit hash collision
        raise ValueError("two tool names map to one calls file")
    return names


def names_its_tool(file_name: str) -> bool:
    """True for a hashed calls file name: its lines carry the `tool` field (percent-encoding
    never leaves a raw "@", so every other name decodes to its tool)."""
    return _HASH_MARK in file_name


def tool_name_from_calls_file(file_name: str) -> str:
    """Decode a percent-encoded calls file name (a hashed one decodes to nothing meaningful)."""
    return unquote(file_name.removesuffix(CALLS_SUFFIX))


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def fixtures_hash(sets: list[FixtureSet]) -> str:
    """One hash over every fixture file read, independent of read order."""
    digest = hashlib.sha256()
    for key, value in sorted((k, v) for s in sets for k, v in s.hashes.items()):
        digest.update(f"{key}\0{value}\n".encode())
    return "sha256:" + digest.hexdigest()


def _hint(config_id: str) -> str:
    return f"run `codemode-gen record --server {config_id}` again (it rewrites the folder)"


def _read(path: Path, max_bytes: int, what: str, config_id: str) -> bytes:
    return read_untrusted_file(path, max_bytes, what=what, hint=_hint(config_id))


def _is_folder(path: Path, what: str, config_id: str) -> bool:
    """Whether `path` exists; a UserError when it is anything but a real folder (a symbolic
    link could take the readers anywhere on the machine)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise UserError(
            f"{path}: cannot read {what}: {exc.strerror}", hint=_hint(config_id)
        ) from None
    if stat.S_ISLNK(mode):
        raise UserError(
            f"{path}: {what} is a symbolic link; recordings are read only from real folders inside"
            " the fixtures folder (a link could make replay serve any file of the machine)",
            hint=f"replace the link with a copy of the folder, or {_hint(config_id)}",
        )
    if not stat.S_ISDIR(mode):
        raise UserError(f"{path}: {what} is not a folder", hint=_hint(config_id))
    return True


# A surrogate in a decoded string (every one is lone: json.loads joins escaped pairs), and the
# escape that makes one (strict UTF-8 cannot hold a surrogate), looked for in the raw bytes.
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _load_text_json_file(
    path: Path, what: str, max_bytes: int, config_id: str, hashes: dict[str, str], key: str
) -> Any:
    """A server.json or tools.json: JSON whose strings are all Unicode text (they become code)."""
    data = _read(path, max_bytes, what, config_id)
    value = parse_json_bytes(
        data, path, what=what, hint=_hint(config_id), max_depth=MAX_FIXTURE_DEPTH
    )
    # strict UTF-8 holds no surrogate: only a "\\udXXX" escape makes one (looked for in C first)
    where = _unicode_problem(value) if _SURROGATE_ESCAPE.search(data) else None
    if where is not None:
        raise UserError(
            f"{path}: a lone surrogate escape (not Unicode text) in the string at {where[:200]};"
            " `record` never writes one there",
            hint=_hint(config_id),
        )
    hashes[key] = _sha256(data)
    return value


def _unicode_problem(value: Any) -> str | None:
    """Where `value` holds a lone surrogate (a string that is not Unicode text), or None.
    Iterative: the value may nest MAX_FIXTURE_DEPTH deep."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return pointer or "/"
        elif isinstance(node, dict):
            for key, item in node.items():
                if _SURROGATE.search(key):
                    return pointer or "/"
                stack.append((item, f"{pointer}/{pointer_token(key)}"))
        elif isinstance(node, list):
            stack.extend((item, f"{pointer}/{i}") for i, item in enumerate(node))
    return None


def _load_calls(
    path: Path, config_id: str, hashes: dict[str, str]
) -> tuple[str | None, list[dict[str, Any]]]:
    """(the tool its lines name, or None; the recorded calls without that field)."""
    records: list[dict[str, Any]] = []
    hint = f"delete that line (or the file) and {_hint(config_id)}"
    data = _read(path, MAX_CALLS_FILE_BYTES, "calls file", config_id)
    named: str | None = None
    lines = iter_jsonl(
        data,
        path,
        what="recorded call",
        hint=hint,
        max_depth=MAX_FIXTURE_DEPTH,
        max_line_bytes=MAX_CALLS_LINE_BYTES,
    )
    for lineno, record in lines:
        if not isinstance(record, dict) or not isinstance(record.get("result"), dict):
            raise UserError(
                f"{path}:{lineno}: a recorded call must be an object with a `result` object",
                hint=hint,
            )
        if TOOL_FIELD in record:
            record = dict(record)
            tool = record.pop(TOOL_FIELD)
            if not isinstance(tool, str) or (named is not None and tool != named):
                raise UserError(
                    f"{path}:{lineno}: `{TOOL_FIELD}` must be the same tool name (a string) on every line",
                    hint=hint,
                )
            named = tool
        records.append(record)
    hashes[f"{config_id}/{CALLS_DIR}/{path.name}"] = _sha256(data)
    return named, records


def load_fixture_set(server_dir: Path) -> FixtureSet:
    """Read one server's recording; every format problem names the file and the fix.

    Values are read exactly as written, lone surrogates in results included (`record` escapes
    them); server.json and tools.json must be Unicode text, as `record` keeps them (they become
    generated code).
    """
    config_id = server_dir.name
    hint = _hint(config_id)
    if not _is_folder(server_dir, "server recording folder", config_id):
        raise UserError(f"{server_dir}: no recording of server '{config_id}'", hint=hint)
    hashes: dict[str, str] = {}
    server_json = _load_text_json_file(
        server_dir / SERVER_FILE,
        "server recording",
        MAX_SERVER_JSON_BYTES,
        config_id,
        hashes,
        f"{config_id}/{SERVER_FILE}",
    )
    if not isinstance(server_json, dict):
        raise UserError(
            f"{server_dir / SERVER_FILE}: expected a JSON object (the initialize result)", hint=hint
        )
    tools = _load_text_json_file(
        server_dir / TOOLS_FILE,
        "tool list recording",
        MAX_TOOLS_JSON_BYTES,
        config_id,
        hashes,
        f"{config_id}/{TOOLS_FILE}",
    )
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        raise UserError(
            f"{server_dir / TOOLS_FILE}: expected a JSON array of tools, each with a string `name`",
            hint=hint,
        )
    calls: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, Path] = {}
    calls_dir = server_dir / CALLS_DIR
    if _is_folder(calls_dir, "calls folder", config_id):
        for path in sorted(calls_dir.glob("*" + CALLS_SUFFIX)):
            if path.name.startswith("."):  # an editor's or a crashed write's temp file
                continue
            named, records = _load_calls(path, config_id, hashes)
            if named is not None:
                tool = named
            elif names_its_tool(path.name):
                if not records:
                    continue
                raise UserError(
                    f"{path}: cannot tell which tool these calls belong to: a hashed file name"
                    f" needs a `{TOOL_FIELD}` field on its lines",
                    hint=f"delete the file and run `codemode-gen record --server {config_id}` again",
                )
            else:
                tool = tool_name_from_calls_file(path.name)
            if tool in sources:
                raise UserError(
                    f"{path}: holds calls of tool {tool!r}, like {sources[tool].name}",
                    hint="keep one of the two files (or merge their lines) and run `codemode-gen generate` again",
                )
            sources[tool] = path
            calls[tool] = records
    return FixtureSet(config_id, server_json, sorted(tools, key=lambda t: t["name"]), calls, hashes)


def _require_readable(fixtures_dir: Path) -> None:
    """The folder exists and no server in it exists only as a hidden copy an interrupted record
    left (`record` restores that; a reader must not silently take the server for unrecorded)."""
    if not fixtures_dir.is_dir():
        raise UserError(
            f"{fixtures_dir}: fixtures folder not found",
            hint="run `codemode-gen record` first, or pass --fixtures DIR",
        )
    for leftover in dirswap.leftovers(fixtures_dir):
        tree = leftover.retired_tree
        if tree is not None and not (fixtures_dir / leftover.name).exists():
            raise UserError(
                f"{fixtures_dir / leftover.name}: missing; an interrupted record left this"
                f" server's previous recording in {tree}",
                hint=f"run `codemode-gen record --server {leftover.name}` (it restores it first),"
                f" or move {tree} back to {fixtures_dir / leftover.name}",
            )


def recorded_server_ids(fixtures_dir: Path) -> list[str]:
    """The servers recorded under fixtures_dir (folders, hidden ones excepted), sorted."""
    if not fixtures_dir.is_dir():
        return []
    return sorted(
        c.name for c in fixtures_dir.iterdir() if c.is_dir() and not c.name.startswith(".")
    )


def load_recorded(fixtures_dir: Path, config_ids: Iterable[str]) -> dict[str, FixtureSet | None]:
    """Each named server's recording, or None for one with no folder yet; reads, never writes.

    For `record --check`. A missing fixtures folder is an error (a wrong --fixtures path is a
    mistake, not every server "not recorded yet"), as is a server that exists only as a hidden
    copy an interrupted record left; an unreadable recording raises its `UserError`.
    """
    _require_readable(fixtures_dir)
    found: dict[str, FixtureSet | None] = {}
    for config_id in config_ids:
        folder = fixtures_dir / config_id
        # anything by that name (a link, a file) is read, so it is refused by name, not ignored
        found[config_id] = load_fixture_set(folder) if os.path.lexists(folder) else None
    return found


def load_fixtures(fixtures_dir: Path) -> list[FixtureSet]:
    """Every recorded server under fixtures_dir, sorted by config id.

    Hidden folders are not servers. A server whose folder is missing while an interrupted
    record kept its previous version hidden (`.<id>.old-*/<id>`) is an error, not a server
    silently left out: `record` restores it (`leftover_notes` lists the harmless leftovers).
    """
    _require_readable(fixtures_dir)
    sets = [
        load_fixture_set(fixtures_dir / config_id)
        for config_id in recorded_server_ids(fixtures_dir)
    ]
    if not sets:
        raise UserError(
            f"{fixtures_dir}: no recorded servers (expected <server>/server.json and tools.json)",
            hint="run `codemode-gen record` to record the servers in .mcp.json",
        )
    return sets


def leftover_notes(fixtures_dir: Path) -> list[str]:
    """One line per hidden folder an interrupted record left in fixtures_dir (nothing lost:
    `load_fixtures` refuses the case where a server would be); the next record removes them."""
    return [
        f"{leftover.describe()}; the next `codemode-gen record --server {leftover.name}` removes it"
        for leftover in dirswap.leftovers(fixtures_dir)
    ]


def _checked(path: str, text: str, max_bytes: int, what: str, values: Any) -> str:
    """`text` of a server.json or tools.json to write, if every reader will read it back."""
    data = text.encode("utf-8")
    size = len(data)
    kept = "nothing was written for this server; its previous recording is kept"
    if size > max_bytes:
        raise UserError(
            f"{path}: the {what} would be {size:,} bytes; readers take at most {max_bytes:,}",
            hint=kept,
        )
    if json_text_depth_exceeds(text, MAX_FIXTURE_DEPTH):
        raise UserError(
            f"{path}: the {what} nests deeper than readers take ({MAX_FIXTURE_DEPTH} levels)",
            hint=kept,
        )
    where = _unicode_problem(values) if _SURROGATE_ESCAPE.search(data) else None
    if where is not None:  # recordable_tools and record refuse these first
        raise UserError(
            f"{path}: the {what} holds a lone surrogate (not Unicode text) at {where[:200]}"
        )
    return text


def _calls_text(path: str, records: list[dict[str, Any]], notes: list[str]) -> str:
    """The calls file for `records` (oldest first): a line no reader would take (over
    MAX_CALLS_LINE_BYTES, or nested past MAX_FIXTURE_DEPTH) is left out, and the oldest lines
    go while the file is over MAX_CALLS_FILE_BYTES, each with a note."""
    lines: list[str] = []
    sizes: list[int] = []
    for record in records:
        line = dumps_line(record)
        size = len(line.encode("utf-8"))
        if size > MAX_CALLS_LINE_BYTES or json_text_depth_exceeds(line, MAX_FIXTURE_DEPTH):
            why = (
                f"{size:,} bytes, over {MAX_CALLS_LINE_BYTES:,}"
                if size > MAX_CALLS_LINE_BYTES
                else f"nested deeper than {MAX_FIXTURE_DEPTH} levels"
            )
            notes.append(
                f"{path}: a recorded call left out: its line would be {why}, which readers refuse"
            )
            continue
        lines.append(line)
        sizes.append(size)
    total, first = sum(sizes), 0
    while total > MAX_CALLS_FILE_BYTES:
        total -= sizes[first]
        first += 1
    if first:
        notes.append(
            f"{path}: the {first} oldest recorded call(s) left out: the file would be over"
            f" {MAX_CALLS_FILE_BYTES:,} bytes, which readers refuse"
        )
    return "".join(lines[first:])


def write_server_fixtures(
    fixtures_dir: Path,
    config_id: str,
    server_json: dict[str, Any],
    tools: list[dict[str, Any]],
    calls: dict[str, list[dict[str, Any]]],
) -> list[str]:
    """Replace one server's recording as a whole: stage it completely, then swap it in.

    Returns notes on leftovers of an interrupted earlier run that were restored or removed,
    and on recorded calls left out because no reader would take them (`_calls_text`).
    """
    recorded = {name: records for name, records in calls.items() if records}
    files = calls_file_names(recorded)
    notes: list[str] = []
    with dirswap.replace_dir(fixtures_dir / config_id) as swap:
        staging = swap.staging
        where = f"{fixtures_dir / config_id}"
        sorted_tools = sorted(tools, key=lambda t: t["name"])
        server_text = _checked(
            f"{where}/{SERVER_FILE}",
            dumps_stable(server_json),
            MAX_SERVER_JSON_BYTES,
            "initialize result",
            server_json,
        )
        tools_text = _checked(
            f"{where}/{TOOLS_FILE}",
            dumps_stable(sorted_tools),
            MAX_TOOLS_JSON_BYTES,
            "tool list",
            sorted_tools,
        )
        atomic_write_text(staging / SERVER_FILE, server_text)
        atomic_write_text(staging / TOOLS_FILE, tools_text)
        for tool_name in sorted(recorded):
            file_name = files[tool_name]
            records = recorded[tool_name]
            if names_its_tool(file_name):
                records = [{**record, TOOL_FIELD: tool_name} for record in records]
            text = _calls_text(f"{where}/{CALLS_DIR}/{file_name}", records, notes)
            if text:
                atomic_write_text(staging / CALLS_DIR / file_name, text)
    return swap.notes + notes
