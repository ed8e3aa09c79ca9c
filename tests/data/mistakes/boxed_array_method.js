import { list_notes } from "@codemode/servers/notes";
const notes = await list_notes();
globalThis.__codemode_result__ = notes.map((n) => n.title);
