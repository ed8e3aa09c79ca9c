import * as notes from "@codemode/servers/notes";

const isOpen = (n: notes.Note): boolean => n.done === false;
const titleOf = (n: { title: string }) => n.title.trim();
const scoreBy = async (query: string, limit = 5): Promise<number> => JSON.parse(await notes.search_notes({ query, limit })).length;
const { result } = await notes.list_notes();
globalThis.__codemode_result__ = {
  open: result.filter(isOpen).map(titleOf),
  searchHits: await scoreBy("search"),
};
