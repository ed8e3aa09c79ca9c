import { list_notes, tasks_list } from "@codemode/servers/notes";

const notesOut = await list_notes();
const notes = notesOut.result;
const tasks = (await tasks_list({ include_done: true })).result;
globalThis.__codemode_result__ = { notes: notes.length, tasks: tasks.length };
