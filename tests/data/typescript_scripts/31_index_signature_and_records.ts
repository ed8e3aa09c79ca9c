import * as notes from "@codemode/servers/notes";

interface Counter {
  [tag: string]: number;
}
const counter: Counter = {};
const { result } = await notes.list_notes();
for (const { tags } of result) for (const t of tags) counter[t] = (counter[t] ?? 0) + 1;
const entries = Object.entries(counter) as [string, number][];
const most = entries.reduce<[string, number]>((a, b) => (b[1] > a[1] ? b : a), ["", 0]);
globalThis.__codemode_result__ = { most: most[0], distinct: entries.length };
