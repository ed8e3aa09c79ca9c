import { list_notes } from "@codemode/servers/notes";
const [oldest] = await list_notes();
globalThis.__codemode_result__ = oldest.title;
