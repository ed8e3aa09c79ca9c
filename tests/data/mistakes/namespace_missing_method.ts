import * as notes from "@codemode/servers/notes";
const listed: unknown = await (notes as any).listNote();
globalThis.__codemode_result__ = listed;
