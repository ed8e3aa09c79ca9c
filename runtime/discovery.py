"""Builds the `@codemode/discovery` module source for one run (spec §4, §12.1).

The catalog is embedded as data in the module text instead of being fetched through the host
bridge: discovery then costs no round trip, cannot be counted against `maxToolCalls`, and is
by construction the snapshot taken at run start (§8.2).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from codemode_gen import SPEC_VERSION
from codemode_gen.runtime.catalog import Catalog

__all__ = ["DEFAULT_SEARCH_LIMIT", "MAX_SEARCH_LIMIT", "MODULE_NAME", "discovery_data", "discovery_module"]

MODULE_NAME = "@codemode/discovery"
# searchTools results when the agent gives no limit: enough to choose from, small enough to
# keep a broad query ("get") from dumping the whole catalog into the agent's context.
DEFAULT_SEARCH_LIMIT = 20
# Upper bound even when the agent asks for more; listTools is the way to see everything.
MAX_SEARCH_LIMIT = 200
_PLACEHOLDER = "__CODEMODE_DISCOVERY_DATA__"


@lru_cache(maxsize=1)
def _template() -> str:
    return resources.files("codemode_gen.runtime").joinpath("js/discovery.js").read_text(encoding="utf-8")


def discovery_data(catalog: Catalog, *, copy_values: bool = True) -> dict[str, Any]:
    """The JSON the module serves: visible servers with their full tool definitions.

    `copy_values=False` shares schema objects with the catalog (only for serialising)."""
    servers = []
    for view in catalog.visible():
        entry = view.describe()
        entry["tools"] = [tool.definition(copy_values=copy_values) for _, tool in sorted(view.tools.items())]
        servers.append(entry)
    return {
        "specVersion": SPEC_VERSION,
        "defaultSearchLimit": DEFAULT_SEARCH_LIMIT,
        "maxSearchLimit": MAX_SEARCH_LIMIT,
        "servers": servers,
    }


def discovery_module(catalog: Catalog) -> str:
    """ES module text; the data is a JSON string literal, so no server text is ever code."""
    text = json.dumps(discovery_data(catalog, copy_values=False), ensure_ascii=True, sort_keys=True, separators=(",", ":"))
    # A second dumps makes a JS string literal; ensure_ascii also escapes U+2028/2029.
    return _template().replace(_PLACEHOLDER, json.dumps(text, ensure_ascii=True), 1)
