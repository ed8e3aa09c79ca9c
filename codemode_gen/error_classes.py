"""The `@codemode/errors` classes (spec §7.1, §7.3): names, fields and code values, defined once.

Three places need them and used to spell them out each: the sandbox's JavaScript
(runtime/js/errors.js), the type declarations every script is checked against (the
`@codemode/errors` module of codemode.d.ts) and the host, which names a class and its fields in
every failed call's reply (runtime/host/bridge.py). They drifted (the declaration had
`ToolCallError.code?: number` while the host sends "timeout" and "APPROVAL_DENIED"), so now
errors.js and the declaration are rendered from `ERROR_CLASSES` and `ToolCallCode` here:
errors.js is committed and a test regenerates and compares it (`python -m
codemode_gen.error_classes` rewrites it); the declaration is rendered into codemode.d.ts by
`generate` (templates/codemode.d.ts.j2), so `generate --check` holds out/ to it.

Shared core (below the generator and the runtime): both import it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = [
    "ERROR_CLASSES",
    "ErrorClass",
    "ErrorField",
    "ToolCallCode",
    "class_names",
    "errors_declaration",
    "errors_js",
]


class ToolCallCode(StrEnum):
    """The string values of `ToolCallError.code` (besides a JSON-RPC error code or, for an
    AuthenticationError, the HTTP status: numbers)."""

    #: The server did not answer within the server's call_timeout; the call was cancelled.
    TIMEOUT = "timeout"
    #: The host's approval policy or a person refused the call; it was never sent (§10).
    APPROVAL_DENIED = "APPROVAL_DENIED"


@dataclass(frozen=True)
class ErrorField:
    """One field of an error class: set from the host's reply (or the constructor's `fields`)."""

    name: str
    #: Its TypeScript type in the declaration.
    ts_type: str
    doc: str = ""
    #: Declared `name?:` (the value may be absent).
    optional: bool = False
    #: The property exists only when a value was given (else it is always set, maybe undefined).
    only_when_given: bool = False


@dataclass(frozen=True)
class ErrorClass:
    name: str
    #: The class it extends (None: CodemodeError itself, which extends Error).
    base: str | None
    doc: str
    #: The `hint` of an instance made without one.
    default_hint: str
    fields: tuple[ErrorField, ...] = ()


_CODE_UNION = " | ".join(["number", *(json.dumps(c.value) for c in ToolCallCode)])

#: Every class of `@codemode/errors`, each after the class it extends.
ERROR_CLASSES: tuple[ErrorClass, ...] = (
    ErrorClass(
        "CodemodeError",
        None,
        "Base class of every Code Mode error (spec §7.1).",
        "read the message, fix the call, and run the script again",
        (ErrorField("hint", "string", "One corrective action to take (spec §7.3)."),),
    ),
    ErrorClass(
        "SchemaValidationError",
        "CodemodeError",
        "The input did not match the tool's inputSchema; the server was not called (spec §7.2).",
        "change the input so it matches the tool's input schema (see `expected` and `example`)",
        (
            ErrorField("toolName", "string"),
            ErrorField("exportName", "string"),
            ErrorField(
                "path", "string", 'JSON Pointer to the failing property ("" is the whole input).'
            ),
            ErrorField("expected", "string"),
            ErrorField("received", "string"),
            ErrorField(
                "example", "unknown", "A minimal input that would have passed.", optional=True
            ),
        ),
    ),
    ErrorClass(
        "ToolNotFoundError",
        "CodemodeError",
        "The server has no tool of that name.",
        "list the server's tools with @codemode/discovery and call one that exists",
        (ErrorField("serverId", "string"), ErrorField("toolName", "string")),
    ),
    ErrorClass(
        "ServerNotFoundError",
        "CodemodeError",
        "No connected server has that id.",
        "list the connected servers with @codemode/discovery and import one of them",
        (ErrorField("serverId", "string"),),
    ),
    ErrorClass(
        "ToolCallError",
        "CodemodeError",
        "The tool reported an error (MCP isError result) or the call failed.",
        "read the server's message, correct the input or pick another tool, and retry",
        (
            ErrorField("serverId", "string"),
            ErrorField("toolName", "string"),
            ErrorField(
                "code",
                _CODE_UNION,
                "Why the call failed, when the host knows: the JSON-RPC error code (a protocol-level "
                'failure); the HTTP status (AuthenticationError); "timeout" (no answer within the '
                'server\'s call_timeout); "APPROVAL_DENIED" (the call was not approved and never sent).',
                optional=True,
                only_when_given=True,
            ),
            ErrorField(
                "content",
                "Array<{ type: string; text?: string; [key: string]: unknown }>",
                "The content blocks of the error result, when the tool returned isError.",
                optional=True,
                only_when_given=True,
            ),
        ),
    ),
    ErrorClass(
        "AuthenticationError",
        "ToolCallError",
        "The server rejected the call's credentials.",
        "the server rejected the credentials; ask the user to fix the server's authentication",
    ),
    ErrorClass(
        "SandboxLimitError",
        "CodemodeError",
        "The script exceeded a limit (timeout, memory, tool calls); the run ends.",
        "do less work per run: filter or batch in fewer calls, or raise the limit in the request",
        (
            ErrorField("limit", "string", 'The limit\'s name, e.g. "timeoutMs".'),
            ErrorField("value", "number"),
        ),
    ),
)


def class_names() -> frozenset[str]:
    """The names a host reply's `errorClass` may carry."""
    return frozenset(c.name for c in ERROR_CLASSES)


_GENERATED = "// Generated from codemode_gen/error_classes.py. Do not edit: run `python -m codemode_gen.error_classes`."

# The hand-written part of errors.js: what every class shares (no class of its own).
_JS_HEAD = """// @codemode/errors — the error classes agent code catches (spec §7.1, §7.3).
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
"""

# CodemodeError's constructor: the message, the standard `cause` and the `hint` (its one field).
_JS_BASE_CONSTRUCTOR = """  constructor(message, fields) {
    const cause = own(fields, "cause");
    super(message === undefined ? "" : String(message), cause === undefined ? undefined : { cause });
    const hint = own(fields, "hint");
    setField(this, "hint", typeof hint === "string" && hint !== "" ? hint : new.target.defaultHint);
  }
"""


def _js_class(cls: ErrorClass) -> str:
    lines = [f"export class {cls.name} extends {cls.base or 'Error'} {{"]
    if cls.base is None:
        lines.append(_JS_BASE_CONSTRUCTOR.rstrip("\n"))
    elif cls.fields:
        lines += ["  constructor(message, fields) {", "    super(message, fields);"]
        for f in cls.fields:
            key = json.dumps(f.name)
            if f.only_when_given:
                lines += [
                    f"    const {f.name} = own(fields, {key});",
                    f"    if ({f.name} !== undefined) setField(this, {key}, {f.name});",
                ]
            else:
                lines.append(f"    setField(this, {key}, own(fields, {key}));")
        lines.append("  }")
    lines += [
        "  static get defaultHint() {",
        f"    return {json.dumps(cls.default_hint, ensure_ascii=False)};",
        "  }",
        "}",
    ]
    return "\n".join(lines)


def errors_js() -> str:
    """The text of runtime/js/errors.js."""
    names = ", ".join(c.name for c in ERROR_CLASSES)
    parts = [
        _GENERATED,
        _JS_HEAD,
        *(_js_class(c) + "\n" for c in ERROR_CLASSES),
        f"for (const cls of [{names}]) {{\n"
        "  nameAccessor(cls.prototype, cls.name);\n"
        "  freeze(cls.prototype);\n"
        "  freeze(cls);\n"
        "}\n",
    ]
    return "\n".join(parts)


def errors_declaration() -> str:
    """The `declare module "@codemode/errors"` block of codemode.d.ts."""
    lines = [
        "// The @codemode/errors part is generated from codemode_gen/error_classes.py (as is runtime/js/errors.js).",
        'declare module "@codemode/errors" {',
        "  /** The string values of `ToolCallError.code` (besides numbers: a JSON-RPC error code or an HTTP status). */",
        f"  export type ToolCallCode = {' | '.join(json.dumps(c.value) for c in ToolCallCode)};",
    ]
    for cls in ERROR_CLASSES:
        lines.append(f"  /** {cls.doc} */")
        head = f"  export class {cls.name} extends {cls.base or 'Error'}"
        if not cls.fields:
            lines.append(head + " {}")
            continue
        lines.append(head + " {")
        for f in cls.fields:
            if f.doc:
                lines.append(f"    /** {f.doc} */")
            lines.append(f"    readonly {f.name}{'?' if f.optional else ''}: {f.ts_type};")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


#: Where the generated errors.js lives in the source tree (the runtime loads it as package data).
ERRORS_JS = Path(__file__).resolve().parent.parent / "runtime" / "js" / "errors.js"


def main(argv: list[str] | None = None) -> int:
    """Rewrite runtime/js/errors.js (with --check: exit 1 when it differs)."""
    import argparse  # here: the host imports this module for the classes, not the command

    parser = argparse.ArgumentParser(
        prog="python -m codemode_gen.error_classes", description=main.__doc__
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = errors_js()
    if args.check:
        same = ERRORS_JS.read_text(encoding="utf-8") == text
        print(
            f"{ERRORS_JS}: {'up to date' if same else 'differs from codemode_gen/error_classes.py'}"
        )
        return 0 if same else 1
    ERRORS_JS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
