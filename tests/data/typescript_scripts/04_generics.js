import * as notes from "@codemode/servers/notes";

function groupBy(items, key) {
  const out = {};
  for (const item of items) {
    (out[key(item)] ??= []).push(item);
  }
  return out;
}

const { result } = await notes.list_notes();
const byTag = groupBy(result, (n) => n.tags[0] ?? "untagged");
const counts = new Map(Object.entries(byTag).map(([tag, items]) => [tag, items.length]));
globalThis.__codemode_result__ = Object.fromEntries(counts);
