import * as notes from "@codemode/servers/notes";

class Tally<K extends string = string> {
  private readonly counts = new Map<K, number>();
  public total: number = 0;
  declare label: string;

  add(key: K, by: number = 1): this {
    this.counts.set(key, (this.counts.get(key) ?? 0) + by);
    this.total += by;
    return this;
  }

  top(n?: number): [K, number][] {
    return [...this.counts].sort((a, b) => b[1] - a[1]).slice(0, n ?? 3);
  }
}

const { result } = await notes.list_notes();
const tally = new Tally<string>();
for (const note of result) for (const tag of note.tags) tally.add(tag);
globalThis.__codemode_result__ = { top: tally.top(2), total: tally.total };
