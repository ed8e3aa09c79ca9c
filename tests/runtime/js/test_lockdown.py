"""runtime/js/prelude.js, phase A (spec §3.5, §11): what the lockdown leaves, checked by walking
the prepared realm from JavaScript with nothing skipped.

The prelude's own walk takes shortcuts to be cheap (it reads no descriptor of a function's
`length` and `name`, and stops at what it froze already, e.g. when it builds the URL classes on
first read); the walks here read every own property of every object reachable from globalThis,
the hidden intrinsics and the @codemode modules' exports, so a shortcut that stops holding
(an engine that puts an object where none was, a prelude function with a `static name`) fails
here. The realms are prepared as the worker prepares them (`Realm.create`), in this process.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from codemode_gen.runtime.limits import Limits
from codemode_gen.runtime.sandbox.engine import EngineError
from codemode_gen.runtime.sandbox.realm import Realm
from codemode_gen.runtime.sandbox.worker import Worker

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
