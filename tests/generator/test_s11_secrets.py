"""Spec §11 (servers are untrusted; recordings are committed): a credential given to a server
never reaches fixtures/, out/ or what the recording commands print, however it was given
(`env`, `headers`, `${VAR}` in `args` or in the `url`) and wherever the server echoes it
(instructions, serverInfo, tool descriptions, schema keys, results, tool errors).

Real processes throughout: the CLI as a user runs it, tests/servers/echo_secrets.py over stdio
and over Streamable HTTP on 127.0.0.1, real QuickJS for `run --record`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from codemode_gen.generator.redact import MIN_SECRET_CHARS, Redactor, url_secrets
from codemode_gen.mcp_json import load_config
from tests.conftest import PYTHON, server_script

pytestmark = pytest.mark.timeout(240)

CLI = [PYTHON, "-m", "codemode_gen"]
# Values of the environment variables the config refers to; each is echoed back by the server.
SECRETS = {
    "SECRET": "argv-secret-2f9a7c",  # "args": ["--api-key", "${SECRET}"]
    "KEY": "query-key+81b3/e0",  # "url": "...?api_key=${KEY}" (percent-encoded on the wire)
    "ENVSECRET": "env-secret-c4d5e6",  # "env": {"ECHO_SECRET": "${ENVSECRET}"}
}


def cli(project: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **SECRETS, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [*CLI, *args],
        cwd=project,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


def leaks(text: str) -> list[str]:
    """The secrets (or their percent-encoded forms) found in `text`."""
    found = []
    for name, value in SECRETS.items():
        for form in {value, quote(value, safe=""), quote(value)}:
            if form in text:
                found.append(f"{name} as {form!r}")
    return found


def every_byte(folder: Path) -> str:
    return "".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


@pytest.fixture
def project(tmp_path: Path, start_server: Any) -> Path:
    remote = start_server("echo_secrets", "http")
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": "${CODEMODE_PYTHON}",
                        "args": [
                            str(server_script("echo_secrets")),
                            "stdio",
                            "--api-key",
                            "${SECRET}",
                        ],
                        "env": {"ECHO_SECRET": "${ENVSECRET}"},
                    },
                    "remote": {"type": "http", "url": remote.mcp_url + "?api_key=${KEY}"},
                }
            }
        )
    )
    (tmp_path / "codemode.toml").write_text(
        '[[samples]]\nserver = "local"\ntool = "echo"\ninput = { message = "hello" }\n\n'
        '[[samples]]\nserver = "local"\ntool = "fail"\nexpect = "error"\n\n'
        '[[samples]]\nserver = "remote"\ntool = "echo"\ninput = { message = "hi" }\n'
    )
    return tmp_path


@pytest.mark.slow
def test_s11_secrets_from_args_url_and_env_never_reach_fixtures_out_or_output(
    project: Path,
) -> None:
    printed: list[str] = []

    def step(
        *args: str, code: int = 0, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = cli(project, *args, stdin=stdin)
        printed.append(proc.stdout + proc.stderr)
        assert proc.returncode == code, proc.stdout + proc.stderr
        return proc

    step("record")
    step("generate")
    script = (
        "import { whoami as a, echo } from '@codemode/servers/local';\n"
        "import { whoami as b } from '@codemode/servers/remote';\n"
        "const x = await a(); const y = await b(); await echo({message: 'from run'});\n"
        "globalThis.__codemode_result__ = Object.keys(x).length + Object.keys(y).length;\n"
    )
    run = step("run", "--record", "--no-pretty", "-", stdin=script)
    assert json.loads(run.stdout)["result"] == 10
    step("generate")
    step("record", "--check")
    # a sample that fails: its tool error quotes the key, and so would the report
    (project / "failing.json").write_text(json.dumps([{"server": "local", "tool": "fail"}]))
    failed = step("record", "--server", "local", "--samples", "failing.json", code=1)
    assert "backend refused key <redacted:SECRET>" in failed.stdout

    fixtures, out = every_byte(project / "fixtures"), every_byte(project / "out")
    assert not leaks(fixtures), leaks(fixtures)
    assert not leaks(out), leaks(out)
    for text in printed:
        assert not leaks(text), (leaks(text), text)

    # ...and the server did echo them, everywhere: the markers stand where the values were
    local = project / "fixtures" / "local"
    server = json.loads((local / "server.json").read_text())
    assert "api key <redacted:SECRET>" in server["instructions"]
    assert "ECHO_SECRET=<redacted:ECHO_SECRET>" in server["instructions"]
    assert server["serverInfo"]["title"] == "echo secrets (<redacted:SECRET>)"
    tools = {t["name"]: t for t in json.loads((local / "tools.json").read_text())}
    assert "Key <redacted:SECRET>, env <redacted:ECHO_SECRET>" in tools["whoami"]["description"]
    assert "<redacted:SECRET>" in tools["echo"]["inputSchema"]["properties"]  # an object key
    whoami = [
        json.loads(line) for line in (local / "calls" / "whoami.jsonl").read_text().splitlines()
    ]
    structured = whoami[-1]["result"]["structuredContent"]
    assert (
        structured["argv"][-1] == "<redacted:SECRET>"
        and structured["env"] == "<redacted:ECHO_SECRET>"
    )
    assert structured["byKey"] == {"<redacted:SECRET>": "<redacted:ECHO_SECRET>"}
    (fail,) = [
        json.loads(line) for line in (local / "calls" / "fail.jsonl").read_text().splitlines()
    ]
    assert fail["result"]["isError"] is True  # recorded on purpose: expect = "error"
    assert fail["result"]["content"][0]["text"] == "backend refused key <redacted:SECRET>"
    echo = (local / "calls" / "echo.jsonl").read_text()
    assert "from run" in echo  # run --record wrote its call
    remote = project / "fixtures" / "remote"
    remote_server = json.loads((remote / "server.json").read_text())
    assert "api_key=<redacted:KEY>" in remote_server["instructions"]
    remote_tools = (remote / "tools.json").read_text()
    assert "query api_key=<redacted:KEY>" in remote_tools
    (remote_whoami,) = [
        json.loads(line) for line in (remote / "calls" / "whoami.jsonl").read_text().splitlines()
    ]
    assert remote_whoami["result"]["structuredContent"]["query"] == "api_key=<redacted:KEY>"
    # the interpreter path of the builtin ${CODEMODE_PYTHON} is not a secret
    assert "<redacted:CODEMODE_PYTHON>" not in fixtures


@pytest.mark.slow
def test_s11_failures_are_reported_without_the_credentials(tmp_path: Path) -> None:
    def config(*extra: str) -> None:
        (tmp_path / ".mcp.json").write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "gone": {
                            "type": "http",
                            "url": "http://127.0.0.1:9/mcp?api_key=${KEY}&page=2",
                        },
                        "local": {
                            "command": PYTHON,
                            "args": [
                                str(server_script("echo_secrets")),
                                "--api-key",
                                "${SECRET}",
                                *extra,
                            ],
                        },
                    }
                }
            )
        )

    (tmp_path / "codemode.toml").write_text("[servers.gone]\nconnect_timeout = 5\n")
    config()
    first = cli(tmp_path, "record", "--server", "local")
    assert first.returncode == 0, first.stdout + first.stderr
    config("--crash")  # now it dies at start, quoting its command line on stderr
    printed = []
    for args, code in ((["record"], 1), (["record", "--check", "--server", "local"], 3)):
        proc = cli(tmp_path, *args)
        assert proc.returncode == code, proc.stdout + proc.stderr
        if code == 1:
            assert "gone: connection refused: http://127.0.0.1:9/mcp?… (" in proc.stdout  # no query
        assert "refusing to start with ['--api-key', '<redacted:SECRET>', '--crash']" in proc.stdout
        printed.append(proc.stdout + proc.stderr)
    for text in printed:
        assert not leaks(text), (leaks(text), text)


def test_s11_values_from_the_environment_are_redacted_as_substrings(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": {
                        "command": "${CODEMODE_PYTHON:-python}",
                        "args": [
                            "--token=${TOKEN}",
                            "--port",
                            "${PORT}",
                            "--mode",
                            "${MODE:-production-mode}",
                        ],
                        "cwd": "${WORKDIR}",
                    },
                    "b": {
                        "url": "https://u:p%40ssw0rd@example.com/mcp?access_token=literal-token-1&page=3"
                    },
                }
            }
        )
    )
    environ = {"TOKEN": "t0k3n-abcdef", "PORT": "8000", "WORKDIR": "/home/alice-secret-dir"}
    configs = load_config(tmp_path / ".mcp.json", environ=environ)
    redactor = Redactor.for_server(configs["a"])
    assert redactor.value(
        {
            "argv": "--token=t0k3n-abcdef --port 8000 --mode production-mode",
            "t0k3n-abcdef": ["in /home/alice-secret-dir/x", 8000, None],
        }
    ) == {
        # short values (PORT) and defaults written in the file are not secrets
        "argv": "--token=<redacted:TOKEN> --port 8000 --mode production-mode",
        "<redacted:TOKEN>": ["in <redacted:WORKDIR>/x", 8000, None],
    }
    assert len("8000") < MIN_SECRET_CHARS
    # echoed as JSON text inside a string, or percent-encoded in a URL: still found
    quoted = Redactor([("Q", 'pa"ss\\word/x+y')])
    assert quoted.text(json.dumps({"k": 'pa"ss\\word/x+y'})) == '{"k": "<redacted:Q>"}'
    assert quoted.text("?q=" + quote('pa"ss\\word/x+y', safe="")) == "?q=<redacted:Q>"
    # a url's credentials are secrets even when written in the file: password, token-like params
    assert ("access_token", "literal-token-1") in url_secrets(configs["b"].url)
    remote = Redactor.for_server(configs["b"])
    assert remote.text("GET /mcp?access_token=literal-token-1&page=3 as u:p@ssw0rd") == (
        "GET /mcp?access_token=<redacted:access_token>&page=3 as u:<redacted:url-password>"
    )


def test_redactor_is_one_pass_over_big_and_deep_values() -> None:
    redactor = Redactor(
        [("K", "secret-value-1"), ("L", "secret-value-1-longer")], [r"sk-[a-z]+", r"(x)\1y"]
    )
    deep: Any = "secret-value-1"
    for _ in range(5000):  # far deeper than Python's recursion limit
        deep = {"k": [deep]}
    copy = redactor.value(deep)
    for _ in range(5000):
        copy = copy["k"][0]
    assert copy == "<redacted:K>"
    assert (
        redactor.text("secret-value-1-longer sk-abc xxy")
        == "<redacted:L> <redacted:pattern> <redacted:pattern>"
    )
    big = {"rows": [{"id": i, "note": f"row {i} secret-value-1 sk-abc"} for i in range(50_000)]}
    redacted = redactor.value(big)
    assert redacted["rows"][49_999]["note"] == "row 49999 <redacted:K> <redacted:pattern>"
    assert big["rows"][0]["note"] == "row 0 secret-value-1 sk-abc"  # the input is not modified
