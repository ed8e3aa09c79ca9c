import * as notes from "@codemode/servers/notes";

function pick(note: notes.Note, field: "title"): string;
function pick(note: notes.Note, field: "tags"): string[];
function pick(note: notes.Note, field: "title" | "tags"): string | string[] {
  return note[field];
}

const note = await notes.get_note({ id: 1 });
globalThis.__codemode_result__ = { title: pick(note, "title"), tags: pick(note, "tags") };
