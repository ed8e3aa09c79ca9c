import { flaky_sync } from "@codemode/servers/notes";
const outcome: unknown = await flaky_sync({});
globalThis.__codemode_result__ = outcome;
