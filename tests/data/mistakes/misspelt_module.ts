import * as notes from "@codemode/server/notes";
const listed: unknown = await notes.list_notes();
globalThis.__codemode_result__ = listed;
