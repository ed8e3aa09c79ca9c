import * as notes from "@codemode/servers/notes";
const all: any = await notes.list_notes({ tag: "work" });
const first: { title: string } = all[0];
console.log("first:", first.title);
