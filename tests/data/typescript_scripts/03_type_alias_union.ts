import { list_events } from "@codemode/servers/calendar";

type Day = `${number}-${number}-${number}`;
type Slot = { start: string; end: string };
type Busy = Slot & { title: string };

const from: Day = "2026-03-01";
const { events } = await list_events({ from, to: "2026-03-31" });
const busy: Busy[] = events.map(({ start, end, title }) => ({ start, end, title }));
globalThis.__codemode_result__ = busy.length;
