import * as calendar from "@codemode/servers/calendar";
const events = await calendar.list_events({ from: "2026-03-02", to: "2026-03-08" });
globalThis.__codemode_result__ = events.filter((e) => e.attendees.length > 1).length;
