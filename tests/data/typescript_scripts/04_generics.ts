import * as notes from "@codemode/servers/notes";

function groupBy<T, K extends string>(items: readonly T[], key: (item: T) => K): Record<K, T[]> {
  const out = {} as Record<K, T[]>;
  for (const item of items) {
    (out[key(item)] ??= []).push(item);
  }
  return out;
}

const { result } = await notes.list_notes();
const byTag = groupBy<notes.Note, string>(result, (n) => n.tags[0] ?? "untagged");
const counts = new Map<string, number>(Object.entries(byTag).map(([tag, items]) => [tag, items.length]));
globalThis.__codemode_result__ = Object.fromEntries(counts);
