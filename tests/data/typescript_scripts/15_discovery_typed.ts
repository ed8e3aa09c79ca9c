import { searchTools, getTool } from "@codemode/discovery";

type Found = { serverId: string; exportName: string };

const results = (await searchTools("free slots", { detail: "name", limit: 3 })).results as Found[];
const first: Found = results[0]!;
const tool = await getTool(first.serverId, first.exportName);
globalThis.__codemode_result__ = { first: `${first.serverId}.${first.exportName}`, hasSchema: Boolean(tool?.inputSchema) };
