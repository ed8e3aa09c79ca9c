import notes from "@codemode/servers/notes";
globalThis.__codemode_result__ = await notes.list_notes();
