import { get_note } from "@codemode/servers/notes";
const note = await get_note({ id: 1 });
globalThis.__codemode_result__ = note.done!.toString();
