const listed = await notes.list_notes();
globalThis.__codemode_result__ = listed.result.length;
