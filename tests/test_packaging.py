"""The wheel holds exactly one import package, codemode_gen, with its templates and JS.

Built from the working tree, installed into a fresh venv (dependencies borrowed from the
test venv through a .pth line, so no download), and run from an unrelated directory.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from codemode_gen.runtime.native import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # Build from a copy: an in-tree build/ folder could smuggle stale files into the wheel.
    source = tmp_path_factory.mktemp("src") / "codemode-gen"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "node_modules", "build", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(source),
        ],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = dist.glob("codemode_gen-*.whl")
    return found


@pytest.mark.slow
def test_wheel_has_one_top_level_package_with_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"codemode_gen"}
    for expected in (
        "codemode_gen/generator/__init__.py",
        "codemode_gen/runtime/__init__.py",
        "codemode_gen/templates/__init__.py",
        "codemode_gen/cli/__init__.py",
        "codemode_gen/client/__init__.py",
        "codemode_gen/client/sessions.py",
    ):
        assert expected in names
    assert any(n.startswith("codemode_gen/templates/") and n.endswith(".j2") for n in names)
    assert any(n.startswith("codemode_gen/runtime/js/") and n.endswith(".js") for n in names)
    assert "codemode_gen/runtime/js/typecheck_server.js" in names  # run by node for type checks
    assert "codemode_gen/runtime/js/typecheck_core.js" in names  # the checker, on node or QuickJS
    assert (
        "codemode_gen/runtime/sandbox/typecheck_worker.py" in names
    )  # the checker's QuickJS process
    assert not any(n.startswith(("tests/", "generator/", "runtime/", "templates/")) for n in names)


@pytest.mark.slow
def test_wheel_carries_the_native_worker_and_its_sources(wheel: Path) -> None:
    """The sources, so that the worker can be rebuilt where the wheel is installed
    (`python -m codemode_gen.runtime.native.build`); the binary, built by setup.py, whenever a
    C compiler is there; no build file. A wheel with a native executable is for one platform."""
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    native = "codemode_gen/runtime/native/"
    assert {f"{native}build.py", f"{native}launch.py", f"{native}INTERFACE.md"} <= names
    assert {f"{native}quickjs/{unit}.c" for unit in build.QUICKJS_UNITS} <= names
    assert {f"{native}quickjs/quickjs.h", f"{native}quickjs/LICENSE"} <= names
    assert {f"{native}{p.name}" for p in build.NATIVE_DIR.glob("*.c")} <= names
    assert not [n for n in names if n.endswith((".o", ".tmp")) or "/.objects/" in n]
    assert not wheel.name.endswith("-any.whl")
    try:
        build.compiler()
    except build.BuildError:
        return  # no compiler here: the wheel has no binary, the host uses the Python worker
    binary = archive.getinfo(f"{native}{build.BINARY_NAME}")
    assert (binary.external_attr >> 16) & 0o111 == 0o111  # installed executable


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A fresh venv with the wheel installed (not editable): (venv folder, its site-packages)."""
    env_dir = tmp_path_factory.mktemp("installed") / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies come from the test venv; codemode_gen itself only from the wheel.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return env_dir, site


def clean_env(env_dir: Path) -> dict[str, str]:
    """This environment without PYTHONPATH, with the installed venv first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "CODEMODE_PYTHON", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.slow
def test_installed_wheel_runs_from_a_fresh_venv(
    installed: tuple[Path, str], tmp_path: Path
) -> None:
    env_dir, site = installed
    py = env_dir / "bin" / "python"
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = clean_env(env_dir)
    help_ = subprocess.run(
        [env_dir / "bin" / "codemode-gen", "--help"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )
    assert help_.returncode == 0, help_.stderr
    assert "Usage: codemode-gen" in help_.stdout
    where = subprocess.run(
        [
            py,
            "-c",
            "import codemode_gen.generator as g, importlib.util as u;"
            "print(g.__file__); print(u.find_spec('generator'), u.find_spec('runtime'))",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert where[0].startswith(site) and where[1] == "None None"


# Calls the demo's recordings hold (fixtures/notes/calls): replay answers them.
RECORDED_SCRIPT = """
import * as notes from "@codemode/servers/notes";
const note = await notes.get_note({ id: 2 });
globalThis.__codemode_result__ = typeof note.title;
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["--replay", "live"])
def test_installed_children_import_the_installed_package_from_a_checkout(
    installed: tuple[Path, str], tmp_path: Path, mode: str
) -> None:
    """`run` started from a checkout's root, whose ./codemode_gen folder is not the installed
    package: the sandbox worker and the replay servers (and the live demo servers, started as
    ${CODEMODE_PYTHON}) are Python children that must import the installed package anyway."""
    env_dir, _ = installed
    assert (ROOT / "codemode_gen" / "__init__.py").is_file() and not (
        ROOT / "codemode_gen" / "runtime"
    ).exists()
    script = tmp_path / "script.js"
    script.write_text(RECORDED_SCRIPT)
    args = ["--replay"] if mode == "--replay" else []
    proc = subprocess.run(
        [env_dir / "bin" / "codemode-gen", "run", "--no-pretty", *args, str(script)],
        cwd=ROOT,
        env=clean_env(env_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    response = json.loads(proc.stdout)
    assert response["result"] == "string", response
    assert [call["ok"] for call in response["toolTrace"]] == [True]


@pytest.mark.slow
def test_installed_wheel_type_checks_without_node(
    installed: tuple[Path, str], tmp_path: Path
) -> None:
    """The README's install alone, no node on PATH, started from a checkout's root: `check` runs
    the compiler on QuickJS in a child that imports the installed package and its JS (the
    pinned TypeScript seeded into the cache, as a first use downloads it: tests/runtime/host/test_tsinstall.py)."""
    from codemode_gen.runtime.host.tsinstall import CACHE_ENV, REGISTRY_ENV, TYPESCRIPT_VERSION
    from tests.runtime.host.test_tsinstall import seed_cache

    from .conftest import UNREACHABLE_REGISTRY

    env_dir, _ = installed
    seed_cache(tmp_path / "cache" / f"typescript-{TYPESCRIPT_VERSION}")
    script = tmp_path / "agent.ts"
    script.write_text(
        'import * as notes from "@codemode/servers/notes";\n'
        "const note = await notes.get_note({ id: 2 });\nconsole.log(note.titel);\n"
    )
    env = {
        **clean_env(env_dir),
        "PATH": str(env_dir / "bin"),
        CACHE_ENV: str(tmp_path / "cache"),
        REGISTRY_ENV: UNREACHABLE_REGISTRY,
    }
    assert shutil.which("node", path=env["PATH"]) is None
    proc = subprocess.run(
        [env_dir / "bin" / "codemode-gen", "check", str(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [(d["code"], d["path"]) for d in json.loads(proc.stdout)] == [("TS4111", "3:18")]


@pytest.mark.slow
def test_installed_print_config_registers_a_command_a_checkout_cannot_shadow(
    installed: tuple[Path, str], tmp_path: Path
) -> None:
    """The registered command runs from the client's own working directory: here a checkout."""
    env_dir, _ = installed
    py = env_dir / "bin" / "python"
    env = clean_env(env_dir)
    printed = subprocess.run(
        [
            py,
            "-m",
            "codemode_gen",
            "serve",
            "--config",
            str(ROOT / ".mcp.json"),
            "--print-config",
            "json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    entry = json.loads(printed)["mcpServers"]["codemode"]
    assert entry["args"][:3] == ["-P", "-m", "codemode_gen"]
    shown = subprocess.run(
        [entry["command"], *entry["args"], "--print-prompt"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "@codemode/servers/notes" in shown.stdout


def test_every_python_child_is_started_through_children_py() -> None:
    """The class, not one spawn: a module naming `sys.executable` starts (or registers) a Python
    child that a checkout's cwd could shadow, unless it goes through codemode_gen/children.py.
    mcp_json.py's ${CODEMODE_PYTHON} names the interpreter for the user's own servers."""
    from tests.runtime.sandbox.test_engine import package_modules

    allowed = {"codemode_gen.children", "codemode_gen.mcp_json"}
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for module, path in package_modules().items()
        if module not in allowed
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr == "executable"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]
    assert offenders == [], (
        "start Python children with codemode_gen.children.python_module_command: "
        + ", ".join(offenders)
    )


def test_children_never_get_the_working_directory_on_sys_path(tmp_path: Path) -> None:
    from codemode_gen.children import python_module_command

    (tmp_path / "shadowed_probe.py").write_text("")
    for isolation in ("path", "isolated"):
        argv = python_module_command("site", isolation=isolation)
        code = "import sys, importlib.util as u; print(u.find_spec('shadowed_probe') is None, '' in sys.path)"
        out = subprocess.run(
            [argv[0], argv[1], "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["True", "False"], (isolation, out.stdout)
