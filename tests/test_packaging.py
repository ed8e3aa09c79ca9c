"""The wheel holds exactly one import package, codemode_gen, with its templates and JS.

Built from the working tree, installed into a fresh venv (dependencies borrowed from the
test venv through a .pth line, so no download), and run from an unrelated directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # Build from a copy: an in-tree build/ folder could smuggle stale files into the wheel.
    source = tmp_path_factory.mktemp("src") / "codemode-gen"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "node_modules", "build", "*.egg-info", "__pycache__", ".*_cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(source)],
        cwd=source, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = dist.glob("codemode_gen-*.whl")
    return found


@pytest.mark.slow
def test_wheel_has_one_top_level_package_with_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"codemode_gen"}
    for expected in ("codemode_gen/generator/__init__.py", "codemode_gen/runtime/__init__.py",
                     "codemode_gen/templates/__init__.py", "codemode_gen/cli/__init__.py",
                     "codemode_gen/client/__init__.py", "codemode_gen/client/sessions.py"):
        assert expected in names
    assert any(n.startswith("codemode_gen/templates/") and n.endswith(".j2") for n in names)
    assert any(n.startswith("codemode_gen/runtime/js/") and n.endswith(".js") for n in names)
    assert "codemode_gen/runtime/js/typecheck_server.js" in names  # run by node for type checks
    assert not any(n.startswith(("tests/", "generator/", "runtime/", "templates/")) for n in names)


@pytest.mark.slow
def test_installed_wheel_runs_from_a_fresh_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # Dependencies come from the test venv; codemode_gen itself only from the wheel.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                    str(wheel)], check=True, capture_output=True)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    help_ = subprocess.run([env_dir / "bin" / "codemode-gen", "--help"], cwd=work, env=env,
                           capture_output=True, text=True)
    assert help_.returncode == 0, help_.stderr
    assert "Usage: codemode-gen" in help_.stdout
    where = subprocess.run(
        [py, "-c", "import codemode_gen.generator as g, importlib.util as u;"
         "print(g.__file__); print(u.find_spec('generator'), u.find_spec('runtime'))"],
        cwd=work, env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert where[0].startswith(site) and where[1] == "None None"
