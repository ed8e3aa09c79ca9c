"""Reading `.mcp.json` into `ServerConfig`s: `${VAR}` expansion, paths anchored at its folder, `oauth`.

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

`project_settings` joins the two files of a project: the codemode.toml beside `.mcp.json`
(codemode_gen/codemode_toml.py), its servers checked against this file's.
docs/config.md is the user-facing version of this text.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from codemode_gen.codemode_toml import SETTINGS_FILE_NAME, load_settings
from codemode_gen.config import (
    OAUTH_GRANT_TYPES,
    OAuthSettings,
    ServerConfig,
    ServerSettings,
    Settings,
    Transport,
    frozen_mapping,
    is_int,
    show_value,
    type_with_article,
)
from codemode_gen.errors import UserError
from codemode_gen.jsonio import read_json
from codemode_gen.settings_schema import check_server_ids

__all__ = ["BUILTIN_VARS", "expand_vars", "load_config", "project_settings", "server_ids"]

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
BUILTIN_VARS: dict[str, Callable[[], str | None]] = {
    "CODEMODE_PYTHON": lambda: sys.executable or None
}
_VAR_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# `oauth.tokenEndpointAuthMethod` values a configured client may use (the SDK applies them).
_OAUTH_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
# Keys of `oauth`, camelCase as in the rest of .mcp.json; `callbackPort` is Claude Code's name
# for `redirectPort`, so a file written for it works here too.
_OAUTH_KEYS = (
    "grantType",
    "clientId",
    "clientSecret",
    "scope",
    "redirectPort",
    "callbackPort",
    "clientMetadataUrl",
    "issuer",
    "privateKey",
    "privateKeyFile",
    "signingAlgorithm",
    "tokenEndpointAuthMethod",
)


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
            f'{mcp_path}: expected a JSON object with an "mcpServers" key, got {type_with_article(data)}',
            hint='write {"mcpServers": {"<id>": {"command": "...", "args": [...]}}}',
        )
    servers = data.get("mcpServers")
    if servers is None:
        hint = 'add {"mcpServers": {"<id>": {"command": "...", "args": [...]}}}'
        if isinstance(data.get("servers"), dict):
            hint = 'rename the "servers" key to "mcpServers" (VS Code style configs are not read as is)'
        raise UserError(f'{mcp_path}: no "mcpServers" object', hint=hint)
    if not isinstance(servers, dict):
        raise UserError(
            f'{mcp_path}: "mcpServers" must be an object mapping server ids to settings, got {type_with_article(servers)}',
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
        beside = base / SETTINGS_FILE_NAME
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
            f"{where} must be an object, got {type_with_article(entry)}",
            hint='a server is {"command": "...", "args": [...]} or {"type": "http", "url": "..."}',
        )

    def string(key: str) -> str | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise UserError(f"{where}.{key} must be a string, got {type_with_article(value)}")
        return expand_vars(value, environ, where=f"{where}.{key}", from_env=from_env)

    def strings(key: str) -> tuple[str, ...]:
        value = entry.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UserError(
                f"{where}.{key} must be a list of strings, got {show_value(value)}",
                hint='for example "args": ["server.py", "--port", "8000"] (numbers need quotes)',
            )
        return tuple(
            expand_vars(v, environ, where=f"{where}.{key}[{i}]", from_env=from_env)
            for i, v in enumerate(value)
        )

    def string_map(key: str) -> dict[str, str]:
        value = entry.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise UserError(
                f"{where}.{key} must be an object of strings, got {show_value(value)}",
                hint=f'for example "{key}": {{"NAME": "value"}} (numbers and booleans need quotes)',
            )
        return {
            k: expand_vars(v, environ, where=f"{where}.{key}.{k}", from_env=from_env)
            for k, v in value.items()
        }

    kind = entry.get("type", entry.get("transport"))
    command = string("command")
    url = string("url")
    transport: Transport
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _TRANSPORT_ALIASES:
            raise UserError(
                f'{where}.type must be "stdio", "http" or "sse", got {show_value(kind)}',
                hint='"streamable-http" is accepted as an alias of "http"',
            )
        transport = _TRANSPORT_ALIASES[kind.lower()]
    elif command is not None:
        transport = "stdio"
    elif url is not None:
        transport = "http"
    else:
        raise UserError(
            f'{where} has neither "command" nor "url"',
            hint='give "command" (and "args") to start a local server, or "url" (and "type": "http"/"sse") for a remote one',
        )
    if transport == "stdio" and not command:
        raise UserError(
            f'{where}: a stdio server needs a non-empty "command"',
            hint='for example "command": "python", "args": ["server.py"]',
        )
    if transport != "stdio":
        if not url:
            raise UserError(
                f'{where}: an {transport} server needs a "url"',
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
        oauth = _parse_oauth(
            f"{where}.oauth", entry["oauth"], environ, from_env, Path(os.path.abspath(path)).parent
        )
    return ServerConfig(
        id=sid,
        transport=transport,
        command=command if transport == "stdio" else None,
        args=args,
        env=frozen_mapping(env),
        cwd=cwd,
        url=url if transport != "stdio" else None,
        headers=frozen_mapping(headers),
        env_values=tuple(dict.fromkeys(from_env)),
        connect_timeout=per.connect_timeout,
        call_timeout=per.call_timeout,
        unwrap=per.unwrap,
        blocklist=per.blocklist,
        unbox=settings.unbox_for(sid),
        approval=per.approval,
        approval_default=per.approval_default
        if per.approval_default is not None
        else settings.approval,
        oauth=oauth,
    )


def _parse_oauth(
    where: str, value: Any, environ: Mapping[str, str], from_env: list[tuple[str, str]], base: Path
) -> OAuthSettings:
    """The `oauth` object: every string `${VAR}`-expanded (values from the environment are
    secrets, like everywhere else), unknown keys refused with the known ones named."""
    example = '"oauth": {"clientId": "${CLIENT_ID}", "clientSecret": "${CLIENT_SECRET}", "grantType": "client_credentials"}'
    if not isinstance(value, dict):
        raise UserError(
            f"{where} must be an object, got {type_with_article(value)}",
            hint=f"for example {example}",
        )
    unknown = [key for key in value if key not in _OAUTH_KEYS]
    if unknown:
        raise UserError(
            f"{where}: unknown key {show_value(unknown[0])}",
            hint=f"known keys: {', '.join(k for k in _OAUTH_KEYS if k != 'callbackPort')}",
        )

    def text(key: str) -> str | None:
        raw = value.get(key)
        if raw is None:
            return None
        if not isinstance(raw, str):
            raise UserError(
                f"{where}.{key} must be a string, got {type_with_article(raw)}",
                hint=f"for example {example}",
            )
        expanded = expand_vars(raw, environ, where=f"{where}.{key}", from_env=from_env)
        return expanded or None

    grant = text("grantType") or "authorization_code"
    if grant not in OAUTH_GRANT_TYPES:
        raise UserError(
            f'{where}.grantType must be "authorization_code" or "client_credentials", got {show_value(grant)}',
            hint='"authorization_code" (the default) logs in with `codemode-gen auth login`;'
            ' "client_credentials" fetches tokens headlessly (CI) with clientId and clientSecret or privateKey',
        )
    port_key = "redirectPort" if "redirectPort" in value else "callbackPort"
    port_raw: Any = value.get(port_key)
    if isinstance(port_raw, str):
        port_raw = expand_vars(port_raw, environ, where=f"{where}.{port_key}", from_env=from_env)
        port_raw = int(port_raw) if port_raw.isdigit() else port_raw
    port: int | None = port_raw if is_int(port_raw) and 0 < port_raw < 65536 else None
    if port_raw is not None and port is None:
        raise UserError(
            f"{where}.{port_key} must be a port number (1-65535), got {show_value(port_raw)}",
            hint="the loopback port registered with the authorization server for this client, e.g. 8976",
        )
    metadata_url = text("clientMetadataUrl")
    if metadata_url is not None and not re.match(r"https://[^/\s]+/\S+", metadata_url):
        raise UserError(
            f"{where}.clientMetadataUrl must be an https:// URL with a path, got {show_value(metadata_url)}",
            hint="the URL of this client's metadata document (it becomes the client id), e.g. https://example.com/codemode-client.json",
        )
    issuer = text("issuer")
    if issuer is not None and not re.match(r"https?://[^/\s]+", issuer):
        raise UserError(
            f"{where}.issuer must be the authorization server's http(s) issuer URL, got {show_value(issuer)}",
            hint='for example "issuer": "https://auth.example.com"',
        )
    method = text("tokenEndpointAuthMethod")
    if method is not None and method not in _OAUTH_AUTH_METHODS:
        raise UserError(
            f"{where}.tokenEndpointAuthMethod must be one of {', '.join(_OAUTH_AUTH_METHODS)}, got {show_value(method)}",
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
                f'{where}: grantType "client_credentials" needs a clientId',
                hint=f"for example {example}",
            )
        if (
            settings.client_secret is None
            and settings.private_key is None
            and settings.private_key_file is None
        ):
            raise UserError(
                f'{where}: grantType "client_credentials" needs a clientSecret, privateKey or privateKeyFile',
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
