// @ts-check
// The native sandbox worker's supervisor (runtime/native/INTERFACE.md): the worker's logic, in
// trusted JavaScript running in its own QuickJS runtime (no memory limit, no deadline) next to
// the realms it drives. The C shell (runtime/native/worker.c) owns the process, the poll loop and
// the realms' engines; this file decides everything a run's JavaScript observes and everything
// written to the host, so that the host (runtime/sandbox/run.py, outcome.py) reads this worker
// exactly as it reads the Python one.
//
// It is a line-by-line port of the Python worker, section by section:
//   - protocol.py, jsonsafe.py, jsonio.py, screen.py: the helpers the worker calls (encoding
//     messages, UTF-8 safety, the depth scan, call screening);
//   - logs.py: `LogCollector.add`;
//   - run_state.py: `RunClock`, `RunState`;
//   - realm.py: `Realm` (the bound host functions, the pump, the alarm, journal, replay, pause);
//   - worker.py: `Worker` (the pipe, the inbox, one run's lifecycle).
// Where Python awaits an asyncio future, this side has a small `{id, done}` waiter settled
// through `native.settle`; `loop.call_soon(f)` is "run f at the realm's next `afterTurn`"; the
// alarm's `loop.call_later` is the shell's single timer (`native.setTimer`).
//
// A classic script (the shell evaluates it as `supervisor.js`), wrapped in one function so that
// it adds nothing to the global scope but `globalThis.supervisor`.
(function codemodeSupervisor() {
  "use strict";

  /**
   * What the C shell binds as global `native` (INTERFACE.md, "native").
   * @typedef {{
   *   config: any,
   *   write(text: string): void,
   *   exit(code: number): void,
   *   monotonicMs(): number,
   *   wallMs(): number,
   *   random32x4(): number[],
   *   setTimer(delayMs: number): void,
   *   clearTimer(): void,
   *   realmNew(maxMemoryBytes: number, maxConcurrentCalls: number): number,
   *   realmAddModule(rid: number, name: string, source: string): void,
   *   realmRun(rid: number, script: string, timeoutMs: number): void,
   *   settle(rid: number, waiterId: number, value: number): void,
   *   checkSyntax(code: string): {message: string, stack: string} | null,
   *   realmHeapExhausted(rid: number): boolean,
   *   realmFree(rid: number): void,
   *   releaseMemory(): void,
   * }} Native
   */
  /** @typedef {{timeoutMs: number, maxMemoryBytes: number, maxLogBytes: number, maxConcurrentCalls: number}} Limits */
  /** A `done`'s fields, and the prelude's report JSON text it carries verbatim (encodeDone). @typedef {[Record<string, any>, string | null]} Done */

  const g = /** @type {any} */ (globalThis);
  const native = /** @type {Native} */ (g.native);
  const config = native.config;

  // ---- constants: the host's, from CONFIG_JSON (runtime/native/launch.py `worker_config`) ------
  /** @type {Limits} */
  const DEFAULT_LIMITS = Object.freeze({ ...config.defaultLimits });
  const MAX_INPUT_BYTES = config.maxInputBytes;
  const MAX_JSON_DEPTH = config.maxJsonDepth;
  const MAX_FORWARDED_NAME_CHARS = config.maxForwardedNameChars;
  const MAX_JOURNAL_EVENTS = config.maxJournalEvents;
  const MAX_JOURNAL_CLOCK_RUNS = config.maxJournalClockRuns;
  const LOG_LEVELS = /** @type {string[]} */ (config.logLevels);
  const LOG_ENTRY_OVERHEAD_BYTES = config.logEntryOverheadBytes;
  const MIN_LOG_ENTRIES = config.minLogEntries;
  // Not (yet) in CONFIG_JSON: script_errors.AGENT_MODULE and protocol.MODULE_ERRORS/MODULE_HOST.
  // Taken from it when launch.py sends them; the fallbacks are the Python worker's names.
  const AGENT_MODULE = typeof config.agentModule === "string" ? config.agentModule : "agent.js";
  const BUNDLED_MODULE_NAMES = Array.isArray(config.bundledModules)
    ? config.bundledModules
    : ["@codemode/errors", "@codemode/host"];
  // limits.LIMIT_RANGES, when launch.py sends it: then a run's limits are checked as
  // Limits.from_json checks them; without it, only that the four the worker reads are integers.
  const LIMIT_RANGES = config.limitRanges && typeof config.limitRanges === "object" ? config.limitRanges : null;

  // ---- protocol.py --------------------------------------------------------------------------
  // Message kinds (host → worker, worker → host).
  const RUN = "run", REPLY = "reply", CHECK = "check", EXIT = "exit", PAUSE = "pause", RESUME = "resume";
  const READY = "ready", LOG = "log", LOGS_TRUNCATED = "logs_truncated", CALL = "call", DONE = "done";
  const CHECKED = "checked", PAUSED = "paused", DIVERGED = "diverged";
  /** How a run ended, as `done`'s `kind` says (protocol.DoneKind). */
  const DoneKind = Object.freeze({
    LATE: "late", // the run's time was gone before the script could start
    TIMEOUT: "timeout", // interrupted at the deadline
    PENDING_LIMIT: "pending_limit", // the engine refused another pending host call
    LOST_MODULE: "lost_module", // a module digest neither sent nor held (a host/worker mismatch)
    INTERNAL: "internal", // a bug in the worker, reported on its stderr
    SETUP_FAILED: "setup_failed", // the realm could not be built
    ENGINE_ERROR: "engine_error", // the engine failed outside the prelude's report
    REPORT: "report", // the prelude reported the run
  });
  // How the prelude's report of a run that ended well begins (prelude.js `run`: `status` is its
  // first key): such a report crosses to the host as it is, its result parsed there only.
  const OK_REPORT_PREFIX = '{"status":"ok"';

  const NOT_ASCII = /[\u007f-\uffff]/g;
  /** @param {string} c */
  function escapeUnit(c) {
    return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  }

  /**
   * Python's `json.dumps(value, ensure_ascii=True, separators=(item, key))` of a JSON-shaped value.
   * Strings: JSON.stringify writes the same escapes for control characters and lone surrogates;
   * everything outside space..tilde it leaves as is becomes \uXXXX (lowercase, a pair as its two
   * halves), as ensure_ascii does. Numbers as Python prints them (`pyNumber`): an integral value
   * as an int, which every number the worker itself sends is.
   * @param {any} value @param {string} item @param {string} key @returns {string}
   */
  function pyJson(value, item, key) {
    if (typeof value === "string") return JSON.stringify(value).replace(NOT_ASCII, escapeUnit);
    if (typeof value === "number") return Number.isFinite(value) ? pyNumber(value) : String(value);
    if (Array.isArray(value)) return "[" + value.map((v) => pyJson(v, item, key)).join(item) + "]";
    if (isDict(value)) {
      const fields = [];
      for (const k of Object.keys(value)) {
        if (value[k] !== undefined) fields.push(pyJson(k, item, key) + key + pyJson(value[k], item, key));
      }
      return "{" + fields.join(item) + "}";
    }
    return value === true ? "true" : value === false ? "false" : "null";
  }

  /** The compact ASCII JSON of protocol.py's encoder. @param {any} value */
  function asciiJson(value) {
    return pyJson(value, ",", ":");
  }

  /** One message as its line: compact ASCII JSON and a newline. @param {Record<string, any>} message */
  function encode(message) {
    return asciiJson(message) + "\n";
  }

  /**
   * A call message with the JS-made request JSON embedded verbatim (no re-escaping).
   * @param {number} callId @param {any} requestText
   */
  function encodeCall(callId, requestText) {
    if (typeof requestText === "string" && requestText.isWellFormed()) {
      return `{"op":"call","id":${callId},"request":${requestText}}\n`;
    }
    // a lone surrogate slipped through: escape it as text
    return encode({ op: CALL, id: callId, request: pyStr(requestText) });
  }

  /**
   * A `done` line: `outcome`'s fields, with the prelude's report JSON text (if any) embedded
   * verbatim as `report`, the way `encodeCall` embeds a request.
   * @param {Record<string, any>} outcome @param {string | null} reportText
   */
  function encodeDone(outcome, reportText) {
    const head = asciiJson({ op: DONE, ...outcome });
    if (reportText === null) return head + "\n";
    // JSON.stringify escapes lone surrogates; one that slipped through becomes U+FFFD, as
    // everywhere a JS string meets UTF-8.
    return `${head.slice(0, -1)},"report":${utf8Safe(reportText)}}\n`;
  }

  /**
   * Whether a `done` with this prelude report carries `heapExhausted`: for a setup failure, or
   * a failure that came back without a message (QuickJS may throw null when it cannot even
   * allocate an Error). The worker probes the heap only then; the host reads it only then.
   * @param {Record<string, any>} report
   */
  function needsHeapProbe(report) {
    const status = report.status;
    if (status === "setup_error") return true;
    const error = report.error;
    if (status !== "error" || !isDict(error)) return false;
    const text = pyStr(pyTruthy(error.text) ? error.text : "");
    return !pyTruthy(error.isError) && (text === "null" || text === "undefined" || text === "");
  }

  // ---- jsonsafe.py, and Python's view of JSON values ------------------------------------------
  /** Replace lone surrogates (which JS strings may hold) with U+FFFD; keep valid pairs. @param {string} text */
  function utf8Safe(text) {
    return text.toWellFormed();
  }

  /** isinstance(x, int) of a decoded JSON value (bool excluded, as the worker always does). @param {any} x */
  function isInt(x) {
    return typeof x === "number" && Number.isInteger(x);
  }

  /** isinstance(x, dict) of a decoded JSON value. @param {any} x @returns {x is Record<string, any>} */
  function isDict(x) {
    return x !== null && typeof x === "object" && !Array.isArray(x);
  }

  /** Python's truth value of a decoded JSON value (`x or default`): empty containers are false. @param {any} x */
  function pyTruthy(x) {
    if (Array.isArray(x)) return x.length > 0;
    if (isDict(x)) return Object.keys(x).length > 0;
    return Boolean(x);
  }

  /** Python's `str(x)` of a decoded JSON value. @param {any} x @returns {string} */
  function pyStr(x) {
    return typeof x === "string" ? x : pyRepr(x);
  }

  /** Python's `repr(x)` of a decoded JSON value. @param {any} x @returns {string} */
  function pyRepr(x) {
    if (x === null || x === undefined) return "None";
    if (x === true) return "True";
    if (x === false) return "False";
    if (typeof x === "number") return pyNumber(x);
    if (typeof x === "string") return pyStringRepr(x);
    if (Array.isArray(x)) return "[" + x.map(pyRepr).join(", ") + "]";
    if (isDict(x)) return "{" + Object.keys(x).map((k) => pyStringRepr(k) + ": " + pyRepr(x[k])).join(", ") + "}";
    return String(x);
  }

  /**
   * A number as Python prints it: an int (what an integral value decoded from JSON was, unless
   * its text had a fraction or exponent, which JSON.parse does not tell; past 2**53 it was most
   * likely a float), else a float's repr.
   * @param {number} x @param {boolean} [float] known to be a float
   */
  function pyNumber(x, float = false) {
    if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
    if (Number.isSafeInteger(x) && !float) return String(x);
    // repr(float): the shortest round-trip digits, in exponent form below 1e-4 or from 1e16.
    const [mantissa, exp] = x.toExponential().split("e");
    const e = Number(exp);
    if (e < -4 || e >= 16) return `${mantissa}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
    return Number.isInteger(x) ? `${x}.0` : String(x);
  }

  const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/gu;
  /** Python's repr of a str: its quotes and escapes. @param {string} s */
  function pyStringRepr(s) {
    const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
    let out = s.replaceAll("\\", "\\\\").replaceAll(quote, "\\" + quote);
    out = out.replace(NOT_PRINTABLE, (c) => {
      if (c === " ") return c;
      if (c === "\t") return "\\t";
      if (c === "\n") return "\\n";
      if (c === "\r") return "\\r";
      const cp = /** @type {number} */ (c.codePointAt(0));
      if (cp < 0x100) return "\\x" + cp.toString(16).padStart(2, "0");
      if (cp < 0x10000) return "\\u" + cp.toString(16).padStart(4, "0");
      return "\\U" + cp.toString(16).padStart(8, "0");
    });
    return quote + out + quote;
  }

  /**
   * Python's `json.dumps(value)` (separators ", " and ": ", ensure_ascii): how the worker re-writes
   * a reply that came decoded, and the start script's argument.
   * @param {any} value
   */
  function pyDumps(value) {
    return pyJson(value, ", ", ": ");
  }

  /** A string's first `n` characters (code points, as Python slices a str). @param {string} s @param {number} n */
  function codePointPrefix(s, n) {
    if (s.length <= n) return s;
    let end = 0;
    for (let count = 0; count < n && end < s.length; count++) {
      const c = s.charCodeAt(end);
      end += c >= 0xd800 && c < 0xdc00 && (s.charCodeAt(end + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    }
    return s.slice(0, end);
  }

  /**
   * UTF-8 bytes of `text` (`len(text.encode("utf-8", "surrogatepass"))`: a lone surrogate, which
   * only a broken caller leaves, counts 3 like its U+FFFD).
   * @param {string} text
   */
  function utf8Length(text) {
    const wide = text.replace(/[\0-\x7f]+/g, "");
    let n = text.length - wide.length;
    for (let i = 0; i < wide.length; i++) {
      const c = wide.charCodeAt(i);
      if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c < 0xdc00 && (wide.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        n += 4;
        i++;
      } else n += 3;
    }
    return n;
  }

  /**
   * The longest prefix of `text` (well-formed) whose UTF-8 fits in `room` bytes: what
   * `data[:room].decode("utf-8", "ignore")` keeps (a character cut in its middle is dropped).
   * @param {string} text @param {number} room
   */
  function utf8Prefix(text, room) {
    let bytes = 0;
    let i = 0;
    while (i < text.length) {
      const c = text.charCodeAt(i);
      let size = 3;
      let units = 1;
      if (c < 0x80) size = 1;
      else if (c < 0x800) size = 2;
      else if (c >= 0xd800 && c < 0xdc00 && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
        size = 4;
        units = 2;
      }
      if (bytes + size > room) break;
      bytes += size;
      i += units;
    }
    return text.slice(0, i);
  }

  // ---- jsonio.py ------------------------------------------------------------------------------
  // Brackets per step of the depth scan (jsonio._SCAN_STEP): only where the scan stops at a stray
  // closer depends on it, so it must match for the same answer on text that is not JSON.
  const SCAN_STEP = 128;

  /** @param {string} text @param {string} ch */
  function countOf(text, ch) {
    let n = 0;
    for (let i = text.indexOf(ch); i >= 0; i = text.indexOf(ch, i + 1)) n++;
    return n;
  }

  /**
   * Whether JSON text nests more than `limit` arrays/objects (`[]` is 1), brackets inside
   * strings not counted. Linear, without parsing, so it is safe on text that would crash a
   * recursive parser. Exact for valid JSON; for any text, false means a parser nests at most
   * `limit` deep (up to its first error it pairs quotes and escapes exactly as this scan does).
   * @param {string} text @param {number} limit
   */
  function jsonTextDepthExceeds(text, limit) {
    if (countOf(text, "[") + countOf(text, "{") <= limit) return false; // cannot be deeper
    if (text.includes("\\")) {
      // drop escaped backslashes and quotes, then every quote delimits a string
      text = text.replaceAll("\\\\", "").replaceAll('\\"', "");
    }
    let kept = text.replace(/[^"[\]{}]+/g, "");
    if (kept.includes('"')) kept = kept.split('"').filter((_, i) => i % 2 === 0).join(""); // outside strings
    let depth = 0;
    for (let start = 0; start < kept.length; start += SCAN_STEP) {
      const end = Math.min(start + SCAN_STEP, kept.length);
      let level = depth;
      let highest = depth;
      for (let i = start; i < end; i++) {
        const c = kept.charCodeAt(i);
        if (c === 0x5b || c === 0x7b) {
          if (++level > highest) highest = level;
        } else level--;
      }
      if (highest > limit) return true;
      depth = level;
      if (depth < 0) return false; // a stray closer: the parser stops there
    }
    return false;
  }

  // ---- screen.py ------------------------------------------------------------------------------
  // How @codemode/host (runtime/js/host.js) writes every request: these keys, in this order.
  const CALL_HEAD = '{"op":"call","serverId":';
  const CALL_TOOL = ',"toolName":';

  /** UTF-8 bytes of `text`, exact whenever it could be over `cap` (else a lower bound). @param {string} text @param {number} cap */
  function utf8Size(text, cap) {
    if (text.length * 4 <= cap) return text.length; // at most 4 bytes a character: cannot be over
    return utf8Length(text);
  }

  // The scalars Python's decoder reads (json.scanner's NUMBER_RE, its constants).
  const LITERAL = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null|NaN|-?Infinity/y;
  /** @type {Record<string, number>} */
  const NON_FINITE = Object.assign(Object.create(null), { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity });

  /**
   * Python's `json.JSONDecoder().raw_decode(text, start)`, as `str()` shows the value: the JSON
   * value that begins exactly at `start` and the index after it. A number is read from its text
   * (a fraction or an exponent makes a float, as Python reads it). Throws SyntaxError when there
   * is no value there.
   * @param {string} text @param {number} start @returns {[string, number]}
   */
  function rawDecodeStr(text, start) {
    let i = start;
    let depth = 0;
    do {
      const c = text[i];
      if (c === '"') {
        i++;
        while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
        i++;
      } else if (c === "[" || c === "{") {
        depth++;
        i++;
      } else if (c === "]" || c === "}") {
        depth--;
        i++;
      } else if (depth > 0 && (c === "," || c === ":" || c === " " || c === "\t" || c === "\n" || c === "\r")) {
        i++;
      } else {
        LITERAL.lastIndex = i;
        const m = LITERAL.exec(text);
        if (m === null) throw new SyntaxError("Expecting value");
        i = LITERAL.lastIndex;
        if (depth === 0 && m[0] in NON_FINITE) return [pyNumber(NON_FINITE[m[0]]), i];
        if (depth === 0 && /^-?[0-9]/.test(m[0])) {
          return [/[.eE]/.test(m[0]) ? pyNumber(Number(m[0]), true) : BigInt(m[0]).toString(), i];
        }
      }
      if (i > text.length || depth < 0) throw new SyntaxError("Expecting value");
    } while (depth > 0);
    return [pyStr(JSON.parse(text.slice(start, i))), i];
  }

  /**
   * The call request the worker forwards to the host: `text` itself, or, when its input is over
   * maxInputBytes or nested deeper than maxJsonDepth, a request without the input that says why
   * (`inputRejected`), which the bridge answers with a SchemaValidationError. The host never has
   * to parse (recursively, on its event loop) what it would refuse anyway.
   * @param {string} text
   */
  function screenCallRequest(text) {
    /** @type {Record<string, any>} */
    let why;
    const size = utf8Size(text, MAX_INPUT_BYTES);
    if (size > MAX_INPUT_BYTES) {
      why = { reason: "size", bytes: size };
    } else if (jsonTextDepthExceeds(text, MAX_JSON_DEPTH + 1)) { // the request object is one level
      why = { reason: "depth" };
    } else {
      return text;
    }
    let serverId = "";
    let toolName = "";
    if (text.startsWith(CALL_HEAD)) {
      try {
        let end;
        [serverId, end] = rawDecodeStr(text, CALL_HEAD.length);
        if (text.startsWith(CALL_TOOL, end)) toolName = rawDecodeStr(text, end + CALL_TOOL.length)[0];
      } catch (e) {
        if (!(e instanceof SyntaxError)) throw e;
      }
    }
    const request = {
      op: "call",
      serverId: codePointPrefix(serverId, MAX_FORWARDED_NAME_CHARS),
      toolName: codePointPrefix(toolName, MAX_FORWARDED_NAME_CHARS),
      inputRejected: why,
    };
    return asciiJson(request);
  }

  // ---- limits.py: the Limits the worker reads ---------------------------------------------------
  /**
   * `Limits.from_json(data)`: the defaults overridden by `data`'s fields (None keeps the default);
   * throws for a value that is not a usable integer (the run then ends `internal`).
   * @param {any} data @returns {Limits}
   */
  function limitsFromJson(data) {
    if (!isDict(data)) throw new TypeError(`limits.*: expected an object of limits, got ${pyRepr(data)}`);
    const limits = { ...DEFAULT_LIMITS };
    const keys = LIMIT_RANGES !== null ? Object.keys(LIMIT_RANGES) : Object.keys(DEFAULT_LIMITS);
    for (const key of keys) {
      if (!Object.hasOwn(data, key) || data[key] === null) continue;
      const value = data[key];
      if (!isInt(value)) throw new TypeError(`limits.${key}: expected an integer, got ${pyRepr(value)}`);
      const range = LIMIT_RANGES !== null ? LIMIT_RANGES[key] : null;
      if (Array.isArray(range) && !(range[0] <= value && value <= range[1])) {
        throw new RangeError(
          `limits.${key}: ${value} is out of range; use an integer from ${range[0]} to ${range[1]}`,
        );
      }
      if (Object.hasOwn(limits, key)) /** @type {any} */ (limits)[key] = value;
    }
    return limits;
  }

  /** realm.realm_key: what a realm is built for (heap and pending-call limits are fixed at birth). @param {Limits} limits */
  function realmKey(limits) {
    return `${limits.maxMemoryBytes}/${limits.maxConcurrentCalls}`;
  }

  // ---- logs.py ----------------------------------------------------------------------------------
  /** Entries a run may log: their fixed overhead is bounded by maxLogBytes too. @param {number} maxBytes */
  function maxLogEntries(maxBytes) {
    return Math.max(MIN_LOG_ENTRIES, Math.floor(maxBytes / LOG_ENTRY_OVERHEAD_BYTES));
  }

  /**
   * Log entries up to `maxBytes` of UTF-8 message text (§3.3.1, §9), and at most
   * `maxLogEntries(maxBytes)` entries (empty messages still cost response bytes). The entry that
   * crosses the limit is cut at a character boundary; everything after it is dropped.
   */
  class LogCollector {
    /** @param {number} maxBytes */
    constructor(maxBytes) {
      this.maxBytes = maxBytes;
      this.count = 0; // entries kept (the host keeps the entries themselves)
      this.used = 0;
      this.truncated = false;
      this.maxEntries = maxLogEntries(maxBytes);
    }

    /**
     * Record one console call; returns the entry kept (null when dropped).
     * @param {string} level @param {string} message @param {number} timeMs
     */
    add(level, message, timeMs) {
      if (this.truncated) return null;
      if (this.count >= this.maxEntries) {
        this.truncated = true;
        return null;
      }
      if (!LOG_LEVELS.includes(level)) level = "log";
      message = utf8Safe(message);
      let size = utf8Length(message);
      const room = this.maxBytes - this.used;
      if (size > room) {
        this.truncated = true;
        if (room <= 0) return null;
        message = utf8Prefix(message, room);
        size = utf8Length(message);
      }
      this.used += size;
      this.count += 1;
      return { level, message, timeMs: Math.trunc(timeMs) };
    }
  }

  // ---- run_state.py -----------------------------------------------------------------------------
  // Events a run's pump hands over (`__codemode_next__`): a reply is its call's number (1, 2, ...
  // in the order the script made them), the alarm is ALARM, and IDLE wakes a pump that waits for
  // nothing any more (the last timer was cleared while no call was in flight).
  const ALARM = 0;
  const IDLE = -1;

  /** @param {any} run */
  function isClockRun(run) {
    return Array.isArray(run) && run.length === 2 && run.every(isInt) && run[1] > 0;
  }

  /**
   * The run clock JS reads (`__codemode_now__`: whole milliseconds since the run started) and its
   * journal: the values returned, as [value, how many reads in a row] runs.
   *
   * `baseMs` is the run's start in Unix milliseconds (Date's base). A resumed run first returns
   * the values of `replay`, one per read, then live time: the real time elapsed since `baseMs`
   * (the wait for an answer between two rounds included, as a timeout counts it), never less
   * than a value already returned.
   */
  class RunClock {
    /** @param {number} baseMs @param {any[] | null} replay @param {boolean} journal */
    constructor(baseMs, replay, journal) {
      this.baseMs = baseMs;
      this.mono0 = native.monotonicMs();
      this.offset = Math.max(0, native.wallMs() - baseMs);
      this.last = 0;
      /** @type {number[][]} */
      this.replay = (replay || []).filter(isClockRun).map((r) => [r[0], r[1]]);
      this.replay.reverse(); // popped from the end
      /** @type {number[][] | null} */
      this.runs = journal ? [] : null;
      this.overflow = false;
    }

    get replaying() {
      return this.replay.length > 0;
    }

    liveMs() {
      return Math.max(this.last, this.offset + (native.monotonicMs() - this.mono0));
    }

    /** The clock now, without reading it (log entries' timeMs): no journal entry. */
    peek() {
      return this.replay.length > 0 ? this.last : Math.trunc(this.liveMs());
    }

    read() {
      let value;
      if (this.replay.length > 0) {
        const run = this.replay[this.replay.length - 1];
        value = run[0];
        run[1] -= 1;
        if (run[1] <= 0) this.replay.pop();
      } else {
        value = Math.trunc(this.liveMs());
      }
      this.last = value;
      const runs = this.runs;
      if (runs !== null && !this.overflow) {
        if (runs.length > 0 && runs[runs.length - 1][0] === value) runs[runs.length - 1][1] += 1;
        else if (runs.length < MAX_JOURNAL_CLOCK_RUNS) runs.push([value, 1]);
        else this.overflow = true;
      }
      return value;
    }
  }

  /** A pending wait JS awaits (an asyncio future of the Python worker): `id` names its promise. */
  class Waiter {
    /** @param {number} id */
    constructor(id) {
      this.id = id;
      this.done = false;
    }
  }

  /** What the bound host functions of one realm act on during its (single) run. */
  class RunState {
    /** @param {number} t0 @param {number} maxLogBytes @param {RunClock | null} [clock] */
    constructor(t0, maxLogBytes, clock = null) {
      this.t0 = t0;
      this.logs = new LogCollector(maxLogBytes);
      this.truncationSent = false;
      this.clock = clock !== null ? clock : new RunClock(Math.trunc(native.wallMs()), null, false);
      /** @type {number[]} */
      this.seed = [];
      /** The pump's pending wait (JS awaits it). @type {Waiter | null} */
      this.waiter = null;
      /** The event given to `waiter`, until JS takes it. @type {number | null} */
      this.handed = null;
      /** Live events not handed yet. @type {number[]} */
      this.queue = [];
      /** Replies arrived and not taken, by call number. @type {Map<number, string>} */
      this.replies = new Map();
      this.issued = 0; // calls the script made
      this.taken = 0; // replies it took
      this.alarmHandle = false; // the shell's timer is set for this run's alarm
      /** The alarm's due time on the run clock. @type {number | null} */
      this.armed = null;
      /** The journal (a run started with `journal`): every event taken, in order. @type {number[] | null} */
      this.events = null;
      this.overflow = false;
      /** A resumed run's events, handed over in their order before any live one. @type {number[]} */
      this.replay = [];
      this.replayPos = 0;
      /** Calls whose reply is still ahead in `replay`. @type {Set<number>} */
      this.replayReplies = new Set();
      this.paused = false;
      this.snapshotDue = false;
      this.pauseWhenLive = false; // paused while replaying: the journal's events go first
    }

    get live() {
      return this.replayPos >= this.replay.length;
    }
  }

  // ---- realm.py ---------------------------------------------------------------------------------
  /**
   * One fresh engine, locked down by prelude phase A, used for exactly one run (§1.4). The shell
   * builds it (`native.realmNew`: prelude phases A and A2, @codemode/errors and @codemode/host
   * loaded); this object is what its bound functions act on. `close()` must end every realm,
   * used or not, or its whole JS heap stays.
   */
  class Realm {
    /** @param {Worker} worker @param {number} id @param {Limits} limits */
    constructor(worker, id, limits) {
      this.worker = worker;
      this.id = id;
      this.key = realmKey(limits);
      this.state = new RunState(native.monotonicMs(), limits.maxLogBytes);
      /** What `loop.call_soon` scheduled: run at the realm's next `afterTurn`. @type {(() => void)[]} */
      this.soon = [];
    }

    /**
     * A locked-down realm with @codemode/errors and @codemode/host loaded (prelude phases A and
     * A2): what every run needs, built before the run is known. Throws (the shell's Error saying
     * why) when it cannot be built.
     * @param {Worker} worker @param {Limits} limits
     */
    static create(worker, limits) {
      const id = native.realmNew(limits.maxMemoryBytes, Math.trunc(limits.maxConcurrentCalls));
      const realm = new Realm(worker, id, limits);
      worker.realms.set(id, realm);
      return realm;
    }

    /**
     * Start the run's state from the run message; returns the prelude's run config (Math.random's
     * seed, Date's base). `journal`, `replay`, `seed` and `clockBase` come from the host for a run
     * that may be resumed (runtime/host/resume.py); a plain run gets a fresh seed and the time now.
     * @param {number} t0 @param {Limits} limits @param {Record<string, any>} msg
     * @returns {Record<string, any>}
     */
    begin(t0, limits, msg) {
      let base = msg.clockBase;
      if (!(isInt(base) && base >= 0)) base = Math.trunc(native.wallMs());
      const given = msg.replay;
      const replay = isDict(given) ? given : {};
      const clockRuns = replay.clock;
      const journal = msg.journal === true;
      const st = (this.state = new RunState(
        t0,
        limits.maxLogBytes,
        new RunClock(base, Array.isArray(clockRuns) ? clockRuns : null, journal),
      ));
      let seed = msg.seed;
      if (!(Array.isArray(seed) && seed.length === 4 && seed.every((x) => isInt(x) && x >= 0 && x < 2 ** 32))) {
        seed = native.random32x4(); // one read for the four words
      }
      st.seed = Array.from(seed);
      const events = replay.events;
      if (Array.isArray(events) && events.every((e) => isInt(e) && e >= IDLE)) {
        st.replay = Array.from(events);
        st.replayReplies = new Set(events.filter((e) => e > 0));
      }
      if (journal) st.events = [];
      return { seed: st.seed, clockBase: base };
    }

    /**
     * Drop what the run left pending: the alarm, the pump's wait, the calls still waiting for a
     * reply (a late reply finds no entry and is discarded), what waited for the next turn.
     */
    end() {
      const st = this.state;
      if (st.alarmHandle) this.cancelAlarm();
      st.waiter = null;
      st.replies.clear();
      st.queue.length = 0;
      this.soon.length = 0;
      this.worker.dropCalls(this);
    }

    /** End the run and free the engine (its heap and the functions bound into it). Idempotent. */
    close() {
      this.end();
      native.realmFree(this.id);
      this.worker.realms.delete(this.id);
    }

    /** `loop.call_soon(fn)`: after the current JS turn, when JS waits. @param {() => void} fn */
    callSoon(fn) {
      this.soon.push(fn);
    }

    /** `waiter.set_result(value)`: JS sees it once every job of its current turn has run. @param {Waiter} waiter @param {number} value */
    settle(waiter, value) {
      waiter.done = true;
      native.settle(this.id, waiter.id, value);
    }

    cancelAlarm() {
      this.state.alarmHandle = false;
      if (this.worker.timerOwner === this) {
        this.worker.timerOwner = null;
        native.clearTimer();
      }
    }

    // ---- the bound host functions ---------------------------------------------------------
    nowMs() {
      return this.state.clock.read();
    }

    /** @param {string} level @param {string} text */
    log(level, text) {
      const st = this.state;
      /** @type {any} */
      let message;
      try {
        message = typeof text === "string" ? JSON.parse(text) : pyStr(text);
        if (typeof message !== "string") message = pyStr(message);
      } catch (e) {
        if (!(e instanceof SyntaxError)) throw e;
        message = "[Unserializable Object]";
      }
      const entry = st.logs.add(String(level), message, st.clock.peek());
      if (entry !== null) this.worker.send({ op: LOG, ...entry });
      if (st.logs.truncated && !st.truncationSent) {
        st.truncationSent = true;
        this.worker.send({ op: LOGS_TRUNCATED });
      }
      return !st.logs.truncated;
    }

    /** Send the request now; JS gets the call's number, and its reply through the pump. @param {any} text */
    hostCall(text) {
      const st = this.state;
      st.issued += 1;
      // Over maxInputBytes or maxJsonDepth: the host gets the call without its input.
      this.worker.sendCall(this, st.issued, typeof text === "string" ? screenCallRequest(text) : text);
      return st.issued;
    }

    /** @param {number} seq @param {string} text */
    onReply(seq, text) {
      const st = this.state;
      st.replies.set(seq, text);
      if (!st.replayReplies.has(seq)) st.queue.push(seq);
      this.hand();
    }

    /**
     * The pump's wait for the next event: the shell gave JS a promise named `waiterId` (JS sees
     * it settle only after every job of its current turn has run, so events are seen one turn at
     * a time).
     * @param {number} waiterId
     */
    nextEvent(waiterId) {
      const st = this.state;
      st.waiter = new Waiter(waiterId);
      st.handed = null;
      this.hand();
    }

    /**
     * JS takes the event it was handed: a reply's text ("" for the alarm and IDLE). This is where
     * an event enters the journal, in the order JS saw them.
     * @param {any} event
     */
    take(event) {
      const st = this.state;
      if (!isInt(event) || event !== st.handed) return "";
      st.handed = null;
      if (st.events !== null && !st.overflow) {
        if (st.events.length < MAX_JOURNAL_EVENTS) st.events.push(event);
        else st.overflow = true;
      }
      let text = "";
      if (event > 0) {
        st.taken += 1;
        text = st.replies.get(event) ?? "";
        st.replies.delete(event);
      }
      if (st.snapshotDue) { // after the turn this event starts, when JS waits again
        st.snapshotDue = false;
        this.callSoon(() => this.snapshot());
      }
      return text;
    }

    /**
     * Give the pump's wait its next event, if there is one and the run is not paused: the
     * journal's events first, in their order (a reply once it has come), then live ones.
     */
    hand() {
      const st = this.state;
      const waiter = st.waiter;
      if (waiter === null || waiter.done || st.paused) return;
      let event;
      if (!st.live) {
        event = st.replay[st.replayPos];
        if (event > 0 && !st.replies.has(event)) {
          if (event > st.issued) { // not made yet: if it is not made in this turn, it never is
            const position = st.replayPos;
            this.callSoon(() => this.checkReplay(position));
          }
          return;
        }
        st.replayPos += 1;
        st.replayReplies.delete(event);
        if (st.live) {
          this.goLive();
          if (st.pauseWhenLive) { // snapshot after this last replayed event's turn
            st.pauseWhenLive = false;
            st.paused = st.snapshotDue = true;
          }
        }
      } else if (st.queue.length > 0) {
        event = /** @type {number} */ (st.queue.shift());
      } else {
        return;
      }
      st.handed = event;
      st.waiter = null;
      this.settle(waiter, event);
    }

    /**
     * JS has finished its turn still waiting for a reply the journal says comes next, to a call
     * it has not made: the script no longer does what it did (divergence).
     * @param {number} position
     */
    checkReplay(position) {
      const st = this.state;
      if (st.live || st.replayPos !== position || st.waiter === null || st.waiter.done) return;
      const event = st.replay[position];
      if (event > st.issued && !st.replies.has(event)) {
        this.worker.send({
          op: DIVERGED,
          message:
            `the resumed script stopped after ${st.issued} tool calls where the earlier round went on ` +
            `to call #${event}`,
        });
        st.paused = true; // nothing more reaches the script; the host ends the run
        st.replayPos = st.replay.length;
      }
    }

    /** The journal is used up: from here the alarm is real. */
    goLive() {
      const st = this.state;
      if (st.armed !== null) this.schedule(st.armed);
    }

    /** @param {number} due */
    schedule(due) {
      const st = this.state;
      if (!Number.isFinite(due)) throw new RangeError(`cannot schedule the alarm at ${due}`); // math.ceil raises
      const delayMs = Math.max(0, Math.ceil(due) - st.clock.liveMs());
      st.alarmHandle = true;
      this.worker.timerOwner = this;
      native.setTimer(delayMs);
    }

    fire() {
      const st = this.state;
      st.alarmHandle = false;
      if (!st.queue.includes(ALARM)) st.queue.push(ALARM);
      this.hand();
    }

    /**
     * Set (due >= 0, in ms on the run clock) or clear (due < 0) the single timer alarm. An alarm
     * that went off and was not handed over yet is for the old due time: dropped.
     * @param {any} due
     */
    arm(due) {
      const st = this.state;
      if (st.alarmHandle) this.cancelAlarm();
      const at = st.queue.indexOf(ALARM);
      if (at >= 0) st.queue.splice(at, 1);
      if (typeof due !== "number" || due < 0) {
        st.armed = null;
        const waiter = st.waiter;
        // The pump waits, and nothing can come any more: wake it to stop (a replayed run has
        // this IDLE in its journal, where it happened).
        if (
          st.live &&
          waiter !== null &&
          !waiter.done &&
          st.queue.length === 0 &&
          st.issued === st.taken &&
          !st.paused
        ) {
          st.handed = IDLE;
          st.waiter = null;
          this.settle(waiter, IDLE);
        }
        return;
      }
      st.armed = due;
      if (st.live) this.schedule(st.armed);
    }

    // ---- pause (runtime/host/resume.py) -------------------------------------------------------
    /**
     * Stop handing events and send the journal so far (`paused`), once JS waits: right away, or
     * after the turn of an event handed and not taken yet.
     */
    pause() {
      const st = this.state;
      if (!st.live) { // a journal is whole only once the one replayed is: pause after it
        st.pauseWhenLive = true;
        return;
      }
      st.paused = true;
      if (st.handed !== null) st.snapshotDue = true;
      else this.snapshot();
    }

    resume() {
      const st = this.state;
      st.paused = st.snapshotDue = st.pauseWhenLive = false;
      this.hand();
    }

    snapshot() {
      const st = this.state;
      let journal = null;
      if (st.events !== null) {
        journal = {
          events: Array.from(st.events),
          clock: (st.clock.runs || []).map((r) => Array.from(r)),
          seed: st.seed,
          clockBase: st.clock.baseMs,
          overflow: st.overflow || st.clock.overflow,
        };
      }
      this.worker.send({ op: PAUSED, issued: st.issued, journal });
    }
  }

  // ---- worker.py --------------------------------------------------------------------------------
  // Errors the worker reports on stderr (Python: traceback.print_exc). The supervisor has no
  // stderr of its own: through a console or `print` when the shell provides one (fd 1 is stderr
  // in the worker), else rethrown at the end of the shell's callback, which prints it with its
  // stack (INTERFACE.md), once the worker has done what the Python worker does after printing.
  /** @type {any[]} */
  const unprinted = [];

  /** @param {any} error */
  function printError(error) {
    const text = error !== null && typeof error === "object" ? `${error}\n${error.stack || ""}` : `uncaught: ${String(error)}`;
    if (g.console && typeof g.console.error === "function") g.console.error(text);
    else if (typeof g.print === "function") g.print(text);
    else unprinted.push(error);
  }

  function rethrowUnprinted() {
    if (unprinted.length > 0) throw unprinted.splice(0)[0];
  }

  /**
   * Why a realm could not be built, as `setup_failed` says it: the shell's Error says why (the
   * Python worker's EngineError message); anything else is named by its type.
   * @param {any} error
   */
  function setupMessage(error) {
    if (error !== null && typeof error === "object" && typeof error.message === "string") return error.message;
    return error !== null && typeof error === "object" && typeof error.name === "string" ? error.name : typeof error;
  }

  const PENDING = Symbol("pending"); // the run goes on: its end comes as onRealmDone

  /**
   * One run in flight: what its end (`onRealmDone`) needs of the run it ends.
   * @typedef {{realm: Realm, code: string, limits: Limits, outcome: any}} Run
   */

  class Worker {
    constructor() {
      /** Live realms by the shell's id (bindings of a realm no longer known get neutral values). @type {Map<number, Realm>} */
      this.realms = new Map();
      /**
       * Calls waiting for the host's reply, by the call id on the pipe: which realm and which of
       * its run's calls (1, 2, ... in the order the script made them).
       * @type {Map<number, [Realm, number]>}
       */
      this.replies = new Map();
      this.nextId = 1;
      /** The realm of the run in progress (pause/resume). @type {Realm | null} */
      this.running = null;
      /** @type {Realm | null} */
      this.warm = null;
      /** @type {Realm | null} */
      this.spent = null;
      /** Module sources of the last run by digest: the host sends only what is not held here. @type {Map<string, string>} */
      this.held = new Map();
      /** `run`, `check`, `exit` and end of input (null), handled one at a time, in order. @type {(Record<string, any> | null)[]} */
      this.inbox = [];
      this.busy = false; // a run is in progress: the inbox waits until its `done` is out
      this.draining = false;
      /** @type {Run | null} */
      this.current = null;
      this.inRealmRun = false;
      /** The realm whose alarm the shell's single timer is set for. @type {Realm | null} */
      this.timerOwner = null;
    }

    // ---- pipe -----------------------------------------------------------------------------------
    /** @param {Record<string, any>} message */
    send(message) {
      native.write(encode(message));
    }

    /**
     * A call message with the JS-made request JSON embedded verbatim (no re-escaping); its reply
     * goes to `realm` as call `seq` of its run (`resolve`).
     * @param {Realm} realm @param {number} seq @param {any} requestText
     */
    sendCall(realm, seq, requestText) {
      const callId = this.nextId++;
      this.replies.set(callId, [realm, seq]);
      native.write(encodeCall(callId, requestText));
    }

    /** Forget the calls of `realm` still waiting: a late reply to one is discarded. @param {Realm} realm */
    dropCalls(realm) {
      for (const [callId, [owner]] of this.replies) {
        if (owner === realm) this.replies.delete(callId);
      }
    }

    /** @param {string} text */
    handleLine(text) {
      let msg;
      try {
        msg = JSON.parse(text);
      } catch (e) { // not JSON: not for us
        return;
      }
      if (!isDict(msg)) return; // not one JSON object: not for us
      const op = msg.op;
      if (op === REPLY) {
        this.resolve(msg.id, msg.reply);
      } else if (op === PAUSE || op === RESUME) {
        // Read only while JS waits (the shell runs callbacks between its turns): the run's state
        // is whole.
        const realm = this.running;
        if (realm !== null) op === PAUSE ? realm.pause() : realm.resume();
      } else {
        this.inbox.push(msg);
        this.drainInbox();
      }
    }

    /** @param {any} callId @param {any} reply */
    resolve(callId, reply) {
      const entry = isInt(callId) ? this.replies.get(callId) : undefined;
      if (entry !== undefined) {
        this.replies.delete(/** @type {number} */ (callId));
        const [realm, seq] = entry;
        realm.onReply(seq, typeof reply === "string" ? reply : pyDumps(reply));
      }
    }

    onEof() {
      this.inbox.push(null);
      this.drainInbox();
    }

    /** serve's loop: the next inbox message once the previous one is done with. */
    drainInbox() {
      if (this.draining) return; // the loop below, further up the stack, goes on
      this.draining = true;
      try {
        while (!this.busy && this.inbox.length > 0) {
          const msg = this.inbox.shift();
          if (msg === null || msg === undefined || msg.op === EXIT) {
            native.exit(0);
            return;
          }
          if (msg.op === CHECK) {
            this.send({ op: CHECKED, syntax: this.check(msg) });
          } else if (msg.op === RUN) {
            this.startRun(msg);
          }
        }
      } finally {
        this.draining = false;
      }
    }

    start() {
      this.prepareNext(DEFAULT_LIMITS);
      this.send({ op: READY });
    }

    /** serve's `run` branch: the run, then (now or at onRealmDone) its `done`. @param {Record<string, any>} msg */
    startRun(msg) {
      this.busy = true;
      /** @type {Limits} */
      let limits = DEFAULT_LIMITS;
      /** @type {Done | typeof PENDING} */
      let done;
      try {
        limits = limitsFromJson(pyTruthy(msg.limits) ? msg.limits : {});
        done = this.run(msg, limits);
      } catch (e) { // a bug here must not hang the host: report, stay alive
        printError(e);
        done = [{ kind: DoneKind.INTERNAL }, null];
      }
      if (done !== PENDING) this.finishRun(done, limits);
    }

    /**
     * After a run: its `done`, then the spent realm freed and the next one prepared, before the
     * next inbox message.
     * @param {Done} done @param {Limits} limits
     */
    finishRun(done, limits) {
      native.write(encodeDone(done[0], done[1]));
      this.freeSpent();
      // Most runs share the host's limits: have the next realm ready with the same ones.
      this.prepareNext(limits);
      this.busy = false;
      this.drainInbox();
    }

    // ---- one run ----------------------------------------------------------------------------------
    /**
     * The SyntaxError `run` would meet in `msg.code` (protocol.py's `checked`), or null. Parses
     * without the warm realm, but builds one when none is waiting (as the Python worker does,
     * which parses on it).
     * @param {Record<string, any>} msg
     */
    check(msg) {
      const code = utf8Safe(pyStr(pyTruthy(msg.code) ? msg.code : ""));
      try {
        if (this.warm === null) this.prepareNext(DEFAULT_LIMITS);
        if (this.warm === null) return null; // no engine to parse with: the run will report the setup failure
        return parse(code);
      } catch (e) { // a bug here must not hang the host: the run reports what it finds
        printError(e);
      }
      return null;
    }

    /**
     * One run of `msg` (a `run` message) with `limits`: what its `done` says, or PENDING when its
     * script runs on (its end comes as onRealmDone).
     * @param {Record<string, any>} msg @param {Limits} limits @returns {Done | typeof PENDING}
     */
    run(msg, limits) {
      const t0 = native.monotonicMs();
      const budgetMs = msg.budgetMs;
      let budget = limits.timeoutMs;
      if (typeof budgetMs === "number" && budgetMs >= 0) budget = Math.min(budget, budgetMs);
      // Lone surrogates (legal in JSON escapes) cannot cross into the engine: U+FFFD instead.
      const code = utf8Safe(pyStr(pyTruthy(msg.code) ? msg.code : ""));
      const modules = this.takeModules(msg);
      if (modules === null) return [{ kind: DoneKind.LOST_MODULE }, null];

      let realm = this.warm;
      this.warm = null;
      if (realm === null || realm.key !== realmKey(limits)) {
        if (realm !== null) realm.close(); // built for other limits: free it now, not after the run
        realm = null;
        try {
          realm = Realm.create(this, limits);
        } catch (e) {
          return [{ kind: DoneKind.SETUP_FAILED, message: setupMessage(e) }, null];
        }
      }
      let pending = false;
      try {
        const runConfig = realm.begin(t0, limits, msg);
        // No separate parse: importing the agent module parses it before anything runs, and a
        // SyntaxError it reports is confirmed by a parse then (`evaluated`).
        for (const [name, source] of modules) native.realmAddModule(realm.id, name, source); // evaluated only if the agent imports it
        native.realmAddModule(realm.id, AGENT_MODULE, code);
        runConfig.agentModule = AGENT_MODULE;
        const script = `globalThis.__codemode_start__(${pyDumps(pyDumps(runConfig))})`;
        const remaining = budget - (native.monotonicMs() - t0);
        this.running = realm;
        const done = this.evaluate({ realm, code, limits, outcome: undefined }, script, remaining);
        pending = done === PENDING;
        return done;
      } finally {
        if (!pending) this.afterRun(realm);
      }
    }

    /**
     * What ends every run that got a realm (its `finally`): the realm's leftovers dropped, the
     * realm kept as the spent one until its `done` is out.
     * @param {Realm} realm
     */
    afterRun(realm) {
      this.running = null;
      realm.end();
      if (this.spent !== null) this.spent.close(); // never left for long: finishRun frees it after each run
      this.spent = realm; // closed by `freeSpent` once the answer is out
    }

    /**
     * The run's modules (specifier -> source) from its `modules` table (specifier -> digest) and
     * the `sources` it carries; null when a digest is neither sent nor held. The host sends a
     * module's text only when this worker does not hold it yet (protocol.py): the worker keeps the
     * sources of its last run's table, which is what the host assumes it holds.
     * @param {Record<string, any>} msg @returns {Map<string, string> | null}
     */
    takeModules(msg) {
      const table = msg.modules;
      const sent = isDict(msg.sources) ? msg.sources : {};
      /** @type {Map<string, string>} */
      const modules = new Map();
      /** @type {Map<string, string>} */
      const held = new Map();
      for (const [key, digest] of isDict(table) ? Object.entries(table) : []) {
        let source = typeof digest === "string" ? this.held.get(digest) : undefined;
        if (source === undefined && typeof digest === "string" && Object.hasOwn(sent, digest) && typeof sent[digest] === "string") {
          // Lone surrogates (legal in JSON escapes) cannot cross into the engine.
          source = utf8Safe(sent[digest]);
        }
        if (source === undefined) {
          this.held = new Map();
          return null;
        }
        held.set(pyStr(digest), source);
        const name = utf8Safe(key);
        if (name !== AGENT_MODULE && !BUNDLED_MODULE_NAMES.includes(name)) modules.set(name, source);
      }
      this.held = held;
      return modules;
    }

    /**
     * Free the last run's realm and give the memory back to the OS, before anything else happens
     * (nothing of a run survives into the next). After `done` is sent: freeing a full heap takes a
     * while.
     */
    freeSpent() {
      const realm = this.spent;
      this.spent = null;
      if (realm !== null) realm.close();
      native.releaseMemory();
    }

    /** Build and lock down the realm for the next run while idle (off the request path). @param {Limits} limits */
    prepareNext(limits) {
      if (this.warm !== null && this.warm.key === realmKey(limits)) return;
      if (this.warm !== null) {
        this.warm.close();
        this.warm = null;
      }
      try {
        this.warm = Realm.create(this, limits);
      } catch (e) { // the run will build its own realm and report the failure
        this.warm = null;
      }
    }

    /**
     * Run `script` (the run's start): how it ended, or PENDING while it runs on.
     * @param {Run} run @param {string} script @param {number} remaining @returns {Done | typeof PENDING}
     */
    evaluate(run, script, remaining) {
      if (remaining <= 0) return [{ kind: DoneKind.LATE }, null];
      this.current = run;
      this.inRealmRun = true;
      try {
        native.realmRun(run.realm.id, script, Math.max(remaining, 1));
      } catch (e) {
        this.current = null;
        throw e;
      } finally {
        this.inRealmRun = false;
      }
      if (run.outcome === undefined) return PENDING;
      // It ended within realmRun: its end is taken here, once the shell is out of its call.
      this.current = null;
      return this.evaluated(run, run.outcome);
    }

    /**
     * The shell says the running realm's script ended.
     * @param {number} rid @param {any} outcome
     */
    onRealmDone(rid, outcome) {
      const run = this.current;
      if (run === null || run.realm.id !== rid || run.outcome !== undefined) return;
      if (this.inRealmRun) { // `evaluate` takes it when realmRun returns
        run.outcome = outcome;
        return;
      }
      this.current = null;
      /** @type {Done} */
      let done;
      try {
        try {
          done = this.evaluated(run, outcome);
        } finally {
          this.afterRun(run.realm);
        }
      } catch (e) { // a bug here must not hang the host: report, stay alive
        printError(e);
        done = [{ kind: DoneKind.INTERNAL }, null];
      }
      this.finishRun(done, run.limits);
    }

    /**
     * How the run's script ended, as `done` says it. What only this realm can tell the host comes
     * with it: whether the heap is full, and why the agent module does not parse.
     * @param {Run} run @param {any} outcome @returns {Done}
     */
    evaluated(run, outcome) {
      const realm = run.realm;
      const kind = outcome && outcome.kind;
      if (kind === "timeout") return [{ kind: DoneKind.TIMEOUT }, null];
      if (kind === "pending_limit") return [{ kind: DoneKind.PENDING_LIMIT }, null];
      if (kind !== "ok") {
        const name = outcome && outcome.name ? String(outcome.name) : "Error";
        const message = outcome && outcome.message !== undefined && outcome.message !== null ? String(outcome.message) : "";
        return [engineError(realm, name, message), null];
      }
      const text = outcome.value;
      if (typeof text === "string" && text.startsWith(OK_REPORT_PREFIX) && text.endsWith("}")) {
        return [{ kind: DoneKind.REPORT }, text];
      }
      let report = null;
      try {
        report = typeof text === "string" ? JSON.parse(text) : null;
      } catch (e) {
        report = null;
      }
      if (!isDict(report)) return [engineError(realm, "Error", "no report from the prelude"), null];
      /** @type {Record<string, any>} */
      const result = { kind: DoneKind.REPORT };
      if (needsHeapProbe(report)) result.heapExhausted = native.realmHeapExhausted(realm.id);
      const error = report.error;
      if (report.status === "error" && isDict(error) && error.name === "SyntaxError") {
        // Thrown while importing the agent module, or by the script (JSON.parse): only the first
        // does not parse.
        result.syntax = parse(run.code);
      }
      return [result, /** @type {string} */ (text)];
    }
  }

  /** @param {Realm} realm @param {string} name @param {string} message */
  function engineError(realm, name, message) {
    const exhausted = !message.includes("out of memory") && native.realmHeapExhausted(realm.id);
    return { kind: DoneKind.ENGINE_ERROR, name, message, heapExhausted: exhausted };
  }

  /** The SyntaxError parsing `code` as the agent module raises, or null. @param {string} code */
  function parse(code) {
    const error = native.checkSyntax(code);
    if (error === null || error === undefined) return null;
    return { message: String(error.message ?? ""), stack: String(error.stack ?? "") };
  }

  // ---- the shell's callbacks (INTERFACE.md, "supervisor") -------------------------------------
  const worker = new Worker();

  /** @param {number} rid */
  function realmOf(rid) {
    return worker.realms.get(rid);
  }

  /** A callback that returns nothing: errors printed on the way out rather than lost. @template {any[]} A @param {(...args: A) => void} fn */
  function guarded(fn) {
    return (/** @type {A} */ ...args) => {
      try {
        fn(...args);
      } finally {
        rethrowUnprinted();
      }
    };
  }

  g.supervisor = {
    start: guarded(() => worker.start()),
    onLine: guarded((/** @type {string} */ text) => worker.handleLine(text)),
    onReply: guarded((/** @type {number} */ id, /** @type {string} */ text) => worker.resolve(id, text)),
    onEof: guarded(() => worker.onEof()),
    onTimer: guarded(() => {
      const realm = worker.timerOwner;
      worker.timerOwner = null;
      if (realm !== null && realm.state.alarmHandle) realm.fire();
    }),
    onRealmDone: guarded((/** @type {number} */ rid, /** @type {any} */ outcome) => worker.onRealmDone(rid, outcome)),
    afterTurn: guarded((/** @type {number} */ rid) => {
      const realm = realmOf(rid);
      if (realm === undefined) return;
      // As the event loop runs what call_soon queued: each on its own, a failing one printed.
      while (realm.soon.length > 0) {
        const fn = /** @type {() => void} */ (realm.soon.shift());
        try {
          fn();
        } catch (e) {
          printError(e);
        }
      }
    }),
    realmHost(/** @type {number} */ rid, /** @type {string} */ text) {
      const realm = realmOf(rid);
      return realm === undefined ? 0 : realm.hostCall(text);
    },
    realmLog(/** @type {number} */ rid, /** @type {string} */ level, /** @type {string} */ text) {
      const realm = realmOf(rid);
      return realm === undefined ? false : realm.log(level, text);
    },
    realmArm(/** @type {number} */ rid, /** @type {number | null} */ due) {
      const realm = realmOf(rid);
      if (realm !== undefined) realm.arm(due);
    },
    realmNext(/** @type {number} */ rid, /** @type {number} */ waiterId) {
      const realm = realmOf(rid);
      if (realm !== undefined) realm.nextEvent(waiterId);
    },
    realmTake(/** @type {number} */ rid, /** @type {number | null} */ event) {
      const realm = realmOf(rid);
      return realm === undefined ? "" : realm.take(event);
    },
    realmNow(/** @type {number} */ rid) {
      const realm = realmOf(rid);
      return realm === undefined ? 0 : realm.nowMs();
    },
  };
})();
