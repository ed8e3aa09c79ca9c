"""Server configuration (`.mcp.json`) and project settings (`codemode.toml`).

Servers come from the file users already have for their MCP clients, so nothing has to be
written twice: `.mcp.json` / Claude Desktop style

    {"mcpServers": {
        "notes":  {"command": "python", "args": ["server.py"], "env": {"TOKEN": "${TOKEN}"}, "cwd": "."},
        "remote": {"type": "http", "url": "https://example.com/mcp",
                   "headers": {"Authorization": "Bearer ${API_KEY:-dev}"}}}}

`type` is "stdio", "http" (alias "streamable-http"/"streamableHttp") or "sse"; without it a
`command` means stdio and a `url` means Streamable HTTP. Every string value may use `${VAR}`
(an unset VAR is an error naming the file, server and field) or `${VAR:-default}` (the
default is used when VAR is unset or empty); `${CODEMODE_PYTHON}` is the interpreter running
codemode-gen unless the environment sets it. Every value taken from the environment is a
secret (`ServerConfig.secrets`: redacted from whatever is recorded or reported), wherever it
was used; a default written in the file and CODEMODE_PYTHON are not. Keys we do not know are ignored, because the
same file also feeds other clients with their own extensions.

An `http`/`sse` server may carry an `oauth` object (OAuth 2.1 as the MCP authorization spec
describes; the flows are the `mcp` SDK's, driven by codemode_gen/client/oauth_provider.py):

    "crm": {"type": "http", "url": "https://crm.example.com/mcp",
            "oauth": {"clientId": "${CRM_CLIENT_ID}", "clientSecret": "${CRM_CLIENT_SECRET}",
                      "grantType": "client_credentials", "scope": "crm:read"}}

Without `oauth`, `codemode-gen auth login ID` registers a client dynamically. Its keys are
checked (a misspelt `clientSecert` must not silently send no secret); `clientSecret` and
`privateKey` are secrets even when written in the file.

Paths in `.mcp.json` are relative to the folder holding it, not to the process's working
directory: an agent client launches `serve` from wherever it likes. A stdio server's `cwd`
defaults to that folder, a relative `cwd` is resolved against it, and so is a relative
`command` with a path separator (`./bin/server`, `.venv/bin/python`); a bare name (`npx`) is
still looked up on PATH. `project_settings` roots codemode.toml and the default out/ there too.

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

docs/config.md is the user-facing version of this text.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from codemode_gen.errors import UserError
from codemode_gen.jsonio import json_type, read_json
from codemode_gen.limit_bounds import coerce_limit
from codemode_gen.settings_schema import (
    APPROVAL_DEFAULT_KEY,
    SettingsSource,
    check_server_ids,
    check_unknown_keys,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_SAMPLES",
    "MIN_RESULT_BYTES",
    "OAUTH_GRANT_TYPES",
    "SAMPLE_EXPECTS",
    "OAuthSettings",
    "Sample",
    "SampleExpect",
    "ServerConfig",
    "ServerSettings",
    "Settings",
    "TelemetrySettings",
    "expand_vars",
    "load_config",
    "load_settings",
    "project_settings",
    "server_ids",
]

# Bounds a server that never finishes starting/initializing/listing: the SDK would wait forever.
DEFAULT_CONNECT_TIMEOUT = 30.0
# Bounds a tool call that never answers, so one hung server cannot stall record/run forever.
DEFAULT_CALL_TIMEOUT = 60.0
# Bounds fixture growth: repeated `record` runs keep at most this many calls per tool.
DEFAULT_MAX_SAMPLES = 20
# Bounds what `record` keeps of one call's result (UTF-8 bytes of its JSON line part): a server
# answering with 50 MiB of text wrote it whole into fixtures/ (committed, read by generate).
# Larger results are cut, marked and reported; 256 KiB is far beyond what inference needs.
DEFAULT_MAX_RESULT_BYTES = 256 * 1024
# Below this a cut result could not even hold its truncation markers.
MIN_RESULT_BYTES = 1024
# Bounds a typo such as `connect_timeout = 30000` (meant ms) from hanging a run for hours.
MAX_TIMEOUT_SECONDS = 3600.0

Transport = Literal["stdio", "http", "sse"]
UnwrapMode = Literal["spec", "json"]
# The values of `approval` (runtime/host/approval.py): "auto" takes the policy from the tool's MCP
# annotations, the others are the policy itself.
ApprovalSetting = Literal["auto", "allow", "ask", "ask-once", "deny"]
APPROVAL_SETTINGS: tuple[str, ...] = get_args(ApprovalSetting)

_TRANSPORT_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "sse": "sse",
}
_VAR_RE = re.compile(r"\$\{([^}:]*)(?::-([^}]*))?\}")
# Variables with a value of their own when the environment leaves them unset or empty: a client
# launches `serve` without the project's virtualenv active, so a demo config saying "python"
# would start an interpreter without the `mcp` package; "${CODEMODE_PYTHON:-python}" names the
# one running codemode-gen (which has it) and still means something to other readers.
BUILTIN_VARS: dict[str, Callable[[], str | None]] = {"CODEMODE_PYTHON": lambda: sys.executable or None}
_VAR_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


OAuthGrantType = Literal["authorization_code", "client_credentials"]
OAUTH_GRANT_TYPES: tuple[str, ...] = get_args(OAuthGrantType)
# `oauth.tokenEndpointAuthMethod` values a configured client may use (the SDK applies them).
_OAUTH_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
# Keys of `oauth`, camelCase as in the rest of .mcp.json; `callbackPort` is Claude Code's name
# for `redirectPort`, so a file written for it works here too.
_OAUTH_KEYS = (
    "grantType", "clientId", "clientSecret", "scope", "redirectPort", "callbackPort", "clientMetadataUrl",
    "issuer", "privateKey", "privateKeyFile", "signingAlgorithm", "tokenEndpointAuthMethod",
)


@dataclass(frozen=True)
class OAuthSettings:
    """The `oauth` object of an http/sse server (see the module docstring and docs/config.md).

    `grant_type` "authorization_code" is the interactive flow (`codemode-gen auth login`): with
    `client_id` a pre-registered client, else a client ID metadata document (`client_metadata_url`)
    or dynamic registration. "client_credentials" is headless (CI, a server process): tokens are
    fetched when needed with `client_id` and `client_secret`, or a private-key JWT signed with
    `private_key` (PEM) / `private_key_file`."""

    grant_type: OAuthGrantType = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    redirect_port: int | None = None  # the loopback port of `auth login`; None: a free one
    client_metadata_url: str | None = None
    issuer: str | None = None  # the authorization server the client belongs to (pinned when set)
    private_key: str | None = None
    private_key_file: str | None = None  # absolute (resolved against the config's folder)
    signing_algorithm: str = "RS256"
    token_endpoint_auth_method: str | None = None

    def secrets(self) -> list[tuple[str, str]]:
        """Credentials of the client itself, secret even when written in the file."""
        found = [("oauth.clientSecret", self.client_secret), ("oauth.privateKey", self.private_key)]
        return [(name, value) for name, value in found if value]


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class ServerConfig:
    """One server from `.mcp.json`, merged with its `[servers.<id>]` settings."""

    id: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_frozen)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=_frozen)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    unwrap: UnwrapMode = "spec"
    blocklist: tuple[str, ...] = ()
    unbox: bool = False  # boxed results (x-dedalus-box, FastMCP's wrapping) return the inner value
    # Approval policy per tool name (runtime/host/approval.py), and the server's default for the other
    # tools; None: the project default (load_config always folds it in; hand-built configs may
    # leave it to the host's `Settings.approval`).
    approval: Mapping[str, ApprovalSetting] = field(default_factory=_frozen)
    approval_default: ApprovalSetting | None = None
    # (VAR, value) of every `${VAR}` that command, args, env, cwd, url, headers or oauth took from
    # the environment (not a `:-default` of the file, not CODEMODE_PYTHON): `secrets` has them.
    env_values: tuple[tuple[str, str], ...] = ()
    oauth: OAuthSettings | None = None  # the `oauth` object of an http/sse server

    def secrets(self) -> list[tuple[str, str]]:
        """(name, value) pairs that must never reach a fixture or a report: every env and header
        value, every value that came from an environment variable, wherever it was used, and the
        OAuth client's own credentials. Tokens are dynamic: client/oauth_records.py's `live_secrets`."""
        oauth = self.oauth.secrets() if self.oauth is not None else []
        return [*self.env.items(), *self.headers.items(), *self.env_values, *oauth]


@dataclass(frozen=True)
class ServerSettings:
    """`[servers.<id>]` in codemode.toml."""

    unwrap: UnwrapMode = "spec"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    blocklist: tuple[str, ...] = ()
    unbox: bool | None = None  # None: the project default (`unbox` at the top of codemode.toml)
    approval: Mapping[str, ApprovalSetting] = field(default_factory=_frozen)  # per tool
    approval_default: ApprovalSetting | None = None  # None: the project default (`approval`)


SampleExpect = Literal["error", "drift"]
SAMPLE_EXPECTS: tuple[str, ...] = get_args(SampleExpect)


@dataclass(frozen=True)
class Sample:
    """One call `record` makes: `[[samples]]` in codemode.toml or a line of `--samples`."""

    server: str
    tool: str
    input: Any = field(default_factory=dict)
    # A failure this sample is meant to record (otherwise a failure of `record`): "error" keeps
    # a tool error (isError) for replay, "drift" a result that breaks the declared outputSchema.
    expect: SampleExpect | None = None
    where: str = field(default="", compare=False)  # its file and entry, for messages


#: Where telemetry goes (`[telemetry] exporter`): an OTLP collector, stderr, or nowhere (spans
#: and metrics are still made: what measuring their cost needs).
TelemetryExporter = Literal["otlp", "console", "none"]
TELEMETRY_EXPORTERS: tuple[str, ...] = get_args(TelemetryExporter)


@dataclass(frozen=True)
class TelemetrySettings:
    """`[telemetry]` (runtime/host/telemetry.py, docs/observability.md): defaults for what the
    standard OTEL_* environment variables say; each None is decided by them."""

    traces: bool | None = None  # None: on when an OTLP endpoint (or OTEL_TRACES_EXPORTER) is set
    metrics: bool | None = None  # OTLP export of the metrics; None: as for traces
    exporter: TelemetryExporter | None = None  # None: OTEL_TRACES_EXPORTER, else "otlp"
    endpoint: str | None = None  # OTLP/HTTP base URL; OTEL_EXPORTER_OTLP_ENDPOINT wins
    service_name: str | None = None  # OTEL_SERVICE_NAME wins; default "codemode-gen"
    # Script text and tool inputs/outputs in span attributes (redacted, cut): off, as they may
    # hold data the tracing backend's readers must not see.
    record_content: bool = False


@dataclass(frozen=True)
class Settings:
    """codemode.toml; all optional."""

    fixtures_dir: Path = Path("fixtures")
    out_dir: Path = Path("out")
    max_samples: int = DEFAULT_MAX_SAMPLES
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    samples: tuple[Sample, ...] = ()
    redact_patterns: tuple[str, ...] = ()
    limits: Mapping[str, Any] = field(default_factory=_frozen)
    servers: Mapping[str, ServerSettings] = field(default_factory=_frozen)
    path: Path | None = None  # the codemode.toml these came from, for messages; None = defaults
    unbox: bool = False  # project default of `[servers.<id>] unbox`
    max_workers: int | None = None  # [sandbox] max_workers: runs at once; None = two per CPU
    approval: ApprovalSetting = "auto"  # project default of every tool's approval policy
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)  # [telemetry]
    # The file these came from, with its text: where each value is (settings_schema.py); None
    # for defaults or hand-built settings.
    source: SettingsSource | None = field(default=None, compare=False, repr=False)

    def unbox_for(self, server_id: str) -> bool:
        """Whether boxed results of this server are unboxed: its own setting, else the default."""
        server = self.servers.get(server_id)
        return server.unbox if server is not None and server.unbox is not None else self.unbox


# --------------------------------------------------------------------------- codemode.toml

_TOML_NAME = "codemode.toml"


def load_settings(path: Path | None = None) -> Settings:
    """Read codemode.toml; without `path`, ./codemode.toml if present, else all defaults."""
    if path is None:
        path = Path(_TOML_NAME)
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
            raise UserError(f"{where(key)} must be a non-empty string (a directory path), got {_show(value)}")
        p = Path(value)
        return p if p.is_absolute() or base == Path(".") else base / p

    max_samples = data.get("max_samples", DEFAULT_MAX_SAMPLES)
    if not _is_int(max_samples) or max_samples < 1:
        raise UserError(
            f"{where('max_samples')} must be a positive integer, got {_show(max_samples)}",
            hint="for example max_samples = 20",
        )

    max_result_bytes = data.get("max_result_bytes", DEFAULT_MAX_RESULT_BYTES)
    if not _is_int(max_result_bytes) or max_result_bytes < MIN_RESULT_BYTES:
        raise UserError(
            f"{where('max_result_bytes')} must be an integer of at least {MIN_RESULT_BYTES}"
            f" (bytes), got {_show(max_result_bytes)}",
            hint=f"for example max_result_bytes = {DEFAULT_MAX_RESULT_BYTES}",
        )

    redact = data.get("redact", [])
    if not isinstance(redact, list) or not all(isinstance(p, str) and p for p in redact):
        raise UserError(
            f"{where('redact')} must be a list of regular expressions (strings), got {_show(redact)}",
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
        raise UserError(f"{where('limits')} must be a table ([limits]), got {_show(limits_raw)}")
    limits: dict[str, Any] = {}
    for key, value in limits_raw.items():
        # The bounds every run enforces (limit_bounds.py): a value accepted here never fails a run.
        try:
            limits[key] = coerce_limit(key, value)
        except ValueError as exc:
            raise UserError(
                f"{where('limits', key)}: {exc}",
                hint="limits are integers (milliseconds, bytes, characters or counts; typecheck true or false; "
                     "trace \"full\", \"errors\" or \"none\") within the range every run accepts, e.g. timeoutMs = 30000",
            ) from None

    servers_raw = data.get("servers", {})
    if not isinstance(servers_raw, dict):
        raise UserError(f"{where('servers')} must be a table ([servers.<id>]), got {_show(servers_raw)}")
    servers: dict[str, ServerSettings] = {}
    for sid, table in servers_raw.items():
        servers[sid] = _parse_server_settings(lambda *keys, sid=sid: where("servers", sid, *keys), table)

    unbox = data.get("unbox", False)
    if not isinstance(unbox, bool):
        raise UserError(
            f"{where('unbox')} must be true or false, got {_show(unbox)}",
            hint="unbox = true returns boxed results ({result: …}) as their inner value for every server",
        )

    approval = data.get("approval", "auto")
    if approval not in APPROVAL_SETTINGS:
        raise UserError(
            f"{where('approval')} must be one of {_choices()}, got {_show(approval)}",
            hint='"auto" (the default) allows read-only tools and asks before the others; see docs/config.md',
        )

    sandbox_raw = data.get("sandbox", {})
    if not isinstance(sandbox_raw, dict):
        raise UserError(f"{where('sandbox')} must be a table ([sandbox]), got {_show(sandbox_raw)}")
    max_workers = sandbox_raw.get("max_workers")
    if max_workers is not None and (not _is_int(max_workers) or max_workers < 1):
        raise UserError(
            f"{where('sandbox', 'max_workers')} must be a positive integer, got {_show(max_workers)}",
            hint="the most sandbox worker processes running scripts at once, e.g. max_workers = 4",
        )

    telemetry = _parse_telemetry(lambda *keys: where("telemetry", *keys), data.get("telemetry", {}))

    samples_raw = data.get("samples", [])
    if not isinstance(samples_raw, list):
        raise UserError(f"{where('samples')} must be an array of tables ([[samples]]), got {_show(samples_raw)}")
    samples = tuple(
        parse_sample(item, where("samples", i)) for i, item in enumerate(samples_raw)
    )

    return Settings(
        fixtures_dir=rel("fixtures", Path("fixtures")),
        out_dir=rel("out", Path("out")),
        max_samples=max_samples,
        max_result_bytes=max_result_bytes,
        samples=samples,
        redact_patterns=tuple(redact),
        limits=_frozen(limits),
        servers=_frozen(servers),
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
        raise UserError(f"{at()} must be a table ([telemetry]), got {_show(table)}")
    for key in ("traces", "metrics", "record_content"):
        if key in table and not isinstance(table[key], bool):
            raise UserError(f"{at(key)} must be true or false, got {_show(table[key])}",
                            hint="see docs/observability.md")
    exporter = table.get("exporter")
    if exporter is not None and exporter not in TELEMETRY_EXPORTERS:
        raise UserError(
            f"{at('exporter')} must be one of {', '.join(repr(e) for e in TELEMETRY_EXPORTERS)}, got {_show(exporter)}",
            hint='"otlp" sends to a collector (the default), "console" writes to stderr, "none" exports nothing',
        )
    endpoint = table.get("endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not re.match(r"https?://[^\s/]+", endpoint)):
        raise UserError(f"{at('endpoint')} must be an http(s) URL, got {_show(endpoint)}",
                        hint='the OTLP/HTTP address of a collector, e.g. endpoint = "http://localhost:4318"')
    service_name = table.get("service_name")
    if service_name is not None and (not isinstance(service_name, str) or not service_name.strip()):
        raise UserError(f"{at('service_name')} must be a non-empty string, got {_show(service_name)}")
    return TelemetrySettings(
        traces=table.get("traces"), metrics=table.get("metrics"), exporter=exporter,
        endpoint=endpoint.rstrip("/") if endpoint is not None else None, service_name=service_name,
        record_content=table.get("record_content", False),
    )


def _parse_server_settings(at: Callable[..., str], table: Any) -> ServerSettings:
    """One [servers.<id>] table; `at(*keys)` starts a message about one of its keys."""
    if not isinstance(table, dict):
        raise UserError(f"{at()} must be a table, got {_show(table)}", hint="write it as [servers.<id>]")
    unwrap = table.get("unwrap", "spec")
    if unwrap not in ("spec", "json"):
        raise UserError(
            f"{at('unwrap')} must be \"spec\" or \"json\", got {_show(unwrap)}",
            hint='"json" also parses tools that return JSON as text; "spec" follows spec §5.3.2 only',
        )
    timeouts: dict[str, float] = {}
    for key, default in (("connect_timeout", DEFAULT_CONNECT_TIMEOUT), ("call_timeout", DEFAULT_CALL_TIMEOUT)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT_SECONDS:
            raise UserError(
                f"{at(key)} must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:g}], got {_show(value)}",
                hint=f"for example {key} = {default:g}",
            )
        timeouts[key] = float(value)
    blocklist = table.get("blocklist", [])
    if not isinstance(blocklist, list) or not all(isinstance(t, str) for t in blocklist):
        raise UserError(
            f"{at('blocklist')} must be a list of tool names, got {_show(blocklist)}",
            hint='for example blocklist = ["delete_everything"]',
        )
    unbox = table.get("unbox")
    if unbox is not None and not isinstance(unbox, bool):
        raise UserError(
            f"{at('unbox')} must be true or false, got {_show(unbox)}",
            hint="true returns boxed results ({result: …}) as their inner value; false (default) as sent (spec §5.3.2)",
        )
    approval, approval_default = _parse_approval(lambda *keys: at("approval", *keys), table.get("approval"))
    # A denied tool is a blocklisted one: hidden from modules, declarations, discovery, record.
    denied = [tool for tool, setting in approval.items() if setting == "deny" and tool not in blocklist]
    return ServerSettings(
        unwrap=unwrap,
        connect_timeout=timeouts["connect_timeout"],
        call_timeout=timeouts["call_timeout"],
        blocklist=(*blocklist, *denied),
        unbox=unbox,
        approval=_frozen(approval),
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
                f"{where} must be one of {_choices()} (or a table of tool names), got {_show(value)}",
                hint=f'a string sets the default of every tool of this server; per tool write {example}',
            )
        return {}, value
    if not isinstance(value, dict):
        raise UserError(
            f"{where} must be a string ({_choices()}) or a table of tool names, got {_show(value)}",
            hint=f"for example {example}",
        )
    per_tool: dict[str, Any] = {}
    for tool, setting in value.items():
        if not tool:
            raise UserError(f"{where} has an empty tool name", hint=f"for example {example}")
        if not isinstance(setting, str) or setting not in APPROVAL_SETTINGS:
            raise UserError(
                f"{at(tool)} must be one of {_choices()}, got {_show(setting)}",
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
            f"{where} must be an object with server, tool and input, got {_show(item)}",
            hint='for example {"server": "notes", "tool": "search_notes", "input": {"query": "milk"}}',
        )
    for key in ("server", "tool"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise UserError(
                f"{where}.{key} must be a non-empty string, got {_show(item.get(key))}",
                hint='each sample names its server (the .mcp.json key) and tool: {"server": "notes", "tool": "search_notes"}',
            )
    value = item.get("input", {})
    if not isinstance(value, dict):
        raise UserError(
            f"{where}.input must be an object (the tool's arguments), got {_show(value)}",
            hint="MCP tool arguments are always an object, e.g. input = { query = \"milk\" }",
        )
    expect = item.get("expect")
    if expect is not None and expect not in SAMPLE_EXPECTS:
        raise UserError(
            f"{where}.expect must be \"error\" or \"drift\", got {_show(expect)}",
            hint='leave it out when the call must succeed; "error" records a tool error (isError) on'
            ' purpose, "drift" a result that does not match the declared outputSchema',
        )
    return Sample(server=item["server"], tool=item["tool"], input=value, expect=expect, where=where)


# --------------------------------------------------------------------------- .mcp.json


def expand_vars(
    text: str,
    environ: Mapping[str, str],
    *,
    where: str,
    from_env: list[tuple[str, str]] | None = None,
) -> str:
    """Expand `${VAR}` and `${VAR:-default}` (default when unset or empty), like a POSIX shell.

    `from_env` collects (VAR, value) for every value taken from `environ`: those are secrets
    (`ServerConfig.secrets`). A default written in the file and the builtin CODEMODE_PYTHON
    (an interpreter path, never a credential) are not collected."""

    def repl(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if not _VAR_NAME_RE.match(name):
            raise UserError(
                f"{where}: invalid variable reference {match.group(0)!r}",
                hint="write ${NAME} or ${NAME:-default} with NAME made of letters, digits and _",
            )
        value = environ.get(name)
        if value:
            if from_env is not None and name not in BUILTIN_VARS:
                from_env.append((name, value))
            return value
        builtin = BUILTIN_VARS.get(name)
        if builtin is not None and (found := builtin()):
            return found
        if default is not None:
            return default
        if value is not None:  # set but empty, no default: the user asked for exactly that
            return value
        raise UserError(
            f"{where}: environment variable {name} is not set",
            hint=f"export {name}=... before running, or write ${{{name}:-default}} to give a default",
        )

    return _VAR_RE.sub(repl, text)


def load_config(
    mcp_path: Path,
    settings: Settings | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    problems: dict[str, UserError] | None = None,
) -> dict[str, ServerConfig]:
    """Read `.mcp.json` (or a Claude Desktop config) into ServerConfigs, in file order.

    Relative paths in it are resolved against its folder (see the module docstring), so the
    result does not depend on the working directory of whoever launched us. `problems`: given,
    an entry that cannot be used (e.g. a `${VAR}` not set) is put there instead of stopping the
    whole file, for `codemode-gen auth`, which handles one server: logging in to one must not
    need the CI variables of another.
    """
    settings = settings if settings is not None else Settings()
    env = os.environ if environ is None else environ
    if not mcp_path.exists():
        raise UserError(
            f"{mcp_path}: MCP server config not found",
            hint='create it with {"mcpServers": {...}} (see docs/config.md) or pass --config PATH',
        )
    data = read_json(mcp_path, what="MCP server config")
    if not isinstance(data, dict):
        raise UserError(
            f"{mcp_path}: expected a JSON object with an \"mcpServers\" key, got {_json_type(data)}",
            hint='write {"mcpServers": {"<id>": {"command": "...", "args": [...]}}}',
        )
    servers = data.get("mcpServers")
    if servers is None:
        hint = 'add {"mcpServers": {"<id>": {"command": "...", "args": [...]}}}'
        if isinstance(data.get("servers"), dict):
            hint = 'rename the "servers" key to "mcpServers" (VS Code style configs are not read as is)'
        raise UserError(f"{mcp_path}: no \"mcpServers\" object", hint=hint)
    if not isinstance(servers, dict):
        raise UserError(
            f"{mcp_path}: \"mcpServers\" must be an object mapping server ids to settings, got {_json_type(servers)}",
            hint='write {"mcpServers": {"<id>": {"command": "..."}}}',
        )
    base = Path(os.path.abspath(mcp_path)).parent
    result: dict[str, ServerConfig] = {}
    for sid, entry in servers.items():
        try:
            result[sid] = _resolve_paths(_parse_server(mcp_path, sid, entry, settings, env), base)
        except UserError as exc:
            if problems is None or not isinstance(sid, str):
                raise
            problems[sid] = exc
    return result


def _resolve_paths(config: ServerConfig, base: Path) -> ServerConfig:
    """Anchor a stdio server's `cwd` and path-like `command` at the config's folder."""
    if config.transport != "stdio":
        return config
    cwd = base if config.cwd is None else base / config.cwd
    command = config.command or ""
    if os.sep in command or (os.altsep and os.altsep in command):
        command = os.path.normpath(base / command)
    return replace(config, cwd=os.path.normpath(cwd), command=command)


def project_settings(config_path: Path, settings_path: Path | None = None) -> Settings:
    """Settings for a project identified by its `.mcp.json`.

    `settings_path` if given, else the codemode.toml beside the config, else the defaults
    rooted at the config's folder: a client launching `serve --config /abs/.mcp.json` from its
    own working directory must get the project's out/, not a stray ./out/ of that directory.
    The servers it names must be servers of the config (settings_schema.check_server_ids);
    its tool names are checked against the recordings by generator/project.py, which every
    command loads settings through.
    """
    if settings_path is not None:
        settings = load_settings(settings_path)
    else:
        base = Path(os.path.abspath(config_path)).parent
        beside = base / _TOML_NAME
        if not beside.is_file():
            return Settings(fixtures_dir=base / "fixtures", out_dir=base / "out")
        settings = load_settings(beside)
    known = server_ids(config_path)
    if settings.source is not None and known is not None:
        check_server_ids(settings.source, known, config_path)
    return settings


def server_ids(config_path: Path) -> list[str] | None:
    """The server ids of `.mcp.json`, or None when it cannot be read: load_config says why, for
    the commands that need it (`generate`, `check` and `policy` do not)."""
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    return list(servers) if isinstance(servers, dict) else None


def _parse_server(
    path: Path, sid: str, entry: Any, settings: Settings, environ: Mapping[str, str]
) -> ServerConfig:
    where = f"{path}: mcpServers.{sid}"
    _check_server_id(where, sid)
    from_env: list[tuple[str, str]] = []  # (VAR, value) expanded from the environment: secrets
    if not isinstance(entry, dict):
        raise UserError(
            f"{where} must be an object, got {_json_type(entry)}",
            hint='a server is {"command": "...", "args": [...]} or {"type": "http", "url": "..."}',
        )

    def string(key: str) -> str | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise UserError(f"{where}.{key} must be a string, got {_json_type(value)}")
        return expand_vars(value, environ, where=f"{where}.{key}", from_env=from_env)

    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UserError(
                f"{where}.{key} must be a list of strings, got {_show(value)}",
                hint='for example "args": ["server.py", "--port", "8000"] (numbers need quotes)',
            )
        return tuple(
            expand_vars(v, environ, where=f"{where}.{key}[{i}]", from_env=from_env) for i, v in enumerate(value)
        )

    def string_map(key: str) -> dict[str, str]:
        value = entry.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UserError(
                f"{where}.{key} must be an object of strings, got {_show(value)}",
                hint=f'for example "{key}": {{"NAME": "value"}} (numbers and booleans need quotes)',
            )
        return {k: expand_vars(v, environ, where=f"{where}.{key}.{k}", from_env=from_env) for k, v in value.items()}

    kind = entry.get("type", entry.get("transport"))
    command = string("command")
    url = string("url")
    transport: Transport
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _TRANSPORT_ALIASES:
            raise UserError(
                f"{where}.type must be \"stdio\", \"http\" or \"sse\", got {_show(kind)}",
                hint='"streamable-http" is accepted as an alias of "http"',
            )
        transport = _TRANSPORT_ALIASES[kind.lower()]
    elif command is not None:
        transport = "stdio"
    elif url is not None:
        transport = "http"
    else:
        raise UserError(
            f"{where} has neither \"command\" nor \"url\"",
            hint='give "command" (and "args") to start a local server, or "url" (and "type": "http"/"sse") for a remote one',
        )
    if transport == "stdio" and not command:
        raise UserError(
            f"{where}: a stdio server needs a non-empty \"command\"",
            hint='for example "command": "python", "args": ["server.py"]',
        )
    if transport != "stdio":
        if not url:
            raise UserError(
                f"{where}: an {transport} server needs a \"url\"",
                hint='for example "url": "http://127.0.0.1:8000/mcp"',
            )
        if not re.match(r"https?://[^/\s]+", url):
            raise UserError(
                f"{where}.url must be an http:// or https:// URL, got {url!r}",
                hint='for example "url": "http://127.0.0.1:8000/mcp"',
            )
    per = settings.servers.get(sid, ServerSettings())
    args = strings("args") if transport == "stdio" else ()
    env = string_map("env")
    cwd = string("cwd") if transport == "stdio" else None
    headers = string_map("headers") if transport != "stdio" else {}
    oauth = None
    if entry.get("oauth") is not None:
        if transport == "stdio":
            raise UserError(
                f"{where}.oauth: only an http or sse server authenticates with OAuth",
                hint='remove "oauth" from this stdio server (give it credentials through "env")',
            )
        oauth = _parse_oauth(f"{where}.oauth", entry["oauth"], environ, from_env, Path(os.path.abspath(path)).parent)
    return ServerConfig(
        id=sid,
        transport=transport,
        command=command if transport == "stdio" else None,
        args=args,
        env=_frozen(env),
        cwd=cwd,
        url=url if transport != "stdio" else None,
        headers=_frozen(headers),
        env_values=tuple(dict.fromkeys(from_env)),
        connect_timeout=per.connect_timeout,
        call_timeout=per.call_timeout,
        unwrap=per.unwrap,
        blocklist=per.blocklist,
        unbox=settings.unbox_for(sid),
        approval=per.approval,
        approval_default=per.approval_default if per.approval_default is not None else settings.approval,
        oauth=oauth,
    )


def _parse_oauth(
    where: str, value: Any, environ: Mapping[str, str], from_env: list[tuple[str, str]], base: Path
) -> OAuthSettings:
    """The `oauth` object: every string `${VAR}`-expanded (values from the environment are
    secrets, like everywhere else), unknown keys refused with the known ones named."""
    example = '"oauth": {"clientId": "${CLIENT_ID}", "clientSecret": "${CLIENT_SECRET}", "grantType": "client_credentials"}'
    if not isinstance(value, dict):
        raise UserError(f"{where} must be an object, got {_json_type(value)}", hint=f"for example {example}")
    unknown = [key for key in value if key not in _OAUTH_KEYS]
    if unknown:
        raise UserError(
            f"{where}: unknown key {_show(unknown[0])}",
            hint=f"known keys: {', '.join(k for k in _OAUTH_KEYS if k != 'callbackPort')}",
        )

    def text(key: str) -> str | None:
        raw = value.get(key)
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise UserError(f"{where}.{key} must be a string, got {_json_type(raw)}", hint=f"for example {example}")
        expanded = expand_vars(raw, environ, where=f"{where}.{key}", from_env=from_env)
        return expanded or None

    grant = text("grantType") or "authorization_code"
    if grant not in OAUTH_GRANT_TYPES:
        raise UserError(
            f"{where}.grantType must be \"authorization_code\" or \"client_credentials\", got {_show(grant)}",
            hint='"authorization_code" (the default) logs in with `codemode-gen auth login`;'
            ' "client_credentials" fetches tokens headlessly (CI) with clientId and clientSecret or privateKey',
        )
    port_key = "redirectPort" if "redirectPort" in value else "callbackPort"
    port_raw: Any = value.get(port_key)
    if isinstance(port_raw, str):
        port_raw = expand_vars(port_raw, environ, where=f"{where}.{port_key}", from_env=from_env)
        port_raw = int(port_raw) if port_raw.isdigit() else port_raw
    port: int | None = port_raw if _is_int(port_raw) and 0 < port_raw < 65536 else None
    if port_raw is not None and port is None:
        raise UserError(
            f"{where}.{port_key} must be a port number (1-65535), got {_show(port_raw)}",
            hint="the loopback port registered with the authorization server for this client, e.g. 8976",
        )
    metadata_url = text("clientMetadataUrl")
    if metadata_url is not None and not re.match(r"https://[^/\s]+/\S+", metadata_url):
        raise UserError(
            f"{where}.clientMetadataUrl must be an https:// URL with a path, got {_show(metadata_url)}",
            hint="the URL of this client's metadata document (it becomes the client id), e.g. https://example.com/codemode-client.json",
        )
    issuer = text("issuer")
    if issuer is not None and not re.match(r"https?://[^/\s]+", issuer):
        raise UserError(
            f"{where}.issuer must be the authorization server's http(s) issuer URL, got {_show(issuer)}",
            hint='for example "issuer": "https://auth.example.com"',
        )
    method = text("tokenEndpointAuthMethod")
    if method is not None and method not in _OAUTH_AUTH_METHODS:
        raise UserError(
            f"{where}.tokenEndpointAuthMethod must be one of {', '.join(_OAUTH_AUTH_METHODS)}, got {_show(method)}",
            hint="leave it out to use client_secret_basic with a clientSecret, none without",
        )
    key_file = text("privateKeyFile")
    if key_file is not None:
        key_file = os.path.normpath(base / key_file)
    settings = OAuthSettings(
        grant_type=grant,  # type: ignore[arg-type]  # checked against OAUTH_GRANT_TYPES above
        client_id=text("clientId"),
        client_secret=text("clientSecret"),
        scope=text("scope"),
        redirect_port=port,
        client_metadata_url=metadata_url,
        issuer=issuer,
        private_key=text("privateKey"),
        private_key_file=key_file,
        signing_algorithm=text("signingAlgorithm") or "RS256",
        token_endpoint_auth_method=method,
    )
    if settings.grant_type == "client_credentials":
        if settings.client_id is None:
            raise UserError(
                f"{where}: grantType \"client_credentials\" needs a clientId",
                hint=f"for example {example}",
            )
        if settings.client_secret is None and settings.private_key is None and settings.private_key_file is None:
            raise UserError(
                f"{where}: grantType \"client_credentials\" needs a clientSecret, privateKey or privateKeyFile",
                hint='keep it out of the file: "clientSecret": "${CLIENT_SECRET}"',
            )
    elif settings.private_key is not None or settings.private_key_file is not None:
        raise UserError(
            f"{where}: a private key signs client-credentials requests only",
            hint='add "grantType": "client_credentials", or drop privateKey/privateKeyFile',
        )
    return settings


def _check_server_id(where: str, sid: str) -> None:
    # The id names the fixtures folder, so it must be one safe path component.
    if not sid or sid in (".", "..") or any(c in sid for c in "/\\\0") or sid.startswith("."):
        raise UserError(
            f"{where}: server id {sid!r} cannot be used as a folder name",
            hint="use letters, digits, '-', '_' or '.', not starting with '.' and without slashes",
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_WITH_ARTICLE = {"boolean": "a boolean", "integer": "a number", "number": "a number",
                 "string": "a string", "array": "an array", "object": "an object", "null": "null"}


def _json_type(value: Any) -> str:
    return _WITH_ARTICLE[json_type(value) or "object"]


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
