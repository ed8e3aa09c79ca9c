"""runtime/js/prelude.js: the §3.5 globals, console serialisation (§3.3.1), timers, URL, and
that lockdown leaves ordinary JavaScript working (override mistake, instanceof, subclasses)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool

REQUIRED_GLOBALS = [
    "JSON",
    "Math",
    "Date",
    "URL",
    "URLSearchParams",
    "Promise",
    "Map",
    "Set",
    "WeakMap",
    "WeakSet",
    "Symbol",
    "Proxy",
    "Reflect",
    "RegExp",
    "Error",
    "Array",
    "Object",
    "String",
    "Number",
    "Boolean",
    "BigInt",
    "parseInt",
    "parseFloat",
    "isNaN",
    "isFinite",
    "Infinity",
    "NaN",
    "undefined",
    "TextEncoder",
    "TextDecoder",
    "ArrayBuffer",
    "DataView",
    "Uint8Array",
    "Int8Array",
    "Uint16Array",
    "Int16Array",
    "Uint32Array",
    "Int32Array",
    "Float32Array",
    "Float64Array",
    "setTimeout",
    "clearTimeout",
    "console",
]
FORBIDDEN_GLOBALS = [
    "fetch",
    "XMLHttpRequest",
    "WebSocket",
    "setInterval",
    "clearInterval",
    "eval",
    "process",
    "require",
    "module",
    "exports",
    "Buffer",
    "global",
    "setImmediate",
]


async def _no_host(request: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "value": None}


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[asyncio.AbstractEventLoop, Sandbox]]:
    loop = asyncio.new_event_loop()
    sandbox = Sandbox(WorkerPool(1))
    yield loop, sandbox
    loop.run_until_complete(sandbox.aclose())
    loop.close()


def run(env: Any, code: str, **limits: Any) -> dict[str, Any]:
    loop, sandbox = env
    return loop.run_until_complete(
        sandbox.run(code, {}, _no_host, Limits.from_json({"timeoutMs": 5000, **limits}))
    )


def result(env: Any, code: str) -> Any:
    r = run(env, code)
    assert r["diagnostics"] == [], r["diagnostics"]
    return r["result"]


def test_s3_5_required_globals_present(env: Any) -> None:
    got = result(
        env,
        f"globalThis.__codemode_result__ = {REQUIRED_GLOBALS!r}.filter((n) => !(n in globalThis));",
    )
    assert got == []
    kinds = result(
        env,
        """globalThis.__codemode_result__ = [typeof console.log, typeof console.debug,
        typeof console.warn, typeof console.error, "__codemode_result__" in globalThis];""",
    )
    assert kinds == ["function"] * 4 + [True]


def test_s3_5_forbidden_globals_absent(env: Any) -> None:
    got = result(
        env,
        f"globalThis.__codemode_result__ = {FORBIDDEN_GLOBALS!r}.filter((n) => n in globalThis);",
    )
    assert got == []


def test_s3_5_function_from_string_throws_but_functions_work(env: Any) -> None:
    got = result(
        env,
        """
const f = () => 1;
let err;
try { new Function("return 1"); } catch (e) { err = e.name; }
globalThis.__codemode_result__ = [f instanceof Function, typeof Function, err, (async () => 2) instanceof Function];
""",
    )
    assert got == [True, "function", "TypeError", True]


def test_s3_3_1_console_serialisation(env: Any) -> None:
    r = run(
        env,
        r"""
console.log("s", 1, -0, true, null, undefined, 10n, Symbol("x"));
console.log({ b: 1, a: { d: [1, { z: 0, y: null }], c: "q" } }, [3, undefined, () => 1]);
const circ = { name: "c" }; circ.self = circ;
console.warn(circ);
console.error({ big: 1n });
console.debug(new Date(0), new Map([[1, 2]]), { toJSON() { return "custom"; } });
console.info("info is log");
console.log(new TypeError("bad"), function named() {});
""",
    )
    msgs = [(e["level"], e["message"]) for e in r["logs"]]
    assert msgs == [
        ("log", "s 1 0 true null undefined 10 Symbol(x)"),
        ("log", '{"a":{"c":"q","d":[1,{"y":null,"z":0}]},"b":1} [3,null,null]'),
        ("warn", "[Unserializable Object]"),
        ("error", "[Unserializable Object]"),
        ("debug", '"1970-01-01T00:00:00.000Z" {} "custom"'),
        ("log", "info is log"),
        ("log", '{"message":"bad","name":"TypeError"} [Function: named]'),
    ]
    times = [e["timeMs"] for e in r["logs"]]
    assert all(isinstance(t, int) and t >= 0 for t in times) and times == sorted(times)


def test_s3_3_1_time_ms_counts_from_sandbox_start(env: Any) -> None:
    r = run(
        env, 'console.log("a"); await new Promise((r) => setTimeout(r, 120)); console.log("b");'
    )
    a, b = (e["timeMs"] for e in r["logs"])
    assert b - a >= 100


def test_text_encoder_decoder(env: Any) -> None:
    got = result(
        env,
        """
const bytes = new TextEncoder().encode("héllo €");
globalThis.__codemode_result__ = [Array.from(bytes).length, new TextDecoder().decode(bytes)];
""",
    )
    assert got == [10, "héllo €"]


def test_url_parsing_and_resolution(env: Any) -> None:
    got = result(
        env,
        """
const u = new URL("HTTPS://User:Pa ss@Example.COM:443/a/./b/../c d?q=1 2&x=é#frag ment");
const rel = new URL("../x/y?z#h", "http://h.test/a/b/c");
globalThis.__codemode_result__ = {
  href: u.href, protocol: u.protocol, host: u.host, hostname: u.hostname, port: u.port, pathname: u.pathname,
  search: u.search, hash: u.hash, origin: u.origin, username: u.username, password: u.password,
  q: u.searchParams.get("q"), x: u.searchParams.get("x"),
  rel: rel.href, port8080: new URL("http://a.test:8080").host, json: JSON.stringify({ u: new URL("http://a.test") }),
  mailto: new URL("mailto:someone@example.com").pathname,
  canParse: [URL.canParse("nope"), URL.canParse("/p", "http://a.test")],
};
""",
    )
    assert got == {
        "href": "https://User:Pa%20ss@example.com/a/c%20d?q=1%202&x=%C3%A9#frag%20ment",
        "protocol": "https:",
        "host": "example.com",
        "hostname": "example.com",
        "port": "",
        "pathname": "/a/c%20d",
        "search": "?q=1%202&x=%C3%A9",
        "hash": "#frag%20ment",
        "origin": "https://example.com",
        "username": "User",
        "password": "Pa%20ss",
        "q": "1 2",
        "x": "é",
        "rel": "http://h.test/a/x/y?z#h",
        "port8080": "a.test:8080",
        "json": '{"u":"http://a.test/"}',
        "mailto": "someone@example.com",
        "canParse": [False, True],
    }


def test_url_search_params(env: Any) -> None:
    got = result(
        env,
        """
const p = new URLSearchParams("?a=1&b=x+y&a=2&c=%26");
p.append("d", "é &=");
p.set("a", "3");
p.delete("b");
const u = new URL("http://h.test/p?k=v");
u.searchParams.append("n", "1 2");
const sorted = new URLSearchParams({ z: "1", a: "2" }); sorted.sort();
globalThis.__codemode_result__ = {
  s: p.toString(), all: p.getAll("a"), has: p.has("c"), c: p.get("c"), missing: p.get("nope"),
  entries: [...p], size: p.size, url: u.href, sorted: sorted.toString(),
  fromPairs: new URLSearchParams([["x", "1"]]).toString(),
};
""",
    )
    assert got == {
        "s": "a=3&c=%26&d=%C3%A9+%26%3D",
        "all": ["3"],
        "has": True,
        "c": "&",
        "missing": None,
        "entries": [["a", "3"], ["c", "&"], ["d", "é &="]],
        "size": 3,
        "url": "http://h.test/p?k=v&n=1+2",
        "sorted": "a=2&z=1",
        "fromPairs": "x=1",
    }


def test_invalid_url_throws_type_error(env: Any) -> None:
    got = result(
        env,
        """
const out = [];
for (const s of ["nope", "http://", "http://a b/", "http://h:99999/"]) {
  try { new URL(s); out.push("parsed"); } catch (e) { out.push(e.name); }
}
globalThis.__codemode_result__ = out;
""",
    )
    assert got == ["TypeError"] * 4


def test_set_timeout_rejects_strings_and_clear_timeout_cancels(env: Any) -> None:
    got = result(
        env,
        """
let kind;
try { setTimeout("1 + 1", 0); } catch (e) { kind = e.name; }
let fired = false;
const id = setTimeout(() => { fired = true; }, 5);
clearTimeout(id);
clearTimeout(12345);
await new Promise((r) => setTimeout(r, 30));
globalThis.__codemode_result__ = [kind, fired, typeof id];
""",
    )
    assert got == ["TypeError", False, "number"]


def test_lockdown_keeps_override_mistake_working(env: Any) -> None:
    got = result(
        env,
        """
class MyError extends Error { constructor(m) { super(m); this.name = "MyError"; } }
const o = {}; o.toString = () => "custom"; o.constructor = "c"; o.valueOf = () => 7;
function F() {} F.prototype.toString = function () { return "F!"; };
const arr = [1]; arr.toString = () => "arr";
const e = new TypeError("t"); e.message = "changed"; e.name = "Renamed";
globalThis.__codemode_result__ = [new MyError("x").name, String(new MyError("x")), String(o), o.constructor, o + 1,
  String(new F()), String(arr), String(e), Object.isFrozen(Object.prototype), Object.isFrozen(Array.prototype)];
""",
    )
    assert got == [
        "MyError",
        "MyError: x",
        "custom",
        "c",
        8,
        "F!",
        "arr",
        "Renamed: changed",
        True,
        True,
    ]


def test_intrinsics_frozen_and_globals_sealed(env: Any) -> None:
    got = result(
        env,
        """
const AsyncFunction = Object.getPrototypeOf(async function () {});
const it = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
globalThis.__codemode_result__ = [
  Object.isFrozen(Promise.prototype), Object.isFrozen(JSON), Object.isFrozen(AsyncFunction), Object.isFrozen(it),
  Object.isFrozen(console), Object.getOwnPropertyDescriptor(globalThis, "JSON").writable,
  Object.getOwnPropertyDescriptor(globalThis, "__codemode_result__").writable,
];
globalThis.mine = 1;  // the global object itself stays extensible for the agent
""",
    )
    assert got == [True, True, True, True, True, False, True]


def test_codemode_error_classes(env: Any) -> None:
    loop, sandbox = env
    r = loop.run_until_complete(
        sandbox.run(
            """
import * as E from "@codemode/errors";
const names = ["CodemodeError", "SchemaValidationError", "ToolNotFoundError", "ServerNotFoundError",
  "ToolCallError", "AuthenticationError", "SandboxLimitError"];
const out = {};
for (const n of names) {
  const e = new E[n]("msg", { hint: "h", serverId: "s", toolName: "t", path: "/a", limit: "timeoutMs", value: 5 });
  out[n] = [e.name, e instanceof E.CodemodeError, e instanceof Error, e.hint, Object.isFrozen(E[n]), String(e)];
}
const auth = new E.AuthenticationError("no");
class Mine extends E.ToolCallError { constructor() { super("m"); this.name = "Mine"; } }
const sv = new E.SchemaValidationError("bad", { toolName: "t", exportName: "x", path: "/a", expected: "string", received: "number", example: { a: "s" } });
globalThis.__codemode_result__ = { out, authIsTool: auth instanceof E.ToolCallError, defaultHint: typeof auth.hint,
  mine: [new Mine().name, new Mine() instanceof E.ToolCallError],
  sv: [sv.toolName, sv.exportName, sv.path, sv.expected, sv.received, sv.example] };
""",
            {},
            _no_host,
            Limits(),
        )
    )
    assert r["diagnostics"] == []
    got = r["result"]
    for name, (cls_name, is_base, is_error, hint, frozen, text) in got["out"].items():
        assert (cls_name, is_base, is_error, hint, frozen, text) == (
            name,
            True,
            True,
            "h",
            True,
            f"{name}: msg",
        )
    assert got["authIsTool"] is True and got["defaultHint"] == "string"
    assert got["mine"] == ["Mine", True]
    assert got["sv"] == ["t", "x", "/a", "string", "number", {"a": "s"}]
