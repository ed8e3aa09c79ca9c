"""The configuration's data model: `ServerConfig`, `Settings` and their parts, with the defaults.

Two files fill it: `.mcp.json` (servers; codemode_gen/mcp_json.py reads it) and the optional
`codemode.toml` (project settings; codemode_gen/codemode_toml.py reads it). This module holds
only what both readers and every command share - the frozen dataclasses, the defaults and
bounds they start from, and the phrasing of a wrong value in a message - so a command that
only passes a `ServerConfig` around imports neither reader.

docs/config.md is the user-facing description of both files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

from codemode_gen.jsonio import json_type
from codemode_gen.settings_schema import SettingsSource

__all__ = [
    "APPROVAL_SETTINGS",
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
    "frozen_mapping",
    "is_int",
    "show_value",
    "type_with_article",
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

Transport = Literal["stdio", "http", "sse"]
UnwrapMode = Literal["spec", "json"]
# The values of `approval` (runtime/host/approval.py): "auto" takes the policy from the tool's MCP
# annotations, the others are the policy itself.
ApprovalSetting = Literal["auto", "allow", "ask", "ask-once", "deny"]
APPROVAL_SETTINGS: tuple[str, ...] = get_args(ApprovalSetting)


OAuthGrantType = Literal["authorization_code", "client_credentials"]
OAUTH_GRANT_TYPES: tuple[str, ...] = get_args(OAuthGrantType)


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


def frozen_mapping(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class ServerConfig:
    """One server from `.mcp.json`, merged with its `[servers.<id>]` settings."""

    id: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=frozen_mapping)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=frozen_mapping)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    unwrap: UnwrapMode = "spec"
    blocklist: tuple[str, ...] = ()
    unbox: bool = False  # boxed results (x-dedalus-box, FastMCP's wrapping) return the inner value
    # Approval policy per tool name (runtime/host/approval.py), and the server's default for the other
    # tools; None: the project default (load_config always folds it in; hand-built configs may
    # leave it to the host's `Settings.approval`).
    approval: Mapping[str, ApprovalSetting] = field(default_factory=frozen_mapping)
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
    approval: Mapping[str, ApprovalSetting] = field(default_factory=frozen_mapping)  # per tool
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
    limits: Mapping[str, Any] = field(default_factory=frozen_mapping)
    servers: Mapping[str, ServerSettings] = field(default_factory=frozen_mapping)
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


# --------------------------------------------------------------------------- messages


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_WITH_ARTICLE = {
    "boolean": "a boolean",
    "integer": "a number",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def type_with_article(value: Any) -> str:
    return _WITH_ARTICLE[json_type(value) or "object"]


def show_value(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
