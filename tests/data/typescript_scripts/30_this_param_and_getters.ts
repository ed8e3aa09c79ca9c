import * as notes from "@codemode/servers/notes";

class Shelf {
  #items: notes.Note[] = [];
  static of(items: notes.Note[]): Shelf {
    const s = new Shelf();
    s.#items = items;
    return s;
  }
  get size(): number {
    return this.#items.length;
  }
  set limit(value: number) {
    this.#items = this.#items.slice(0, value);
  }
}

function describe(this: { name: string }, count: number): string {
  return `${this.name}: ${count}`;
}

const shelf = Shelf.of((await notes.list_notes()).result);
shelf.limit = 3;
globalThis.__codemode_result__ = describe.call({ name: "shelf" }, shelf.size);
