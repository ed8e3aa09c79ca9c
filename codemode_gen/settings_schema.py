"""codemode.toml's shape, checked when it is loaded, with `file:LINE:` in every message.

A setting that is read by nothing must not pass for one that is: a misspelt key
(`timeout_ms`), a server id `.mcp.json` does not have, a tool name that names no tool (the
export name `delete_file` where the MCP tool is `delete-file`) all used to be ignored, so a
`deny` denied nothing. Here:

- every table takes only its own keys (`TABLE_KEYS`); any other key is an error naming the
  closest valid one ("did you mean `timeoutMs`?");
- `[servers.<id>]` and `[[samples]] server` must name a server of `.mcp.json`;
- tool names (`blocklist`, `[servers.<id>.approval]`, `[[samples]] tool`) must name a tool of
  the server's recording (fixtures/<id>/tools.json) by its MCP name or its export name; an
  export name is applied to its MCP tool, with a note saying so. A server not recorded yet
  cannot be checked: a warning says so. (The recordings are read by the generator layer,
  generator/project.py, which hands the names to `check_tool_names` here.)

Value types and ranges are checked where they are parsed (codemode_toml.py), limits against the
bounds every run enforces (codemode_gen/limit_bounds.py).

tomllib gives no positions, so `key_lines` finds each key's line with a small scan of the text
that knows TOML's tables, arrays of tables, dotted and quoted keys, inline tables, arrays and
strings (the text is valid TOML by then: tomllib parsed it first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from codemode_gen.errors import UserError
from codemode_gen.limit_bounds import LIMIT_KEYS

__all__ = [
    "APPROVAL_DEFAULT_KEY",
    "TABLE_KEYS",
    "KeyPath",
    "SettingsSource",
    "ToolNameCheck",
    "check_server_ids",
    "check_tool_names",
    "check_unknown_keys",
    "closest",
    "dotted",
    "key_lines",
    "tool_entries",
]

#: A key's place in the document: table and key names, and indexes into arrays (of tables).
KeyPath = tuple[str | int, ...]

#: The keys each table takes; "servers.*" is every [servers.<id>], "samples[]" every
#: [[samples]]. A new setting is added here and parsed in codemode_toml.py.
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "": ("fixtures", "out", "max_samples", "max_result_bytes", "redact", "unbox", "approval",
         "limits", "sandbox", "telemetry", "servers", "samples"),
    "limits": LIMIT_KEYS,
    "sandbox": ("max_workers",),
    "telemetry": ("traces", "metrics", "exporter", "endpoint", "service_name", "record_content"),
    "servers.*": ("unwrap", "connect_timeout", "call_timeout", "blocklist", "unbox", "approval"),
    "samples[]": ("server", "tool", "input", "expect"),
}  # fmt: skip
#: The key of a server's default inside its [servers.<id>.approval] table (not a tool name).
APPROVAL_DEFAULT_KEY = "*"
#: Closeness (difflib ratio) from which a valid name is offered as "did you mean".
SUGGEST_CUTOFF = 0.6

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_BARE_KEY_FULL = re.compile(r"[A-Za-z0-9_-]+\Z")
# A number, boolean or date value: up to the next separator.
_SCALAR = re.compile(r"[^,\]\}#\n]*")


# --------------------------------------------------------------------------- key lines


class _Stop(Exception):
    """The scan met something it does not follow; what it found so far stands."""


class _KeyScanner:
    """Walks a TOML document recording the line where each key path first appears."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.found: dict[KeyPath, int] = {}
        self.arrays: dict[KeyPath, int] = {}  # array-of-tables path -> index of its last table

    def scan(self) -> dict[KeyPath, int]:
        current: KeyPath = ()
        try:
            while True:
                self._blank(newlines=True)
                if self.pos >= len(self.text):
                    break
                if self.text.startswith("[[", self.pos):
                    self._advance(2)
                    keys = self._key()
                    self._expect("]]")
                    base = (*self._resolve(keys[:-1]), keys[-1])
                    self.arrays[base] = self.arrays.get(base, -1) + 1
                    current = (*base, self.arrays[base])
                    self._record_prefixes(current)
                elif self.text.startswith("[", self.pos):
                    self._advance(1)
                    keys = self._key()
                    self._expect("]")
                    current = self._resolve(keys)
                    self._record_prefixes(current)
                else:
                    keys = self._key()
                    path = (*current, *keys)
                    self._record_prefixes(path)
                    self._expect("=")
                    self._value(path)
        except (_Stop, IndexError):
            pass
        return self.found

    # -- pieces

    def _advance(self, count: int) -> None:
        self.line += self.text.count("\n", self.pos, self.pos + count)
        self.pos += count

    def _blank(self, *, newlines: bool) -> None:
        """Skip spaces, tabs, comments (and line ends when `newlines`)."""
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self._advance(1)
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self._advance((len(self.text) if end == -1 else end) - self.pos)
            else:
                return

    def _expect(self, token: str) -> None:
        self._blank(newlines=False)
        if not self.text.startswith(token, self.pos):
            raise _Stop
        self._advance(len(token))

    def _record_prefixes(self, path: KeyPath) -> None:
        for end in range(1, len(path) + 1):
            self.found.setdefault(path[:end], self.line)

    def _resolve(self, keys: Sequence[str]) -> KeyPath:
        """A header's keys as a path: a prefix naming an array of tables means its last table."""
        path: KeyPath = ()
        for key in keys:
            path = (*path, key)
            if path in self.arrays:
                path = (*path, self.arrays[path])
        return path

    def _key(self) -> list[str]:
        """A (dotted) key: bare, "basic" or 'literal' parts joined by dots."""
        parts: list[str] = []
        while True:
            self._blank(newlines=False)
            if self.text.startswith(('"', "'"), self.pos):
                parts.append(self._string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if match is None:
                    raise _Stop
                parts.append(match.group())
                self._advance(match.end() - self.pos)
            self._blank(newlines=False)
            if not self.text.startswith(".", self.pos):
                return parts
            self._advance(1)

    def _string(self) -> str:
        """A string token at pos (any of TOML's four kinds); its value, decoded for keys."""
        text = self.text
        for quote in ('"""', "'''"):
            if text.startswith(quote, self.pos):
                end = self.pos + 3
                while True:
                    end = text.find(quote, end)
                    if end == -1:
                        raise _Stop
                    if quote == "'''" or _unescaped(text, end):
                        break
                    end += 1
                while text.startswith(quote[0], end + 3):  # up to two quotes end the content
                    end += 1
                value = text[self.pos + 3 : end]
                self._advance(end + 3 - self.pos)
                return value
        quote = text[self.pos]
        end = self.pos + 1
        while True:
            end = text.find(quote, end)
            if end == -1:
                raise _Stop
            if quote == "'" or _unescaped(text, end):
                break
            end += 1
        raw = text[self.pos : end + 1]
        self._advance(end + 1 - self.pos)
        return raw[1:-1] if quote == "'" else _decode_basic(raw)

    def _value(self, path: KeyPath) -> None:
        self._blank(newlines=False)
        ch = self.text[self.pos]
        if ch in "\"'":
            self._string()
        elif ch == "[":
            self._advance(1)
            index = 0
            while True:
                self._blank(newlines=True)
                if self.text.startswith("]", self.pos):
                    self._advance(1)
                    return
                self._record_prefixes((*path, index))
                self._value((*path, index))
                index += 1
                self._blank(newlines=True)
                if self.text.startswith(",", self.pos):
                    self._advance(1)
        elif ch == "{":
            self._advance(1)
            while True:
                self._blank(newlines=True)
                if self.text.startswith("}", self.pos):
                    self._advance(1)
                    return
                inner = (*path, *self._key())
                self._record_prefixes(inner)
                self._expect("=")
                self._value(inner)
                self._blank(newlines=True)
                if self.text.startswith(",", self.pos):
                    self._advance(1)
        else:
            match = _SCALAR.match(self.text, self.pos)
            assert match is not None  # the pattern matches the empty string
            if not match.group().strip():
                raise _Stop
            self._advance(len(match.group().rstrip()))


def _unescaped(text: str, index: int) -> bool:
    """Whether the quote at `index` is not escaped (an even run of backslashes before it)."""
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 0


def _decode_basic(raw: str) -> str:
    """A "basic" TOML string's value; TOML's \\UXXXXXXXX and \\e, which JSON lacks, first."""
    fixed = re.sub(r"\\U([0-9A-Fa-f]{8})", lambda m: chr(int(m.group(1), 16)), raw).replace(
        "\\e", "\\u001b"
    )
    try:
        value = json.loads(fixed)
    except ValueError:
        return raw[1:-1]
    return value if isinstance(value, str) else raw[1:-1]


def key_lines(text: str) -> dict[KeyPath, int]:
    """Key path -> the line (from 1) where it first appears in the TOML `text`: keys, tables,
    arrays of tables (`("samples", 0)`), array items and keys of inline tables."""
    return _KeyScanner(text).scan()


# --------------------------------------------------------------------------- the source


def dotted(keys: KeyPath) -> str:
    """A key path as people write it: `servers.notes.approval."tasks.add"`, `samples[0].tool`."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            part = key if _BARE_KEY_FULL.match(key) else json.dumps(key, ensure_ascii=False)
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True)
class SettingsSource:
    """A parsed codemode.toml with its text, to say where in it each value came from."""

    path: Path
    text: str
    data: Mapping[str, Any]

    @cached_property
    def lines(self) -> dict[KeyPath, int]:
        return key_lines(self.text)

    def line(self, keys: KeyPath) -> int | None:
        """The line of `keys`, else of its longest prefix found (an inline table's key)."""
        for end in range(len(keys), 0, -1):
            found = self.lines.get(keys[:end])
            if found is not None:
                return found
        return None

    def at(self, *keys: str | int) -> str:
        """`codemode.toml:LINE: dotted.key`, the start of a message about that key."""
        line = self.line(keys)
        return f"{self.path}{f':{line}' if line is not None else ''}: {dotted(keys)}"


# --------------------------------------------------------------------------- checks


def closest(name: str, candidates: Sequence[str]) -> str | None:
    """The valid name `name` most likely meant: equal but for case, `_`, `-` and `.`, else the
    most similar one (difflib), else None."""

    def fold(text: str) -> str:
        return re.sub(r"[_\-. ]", "", text.casefold())

    for candidate in candidates:
        if fold(candidate) == fold(name):
            return candidate
    import difflib  # here: only a misspelt setting asks, and every host imports this module

    found = difflib.get_close_matches(name, list(candidates), n=1, cutoff=SUGGEST_CUTOFF)
    return found[0] if found else None


def _did_you_mean(name: str, candidates: Sequence[str]) -> str:
    best = closest(name, candidates)
    return f"; did you mean `{best}`?" if best is not None else ""


def _raise(problems: list[tuple[int, str]], hint: str) -> None:
    """One UserError for every problem found, in file order (a fix-them-all list)."""
    if problems:
        messages = [message for _, message in sorted(problems, key=lambda p: p[0])]
        raise UserError("\n".join(messages), hint=hint)


def _tables(data: Mapping[str, Any]) -> Iterator[tuple[KeyPath, str, Mapping[str, Any]]]:
    """(path, TABLE_KEYS entry, table) for every table of the document whose keys are fixed."""
    yield (), "", data
    for name in ("limits", "sandbox", "telemetry"):
        if isinstance(data.get(name), dict):
            yield (name,), name, data[name]
    if isinstance(data.get("servers"), dict):
        for sid, table in data["servers"].items():
            if isinstance(table, dict):
                yield ("servers", sid), "servers.*", table
    if isinstance(data.get("samples"), list):
        for index, item in enumerate(data["samples"]):
            if isinstance(item, dict):
                yield ("samples", index), "samples[]", item


def check_unknown_keys(source: SettingsSource) -> None:
    """Every key of every table is one that table takes; UserError listing those that are not."""
    problems: list[tuple[int, str]] = []
    for path, kind, table in _tables(source.data):
        known = TABLE_KEYS[kind]
        for key in table:
            if key not in known:
                where = f"[{dotted(path)}]" if path else "the top level"
                problems.append(
                    (
                        source.line((*path, key)) or 0,
                        f"{source.at(*path, key)}: unknown key in {where}{_did_you_mean(key, known)}",
                    )
                )
    _raise(
        problems,
        "codemode.toml keys are documented in docs/config.md; an unknown key would be read by nothing",
    )


def check_server_ids(source: SettingsSource, known: Sequence[str], config_path: Path) -> None:
    """`[servers.<id>]` and `[[samples]] server` name servers of `.mcp.json` (`known`)."""
    problems: list[tuple[int, str]] = []
    servers = source.data.get("servers")

    def unknown(sid: str, path: KeyPath) -> None:
        problems.append(
            (
                source.line(path) or 0,
                f"{source.at(*path)}: no server `{sid}` in {config_path}"
                f"{_did_you_mean(sid, known)}",
            )
        )

    if isinstance(servers, dict):
        for sid in servers:
            if sid not in known:
                unknown(sid, ("servers", sid))
    samples = source.data.get("samples")
    if isinstance(samples, list):
        for index, item in enumerate(samples):
            if (
                isinstance(item, dict)
                and isinstance(item.get("server"), str)
                and item["server"] not in known
            ):
                unknown(item["server"], ("samples", index, "server"))
    _raise(
        problems,
        f'server ids are the keys of "mcpServers" in {config_path}: '
        f"{', '.join(known) if known else '(none)'}",
    )


@dataclass(frozen=True)
class ToolNameCheck:
    """What `check_tool_names` found: per server, the names written that are export names and
    the MCP names they stand for; notes (an export name was used) and warnings (a server whose
    tools could not be checked) to show."""

    renames: Mapping[str, Mapping[str, str]]
    notes: tuple[str, ...]
    warnings: tuple[str, ...]


def tool_entries(data: Mapping[str, Any]) -> Iterator[tuple[str, str, KeyPath]]:
    """(server id, tool name as written, its key path) for every tool name in the document."""
    servers = data.get("servers")
    if isinstance(servers, dict):
        for sid, table in servers.items():
            if not isinstance(table, dict):
                continue
            blocklist = table.get("blocklist")
            if isinstance(blocklist, list):
                for index, name in enumerate(blocklist):
                    if isinstance(name, str):
                        yield sid, name, ("servers", sid, "blocklist", index)
            approval = table.get("approval")
            if isinstance(approval, dict):
                for name in approval:
                    if name != APPROVAL_DEFAULT_KEY:
                        yield sid, name, ("servers", sid, "approval", name)
    samples = data.get("samples")
    if isinstance(samples, list):
        for index, item in enumerate(samples):
            if (
                isinstance(item, dict)
                and isinstance(item.get("server"), str)
                and isinstance(item.get("tool"), str)
            ):
                yield item["server"], item["tool"], ("samples", index, "tool")


def check_tool_names(
    source: SettingsSource,
    recorded: Mapping[str, Mapping[str, str] | None],
    recording: Mapping[str, str],
    *,
    strict: bool = True,
) -> ToolNameCheck:
    """Check every tool name against its server's recorded tools.

    `recorded`: server id -> {MCP tool name: export name} of its recording, or None (missing)
    when it is not recorded; `recording`: server id -> where its recording is (for messages).
    A name is first an MCP name, else an export name (then renamed to its tool's MCP name);
    anything else is a UserError naming the closest name (a warning when not `strict`). One
    server's approval table may not name the same tool twice (once by each name)."""
    problems: list[tuple[int, str]] = []
    notes: list[str] = []
    warnings: dict[str, str] = {}
    renames: dict[str, dict[str, str]] = {}
    approval_names: dict[tuple[str, str], KeyPath] = {}
    for sid, name, path in tool_entries(source.data):
        tools = recorded.get(sid)
        if tools is None:
            if strict:  # not `record`, which is recording it now (and names an unknown sample tool)
                warnings.setdefault(
                    sid,
                    f"{source.at(*path)}: tool names of server `{sid}` cannot be checked:"
                    f" it is not recorded yet ({recording.get(sid, 'fixtures/')};"
                    f" `codemode-gen record --server {sid}`)",
                )
            continue
        if name in tools:
            tool = name
        else:
            by_export = {export: mcp for mcp, export in tools.items()}
            if name not in by_export:
                problem = _unknown_tool(source, path, sid, name, tools, recording)
                if strict:
                    problems.append((source.line(path) or 0, problem))
                else:
                    warnings[f"{sid}\0{name}"] = problem
                continue
            tool = by_export[name]
            renames.setdefault(sid, {})[name] = tool
            notes.append(
                f"{source.at(*path)}: `{name}` is the export name of MCP tool `{tool}` of server"
                f" `{sid}`; it applies to that tool"
            )
        if path[2:3] == ("approval",):
            first = approval_names.setdefault((sid, tool), path)
            if first != path:
                problems.append(
                    (
                        source.line(path) or 0,
                        f"{source.at(*path)}: names MCP tool `{tool}` again (as {dotted(first)} does)",
                    )
                )
    _raise(
        problems,
        "write a tool by its MCP name (as tools/list and fixtures/<server>/tools.json have it) or "
        "by its export name (as scripts import it); if the server has a new tool, record it again",
    )
    return ToolNameCheck(renames, tuple(notes), tuple(warnings.values()))


def _unknown_tool(
    source: SettingsSource,
    path: KeyPath,
    sid: str,
    name: str,
    tools: Mapping[str, str],
    recording: Mapping[str, str],
) -> str:
    candidates = [*tools, *(e for e in tools.values() if e not in tools)]
    best = closest(name, candidates)
    suggestion = ""
    if best is not None:
        mcp = best if best in tools else next(m for m, e in tools.items() if e == best)
        suggestion = (
            f"; did you mean `{best}`" + (f" (MCP tool `{mcp}`)" if mcp != best else "") + "?"
        )
    return (
        f"{source.at(*path)}: server `{sid}` has no tool `{name}` (by MCP or export name) in"
        f" {recording.get(sid, 'its recording')}{suggestion}"
    )
