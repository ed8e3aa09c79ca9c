import * as notes from "@codemode/servers/notes";

declare const __codemode_result__: unknown;
declare global {
  interface Array<T> {
    at(index: number): T | undefined;
  }
}
namespace Report {
  export type Row = { id: number; title: string };
  export interface Table {
    rows: Row[];
  }
}

const { result } = await notes.list_notes();
const table: Report.Table = { rows: result.map((n): Report.Row => ({ id: n.id, title: n.title })) };
globalThis.__codemode_result__ = table.rows.at(-1);
