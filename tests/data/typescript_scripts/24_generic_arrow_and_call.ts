import * as notes from "@codemode/servers/notes";

const first = <T,>(items: T[]): T | undefined => items[0];
const pluck = <T, K extends keyof T>(items: T[], key: K): T[K][] => items.map((item) => item[key]);
const { result } = await notes.list_notes();
const ids = pluck<notes.Note, "id">(result, "id");
const sorted = Array.from<number>(ids).sort((a: number, b: number) => b - a);
globalThis.__codemode_result__ = { first: first<number>(sorted), ids: sorted };
