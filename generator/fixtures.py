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
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from codemode_gen import dirswap
from codemode_gen.errors import UserError
from codemode_gen.jsonio import atomic_write_text, dumps_line, dumps_stable, iter_jsonl, read_json

SERVER_FILE = "server.json"
TOOLS_FILE = "tools.json"
CALLS_DIR = "calls"
CALLS_SUFFIX = ".jsonl"
# Field of a calls line naming its tool, written when the file name cannot be decoded.
TOOL_FIELD = "tool"

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


def _load_json_file(path: Path, what: str, hashes: dict[str, str], key: str) -> Any:
    value = read_json(path, what=what)
    hashes[key] = _sha256(path.read_bytes())
    return value


def _load_calls(path: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """(the tool its lines name, or None; the recorded calls without that field)."""
    records: list[dict[str, Any]] = []
    hint = "delete that line (or the file) and run `codemode-gen record` again"
    text = path.read_text(encoding="utf-8")
    named: str | None = None
    for lineno, record in iter_jsonl(text, path, what="recorded call", hint=hint):
        if not isinstance(record, dict) or not isinstance(record.get("result"), dict):
            raise UserError(
                f"{path}:{lineno}: a recorded call must be an object with a `result` object", hint=hint
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
    return named, records


def load_fixture_set(server_dir: Path) -> FixtureSet:
    """Read one server's recording; every format problem names the file and the fix."""
    config_id = server_dir.name
    hashes: dict[str, str] = {}
    server_json = _load_json_file(
        server_dir / SERVER_FILE, "server recording", hashes, f"{config_id}/{SERVER_FILE}"
    )
    if not isinstance(server_json, dict):
        raise UserError(
            f"{server_dir / SERVER_FILE}: expected a JSON object (the initialize result)",
            hint=f"run `codemode-gen record --server {config_id}` again",
        )
    tools = _load_json_file(
        server_dir / TOOLS_FILE, "tool list recording", hashes, f"{config_id}/{TOOLS_FILE}"
    )
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools
    ):
        raise UserError(
            f"{server_dir / TOOLS_FILE}: expected a JSON array of tools, each with a string `name`",
            hint=f"run `codemode-gen record --server {config_id}` again",
        )
    calls: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, Path] = {}
    calls_dir = server_dir / CALLS_DIR
    if calls_dir.is_dir():
        for path in sorted(calls_dir.glob("*" + CALLS_SUFFIX)):
            if path.name.startswith("."):  # an editor's or a crashed write's temp file
                continue
            named, records = _load_calls(path)
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
            hashes[f"{config_id}/{CALLS_DIR}/{path.name}"] = _sha256(path.read_bytes())
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
    return sorted(c.name for c in fixtures_dir.iterdir() if c.is_dir() and not c.name.startswith("."))


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
        found[config_id] = load_fixture_set(folder) if folder.is_dir() else None
    return found


def load_fixtures(fixtures_dir: Path) -> list[FixtureSet]:
    """Every recorded server under fixtures_dir, sorted by config id.

    Hidden folders are not servers. A server whose folder is missing while an interrupted
    record kept its previous version hidden (`.<id>.old-*/<id>`) is an error, not a server
    silently left out: `record` restores it (`leftover_notes` lists the harmless leftovers).
    """
    _require_readable(fixtures_dir)
    sets = [load_fixture_set(fixtures_dir / config_id) for config_id in recorded_server_ids(fixtures_dir)]
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


def write_server_fixtures(
    fixtures_dir: Path,
    config_id: str,
    server_json: dict[str, Any],
    tools: list[dict[str, Any]],
    calls: dict[str, list[dict[str, Any]]],
) -> list[str]:
    """Replace one server's recording as a whole: stage it completely, then swap it in.

    Returns notes on leftovers of an interrupted earlier run that were restored or removed.
    """
    recorded = {name: records for name, records in calls.items() if records}
    files = calls_file_names(recorded)
    with dirswap.replace_dir(fixtures_dir / config_id) as swap:
        staging = swap.staging
        atomic_write_text(staging / SERVER_FILE, dumps_stable(server_json))
        atomic_write_text(staging / TOOLS_FILE, dumps_stable(sorted(tools, key=lambda t: t["name"])))
        for tool_name in sorted(recorded):
            file_name = files[tool_name]
            records = recorded[tool_name]
            if names_its_tool(file_name):
                records = [{**record, TOOL_FIELD: tool_name} for record in records]
            text = "".join(dumps_line(r) for r in records)
            atomic_write_text(staging / CALLS_DIR / file_name, text)
    return swap.notes
