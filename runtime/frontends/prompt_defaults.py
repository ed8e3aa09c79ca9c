"""The served tool's name and the prompt's character budget: the defaults of `serve`'s options.

Kept apart from runtime/frontends/prompt.py so that the command line can show them without importing
the prompt renderer (generator/typescript and jsonschema, ~50 ms): `serve` must answer
`initialize` about as fast as a plain MCP server, and the prompt is only needed by tools/list.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PROMPT_BUDGET", "DEFAULT_TOOL_NAME", "MIN_PROMPT_BUDGET"]

# Spec §2 names the one outer tool `codemode.run`; `serve --tool-name` changes it for clients
# whose model APIs reject dots in tool names.
DEFAULT_TOOL_NAME = "codemode.run"
# Characters of the whole description. Claude Code forwards at most 16,384 characters of a tool
# description and cuts the rest; staying under it means the model sees all of what we send.
DEFAULT_PROMPT_BUDGET = 16_000
# The rules alone need about this much; a smaller budget could not say how to call anything.
MIN_PROMPT_BUDGET = 4_000
