import type { Note, Task } from "@codemode/servers/notes";
import { list_notes, tasks_list, type ListNotesOutput } from "@codemode/servers/notes";

const notesOut: ListNotesOutput = await list_notes();
const notes: Note[] = notesOut.result;
const tasks: Task[] = (await tasks_list({ include_done: true })).result;
globalThis.__codemode_result__ = { notes: notes.length, tasks: tasks.length };
