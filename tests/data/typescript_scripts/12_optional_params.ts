import * as notes from "@codemode/servers/notes";

function describe(note: notes.Note, prefix?: string, max: number = 20): string {
  const title = note.title.length > max ? note.title.slice(0, max) + "…" : note.title;
  return prefix ? `${prefix} ${title}` : title;
}

const { result } = await notes.list_notes({ tag: "work" });
globalThis.__codemode_result__ = result.map((n) => describe(n, n.done ? "[x]" : undefined, 12));
