import * as notes from "@codemode/servers/notes";

/**
 * The notes that are open to-dos (`done` is false; notes that are not to-dos have no `done`).
 *
 * @example
 * const todos = await open_todos({});
 * if (todos.length === 0) throw new Error("expected open to-dos in the recordings");
 */
export async function open_todos(input                  )                                           {
  const { result } = await notes.list_notes();
  return result
    .filter((note) => note.done === false && (input.tag === undefined || note.tags.includes(input.tag)))
    .map((note) => ({ id: note.id, title: note.title }));
}
