import { list_notes } from "@codemode/servers/notes";
interface Note { id: number; title: string; tags: string[] }
const notes = (await list_notes()) as unknown as Note[];
globalThis.__codemode_result__ = notes.map((n: Note) => n.title);
