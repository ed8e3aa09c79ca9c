import * as notes from "@codemode/servers/notes";

interface Summary {
  id: number;
  title: string;
  tags: string[];
  open?: boolean;
}

const { result } = await notes.list_notes();
const summaries: Summary[] = result.map((n): Summary => ({
  id: n.id,
  title: n.title,
  tags: n.tags,
  open: n.done === false,
}));
globalThis.__codemode_result__ = summaries.filter((s) => s.open);
