import * as notes from "@codemode/servers/notes";

function isTodo(n) {
  return typeof n.done === "boolean";
}
function assertString(value) {
  if (typeof value !== "string") throw new TypeError("not a string");
}

const { result } = await notes.list_notes();
const todos = result.filter(isTodo);
const csv = await notes.export_csv({ tag: "work" });
assertString(csv);
globalThis.__codemode_result__ = { todos: todos.length, csvLines: csv.trim().split("\n").length };
