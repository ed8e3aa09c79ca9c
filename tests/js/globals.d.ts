// What the sandbox JavaScript (runtime/js/) relies on beyond the ECMAScript library, declared for
// tests/runtime/js/test_js_checked.py's `tsc --noEmit --allowJs --checkJs` run over those files.

// QuickJS (the sandbox engine, runtime/sandbox/engine.py) has TextEncoder/TextDecoder natively;
// they are not in the ES library declarations (only DOM's), and the sandbox has no DOM.
declare class TextEncoder {
  encode(input?: string): Uint8Array;
}
declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean; ignoreBOM?: boolean });
  decode(input?: ArrayBufferView | ArrayBuffer, options?: { stream?: boolean }): string;
}

// discovery.js: the host replaces this placeholder with the run's catalog as a JSON string
// literal (runtime/host/discovery.py) before the module reaches the engine.
declare const __CODEMODE_DISCOVERY_DATA__: string;

// typecheck_server.js and skills_tsc.js run under node (not in the sandbox); typecheck_core.js
// runs under node or QuickJS. Only what they use of node is declared, as `any`: the repository
// installs no @types/node.
declare function require(name: string): any;
declare const process: any;
declare const module: any;
declare module "fs";
declare module "path";
declare module "readline";
