import * as notes from "@codemode/servers/notes";
const titles: string[] = [];
const listed: any = await notes.list_notes();
for (const note of listed as Array<{ title: string }>) {
  titles.push(note.title);
}
globalThis.__codemode_result__ = titles;
