"""Spec §5.3.2: turn a raw CallToolResult into the JSON value a binding returns.

This is the single implementation: the runtime's bridge calls it on live results and the
generator calls it on recorded ones, so an inferred output type always describes exactly what
a script receives.
"""

from __future__ import annotations

import json
from typing import Any, Literal

UnwrapMode = Literal["spec", "json"]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def parse_json_text(text: str) -> tuple[bool, Any]:
    """(True, value) when `text` is strict JSON (no NaN/Infinity, which JSON.parse rejects).

    Text nested too deeply for the parser (a JSON depth bomb) counts as "not JSON" and stays
    a string rather than crashing the caller.
    """
    try:
        return True, json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError, as is ours
        return False, None


def unwrap_result(result: dict[str, Any], mode: UnwrapMode = "spec") -> Any:
    """Apply §5.3.2 rules 1-4 in order.

    Rule 1 treats `"structuredContent": null` as absent: MCP defines structuredContent as an
    object, and SDKs serialise "not provided" as null or omit it.

    mode "json" is a documented, opt-in deviation (codemode.toml `[servers.<id>] unwrap =
    "json"`): a rule-2 text that is valid JSON is returned parsed; any other text stays a string.
    """
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    if len(blocks) == 1:
        block = blocks[0]
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            text: str = block["text"]
            if mode == "json":
                ok, value = parse_json_text(text)
                if ok:
                    return value
            return text
    # Rule 3 (any image/audio block) and rule 4 (everything else) both return the full result
    # object; binary payloads are already base64 strings on the wire and are left untouched.
    return result
