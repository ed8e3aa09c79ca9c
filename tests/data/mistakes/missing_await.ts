import * as notes from "@codemode/servers/notes";
const listed: any = notes.list_notes();
globalThis.__codemode_result__ = listed.result.length as number;
