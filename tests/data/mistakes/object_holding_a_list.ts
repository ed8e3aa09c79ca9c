import * as calendar from "@codemode/servers/calendar";
type Event = { title: string; attendees: string[] };
const events = (await calendar.list_events({ from: "2026-03-02", to: "2026-03-08" })) as unknown as Event[];
globalThis.__codemode_result__ = events.filter((e: Event) => e.attendees.length > 1).length;
