import { get_note } from "@codemode/servers/notes";
const note: { title: string } = JSON.parse((await get_note({ id: 2 })) as any);
globalThis.__codemode_result__ = note.title;
