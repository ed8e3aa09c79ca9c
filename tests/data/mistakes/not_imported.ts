const listed: unknown = await get_note({ id: 2 });
globalThis.__codemode_result__ = listed;
