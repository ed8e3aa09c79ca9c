// @ts-check
// SPDX-License-Identifier: MIT
// Type-checks the skills of a project (skills/<name>.ts|js) against a codemode.d.ts and emits
// each one's declaration (runtime/host/skills.py). Run by node:
//   node skills_tsc.js <typescript/lib/typescript.js> <work dir>
// The work dir holds codemode.d.ts and skills/<name>.ts|js (copies written by the caller, never
// the user's files); the answer is one JSON line on stdout:
//   {"diagnostics": [{file, line, column, code, category, message}], "declarations": {name: text}}
// `@codemode/servers/*` and the other @codemode/ modules resolve to the ambient declarations of
// codemode.d.ts; `@codemode/skills/<name>` to the skill's file (a skill importing a skill).
"use strict";

const fs = require("fs");
const path = require("path");

const CATEGORY = { 0: "warning", 1: "error", 2: "suggestion", 3: "message" };

function main() {
  const [tsPath, work] = process.argv.slice(2);
  const ts = require(tsPath);
  const skillsDir = path.join(work, "skills");
  const files = fs.readdirSync(skillsDir).filter((f) => /\.(ts|js)$/.test(f)).map((f) => path.join(skillsDir, f));
  const options = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts"],
    types: [],
    strict: true,
    allowJs: true,
    checkJs: true,
    declaration: true,
    emitDeclarationOnly: true,
    skipLibCheck: false,
    noPropertyAccessFromIndexSignature: true,
    erasableSyntaxOnly: true,
    baseUrl: work,
    paths: { "@codemode/skills/*": ["skills/*"] },
    outDir: path.join(work, "emitted"),
    rootDir: work,
  };
  const program = ts.createProgram([path.join(work, "codemode.d.ts"), ...files], options);
  const diagnostics = [];
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const item = {
      code: d.code,
      category: CATEGORY[d.category] || "error",
      message: ts.flattenDiagnosticMessageText(d.messageText, "\n"),
    };
    if (d.file) {
      const at = d.file.getLineAndCharacterOfPosition(d.start || 0);
      item.file = path.relative(work, d.file.fileName).split(path.sep).join("/");
      item.line = at.line + 1;
      item.column = at.character + 1;
    }
    diagnostics.push(item);
  }
  const declarations = {};
  program.emit(undefined, (fileName, text) => {
    const base = path.basename(fileName).replace(/\.d\.ts$/, "");
    declarations[base] = text;
  }, undefined, true);
  process.stdout.write(JSON.stringify({ diagnostics, declarations }) + "\n");
}

main();
