import { stats } from "@codemode/servers/notes";
const s = await stats();
globalThis.__codemode_result__ = { home: s.byTag.home };
