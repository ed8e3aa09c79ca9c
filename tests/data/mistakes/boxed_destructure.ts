import { list_notes } from "@codemode/servers/notes";
type Note = { id: number; title: string };
const [oldest]: Note[] = (await list_notes()) as any;
globalThis.__codemode_result__ = oldest.title;
