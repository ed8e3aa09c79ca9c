import * as calendar from "@codemode/servers/calendar";
import { ToolCallError } from "@codemode/errors";
import { open_todos } from "@codemode/skills/open_todos";

/**
 * Book a 30-minute slot on `day` for every open to-do that has no meeting yet in the calendar
 * (linked by noteId). A booking that fails is reported in `failed`; the others go on.
 *
 * @example
 * const plan = await plan_week({ day: "2026-03-02" });
 * if (plan.day !== "2026-03-02") throw new Error("wrong day");
 * // One open to-do has no meeting: booked, or (replayed: create_event is not recorded) failed.
 * if (plan.booked.length + plan.failed.length !== 1) throw new Error(JSON.stringify(plan));
 */
export async function plan_week(input                                   )           
              
                                                             
                   
   {
  const minutes = input.minutes ?? 30;
  const [todos, { events }] = await Promise.all([
    open_todos({}),
    calendar.list_events(),
  ]);
  const scheduled = new Set(events.map((event) => event.noteId)); // any day: planned already
  const unscheduled = todos.filter((todo) => !scheduled.has(todo.id));
  const booked                                                     = [];
  const failed           = [];
  if (unscheduled.length === 0) return { day: input.day, booked, failed };
  const { slots } = await calendar.free_slots({ date: input.day, durationMinutes: minutes * unscheduled.length });
  let start = slots.length > 0 ? Date.parse(slots[0].start) : NaN;
  for (const todo of unscheduled) {
    if (Number.isNaN(start)) break;
    const end = start + minutes * 60 * 1000;
    try {
      const event = await calendar.create_event({
        title: `Work on: ${todo.title}`,
        start: new Date(start).toISOString().replace(".000Z", "Z"),
        end: new Date(end).toISOString().replace(".000Z", "Z"),
        noteId: todo.id,
      });
      booked.push({ note: todo.title, eventId: event.id, start: event.start });
    } catch (error) {
      if (!(error instanceof ToolCallError)) throw error;
      failed.push(`${todo.title}: ${error.message}`);
    }
    start = end;
  }
  return { day: input.day, booked, failed };
}
