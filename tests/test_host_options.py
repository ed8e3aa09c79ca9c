"""The host options are declared once (codemode_gen/host_options.py): every field is an option
of each command that takes it, survives `serve --print-config`'s command line, and reaches
CodeMode; one knob has one canonical spelling on every command, its aliases still work."""

from __future__ import annotations

import inspect
import json
from dataclasses import Field, replace
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from codemode_gen.cli.check import check
from codemode_gen.cli.run import run
from codemode_gen.cli.serve import serve, serve_command
from codemode_gen.errors import UserError
from codemode_gen.host_options import HostFlag, HostOptions, host_fields
from codemode_gen.runtime.codemode import CodeMode
from codemode_gen.runtime.frontends.serve_host import load_host

COMMANDS: dict[str, click.Command] = {"run": run, "serve": serve, "check": check}


def other_value(f: Field[Any], flag: HostFlag, tmp_path: Path) -> Any:
    """A valid value of the field that is not its default, derived from its declaration only."""
    if isinstance(f.default, bool):
        return not f.default
    if flag.choices is not None:
        return next(c for c in flag.choices if c != f.default)
    if flag.minimum is not None or flag.maximum is not None:
        low = flag.minimum if flag.minimum is not None else 0
        return low + 1 if f.default != low + 1 else low + 2
    if flag.path:
        return str(tmp_path / "bin" / "tsc")
    return "x" * 40


def non_default(tmp_path: Path, command: str | None = None) -> HostOptions:
    return HostOptions(
        **{f.name: other_value(f, flag, tmp_path) for f, flag in host_fields(command)}
    )


def test_every_field_is_an_option_of_each_command_that_takes_it() -> None:
    taken = {name: 0 for name in COMMANDS}
    for f, flag in host_fields():
        assert flag.commands and set(flag.commands) <= set(COMMANDS), f.name
        assert flag.help and flag.flag.startswith("--"), f.name
        for name in flag.commands:
            params = {p.name: p for p in COMMANDS[name].params}
            assert f.name in params, f"{name} lacks {flag.flag}"
            option = params[f.name]
            assert isinstance(option, click.Option)
            assert option.opts[0] == flag.flag and set(option.opts + option.secondary_opts) >= {
                flag.flag,
                *flag.aliases,
            }
            assert option.default == f.default and option.help == flag.help
            taken[name] += 1
        for name, command in COMMANDS.items():  # a command that does not take it has no such flag
            if name not in flag.commands:
                assert all(flag.flag not in getattr(p, "opts", ()) for p in command.params), (
                    name,
                    flag.flag,
                )
    assert all(taken.values()), taken


def test_print_config_round_trips_every_printed_option(tmp_path: Path) -> None:
    options = non_default(tmp_path, "serve")
    argv = serve_command(tmp_path / ".mcp.json", None, "codemode.run", 16_000, options)
    args = argv[argv.index("serve") + 1 :]
    ctx = serve.make_context("serve", list(args))
    parsed = HostOptions(**{f.name: ctx.params[f.name] for f, _ in host_fields("serve")})
    printed = {f.name for f, flag in host_fields("serve") if flag.printed}
    assert {
        "approve_all",
        "trace",
        "tsc",
    } <= printed and "state_secret" not in printed  # a secret stays off it
    for f, flag in host_fields("serve"):
        expected = getattr(options, f.name) if flag.printed else f.default
        assert getattr(parsed, f.name) == expected, f.name
    assert serve_command(tmp_path / ".mcp.json", None, "codemode.run", 16_000, HostOptions())[
        -2:
    ] == ["--config", str(tmp_path / ".mcp.json")]  # the defaults add nothing


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {}}))
    (tmp_path / "script.js").write_text("1")
    return tmp_path


def test_every_codemode_option_reaches_codemode(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    init = CodeMode.__init__

    def spy(self: CodeMode, *args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        init(self, *args, **kwargs)

    monkeypatch.setattr(CodeMode, "__init__", spy)
    options = replace(non_default(project), tsc=str(project / "tsc"), max_response_chars=5000)
    cm, problem = load_host(project / ".mcp.json", None, options)
    assert problem is None and cm is not None
    constructor = inspect.signature(init).parameters
    from_config = inspect.signature(CodeMode.from_config).parameters
    for f, flag in host_fields():
        if not flag.codemode:
            assert f.name not in constructor, f.name
            continue
        assert f.name in constructor and f.name in from_config, f"CodeMode lacks {f.name}"
        assert seen[f.name] == getattr(options, f.name), f.name
    # and they take effect
    assert cm.approval.approve_all and cm.typecheck and cm.trace == options.trace
    assert (
        cm.max_response_chars == 5000
        and cm.skill_saver is not None
        and cm.max_workers == options.max_workers
    )


def captured_run(project: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> dict[str, Any]:
    """The from_config keywords `run FLAGS script.js` builds its CodeMode with (not run)."""
    seen: dict[str, Any] = {}

    def stop(*args: Any, **kwargs: Any) -> CodeMode:
        seen.update(kwargs)
        raise UserError("stopped by the test")

    monkeypatch.setattr(CodeMode, "from_config", stop)
    result = CliRunner().invoke(
        run, ["--config", str(project / ".mcp.json"), *flags, str(project / "script.js")]
    )
    assert "stopped by the test" in str(result.exception), result.output
    return seen


@pytest.mark.parametrize("flag", ["--approve-all", "--yes", "-y"])
def test_both_spellings_approve_all_on_run(
    project: Path, monkeypatch: pytest.MonkeyPatch, flag: str
) -> None:
    assert captured_run(project, monkeypatch, flag, "--record")["approve_all"] is True
    assert captured_run(project, monkeypatch)["approve_all"] is False


@pytest.mark.parametrize("flag", ["--approve-all", "--yes", "-y"])
def test_both_spellings_approve_all_on_serve(project: Path, flag: str) -> None:
    result = CliRunner().invoke(
        serve, ["--config", str(project / ".mcp.json"), flag, "--print-config", "json"]
    )
    assert result.exit_code == 0, result.output
    args = json.loads(result.output)["mcpServers"]["codemode"]["args"]
    assert "--approve-all" in args and "--yes" not in args  # printed in the canonical spelling


def test_the_aliases_are_documented_as_aliases() -> None:
    for name in ("run", "serve"):
        shown = CliRunner().invoke(COMMANDS[name], ["--help"]).output
        assert "--approve-all" in shown and "--yes and -y are aliases" in " ".join(shown.split())
