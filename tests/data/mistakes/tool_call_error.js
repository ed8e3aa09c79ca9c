import { flaky_sync } from "@codemode/servers/notes";
await flaky_sync({});
globalThis.__codemode_result__ = "synced";
