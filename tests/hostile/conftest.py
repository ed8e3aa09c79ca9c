"""Fixtures shared by the hostile-script tests (test_scripts_*.py); the machinery behind them is
script_support.py's. A module needing other servers defines its own `host` (test_scripts_nesting)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .script_support import HostThread, cli_project, host_fixture


def _name(request: pytest.FixtureRequest) -> str:
    return request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_scripts_")


@pytest.fixture(scope="module")
def host(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostThread]:
    """A CodeMode with the script server as `s`, connected and warm, shared by the module's tests."""
    yield from host_fixture(tmp_path_factory, _name(request))


@pytest.fixture(scope="module")
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project for `codemode-gen run` and `serve` with the script server as `s`."""
    return cli_project(tmp_path_factory.mktemp(_name(request) + "-cli"))
