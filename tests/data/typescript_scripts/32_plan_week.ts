// examples/plan_week.js as a model writes it in TypeScript.
import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";
import { searchTools } from "@codemode/discovery";
import { ToolCallError } from "@codemode/errors";

const DAY: string = "2026-03-04";

interface Booking {
  note: string;
  eventId: number;
  start: string;
}

const found = await searchTools("free slots", { detail: "name", limit: 1 });
console.log("slot finder:", found.results.map((t) => `${t.serverId}.${t.exportName}`).join(", "));

const [{ result: all }, { events }] = await Promise.all([
  notes.list_notes(),
  calendar.list_events({ from: "2026-03-01", to: "2026-03-31" }),
]);
const open: notes.Note[] = all.filter((note) => note.done === false);
const scheduled = new Set<number | null>(events.map((event) => event.noteId));
const unscheduled = open.filter((note) => !scheduled.has(note.id));

const { slots } = await calendar.free_slots({ date: DAY, durationMinutes: 30 * Math.max(1, unscheduled.length) });
const booked: Booking[] = [];
let start: number = slots.length > 0 ? Date.parse(slots[0]!.start) : NaN;
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
    booked.push({ note: note.title, eventId: event.id, start: event.start } satisfies Booking);
  } catch (error) {
    if (!(error instanceof ToolCallError)) throw error;
    console.warn(`could not book "${note.title}": ${(error as Error).message}`);
  }
  start = end;
}

globalThis.__codemode_result__ = { day: DAY, booked };
