import { list_notes } from "@codemode/servers/note";
globalThis.__codemode_result__ = await list_notes();
