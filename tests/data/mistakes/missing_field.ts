import { get_note } from "@codemode/servers/notes";
const note: any = await get_note({ id: 2 });
globalThis.__codemode_result__ = (note.tag as string[]).length;
