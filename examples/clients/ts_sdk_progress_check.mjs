// Checks `codemode-gen serve` with the official TypeScript SDK client: progress keeps a long run
// alive past the client timeout, a run without it times out (and is cancelled), over stdio and
// over `serve --http` with a bearer token. Run from a folder whose node_modules has
// @modelcontextprotocol/sdk (docs/clients.md): node ts_sdk_progress_check.mjs

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { spawn } from "node:child_process";
import { resolve } from "node:path";

const SERVE = [process.env.CODEMODE_GEN ?? "codemode-gen", "serve", "--config", resolve(process.env.MCP_CONFIG ?? ".mcp.json")];
const slow = { code: "await new Promise((r) => setTimeout(r, 4000)); globalThis.__codemode_result__ = 'slept';" };

async function session(transport, label) {
  const client = new Client({ name: "ts-sdk-check", version: "1" });
  const t0 = Date.now();
  await client.connect(transport);
  console.log(label, "connected in", Date.now() - t0, "ms; tools:", (await client.listTools()).tools.map((t) => t.name));
  let notes = 0;
  const r = await client.callTool({ name: "codemode.run", arguments: slow }, undefined,
    { timeout: 2000, resetTimeoutOnProgress: true, onprogress: (p) => { notes++; } });
  console.log(label, "4 s run, timeout 2 s reset on progress:", r.structuredContent.result, "progress notifications:", notes);
  try {
    await client.callTool({ name: "codemode.run", arguments: slow }, undefined, { timeout: 2000 });
    console.log(label, "UNEXPECTED: no timeout without progress");
  } catch (e) { console.log(label, "without onprogress: timed out as the SDK does:", String(e.message).slice(0, 60)); }
  const after = await client.callTool({ name: "codemode.run", arguments: { code: "globalThis.__codemode_result__ = 1" } });
  console.log(label, "next run after the cancelled one:", after.structuredContent.result);
  await client.close();
}

await session(new StdioClientTransport({ command: SERVE[0], args: SERVE.slice(1), cwd: "/" }), "stdio:");

const proc = spawn(SERVE[0], [...SERVE.slice(1), "--http", "127.0.0.1:0"], { env: { ...process.env, CODEMODE_AUTH_TOKEN: "s3cret" } });
const url = await new Promise((resolve) => {
  let buf = "";
  proc.stderr.on("data", (d) => { buf += d; const m = buf.match(/listening on (http:\/\/\S+)/); if (m) resolve(m[1]); });
});
try {
  const noauth = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  console.log("http: without token:", noauth.status);
  await session(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: "Bearer s3cret" } } }), "http:");
} finally { proc.kill("SIGTERM"); }
