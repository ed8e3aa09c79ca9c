"""codemode-gen: MCP servers as typed, importable JavaScript APIs for Code Mode agents.

The heavy layers (mcp, jsbox) are imported lazily so that `codemode-gen --help` and the
offline generator stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
SPEC_VERSION = "1.0.0"
#: The specifier prefix every server module is imported under (`@codemode/servers/<id>`):
#: the generator names the modules with it and the sandbox tells server modules from its own
#: `@codemode/*` modules by it, so it lives below both.
MODULE_PREFIX = "@codemode/servers/"

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode

__all__ = ["MODULE_PREFIX", "SPEC_VERSION", "CodeMode", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "CodeMode":
        from codemode_gen.runtime.codemode import CodeMode

        return CodeMode
    raise AttributeError(name)
