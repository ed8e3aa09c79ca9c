// @codemode/discovery (spec §4.1-§4.3, §12.1), built by the host for each run.
// The host replaces the placeholder below with this run's catalog (out/manifest.json plus the
// live tool lists as they were when the run started, §8.2). Every function returns a fresh
// copy, so a script that mutates a result cannot change what later calls return.
import { ServerNotFoundError, ToolNotFoundError } from "@codemode/errors";

const parse = JSON.parse;
const stringify = JSON.stringify;
const CATALOG = parse(__CODEMODE_DISCOVERY_DATA__);
const DETAILS = ["name", "description", "full"];
// Bounds one searchTools answer when the caller gives no limit (spec: host-defined maximum).
const DEFAULT_SEARCH_LIMIT = CATALOG.defaultSearchLimit;
const MAX_SEARCH_LIMIT = CATALOG.maxSearchLimit;

const copy = (value) => parse(stringify(value));
const freezeDeep = (value) => {
  if (value && typeof value === "object") {
    for (const key of Object.keys(value)) freezeDeep(value[key]);
    Object.freeze(value);
  }
  return value;
};
freezeDeep(CATALOG);

function serverOf(serverId, fn) {
  if (typeof serverId !== "string") {
    throw new TypeError(`${fn}: serverId must be a string, got ${typeof serverId}`);
  }
  const server = CATALOG.servers.find((s) => s.serverId === serverId);
  if (!server) {
    const ids = CATALOG.servers.map((s) => s.serverId);
    throw new ServerNotFoundError(`no server '${serverId}'`, {
      serverId,
      hint: ids.length
        ? `use one of: ${ids.join(", ")} (listServers() lists them)`
        : "no servers are available in this run",
    });
  }
  return server;
}

function detailOf(options, fn) {
  if (options === undefined || options === null) return "description";
  if (typeof options !== "object") throw new TypeError(`${fn}: options must be an object`);
  const detail = options.detail === undefined ? "description" : options.detail;
  if (!DETAILS.includes(detail)) {
    throw new TypeError(`${fn}: detail must be one of "name", "description", "full"; got ${stringify(detail)}`);
  }
  return detail;
}

function shape(tool, detail) {
  const out = { toolName: tool.toolName, exportName: tool.exportName };
  if (detail !== "name") {
    if (tool.description !== undefined) out.description = tool.description;
    if (tool.annotations !== undefined) out.annotations = tool.annotations;
  }
  if (detail === "full") {
    if (tool.inputSchema !== undefined) out.inputSchema = tool.inputSchema;
    if (tool.outputSchema !== undefined) out.outputSchema = tool.outputSchema;
  }
  return copy(out);
}

function serverInfo(server) {
  const out = { serverId: server.serverId, serverName: server.serverName };
  if (server.capabilities !== undefined) out.capabilities = server.capabilities;
  return copy(out);
}

export const specVersion = CATALOG.specVersion;

export async function listServers() {
  return CATALOG.servers.map(serverInfo);
}

export async function describeServer(serverId) {
  const server = serverOf(serverId, "describeServer");
  const out = serverInfo(server);
  if (server.description !== undefined) out.description = server.description;
  if (server.version !== undefined) out.version = server.version;
  return out;
}

export async function listTools(serverId, options) {
  const server = serverOf(serverId, "listTools");
  const detail = detailOf(options, "listTools");
  return server.tools.map((t) => shape(t, detail));
}

export async function getTool(serverId, toolName) {
  const server = serverOf(serverId, "getTool");
  const tool = server.tools.find((t) => t.toolName === toolName)
    || server.tools.find((t) => t.exportName === toolName);
  if (!tool) {
    throw new ToolNotFoundError(`server '${serverId}' has no tool '${toolName}'`, {
      serverId,
      toolName: String(toolName),
      hint: `call listTools('${serverId}', { detail: "name" }) to see its tools`,
    });
  }
  return shape(tool, "full");
}

// Lower-case words of a text; snake_case, kebab-case, dotted and camelCase names split too.
function tokens(text) {
  return String(text)
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0);
}

// "events" finds "event", "notes" finds "note": a query word that extends a word of at least
// MIN_STEM characters counts as a prefix match (plural and -ing/-ed forms, no dictionary).
const MIN_STEM = 4;
function stem(queryWord, word) {
  return word.length >= MIN_STEM && queryWord.length - word.length <= 3 && queryWord.startsWith(word);
}

// Name matches outrank description matches; whole words outrank prefixes and substrings.
function score(tool, words, phrase) {
  const nameText = `${tool.toolName} ${tool.exportName}`.toLowerCase();
  const nameWords = tokens(`${tool.toolName} ${tool.exportName}`);
  const descText = (tool.description || "").toLowerCase();
  const descWords = tokens(tool.description || "");
  let total = 0;
  let matched = 0;
  for (const w of words) {
    let s = 0;
    if (nameWords.includes(w)) s = 10;
    else if (nameWords.some((n) => n.startsWith(w) || stem(w, n))) s = 7;
    else if (nameText.includes(w)) s = 5;
    if (descWords.includes(w)) s += 3;
    else if (descWords.some((d) => d.startsWith(w) || stem(w, d))) s += 2;
    else if (descText.includes(w)) s += 1;
    if (s > 0) matched += 1;
    total += s;
  }
  if (matched === 0) return 0;
  if (phrase && nameText.includes(phrase)) total += 8;
  else if (phrase && descText.includes(phrase)) total += 2;
  return total * (matched / words.length);
}

export async function searchTools(query, options) {
  if (typeof query !== "string") throw new TypeError("searchTools: query must be a string");
  const detail = detailOf(options, "searchTools");
  const only = options && options.serverId !== undefined ? serverOf(options.serverId, "searchTools") : null;
  let limit = options && options.limit !== undefined ? options.limit : DEFAULT_SEARCH_LIMIT;
  if (typeof limit !== "number" || !Number.isFinite(limit) || limit < 0) {
    throw new TypeError("searchTools: limit must be a non-negative number");
  }
  limit = Math.min(Math.floor(limit), MAX_SEARCH_LIMIT);
  const words = tokens(query);
  const phrase = query.trim().toLowerCase();
  const hits = [];
  for (const server of only ? [only] : CATALOG.servers) {
    for (const tool of server.tools) {
      const s = words.length ? score(tool, words, phrase) : 1;
      if (s > 0) hits.push({ s, server, tool });
    }
  }
  hits.sort((a, b) =>
    b.s - a.s
    || (a.server.serverId < b.server.serverId ? -1 : a.server.serverId > b.server.serverId ? 1 : 0)
    || (a.tool.toolName < b.tool.toolName ? -1 : a.tool.toolName > b.tool.toolName ? 1 : 0));
  const results = hits.slice(0, limit).map(({ server, tool }) => {
    const out = { serverId: server.serverId };
    return Object.assign(out, shape(tool, detail));
  });
  return { query, results };
}
