const listed: any = await calendar.list_events();
globalThis.__codemode_result__ = listed.events.length;
