import * as notes from "@codemode/servers/notes";

const { result } = await notes.list_notes();
const summaries = result.map((n) => ({
  id: n.id,
  title: n.title,
  tags: n.tags,
  open: n.done === false,
}));
globalThis.__codemode_result__ = summaries.filter((s) => s.open);
