// @ts-check
// @codemode/host — the one door from the sandbox to the host (docs/DESIGN.md, "Sandbox ⇄ host
// protocol"). Generated server modules import `callTool` from here; nothing else in the
// sandbox can reach the host binding: the prelude hands it over in a one-shot kernel object
// that this module takes and removes from globalThis before any agent code runs.
//
// Requests and replies cross the boundary as JSON text (lone surrogates and non-JSON values
// cannot break the binding), and at most `maxConcurrentCalls` calls are in flight at once:
// the rest wait in a FIFO queue here, so the engine's own pending-call cap is never reached.

import {
  AuthenticationError, CodemodeError, SandboxLimitError, SchemaValidationError,
  ServerNotFoundError, ToolCallError, ToolNotFoundError,
} from "@codemode/errors";

const kernel = globalThis.__codemode_kernel__;
delete globalThis.__codemode_kernel__;
if (kernel === undefined || kernel === null) {
  throw new Error("@codemode/host: the sandbox kernel is missing (loaded outside the runtime?)");
}
const hostCall = kernel.hostCall;
const begin = kernel.begin;
const end = kernel.end;
const track = kernel.track;
const maxConcurrent = kernel.maxConcurrentCalls;

const stringify = JSON.stringify;
const parse = JSON.parse;
const freeze = Object.freeze;
const isFrozen = Object.isFrozen;
const ownKeys = Reflect.ownKeys;
const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const hasOwn = Object.prototype.hasOwnProperty;
const defineProperty = Object.defineProperty;
const ErrorCtor = Error;

const CLASSES = freeze({
  CodemodeError, SchemaValidationError, ToolNotFoundError, ServerNotFoundError,
  ToolCallError, AuthenticationError, SandboxLimitError,
});

// FIFO of waiters for a free slot: an object queue with head/tail indexes (O(1) both ends).
let inFlight = 0;
const waiting = { __proto__: null };
let head = 0;
let tail = 0;

function acquire() {
  if (inFlight < maxConcurrent) {
    inFlight += 1;
    return undefined;
  }
  return new Promise((resolve) => {
    waiting[tail] = resolve;
    tail += 1;
  });
}

function release() {
  if (head < tail) {
    const next = waiting[head];
    delete waiting[head];
    head += 1;
    next(); // the slot passes straight to the next caller
  } else {
    inFlight -= 1;
  }
}

function toError(error, serverId, toolName) {
  const fields = error !== null && typeof error === "object" ? error : {};
  const cls = hasOwn.call(CLASSES, fields.errorClass) ? CLASSES[fields.errorClass] : ToolCallError;
  const withIds = { serverId, toolName, ...fields };
  const message = typeof fields.message === "string" ? fields.message : `${serverId}/${toolName} failed`;
  return new cls(message, withIds);
}

/** Call `toolName` on `serverId` through the host bridge; resolves to the unwrapped result.
 *
 * The promise returned is told to the prelude (`track`) with the caller's frames, so a failed
 * call the script never awaited is reported after the run. */
export function callTool(serverId, toolName, input) {
  // The caller's frames exist only now: keep them for the error, so a failed call points at
  // the agent's line, not at this module.
  const site = new ErrorCtor();
  const promise = send(serverId, toolName, input, site);
  track(promise, serverId, toolName, site.stack);
  return promise;
}

async function send(serverId, toolName, input, site) {
  if (typeof serverId !== "string" || typeof toolName !== "string") {
    throw new TypeError("callTool(serverId, toolName, input): serverId and toolName must be strings");
  }
  // Keys in this order: the worker reads serverId and toolName back without parsing the input
  // when it refuses one that is too big or too deep (runtime/screen.py, screen_call_request).
  const request = { op: "call", serverId, toolName };
  if (input !== undefined) request.input = input;
  let text;
  try {
    text = stringify(request);
  } catch (e) {
    throw new TypeError(`input of ${serverId}/${toolName} is not JSON-serialisable: ${e && e.message}`);
  }
  let reply;
  begin();
  try {
    const slot = acquire();
    if (slot !== undefined) await slot;
    let replyText;
    try {
      replyText = await hostCall(text);
    } finally {
      release();
    }
    reply = parse(replyText);
  } catch (e) {
    throw new ToolCallError(`the host could not complete ${serverId}/${toolName}`, { serverId, toolName });
  } finally {
    end();
  }
  if (reply !== null && typeof reply === "object" && reply.ok === true) return reply.value;
  const error = toError(reply && reply.error, serverId, toolName);
  try {
    defineProperty(error, "stack", { value: site.stack, writable: true, enumerable: false, configurable: true });
  } catch (e) { /* keep the original stack */ }
  throw error;
}

/** Freeze `value` and everything reachable through its own properties (not prototypes). */
export function deepFreeze(value) {
  const stack = [value];
  const seen = new WeakSet();
  while (stack.length > 0) {
    const v = stack.pop();
    if ((typeof v !== "object" && typeof v !== "function") || v === null || seen.has(v)) continue;
    seen.add(v);
    for (const key of ownKeys(v)) {
      const d = getOwnPropertyDescriptor(v, key);
      if (d === undefined) continue;
      if (hasOwn.call(d, "value")) stack.push(d.value);
      else {
        stack.push(d.get);
        stack.push(d.set);
      }
    }
    if (!isFrozen(v)) freeze(v);
  }
  return value;
}

/** `Object.freeze` for generated server modules (templates/server.js.j2), which name no global:
 * a tool exported as `Object` would shadow it there. */
export { freeze };

function freezeParsed(key, value) {
  return typeof value === "object" && value !== null ? freeze(value) : value;
}

/** `JSON.parse(text)` with every object and array in it frozen (a generated module's `__meta__`):
 * plain data, so this is `deepFreeze` without walking descriptors. */
export function frozenJson(text) {
  return parse(text, freezeParsed);
}

freeze(callTool);
freeze(deepFreeze);
freeze(frozenJson);
