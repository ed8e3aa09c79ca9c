import * as notes from "@codemode/servers/notes";
type Hit = { id: number; title: string; score: number };
const hits = (await notes.search_notes({ query: "search" })) as any as Hit[];
globalThis.__codemode_result__ = hits.map((h: Hit) => h.title);
