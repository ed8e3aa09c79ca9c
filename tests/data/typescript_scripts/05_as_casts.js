import * as notes from "@codemode/servers/notes";

const raw = await notes.search_notes({ query: "search", limit: 3 });
const hits = JSON.parse(raw);
const best = hits[0];
const stats = JSON.parse(await notes.stats());
globalThis.__codemode_result__ = { best: best?.title ?? null, total: stats.notes };
