import notes from "@codemode/servers/notes";
const listed: unknown = await notes.list_notes();
globalThis.__codemode_result__ = listed;
