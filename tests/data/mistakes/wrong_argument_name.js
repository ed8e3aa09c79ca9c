import { get_note } from "@codemode/servers/notes";
globalThis.__codemode_result__ = await get_note({ noteId: 2 });
