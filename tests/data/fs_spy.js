// Preloaded into the type-check server by tests/runtime/host/test_s3_4_typecheck_isolation.py
// (NODE_OPTIONS=--require): appends every path the process hands to Node's `fs` module, one JSON
// line {"call", "path"} each, to the file $CODEMODE_FS_SPY_LOG. TypeScript's `ts.sys` and the
// server reach the disk only through `fs`, so the log is everything they looked at.
"use strict";

const fs = require("fs");

const log = process.env.CODEMODE_FS_SPY_LOG;
const writeSync = fs.writeSync;
const fd = log ? fs.openSync(log, "a") : undefined;

function record(call, value) {
  let found = value;
  if (found instanceof URL) found = found.pathname;
  else if (Buffer.isBuffer(found)) found = found.toString();
  if (typeof found === "string" && fd !== undefined) writeSync(fd, JSON.stringify({ call, path: found }) + "\n");
}

function spy(target, prefix) {
  for (const name of Object.keys(target)) {
    const original = target[name];
    if (typeof original !== "function" || /^[A-Z]/.test(name) || name === "writeSync") continue;
    target[name] = function (...args) {
      record(prefix + name, args[0]);
      if (/^(rename|copyFile|cp|link|symlink)/.test(name)) record(prefix + name, args[1]);
      return original.apply(this, args);
    };
  }
}

if (fd !== undefined) {
  spy(fs, "");
  spy(fs.promises, "promises.");
}
