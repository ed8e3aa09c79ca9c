globalThis.__codemode_result__ = await list_notes();
