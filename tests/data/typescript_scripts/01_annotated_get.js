import * as notes from "@codemode/servers/notes";

const id = 2;
const note = await notes.get_note({ id });
const words = note.body.split(/\s+/);
console.log(`note ${note.id}: ${note.title} (${words.length} words)`);
globalThis.__codemode_result__ = { title: note.title, words: words.length };
