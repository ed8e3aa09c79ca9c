import { list_notes } from "@codemode/servers/notes";
const { result } = await list_notes();
globalThis.__codemode_result__ = result.length;
