import { list_events } from "@codemode/servers/calendar";
const listed = list_events();
for (const e of listed.events) console.log(e.title);
