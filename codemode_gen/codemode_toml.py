"""Reading `codemode.toml` (project settings) into `Settings`: every key's type and range.

Project settings live in an optional `codemode.toml`; every key has a default, so a bare
`.mcp.json` is enough. Relative paths are relative to the directory of codemode.toml. Unknown
keys and servers are errors, and every message names the file and line (settings_schema.py);
tool names are checked against the recordings by generator/project.py.

    fixtures = "fixtures"                  # where `record` writes and `generate` reads
    out = "out"                            # where `generate` writes
    max_samples = 20                       # recorded calls kept per tool
    max_result_bytes = 262144              # largest result `record` keeps per call (cut beyond)
    redact = ["sk-[A-Za-z0-9]+"]           # extra regexes redacted from fixtures
    unbox = false                          # default of [servers.<id>] unbox
    approval = "auto"                      # default approval policy of every tool (see below)
    [telemetry]                            # OpenTelemetry (docs/observability.md); OTEL_* env wins
    traces = true                          # default: on when an OTLP endpoint is set
    endpoint = "http://localhost:4318"     # OTLP/HTTP collector
    [limits]                               # default run limits (spec §3.2.4)
    timeoutMs = 30000
    typecheck = false                      # true: type errors come back as warnings first
    [servers.notes]                        # per server, keyed like mcpServers
    unwrap = "json"                        # "spec" (default) or "json" (parse JSON-in-text)
    connect_timeout = 30                   # seconds for start + initialize + tools/list
    call_timeout = 60                      # seconds per tools/call
    blocklist = ["delete_everything"]      # tools hidden from Code Mode
    unbox = true                           # boxed results ({result: …}) return the inner value
    approval = "ask"                       # this server's default approval policy, or a table:
    [servers.notes.approval]               #   per tool, "*" = the server's default
    "*" = "auto"
    delete_note = "ask-once"
    [[samples]]                            # calls `record` makes (besides auto-probes)
    server = "notes"
    tool = "search_notes"
    input = { query = "milk" }
    expect = "error"                       # optional: a tool error (or "drift") recorded on purpose

Approval policies (runtime/host/approval.py, issue 12) are "auto" (from the tool's MCP annotations:
read-only or `destructiveHint: false` → allow, anything else → ask), "allow", "ask", "ask-once"
(a yes holds for the rest of the session) or "deny". A per-tool "deny" joins the server's
blocklist here, so the tool is hidden everywhere (modules, declarations, discovery, record).

Unknown keys and the line of each value are settings_schema.py's; the data model is
config.py's. docs/config.md is the user-facing version of this text.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codemode_gen.config import (
    APPROVAL_SETTINGS,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MAX_SAMPLES,
    MIN_RESULT_BYTES,
    SAMPLE_EXPECTS,
    TELEMETRY_EXPORTERS,
    Sample,
    ServerSettings,
    Settings,
    TelemetrySettings,
    frozen_mapping,
    is_int,
    show_value,
)
from codemode_gen.errors import UserError
from codemode_gen.limit_bounds import coerce_limit
from codemode_gen.settings_schema import (
    APPROVAL_DEFAULT_KEY,
    SettingsSource,
    check_unknown_keys,
)

__all__ = ["MAX_TIMEOUT_SECONDS", "SETTINGS_FILE_NAME", "load_settings", "parse_sample"]

# Bounds a typo such as `connect_timeout = 30000` (meant ms) from hanging a run for hours.
MAX_TIMEOUT_SECONDS = 3600.0

SETTINGS_FILE_NAME = "codemode.toml"


def load_settings(path: Path | None = None) -> Settings:
    """Read codemode.toml; without `path`, ./codemode.toml if present, else all defaults."""
    if path is None:
        path = Path(SETTINGS_FILE_NAME)
        if not path.is_file():
            return Settings()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(
            f"{path}: settings file not found",
            hint="create it (see docs/config.md) or drop the option to use the defaults",
        ) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read settings file: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: settings file is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(
            f"{path}: invalid TOML: {exc}",
            hint="fix the syntax at that line and column (strings need quotes, tables [brackets])",
        ) from None
    # Unknown keys first: a misspelt key is the likeliest reason a value seems wrong.
    source = SettingsSource(path, raw.decode("utf-8"), data)
    check_unknown_keys(source)
    return _parse_settings(source)


def _parse_settings(source: SettingsSource) -> Settings:
    """Every value's type and range; messages start `codemode.toml:LINE: key` (source.at)."""
    path, data = source.path, dict(source.data)
    base = path.parent
    where = source.at

    def rel(key: str, default: Path) -> Path:
        value = data.get(key)
        if value is None:
            return base / default if base != Path(".") else default
        if not isinstance(value, str) or not value:
            raise UserError(
                f"{where(key)} must be a non-empty string (a directory path), got {show_value(value)}"
            )
        p = Path(value)
        return p if p.is_absolute() or base == Path(".") else base / p

    max_samples = data.get("max_samples", DEFAULT_MAX_SAMPLES)
    if not is_int(max_samples) or max_samples < 1:
        raise UserError(
            f"{where('max_samples')} must be a positive integer, got {show_value(max_samples)}",
            hint="for example max_samples = 20",
        )

    max_result_bytes = data.get("max_result_bytes", DEFAULT_MAX_RESULT_BYTES)
    if not is_int(max_result_bytes) or max_result_bytes < MIN_RESULT_BYTES:
        raise UserError(
            f"{where('max_result_bytes')} must be an integer of at least {MIN_RESULT_BYTES}"
            f" (bytes), got {show_value(max_result_bytes)}",
            hint=f"for example max_result_bytes = {DEFAULT_MAX_RESULT_BYTES}",
        )

    redact = data.get("redact", [])
    if not isinstance(redact, list) or not all(isinstance(p, str) and p for p in redact):
        raise UserError(
            f"{where('redact')} must be a list of regular expressions (strings), got {show_value(redact)}",
            hint='for example redact = ["sk-[A-Za-z0-9]+"]',
        )
    for pattern in redact:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(
                f"{where('redact')}: invalid regular expression {pattern!r}: {exc}",
                hint="use Python `re` syntax; escape literal characters such as . + ( with \\\\",
            ) from None

    limits_raw = data.get("limits", {})
    if not isinstance(limits_raw, dict):
        raise UserError(
            f"{where('limits')} must be a table ([limits]), got {show_value(limits_raw)}"
        )
    limits: dict[str, Any] = {}
    for key, value in limits_raw.items():
        # The bounds every run enforces (limit_bounds.py): a value accepted here never fails a run.
        try:
            limits[key] = coerce_limit(key, value)
        except ValueError as exc:
            raise UserError(
                f"{where('limits', key)}: {exc}",
                hint="limits are integers (milliseconds, bytes, characters or counts; typecheck true or false; "
                'trace "full", "errors" or "none") within the range every run accepts, e.g. timeoutMs = 30000',
            ) from None

    servers_raw = data.get("servers", {})
    if not isinstance(servers_raw, dict):
        raise UserError(
            f"{where('servers')} must be a table ([servers.<id>]), got {show_value(servers_raw)}"
        )
    servers: dict[str, ServerSettings] = {}
    for sid, table in servers_raw.items():
        servers[sid] = _parse_server_settings(
            lambda *keys, sid=sid: where("servers", sid, *keys), table
        )

    unbox = data.get("unbox", False)
    if not isinstance(unbox, bool):
        raise UserError(
            f"{where('unbox')} must be true or false, got {show_value(unbox)}",
            hint="unbox = true returns boxed results ({result: …}) as their inner value for every server",
        )

    approval = data.get("approval", "auto")
    if approval not in APPROVAL_SETTINGS:
        raise UserError(
            f"{where('approval')} must be one of {_choices()}, got {show_value(approval)}",
            hint='"auto" (the default) allows read-only tools and asks before the others; see docs/config.md',
        )

    sandbox_raw = data.get("sandbox", {})
    if not isinstance(sandbox_raw, dict):
        raise UserError(
            f"{where('sandbox')} must be a table ([sandbox]), got {show_value(sandbox_raw)}"
        )
    max_workers = sandbox_raw.get("max_workers")
    if max_workers is not None and (not is_int(max_workers) or max_workers < 1):
        raise UserError(
            f"{where('sandbox', 'max_workers')} must be a positive integer, got {show_value(max_workers)}",
            hint="the most sandbox worker processes running scripts at once, e.g. max_workers = 4",
        )

    telemetry = _parse_telemetry(lambda *keys: where("telemetry", *keys), data.get("telemetry", {}))

    samples_raw = data.get("samples", [])
    if not isinstance(samples_raw, list):
        raise UserError(
            f"{where('samples')} must be an array of tables ([[samples]]), got {show_value(samples_raw)}"
        )
    samples = tuple(parse_sample(item, where("samples", i)) for i, item in enumerate(samples_raw))

    return Settings(
        fixtures_dir=rel("fixtures", Path("fixtures")),
        out_dir=rel("out", Path("out")),
        max_samples=max_samples,
        max_result_bytes=max_result_bytes,
        samples=samples,
        redact_patterns=tuple(redact),
        limits=frozen_mapping(limits),
        servers=frozen_mapping(servers),
        path=path,
        unbox=unbox,
        max_workers=max_workers,
        approval=approval,
        telemetry=telemetry,
        source=source,
    )


def _parse_telemetry(at: Callable[..., str], table: Any) -> TelemetrySettings:
    """`[telemetry]`; `at(*keys)` starts a message about one of its keys."""
    if not isinstance(table, dict):
        raise UserError(f"{at()} must be a table ([telemetry]), got {show_value(table)}")
    for key in ("traces", "metrics", "record_content"):
        if key in table and not isinstance(table[key], bool):
            raise UserError(
                f"{at(key)} must be true or false, got {show_value(table[key])}",
                hint="see docs/observability.md",
            )
    exporter = table.get("exporter")
    if exporter is not None and exporter not in TELEMETRY_EXPORTERS:
        raise UserError(
            f"{at('exporter')} must be one of {', '.join(repr(e) for e in TELEMETRY_EXPORTERS)}, got {show_value(exporter)}",
            hint='"otlp" sends to a collector (the default), "console" writes to stderr, "none" exports nothing',
        )
    endpoint = table.get("endpoint")
    if endpoint is not None and (
        not isinstance(endpoint, str) or not re.match(r"https?://[^\s/]+", endpoint)
    ):
        raise UserError(
            f"{at('endpoint')} must be an http(s) URL, got {show_value(endpoint)}",
            hint='the OTLP/HTTP address of a collector, e.g. endpoint = "http://localhost:4318"',
        )
    service_name = table.get("service_name")
    if service_name is not None and (not isinstance(service_name, str) or not service_name.strip()):
        raise UserError(
            f"{at('service_name')} must be a non-empty string, got {show_value(service_name)}"
        )
    return TelemetrySettings(
        traces=table.get("traces"),
        metrics=table.get("metrics"),
        exporter=exporter,
        endpoint=endpoint.rstrip("/") if endpoint is not None else None,
        service_name=service_name,
        record_content=table.get("record_content", False),
    )


def _parse_server_settings(at: Callable[..., str], table: Any) -> ServerSettings:
    """One [servers.<id>] table; `at(*keys)` starts a message about one of its keys."""
    if not isinstance(table, dict):
        raise UserError(
            f"{at()} must be a table, got {show_value(table)}", hint="write it as [servers.<id>]"
        )
    unwrap = table.get("unwrap", "spec")
    if unwrap not in ("spec", "json"):
        raise UserError(
            f'{at("unwrap")} must be "spec" or "json", got {show_value(unwrap)}',
            hint='"json" also parses tools that return JSON as text; "spec" follows spec §5.3.2 only',
        )
    timeouts: dict[str, float] = {}
    for key, default in (
        ("connect_timeout", DEFAULT_CONNECT_TIMEOUT),
        ("call_timeout", DEFAULT_CALL_TIMEOUT),
    ):
        value = table.get(key, default)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= MAX_TIMEOUT_SECONDS
        ):
            raise UserError(
                f"{at(key)} must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}], got {show_value(value)}",
                hint=f"for example {key} = {default:g}",
            )
        timeouts[key] = float(value)
    blocklist = table.get("blocklist", [])
    if not isinstance(blocklist, list) or not all(isinstance(t, str) for t in blocklist):
        raise UserError(
            f"{at('blocklist')} must be a list of tool names, got {show_value(blocklist)}",
            hint='for example blocklist = ["delete_everything"]',
        )
    unbox = table.get("unbox")
    if unbox is not None and not isinstance(unbox, bool):
        raise UserError(
            f"{at('unbox')} must be true or false, got {show_value(unbox)}",
            hint="true returns boxed results ({result: …}) as their inner value; false (default) as sent (spec §5.3.2)",
        )
    approval, approval_default = _parse_approval(
        lambda *keys: at("approval", *keys), table.get("approval")
    )
    # A denied tool is a blocklisted one: hidden from modules, declarations, discovery, record.
    denied = [
        tool for tool, setting in approval.items() if setting == "deny" and tool not in blocklist
    ]
    return ServerSettings(
        unwrap=unwrap,
        connect_timeout=timeouts["connect_timeout"],
        call_timeout=timeouts["call_timeout"],
        blocklist=(*blocklist, *denied),
        unbox=unbox,
        approval=frozen_mapping(approval),
        approval_default=approval_default,
    )


def _parse_approval(at: Callable[..., str], value: Any) -> tuple[dict[str, Any], Any]:
    """`approval = "ask"` (the server's default) or a table of tool name → setting, in which
    "*" is the server's default; returns (per tool, default or None)."""
    where = at()
    example = f'[{where.rsplit(": ", 1)[-1]}] delete_note = "ask"'
    if value is None:
        return {}, None
    if isinstance(value, str):
        if value not in APPROVAL_SETTINGS:
            raise UserError(
                f"{where} must be one of {_choices()} (or a table of tool names), got {show_value(value)}",
                hint=f"a string sets the default of every tool of this server; per tool write {example}",
            )
        return {}, value
    if not isinstance(value, dict):
        raise UserError(
            f"{where} must be a string ({_choices()}) or a table of tool names, got {show_value(value)}",
            hint=f"for example {example}",
        )
    per_tool: dict[str, Any] = {}
    for tool, setting in value.items():
        if not tool:
            raise UserError(f"{where} has an empty tool name", hint=f"for example {example}")
        if not isinstance(setting, str) or setting not in APPROVAL_SETTINGS:
            raise UserError(
                f"{at(tool)} must be one of {_choices()}, got {show_value(setting)}",
                hint='"ask" asks before every call, "ask-once" once per session, "allow" never, "deny" hides the tool',
            )
        per_tool[tool] = setting
    default = per_tool.pop(APPROVAL_DEFAULT_KEY, None)
    return per_tool, default


def _choices() -> str:
    return ", ".join(f'"{v}"' for v in APPROVAL_SETTINGS)


def parse_sample(item: Any, where: str) -> Sample:
    """Validate one `{"server", "tool", "input"}` sample; shared with `record --samples`."""
    if not isinstance(item, dict):
        raise UserError(
            f"{where} must be an object with server, tool and input, got {show_value(item)}",
            hint='for example {"server": "notes", "tool": "search_notes", "input": {"query": "milk"}}',
        )
    for key in ("server", "tool"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise UserError(
                f"{where}.{key} must be a non-empty string, got {show_value(item.get(key))}",
                hint='each sample names its server (the .mcp.json key) and tool: {"server": "notes", "tool": "search_notes"}',
            )
    value = item.get("input", {})
    if not isinstance(value, dict):
        raise UserError(
            f"{where}.input must be an object (the tool's arguments), got {show_value(value)}",
            hint='MCP tool arguments are always an object, e.g. input = { query = "milk" }',
        )
    expect = item.get("expect")
    if expect is not None and expect not in SAMPLE_EXPECTS:
        raise UserError(
            f'{where}.expect must be "error" or "drift", got {show_value(expect)}',
            hint='leave it out when the call must succeed; "error" records a tool error (isError) on'
            ' purpose, "drift" a result that does not match the declared outputSchema',
        )
    return Sample(server=item["server"], tool=item["tool"], input=value, expect=expect, where=where)
