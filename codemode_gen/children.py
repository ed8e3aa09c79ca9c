"""How codemode-gen starts Python processes of its own: the one command line for each kind.

`python -m codemode_gen` (or any `-m`/`-c`) puts the working directory first on `sys.path`.
Started from a checkout's root, that makes `./codemode_gen` (the source folder, which holds
only the shared core: the installed package is assembled from it, `runtime/`, `generator/` and
`templates/`) shadow the installed package, and the child fails with `No module named
'codemode_gen.runtime'`. An editable install hides the problem (its import hook still finds
the submodules), a regular install does not. So every such child is started here, with:

- `-P` (Python 3.11+): nothing is prepended to `sys.path`, the environment still counts. For
  children that need `PYTHONPATH` (replay servers of a checkout that is only on the path) and
  for the command clients register (`serve --print-config`), which runs in the client's
  environment.
- `-I` (isolated): nor are `PYTHON*` variables or the user's site-packages read. For sandbox
  workers, which run untrusted scripts and must load exactly the package the host runs.

The console script (`codemode-gen`) needs neither: its `sys.path[0]` is its own bin/ folder.
"""

from __future__ import annotations

import os
import sys
from typing import Literal

__all__ = ["python_module_command"]

#: "path": nothing prepended to sys.path (`-P`); "isolated": that, no PYTHON* environment and no
#: user site-packages either (`-I`).
Isolation = Literal["path", "isolated"]

_FLAGS: dict[Isolation, str] = {"path": "-P", "isolated": "-I"}


def python_module_command(
    module: str, *args: str, isolation: Isolation = "path", absolute: bool = False
) -> list[str]:
    """`[python, flag, "-m", module, *args]` for this interpreter, importing the installed
    package whatever the child's working directory. `absolute`: the interpreter by absolute
    path (for a command line another program runs from its own working directory)."""
    python = os.path.abspath(sys.executable) if absolute else sys.executable
    return [python, _FLAGS[isolation], "-m", module, *args]
