import { listNotes } from "@codemode/servers/notes";
const notes: unknown = await listNotes();
globalThis.__codemode_result__ = notes;
