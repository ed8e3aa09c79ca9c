// @ts-check
// Sandbox prelude: the trusted set-up of one fresh QuickJS realm (spec §3.5, §11).
//
// Phase A runs when the worker prepares a realm, before any run is known (so it is off the
// request path):
// 1. Takes the host bindings the worker installed on globalThis into this closure and deletes
//    them, so agent code can never call them directly.
// 2. Provides what QuickJS lacks (§3.5): console.*, setTimeout/clearTimeout on the host clock,
//    URL/URLSearchParams (runtime/js/url.js, compiled the first time a run reads either),
//    globalThis.__codemode_result__ (TextEncoder/TextDecoder are native). Date reads the host's
//    run clock and Math.random is seeded per run (phase B), and every reply and alarm arrives
//    through one pump, one event per turn: a run is a function of what the host hands it, so the
//    host can replay it (runtime/worker.py; docs/DESIGN.md, "Deterministic runs").
// 3. Locks the realm down: removes every global outside an allowlist (eval, network, process,
//    timers that repeat, ...), replaces every code-from-string constructor with one that
//    throws, turns the data properties hit by the "override mistake" into accessors, freezes
//    every intrinsic reachable from globalThis (SES style) and makes the global bindings
//    read-only.
// 4. Leaves two entry points for the worker, globalThis.__codemode_load__ and
//    __codemode_start__, each deleting itself when called.
//
// Phase A2 (`__codemode_load__(maxConcurrentCalls)`, also while the realm waits for its run):
// 5. Loads @codemode/errors and @codemode/host (which takes a one-shot kernel holding the host
//    binding) and deep-freezes their exports. Server modules and @codemode/discovery are
//    registered with the run and evaluated only if the agent imports them (each freezes its
//    own exports), so a run pays for what it imports.
//
// Phase B (`__codemode_start__(runConfigJson)`, called by the worker once the run arrives):
// 6. Runs the agent module, waits until no tool call or timer is pending, and resolves to a
//    JSON report {status, result | error} for the worker.
(function codemodePrelude() {
  "use strict";

  const g = globalThis;
  // ---- 1. host bindings --------------------------------------------------------------------
  const rawHost = g.__codemode_host__;
  const rawLog = g.__codemode_log__;
  const rawArm = g.__codemode_arm__;
  const rawNext = g.__codemode_next__;
  const rawTake = g.__codemode_take__;
  const rawTick = g.__codemode_tick__;
  const rawNow = g.__codemode_now__;
  const config = g.__codemode_config__;
  const rawURLSource = g.__codemode_url__;  // url.js's text, for the URL classes (2d)
  // lockGraph's object walk and freeze in C, and the set of what it locked (the native worker's
  // realm.c; jsbox has none): undefined here when absent, then lockGraph walks in JS.
  const rawWalk = g.__codemode_walk__;
  const rawFreeze = g.__codemode_freeze__;
  const rawLocked = g.__codemode_locked__;
  // And, in C there, which prototype properties lockGraph makes overridable, and sealGlobals.
  const rawOverridable = g.__codemode_overridable__;
  const rawSealGlobals = g.__codemode_seal_globals__;
  const rawDeepFreeze = g.__codemode_deep_freeze__;  // host.js deepFreeze, in C
  for (const name of ["__codemode_host__", "__codemode_log__", "__codemode_arm__", "__codemode_next__",
    "__codemode_take__", "__codemode_tick__", "__codemode_now__", "__codemode_config__", "__codemode_url__",
    "__codemode_walk__", "__codemode_freeze__", "__codemode_locked__", "__codemode_overridable__",
    "__codemode_seal_globals__", "__codemode_deep_freeze__"]) {
    delete g[name];
  }

  // Intrinsics used after lockdown, captured while they are known to be pristine.
  const { defineProperty, getOwnPropertyDescriptor, getOwnPropertyNames, getPrototypeOf, freeze, keys: objectKeys } = Object;
  const hasOwn = Object.prototype.hasOwnProperty;
  const ownKeys = Reflect.ownKeys;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const isArray = Array.isArray;
  const StringCtor = String;
  const PromiseCtor = Promise;
  const race = Promise.race.bind(Promise);
  const ErrorCtor = Error;
  const isFiniteNumber = Number.isFinite;
  const apply = Reflect.apply;
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  function call(fn, thisArg, ...args) { return apply(fn, thisArg, args); }
  function safeString(v) {
    try { return StringCtor(v); } catch (e) { return "[Unprintable value]"; }
  }

  // ---- 2a. console --------------------------------------------------------------------------
  const MAX_LOG_DEPTH = config.maxLogDepth;
  function jsonQuote(s) { return stringify(s); }

  // Stable JSON: keys sorted by UTF-16 code units (JS default sort), compact, toJSON honoured,
  // undefined/functions/symbols dropped in objects and `null` in arrays (JSON.stringify's
  // rules). Cycles, BigInt and depth > MAX_LOG_DEPTH throw, and the caller falls back to
  // "[Unserializable Object]".
  function stableJson(value, key, ancestors) {
    let v = value;
    if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") {
      v = call(v.toJSON, v, key);
    }
    switch (typeof v) {
      case "string": return jsonQuote(v);
      case "number": return isFiniteNumber(v) ? StringCtor(v) : "null";
      case "boolean": return v ? "true" : "false";
      case "bigint": throw new TypeError("BigInt value can't be serialized in JSON");
      case "undefined": case "function": case "symbol": return undefined;
      default: break;
    }
    if (v === null) return "null";
    if (v instanceof Number || v instanceof String || v instanceof Boolean) return stableJson(v.valueOf(), key, ancestors);
    if (ancestors.length >= MAX_LOG_DEPTH) throw new RangeError("too deep");
    for (let i = 0; i < ancestors.length; i++) if (ancestors[i] === v) throw new TypeError("circular structure");
    ancestors.push(v);
    let out;
    if (isArray(v)) {
      const parts = [];
      const n = v.length;
      for (let i = 0; i < n; i++) {
        const s = stableJson(v[i], StringCtor(i), ancestors);
        parts.push(s === undefined ? "null" : s);
      }
      out = "[" + parts.join(",") + "]";
    } else {
      let source = v;
      if (v instanceof ErrorCtor) {
        // Errors have their useful fields non-enumerable: show name and message first.
        source = { name: v.name, message: v.message };
        for (const k of objectKeys(v)) source[k] = v[k];
      }
      const parts = [];
      for (const k of objectKeys(source).sort()) {
        const s = stableJson(source[k], k, ancestors);
        if (s !== undefined) parts.push(jsonQuote(k) + ":" + s);
      }
      out = "{" + parts.join(",") + "}";
    }
    ancestors.pop();
    return out;
  }

  function formatArg(v) {
    if (v === null || (typeof v !== "object" && typeof v !== "function")) return safeString(v);
    if (typeof v === "function") return `[Function: ${(typeof v.name === "string" && v.name) || "anonymous"}]`;
    try {
      const s = stableJson(v, "", []);
      return s === undefined ? "[Unserializable Object]" : s;
    } catch (e) {
      return "[Unserializable Object]";
    }
  }

  let logsOpen = true;
  // The functions the prelude installs are arrows or methods, like native built-ins: no
  // `prototype` object (and not constructors), so nothing more for the lockdown to freeze.
  function makeLogger(level) {
    return (...args) => {
      if (!logsOpen) return;
      let message;
      try {
        const parts = [];
        for (let i = 0; i < args.length; i++) parts.push(formatArg(args[i]));
        message = parts.join(" ");
      } catch (e) {
        message = "[Unserializable Object]";
      }
      // JSON text across the boundary: a lone surrogate in a JS string cannot cross as a str.
      if (!rawLog(level, stringify(message))) logsOpen = false;
    };
  }
  const consoleObject = {
    log: makeLogger("log"),
    info: makeLogger("log"),
    debug: makeLogger("debug"),
    trace: makeLogger("debug"),
    warn: makeLogger("warn"),
    error: makeLogger("error"),
    dir: makeLogger("log"),
    table: makeLogger("log"),
  };

  // ---- 2b. the pump: replies and the alarm, one event per turn ------------------------------
  // rawHost sends a call and returns its number; its reply, like the timer alarm, comes back as
  // an event of the pump: one pending wait on the host (rawNext) while a call is in flight or
  // the alarm is set, whose event is taken (rawTake) and dispatched before the next wait. JS sees
  // an event only once every job of the previous one has run, so the order of events alone
  // decides what the script does, and the host writes that order down (runtime/sandbox/worker.py).
  const ALARM = 0;
  const replyWaiters = new Map(); // call number -> resolve
  let inflight = 0; // calls sent and not answered
  let pumping = false;
  function pumpNeeded() { return inflight > 0 || armedDue !== Infinity; }
  function startPump() {
    if (pumping || !pumpNeeded()) return;
    pumping = true;
    pump();
  }
  async function pump() {
    while (pumpNeeded()) {
      const event = await rawNext();
      const text = rawTake(event);
      if (event > 0) {
        inflight -= 1;
        const resolve = replyWaiters.get(event);
        if (resolve !== undefined) {
          replyWaiters.delete(event);
          resolve(text);
        }
      } else if (event === ALARM) {
        onAlarm();
      } // IDLE (-1): woken to look at pumpNeeded() again
    }
    pumping = false;
  }
  function sendCall(text) {
    const number = rawHost(text);
    const reply = new PromiseCtor((resolve) => { replyWaiters.set(number, resolve); });
    inflight += 1;
    startPump();
    return reply;
  }

  // ---- 2b'. timers on the host clock --------------------------------------------------------
  // The host keeps one alarm (rawArm sets or clears its due time, synchronously) and it goes off
  // as an event of the pump, so any number of timers costs at most one pending host wait.
  // Timers fire in (due, creation) order from a min-heap.
  const MAX_PENDING_TIMERS = config.maxPendingTimers;
  const MAX_DELAY_MS = 2147483647;
  const timers = new Map(); // id -> timer record
  const heap = []; // min-heap of records by (due, seq); cleared records are skipped lazily
  let nextTimerId = 1;
  let armedDue = Infinity;
  let fatalError = null;
  let rejectFatal = null;
  const fatal = new PromiseCtor((resolve, reject) => { rejectFatal = reject; });
  fatal.catch(() => {});

  function before(a, b) { return a.due < b.due || (a.due === b.due && a.seq < b.seq); }
  function heapPush(rec) {
    heap.push(rec);
    let i = heap.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(heap[i], heap[p])) break;
      const t = heap[i]; heap[i] = heap[p]; heap[p] = t; i = p;
    }
  }
  function heapPop() {
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l], heap[m])) m = l;
        if (r < heap.length && before(heap[r], heap[m])) m = r;
        if (m === i) break;
        const t = heap[i]; heap[i] = heap[m]; heap[m] = t; i = m;
      }
    }
    return top;
  }
  function earliest() {
    while (heap.length > 0 && heap[0].cleared) heapPop();
    return heap.length > 0 ? heap[0].due : Infinity;
  }
  function onAlarm() {
    armedDue = Infinity; // the host alarm is spent
    fireDue();
  }
  function reschedule() {
    const due = earliest();
    if (due !== armedDue) {
      armedDue = due;
      rawArm(due === Infinity ? -1 : due);
    }
    startPump();
  }
  function fireDue() {
    const now = rawNow();
    while (earliest() <= now) {
      const rec = heapPop();
      timers.delete(rec.id);
      try {
        apply(rec.fn, undefined, rec.args);
      } catch (e) {
        if (fatalError === null) {
          fatalError = { error: e };
          rejectFatal(e);
        }
      }
    }
    reschedule();
    checkIdle();
  }
  const setTimeout = (callback, delay, ...args) => {
    if (typeof callback !== "function") {
      throw new TypeError("setTimeout needs a function: strings are never evaluated in this sandbox");
    }
    if (timers.size >= MAX_PENDING_TIMERS) {
      throw new RangeError(`too many pending timers (limit ${MAX_PENDING_TIMERS})`);
    }
    let ms = Number(delay);
    if (!(ms > 0)) ms = 0;
    if (ms > MAX_DELAY_MS) ms = MAX_DELAY_MS;
    const rec = { id: nextTimerId++, seq: nextTimerId, due: rawNow() + ms, fn: callback, args, cleared: false };
    timers.set(rec.id, rec);
    heapPush(rec);
    reschedule();
    return rec.id;
  };
  const clearTimeout = (id) => {
    const rec = timers.get(id);
    if (rec === undefined) return;
    rec.cleared = true;
    timers.delete(id);
    reschedule();
    checkIdle();
  };

  // ---- 2c. pending work, for "the run ends when nothing is pending" -------------------------
  let pendingCalls = 0;
  let idleWaiters = [];
  function pending() { return pendingCalls + timers.size; }
  function checkIdle() {
    if (pending() !== 0 || idleWaiters.length === 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
  function idle() {
    return new PromiseCtor((resolve) => {
      idleWaiters.push(resolve);
      checkIdle();
    });
  }

  // ---- 2c'. failed tool calls nobody awaited ----------------------------------------------
  // QuickJS gives the host no unhandled-rejection hook, so the prelude watches instead: every
  // promise the script hands to `await`, `.then/.catch/.finally`, `Promise.all/allSettled/race/
  // any` or returns from an async function reads its `constructor` or calls `then`, and both
  // are intercepted on the (then frozen) Promise.prototype. While a tool call is in flight or a
  // failed one is unaccounted for, such a promise gets one extra internal reaction, which marks
  // the failure as handled when the promise rejects with it. A failure never marked by the end
  // of the run is reported as a warning (response.unawaited_calls); the run's outcome is not
  // changed. The promise callTool returns to a generated `async` wrapper is not watched: the
  // wrapper always subscribes to it, whether or not the script awaits the wrapper's promise
  // (which is watched instead); one the script got from callTool directly is watched.
  const MAX_TRACKED_FAILURES = config.maxTrackedFailures;
  const MAX_REPORTED_FAILURES = config.maxReportedFailures;
  const MAX_REPORT_NAME_CHARS = config.maxNameChars;
  const MAX_REPORT_TEXT_CHARS = config.maxReportTextChars;
  const promiseProto = PromiseCtor.prototype;
  const rawThen = promiseProto.then;
  const wrapperCalls = new WeakSet(); // callTool's promises held by a generated wrapper
  const watched = new WeakSet();      // promises given the internal reaction already
  const failures = new Map();         // error object -> {serverId, toolName, stack, handled}
  let unhandledFailures = 0;
  let untrackedFailures = 0;          // failures past MAX_TRACKED_FAILURES (counted only)
  let inHook = false;                 // inside our own then: its constructor read is ours
  function cut(text, max) {
    const s = safeString(text);
    return s.length > max ? s.slice(0, max) + "…" : s;
  }
  function markHandled(reason) {
    if (reason === null || (typeof reason !== "object" && typeof reason !== "function")) return;
    const rec = failures.get(reason);
    if (rec !== undefined && !rec.handled) {
      rec.handled = true;
      unhandledFailures -= 1;
    }
  }
  function observe(p) {
    if (inHook || (pendingCalls === 0 && unhandledFailures === 0)) return;
    if ((typeof p !== "object" && typeof p !== "function") || p === null) return;
    if (wrapperCalls.has(p) || watched.has(p)) return;
    watched.add(p);
    inHook = true;
    try { apply(rawThen, p, [undefined, markHandled]); } catch (e) { /* not a promise */ } finally { inHook = false; }
  }
  // `await p` and Promise.resolve(p) read p.constructor; the setter keeps the override-mistake
  // behaviour every other frozen prototype gets (enableOverride).
  const promiseHooks = {
    /** @this {any} */
    then(onFulfilled, onRejected) {
      observe(this);
      if (inHook) return apply(rawThen, this, [onFulfilled, onRejected]);
      inHook = true;
      try { return apply(rawThen, this, [onFulfilled, onRejected]); } finally { inHook = false; }
    },
    /** @this {any} */
    getConstructor() {
      observe(this);
      return PromiseCtor;
    },
    /** @this {any} */
    setConstructor(value) {
      if (this === promiseProto) throw new TypeError("Cannot assign to read only property 'constructor' of frozen intrinsic");
      defineProperty(this, "constructor", { value, writable: true, enumerable: true, configurable: true });
    },
  };
  defineProperty(promiseProto, "then", { value: promiseHooks.then, writable: true, enumerable: false, configurable: true });
  defineProperty(promiseProto, "constructor", { get: promiseHooks.getConstructor, set: promiseHooks.setConstructor, enumerable: false, configurable: false });
  // Whether callTool's caller (the frame after its own in `stack`) is a generated wrapper.
  function calledByWrapper(stack) {
    const lines = safeString(stack).slice(0, 4096).split("\n");
    for (let i = 0; i + 1 < lines.length; i++) {
      if (lines[i].indexOf("callTool") >= 0) return lines[i + 1].indexOf("(@codemode/servers/") >= 0;
    }
    return false;
  }
  // A promise callTool returned: its failure is recorded by a reaction registered now, so it
  // runs before anything the script (or the generated wrapper) attaches.
  function trackCall(promise, serverId, toolName, stack) {
    if (calledByWrapper(stack)) wrapperCalls.add(promise);
    const rec = { serverId: cut(serverId, MAX_REPORT_NAME_CHARS), toolName: cut(toolName, MAX_REPORT_NAME_CHARS),
      stack: cut(stack, MAX_REPORT_TEXT_CHARS), handled: false };
    inHook = true;
    try { apply(rawThen, promise, [undefined, (error) => callFailed(error, rec)]); } finally { inHook = false; }
  }
  function callFailed(error, rec) {
    if (error === null || typeof error !== "object" || failures.has(error)) return;
    if (failures.size >= MAX_TRACKED_FAILURES) {
      untrackedFailures += 1;
      return;
    }
    failures.set(error, rec);
    unhandledFailures += 1;
  }
  function unawaitedReport() {
    const calls = [];
    let more = untrackedFailures;
    for (const [error, rec] of failures) {
      if (rec.handled) continue;
      if (calls.length >= MAX_REPORTED_FAILURES) {
        more += 1;
        continue;
      }
      /** @type {{ serverId: any, toolName: any, name: string | null, message: string | null, stack: any }} */
      const row = { serverId: rec.serverId, toolName: rec.toolName, name: null, message: null, stack: rec.stack };
      try {
        row.name = cut(error.name, MAX_REPORT_NAME_CHARS);
        row.message = cut(error.message, MAX_REPORT_TEXT_CHARS);
      } catch (x) { /* hostile getter */ }
      calls.push(row);
    }
    return { calls, untracked: more };
  }

  // ---- 2d. URL / URLSearchParams (url.js), built the first time a run reads either ---------
  // Compiling url.js was an eighth of every realm's preparation, and few runs use URL: the
  // two globals are accessors (section 2e) that build the classes on first read by evaluating
  // url.js's text (rawURLSource, from the worker) with the engine's own `eval`, captured here
  // before lockdown removes it. Only this closure holds that `eval`, and the only text it is
  // ever given is url.js's: code generation from strings stays disabled for agent code (§3.5).
  // The classes are locked down like every intrinsic (lockGraph) before either global returns
  // them; if building fails (out of memory) nothing is kept and the next read tries again.
  const rawEval = g.eval;
  /** @type {{ URL: any, URLSearchParams: any } | null} */
  let urlClasses = null;
  function builtURLClasses() {
    if (urlClasses === null) {
      const factory = rawEval(rawURLSource());  // indirect: global scope, url.js is an expression
      const built = factory({ encoder, decoder, StringCtor, safeString, call, objectKeys });
      lockGraph([built.URL, built.URLSearchParams], []);
      urlClasses = { URL: built.URL, URLSearchParams: built.URLSearchParams };
    }
    return urlClasses;
  }
  const urlGetters = {
    get URL() { return builtURLClasses().URL; },
    get URLSearchParams() { return builtURLClasses().URLSearchParams; },
  };

  // ---- 2d'. Date and Math.random from the run's clock and seed ----------------------------
  // Phase B sets the seed and Date's base (the run's start, Unix ms): a resumed run gets the
  // values of its first round, so it sees the same dates and random numbers again.
  const RealDate = g.Date;
  const construct = Reflect.construct;
  const dateToString = RealDate.prototype.toString;
  let clockBase = 0;
  function clockNow() { return clockBase + rawNow(); }
  function Date(...args) {
    if (new.target === undefined) return call(dateToString, new RealDate(clockNow()));
    return construct(RealDate, args.length === 0 ? [clockNow()] : args, new.target);
  }
  defineProperty(Date, "length", { value: 7 });
  defineProperty(Date, "prototype", { value: RealDate.prototype, writable: false, enumerable: false, configurable: false });
  defineProperty(Date, "now", { value: { now() { return clockNow(); } }.now, writable: true, enumerable: false, configurable: true });
  for (const name of ["parse", "UTC"]) {
    defineProperty(Date, name, { value: RealDate[name], writable: true, enumerable: false, configurable: true });
  }
  defineProperty(RealDate.prototype, "constructor", { value: Date, writable: true, enumerable: false, configurable: true });
  defineProperty(g, "Date", { value: Date, writable: true, enumerable: false, configurable: true });
  // sfc32 (a small, fast PRNG with a 128-bit state), two outputs per double for 53 random bits.
  let sa = 0, sb = 0, sc = 0, sd = 0;
  function next32() {
    const t = (((sa + sb) | 0) + sd) | 0;
    sd = (sd + 1) | 0;
    sa = sb ^ (sb >>> 9);
    sb = (sc + (sc << 3)) | 0;
    sc = (sc << 21) | (sc >>> 11);
    sc = (sc + t) | 0;
    return t >>> 0;
  }
  function seedRandom(seed) {
    sa = seed[0] | 0; sb = seed[1] | 0; sc = seed[2] | 0; sd = seed[3] | 0;
    for (let i = 0; i < 15; i++) next32(); // mix the seed in
  }
  defineProperty(Math, "random", { value: { random() {
    return ((next32() >>> 5) * 67108864 + (next32() >>> 6)) / 9007199254740992;
  } }.random, writable: true, enumerable: false, configurable: true });

  // ---- 2e. install the provided globals -----------------------------------------------------
  const provided = { console: consoleObject, setTimeout, clearTimeout };
  for (const name of objectKeys(provided)) {
    defineProperty(g, name, { value: provided[name], writable: true, enumerable: false, configurable: true });
  }
  // URL and URLSearchParams: the engine's own if it has them, else url.js's, built on first read
  // (2d). An accessor without a setter is as read-only as the data globals sealGlobals makes.
  for (const name of ["URL", "URLSearchParams"]) {
    if (typeof g[name] === "function") continue;
    const get = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(urlGetters, name)).get;
    defineProperty(g, name, { get, set: undefined, enumerable: false, configurable: true });
  }
  defineProperty(g, "__codemode_result__", { value: undefined, writable: true, enumerable: false, configurable: false });

  // ---- 4. lockdown helpers ------------------------------------------------------------------
  // Globals that may exist after lockdown: ECMAScript built-ins plus spec §3.5. Everything else
  // the engine or binding adds (eval, performance, queueMicrotask, atob/btoa, DOMException,
  // SharedArrayBuffer/Atomics, and anything a future binding version adds such as fetch) goes.
  const ALLOWED_GLOBALS = new Set([
    "Object", "Function", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Math", "JSON",
    "Reflect", "Proxy", "Promise", "Date", "RegExp", "Map", "Set", "WeakMap", "WeakSet", "WeakRef",
    "FinalizationRegistry", "Iterator", "DisposableStack", "AsyncDisposableStack",
    "Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError",
    "InternalError", "AggregateError", "SuppressedError",
    "ArrayBuffer", "DataView", "Uint8Array", "Int8Array", "Uint8ClampedArray", "Uint16Array", "Int16Array",
    "Uint32Array", "Int32Array", "Float16Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
    "parseInt", "parseFloat", "isNaN", "isFinite", "decodeURI", "decodeURIComponent", "encodeURI",
    "encodeURIComponent", "escape", "unescape", "Infinity", "NaN", "undefined", "globalThis",
    "TextEncoder", "TextDecoder", "URL", "URLSearchParams", "setTimeout", "clearTimeout", "console",
    "__codemode_result__",
  ]);

  function throwingConstructor(name) {
    // A stand-in whose prototype is the real one, so `f instanceof Function` keeps working.
    const stub = function () {
      throw new TypeError(`${name}: code generation from strings is disabled in this sandbox (spec §3.5)`);
    };
    defineProperty(stub, "name", { value: name });
    return stub;
  }

  function tameCodeGeneration() {
    const pairs = [
      ["Function", getPrototypeOf(function () {})],
      ["AsyncFunction", getPrototypeOf(async function () {})],
      ["GeneratorFunction", getPrototypeOf(function* () {})],
      ["AsyncGeneratorFunction", getPrototypeOf(async function* () {})],
    ];
    for (const [name, proto] of pairs) {
      const stub = throwingConstructor(name);
      defineProperty(stub, "prototype", { value: proto, writable: false, enumerable: false, configurable: false });
      defineProperty(proto, "constructor", { value: stub, writable: true, enumerable: false, configurable: true });
      if (name === "Function") {
        defineProperty(g, "Function", { value: stub, writable: true, enumerable: false, configurable: true });
      }
    }
    // V8-style stack hooks would run agent code while errors are built inside @codemode/host.
    for (const name of ["prepareStackTrace", "stackTraceLimit"]) {
      const d = getOwnPropertyDescriptor(ErrorCtor, name);
      if (d !== undefined) {
        const value = name === "stackTraceLimit" ? (d.get ? call(d.get, ErrorCtor) : d.value) : undefined;
        defineProperty(ErrorCtor, name, { value, writable: false, enumerable: false, configurable: false });
      }
    }
  }

  function removeGlobals() {
    for (const name of ownKeys(g)) {
      if (typeof name === "string" && ALLOWED_GLOBALS.has(name)) continue;
      if (!delete g[name]) throw new Error(`lockdown: cannot remove global ${safeString(name)}`);
    }
  }

  // Turn a data property into an accessor so that assigning it on an object that inherits
  // from the frozen prototype creates an own property instead of throwing (override mistake).
  // The accessors are methods, not `function` expressions: a method has no `prototype` object,
  // which would be one more object reachable from the intrinsics to freeze.
  function enableOverride(obj, key) {
    const d = getOwnPropertyDescriptor(obj, key);
    if (d === undefined || !("value" in d) || !d.configurable) return;
    const value = d.value;
    const accessor = {
      get() { return value; },
      /** @this {any} */
      set(v) {
        if (this === obj) throw new TypeError(`Cannot assign to read only property '${safeString(key)}' of frozen intrinsic`);
        if (hasOwn.call(this, key)) this[key] = v;
        else defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
      },
      enumerable: d.enumerable,
      configurable: false,
    };
    freeze(accessor.get);
    freeze(accessor.set);
    defineProperty(obj, key, accessor);
  }

  const OVERRIDABLE = ["constructor", "toString", "valueOf", "toLocaleString", "toJSON", "name", "message"];
  function hiddenIntrinsics() {
    const list = [
      getPrototypeOf(function () {}), getPrototypeOf(async function () {}), getPrototypeOf(function* () {}),
      getPrototypeOf(async function* () {}), getPrototypeOf(Uint8Array),
      getPrototypeOf([][Symbol.iterator]()), getPrototypeOf(new Map()[Symbol.iterator]()),
      getPrototypeOf(new Set()[Symbol.iterator]()), getPrototypeOf(""[Symbol.iterator]()),
      getPrototypeOf(/a/[Symbol.matchAll]("")), getPrototypeOf((function* () {})()),
      getPrototypeOf((async function* () {})()),
    ];
    try { list.push(getPrototypeOf([].values().map((x) => x))); } catch (e) { /* no iterator helpers */ }
    try { list.push(getPrototypeOf(Iterator.from(/** @type {any} */ ({ next() { return { done: true }; } })))); } catch (e) { /* absent */ }
    return list;
  }

  // Every object the lockdown froze (and the global object, which stays extensible): a later
  // walk (lockGraph) stops at them, since what they reach is frozen already. The C walk keeps
  // this set in the realm; here it is made for the JS walk, when that first walks.
  /** @type {Set<any> | null} */
  let locked = null;
  function lockedSet() {
    if (locked === null) locked = new Set(rawLocked === undefined ? [g] : rawLocked());
    return locked;
  }
  const objectProto = Object.prototype;
  const functionProto = getPrototypeOf(function () {});

  // Freeze everything reachable from `roots` through own properties (accessors' functions
  // included) and prototypes that is not in `locked` yet (SES style), after turning the
  // OVERRIDABLE data properties of each prototype reached (a function's `prototype`) into
  // accessors (enableOverride). Per property one getOwnPropertyDescriptor, which allocates
  // less than getOwnPropertyDescriptors; each object is checked against `locked` before it is
  // stacked, so it is stacked once. The native worker walks in C (rawWalk: realm.c
  // `__codemode_walk__`, the same rules, the same objects in the same order, never running JS;
  // it keeps what it found, for rawFreeze), unless it declines (a Proxy reached, an engine
  // failure, its bound on objects): undefined, nothing changed, and the JS walk does it, from
  // then on.
  function lockGraph(roots, moreProtos) {
    const protos = moreProtos;
    const walkedInC = rawWalk !== undefined && locked === null && rawWalk(roots, protos) !== undefined;
    const found = walkedInC ? [] : walkGraph(roots, protos);
    // Override-mistake accessors on every prototype reached (one already frozen by an earlier
    // walk has nothing configurable left: enableOverride skips it).
    // Everything on Object.prototype (plain objects overriding toString/hasOwnProperty/... are
    // common). In C (rawOverridable) only the pairs whose property is a configurable data one.
    if (rawOverridable !== undefined) {
      const pairs = rawOverridable(protos, OVERRIDABLE, objectProto);
      for (let i = 0; i < pairs.length; i += 2) enableOverride(pairs[i], pairs[i + 1]);
    } else {
      for (let i = 0; i < protos.length; i++) {
        const proto = protos[i];
        const names = proto === objectProto ? getOwnPropertyNames(proto) : OVERRIDABLE;
        for (let k = 0; k < names.length; k++) enableOverride(proto, names[k]);
      }
    }
    // Freeze (the accessor functions made just now are frozen where they are made).
    if (walkedInC) rawFreeze();
    for (let i = 0; i < found.length; i++) freeze(found[i]);
  }

  // The walk: what lockGraph freezes, in order (each added to `locked`); a function's
  // `prototype` object is appended to `protos`.
  function walkGraph(roots, protos) {
    const locked = lockedSet();
    const found = [];
    const stack = [];
    for (let i = 0; i < roots.length; i++) {
      const r = roots[i];
      if ((typeof r === "object" || typeof r === "function") && r !== null && !locked.has(r)) { locked.add(r); stack.push(r); }
    }
    while (stack.length > 0) {
      const v = stack.pop();
      found.push(v);
      const p = getPrototypeOf(v);
      if (p !== null && !locked.has(p)) { locked.add(p); stack.push(p); }
      const isFunction = typeof v === "function";
      const keys = ownKeys(v);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        // ECMA-262 makes a function's `length` and `name` data properties holding a number and a
        // string (SetFunctionLength, SetFunctionName), for built-ins and for the functions the
        // prelude and url.js make (none has a static member by these names): no object there.
        // Skipping them saves a third of the descriptors read (tests/runtime/js/test_prelude.py
        // walks every property of the locked realm to hold this).
        if (isFunction && (key === "length" || key === "name")) continue;
        const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(v, key));  // an own key: defined
        if ("value" in d) {
          const x = d.value;
          if (typeof x === "function") {
            if (!locked.has(x)) {
              locked.add(x);
              // Most are built-in methods: nothing but `length` and `name`, Function.prototype
              // as prototype (walked anyway). Such a leaf only needs freezing: not stacked.
              const leafKeys = ownKeys(x);
              if (leafKeys.length === 2 && leafKeys[0] === "length" && leafKeys[1] === "name" && getPrototypeOf(x) === functionProto) found.push(x);
              else stack.push(x);
            }
          } else if (typeof x === "object" && x !== null) {
            if (isFunction && key === "prototype") protos.push(x);
            if (!locked.has(x)) { locked.add(x); stack.push(x); }
          }
        } else {
          const get = d.get, set = d.set;
          if (get !== undefined && !locked.has(get)) { locked.add(get); stack.push(get); }
          if (set !== undefined && !locked.has(set)) { locked.add(set); stack.push(set); }
        }
      }
    }
    return found;
  }

  function freezeIntrinsics() {
    const roots = [];
    for (const name of ownKeys(g)) {
      if (name === "globalThis" || name === "__codemode_result__") continue;
      const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(g, name));  // an own key: defined
      if (hasOwn.call(d, "value")) roots.push(d.value);
      else { roots.push(d.get); roots.push(d.set); }
    }
    const hidden = hiddenIntrinsics();
    for (const r of hidden) roots.push(r);
    roots.push(getPrototypeOf(g));
    lockGraph(roots, [objectProto, ...hidden]);  // the hidden intrinsics are prototypes too
  }

  /** @type {(string | symbol)[]} */
  const UNSEALED_GLOBALS = ["__codemode_result__", "__codemode_start__", "__codemode_load__"];
  function sealGlobals() {
    if (rawSealGlobals !== undefined) return rawSealGlobals(UNSEALED_GLOBALS);  // the same, in C
    for (const name of ownKeys(g)) {
      if (UNSEALED_GLOBALS.includes(name)) continue;
      const d = /** @type {PropertyDescriptor} */ (getOwnPropertyDescriptor(g, name));  // an own key: defined
      if (!d.configurable && (!hasOwn.call(d, "value") || !d.writable)) continue;
      if (hasOwn.call(d, "value")) {
        defineProperty(g, name, { value: d.value, writable: false, enumerable: d.enumerable, configurable: false });
      } else {
        defineProperty(g, name, { get: d.get, set: d.set, enumerable: d.enumerable, configurable: false });
      }
    }
  }

  // ---- 5. report ----------------------------------------------------------------------------
  function describeError(e, errorsModule) {
    /** @type {Record<string, any>} */
    const out = { isError: false, name: null, message: null, stack: null, text: null, errorClass: null, hint: null };
    try { out.isError = e instanceof ErrorCtor; } catch (x) { /* hostile proxy */ }
    try { out.text = e === null ? "null" : e === undefined ? "undefined" : (out.isError ? safeString(e) : formatArg(e)); } catch (x) { out.text = "[Unprintable value]"; }
    if (e !== null && (typeof e === "object" || typeof e === "function")) {
      for (const key of ["name", "message", "stack", "hint"]) {
        try {
          const v = e[key];
          if (typeof v === "string") out[key] = v;
        } catch (x) { /* throwing getter */ }
      }
      try {
        if (errorsModule !== null && e instanceof errorsModule.CodemodeError) {
          const classes = [errorsModule.AuthenticationError, errorsModule.ToolCallError, errorsModule.SchemaValidationError,
            errorsModule.ToolNotFoundError, errorsModule.ServerNotFoundError, errorsModule.SandboxLimitError,
            errorsModule.CodemodeError];
          for (const cls of classes) {
            if (e instanceof cls) { out.errorClass = cls.name; break; }
          }
          if (out.errorClass === "SandboxLimitError") {
            try { out.limit = safeString(e.limit); out.value = typeof e.value === "number" ? e.value : null; } catch (x) { /* ignore */ }
          }
        }
      } catch (x) { /* hostile proxy */ }
    }
    return out;
  }

  // Once the script has ended, nothing it left behind may reach a server: a `toJSON` run while
  // the result is serialised, a getter read while an error is described. Such a call gets this
  // reply and is never sent, so toolTrace (which the host writes) lists only calls it made.
  let ended = false;
  const ENDED_REPLY = stringify({ ok: false, error: {
    errorClass: "ToolCallError",
    message: "the script has ended: a tool call made after that (e.g. from toJSON while the result is serialised) is not sent",
    hint: "make every tool call before the script ends, and keep toJSON and getters free of tool calls",
  } });
  function gatedHost(text) {
    if (ended) return new PromiseCtor((resolve) => resolve(ENDED_REPLY));
    const reply = sendCall(text);
    wrapperCalls.add(reply); // only host.js awaits it: no watcher needed (observe)
    return reply;
  }

  // Phase A2, while the realm waits for its run (off the request path): the @codemode modules
  // every run has. Server modules and @codemode/discovery are only registered; each is
  // evaluated when (and only if) the agent imports it, and freezes its own exports.
  let errorsModule = null;
  let loaded = false;
  async function load(maxConcurrentCalls) {
    try {
      // ---- 3. @codemode modules: errors, then host (takes the kernel) ----------------------
      const errors = await import("@codemode/errors");
      const kernel = {
        hostCall: gatedHost,
        begin() { pendingCalls += 1; },
        end() { pendingCalls -= 1; checkIdle(); },
        track: trackCall,
        maxConcurrentCalls,
      };
      defineProperty(g, "__codemode_kernel__", { value: freeze(kernel), writable: false, enumerable: false, configurable: true });
      const host = await import("@codemode/host");
      if (hasOwn.call(g, "__codemode_kernel__")) {
        delete g.__codemode_kernel__;
        throw new Error("lockdown: @codemode/host did not take the kernel");
      }
      const exported = [];
      for (const ns of [errors, host]) {
        for (const key of ownKeys(ns)) exported.push(ns[key]);
      }
      // All at once in C when it can (undefined: it declined, nothing changed), else in JS.
      if (rawDeepFreeze === undefined || rawDeepFreeze(exported) === undefined) {
        for (let i = 0; i < exported.length; i++) host.deepFreeze(exported[i]);
      }
      errorsModule = errors;
      loaded = true;
      return stringify({ status: "loaded" });
    } catch (e) {
      ended = true;
      return stringify({ status: "setup_error", error: describeError(e, null) });
    }
  }

  async function run(runConfig) {
    if (!loaded) {
      ended = true;
      return stringify({ status: "setup_error", error: describeError(new Error("the realm's modules were not loaded"), null) });
    }

    // ---- 5. the agent module, then wait for pending tool calls and timers -------------------
    try {
      await race([import(runConfig.agentModule), fatal]);
      for (;;) {
        await race([idle(), fatal]);
        await rawTick(); // one host turn: every queued job runs before we look again
        if (pending() === 0) break;
      }
      ended = true;
      if (fatalError !== null) throw fatalError.error;
    } catch (e) {
      ended = true;
      markHandled(e); // the failure that ended the run is its own diagnostic
      return stringify({ status: "error", error: describeError(e, errorsModule), unawaited: unawaitedReport() });
    }
    const unawaited = unawaitedReport();
    const value = g.__codemode_result__;
    if (value === undefined) return stringify({ status: "ok", result: null, unawaited });
    let text;
    try {
      text = stringify(value);
    } catch (e) {
      return stringify({ status: "ok", result: null, resultError: safeString(e && e.message), unawaited });
    }
    if (text === undefined) {
      return stringify({ status: "ok", result: null, resultError: `a ${typeof value} is not JSON-serialisable`, unawaited });
    }
    return stringify({ status: "ok", result: text, unawaited });
  }

  // ---- phase A ends here: lock the realm down now, before any run is known -----------------
  tameCodeGeneration();
  removeGlobals();
  freezeIntrinsics();
  // The worker's entry points, each called once and removing itself before anything else
  // happens, so agent code can never call them: phase A2 (`__codemode_load__`, when the realm
  // is prepared) and phase B (`__codemode_start__`, with the run's JSON config).
  const loadEntry = (maxConcurrentCalls) => {
    delete g.__codemode_load__;
    return load(maxConcurrentCalls);
  };
  const start = (runConfigText) => {
    delete g.__codemode_start__;
    const runConfig = parse(runConfigText);
    clockBase = runConfig.clockBase;
    seedRandom(runConfig.seed);
    return run(runConfig);
  };
  defineProperty(g, "__codemode_load__", { value: freeze(loadEntry), writable: false, enumerable: false, configurable: true });
  defineProperty(g, "__codemode_start__", { value: freeze(start), writable: false, enumerable: false, configurable: true });
  sealGlobals();
  return "locked";
})();
