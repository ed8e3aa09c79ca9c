import { list_events } from "@codemode/servers/calendar";
const listed: any = list_events();
for (const e of listed.events as { title: string }[]) console.log(e.title);
