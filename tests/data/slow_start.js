// Preloaded by tests with NODE_OPTIONS="--require <this file>": the node process blocks for
// CODEMODE_TEST_SLOW_START_MS before it runs its script, so a compiler that starts slowly is
// slow by seconds however loaded or idle the machine is.
"use strict";
const ms = Number(process.env.CODEMODE_TEST_SLOW_START_MS || 0);
if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
