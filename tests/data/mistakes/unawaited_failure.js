import * as notes from "@codemode/servers/notes";
notes.flaky_sync({});
globalThis.__codemode_result__ = "synced";
