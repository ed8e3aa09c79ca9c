// codemode-gen type-check server (runtime/typecheck.py starts it; not loaded into QuickJS).
//
//   node typecheck_server.js <path of typescript.js> <out dir>
//
// Type-checks agent scripts against <out dir>/codemode.d.ts with the `typescript` package's
// LanguageService, kept alive between checks: lib.*.d.ts and codemode.d.ts are parsed and bound
// once, so a check after the first only parses and checks the script (tens of milliseconds).
// codemode.d.ts is re-read when its mtime or size changes (`codemode-gen generate` while serving).
//
// Protocol: one JSON object a line on stdin and stdout.
//   -> {"id": n, "op": "check", "code": "...", "lang": "auto" | "ts" | "js"}
//   <- {"id": n, "ok": true, "lang": "ts" | "js", "ms": 12.3,
//       "diagnostics": [{"category": "error" | "warning" | "suggestion" | "message", "code": 2339,
//                        "message": "...", "line": 1, "column": 1}]}      (1-based, UTF-16 columns)
//   -> {"id": n, "op": "warm"}   <- {"id": n, "ok": true, "ms": ...}   (loads everything once)
//   <- {"id": n, "ok": false, "error": "..."}                           (a request that failed)
// The first line written is {"ready": true, "typescript": "<version>"} (or {"ready": false, "error"}).
// Only the script's own diagnostics are returned; out/'s files are the generator's business.
"use strict";

const fs = require("fs");
const path = require("path");
const readline = require("readline");

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}

let ts;
try {
  ts = require(path.resolve(process.argv[2] || "typescript"));
} catch (err) {
  send({ ready: false, error: `cannot load TypeScript from ${process.argv[2]}: ${err && err.message}` });
  process.exit(1);
}

const outDir = path.resolve(process.argv[3] || "out");
const declarations = path.join(outDir, "codemode.d.ts");
// The script is a virtual file next to out/ (never written): relative paths in diagnostics and
// module resolution behave as for a script in the project folder.
const scriptBase = path.join(path.dirname(outDir), "__codemode_check__");

// What out/tsconfig.json says (the generated one: strict, ES2022, no DOM), read on every start.
const DEFAULT_OPTIONS = {
  target: "ES2022",
  module: "ES2022",
  moduleResolution: "bundler",
  lib: ["ES2022"],
  types: [],
  strict: true,
  noEmit: true,
  skipLibCheck: false,
  allowJs: true,
  checkJs: true,
};

function compilerOptions() {
  let raw = DEFAULT_OPTIONS;
  const configPath = path.join(outDir, "tsconfig.json");
  if (fs.existsSync(configPath)) {
    const read = ts.readConfigFile(configPath, ts.sys.readFile);
    if (!read.error && read.config && typeof read.config.compilerOptions === "object") {
      raw = { ...DEFAULT_OPTIONS, ...read.config.compilerOptions };
    }
  }
  const { options } = ts.convertCompilerOptionsFromJson(raw, outDir, "tsconfig.json");
  // Scripts are ES modules with top-level await even without import/export; nothing is ever
  // written.
  options.moduleDetection = ts.ModuleDetectionKind.Force;
  options.allowJs = true;
  options.checkJs = true;
  options.noEmit = true;
  return options;
}

// Generated object types are open (`[k: string]: unknown`, because that is what the schema
// accepts), so a misspelt property would silently be `unknown`: report it (TS4111, with the
// declared names) instead. JavaScript cannot annotate parameters or catch variables except
// through JSDoc, so those two strict checks apply to TypeScript only.
const tsOptions = { ...compilerOptions(), noPropertyAccessFromIndexSignature: true };
const jsOptions = { ...tsOptions, noImplicitAny: false, useUnknownInCatchVariables: false };
const registry = ts.createDocumentRegistry();
const libDir = path.dirname(ts.getDefaultLibFilePath(tsOptions)) + path.sep;
const cache = new Map(); // file name -> {version, snapshot}

function diskVersion(fileName) {
  try {
    const st = fs.statSync(fileName);
    return `${st.mtimeMs}:${st.size}`;
  } catch {
    return "missing";
  }
}

// One LanguageService per language; both share the parsed lib files and codemode.d.ts.
function makeService(ext, options) {
  const script = { name: scriptBase + ext, text: "", version: 0 };
  const host = {
    getScriptFileNames: () => [declarations, script.name],
    getScriptVersion: (fileName) => {
      if (fileName === script.name) return String(script.version);
      if (fileName.startsWith(libDir)) return "0"; // lib.*.d.ts never change while we run
      return diskVersion(fileName); // codemode.d.ts after `codemode-gen generate`, and the rest
    },
    getScriptSnapshot: (fileName) => {
      if (fileName === script.name) return ts.ScriptSnapshot.fromString(script.text);
      const version = host.getScriptVersion(fileName);
      const hit = cache.get(fileName);
      if (hit && hit.version === version) return hit.snapshot;
      const text = ts.sys.readFile(fileName);
      if (text === undefined) return undefined;
      const snapshot = ts.ScriptSnapshot.fromString(text);
      cache.set(fileName, { version, snapshot });
      return snapshot;
    },
    getCurrentDirectory: () => path.dirname(outDir),
    getCompilationSettings: () => options,
    getDefaultLibFileName: (opts) => ts.getDefaultLibFilePath(opts),
    fileExists: (fileName) => fileName === script.name || ts.sys.fileExists(fileName),
    readFile: (fileName) => (fileName === script.name ? script.text : ts.sys.readFile(fileName)),
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  };
  const service = ts.createLanguageService(host, registry);
  return {
    lang: ext === ".ts" ? "ts" : "js",
    script,
    service,
    set(code) {
      if (code === script.text && script.version > 0) return; // parsed already (auto-detection)
      script.text = code;
      script.version += 1;
    },
  };
}

const services = { ts: makeService(".ts", tsOptions), js: makeService(".js", jsOptions) };
const CATEGORY = { 0: "warning", 1: "error", 2: "suggestion", 3: "message" };

// TS8xxx: "... can only be used in TypeScript files" (type annotations, `as`, interfaces, ...).
function usesTypeScriptSyntax(code) {
  const js = services.js;
  js.set(code);
  return js.service.getSyntacticDiagnostics(js.script.name).some((d) => d.code >= 8000 && d.code < 9000);
}

// The closest declared name, as tsc's own "Did you mean" picks it (its helper when this
// version exports it; else edit distance within a third of the name).
function closest(wanted, names) {
  if (typeof ts.getSpellingSuggestion === "function") return ts.getSpellingSuggestion(wanted, names, (n) => n);
  const limit = Math.max(2, Math.floor(wanted.length * 0.34));
  let best;
  for (const name of names) {
    const a = wanted.toLowerCase();
    const b = name.toLowerCase();
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let diag = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const next = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
        diag = next;
      }
    }
    const d = row[b.length];
    if (d <= limit && (!best || d < best.d)) best = { name, d };
  }
  return best && best.name;
}

function findNode(source, position) {
  if (typeof ts.getTokenAtPosition === "function") return ts.getTokenAtPosition(source, position);
  let found;
  (function visit(node) {
    if (position >= node.getStart(source) && position < node.getEnd()) {
      found = node;
      ts.forEachChild(node, visit);
    }
  })(source);
  return found;
}

// TS4111 (a property only the index signature allows): the declared names and the closest one.
function undeclaredProperty(program, source, start) {
  const node = findNode(source, start);
  const access = node && node.parent;
  if (!access || !ts.isPropertyAccessExpression(access)) return undefined;
  const checker = program.getTypeChecker();
  const type = checker.getNonNullableType(checker.getTypeAtLocation(access.expression));
  const declared = checker.getPropertiesOfType(type).map((p) => p.getName()).filter((n) => !n.startsWith("__"));
  const wanted = access.name.text;
  return {
    property: wanted,
    typeName: checker.typeToString(type).slice(0, 200),
    declared: declared.slice(0, 30),
    suggestion: closest(wanted, declared),
  };
}

function check(code, lang) {
  if (lang !== "js" && lang !== "ts") lang = usesTypeScriptSyntax(code) ? "ts" : "js";
  const { service, script, set } = services[lang];
  set(code);
  const syntactic = service.getSyntacticDiagnostics(script.name);
  // Like tsc: with a syntax error the rest is noise (and the sandbox reports it anyway).
  let found = syntactic.length ? syntactic : service.getSemanticDiagnostics(script.name);
  // `n.titel.trim()`: once TS4111 names the misspelt property, "'n.titel' is of type 'unknown'"
  // about the same expression says nothing more.
  const undeclared = found.filter((d) => d.code === 4111).map((d) => d.start);
  found = found.filter(
    (d) => d.code !== 18046 || !undeclared.some((u) => u >= d.start && u < d.start + d.length),
  );
  const program = service.getProgram();
  const source = program && program.getSourceFile(script.name);
  const diagnostics = found.map((d) => {
    const where = source && d.start !== undefined ? source.getLineAndCharacterOfPosition(d.start) : { line: 0, character: 0 };
    const out = {
      category: CATEGORY[d.category] || "error",
      code: d.code,
      message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
      line: where.line + 1,
      column: where.character + 1,
    };
    if (d.code === 4111 && source && d.start !== undefined) {
      const detail = undeclaredProperty(program, source, d.start);
      if (detail) Object.assign(out, detail);
    }
    return out;
  });
  return { lang, diagnostics };
}

function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (err) {
    send({ id: null, ok: false, error: `bad request: ${err.message}` });
    return;
  }
  const started = process.hrtime.bigint();
  const elapsed = () => Number(process.hrtime.bigint() - started) / 1e6;
  try {
    if (request.op === "check") {
      if (typeof request.code !== "string") throw new Error("`code` must be a string");
      const result = check(request.code, request.lang);
      send({ id: request.id, ok: true, ...result, ms: elapsed() });
    } else if (request.op === "warm") {
      check("export {};\n", "ts");
      send({ id: request.id, ok: true, ms: elapsed() });
    } else {
      throw new Error(`unknown op ${JSON.stringify(request.op)}`);
    }
  } catch (err) {
    send({ id: request.id, ok: false, error: String((err && err.stack) || err).slice(0, 2000) });
  }
}

send({ ready: true, typescript: ts.version });
const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", handle);
lines.on("close", () => process.exit(0));
