import { summary } from "@codemode/servers/notes";
const text = await summary();
const parsed = JSON.parse(text);
globalThis.__codemode_result__ = parsed.count;
