import { summary } from "@codemode/servers/notes";
const text: string = await summary();
const parsed: { count: number } = JSON.parse(text);
globalThis.__codemode_result__ = parsed.count;
