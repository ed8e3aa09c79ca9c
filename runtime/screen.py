"""The JSON text a script hands out, screened before anything parses it: a tool call's input
(MAX_INPUT_BYTES) and the run's result (MAX_RESULT_BYTES), both at most MAX_JSON_DEPTH deep.

A call's input is screened in the sandbox worker, on the text QuickJS produced; the result on
the host (runtime/sandbox/outcome.py), on the text the worker passed through: a recursive parser
must never see text the host would refuse anyway (§7.4).
"""

from __future__ import annotations

import json
from typing import Any

from codemode_gen import payload
from codemode_gen.jsonio import json_text_depth_exceeds
from codemode_gen.runtime.diagnostics import Diagnostic, result_not_serializable, result_too_large
from codemode_gen.runtime.jsonsafe import utf8_safe, utf8_safe_json
from codemode_gen.runtime.limits import MAX_INPUT_BYTES, MAX_JSON_DEPTH, MAX_RESULT_BYTES


def _utf8_size(text: str, cap: int) -> int:
    """UTF-8 bytes of `text`, exact whenever it could be over `cap` (else a lower bound)."""
    if len(text) * 4 <= cap:  # at most 4 bytes a character: cannot be over
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


# How @codemode/host (runtime/js/host.js) writes every request: these keys, in this order.
_CALL_HEAD = '{"op":"call","serverId":'
_CALL_TOOL = ',"toolName":'
# Bounds the names kept in a refused request (no real server id or tool name comes close).
MAX_FORWARDED_NAME_CHARS = 4096
_decoder = json.JSONDecoder()


def screen_call_request(text: str) -> str:
    """The call request the worker forwards to the host: `text` itself, or, when its input is
    over MAX_INPUT_BYTES or nested deeper than MAX_JSON_DEPTH, a request without the input that
    says why (`inputRejected`), which the bridge answers with a SchemaValidationError.

    The host never has to parse (recursively, on its event loop) what it would refuse anyway.
    """
    size = _utf8_size(text, MAX_INPUT_BYTES)
    if size > MAX_INPUT_BYTES:
        why: dict[str, Any] = {"reason": "size", "bytes": size}
    elif json_text_depth_exceeds(text, MAX_JSON_DEPTH + 1):  # the request object is one level
        why = {"reason": "depth"}
    else:
        return text
    server_id = tool_name = ""
    if text.startswith(_CALL_HEAD):
        try:
            server_id, end = _decoder.raw_decode(text, len(_CALL_HEAD))
            if text.startswith(_CALL_TOOL, end):
                tool_name = _decoder.raw_decode(text, end + len(_CALL_TOOL))[0]
        except ValueError:
            pass
    request = {
        "op": "call",
        "serverId": str(server_id)[:MAX_FORWARDED_NAME_CHARS],
        "toolName": str(tool_name)[:MAX_FORWARDED_NAME_CHARS],
        "inputRejected": why,
    }
    return json.dumps(request, ensure_ascii=True, separators=(",", ":"))


def result_from_text(text: Any) -> tuple[Any, list[Diagnostic]]:
    """(result, diagnostics) from the JSON text of `globalThis.__codemode_result__`: null with a
    diagnostic when it is over MAX_RESULT_BYTES or nested deeper than MAX_JSON_DEPTH (checked
    before parsing: a recursive parser must never see such text).

    The result is UTF-8-safe, whatever the text held (lone surrogates, escaped as JSON.stringify
    writes them or not, become U+FFFD), so `build_response` need not walk it again
    (`result_checked`)."""
    if not isinstance(text, str):
        return None, []
    if not text.isascii():  # the C check: a str from the pipe holds a lone surrogate only if
        text = utf8_safe(text)  # the worker broke the protocol
    size = _utf8_size(text, MAX_RESULT_BYTES)
    if size > MAX_RESULT_BYTES:
        return None, [result_too_large(size, MAX_RESULT_BYTES)]
    if json_text_depth_exceeds(text, MAX_JSON_DEPTH):
        return None, [
            result_not_serializable(
                f"objects and arrays nested deeper than {MAX_JSON_DEPTH} levels"
            )
        ]
    try:
        value = payload.loads(text)  # on the host: in bounded C calls (the event loop's turns)
    except (ValueError, RecursionError):
        return None, [result_not_serializable("not valid JSON")]
    if "\\ud" in text or "\\uD" in text:  # JSON.stringify escapes lone surrogates only
        value = utf8_safe_json(value)
    return value, []
