import * as calendar from "@codemode/servers/calendar";

const query = { date: "2026-03-04", durationMinutes: 30 };
const ranges = {
  morning: [9, 12],
  afternoon: [13, 17],
};
const { slots } = await calendar.free_slots(query);
const morning = slots.filter((s) => new Date(s.start).getUTCHours() < ranges.morning[1]);
globalThis.__codemode_result__ = { all: slots.length, morning: morning.length };
