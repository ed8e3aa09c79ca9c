import { stats } from "@codemode/servers/notes";
interface Stats { byTag: Record<string, number> }
const s = (await stats()) as unknown as Stats;
globalThis.__codemode_result__ = { home: s.byTag.home };
