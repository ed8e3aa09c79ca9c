import { list_note } from "@codemode/servers/notes";
globalThis.__codemode_result__ = await list_note();
