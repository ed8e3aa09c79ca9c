import * as calendar from "@codemode/servers/calendar";

type Event = calendar.ListEventsOutput["events"][number];
type Picked = Pick<Event, "id" | "title">;
type Flags = { [K in keyof Picked as `has_${K & string}`]: boolean };

const { events } = await calendar.list_events({});
const picked: Picked[] = events.map(({ id, title }) => ({ id, title }));
const flags: Flags = { has_id: true, has_title: picked.every((p) => p.title.length > 0) };
globalThis.__codemode_result__ = { count: picked.length, flags };
