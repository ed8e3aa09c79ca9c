"""How a configured server is swapped for a replay of its recording (`run --replay`, skill test).

The host (CodeMode.from_config) needs only the configs that start `codemode-gen replay` instead of
the live servers; the replay server itself is a front-end (runtime/frontends/replay.py). Keeping
this here lets the host build them without importing a front-end (the layer rule in
tests/runtime/sandbox/test_engine.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from codemode_gen.children import python_module_command
from codemode_gen.config import ServerConfig
from codemode_gen.errors import UserError

__all__ = ["ReplayEnviron", "replay_config", "replay_configs"]


class ReplayEnviron(Mapping[str, str]):
    """os.environ for reading .mcp.json in replay mode: an unset `${VAR}` is empty (or its
    default) instead of an error. Replay sends no env or header to anything, so a CI runner
    without the project's secrets can still read the file."""

    def __init__(self, base: Mapping[str, str] | None = None) -> None:
        self._base = os.environ if base is None else base

    def __getitem__(self, key: str) -> str:
        return self._base[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def get(self, key: str, default: Any = None) -> Any:
        """What expand_vars asks: the value, else "" (never "unset")."""
        return self._base.get(key, "")


def replay_config(config: ServerConfig, fixtures_dir: Path) -> ServerConfig:
    """`config` with its server replaced by `codemode-gen replay` of its recording (the same
    interpreter as this process). Its timeouts, unwrap, blocklist and unbox stay; its command,
    URL, env and headers go (a replay needs no secret). A server without a recording still gets
    one: that process exits at once saying so, which is how the run reports it unavailable.
    Its approval policies go too: a replayed call changes nothing, so nobody is asked (a tool
    set to "deny" stays hidden: it is in the blocklist)."""
    folder = Path(os.path.abspath(fixtures_dir))
    # The child gets only the SDK's safe environment plus this: the package must import there
    # the way it does here (PYTHONPATH for a checkout that is not installed).
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    # -P: the cwd (often the checkout's root) must not shadow the installed package.
    command = python_module_command(
        "codemode_gen", "replay", "--fixtures", str(folder), "--server", config.id
    )
    return replace(
        config,
        transport="stdio",
        command=command[0],
        args=tuple(command[1:]),
        env=MappingProxyType(env),
        cwd=str(folder.parent),
        url=None,
        headers=MappingProxyType({}),
        approval=MappingProxyType({}),
        approval_default="allow",
    )


def replay_configs(
    configs: Mapping[str, ServerConfig], fixtures_dir: Path
) -> dict[str, ServerConfig]:
    """Every configured server replaced by a replay of its recording in `fixtures_dir`
    (`replay_config`); no configured server is ever started. A missing fixtures folder is a
    UserError: there is nothing to replay."""
    if not fixtures_dir.is_dir():
        raise UserError(
            f"{fixtures_dir}: fixtures folder not found, so there is nothing to replay",
            hint="run `codemode-gen record` first (and commit fixtures/), or pass --fixtures DIR",
        )
    return {cid: replay_config(config, fixtures_dir) for cid, config in configs.items()}
