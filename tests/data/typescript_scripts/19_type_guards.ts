import * as notes from "@codemode/servers/notes";

type Todo = notes.Note & { done: boolean };

function isTodo(n: notes.Note): n is Todo {
  return typeof n.done === "boolean";
}
function assertString(value: unknown): asserts value is string {
  if (typeof value !== "string") throw new TypeError("not a string");
}

const { result } = await notes.list_notes();
const todos = result.filter(isTodo);
const csv: unknown = await notes.export_csv({ tag: "work" });
assertString(csv);
globalThis.__codemode_result__ = { todos: todos.length, csvLines: csv.trim().split("\n").length };
