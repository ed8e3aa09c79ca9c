import * as notes from "@codemode/servers/notes";

let first!: notes.Note;
let count: number;
const { result } = await notes.list_notes();
count = 0;
for (const n of result) {
  if (count++ === 0) first = n;
}
globalThis.__codemode_result__ = { first: first.title, count };
