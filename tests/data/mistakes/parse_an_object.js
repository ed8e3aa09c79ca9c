import { get_note } from "@codemode/servers/notes";
const note = JSON.parse(await get_note({ id: 2 }));
globalThis.__codemode_result__ = note.title;
