import { flaky_sync, stats } from "@codemode/servers/notes";
const counts: string = await stats();
void flaky_sync({});
globalThis.__codemode_result__ = counts.length;
