import * as notes from "@codemode/servers/notes";
const hits = await notes.search_notes({ query: "search" });
globalThis.__codemode_result__ = hits.map((h) => h.title);
