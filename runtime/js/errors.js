// Generated from codemode_gen/error_classes.py. Do not edit: run `python -m codemode_gen.error_classes`.
// @codemode/errors — the error classes agent code catches (spec §7.1, §7.3).
// Every class extends CodemodeError, carries a one-line `hint`, has `name` equal to its class
// name and is frozen (class and prototype) so a script cannot change what `instanceof` or a
// caught error means for other code in the same run.

const defineProperty = Object.defineProperty;
const freeze = Object.freeze;
const hasOwn = Object.prototype.hasOwnProperty;

// `name` lives on the prototype as an accessor: reading gives the class name, assigning on an
// instance (`this.name = "MyError"` in an agent subclass) creates an own property instead of
// failing on the frozen prototype (the "override mistake").
function nameAccessor(proto, name) {
  defineProperty(proto, "name", {
    get() { return name; },
    set(value) {
      if (this === proto) throw new TypeError(`Cannot assign to read only property 'name' of ${name}.prototype`);
      defineProperty(this, "name", { value, writable: true, enumerable: false, configurable: true });
    },
    enumerable: false,
    configurable: false,
  });
}

function own(fields, key) {
  return fields !== null && typeof fields === "object" && hasOwn.call(fields, key) ? fields[key] : undefined;
}

function setField(target, key, value) {
  defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

export class CodemodeError extends Error {
  constructor(message, fields) {
    const cause = own(fields, "cause");
    super(message === undefined ? "" : String(message), cause === undefined ? undefined : { cause });
    const hint = own(fields, "hint");
    setField(this, "hint", typeof hint === "string" && hint !== "" ? hint : new.target.defaultHint);
  }
  static get defaultHint() {
    return "read the message, fix the call, and run the script again";
  }
}

export class SchemaValidationError extends CodemodeError {
  constructor(message, fields) {
    super(message, fields);
    setField(this, "toolName", own(fields, "toolName"));
    setField(this, "exportName", own(fields, "exportName"));
    setField(this, "path", own(fields, "path"));
    setField(this, "expected", own(fields, "expected"));
    setField(this, "received", own(fields, "received"));
    setField(this, "example", own(fields, "example"));
  }
  static get defaultHint() {
    return "change the input so it matches the tool's input schema (see `expected` and `example`)";
  }
}

export class ToolNotFoundError extends CodemodeError {
  constructor(message, fields) {
    super(message, fields);
    setField(this, "serverId", own(fields, "serverId"));
    setField(this, "toolName", own(fields, "toolName"));
  }
  static get defaultHint() {
    return "list the server's tools with @codemode/discovery and call one that exists";
  }
}

export class ServerNotFoundError extends CodemodeError {
  constructor(message, fields) {
    super(message, fields);
    setField(this, "serverId", own(fields, "serverId"));
  }
  static get defaultHint() {
    return "list the connected servers with @codemode/discovery and import one of them";
  }
}

export class ToolCallError extends CodemodeError {
  constructor(message, fields) {
    super(message, fields);
    setField(this, "serverId", own(fields, "serverId"));
    setField(this, "toolName", own(fields, "toolName"));
    const code = own(fields, "code");
    if (code !== undefined) setField(this, "code", code);
    const content = own(fields, "content");
    if (content !== undefined) setField(this, "content", content);
  }
  static get defaultHint() {
    return "read the server's message, correct the input or pick another tool, and retry";
  }
}

export class AuthenticationError extends ToolCallError {
  static get defaultHint() {
    return "the server rejected the credentials; ask the user to fix the server's authentication";
  }
}

export class SandboxLimitError extends CodemodeError {
  constructor(message, fields) {
    super(message, fields);
    setField(this, "limit", own(fields, "limit"));
    setField(this, "value", own(fields, "value"));
  }
  static get defaultHint() {
    return "do less work per run: filter or batch in fewer calls, or raise the limit in the request";
  }
}

for (const cls of [CodemodeError, SchemaValidationError, ToolNotFoundError, ServerNotFoundError, ToolCallError, AuthenticationError, SandboxLimitError]) {
  nameAccessor(cls.prototype, cls.name);
  freeze(cls.prototype);
  freeze(cls);
}
