// @ts-check
// URL and URLSearchParams for the sandbox (spec §3.5): a WHATWG-shaped subset, no IDNA and no
// IPv4 number forms. QuickJS has neither, so the prelude installs these unless the engine
// brings its own.
//
// This file is not part of prelude phase A: the worker binds its text (realm.py,
// `__codemode_url__`) and prelude.js evaluates it only when a run first reads URL or
// URLSearchParams (prelude.js, section 2d), so a realm pays for compiling it only if used.
// The whole file is one expression, a factory: evaluating it touches no global. prelude.js
// calls it with the intrinsics it captured while they were pristine, and locks the classes
// down before any code sees them.
(function codemodeURL(intrinsics) {
  "use strict";
  const { encoder, decoder, StringCtor, safeString, call, objectKeys } = intrinsics;
  const SPECIAL_PORTS = { __proto__: null, "ftp:": "21", "file:": "", "http:": "80", "https:": "443", "ws:": "80", "wss:": "443" };
  const C0_SET = "";
  const FRAGMENT_SET = " \"<>`";
  const QUERY_SET = " \"#<>";
  const SPECIAL_QUERY_SET = " \"#<>'";
  const PATH_SET = " \"#<>?`{}";
  const USERINFO_SET = PATH_SET + "/:;=@[\\]^|";
  const FORM_KEEP = /^[A-Za-z0-9*\-._]$/;
  function hex2(b) { return "%" + (b < 16 ? "0" : "") + b.toString(16).toUpperCase(); }
  function percentEncode(s, set) {
    let out = "";
    for (const ch of s) {
      const cp = ch.codePointAt(0);
      if (cp < 0x20 || cp > 0x7e || set.includes(ch)) {
        for (const b of encoder.encode(ch)) out += hex2(b);
      } else {
        out += ch;
      }
    }
    return out;
  }
  function percentDecode(s) {
    const bytes = [];
    const raw = encoder.encode(s);
    for (let i = 0; i < raw.length; i++) {
      const b = raw[i];
      if (b === 0x25 && i + 2 < raw.length && /^[0-9A-Fa-f]{2}$/.test(StringCtor.fromCharCode(raw[i + 1], raw[i + 2]))) {
        bytes.push(parseInt(StringCtor.fromCharCode(raw[i + 1], raw[i + 2]), 16));
        i += 2;
      } else {
        bytes.push(b);
      }
    }
    return decoder.decode(new Uint8Array(bytes));
  }
  function formEncode(s) {
    let out = "";
    for (const ch of StringCtor(s)) {
      if (ch === " ") out += "+";
      else if (FORM_KEEP.test(ch)) out += ch;
      else for (const b of encoder.encode(ch)) out += hex2(b);
    }
    return out;
  }
  function parseQueryString(q) {
    const list = [];
    for (const part of q.split("&")) {
      if (part === "") continue;
      const eq = part.indexOf("=");
      const name = eq < 0 ? part : part.slice(0, eq);
      const value = eq < 0 ? "" : part.slice(eq + 1);
      list.push([percentDecode(name.replace(/\+/g, " ")), percentDecode(value.replace(/\+/g, " "))]);
    }
    return list;
  }
  function normalizePath(segments, special) {
    const out = [];
    const n = segments.length;
    for (let i = 0; i < n; i++) {
      const seg = segments[i];
      const lower = seg.toLowerCase();
      const last = i === n - 1;
      if (lower === ".." || lower === ".%2e" || lower === "%2e." || lower === "%2e%2e") {
        if (out.length > 0) out.pop();
        if (last) out.push("");
      } else if (lower === "." || lower === "%2e") {
        if (last) out.push("");
      } else {
        out.push(percentEncode(seg, PATH_SET));
      }
    }
    return "/" + out.join("/");
  }
  function splitTail(s) {
    // -> [beforeQuery, query|null, fragment|null]
    let fragment = null, query = null, rest = s;
    const h = rest.indexOf("#");
    if (h >= 0) { fragment = rest.slice(h + 1); rest = rest.slice(0, h); }
    const q = rest.indexOf("?");
    if (q >= 0) { query = rest.slice(q + 1); rest = rest.slice(0, q); }
    return [rest, query, fragment];
  }
  function invalid(input) { return new TypeError(`Invalid URL: ${safeString(input)}`); }
  function parseHost(raw, special, input) {
    if (raw.startsWith("[")) {
      if (!raw.endsWith("]") || !/^\[[0-9A-Fa-f:.]+\]$/.test(raw)) throw invalid(input);
      return raw.toLowerCase();
    }
    const host = special ? percentDecode(raw).toLowerCase() : raw;
    if (/[\u0000-\u0020#%/:<>?@[\\\]^|]/.test(special ? host : "") || (!special && /[\u0000-\u0020#/<>?@[\\\]^|]/.test(host))) {
      throw invalid(input);
    }
    return special ? host : percentEncode(host, C0_SET);
  }
  function parseAuthorityAndPath(rec, rest, input) {
    const special = rec.protocol in SPECIAL_PORTS;
    const [beforeQuery, query, fragment] = splitTail(rest);
    let s = beforeQuery;
    if (special) s = s.replace(/\\/g, "/");
    const slash = s.indexOf("/");
    const authority = slash < 0 ? s : s.slice(0, slash);
    const path = slash < 0 ? "" : s.slice(slash);
    const at = authority.lastIndexOf("@");
    let hostPort = authority;
    rec.username = ""; rec.password = "";
    if (at >= 0) {
      const info = authority.slice(0, at);
      hostPort = authority.slice(at + 1);
      const colon = info.indexOf(":");
      rec.username = percentEncode(colon < 0 ? info : info.slice(0, colon), USERINFO_SET);
      rec.password = colon < 0 ? "" : percentEncode(info.slice(colon + 1), USERINFO_SET);
    }
    const m = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(hostPort);
    if (m === null) throw invalid(input);
    rec.hostname = parseHost(m[1], special, input);
    let port = m[2] === undefined ? "" : m[2];
    if (port !== "") {
      if (!/^[0-9]+$/.test(port) || Number(port) > 65535) throw invalid(input);
      port = StringCtor(Number(port));
      if (SPECIAL_PORTS[rec.protocol] === port) port = "";
    }
    rec.port = port;
    if (special && rec.protocol !== "file:" && rec.hostname === "") throw invalid(input);
    rec.pathname = special ? normalizePath(path === "" ? [""] : path.slice(1).split("/"), true)
      : (path === "" ? "" : normalizePath(path.slice(1).split("/"), false));
    rec.query = query; rec.fragment = fragment;
    rec.opaque = false;
  }
  function parseURL(input, base) {
    const text = StringCtor(input).replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "");
    /** @type {Record<string, any>} */
    const rec = { protocol: "", username: "", password: "", hostname: null, port: "", pathname: "", query: null, fragment: null, opaque: false };
    const m = /^([A-Za-z][A-Za-z0-9+.-]*):([\s\S]*)$/.exec(text);
    if (m !== null && !(base && m[1].toLowerCase() + ":" === base.protocol && m[1].toLowerCase() + ":" in SPECIAL_PORTS && !/^[/\\]/.test(m[2]))) {
      rec.protocol = m[1].toLowerCase() + ":";
      const rest = m[2];
      if (rec.protocol in SPECIAL_PORTS) {
        parseAuthorityAndPath(rec, rest.replace(/^[/\\]*/, ""), input);
      } else if (rest.startsWith("//")) {
        parseAuthorityAndPath(rec, rest.slice(2), input);
      } else if (rest.startsWith("/")) {
        const [p, q, f] = splitTail(rest);
        rec.pathname = normalizePath(p.slice(1).split("/"), false);
        rec.query = q; rec.fragment = f;
      } else {
        const [p, q, f] = splitTail(rest);
        rec.pathname = percentEncode(p, C0_SET);
        rec.query = q; rec.fragment = f;
        rec.opaque = true;
      }
    } else {
      const relative = m !== null ? m[2] : text;
      if (!base) throw invalid(input);
      const special = base.protocol in SPECIAL_PORTS;
      if (base.opaque && !relative.startsWith("#")) throw invalid(input);
      rec.protocol = base.protocol;
      const r = special ? relative.replace(/^([^?#]*)/, (p) => p.replace(/\\/g, "/")) : relative;
      if (r.startsWith("//")) {
        parseAuthorityAndPath(rec, r.slice(2), input);
      } else {
        rec.username = base.username; rec.password = base.password;
        rec.hostname = base.hostname; rec.port = base.port; rec.opaque = base.opaque;
        const [p, q, f] = splitTail(r);
        if (p === "") {
          rec.pathname = base.pathname;
          rec.query = q !== null ? q : (r.startsWith("#") || r === "" ? base.query : null);
          if (r.startsWith("?")) rec.query = q;
        } else {
          const dir = p.startsWith("/") ? "" : base.pathname.slice(0, base.pathname.lastIndexOf("/") + 1);
          const full = dir + p;
          rec.pathname = normalizePath(full.replace(/^\//, "").split("/"), special);
          rec.query = q;
        }
        rec.fragment = f;
      }
    }
    if (rec.query !== null) rec.query = percentEncode(rec.query, rec.protocol in SPECIAL_PORTS ? SPECIAL_QUERY_SET : QUERY_SET);
    if (rec.fragment !== null) rec.fragment = percentEncode(rec.fragment, FRAGMENT_SET);
    return rec;
  }
  function hrefOf(rec) {
    let s = rec.protocol;
    if (rec.hostname !== null) {
      s += "//";
      if (rec.username !== "" || rec.password !== "") {
        s += rec.username + (rec.password !== "" ? ":" + rec.password : "") + "@";
      }
      s += rec.hostname + (rec.port !== "" ? ":" + rec.port : "");
    } else if (!rec.opaque && rec.pathname.startsWith("//")) {
      s += "/.";
    }
    s += rec.pathname;
    if (rec.query !== null) s += "?" + rec.query;
    if (rec.fragment !== null) s += "#" + rec.fragment;
    return s;
  }

  const urlState = new WeakMap();
  const paramsState = new WeakMap();
  function urlRec(self) {
    const rec = urlState.get(self);
    if (rec === undefined) throw new TypeError("not a URL");
    return rec;
  }
  function paramsRec(self) {
    const rec = paramsState.get(self);
    if (rec === undefined) throw new TypeError("not a URLSearchParams");
    return rec;
  }
  function paramsChanged(prec) {
    if (prec.url === null) return;
    const rec = urlRec(prec.url);
    const q = serializeParams(prec.list);
    rec.query = q === "" ? null : q;
  }
  function serializeParams(list) {
    const parts = [];
    for (const [n, v] of list) parts.push(formEncode(n) + "=" + formEncode(v));
    return parts.join("&");
  }

  class URLSearchParams {
    /** @param {any} [init] a query string, a record, pairs or another URLSearchParams */
    constructor(init = "") {
      const list = [];
      if (init instanceof URLSearchParams) {
        for (const [n, v] of paramsRec(init).list) list.push([n, v]);
      } else if (init !== null && typeof init === "object" && typeof init[Symbol.iterator] === "function") {
        for (const pair of init) {
          const arr = [...pair];
          if (arr.length !== 2) throw new TypeError("URLSearchParams: each pair must have exactly two items");
          list.push([StringCtor(arr[0]), StringCtor(arr[1])]);
        }
      } else if (init !== null && (typeof init === "object" || typeof init === "function")) {
        for (const k of objectKeys(init)) list.push([k, StringCtor(init[k])]);
      } else {
        let s = StringCtor(init);
        if (s.startsWith("?")) s = s.slice(1);
        for (const pair of parseQueryString(s)) list.push(pair);
      }
      paramsState.set(this, { list, url: null });
    }
    get size() { return paramsRec(this).list.length; }
    append(name, value) { const r = paramsRec(this); r.list.push([StringCtor(name), StringCtor(value)]); paramsChanged(r); }
    delete(name, value) {
      const r = paramsRec(this); const n = StringCtor(name);
      r.list = r.list.filter(([k, v]) => !(k === n && (value === undefined || v === StringCtor(value))));
      paramsChanged(r);
    }
    get(name) { const n = StringCtor(name); const e = paramsRec(this).list.find(([k]) => k === n); return e === undefined ? null : e[1]; }
    getAll(name) { const n = StringCtor(name); return paramsRec(this).list.filter(([k]) => k === n).map(([, v]) => v); }
    has(name, value) {
      const n = StringCtor(name);
      return paramsRec(this).list.some(([k, v]) => k === n && (value === undefined || v === StringCtor(value)));
    }
    set(name, value) {
      const r = paramsRec(this); const n = StringCtor(name); const v = StringCtor(value);
      const i = r.list.findIndex(([k]) => k === n);
      if (i < 0) r.list.push([n, v]);
      else {
        r.list[i] = [n, v];
        r.list = r.list.filter(([k], j) => j <= i || k !== n);
      }
      paramsChanged(r);
    }
    sort() {
      const r = paramsRec(this);
      r.list = r.list.map((e, i) => [e, i]).sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])).map(([e]) => e);
      paramsChanged(r);
    }
    forEach(callback, thisArg) {
      for (const [n, v] of paramsRec(this).list.slice()) call(callback, thisArg, v, n, this);
    }
    keys() { return paramsRec(this).list.map(([n]) => n)[Symbol.iterator](); }
    values() { return paramsRec(this).list.map(([, v]) => v)[Symbol.iterator](); }
    entries() { return paramsRec(this).list.map(([n, v]) => [n, v])[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    toString() { return serializeParams(paramsRec(this).list); }
    get [Symbol.toStringTag]() { return "URLSearchParams"; }
  }

  class URL {
    constructor(url, base) {
      let baseRec;
      if (base !== undefined) baseRec = base instanceof URL ? urlRec(base) : parseURL(base, undefined);
      const rec = parseURL(url, baseRec);
      urlState.set(this, rec);
      const params = new URLSearchParams(rec.query === null ? "" : rec.query);
      paramsRec(params).url = this;
      rec.searchParams = params;
    }
    static canParse(url, base) {
      try { new URL(url, base); return true; } catch (e) { return false; }
    }
    static parse(url, base) {
      try { return new URL(url, base); } catch (e) { return null; }
    }
    get href() { return hrefOf(urlRec(this)); }
    set href(v) {
      const rec = urlRec(this); const next = parseURL(v, undefined);
      const params = rec.searchParams;
      for (const k of objectKeys(next)) rec[k] = next[k];
      rec.searchParams = params;
      paramsRec(params).list = parseQueryString(rec.query === null ? "" : rec.query);
    }
    get origin() {
      const rec = urlRec(this);
      if (!(rec.protocol in SPECIAL_PORTS) || rec.protocol === "file:") return "null";
      return rec.protocol + "//" + rec.hostname + (rec.port !== "" ? ":" + rec.port : "");
    }
    get protocol() { return urlRec(this).protocol; }
    get username() { return urlRec(this).username; }
    set username(v) { const r = urlRec(this); if (r.hostname) r.username = percentEncode(StringCtor(v), USERINFO_SET); }
    get password() { return urlRec(this).password; }
    set password(v) { const r = urlRec(this); if (r.hostname) r.password = percentEncode(StringCtor(v), USERINFO_SET); }
    get host() { const r = urlRec(this); return r.hostname === null ? "" : r.hostname + (r.port !== "" ? ":" + r.port : ""); }
    get hostname() { const r = urlRec(this); return r.hostname === null ? "" : r.hostname; }
    set hostname(v) {
      const r = urlRec(this);
      if (r.opaque) return;
      r.hostname = parseHost(StringCtor(v), r.protocol in SPECIAL_PORTS, v);
    }
    get port() { return urlRec(this).port; }
    set port(v) {
      const r = urlRec(this); const s = StringCtor(v);
      if (r.hostname === null || r.protocol === "file:") return;
      if (s === "") { r.port = ""; return; }
      const m = /^[0-9]+/.exec(s);
      if (m === null || Number(m[0]) > 65535) return;
      const p = StringCtor(Number(m[0]));
      r.port = SPECIAL_PORTS[r.protocol] === p ? "" : p;
    }
    get pathname() { return urlRec(this).pathname; }
    set pathname(v) {
      const r = urlRec(this);
      if (r.opaque) return;
      const s = StringCtor(v);
      r.pathname = normalizePath(s.replace(/^\//, "").split("/"), r.protocol in SPECIAL_PORTS);
    }
    get search() { const q = urlRec(this).query; return q === null || q === "" ? "" : "?" + q; }
    set search(v) {
      const r = urlRec(this); let s = StringCtor(v);
      if (s.startsWith("?")) s = s.slice(1);
      r.query = s === "" ? null : percentEncode(s, r.protocol in SPECIAL_PORTS ? SPECIAL_QUERY_SET : QUERY_SET);
      paramsRec(r.searchParams).list = parseQueryString(s);
    }
    get searchParams() { return urlRec(this).searchParams; }
    get hash() { const f = urlRec(this).fragment; return f === null || f === "" ? "" : "#" + f; }
    set hash(v) {
      const r = urlRec(this); let s = StringCtor(v);
      if (s.startsWith("#")) s = s.slice(1);
      r.fragment = s === "" ? null : percentEncode(s, FRAGMENT_SET);
    }
    toString() { return this.href; }
    toJSON() { return this.href; }
    get [Symbol.toStringTag]() { return "URL"; }
  }

  return { URL, URLSearchParams };
});
