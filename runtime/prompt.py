"""The `codemode.run` description: everything the spec says a host MUST document in its system
prompt (§3.2.1, §3.2.3, §3.2.4, §3.5, §5.3.2, §10.1) and the declarations of §4.4.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from codemode_gen import SPEC_VERSION, __version__
from codemode_gen.runtime import limits as limit_defaults

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode

__all__ = ["DEFAULT_PROMPT_BUDGET", "DEFAULT_TOOL_NAME", "system_prompt"]

# Spec §2 names the one outer tool `codemode.run`; `serve --tool-name` changes it for clients
# whose model APIs reject dots in tool names.
DEFAULT_TOOL_NAME = "codemode.run"
# Characters of the whole description. Claude Code forwards at most 16,384 characters of a tool
# description and cuts the rest; staying under it means the model sees all of what we send.
DEFAULT_PROMPT_BUDGET = 16_000
# Bounds the declarations embedded in the tool description: a huge out/ would otherwise make
# every tools/list answer (and the agent's context) megabytes long.
MAX_DECLARATIONS_CHARS = 400_000


def _limits_text() -> str:
    rows = [
        ("timeoutMs", limit_defaults.DEFAULT_TIMEOUT_MS, limit_defaults.HARD_MAX_TIMEOUT_MS, "wall-clock ms for the whole run"),
        ("maxMemoryBytes", limit_defaults.DEFAULT_MAX_MEMORY_BYTES, limit_defaults.HARD_MAX_MEMORY_BYTES, "JS heap bytes"),
        ("maxLogBytes", limit_defaults.DEFAULT_MAX_LOG_BYTES, limit_defaults.HARD_MAX_LOG_BYTES, "bytes of console output kept; then a final warn entry says logs were truncated"),
        ("maxToolCalls", limit_defaults.DEFAULT_MAX_TOOL_CALLS, limit_defaults.HARD_MAX_TOOL_CALLS, "tool calls per run"),
        ("maxConcurrentCalls", limit_defaults.DEFAULT_MAX_CONCURRENT_CALLS, limit_defaults.HARD_MAX_CONCURRENT_CALLS, "tool calls in flight at once; more wait in a queue"),
    ]
    return "\n".join(f"- `{k}` (default {d}, max {m}): {what}" for k, d, m, what in rows)


def system_prompt(cm: CodeMode, *, tool_name: str = DEFAULT_TOOL_NAME, budget: int = DEFAULT_PROMPT_BUDGET) -> str:
    """The `codemode.run` description: everything the spec says a host MUST document."""
    paths = cm.capability_ids()
    json_servers = [paths[cid] for cid, cfg in cm.configs.items() if cfg.unwrap == "json" and cid in paths]
    defaults = dict(cm.settings.limits)
    declarations = cm.declarations()
    if len(declarations) > MAX_DECLARATIONS_CHARS:
        declarations = declarations[:MAX_DECLARATIONS_CHARS] + "\n// … declarations truncated; use @codemode/discovery getTool() for the rest\n"
    parts = [
        f"Run JavaScript against MCP servers in a fresh, isolated QuickJS sandbox (Code Mode spec {SPEC_VERSION}, codemode-gen {__version__}).",
        "",
        "## Script",
        "- `code` runs as an ES module: `import`/`export` and top-level `await` work. Nothing persists between runs.",
        "- The run ends when the module has finished and no tool call or timer is pending (calls you did not await still run to completion), or when a limit is hit.",
        "- Static imports of `@codemode/servers/*` connect those servers before the script starts; dynamic `import()` of them also works.",
        "- Set `globalThis.__codemode_result__ = value` to return a JSON value; `result` is null otherwise.",
        "- Servers: `import * as notes from \"@codemode/servers/<serverId>\"`, one async function per tool (names as in the declarations below).",
        "- Discovery: `import { listServers, describeServer, listTools, getTool, searchTools, specVersion } from \"@codemode/discovery\"`; `listTools(id, {detail: \"name\"|\"description\"|\"full\"})`, `searchTools(query, {detail, serverId, limit})`.",
        "- Errors: `import { CodemodeError, SchemaValidationError, ToolNotFoundError, ServerNotFoundError, ToolCallError, AuthenticationError, SandboxLimitError } from \"@codemode/errors\"`. Every error has a `hint`. A failed tool call throws a normal exception you can catch; the script continues. Only exceeding a limit ends the run.",
        "",
        "## Calling tools",
        "- Pass one argument: the tool's input object. Tools without parameters accept `()` or `({})`. A tool whose input schema is not an object (e.g. an array) takes that value itself: `total([1, 2, 3])`.",
        "- Input is validated before the call: a SchemaValidationError names the JSON Pointer `path`, `expected`, `received` and an `example`.",
        "- Results are unwrapped, in this order: (1) the tool's `structuredContent` if present (content is ignored); (2) the text string if the result is a single text block; (3) if there is any image or audio block, the full MCP result `{content: [...]}` with binary data as base64 strings; (4) otherwise the full MCP result object.",
    ]
    if json_servers:
        parts.append(
            "- Deviation: for the servers " + ", ".join(f"`{s}`" for s in sorted(json_servers))
            + " a single text block that is valid JSON is returned parsed (other text stays a string)."
        )
    parts += [
        "",
        "## Concurrency",
        "- Tool calls run concurrently: `await Promise.all([a.x(), b.y()])` overlaps them, up to `maxConcurrentCalls` in flight; the rest wait in a queue.",
        "",
        "## Limits (`limits` field, integers; unknown keys are ignored)",
        _limits_text(),
    ]
    if defaults:
        parts.append("- This host's defaults override: " + json.dumps(defaults, sort_keys=True))
    parts += [
        "- Exceeding one ends the run with a `SANDBOX_LIMIT` diagnostic (logs so far are kept); in-flight tool calls are cancelled.",
        "",
        "## requestedCapabilities",
        "- Server ids to connect before the script starts (they are otherwise connected on first use). An unavailable one gets a diagnostic at start and throws ServerNotFoundError (or AuthenticationError) when used.",
        "- Supported ids: " + (", ".join(f"`{p}`" for p in sorted(paths.values())) or "(no servers configured)"),
        "",
        "## Globals",
        "- Standard built-ins (JSON, Math, Date, Promise, Map, Set, WeakMap, WeakSet, Symbol, Proxy, Reflect, RegExp, Error, Array, Object, String, Number, Boolean, BigInt, typed arrays, ArrayBuffer, DataView), URL, URLSearchParams, TextEncoder, TextDecoder, setTimeout/clearTimeout, console.log/debug/warn/error.",
        "- Not available: fetch or any network API, setInterval, eval and the Function constructor (also async/generator function constructors), process, require. Built-in prototypes are frozen.",
        "- `console.*` arguments: primitives via String(), objects as stable JSON. Prefer logging summaries (counts, top-N) to full dumps.",
        "",
        "## Response",
        "`{logs: [{level, message, timeMs}], result, diagnostics: [{severity, code, message, hint?, path?, errorClass?}], toolTrace: [{serverId, toolName, durationMs, ok, error?}]}`. Syntax errors, uncaught exceptions and import failures come back as diagnostics (SYNTAX_ERROR, UNCAUGHT_EXCEPTION, IMPORT_FAILURE, SANDBOX_LIMIT), never as a failed tool call.",
        "",
        "## TypeScript declarations of the available modules",
        "```ts",
        declarations.rstrip() or "// (no generated declarations: run `codemode-gen generate`; use @codemode/discovery)",
        "```",
    ]
    return "\n".join(parts) + "\n"
