"""runtime/js/prelude.js: the §3.5 globals, console serialisation (§3.3.1), timers, URL, that
lockdown leaves ordinary JavaScript working (override mistake, instanceof, subclasses), and what
the lockdown leaves (§11): every object reachable frozen, override accessors on every prototype,
URL compiled only when a run reads it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox.engine import EngineError
from codemode_gen.runtime.sandbox.pool import Sandbox, WorkerPool
from codemode_gen.runtime.sandbox.realm import Realm
from codemode_gen.runtime.sandbox.worker import Worker
from codemode_gen.runtime.sandbox.worker_process import WorkerKind

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
def env(sandbox_worker: WorkerKind) -> Iterator[tuple[asyncio.AbstractEventLoop, Sandbox]]:
    """A pool of `sandbox_worker`'s kind: the tests through it run on both workers
    (tests/conftest.py); those below on a `Worker` are the Python worker's own."""
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


# ---- the lockdown, checked by walking the prepared realm with nothing skipped -----------------
# The prelude's own walk takes shortcuts to be cheap (it reads no descriptor of a function's
# `length` and `name`, freezes a built-in method without looking further, and stops at what it
# froze already, e.g. when it builds the URL classes on first read); the walks here read every
# own property of every object reachable from globalThis, the hidden intrinsics and the
# @codemode modules' exports, so a shortcut that stops holding (an engine that puts an object
# where none was, a prelude function with a `static name`) fails here. The realms are prepared as
# the worker prepares them (`Realm.create`), in this process.

#: prelude.js's OVERRIDABLE: the data properties of a prototype the lockdown turns into accessors.
OVERRIDABLE = ["constructor", "toString", "valueOf", "toLocaleString", "toJSON", "name", "message"]

# Every object reachable from the roots through own properties (values, getters, setters) and
# prototypes, each with the first path that reached it. Resolves to a JSON report.
WALK = """
(async function () {
  const roots = [
    ["globalThis", globalThis],
    ["%Function.prototype%", Object.getPrototypeOf(function () {})],
    ["%AsyncFunction.prototype%", Object.getPrototypeOf(async function () {})],
    ["%GeneratorFunction.prototype%", Object.getPrototypeOf(function* () {})],
    ["%AsyncGeneratorFunction.prototype%", Object.getPrototypeOf(async function* () {})],
    ["%GeneratorPrototype%", Object.getPrototypeOf(Object.getPrototypeOf((function* () {})()))],
    ["%AsyncGeneratorPrototype%", Object.getPrototypeOf(Object.getPrototypeOf((async function* () {})()))],
    ["%TypedArray%", Object.getPrototypeOf(Uint8Array)],
    ["%ArrayIteratorPrototype%", Object.getPrototypeOf([][Symbol.iterator]())],
    ["%MapIteratorPrototype%", Object.getPrototypeOf(new Map()[Symbol.iterator]())],
    ["%SetIteratorPrototype%", Object.getPrototypeOf(new Set()[Symbol.iterator]())],
    ["%StringIteratorPrototype%", Object.getPrototypeOf(""[Symbol.iterator]())],
    ["%RegExpStringIteratorPrototype%", Object.getPrototypeOf(/a/[Symbol.matchAll](""))],
    ["%IteratorHelperPrototype%", Object.getPrototypeOf([].values().map((x) => x))],
    ["%WrapForValidIteratorPrototype%", Object.getPrototypeOf(Iterator.from({ next() { return { done: true }; } }))],
    ["URL", URL],  // read: built now
    ["URLSearchParams", URLSearchParams],
  ];
  for (const name of ["@codemode/errors", "@codemode/host"]) {
    const ns = await import(name);
    for (const key of Reflect.ownKeys(ns)) roots.push([name + "." + String(key), ns[key]]);
  }
  const paths = new Map();
  const queue = [];
  const reach = (x, path) => {
    if ((typeof x === "object" || typeof x === "function") && x !== null && !paths.has(x)) {
      paths.set(x, path);
      queue.push(x);
    }
  };
  for (const [path, root] of roots) reach(root, path);
  const unfrozen = [];
  const dataOverridable = [];
  const withPrototype = [];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i];
    const path = paths.get(v);
    if (v !== globalThis && !Object.isFrozen(v)) unfrozen.push(path);
    reach(Object.getPrototypeOf(v), path + ".__proto__");
    for (const key of Reflect.ownKeys(v)) {
      const d = Object.getOwnPropertyDescriptor(v, key);
      const step = path + "." + String(key);
      if ("value" in d) reach(d.value, step);
      else {
        reach(d.get, step + "<get>");
        reach(d.set, step + "<set>");
      }
    }
    // A prototype of the realm (a function's `prototype`): its overridable data properties
    // are accessors, and on Object.prototype every property is.
    if (typeof v === "function" && !path.startsWith("@codemode/")) {
      const d = Object.getOwnPropertyDescriptor(v, "prototype");
      const proto = d && d.value;
      if (typeof proto === "object" && proto !== null) {
        const keys = proto === Object.prototype ? Reflect.ownKeys(proto) : OVERRIDABLE;
        for (const key of keys) {
          const p = Object.getOwnPropertyDescriptor(proto, key);
          if (p !== undefined && "value" in p) dataOverridable.push(path + ".prototype." + String(key));
        }
      }
    }
    // The functions the prelude made to make properties overridable have no prototype object.
    if (path.endsWith("<get>") || path.endsWith("<set>")) {
      if (Object.getOwnPropertyDescriptor(v, "prototype") !== undefined) withPrototype.push(path);
    }
  }
  return JSON.stringify({ count: queue.length, unfrozen, dataOverridable, withPrototype });
})()
""".replace("OVERRIDABLE", json.dumps(OVERRIDABLE))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture
def worker() -> Iterator[Worker]:
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        yield Worker(out)
    finally:
        os.close(out)


def evaluate(loop: asyncio.AbstractEventLoop, worker: Worker, script: str) -> Any:
    """`script`'s completion value in a realm prepared as the worker prepares one."""

    async def go() -> Any:
        realm = await Realm.create(worker, Limits())
        try:
            return await realm.engine.run(script, 10.0)
        finally:
            realm.close()

    return loop.run_until_complete(go())


def test_every_object_reachable_after_lockdown_is_frozen(
    loop: asyncio.AbstractEventLoop, worker: Worker
) -> None:
    report = json.loads(evaluate(loop, worker, WALK))
    assert report["count"] > 500  # the walk saw the intrinsics, not an empty realm
    assert report["unfrozen"] == []


def test_a_run_finds_every_object_it_reaches_frozen_on_either_worker(env: Any) -> None:
    # Through the worker of each kind, in a run: the native worker walks and freezes in C
    # (realm.c `__codemode_walk__`, which keeps the locked set between walks: reading URL is a
    # second walk, from the objects the first did not lock).
    report = json.loads(result(env, f"globalThis.__codemode_result__ = await {WALK};"))
    assert report["count"] > 500
    assert report["unfrozen"] == report["dataOverridable"] == report["withPrototype"] == []


def test_every_prototype_keeps_its_override_accessors(
    loop: asyncio.AbstractEventLoop, worker: Worker
) -> None:
    report = json.loads(evaluate(loop, worker, WALK))
    assert report["dataOverridable"] == []
    assert report["withPrototype"] == []


def test_prelude_functions_are_not_constructors(
    loop: asyncio.AbstractEventLoop, worker: Worker
) -> None:
    got = evaluate(
        loop,
        worker,
        """JSON.stringify([
          [console.log, setTimeout, clearTimeout, Date.now, Math.random, Promise.prototype.then]
            .map((f) => [f.name, f.prototype === undefined, Object.isFrozen(f)]),
          (() => { try { new setTimeout(() => {}); return "constructed"; } catch (e) { return e.name; } })(),
          typeof new Date().getTime(),
        ])""",
    )
    assert json.loads(got) == [
        [
            ["", True, True],
            ["setTimeout", True, True],
            ["clearTimeout", True, True],
            ["now", True, True],
            ["random", True, True],
            ["then", True, True],
        ],
        "TypeError",
        "number",
    ]


def test_url_globals_are_read_only_accessors_built_on_first_read(
    loop: asyncio.AbstractEventLoop, worker: Worker
) -> None:
    got = evaluate(
        loop,
        worker,
        """
        "use strict";
        const d = Object.getOwnPropertyDescriptor(globalThis, "URL");
        const shape = [typeof d.get, d.set, d.configurable, d.enumerable, d.get.prototype];
        let assigned;
        try { globalThis.URL = function () {}; assigned = "assigned"; } catch (e) { assigned = e.name; }
        const u = new URL("https://a.test/p?q=1");
        const again = URL === globalThis.URL && URLSearchParams === u.searchParams.constructor;
        let codegen;
        try { Function("return 1"); codegen = "generated"; } catch (e) { codegen = e.name; }
        JSON.stringify({ shape, assigned, href: u.href, again, codegen, evalGone: typeof eval,
          frozen: [URL, URL.prototype, URLSearchParams, URLSearchParams.prototype].every(Object.isFrozen) });
        """,
    )
    assert json.loads(got) == {
        "shape": ["function", None, False, False, None],
        "assigned": "TypeError",
        "href": "https://a.test/p?q=1",
        "again": True,
        "codegen": "TypeError",
        "evalGone": "undefined",
        "frozen": True,
    }


def test_url_js_is_compiled_only_when_a_run_reads_url(
    loop: asyncio.AbstractEventLoop, worker: Worker
) -> None:
    # A url.js that does not parse: the realm is prepared and used all the same, and only a
    # read of URL or URLSearchParams compiles it (and fails).
    worker.url_js = "this is not ( javascript"
    assert evaluate(loop, worker, '"URL" in globalThis && "URLSearchParams" in globalThis') is True
    with pytest.raises(EngineError) as failed:
        evaluate(loop, worker, "typeof URLSearchParams")
    assert failed.value.name == "SyntaxError"
