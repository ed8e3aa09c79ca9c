import * as notes from "@codemode/servers/notes";

type Row = {
  id: number;
  title: string;
  // a comment inside a type: `as string`, <T>
  tags: Array<
    string
  >;
};

const toRow = (
  n: notes.Note,
): Row => ({ id: n.id, title: n.title, tags: n.tags });

const { result } = await notes.list_notes();
const rows: Array<
  Row
> = result.map(toRow);
globalThis.__codemode_result__ = rows.length;
