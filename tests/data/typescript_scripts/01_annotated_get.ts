import * as notes from "@codemode/servers/notes";

const id: number = 2;
const note: notes.Note = await notes.get_note({ id });
const words: string[] = note.body.split(/\s+/);
console.log(`note ${note.id}: ${note.title} (${words.length} words)`);
globalThis.__codemode_result__ = { title: note.title, words: words.length };
