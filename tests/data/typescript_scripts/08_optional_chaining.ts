import { get_event } from "@codemode/servers/calendar";

const event = await get_event({ id: 1 });
const location: string = event.location ?? "(none)";
const firstAttendee: string | undefined = event.attendees?.[0];
const domain = firstAttendee?.split("@")?.[1]?.toUpperCase?.();
const ok = event?.noteId != null ? true : false;
globalThis.__codemode_result__ = { location, domain, ok };
