"""The fixtures/ format: the one place that knows how recordings sit on disk.

`record` writes it, `generate` reads it, the runtime builds the same shape from a live
session. Layout (docs/DESIGN.md):

    fixtures/<configId>/server.json         initialize result
    fixtures/<configId>/tools.json          every tool, verbatim wire JSON, sorted by name
    fixtures/<configId>/calls/<tool>.jsonl  one recorded call a line

A server's folder is replaced as a whole (staged next to it, then swapped), so a failed or
interrupted record leaves the previous recording intact.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from codemode_gen.errors import UserError
from codemode_gen.jsonio import atomic_write_text, dumps_line, dumps_stable, iter_jsonl, read_json

SERVER_FILE = "server.json"
TOOLS_FILE = "tools.json"
CALLS_DIR = "calls"
CALLS_SUFFIX = ".jsonl"

# Characters kept as they are in a calls file name; everything else is percent-encoded so
# that any tool name (slashes, spaces, "..") maps to one safe, reversible file name.
_SAFE_CHARS = re.compile(r"[A-Za-z0-9_.-]")
# Staging folders start with a dot so a crashed swap is never mistaken for a server.
_STAGING_PREFIX = "."


@dataclass
class FixtureSet:
    """Everything recorded for one server."""

    config_id: str
    server_json: dict[str, Any]
    tools: list[dict[str, Any]]
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # "<configId>/<relative path>" -> "sha256:<hex>" of the file bytes that were read
    hashes: dict[str, str] = field(default_factory=dict)


def calls_file_name(tool_name: str) -> str:
    """Reversible, filesystem-safe file name for a tool's recorded calls."""
    encoded = "".join(ch if _SAFE_CHARS.fullmatch(ch) else quote(ch, safe="") for ch in tool_name)
    if encoded.startswith("."):  # never a hidden file, never "." or ".."
        encoded = "%2E" + encoded[1:]
    return encoded + CALLS_SUFFIX


def tool_name_from_calls_file(file_name: str) -> str:
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


def _load_calls(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    hint = "delete that line (or the file) and run `codemode-gen record` again"
    text = path.read_text(encoding="utf-8")
    for lineno, record in iter_jsonl(text, path, what="recorded call", hint=hint):
        if not isinstance(record, dict) or not isinstance(record.get("result"), dict):
            raise UserError(
                f"{path}:{lineno}: a recorded call must be an object with a `result` object", hint=hint
            )
        records.append(record)
    return records


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
    calls_dir = server_dir / CALLS_DIR
    if calls_dir.is_dir():
        for path in sorted(calls_dir.glob("*" + CALLS_SUFFIX)):
            calls[tool_name_from_calls_file(path.name)] = _load_calls(path)
            hashes[f"{config_id}/{CALLS_DIR}/{path.name}"] = _sha256(path.read_bytes())
    return FixtureSet(config_id, server_json, sorted(tools, key=lambda t: t["name"]), calls, hashes)


def load_fixtures(fixtures_dir: Path) -> list[FixtureSet]:
    """Every recorded server under fixtures_dir, sorted by config id."""
    if not fixtures_dir.is_dir():
        raise UserError(
            f"{fixtures_dir}: fixtures folder not found",
            hint="run `codemode-gen record` first, or pass --fixtures DIR",
        )
    sets = [
        load_fixture_set(child)
        for child in sorted(fixtures_dir.iterdir())
        if child.is_dir() and not child.name.startswith(_STAGING_PREFIX)
    ]
    if not sets:
        raise UserError(
            f"{fixtures_dir}: no recorded servers (expected <server>/server.json and tools.json)",
            hint="run `codemode-gen record` to record the servers in .mcp.json",
        )
    return sets


def write_server_fixtures(
    fixtures_dir: Path,
    config_id: str,
    server_json: dict[str, Any],
    tools: list[dict[str, Any]],
    calls: dict[str, list[dict[str, Any]]],
) -> None:
    """Replace one server's recording as a whole: stage it completely, then swap it in."""
    fixtures_dir.mkdir(parents=True, exist_ok=True)
    target = fixtures_dir / config_id
    staging = Path(tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{config_id}.new-", dir=fixtures_dir))
    try:
        atomic_write_text(staging / SERVER_FILE, dumps_stable(server_json))
        atomic_write_text(staging / TOOLS_FILE, dumps_stable(sorted(tools, key=lambda t: t["name"])))
        for tool_name in sorted(calls):
            records = calls[tool_name]
            if records:
                text = "".join(dumps_line(r) for r in records)
                atomic_write_text(staging / CALLS_DIR / calls_file_name(tool_name), text)
        os.chmod(staging, 0o755)
        if target.exists():
            retired = Path(
                tempfile.mkdtemp(prefix=f"{_STAGING_PREFIX}{config_id}.old-", dir=fixtures_dir)
            )
            os.replace(target, retired / config_id)
            os.replace(staging, target)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
