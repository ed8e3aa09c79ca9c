"""Sandbox escape probes (spec §3.4, §3.5, §11): every one must fail safely.

Each probe is the body of an async JS function that returns `true` only if the attack worked.
The harness runs it in a fresh sandbox (real worker, real QuickJS), catches whatever it
throws, then checks that the binding layer still works: a tool call made after the attack
must reach the host unchanged and return the host's value unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool
from codemode_gen.runtime.sandbox.worker_process import WorkerKind

NOTES = """
import { callTool, deepFreeze } from "@codemode/host";
export async function echo(input) { return callTool("notes", "echo", input); }
export async function fail(input) { return callTool("notes", "fail", input); }
export const __meta__ = deepFreeze({ serverId: "notes", tools: [{ toolName: "echo", exportName: "echo" }] });
"""
MODULES = {"@codemode/servers/notes": NOTES}

HARNESS = """
import * as notes from "@codemode/servers/notes";
import * as host from "@codemode/host";
import * as errors from "@codemode/errors";
let escaped = false, threw = null;
try {
  escaped = (await (async () => {
%s
  })()) === true;
} catch (e) {
  threw = String(e && e.name);
}
const check = await notes.echo({ n: 42 });
globalThis.__codemode_result__ = { escaped, threw, check };
"""

# (id, body returning true when the escape worked)
PROBES: list[tuple[str, str]] = [
    # --- code generation from strings (§3.5, §11) ---
    ("eval_direct", 'return eval("1 + 1") === 2;'),
    ("eval_global_property", 'return typeof globalThis.eval === "function";'),
    ("eval_indirect", 'return (0, globalThis["ev" + "al"])("1 + 1") === 2;'),
    (
        "eval_redefined_is_not_code_generation",
        'globalThis.eval = (s) => s; return eval("1 + 1") === 2;',
    ),
    ("function_call", 'return Function("return 1")() === 1;'),
    ("function_new", 'return new Function("return 1")() === 1;'),
    ("function_via_prototype", 'return (function () {}).constructor("return 1")() === 1;'),
    ("function_via_arrow", 'return (() => 0).constructor("return 1")() === 1;'),
    ("function_via_class", 'class A {} return A.constructor("return 1")() === 1;'),
    ("function_via_builtin_method", 'return [].map.constructor("return 1")() === 1;'),
    (
        "function_via_bound",
        'return Function.prototype.bind.call(Function, null, "return 1")()() === 1;',
    ),
    (
        "async_function_constructor",
        'return typeof (await (async function () {}).constructor("return 1")()) === "number";',
    ),
    (
        "async_arrow_constructor",
        'return (await Object.getPrototypeOf(async () => {}).constructor("return 1")()) === 1;',
    ),
    (
        "generator_function_constructor",
        'return (function* () {}).constructor("yield 1")().next().value === 1;',
    ),
    (
        "async_generator_function_constructor",
        'return (await (async function* () {}).constructor("yield 1")().next()).value === 1;',
    ),
    ("reflect_construct_function", 'return Reflect.construct(Function, ["return 1"])() === 1;'),
    (
        "reflect_apply_prototype_constructor",
        'return Reflect.apply(Function.prototype.constructor, null, ["return 1"])() === 1;',
    ),
    ("proxy_around_function", 'return new Proxy(Function, {})("return 1")() === 1;'),
    ("symbol_constructor_chain", 'return Symbol("s").constructor.constructor("return 1")() === 1;'),
    (
        "error_constructor_chain",
        'return new Error("x").constructor.constructor("return 1")() === 1;',
    ),
    (
        "caught_tool_error_constructor_chain",
        """
let err; try { await notes.fail({}); } catch (e) { err = e; }
return err.constructor.constructor("return 1")() === 1;""",
    ),
    ("promise_constructor_chain", 'return Promise.resolve().then.constructor("return 1")() === 1;'),
    (
        "set_timeout_with_string",
        """
await new Promise((resolve) => { setTimeout("globalThis.pwned = true", 0); setTimeout(resolve, 5); });
return globalThis.pwned === true;""",
    ),
    (
        "import_data_url",
        'const m = await import("data:text/javascript,export default 1"); return m.default === 1;',
    ),
    ("import_source_text", 'const m = await import("export default 1"); return m.default === 1;'),
    ("import_http_url", 'await import("https://example.com/x.js"); return true;'),
    ("import_relative_file", 'await import("./agent.js.bak"); return true;'),
    ("import_absolute_file", 'await import("/etc/passwd"); return true;'),
    (
        "restore_function_prototype_constructor",
        """
try { Function.prototype.constructor = function () { return 1; }; } catch (e) {}
return (function () {}).constructor !== Function;""",
    ),
    # --- no ambient capabilities (§3.4, §3.5) ---
    (
        "import_quickjs_std",
        'const m = await import("std"); return typeof m.loadFile === "function";',
    ),
    ("import_quickjs_os", 'const m = await import("os"); return typeof m.exec === "function";'),
    ("import_quickjs_qjs_std", 'await import("qjs:std"); return true;'),
    ("import_quickjs_qjs_os", 'await import("qjs:os"); return true;'),
    ("import_node_fs", 'await import("node:fs"); return true;'),
    ("import_fs", 'await import("fs"); return true;'),
    (
        "network_globals",
        """
return ["fetch", "XMLHttpRequest", "WebSocket", "EventSource", "navigator", "Request", "Response",
        "Headers"].some((n) => typeof globalThis[n] !== "undefined");""",
    ),
    (
        "process_and_module_globals",
        """
return ["process", "require", "module", "exports", "Buffer", "Deno", "Bun", "std", "os", "scriptArgs",
        "print", "__filename", "__dirname"].some((n) => typeof globalThis[n] !== "undefined");""",
    ),
    (
        "binding_extras_removed",
        """
return ["setInterval", "performance", "queueMicrotask", "SharedArrayBuffer", "Atomics", "btoa", "atob",
        "DOMException"].some((n) => typeof globalThis[n] !== "undefined");""",
    ),
    (
        "host_bindings_not_on_global",
        """
return Object.getOwnPropertyNames(globalThis).some((n) => n.startsWith("__codemode_") && n !== "__codemode_result__");""",
    ),
    (
        "host_kernel_not_reachable",
        'return typeof globalThis.__codemode_kernel__ !== "undefined" || typeof __codemode_host__ !== "undefined";',
    ),
    # --- prototype pollution (§11) ---
    ("object_prototype_add", "Object.prototype.polluted = 1; return ({}).polluted === 1;"),
    (
        "object_prototype_define",
        'Object.defineProperty(Object.prototype, "polluted", { value: 1 }); return ({}).polluted === 1;',
    ),
    (
        "object_prototype_tostring",
        'Object.prototype.toString = () => "pwned"; return String({}) === "pwned";',
    ),
    (
        "object_prototype_setprototypeof",
        "Object.setPrototypeOf(Object.prototype, { polluted: 1 }); return ({}).polluted === 1;",
    ),
    (
        "array_prototype_push",
        'Array.prototype.push = function () { return "pwned"; }; return [].push(1) === "pwned";',
    ),
    (
        "array_prototype_via_proto",
        "const a = []; a.__proto__.polluted = 1; return [].polluted === 1;",
    ),
    (
        "promise_then_hijack_intercepts_host_reply",
        """
let seen = false;
const original = Promise.prototype.then;
try { Promise.prototype.then = function (a, b) { seen = true; return original.call(this, a, b); }; } catch (e) {}
try { Object.defineProperty(Promise.prototype, "then", { value() { seen = true; } }); } catch (e) {}
await notes.echo({ n: 1 });
return seen;""",
    ),
    (
        "promise_species_hijack",
        "Object.defineProperty(Promise, Symbol.species, { get() { return function () {}; } }); return true;",
    ),
    (
        "promise_global_replaced",
        "globalThis.Promise = function () {}; return globalThis.Promise !== Object.getPrototypeOf(Promise.resolve()).constructor;",
    ),
    (
        "json_stringify_replaced",
        'JSON.stringify = () => "{}"; return JSON.stringify({ a: 1 }) === "{}";',
    ),
    (
        "json_parse_replaced",
        'JSON.parse = () => ({ ok: true, value: "forged" }); return (await notes.echo({ n: 1 })) === "forged";',
    ),
    (
        "json_global_replaced",
        'globalThis.JSON = { parse: () => ({ ok: true, value: "forged" }), stringify: () => "{}" }; return (await notes.echo({ n: 1 })) === "forged";',
    ),
    (
        "error_prepare_stack_trace_hook",
        """
let called = false;
Error.prepareStackTrace = () => { called = true; return "x"; };
try { await notes.fail({}); } catch (e) { String(e.stack); }
return called;""",
    ),
    (
        "error_stack_accessor_redefined",
        'Object.defineProperty(Error.prototype, "stack", { get() { return "forged"; } }); return new Error("x").stack === "forged";',
    ),
    (
        "iterator_helper_hijack",
        'Iterator.prototype.map = function () { return "pwned"; }; return [].values().map((x) => x) === "pwned";',
    ),
    (
        "string_prototype_hijack",
        'String.prototype.startsWith = () => true; return "abc".startsWith("zzz");',
    ),
    (
        "console_redefined_on_global",
        'Reflect.defineProperty(globalThis, "console", { value: { log() {} } }); return !Object.isFrozen(console) || Object.keys(console).length === 1;',
    ),
    (
        "reflect_set_on_intrinsic",
        'return Reflect.set(Object.prototype, "polluted", 1) && ({}).polluted === 1;',
    ),
    ("delete_intrinsic_global", 'delete globalThis.Array; return typeof Array === "undefined";'),
    ("console_replaced", "console.log = () => {}; return console.log.toString().length < 10;"),
    (
        "result_slot_redefined_as_getter",
        'Object.defineProperty(globalThis, "__codemode_result__", { get() { return 1; } }); return true;',
    ),
    # --- tampering with @codemode/* (§11) ---
    ("server_namespace_export_replaced", 'notes.echo = async () => "forged"; return true;'),
    (
        "server_meta_mutated",
        'notes.__meta__.serverId = "other"; return notes.__meta__.serverId === "other";',
    ),
    (
        "server_meta_nested_mutated",
        'notes.__meta__.tools[0].toolName = "other"; return notes.__meta__.tools[0].toolName === "other";',
    ),
    (
        "server_export_function_property",
        'notes.echo.call = () => "forged"; return notes.echo.call() === "forged";',
    ),
    ("host_entry_point_replaced", 'host.callTool = async () => "forged"; return true;'),
    (
        "host_entry_point_defined",
        'Object.defineProperty(host, "callTool", { value: async () => "forged" }); return true;',
    ),
    (
        "host_function_mutated",
        'host.callTool.apply = () => "forged"; return host.callTool.apply() === "forged";',
    ),
    ("errors_class_replaced", "errors.ToolCallError = class {}; return true;"),
    (
        "errors_prototype_mutated",
        'errors.ToolCallError.prototype.hint = "pwned"; return new errors.ToolCallError("m").hint === "pwned";',
    ),
    (
        "errors_name_on_prototype",
        'errors.ToolCallError.prototype.name = "Other"; return new errors.ToolCallError("m").name === "Other";',
    ),
    (
        "errors_instanceof_hijack",
        "Object.defineProperty(errors.ToolCallError, Symbol.hasInstance, { value: () => true }); return ({}) instanceof errors.ToolCallError;",
    ),
    (
        "errors_setprototypeof",
        "Object.setPrototypeOf(errors.ToolCallError, function () {}); return true;",
    ),
    # --- reaching the host through error objects or getters (§11) ---
    (
        "error_object_walk_finds_no_host_function",
        """
let err; try { await notes.fail({}); } catch (e) { err = e; }
const seen = new Set(); const stack = [err]; let found = false;
while (stack.length) {
  const v = stack.pop();
  if ((typeof v !== "object" && typeof v !== "function") || v === null || seen.has(v)) continue;
  seen.add(v);
  if (typeof v === "function" && /__codemode|host_call|kernel/.test(String(v.name))) found = true;
  stack.push(Object.getPrototypeOf(v));
  for (const k of Reflect.ownKeys(v)) {
    const d = Object.getOwnPropertyDescriptor(v, k);
    if ("value" in d) stack.push(d.value); else stack.push(d.get, d.set);
  }
}
return found;""",
    ),
    (
        "getter_in_input_reaches_caller",
        """
let caller = null;
const input = { get x() { try { caller = (function f() { return f.caller; })(); } catch (e) {} return 1; } };
await notes.echo(input);
return typeof caller === "function";""",
    ),
    (
        "function_caller_accessor",
        'return typeof Object.getOwnPropertyDescriptor(Function.prototype, "caller").get.call(notes.echo) === "function";',
    ),
    (
        "host_error_has_no_python_paths",
        """
let err; try { await notes.fail({}); } catch (e) { err = e; }
const text = [err.message, err.stack, JSON.stringify(err)].join("\\n");
return /\\.py\\b|Traceback|site-packages|codemode_gen/.test(text);""",
    ),
    (
        "thenable_input_not_called",
        "let called = false; await notes.echo({ then() { called = true; } }); return called;",
    ),
]


@pytest.fixture(scope="module")
def env(sandbox_worker: WorkerKind) -> Iterator[tuple[asyncio.AbstractEventLoop, Sandbox]]:
    """A warm pool of `sandbox_worker`'s kind (tests/conftest.py: every probe runs on both)."""
    loop = asyncio.new_event_loop()
    sandbox = Sandbox(WorkerPool(2))
    loop.run_until_complete(sandbox.start())
    yield loop, sandbox
    loop.run_until_complete(sandbox.aclose())
    loop.close()


def test_there_are_at_least_40_probes() -> None:
    assert len(PROBES) >= 40
    assert len({name for name, _ in PROBES}) == len(PROBES)


@pytest.mark.parametrize(("name", "body"), PROBES, ids=[p[0] for p in PROBES])
def test_s11_escape_probe_fails_safely(env: Any, name: str, body: str) -> None:
    loop, sandbox = env
    requests: list[dict[str, Any]] = []

    async def host_call(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        if request["toolName"] == "fail":
            return {
                "ok": False,
                "error": {"errorClass": "ToolCallError", "message": "nope", "hint": "h"},
            }
        return {"ok": True, "value": request.get("input")}

    code = HARNESS % body
    r = loop.run_until_complete(
        sandbox.run(code, MODULES, host_call, Limits.from_json({"timeoutMs": 5000}))
    )
    assert r["diagnostics"] == [], r["diagnostics"]
    assert r["result"]["escaped"] is False, r["result"]
    # The binding layer still works after the attack, both ways.
    assert r["result"]["check"] == {"n": 42}
    assert requests[-1] == {
        "op": "call",
        "serverId": "notes",
        "toolName": "echo",
        "input": {"n": 42},
    }


def test_escape_attempts_outside_functions_are_reported_not_crashing(env: Any) -> None:
    loop, sandbox = env

    async def host_call(request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "value": None}

    hostile = [
        'import * as std from "std";',
        'import { readFile } from "node:fs";',
        'throw new Proxy({}, { get() { throw new Error("trap"); }, getPrototypeOf() { throw new Error("trap"); } });',
        'globalThis.__codemode_result__ = { toJSON() { throw new Error("no"); } };',
        'globalThis.__codemode_result__ = new Proxy({}, { ownKeys() { throw new Error("trap"); } });',
    ]
    for code in hostile:
        r = loop.run_until_complete(sandbox.run(code, MODULES, host_call, Limits()))
        assert r["result"] is None
        assert len(r["diagnostics"]) == 1, (code, r)
        assert set(r) == {"logs", "result", "diagnostics"}
