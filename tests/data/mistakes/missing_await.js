import * as notes from "@codemode/servers/notes";
globalThis.__codemode_result__ = notes.list_notes().result.length;
