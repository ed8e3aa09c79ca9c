import * as notes from "@codemode/servers/notes";
globalThis.__codemode_result__ = await notes.listNotes();
