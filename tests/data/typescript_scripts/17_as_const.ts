import * as notes from "@codemode/servers/notes";

const TAGS = ["work", "home", "books"] as const;
type Tag = (typeof TAGS)[number];
const Status = { Open: "open", Done: "done" } as const;
type Status = (typeof Status)[keyof typeof Status];

const counts: Record<Tag, number> = { work: 0, home: 0, books: 0 };
for (const tag of TAGS) counts[tag] = (await notes.list_notes({ tag })).result.length;
const status: Status = Status.Open;
globalThis.__codemode_result__ = { counts, status };
