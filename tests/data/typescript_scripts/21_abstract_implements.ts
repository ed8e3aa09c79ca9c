import * as notes from "@codemode/servers/notes";

interface Formatter {
  format(note: notes.Note): string;
}

abstract class Base implements Formatter {
  abstract prefix(): string;
  format(note: notes.Note): string {
    return `${this.prefix()} ${note.title}`;
  }
}

class Bullet extends Base implements Formatter {
  override prefix(): string {
    return "-";
  }
}

const { result } = await notes.list_notes({ tag: "home" });
globalThis.__codemode_result__ = result.map((n) => new Bullet().format(n));
