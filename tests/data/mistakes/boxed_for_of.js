import * as notes from "@codemode/servers/notes";
const titles = [];
for (const note of await notes.list_notes()) {
  titles.push(note.title);
}
globalThis.__codemode_result__ = titles;
