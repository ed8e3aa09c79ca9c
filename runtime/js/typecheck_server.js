// @ts-check
// codemode-gen type-check server under node (runtime/host/typecheck.py starts it; not loaded into QuickJS).
//
//   node typecheck_server.js <path of typescript.js> <out dir>
//
// The checker itself (the LanguageService over a closed virtual file system, the protocol, the
// diagnostics' shape) is typecheck_core.js, shared with the QuickJS backend
// (runtime/sandbox/typecheck_worker.py). This file gives it node's `fs` for the three kinds of file it
// may read (out/codemode.d.ts, out/tsconfig.json, TypeScript's lib.*.d.ts) and stdin/stdout.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

/** @type {any} */
let ts;
/** @type {any} */
let core;
try {
  ts = require(path.resolve(process.argv[2] || "typescript"));
  core = require("./typecheck_core.js");
} catch (err) {
  send({ ready: false, error: `cannot load TypeScript from ${process.argv[2]}: ${err && err.message}` });
  process.exit(1);
}

const outDir = path.resolve(process.argv[3] || "out");
const declarations = path.join(outDir, "codemode.d.ts");
const libDir = path.dirname(path.resolve(process.argv[2]));

function read(file) {
  try {
    return fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

const host = {
  readDeclarations: () => read(declarations),
  declarationsVersion: () => {
    try {
      const st = fs.statSync(declarations);
      return `${st.mtimeMs}:${st.size}`;
    } catch {
      return "missing";
    }
  },
  readConfig: () => {
    const config = path.join(outDir, "tsconfig.json");
    return fs.existsSync(config) ? read(config) : undefined;
  },
  readLib: (base) => (core.LIB_FILE.test(base) ? read(path.join(libDir, base)) : undefined),
  libExists: (base) => core.LIB_FILE.test(base) && fs.existsSync(path.join(libDir, base)),
  now: () => Number(process.hrtime.bigint()) / 1e6,
};

let checker;
try {
  checker = core.createChecker(ts, host);
} catch (err) {
  send({ ready: false, error: `cannot start the checker: ${err && err.message}` });
  process.exit(1);
}
send({ ready: true, typescript: ts.version });
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => send(checker.handleLine(line)));
lines.on("close", () => process.exit(0));
