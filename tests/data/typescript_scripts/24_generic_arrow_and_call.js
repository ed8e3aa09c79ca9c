import * as notes from "@codemode/servers/notes";

const first = (items) => items[0];
const pluck = (items, key) => items.map((item) => item[key]);
const { result } = await notes.list_notes();
const ids = pluck(result, "id");
const sorted = Array.from(ids).sort((a, b) => b - a);
globalThis.__codemode_result__ = { first: first(sorted), ids: sorted };
