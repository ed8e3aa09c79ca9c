"""What pyproject.toml cannot say: the native sandbox worker is built with the package.

`pip install .` and `pip install -e .` (PEP 660) both run `build_py`; here it also compiles
runtime/native/ (runtime/native/build.py) into `codemode-worker`: into the wheel's
codemode_gen/runtime/native/ for an install, beside the sources for an editable one (where the
editable package finds it). Without a working C compiler the install still succeeds, with a
one-line warning: the host then starts the Python worker (`codemode-gen doctor` says which one
runs, and how to build the native one). The wheel is tagged for this platform: it may hold
the binary.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1: the wheel package's
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

NATIVE = Path(__file__).resolve().parent / "runtime" / "native"


def _native_build() -> ModuleType:
    """runtime/native/build.py, imported by path: the package is not importable yet."""
    name = "_codemode_native_build"
    spec = importlib.util.spec_from_file_location(name, NATIVE / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


def build_worker(folder: Path) -> bool:
    """Build the worker into `folder`; False (and one line on stderr) when it cannot be."""
    native = _native_build()
    try:
        result = native.build(folder / native.BINARY_NAME)
    except native.BuildError as exc:
        print(
            f"warning: codemode-worker (the native sandbox worker) not built: {exc}; the Python "
            f"worker will be used (to build it later: {native.BUILD_COMMAND})",
            file=sys.stderr,
        )
        return False
    print(f"built {result.output} (compiled: {', '.join(result.compiled) or 'none'})")
    return True


class BuildPy(build_py):
    """build_py, then the native worker."""

    def run(self) -> None:
        super().run()
        # An editable install's package folder is the source folder itself.
        package = Path(self.build_lib, "codemode_gen", "runtime", "native")
        build_worker(NATIVE if self.editable_mode else package)


class BinaryDistribution(Distribution):
    """The package may carry a native executable: installed as platform-specific (platlib)."""

    def has_ext_modules(self) -> bool:
        return True


class BdistWheel(bdist_wheel):
    """A native executable, no Python extension: any Python 3, this platform only."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


cmdclass: dict[str, Any] = {"build_py": BuildPy, "bdist_wheel": BdistWheel}
setup(cmdclass=cmdclass, distclass=BinaryDistribution)
