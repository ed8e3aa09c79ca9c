import { get_note } from "@codemode/servers/notes";
const note = await (get_note as any)(2);
globalThis.__codemode_result__ = note;
