import * as notes from "@codemode/servers/notes";
import * as calendar from "@codemode/servers/calendar";

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i: number = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
  return out;
}

const days: string[] = ["2026-03-02", "2026-03-03", "2026-03-04"];
const free = await mapLimit(days, 2, async (date: string) => (await calendar.free_slots({ date, durationMinutes: 60 })).slots.length);
const hits = await mapLimit([1, 2], 2, (id) => notes.get_note({ id }).then((n) => n.title));
globalThis.__codemode_result__ = { free, hits };
