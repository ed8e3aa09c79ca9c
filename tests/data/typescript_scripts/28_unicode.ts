import * as notes from "@codemode/servers/notes";

type Étiquette = "travail" | "maison";
const étiquettes: Étiquette[] = ["travail", "maison"];
const titre: string = "Notes — résumé 📝";
const { result } = await notes.list_notes();
const café = result.length as number;
globalThis.__codemode_result__ = { titre, café, étiquettes };
