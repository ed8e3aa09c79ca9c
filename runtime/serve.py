"""`codemode-gen serve`: Code Mode as an MCP server with exactly one tool, `codemode.run` (§2).

An agent host connects to this over stdio and sees one tool whose description is the whole
system prompt Code Mode needs (§3.2.1, §3.2.3, §3.2.4, §3.5, §4.4, §5.3.2, §10.1): the
rules, the limits, the capability ids and the TypeScript declarations of every server. Runs
share one `CodeMode`, so MCP sessions stay open between runs (and are refreshed on
tools/list_changed, §8); each run still gets a fresh sandbox (§1.4).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codemode_gen import SPEC_VERSION, __version__
from codemode_gen.runtime import limits as limit_defaults
from codemode_gen.runtime.codemode import CodeMode

__all__ = ["INPUT_SCHEMA", "OUTPUT_SCHEMA", "TOOL_NAME", "serve_stdio", "system_prompt"]

TOOL_NAME = "codemode.run"
# Bounds the declarations embedded in the tool description: a huge out/ would otherwise make
# every tools/list answer (and the agent's context) megabytes long.
MAX_DECLARATIONS_CHARS = 400_000

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "JavaScript ES module source (top-level await allowed)."},
        "limits": {
            "type": "object",
            "description": "Optional execution limits; unknown keys are ignored.",
            "properties": {
                key: {"type": "integer", "minimum": 0}
                for key in ("timeoutMs", "maxMemoryBytes", "maxLogBytes", "maxToolCalls", "maxConcurrentCalls")
            },
        },
        "requestedCapabilities": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Server ids to connect before the script starts.",
        },
    },
    "required": ["code"],
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {"type": "array", "items": {"type": "object"}},
        "result": {},
        "diagnostics": {"type": "array", "items": {"type": "object"}},
        "toolTrace": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["logs", "result", "diagnostics"],
}


def _limits_text() -> str:
    rows = [
        ("timeoutMs", limit_defaults.DEFAULT_TIMEOUT_MS, limit_defaults.HARD_MAX_TIMEOUT_MS, "wall-clock ms for the whole run"),
        ("maxMemoryBytes", limit_defaults.DEFAULT_MAX_MEMORY_BYTES, limit_defaults.HARD_MAX_MEMORY_BYTES, "JS heap bytes"),
        ("maxLogBytes", limit_defaults.DEFAULT_MAX_LOG_BYTES, limit_defaults.HARD_MAX_LOG_BYTES, "bytes of console output kept; then a final warn entry says logs were truncated"),
        ("maxToolCalls", limit_defaults.DEFAULT_MAX_TOOL_CALLS, limit_defaults.HARD_MAX_TOOL_CALLS, "tool calls per run"),
        ("maxConcurrentCalls", limit_defaults.DEFAULT_MAX_CONCURRENT_CALLS, limit_defaults.HARD_MAX_CONCURRENT_CALLS, "tool calls in flight at once; more wait in a queue"),
    ]
    return "\n".join(f"- `{k}` (default {d}, max {m}): {what}" for k, d, m, what in rows)


def system_prompt(cm: CodeMode, overrides: Mapping[str, Any] | None = None) -> str:
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


async def handle_run(cm: CodeMode, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """One codemode.run request → §3.3 response; a malformed request is a diagnostic, not a crash."""
    args = dict(arguments or {})
    code = args.get("code")
    problem = None
    if not isinstance(code, str):
        problem = ("/code", "`code` is required and must be a string of JavaScript")
    elif args.get("limits") is not None and not isinstance(args["limits"], dict):
        problem = ("/limits", "`limits` must be an object of integer limits")
    elif args.get("requestedCapabilities") is not None and not (
        isinstance(args["requestedCapabilities"], list)
        and all(isinstance(c, str) for c in args["requestedCapabilities"])
    ):
        problem = ("/requestedCapabilities", "`requestedCapabilities` must be an array of server ids")
    if problem is not None:
        return {
            "logs": [],
            "result": None,
            "diagnostics": [{
                "severity": "error", "code": "INVALID_REQUEST", "message": problem[1],
                "hint": "send {\"code\": \"<JavaScript>\"} with optional limits and requestedCapabilities",
                "path": problem[0],
            }],
            "toolTrace": [],
        }
    assert isinstance(code, str)
    return await cm.run(code, limits=args.get("limits"), requested_capabilities=args.get("requestedCapabilities"))


async def serve_stdio(config: Path, out: Path | None) -> None:
    """Serve codemode.run over stdio until the client disconnects."""
    import mcp_types as types
    from mcp.server import NotificationOptions, Server
    from mcp.server.stdio import stdio_server

    cm = CodeMode.from_config(config, out=out)
    async with cm:

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            await cm.prepare("", [])  # builds modules (and declarations) for servers out/ lacks
            return types.ListToolsResult(tools=[types.Tool(
                name=TOOL_NAME,
                title="Run Code Mode JavaScript",
                description=system_prompt(cm),
                input_schema=INPUT_SCHEMA,
                output_schema=OUTPUT_SCHEMA,
            )])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            if params.name != TOOL_NAME:
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text=f"unknown tool {params.name!r}; the only tool is {TOOL_NAME}")],
                    is_error=True,
                )
            response = await handle_run(cm, params.arguments)
            text = json.dumps(response, ensure_ascii=False, sort_keys=True)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=response,
            )

        server: Any = Server(
            "codemode-gen",
            version=__version__,
            instructions="Use the codemode.run tool: write JavaScript that imports @codemode/servers/* modules.",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options(NotificationOptions()))
