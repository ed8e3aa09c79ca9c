import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";

const [notesOut, eventsOut]: [notes.ListNotesOutput, calendar.ListEventsOutput] = await Promise.all([
  notes.list_notes(),
  calendar.list_events({ from: "2026-03-01", to: "2026-03-07" }),
]);
const linked: Set<number> = new Set(eventsOut.events.map((e) => e.noteId).filter((id): id is number => id !== null));
globalThis.__codemode_result__ = notesOut.result.filter((n) => linked.has(n.id)).map((n) => n.title);
