// @ts-check
// codemode-gen type checker, the part both backends share (runtime/host/typecheck.py):
//
//   - node:    typecheck_server.js requires this file and gives it a host over `fs`;
//   - QuickJS: runtime/sandbox/typecheck_worker.py evaluates this file after typescript.js and gives it a
//              host of Python functions (no `require`, `process` or `fs` exist there).
//
// Both call createChecker(ts, host) and answer each protocol line with checker.handleLine(line),
// so a script gets the same diagnostics whichever engine runs the compiler.
//
// Type-checks agent scripts against <out dir>/codemode.d.ts with the `typescript` package's
// LanguageService, kept alive between checks: lib.*.d.ts and codemode.d.ts are parsed and bound
// once, so a check after the first only parses and checks the script.
// codemode.d.ts is re-read when its version (mtime and size) changes (`codemode-gen generate`
// while serving).
//
// Protocol: one JSON object a line on stdin and stdout.
//   -> {"id": n, "op": "check", "code": "...", "lang": "auto" | "ts" | "js"}
//   <- {"id": n, "ok": true, "lang": "ts" | "js", "ms": 12.3,
//       "diagnostics": [{"category": "error" | "warning" | "suggestion" | "message", "code": 2339,
//                        "message": "...", "line": 1, "column": 1}]}      (1-based, UTF-16 columns)
//   -> {"id": n, "op": "warm"}   <- {"id": n, "ok": true, "ms": ...}   (loads everything once)
//   <- {"id": n, "ok": false, "error": "RangeError: ...", "stack": "..."}  (a request that failed)
// The first line written is {"ready": true, "typescript": "<version>"} (or {"ready": false, "error"}):
// the backend writes it.
// Only the script's own diagnostics are returned; out/'s files are the generator's business.
//
// The host: the checker's only way to the disk, and it names no host path.
//   readDeclarations()    -> text of out/codemode.d.ts, or undefined
//   declarationsVersion() -> a string that changes when out/codemode.d.ts does ("missing" if absent)
//   readConfig()          -> text of out/tsconfig.json, or undefined
//   readLib(base)         -> text of TypeScript's lib/<base> (base matches LIB_FILE), or undefined
//   libExists(base)       -> whether TypeScript ships lib/<base>
//   now()                 -> milliseconds, for the "ms" of a reply
"use strict";

(function (/** @type {any} */ root) {
  // ---- The checker's file system (spec §3.4, §11: nothing of the host is reachable from a script).
  // The LanguageService sees a closed, virtual file system of exactly three kinds of file: the
  // script (in memory, never written), out/codemode.d.ts and TypeScript's own lib.*.d.ts. Every
  // other name (an import of "../secret.json", `/// <reference path="/etc/x">`, `import("…")` in
  // a type, node_modules, @types, package.json, a symlink in out/) does not exist: fileExists is
  // false, readFile undefined, directories are empty, and modules resolve to nothing but the
  // ambient `declare module "@codemode/…"` blocks of codemode.d.ts. So a script cannot read a host
  // file through a type error ("Type '"sk-…"' is not assignable to type '1'"), and a file that
  // exists gets the same diagnostic as one that does not (no existence oracle). The names are
  // virtual too (VIRTUAL_ROOT): no host path appears in a diagnostic.
  const VIRTUAL_ROOT = "/__codemode__";
  const VIRTUAL_LIB = VIRTUAL_ROOT + "/lib/";
  const VIRTUAL_DECLARATIONS = VIRTUAL_ROOT + "/codemode.d.ts";
  // TypeScript's standard library files (lib.d.ts, lib.es2022.full.d.ts, lib.dom.d.ts, ...):
  // `lib` options and `/// <reference lib="…">` pick among them. Nothing else of the lib folder.
  const LIB_FILE = /^lib(\.[a-z0-9]+)*\.d\.ts$/i;

  // The compiler options out/tsconfig.json may set: type-checking strictness and the target and
  // lib (which standard library). Nothing that changes what files or modules exist (paths,
  // baseUrl, typeRoots, types, rootDirs, resolveJsonModule, allowArbitraryExtensions, plugins,
  // moduleSuffixes, ...) is read, whatever the file says: those are fixed below.
  const CONFIGURABLE_OPTIONS = new Set([
    "target", "lib", "strict", "noImplicitAny", "strictNullChecks", "strictFunctionTypes",
    "strictBindCallApply", "strictPropertyInitialization", "strictBuiltinIteratorReturn", "noImplicitThis",
    "useUnknownInCatchVariables", "alwaysStrict", "exactOptionalPropertyTypes", "noUncheckedIndexedAccess",
    "noImplicitReturns", "noFallthroughCasesInSwitch", "noImplicitOverride", "noUnusedLocals",
    "noUnusedParameters", "allowUnreachableCode", "allowUnusedLabels", "skipLibCheck", "useDefineForClassFields",
    "experimentalDecorators",
  ]);
  // What out/tsconfig.json says when it is absent (the generated one: strict, ES2022, no DOM).
  const DEFAULT_OPTIONS = { target: "ES2022", lib: ["ES2022"], strict: true, skipLibCheck: false };
  const FIXED_OPTIONS = {
    module: "ES2022",
    moduleResolution: "bundler",
    types: [], // no @types auto-inclusion
    allowJs: true,
    checkJs: true,
    noEmit: true,
    resolveJsonModule: false,
    allowArbitraryExtensions: false,
    allowImportingTsExtensions: false,
  };
  // TypeScript the sandbox cannot run (runtime/host/tsinput.py refuses enums, namespaces with values,
  // parameter properties, `import x = require()`, `<T>x`): the compiler says so too (TS1294).
  // TypeScript before 5.8 has no such option and ignores it.
  const ERASABLE_ONLY = { erasableSyntaxOnly: true };

  const CATEGORY = { 0: "warning", 1: "error", 2: "suggestion", 3: "message" };

  // "Cannot find module" and its variants (a .json import without resolveJsonModule, an
  // extension, a declaration file, ...): any of them about a module that is not @codemode/… says
  // the one thing that is true in the sandbox, the same text whether the path exists or not.
  const MODULE_NOT_FOUND = new Set([2307, 2306, 2732, 2792, 2834, 2835, 2846, 5097, 6263, 7016]);
  const REFERENCE_NOT_FOUND = new Set([6053, 6231, 2688]); // `/// <reference path|types="…">`
  const CODEMODE_PREFIX = "@codemode/";
  // A script's specifier quoted back to it, at most this long (a megabyte of path says nothing more).
  const MAX_SPECIFIER_CHARS = 200;

  function createChecker(ts, host) {
    // The real file behind a virtual name: "declarations", a lib file's base name, or undefined.
    function realFile(fileName) {
      if (fileName === VIRTUAL_DECLARATIONS) return { declarations: true };
      if (fileName.startsWith(VIRTUAL_LIB)) {
        const base = fileName.slice(VIRTUAL_LIB.length);
        if (LIB_FILE.test(base)) return { lib: base };
      }
      return undefined;
    }

    function compilerOptions() {
      const raw = { ...DEFAULT_OPTIONS };
      const text = host.readConfig();
      if (typeof text === "string") {
        const read = ts.parseConfigFileTextToJson("tsconfig.json", text);
        const given = !read.error && read.config && read.config.compilerOptions;
        if (given && typeof given === "object" && !Array.isArray(given)) {
          for (const [key, value] of Object.entries(given)) {
            if (CONFIGURABLE_OPTIONS.has(key)) raw[key] = value;
          }
        }
      }
      const { options } = ts.convertCompilerOptionsFromJson({ ...raw, ...FIXED_OPTIONS }, VIRTUAL_ROOT, "tsconfig.json");
      // Scripts are ES modules with top-level await even without import/export.
      options.moduleDetection = ts.ModuleDetectionKind.Force;
      return Object.assign(options, ERASABLE_ONLY);
    }

    // Generated object types are open (`[k: string]: unknown`, because that is what the schema
    // accepts), so a misspelt property would silently be `unknown`: report it (TS4111, with the
    // declared names) instead. JavaScript cannot annotate parameters or catch variables except
    // through JSDoc, so those two strict checks apply to TypeScript only.
    const tsOptions = { ...compilerOptions(), noPropertyAccessFromIndexSignature: true };
    const jsOptions = { ...tsOptions, noImplicitAny: false, useUnknownInCatchVariables: false };
    const registry = ts.createDocumentRegistry();
    const cache = new Map(); // virtual file name -> {version, snapshot}

    function diskVersion(fileName) {
      if (fileName !== VIRTUAL_DECLARATIONS) return "0"; // lib.*.d.ts never change while we run
      return String(host.declarationsVersion());
    }

    function readReal(fileName) {
      const real = realFile(fileName);
      if (real === undefined) return undefined;
      const text = real.declarations ? host.readDeclarations() : host.readLib(real.lib);
      return typeof text === "string" ? text : undefined;
    }

    const libExists = new Map(); // virtual lib file name -> whether TypeScript ships it
    function realExists(fileName) {
      if (fileName === VIRTUAL_DECLARATIONS) return diskVersion(fileName) !== "missing";
      const real = realFile(fileName);
      if (real === undefined) return false;
      if (!libExists.has(fileName)) libExists.set(fileName, host.libExists(real.lib) === true);
      return libExists.get(fileName);
    }

    // Module and type-reference resolution finds nothing: `@codemode/…` modules are the ambient
    // declarations of codemode.d.ts, which the checker looks up before any resolution.
    function unresolvedModules(literals) {
      return literals.map(() => ({ resolvedModule: undefined }));
    }
    function unresolvedTypeReferences(references) {
      return references.map(() => ({ resolvedTypeReferenceDirective: undefined }));
    }

    // One LanguageService per language; both share the parsed lib files and codemode.d.ts.
    function makeService(ext, options) {
      const script = { name: VIRTUAL_ROOT + "/script" + ext, text: "", version: 0 };
      const known = (fileName) => fileName === script.name || realFile(fileName) !== undefined;
      const serviceHost = {
        getScriptFileNames: () => [VIRTUAL_DECLARATIONS, script.name],
        getScriptVersion: (fileName) => (fileName === script.name ? String(script.version) : diskVersion(fileName)),
        getScriptSnapshot: (fileName) => {
          if (fileName === script.name) return ts.ScriptSnapshot.fromString(script.text);
          if (!known(fileName)) return undefined;
          const version = serviceHost.getScriptVersion(fileName);
          const hit = cache.get(fileName);
          if (hit && hit.version === version) return hit.snapshot;
          const text = readReal(fileName);
          if (text === undefined) return undefined;
          const snapshot = ts.ScriptSnapshot.fromString(text);
          cache.set(fileName, { version, snapshot });
          return snapshot;
        },
        getCurrentDirectory: () => VIRTUAL_ROOT,
        getCompilationSettings: () => options,
        getDefaultLibFileName: (opts) => VIRTUAL_LIB + ts.getDefaultLibFileName(opts),
        getDefaultLibLocation: () => VIRTUAL_LIB.slice(0, -1),
        useCaseSensitiveFileNames: () => true,
        fileExists: (fileName) => fileName === script.name || realExists(fileName),
        readFile: (fileName) => (fileName === script.name ? script.text : known(fileName) ? readReal(fileName) : undefined),
        readDirectory: () => [],
        directoryExists: () => false,
        getDirectories: () => [],
        realpath: (fileName) => fileName,
        resolveModuleNameLiterals: unresolvedModules,
        resolveModuleNames: (names) => names.map(() => undefined), // TypeScript < 5.0
        resolveTypeReferenceDirectiveReferences: unresolvedTypeReferences,
        resolveTypeReferenceDirectives: (names) => names.map(() => undefined), // TypeScript < 5.0
      };
      const service = ts.createLanguageService(serviceHost, registry);
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

    // The @codemode/ modules out/codemode.d.ts declares, and their shapes ("@codemode/servers/<id>").
    function declaredModules(program) {
      const names = program
        .getTypeChecker()
        .getAmbientModules()
        .map((m) => m.getName().replace(/^"|"$/g, ""))
        .filter((n) => n.startsWith(CODEMODE_PREFIX))
        .sort();
      const shapes = [...new Set(names.map((n) => (n.split("/").length > 2 ? n.replace(/\/[^/]+$/, "/<id>") : n)))];
      return { names, shapes };
    }

    // The diagnostic about an import or reference of anything but a @codemode/ module, rewritten;
    // else undefined.
    function unreachable(d, source, program) {
      const isModule = MODULE_NOT_FOUND.has(d.code);
      if ((!isModule && !REFERENCE_NOT_FOUND.has(d.code)) || !source || d.start === undefined) return undefined;
      let written = source.text.slice(d.start, d.start + d.length);
      const quoted = /^(["'`])([\s\S]*)\1$/.exec(written);
      if (quoted) written = quoted[2];
      else if (isModule) return undefined;
      if (isModule && written.startsWith(CODEMODE_PREFIX)) return undefined; // a server out/ lacks: TypeScript's text
      const shown = written.length > MAX_SPECIFIER_CHARS ? written.slice(0, MAX_SPECIFIER_CHARS) + "…" : written;
      const { names, shapes } = declaredModules(program);
      const modules = `@codemode/ modules (${shapes.join(", ") || "none are declared"})`;
      if (isModule) {
        return { code: 2307, message: `Cannot find module '${shown}': a script can import only ${modules}.`, specifier: written, modules: names };
      }
      const what = d.code === 2688 ? "type definition file" : "file";
      return {
        code: d.code,
        message: `Cannot find ${what} '${shown}': a script sees no files, only the standard library and ${modules}.`,
        specifier: written,
        modules: names,
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
        const rewritten = unreachable(d, source, program);
        if (rewritten) Object.assign(out, rewritten);
        if (d.code === 4111 && source && d.start !== undefined) {
          const detail = undeclaredProperty(program, source, d.start);
          if (detail) Object.assign(out, detail);
        }
        return out;
      });
      return { lang, diagnostics };
    }

    // One protocol line in, the reply object out (the backend writes it as one JSON line).
    function handleLine(line) {
      let request;
      try {
        request = JSON.parse(line);
      } catch (err) {
        return { id: null, ok: false, error: `bad request: ${err.message}` };
      }
      const started = host.now();
      const elapsed = () => host.now() - started;
      try {
        if (request.op === "check") {
          if (typeof request.code !== "string") throw new Error("`code` must be a string");
          const result = check(request.code, request.lang);
          return { id: request.id, ok: true, ...result, ms: elapsed() };
        }
        if (request.op === "warm") {
          check("export {};\n", "ts");
          return { id: request.id, ok: true, ms: elapsed() };
        }
        throw new Error(`unknown op ${JSON.stringify(request.op)}`);
      } catch (err) {
        // `error` is the one line a run's TYPECHECK_UNAVAILABLE quotes (no stack: its frames name
        // host paths); `stack` is for people debugging the checker.
        return {
          id: request && request.id,
          ok: false,
          error: String(err).slice(0, 500),
          stack: String((err && err.stack) || "").slice(0, 2000),
        };
      }
    }

    return { version: ts.version, check, handleLine };
  }

  const api = { createChecker, LIB_FILE };
  if (typeof module === "object" && module && module.exports) module.exports = api;
  else root.codemodeTypecheck = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
