// @ts-check
// @codemode/discovery (spec §4.1-§4.3, §12.1), built by the host for each run.
// The host replaces the placeholder below with this run's catalog (out/manifest.json plus the
// live tool lists as they were when the run started, §8.2). Every function returns a fresh
// copy, so a script that mutates a result cannot change what later calls return.
import { ServerNotFoundError, ToolNotFoundError } from "@codemode/errors";

const parse = JSON.parse;
const stringify = JSON.stringify;
const CATALOG = parse(__CODEMODE_DISCOVERY_DATA__);
// Search indexes, aligned with CATALOG.servers (runtime/host/discovery.py); private to this module
// and left unfrozen: freezing them would walk every offset on every run for nothing.
const SEARCH = CATALOG.search;
delete CATALOG.search;
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
    if (tool.boxed !== undefined) out.boxed = tool.boxed;
    if (tool.declaration !== undefined) out.declaration = tool.declaration;
    // Calls that wait for a person's yes ("ask", "ask-once") or are refused ("deny"), by the
    // host's approval policy (runtime/host/approval.py); absent: calls are sent. The declaration
    // carries the same as a tag (@approval, @approvalOnce, @denied).
    if (tool.approval !== undefined) out.approval = tool.approval;
    // The output type was inferred from this session's live calls (runtime/host/learn.py).
    if (tool.outputSchemaLearned !== undefined) out.outputSchemaLearned = tool.outputSchemaLearned;
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

export async function listSkills() {
  return copy(CATALOG.skills || []);
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

// ---------------------------------------------------------------------------- search
// BM25F over three fields of every tool: names (canonical + export), title, description. The
// host built each server's inverted index (runtime/host/discovery.py): a sorted vocabulary of
// normalised terms, one postings string per term (the field slots `tool * FIELDS + field` that
// hold it, once per occurrence, in fixed-width base-64 digits) and every field's length. A
// search reads only its own terms' postings: its cost follows the matches, not the catalog.
const FIELDS = 3;  // name, title, description: the order of each tool's slots
// A match in a tool's name is worth far more than one in its description.
const FIELD_WEIGHT = [6, 3, 1];
// BM25 length normalisation per field: names are short and similar, descriptions vary.
const FIELD_B = [0.5, 0.5, 0.75];
// BM25 term-frequency saturation: the third "note" in a description adds little.
const K1 = 1.2;
// A query term that only begins a term ("calend" in "calendar") counts this much of a match...
const PREFIX_WEIGHT = 0.4;
// ...and only from this length on: shorter prefixes match nearly everything.
const MIN_PREFIX = 3;
const POSTING_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const POSTING_BASE = POSTING_DIGITS.length;
const DIGIT = new Uint8Array(128);
for (let d = 0; d < POSTING_BASE; d++) DIGIT[POSTING_DIGITS.charCodeAt(d)] = d;

function serverIndexOf(server) {
  return SEARCH[CATALOG.servers.indexOf(server)];
}

// The same normalisation as runtime/host/discovery.py `terms`: split at case changes and at
// anything but letters and digits, lower-case, then `stem`.
function terms(text) {
  return words(text).map(stem);
}

function words(text) {
  return String(text)
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0);
}

// stem: runtime/host/discovery.py `stem`, rule for rule (lengths there count UTF-16 units, as here).
const VOWEL = /[aeiouy]/;
const isVowel = (c) => c !== undefined && "aeiouy".includes(c);
const UNDOUBLE = "bcdfghjkmnpqrtv";
const CVC_END = "bcdfghjklmnpqrstvz";
const endsWithAny = (w, ends) => ends.some((e) => w.endsWith(e));

function stem(word) {
  const n = word.length;
  if (n < 3) return word;
  if (n > 4 && endsWithAny(word, ["ies", "ied"])) word = word.slice(0, -3) + "i";
  else if (n > 3 && endsWithAny(word, ["sses", "xes", "ches", "shes"])) word = word.slice(0, -2);
  else if (word.endsWith("s") && !endsWithAny(word, ["ss", "us", "is", "ias"])) word = word.slice(0, -1);
  if (word.endsWith("ing")) word = unsuffix(word, 3);
  else if (word.endsWith("ed") && !word.endsWith("eed")) word = unsuffix(word, 2);
  if (word.length > 2 && word.endsWith("y") && !isVowel(word[word.length - 2])) word = word.slice(0, -1) + "i";
  if (word.length > 4 && word.endsWith("e")) word = word.slice(0, -1);
  return word;
}

function unsuffix(word, size) {
  let base = word.slice(0, -size);
  if (base.length < 2 || !VOWEL.test(base)) return word;
  const last = base[base.length - 1];
  if (base.length > 3 && last === base[base.length - 2] && UNDOUBLE.includes(last)) {
    base = base.slice(0, -1);
    if (base.endsWith("ed") && !base.endsWith("eed")) return unsuffix(base, 2);
    return base;
  }
  if (shortCvc(base)) return base + "e";
  return base;
}

function shortCvc(base) {
  if (base.length === 3 && !isVowel(base[0])) base = base.slice(1);
  return base.length === 2 && isVowel(base[0]) && CVC_END.includes(base[1]);
}

// The best `limit` tools of `servers` for these query terms, best first, as [{server, tool}].
// Tools are numbered across `servers` in catalog order (server id, then tool name), which is
// also the tie-break: the same catalog and query always give the same order.
function rank(servers, queryTerms, limit) {
  const indexes = servers.map(serverIndexOf);
  const base = new Int32Array(servers.length + 1);
  const totals = [0, 0, 0];
  servers.forEach((server, i) => {
    base[i + 1] = base[i] + server.tools.length;
    for (let f = 0; f < FIELDS; f++) totals[f] += indexes[i].totals[f];
  });
  const count = base[servers.length];
  const owner = new Int32Array(count);  // tool number -> server number
  for (let i = 0; i < servers.length; i++) owner.fill(i, base[i], base[i + 1]);
  const average = totals.map((t) => (count ? t / count : 0) || 1);
  const scores = new Float64Array(count);
  const tf = new Float64Array(count * FIELDS);  // this term's weighted frequency per tool field
  const touched = new Int32Array(count);  // tools this term hit
  for (const term of queryTerms) {
    let hit = 0;
    for (let i = 0; i < servers.length; i++) {
      const { terms: vocabulary, postings, width } = indexes[i];
      const first = base[i] * FIELDS;
      // vocabulary terms equal to `term`, then (long enough) the ones it begins: one sorted run
      let lo = 0, hi = vocabulary.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (vocabulary[mid] < term) lo = mid + 1; else hi = mid;
      }
      for (let k = lo; k < vocabulary.length && vocabulary[k].startsWith(term); k++) {
        const whole = vocabulary[k].length === term.length;
        if (!whole && term.length < MIN_PREFIX) break;
        const weight = whole ? 1 : PREFIX_WEIGHT;
        const list = postings[k];
        for (let p = 0; p < list.length; p += width) {
          let slot = 0;
          for (let c = 0; c < width; c++) slot = slot * POSTING_BASE + DIGIT[list.charCodeAt(p + c)];
          const at = first + slot;
          const doc = (at / FIELDS) | 0;
          const own = doc * FIELDS;
          if (tf[own] === 0 && tf[own + 1] === 0 && tf[own + 2] === 0) touched[hit++] = doc;
          tf[at] += weight;
        }
      }
    }
    const idf = Math.log(1 + (count - hit + 0.5) / (hit + 0.5));
    for (let h = 0; h < hit; h++) {
      const doc = touched[h];
      const i = owner[doc];
      const lengths = indexes[i].lengths;
      const own = (doc - base[i]) * FIELDS;
      let weighted = 0;
      for (let f = 0; f < FIELDS; f++) {
        const n = tf[doc * FIELDS + f];
        if (n === 0) continue;
        tf[doc * FIELDS + f] = 0;
        weighted += (FIELD_WEIGHT[f] * n) / (1 - FIELD_B[f] + (FIELD_B[f] * lengths[own + f]) / average[f]);
      }
      scores[doc] += (idf * weighted * (K1 + 1)) / (K1 + weighted);
    }
  }
  // Only the best `limit` need a comparator sort: a native sort of the scores finds the cut.
  let cut = 0;
  let matched = 0;
  for (let doc = 0; doc < count; doc++) if (scores[doc] > 0) matched++;
  if (matched > limit) {
    const sorted = scores.slice().sort();
    cut = limit > 0 ? sorted[count - limit] : Infinity;
  }
  const docs = [];
  for (let doc = 0; doc < count; doc++) if (scores[doc] > 0 && scores[doc] >= cut) docs.push(doc);
  docs.sort((a, b) => scores[b] - scores[a] || a - b);
  return docs.slice(0, limit).map((doc) => {
    const i = owner[doc];
    return { server: servers[i], tool: servers[i].tools[doc - base[i]] };
  });
}

function firstTools(servers, limit) {
  const hits = [];
  for (const server of servers) {
    for (const tool of server.tools.slice(0, limit - hits.length)) hits.push({ server, tool });
  }
  return hits;
}

// Query words too common to tell tools apart; dropped unless the query is nothing else.
const STOP_WORDS = new Set([
  "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "by", "for", "from", "with", "into",
  "is", "are", "be", "it", "its", "this", "that", "these", "those", "as", "me", "my", "i", "you",
  "your", "some", "which", "what", "how",
]);

function queryTermsOf(query) {
  const all = words(query);
  const kept = all.filter((w) => !STOP_WORDS.has(w));
  return [...new Set((kept.length ? kept : all).map(stem))];
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
  const servers = only ? [only] : CATALOG.servers;
  const queryTerms = queryTermsOf(query);
  // An empty query lists tools in catalog order (server id, then tool name), as does a tie.
  const hits = queryTerms.length ? rank(servers, queryTerms, limit) : firstTools(servers, limit);
  const results = hits.slice(0, limit).map(({ server, tool }) => {
    const out = { serverId: server.serverId };
    return Object.assign(out, shape(tool, detail));
  });
  return { query, results };
}

// Imported only when a script imports this module: its exports freeze themselves.
for (const fn of [listServers, describeServer, listTools, getTool, searchTools]) Object.freeze(fn);
