// An agent's script: one codemode.run that chains two MCP servers.
// Find the open to-dos in the notes server, see which already have a meeting in the calendar
// server, and book a 30-minute slot for each one that has none.
//
//   codemode-gen run examples/plan_week.js
import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";
import { searchTools } from "@codemode/discovery";
import { ToolCallError } from "@codemode/errors";

const DAY = "2026-03-04";

// Discovery: which tool finds free time? (names only: cheap on context)
const found = await searchTools("free slots", { detail: "name", limit: 1 });
console.log("slot finder:", found.results.map((t) => `${t.serverId}.${t.exportName}`).join(", "));

// Two servers, concurrently (spec §10.1).
const [{ result: all }, { events }] = await Promise.all([
  notes.list_notes(),
  calendar.list_events({ from: "2026-03-01", to: "2026-03-31" }),
]);
const open = all.filter((note) => note.done === false); // `done` is set only on to-dos
const scheduled = new Set(events.map((event) => event.noteId));
const unscheduled = open.filter((note) => !scheduled.has(note.id));
console.log(`${open.length} open to-dos, ${unscheduled.length} without a meeting`);
if (unscheduled.length === 0) {
  globalThis.__codemode_result__ = { day: DAY, booked: [] };
}

const { slots } = await calendar.free_slots({ date: DAY, durationMinutes: 30 * Math.max(1, unscheduled.length) });
const booked = [];
let start = slots.length > 0 ? Date.parse(slots[0].start) : NaN;
for (const note of unscheduled) {
  if (Number.isNaN(start)) break;
  const end = start + 30 * 60 * 1000;
  try {
    const event = await calendar.create_event({
      title: `Work on: ${note.title}`,
      start: new Date(start).toISOString().replace(".000Z", "Z"),
      end: new Date(end).toISOString().replace(".000Z", "Z"),
      noteId: note.id,
    });
    booked.push({ note: note.title, eventId: event.id, start: event.start });
  } catch (error) {
    // A failed call is a normal exception (spec §10); the script carries on.
    if (!(error instanceof ToolCallError)) throw error;
    console.warn(`could not book "${note.title}": ${error.message}`);
  }
  start = end;
}

globalThis.__codemode_result__ = { day: DAY, booked };
