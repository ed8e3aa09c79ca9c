import * as notes from "@codemode/servers/notes";

const { result } = await notes.list_notes();
const byId = new Map(result.map((n) => [n.id, n]));
const groceries = byId.get(2);
const firstTag = groceries.tags[0];
let longest;
for (const n of result) {
  if (!longest || n.body.length > longest.body.length) longest = n;
}
globalThis.__codemode_result__ = { firstTag, longest: longest.title };
