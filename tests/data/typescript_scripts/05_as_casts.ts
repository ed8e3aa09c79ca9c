import * as notes from "@codemode/servers/notes";

type Hit = { id: number; title: string; score: number };

const raw = await notes.search_notes({ query: "search", limit: 3 });
const hits = JSON.parse(raw) as Hit[];
const best = hits[0] as Hit | undefined;
const stats = JSON.parse(await notes.stats()) as unknown as { notes: number; todo: number };
globalThis.__codemode_result__ = { best: best?.title ?? null, total: stats.notes };
