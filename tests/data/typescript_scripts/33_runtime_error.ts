import * as notes from "@codemode/servers/notes";

interface Checked {
  id: number;
  title: string;
}

const { result }: notes.ListNotesOutput = await notes.list_notes();
const checked: Checked[] = result.map((n): Checked => ({ id: n.id, title: n.title as string }));
const missing = checked.find((c) => c.id === 999) as Checked | undefined;
console.log(`checked ${checked.length} notes`);
const title: string = missing!.title.toUpperCase(); // throws here: no note 999
globalThis.__codemode_result__ = title;
