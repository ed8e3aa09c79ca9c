import * as notes from "@codemode/servers/notes";
import { ToolCallError } from "@codemode/errors";

let failure: string | null = null;
try {
  await notes.flaky_sync();
} catch (error: unknown) {
  if (error instanceof ToolCallError) failure = (error as ToolCallError).message;
  else throw error;
}
globalThis.__codemode_result__ = { failed: failure !== null };
