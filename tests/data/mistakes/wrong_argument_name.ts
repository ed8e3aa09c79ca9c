import { get_note } from "@codemode/servers/notes";
const input: any = { noteId: 2 };
globalThis.__codemode_result__ = await get_note(input);
