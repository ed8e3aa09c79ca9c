"""`.mcp.json` and `codemode.toml` parsing: every accepted shape and every user mistake."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from codemode_gen.codemode_toml import load_settings
from codemode_gen.config import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, Sample, Settings
from codemode_gen.errors import UserError
from codemode_gen.mcp_json import expand_vars, load_config, project_settings


def write_json(tmp_path: Path, data: object, name: str = ".mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def user_error(fn: Callable[..., object], *args: object, **kwargs: object) -> UserError:
    with pytest.raises(UserError) as info:
        fn(*args, **kwargs)
    return info.value


# --------------------------------------------------------------------------- .mcp.json


def test_stdio_http_sse_servers_and_unknown_keys(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {
            "$schema": "ignored",
            "mcpServers": {
                "notes": {
                    "command": "python",
                    "args": ["server.py", "stdio"],
                    "env": {"TOKEN": "abc"},
                    "cwd": "/srv",
                    "disabled": False,
                    "autoApprove": ["x"],
                },
                "remote": {
                    "type": "streamable-http",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": {"X-Key": "k"},
                },
                "implicit": {"url": "https://example.com/mcp"},
                "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
            },
        },
    )
    servers = load_config(path, environ={})
    assert list(servers) == ["notes", "remote", "implicit", "legacy"]
    notes = servers["notes"]
    assert notes.transport == "stdio"
    assert notes.command == "python"
    assert notes.args == ("server.py", "stdio")
    assert dict(notes.env) == {"TOKEN": "abc"}
    assert notes.cwd == "/srv"
    assert notes.url is None
    assert notes.connect_timeout == DEFAULT_CONNECT_TIMEOUT
    assert notes.call_timeout == DEFAULT_CALL_TIMEOUT
    assert notes.unwrap == "spec"
    assert notes.blocklist == ()
    assert servers["remote"].transport == "http"
    assert dict(servers["remote"].headers) == {"X-Key": "k"}
    assert servers["implicit"].transport == "http"
    assert servers["legacy"].transport == "sse"
    assert notes.secrets() == [("TOKEN", "abc")]
    assert servers["remote"].secrets() == [("X-Key", "k")]


def test_env_expansion_in_every_string(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {
            "mcpServers": {
                "a": {
                    "command": "${BIN}",
                    "args": [
                        "--key=${KEY}",
                        "${MISSING:-fallback}",
                        "${EMPTY:-used}",
                        "plain $HOME",
                    ],
                    "env": {"T": "${KEY}"},
                    "cwd": "${DIR:-/tmp}",
                },
                "b": {
                    "type": "http",
                    "url": "http://${HOST}:1/mcp",
                    "headers": {"Authorization": "Bearer ${KEY}"},
                },
            }
        },
    )
    servers = load_config(path, environ={"BIN": "node", "KEY": "s3cret", "HOST": "h", "EMPTY": ""})
    a = servers["a"]
    assert a.command == "node"
    assert a.args == ("--key=s3cret", "fallback", "used", "plain $HOME")
    assert dict(a.env) == {"T": "s3cret"}
    assert a.cwd == "/tmp"
    assert servers["b"].url == "http://h:1/mcp"
    assert dict(servers["b"].headers) == {"Authorization": "Bearer s3cret"}
    # provenance: what came from the environment, once each, whatever field used it; not the
    # defaults written in the file, not an empty value
    assert a.env_values == (("BIN", "node"), ("KEY", "s3cret"))
    assert servers["b"].env_values == (("HOST", "h"), ("KEY", "s3cret"))
    assert ("KEY", "s3cret") in a.secrets() and ("BIN", "node") in a.secrets()


def test_s11_values_from_the_environment_are_secrets_but_not_codemode_python(
    tmp_path: Path,
) -> None:
    path = write_json(
        tmp_path,
        {
            "mcpServers": {
                "a": {
                    "command": "${CODEMODE_PYTHON:-python}",
                    "args": ["--api-key", "${SECRET}", "${MODE:-fast}"],
                },
                "b": {"command": "${CODEMODE_PYTHON}", "args": ["s.py"]},
                "c": {"url": "http://127.0.0.1:9/mcp?api_key=${KEY}&page=${PAGE:-1}"},
            }
        },
    )
    environ = {
        "SECRET": "hunter2-value",
        "CODEMODE_PYTHON": "/opt/py/bin/python3",
        "KEY": "k-123456",
    }
    servers = load_config(path, environ=environ)
    assert servers["a"].args == ("--api-key", "hunter2-value", "fast")
    assert servers["a"].command == "/opt/py/bin/python3"
    assert servers["a"].env_values == (
        ("SECRET", "hunter2-value"),
    )  # a builtin, set or not, is no secret
    assert servers["b"].env_values == ()
    assert servers["c"].env_values == (("KEY", "k-123456"),)
    assert servers["c"].url == "http://127.0.0.1:9/mcp?api_key=k-123456&page=1"


def test_env_expansion_uses_os_environ_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_TEST_TOKEN", "tok")
    path = write_json(
        tmp_path, {"mcpServers": {"a": {"command": "x", "env": {"T": "${CODEMODE_TEST_TOKEN}"}}}}
    )
    assert dict(load_config(path)["a"].env) == {"T": "tok"}


def test_unset_variable_names_file_server_and_field(tmp_path: Path) -> None:
    path = write_json(
        tmp_path,
        {
            "mcpServers": {
                "remote": {"url": "http://x/mcp", "headers": {"Authorization": "Bearer ${API_KEY}"}}
            }
        },
    )
    err = user_error(load_config, path, environ={})
    assert str(path) in err.message
    assert "mcpServers.remote.headers.Authorization" in err.message
    assert "API_KEY" in err.message
    assert err.hint and "${API_KEY:-" in err.hint


def test_invalid_variable_reference(tmp_path: Path) -> None:
    path = write_json(tmp_path, {"mcpServers": {"a": {"command": "${not valid}"}}})
    err = user_error(load_config, path, environ={})
    assert "mcpServers.a.command" in err.message


def test_expand_vars_directly() -> None:
    assert expand_vars("${A}-${B:-b}-${C:-}", {"A": "a"}, where="w") == "a-b-"


def test_paths_resolve_against_the_config_folder_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, client = tmp_path / "project", tmp_path / "client"
    project.mkdir()
    client.mkdir()
    write_json(
        project,
        {
            "mcpServers": {
                "bare": {"command": "python", "args": ["servers/notes.py"]},
                "local": {"command": "./bin/server", "cwd": "sub"},
                "venv": {"command": ".venv/bin/python", "cwd": "/srv"},
                "absolute": {"command": "/usr/bin/env", "cwd": "../elsewhere"},
                "remote": {"url": "http://127.0.0.1:9/mcp"},
            }
        },
    )
    monkeypatch.chdir(client)
    servers = load_config(Path("../project/.mcp.json"), environ={})
    assert (servers["bare"].command, servers["bare"].cwd) == (
        "python",
        str(project),
    )  # PATH lookup, cwd = config folder
    assert servers["bare"].args == (
        "servers/notes.py",
    )  # args are the server's business: relative to its cwd
    assert (servers["local"].command, servers["local"].cwd) == (
        str(project / "bin" / "server"),
        str(project / "sub"),
    )
    assert (servers["venv"].command, servers["venv"].cwd) == (
        str(project / ".venv" / "bin" / "python"),
        "/srv",
    )
    assert (servers["absolute"].command, servers["absolute"].cwd) == (
        "/usr/bin/env",
        str(tmp_path / "elsewhere"),
    )
    assert servers["remote"].cwd is None and servers["remote"].command is None


def test_codemode_python_is_the_running_interpreter_unless_set(tmp_path: Path) -> None:
    import sys

    path = write_json(
        tmp_path,
        {
            "mcpServers": {
                "a": {"command": "${CODEMODE_PYTHON:-python}", "env": {"PY": "${CODEMODE_PYTHON}"}},
            }
        },
    )
    a = load_config(path, environ={})["a"]
    assert a.command == sys.executable and dict(a.env) == {"PY": sys.executable}
    b = load_config(path, environ={"CODEMODE_PYTHON": "/opt/py/bin/python3"})["a"]
    assert b.command == "/opt/py/bin/python3"
    assert expand_vars("${CODEMODE_PYTHON}", {"CODEMODE_PYTHON": ""}, where="w") == sys.executable


def test_project_settings_live_beside_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, client = tmp_path / "project", tmp_path / "client"
    project.mkdir()
    client.mkdir()
    config = write_json(project, {"mcpServers": {}})
    (client / "codemode.toml").write_text("not = = toml")  # the caller's cwd is never read
    monkeypatch.chdir(client)
    defaults = project_settings(Path("../project/.mcp.json"))
    assert (defaults.out_dir, defaults.fixtures_dir) == (project / "out", project / "fixtures")
    (project / "codemode.toml").write_text('out = "gen"\n')
    assert project_settings(config).out_dir == project / "gen"
    explicit = tmp_path / "other.toml"
    explicit.write_text('fixtures = "rec"\n')
    assert project_settings(config, explicit).fixtures_dir == tmp_path / "rec"


def test_missing_file(tmp_path: Path) -> None:
    err = user_error(load_config, tmp_path / "nope.json")
    assert "nope.json" in err.message and "not found" in err.message
    assert err.hint and "--config" in err.hint


def test_bad_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n', encoding="utf-8")
    err = user_error(load_config, path)
    assert f"{path}:3:" in err.message
    assert err.hint


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([1, 2], "expected a JSON object"),
        ({"servers": {}}, 'no "mcpServers"'),
        ({"mcpServers": []}, "must be an object"),
        ({"mcpServers": {"a": "python"}}, "mcpServers.a must be an object"),
        ({"mcpServers": {"a": {"args": ["x"]}}}, 'neither "command" nor "url"'),
        ({"mcpServers": {"a": {"command": 5}}}, "mcpServers.a.command must be a string"),
        (
            {"mcpServers": {"a": {"command": "x", "args": "x y"}}},
            "mcpServers.a.args must be a list of strings",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "args": [1]}}},
            "mcpServers.a.args must be a list of strings",
        ),
        (
            {"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}},
            "mcpServers.a.env must be an object of strings",
        ),
        (
            {"mcpServers": {"a": {"url": "http://x", "headers": []}}},
            "mcpServers.a.headers must be an object",
        ),
        (
            {"mcpServers": {"a": {"type": "websocket", "url": "ws://x"}}},
            "mcpServers.a.type must be",
        ),
        ({"mcpServers": {"a": {"type": "http", "command": "x"}}}, 'needs a "url"'),
        (
            {"mcpServers": {"a": {"type": "stdio", "url": "http://x"}}},
            'needs a non-empty "command"',
        ),
        ({"mcpServers": {"a": {"url": "ftp://x"}}}, "must be an http:// or https:// URL"),
        ({"mcpServers": {"../evil": {"command": "x"}}}, "cannot be used as a folder name"),
    ],
)
def test_config_errors(tmp_path: Path, data: object, fragment: str) -> None:
    path = write_json(tmp_path, data)
    err = user_error(load_config, path, environ={})
    assert fragment in err.message
    assert str(path) in err.message


def test_servers_key_hint(tmp_path: Path) -> None:
    err = user_error(load_config, write_json(tmp_path, {"servers": {"a": {"command": "x"}}}))
    assert err.hint and "mcpServers" in err.hint


# --------------------------------------------------------------------------- codemode.toml

FULL_TOML = """
fixtures = "fx"
out = "generated"
max_samples = 5
redact = ["sk-[A-Za-z0-9]+"]

[limits]
timeoutMs = 30000
maxToolCalls = 10
typecheck = true

[servers.notes]
unwrap = "json"
connect_timeout = 5
call_timeout = 7.5
blocklist = ["delete_everything"]

[[samples]]
server = "notes"
tool = "search_notes"
input = { query = "milk" }

[[samples]]
server = "notes"
tool = "list_notes"
"""


def test_settings_defaults_without_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings == Settings()
    assert settings.fixtures_dir == Path("fixtures")
    assert settings.out_dir == Path("out")
    assert settings.max_samples == 20


def test_full_settings_and_merge_into_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "codemode.toml").write_text(FULL_TOML, encoding="utf-8")
    settings = load_settings()
    assert settings.fixtures_dir == Path("fx")
    assert settings.out_dir == Path("generated")
    assert settings.max_samples == 5
    assert settings.redact_patterns == ("sk-[A-Za-z0-9]+",)
    assert dict(settings.limits) == {"timeoutMs": 30000, "maxToolCalls": 10, "typecheck": True}
    assert settings.samples == (
        Sample("notes", "search_notes", {"query": "milk"}),
        Sample("notes", "list_notes", {}),
    )
    notes = settings.servers["notes"]
    assert (notes.unwrap, notes.connect_timeout, notes.call_timeout, notes.blocklist) == (
        "json",
        5.0,
        7.5,
        ("delete_everything",),
    )
    path = write_json(
        tmp_path, {"mcpServers": {"notes": {"command": "x"}, "other": {"command": "y"}}}
    )
    servers = load_config(path, settings)
    assert servers["notes"].unwrap == "json"
    assert servers["notes"].connect_timeout == 5.0
    assert servers["notes"].call_timeout == 7.5
    assert servers["notes"].blocklist == ("delete_everything",)
    assert servers["other"].unwrap == "spec"


def test_settings_paths_relative_to_toml_dir(tmp_path: Path) -> None:
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "codemode.toml").write_text('out = "o"\n', encoding="utf-8")
    settings = load_settings(sub / "codemode.toml")
    assert settings.out_dir == sub / "o"
    assert settings.fixtures_dir == sub / "fixtures"


def test_explicit_missing_settings_file(tmp_path: Path) -> None:
    err = user_error(load_settings, tmp_path / "codemode.toml")
    assert "not found" in err.message


def test_bad_toml_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text('fixtures = "a"\nout = \n', encoding="utf-8")
    err = user_error(load_settings, path)
    assert str(path) in err.message
    assert "line 2" in err.message and "column" in err.message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("max_samples = 0", "max_samples must be a positive integer"),
        ("max_samples = true", "max_samples must be a positive integer"),
        ("fixtures = 3", "fixtures must be a non-empty string"),
        ('redact = "x"', "redact must be a list"),
        ('redact = ["("]', "invalid regular expression"),
        ("limits = 3", "limits must be a table"),
        ('[limits]\ntimeoutMs = "10s"', ":2: limits.timeoutMs: expected an integer"),
        ("[limits]\ntypecheck = 1", ":2: limits.typecheck: expected true or false"),
        (
            "[limits]\ntimeoutMs = 900000",
            ":2: limits.timeoutMs: 900000 is out of range; use an integer from 1 to 600000",
        ),
        ("limits = { maxMemoryBytes = 1 }", ":1: limits.maxMemoryBytes: 1 is out of range"),
        ('[servers.a]\nunwrap = "yes"', 'servers.a.unwrap must be "spec" or "json"'),
        ("[servers.a]\nconnect_timeout = 0", "servers.a.connect_timeout must be a number"),
        ("[servers.a]\ncall_timeout = 999999", "servers.a.call_timeout must be a number"),
        ('[servers.a]\nblocklist = "x"', "servers.a.blocklist must be a list"),
        ("servers = 1", "servers must be a table"),
        ("samples = 1", "samples must be an array"),
        ('[[samples]]\ntool = "t"', "samples[0].server must be a non-empty string"),
        ('[[samples]]\nserver = "s"\ntool = "t"\ninput = 3', "samples[0].input must be an object"),
    ],
)
def test_settings_errors(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(text + "\n", encoding="utf-8")
    err = user_error(load_settings, path)
    assert fragment in err.message
    assert str(path) in err.message


def test_sandbox_max_workers(tmp_path: Path) -> None:
    toml = tmp_path / "codemode.toml"
    toml.write_text("[sandbox]\nmax_workers = 3\n", encoding="utf-8")
    assert load_settings(toml).max_workers == 3
    for bad, expected in (
        ("max_workers = 0", "positive integer"),
        ('max_workers = "4"', "positive integer"),
        (
            "workers = 4",
            "sandbox.workers: unknown key in \\[sandbox\\]; did you mean `max_workers`",
        ),
    ):
        toml.write_text(f"[sandbox]\n{bad}\n", encoding="utf-8")
        with pytest.raises(UserError, match=expected):
            load_settings(toml)
