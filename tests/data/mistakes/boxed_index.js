import * as notes from "@codemode/servers/notes";
const all = await notes.list_notes({ tag: "work" });
console.log("first:", all[0].title);
