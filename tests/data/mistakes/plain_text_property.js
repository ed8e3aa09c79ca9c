import { summary } from "@codemode/servers/notes";
const s = await summary();
globalThis.__codemode_result__ = s.notes.length;
