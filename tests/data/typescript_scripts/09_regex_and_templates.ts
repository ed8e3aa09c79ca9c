import * as notes from "@codemode/servers/notes";

const note: notes.Note = await notes.get_note({ id: 3 });
// Regexes and strings full of TypeScript-looking text must come through untouched.
const timeLike = /(\d{2}):(\d{2})/g;
const generic = /<T>\s*as\s*string: number/;
const label: string = `id: ${note.id} as ${note.title} <T>`;
const s = "a: b as c <d> satisfies e!";
const ms = note.body.match(/(\d+)\s*ms/)?.[1];
const total = note.body.split(/[;:]/).length / 2;
globalThis.__codemode_result__ = { label, s, ms, total, generic: generic.test("<T> as string: number"), times: "09:30".match(timeLike) };
