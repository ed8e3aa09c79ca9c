"""mcp_private: the private `mcp` names we rely on are still there, and nothing else uses one.

pyproject.toml pins `mcp` to the tested minor because of them; these tests are what to run
before widening the pin: each failure names the SDK function that moved and the module of ours
that needs porting (codemode_gen/client/mcp_private.py says why each has no public equivalent).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import tomllib

import pytest

from codemode_gen.client import mcp_private
from codemode_gen.client.mcp_private import PRIVATE_NAMES, PrivateName
from tests.conftest import REPO
from tests.runtime.sandbox.test_engine import package_modules

KINDS = {
    "coroutine": inspect.iscoroutinefunction,
    "async generator": inspect.isasyncgenfunction,
    "function": lambda f: inspect.isfunction(f) and not inspect.iscoroutinefunction(f),
}
# A private SDK name used outside mcp_private.py: an import of `_name` from an mcp module, an
# attribute `_name` of an SDK module object (`sdk._stop_server_process`), or a private
# attribute read by name (`getattr(session, "_connection")`).
PRIVATE_USE = re.compile(
    r"from mcp[\w.]* import [^\n]*\b_[A-Za-z]"
    r"|\bsdk\._[A-Za-z]"
    r"|\bmcp[\w.]*\._[A-Za-z]"
    r"|getattr\([^,\n]+, *[\"']_connection[\"']"
)
# client/oauth_provider.py subclasses the SDK's provider: its overrides and the calls it makes
# to the provider's own steps are listed in PRIVATE_NAMES and checked below, not isolated.
SUBCLASSES_THE_SDK = {"codemode_gen.client.oauth_provider"}


def _find(name: PrivateName) -> object:
    module = importlib.import_module(name.module)
    owner: object = module
    parts = name.qualname.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    if name.kind == "attribute":
        source = inspect.getsource(owner.__init__)  # type: ignore[misc]
        assert f"self.{parts[-1]} =" in source, f"__init__ no longer sets self.{parts[-1]}"
        return source
    return getattr(owner, parts[-1])


@pytest.mark.parametrize("name", PRIVATE_NAMES, ids=repr)
def test_each_private_sdk_name_is_still_there_with_its_signature(name: PrivateName) -> None:
    version = importlib.metadata.version("mcp")
    where = f"mcp {version}: {name!r} (used by {name.used_by}, codemode_gen/client/mcp_private.py)"
    try:
        found = _find(name)
    except (ImportError, AttributeError, AssertionError) as exc:
        pytest.fail(
            f"{where} is gone: {type(exc).__name__}: {exc}; port its use before widening the mcp pin"
        )
    if name.params is None:
        return
    assert KINDS[name.kind](found), f"{where} is no longer a {name.kind}"
    params = tuple(inspect.signature(found).parameters)  # type: ignore[arg-type]
    assert params == name.params, (
        f"{where} changed its parameters: {params}, expected {name.params}"
    )


def test_the_mcp_pin_is_the_installed_minor() -> None:
    """The pin allows exactly the minor PRIVATE_NAMES were checked against."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    [spec] = [dep for dep in project["dependencies"] if re.match(r"mcp\s*[<>=~!]", dep)]
    found = re.fullmatch(r"mcp\s*>=\s*(\d+)\.(\d+)(?:\.\d+)?\s*,\s*<\s*(\d+)\.(\d+)\s*", spec)
    assert found is not None, (
        f"pin mcp to one minor (mcp>=X.Y,<X.Y+1), not {spec!r}: see mcp_private.py"
    )
    low_major, low_minor, high_major, high_minor = map(int, found.groups())
    assert (high_major, high_minor) == (low_major, low_minor + 1), (
        f"{spec!r} allows more than one minor"
    )
    major, minor = map(int, importlib.metadata.version("mcp").split(".")[:2])
    assert (major, minor) == (low_major, low_minor), (
        f"installed mcp {major}.{minor} is not the pinned {spec!r}"
    )


def test_no_module_but_mcp_private_uses_a_private_sdk_name() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for module, path in package_modules().items()
        if module not in {"codemode_gen.client.mcp_private", *SUBCLASSES_THE_SDK}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE_USE.search(line)
    ]
    assert offenders == [], (
        "reach private mcp names through codemode_gen/client/mcp_private.py: "
        + ", ".join(offenders)
    )


def test_the_private_use_pattern_catches_what_it_is_for() -> None:
    for line in (
        "from mcp.client.stdio import _drain_stdout",
        "await sdk._stop_server_process(p)",
        'getattr(session, "_connection", None)',
        "x = mcp.client.stdio._WRITER_FLUSH_TIMEOUT",
    ):
        assert PRIVATE_USE.search(line), line
    for line in (
        "from mcp.client.stdio import StdioServerParameters",
        "self._connection = c",
        "sdk.get_default_environment()",
    ):
        assert not PRIVATE_USE.search(line), line


def test_importing_mcp_private_does_not_import_the_sdk() -> None:
    """serve and a cold record start servers while the SDK is still importing."""
    import subprocess
    import sys

    code = "import sys, codemode_gen.client.mcp_private; print('mcp' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "False"
    assert mcp_private.session_connection(object()) is None
