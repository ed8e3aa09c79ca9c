"""Options (and the script argument) several subcommands share, defined once so their names,
defaults, help and messages agree."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from codemode_gen.errors import UserError
from codemode_gen.host_options import HostFlag, HostOptions, host_fields

F = TypeVar("F", bound=Callable[..., Any])

# Every command finds its project the same way (mcp_json.project_settings): codemode.toml is the
# one beside --config (else all defaults), and fixtures/ and out/ default to that folder.
config_option = click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path),
    default=Path(".mcp.json"),
    show_default=True,
    help="MCP server config (.mcp.json / Claude Desktop format); codemode.toml is the one beside it.",
)
# `generate` reads no server: its --config only names the project, by the same rule.
project_config_option = click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path),
    default=Path(".mcp.json"),
    show_default=True,
    help="The project's MCP config: codemode.toml beside it, fixtures/ and out/ in its folder "
    "(the file itself is not read).",
)
out_option = click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=None,
    help="Generated modules (default: codemode.toml's out, else out/).",
)
# The fixtures a command reads (`generate`, `policy`), as `fixtures_dir`.
fixtures_read_option = click.option(
    "--fixtures",
    "fixtures_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Recorded fixtures to read [default: codemode.toml `fixtures`, else fixtures/ beside --config].",
)


def host_option(name: str, default: Any, flag: HostFlag) -> Callable[[F], F]:
    """The click option of one HostOptions field (codemode_gen/host_options.py), its aliases
    included."""
    kind: click.ParamType | None = None
    if flag.choices is not None:
        kind = click.Choice(flag.choices)
    elif flag.minimum is not None or flag.maximum is not None:
        kind = click.IntRange(flag.minimum, flag.maximum)
    is_flag = isinstance(default, bool)
    return click.option(
        flag.flag,
        *flag.aliases,
        name,
        type=kind,
        default=default,
        is_flag=is_flag,
        metavar=flag.metavar,
        help=flag.help,
        show_default=not is_flag and default is not None,
    )


def host_options(command: str) -> Callable[[F], F]:
    """Every HostOptions field `command` takes as a click option; the command gets them as one
    `options: HostOptions` argument (the fields it does not take keep their defaults)."""

    def decorate(function: F) -> F:
        names = [f.name for f, _ in host_fields(command)]

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {name: kwargs.pop(name) for name in names}
            return function(*args, options=HostOptions(**given), **kwargs)

        decorated: Any = wrapper
        for f, flag in reversed(list(host_fields(command))):
            decorated = host_option(f.name, f.default, flag)(decorated)
        return cast(F, decorated)

    return decorate


def read_script(script: str) -> str:
    """The SCRIPT argument of `run` and `check`: a file's UTF-8 text, or stdin for `-`."""
    if script == "-":
        return sys.stdin.read()
    try:
        return Path(script).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{script}: script not found",
            hint="pass a .js or .ts file, or - to read the script from stdin",
        ) from None
    except IsADirectoryError:
        raise UserError(
            f"{script}: is a directory, not a script", hint="pass a .js or .ts file"
        ) from None
    except UnicodeDecodeError:
        raise UserError(f"{script}: not UTF-8 text", hint="save the script as UTF-8") from None
    except OSError as exc:
        raise UserError(f"{script}: cannot read script: {exc.strerror}") from None
