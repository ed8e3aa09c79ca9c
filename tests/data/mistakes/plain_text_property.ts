import { summary } from "@codemode/servers/notes";
const s: any = await summary();
globalThis.__codemode_result__ = (s.notes as string[]).length;
