import { list_notes } from "@codemode/servers/notes";
const { result }: { result: { id: number }[] } = await list_notes();
globalThis.__codemode_result__ = result.length;
