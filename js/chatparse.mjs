// chatparse.mjs - a dependency-free JavaScript (Node >= 20, ES2022) runtime for chatparse table files.
//
// Reads the table format of FORMAT.md (one `.cpt` file: header, canonical template JSON, metadata JSON, flat
// little-endian integer arrays, SHA-256 trailer), validates it, streams text through the character tables
// exactly as chatparse/runtime/stream/scanner.py does, and reproduces chatparse's events and final message: region
// logic as chatparse/runtime/stream/parser.py, value parsers as values.py, transforms as transform.py, tool-argument
// coercion as coerce.py.
//
// Regexes: the table file's port section holds every regex the runtime needs already translated by the
// compiler to JavaScript RegExp source (flags "su": Unicode, dotAll; named groups; every character class
// spelled out as the exact code-point set Python's `regex` uses), or marked untranslatable. Delimiters that
// need a regex but could not be translated make `loadTables` refuse the file; content regexes
// (xml-inline tag_pattern) fail when used.
//
// Text positions are UTF-16 code units internally; everything that counts characters (history/horizon
// windows, literal lengths) counts code points, as Python does.
//
//   import { loadTables, ResponseParser, parseResponse } from "./chatparse.mjs";
//   const tables = loadTables(fs.readFileSync("response_template.cpt"));
//   const parser = new ResponseParser(tables, prompt);            // prefix is required ("" to opt out)
//   for (const chunk of stream) for (const ev of parser.feed(chunk)) render(ev);
//   const [message, finalEvents] = parser.finalize();
//
// The serving dialect of vLLM 0.33.0 (chatparse/runtime/stream/dialect.py): `new ResponseParser(tables, prompt,
// { dialect: "vllm" })` - spans (code points) and captures on events, region_malformed events that do not end
// the parse, prompt text kept out of chunks, `parser.inputText`; `offsets` and `malformed` options as in Python.
//
// Token ids (a file with a token section, FORMAT.md section 8; chatparse/runtime/tokens/): `new TokenParser(tables,
// prompt, { prefixIds })`, `parser.feedTokens(id or ids)`, `parser.finalize()`, and `parseTokens(ids, tables, {
// prefix })`: the ids decoded as the tokenizer decodes them (`TokenDecoder`), with the events of the character
// engine on that text (see "token ids" near the end of this file).
//
// Errors are `PyError`s whose `pyType` is the Python exception class chatparse raises for the same input
// ("ValueError", "KeyError", "TypeError", "AttributeError", "RuntimeError", ...).

export const FORMAT_VERSION = 1;
const MAGIC = [0x89, 0x43, 0x50, 0x54, 0x0d, 0x0a, 0x1a, 0x0a];
const HEADER_SIZE = 160;
const TRAILER_SIZE = 32;
const N_CODEPOINTS = 0x110000;
const STREAMABLE = new Set(["text", "int", "float", "bool"]);
// Python `regex`'s \w when a table file carries no exact class (written with js=False).
const WORD_FALLBACK = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
const PARSER_NAMES = ["text", "int", "float", "bool", "json", "xml-inline", "kv-lines"];
// Format extensions this runtime implements (chatparse/runtime/values/extensions.py, FORMAT.md "Extensions"): name ->
// the field keys and content parser name that opt into it, and a check of each key's normalized value. A table
// listing any other name is refused: "table uses format extension 'NAME', which this reader does not support".
export const JS_EXTENSIONS = {
  python_calls: { keys: {}, content: "python-calls" },
  argument_types: { keys: { argument_types: (v) => v === "schema" } },
  key_aliases: { keys: { key_aliases: (v) => isDict(v) && Object.keys(v).length > 0 && Object.entries(v).every(([a, c]) => typeof c === "string" && a !== c && !hasOwn(v, c)) } },
  as_list: { keys: { as_list: (v) => v === true } },
  decode_json_strings: { keys: { decode_json_strings: (v) => Array.isArray(v) && v.length > 0 && v.every((p) => typeof p === "string" && p.split(".").every((k) => k.length)) && new Set(v).size === v.length } },
  close_json_end: { keys: { close_json_end: (v) => v === true } },
  on_error: { keys: { on_error: (v) => v === "content" || v === "drop" } },
  content_fallback: { keys: { content_fallback: (v) => Array.isArray(v) && v.length > 0 && v.every((e) => isDict(e) && Object.keys(e).length === 2 && PARSER_NAMES.includes(e.content) && hasOwn(e, "content_args")) } },
  unwrap_pattern: { keys: { unwrap_pattern: (v) => typeof v === "string" && v.length > 0 } },
  optional_placeholders: { keys: { optional_placeholders: (v) => Array.isArray(v) && v.length > 0 && v.every((n) => typeof n === "string") && new Set(v).size === v.length } },
  json_values: { keys: {}, content: "json-values" },
  flatten: { keys: { flatten: (v) => v === true } },
  escaped_json_values: { keys: { escaped_json_values: (v) => v === true } },
};
const EXTENSION_KEYS = () => Object.fromEntries(Object.entries(JS_EXTENSIONS).flatMap(([n, x]) => Object.keys(x.keys).map((k) => [k, n])));
const EXTENSION_PARSERS = () => Object.values(JS_EXTENSIONS).map((x) => x.content).filter((c) => c);

// ------------------------------------------------------------------------------------------------ errors

export class PyError extends Error {
  constructor(pyType, message) {
    super(message);
    this.name = pyType;
    this.pyType = pyType;
  }
}
const E = (type, msg) => new PyError(type, msg);
const isValueError = (e) => e instanceof PyError && (e.pyType === "ValueError" || e.pyType === "JSONDecodeError");

// ------------------------------------------------------------------------------------------------ small helpers

const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);
const isDict = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
function setKey(o, k, v) {
  if (k === "__proto__") Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  else o[k] = v;
}
function pyGet(d, k, dflt) {
  if (!isDict(d)) throw E("AttributeError", `'${pyTypeName(d)}' object has no attribute 'get'`);
  return hasOwn(d, k) ? d[k] : dflt;
}
function truthy(v) {
  if (v === null || v === undefined || v === false) return false;
  if (typeof v === "number") return v !== 0;
  if (typeof v === "string" || Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v).length > 0;
  return true;
}
function pyTypeName(v) {
  if (v === null || v === undefined) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  if (typeof v === "string") return "str";
  if (Array.isArray(v)) return "list";
  return "dict";
}
function deepCopy(v) {
  if (Array.isArray(v)) return v.map(deepCopy);
  if (isDict(v)) {
    const o = {};
    for (const k of Object.keys(v)) setKey(o, k, deepCopy(v[k]));
    return o;
  }
  return v;
}
const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;
export function cpLen(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    if (isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) i++;
    n++;
  }
  return n;
}
function nextCp(s, i) {
  return isHigh(s.charCodeAt(i)) && i + 1 < s.length && isLow(s.charCodeAt(i + 1)) ? i + 2 : i + 1;
}
function cmpStr(a, b) {
  // Python string order: by code point (JS `<` compares UTF-16 units).
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; ) {
    const x = a.codePointAt(i), y = b.codePointAt(i);
    if (x !== y) return x < y ? -1 : 1;
    i += x > 0xffff ? 2 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}
const SYNTAX = new Set("^$\\.*+?()[]{}|/");
function jsEscape(s) {
  let out = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (SYNTAX.has(ch)) out += "\\" + ch;
    else if (cp > 0x20 && cp < 0x7f) out += ch;
    else out += `\\u{${cp.toString(16)}}`;
  }
  return out;
}
function classSource(ranges) {
  if (!ranges.length) return "(?!)";
  let s = "[";
  for (const [lo, hi] of ranges) s += lo === hi ? `\\u{${lo.toString(16)}}` : `\\u{${lo.toString(16)}}-\\u{${hi.toString(16)}}`;
  return s + "]";
}

// ------------------------------------------------------------------------------------------------ SHA-256

let nodeCreateHash = null;
try {
  ({ createHash: nodeCreateHash } = await import("node:crypto"));
} catch {
  nodeCreateHash = null;
}
const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);

/** SHA-256 of a Uint8Array (node:crypto when present, else a portable implementation). */
export function sha256(data) {
  if (nodeCreateHash) return new Uint8Array(nodeCreateHash("sha256").update(data).digest());
  const H = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const len = data.length;
  const padded = new Uint8Array(((len + 9 + 63) >> 6) << 6);
  padded.set(data);
  padded[len] = 0x80;
  const dv = new DataView(padded.buffer);
  dv.setUint32(padded.length - 8, Math.floor(len / 0x20000000));
  dv.setUint32(padded.length - 4, (len << 3) >>> 0);
  const W = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) W[i] = dv.getUint32(off + 4 * i);
    for (let i = 16; i < 64; i++) {
      const a = W[i - 15], b = W[i - 2];
      W[i] = (W[i - 16] + (rotr(a, 7) ^ rotr(a, 18) ^ (a >>> 3)) + W[i - 7] + (rotr(b, 17) ^ rotr(b, 19) ^ (b >>> 10))) | 0;
    }
    let [a, b, c, d, e, f, g, h] = H;
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + W[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d; H[4] += e; H[5] += f; H[6] += g; H[7] += h;
  }
  const out = new Uint8Array(32);
  const odv = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) odv.setUint32(4 * i, H[i]);
  return out;
}
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const bytesEqual = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

// ------------------------------------------------------------------------------------------------ table file

const DTYPES = { u1: [Uint8Array, 1, "getUint8"], i1: [Int8Array, 1, "getInt8"], u2: [Uint16Array, 2, "getUint16"],
  i2: [Int16Array, 2, "getInt16"], u4: [Uint32Array, 4, "getUint32"], i4: [Int32Array, 4, "getInt32"] };
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const utf8 = new TextDecoder("utf-8", { fatal: true });
const utf8KeepBom = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }); // (a BOM is text to Python: refused)

/**
 * Validate and decode a table file (Uint8Array / Buffer / ArrayBuffer). Throws PyError("ValueError") with a
 * message naming the defect for anything malformed. The checks, their order and their messages are those of
 * FORMAT.md section 1, "What a reader must check", exactly as chatparse/runtime/tables/loader.py makes them, so that
 * both runtimes refuse the same files with the same message (tests/test_table_fuzz.py checks this on resealed
 * mutants). The one check this runtime cannot make is that the template's patterns compile in Python's
 * `regex` (step 9); every other check comes first.
 */
export function loadTables(input) {
  let bytes = input instanceof Uint8Array ? input : new Uint8Array(input);
  const fail = (msg) => { throw E("ValueError", `chatparse table file: ${msg}`); };
  const n = bytes.length;
  if (n < HEADER_SIZE + TRAILER_SIZE) fail(`${n} bytes is too short to be a table file (truncated?)`);
  if (bytes.byteOffset % 8) bytes = new Uint8Array(bytes); // a copy, 8-aligned (Buffer#slice would not copy)
  if (!MAGIC.every((b, i) => bytes[i] === b)) fail("not a chatparse table file (bad magic number)");
  const dv = new DataView(bytes.buffer, bytes.byteOffset, n);
  const u32 = (o) => dv.getUint32(o, true);
  const u64 = (o) => dv.getBigUint64(o, true);
  const version = u32(8);
  if (version !== FORMAT_VERSION) fail(`format version ${version} is not supported (this chatparse reads version ${FORMAT_VERSION})`);
  if (u32(12) !== HEADER_SIZE) fail(`header size ${u32(12)}, expected ${HEADER_SIZE}`);
  if (u64(16) !== BigInt(n)) fail(`header says ${u64(16)} bytes but the file has ${n} (truncated or padded)`);
  if (!bytesEqual(sha256(bytes.subarray(0, n - TRAILER_SIZE)), bytes.subarray(n - TRAILER_SIZE))) fail("checksum mismatch: the file is corrupted");
  const flags = u32(72);
  // bit 0: vocabulary hash; bit 1: token section (token tables for parsing token ids: checked like the Python
  // reader checks them; TokenParser and parseTokens read them).
  if (flags & ~3) fail(`unknown header flags 0x${(flags >>> 0).toString(16)}`);
  if ((flags & 2) && !(flags & 1)) fail("token section without its vocabulary hash");
  if (u32(76) !== 0) fail("reserved header field is not zero");
  const [tOff, tLen, mOff, mLen, dOff, dLen] = [24, 32, 40, 48, 56, 64].map(u64);
  const align8 = (x) => (x + 7n) & ~7n;
  if (tOff !== BigInt(HEADER_SIZE) || mOff !== tOff + tLen || dOff !== align8(mOff + mLen) || dLen % 8n || dOff + dLen !== BigInt(n - TRAILER_SIZE)) {
    fail("section offsets/lengths are inconsistent");
  }
  const [t0, t1, m0, m1, d0, d1] = [tOff, tOff + tLen, mOff, mOff + mLen, dOff, dOff + dLen].map(Number);
  if (bytes.subarray(m1, d0).some((x) => x !== 0)) fail("non-zero padding before the data section");
  const vocab = bytes.subarray(112, 144);
  if (!(flags & 1) && vocab.some((x) => x !== 0)) fail("vocabulary hash present but its flag is clear");
  const vraw = bytes.subarray(144, 160);
  let vend = vraw.indexOf(0);
  if (vend < 0) vend = 16;
  if (vend === 0 || vraw.subarray(0, vend).some((x) => x < 0x21 || x > 0x7e) || vraw.subarray(vend).some((x) => x !== 0)) {
    fail("chatparse version field is not NUL-padded printable ASCII");
  }
  const chatparseVersion = String.fromCharCode(...vraw.subarray(0, vend));
  // the template section: compact JSON hashing to the header's template hash, a normalized template
  const templateBytes = bytes.subarray(t0, t1);
  const [templateText, spec] = sectionJson(templateBytes, "template", fail);
  if (pyDumps(spec, false) !== templateText) {
    fail("template section is not in the format's compact JSON form");
  }
  if (!bytesEqual(sha256(new TextEncoder().encode(pyDumps(spec, true))), bytes.subarray(80, 112))) fail("template hash does not match the template section");
  templateRules(spec, wordOf(bytes.subarray(m0, m1)), fail);
  const [, meta] = sectionJson(bytes.subarray(m0, m1), "metadata", fail);
  const header = { formatVersion: version, chatparseVersion, templateSha256: hex(bytes.subarray(80, 112)), vocabSha256: flags & 1 ? hex(vocab) : null, tokens: Boolean(flags & 2) };
  const arrays = checkMetadata(meta, spec, header, bytes.subarray(d0, d1), fail);
  fieldRules(spec, fail); // step 9: what load_template checks beyond the template rules (but the regex compilations)
  // checked: from here on the plain values (JavaScript objects and numbers) the runtime works with
  return new Tables(pyJsonLoads(templateText), plainJson(meta), arrays, header, fail);
}

// ---- the JSON sections (FORMAT.md section 1, step 5): parsed as Python's json module parses them

/** A float of a JSON section as Python's json module reads it (`1.0` is not the integer 1). */
class PyFloat {
  constructor(v) {
    this.v = v;
  }
}
const KEYS = Symbol("keys"); // a section's objects (null prototype): their distinct keys in first-seen order

function markedObject() {
  const o = Object.create(null);
  o[KEYS] = [];
  return o;
}
function markedSet(o, k, v) {
  if (!Object.hasOwn(o, k)) o[KEYS].push(k);
  o[k] = v;
}
const isObj = (v) => v !== null && typeof v === "object" && Array.isArray(v[KEYS]);
const isPyInt = (v) => (typeof v === "number" && Number.isInteger(v)) || typeof v === "bigint";
/** Python's `type(v) is int and lo <= v <= hi`. */
const isIntIn = (v, lo, hi) => (typeof v === "number" && Number.isInteger(v) && v >= lo && v <= hi) || (typeof v === "bigint" && v >= BigInt(lo) && v <= BigInt(hi));

function plainJson(v) {
  if (v instanceof PyFloat) return v.v;
  if (typeof v === "bigint") return Number(v);
  if (Array.isArray(v)) return v.map(plainJson);
  if (isObj(v)) {
    const o = {};
    for (const k of v[KEYS]) setKey(o, k, plainJson(v[k]));
    return o;
  }
  return v;
}

const pyJsonStr = (s) => '"' + s.replace(/[\x00-\x1f\\"]/g, (c) => ({ '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" })[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) + '"';

/** Python's json.dumps(v, separators=(",", ":"), ensure_ascii=False[, sort_keys=True]) of a parsed section value. */
function pyDumps(v, sortKeys) {
  if (v === null) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (v instanceof PyFloat) return pyFloatRepr(v.v);
  if (typeof v === "string") return pyJsonStr(v);
  if (Array.isArray(v)) return `[${v.map((x) => pyDumps(x, sortKeys)).join(",")}]`;
  const keys = sortKeys ? [...v[KEYS]].sort(cmpStr) : v[KEYS];
  return `{${keys.map((k) => `${pyJsonStr(k)}:${pyDumps(v[k], sortKeys)}`).join(",")}}`;
}

/** A string of the file as messages show it: Python's json.dumps(s) (ASCII, escapes), as table_rules.quote. */
function quote(s) {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"' || ch === "\\") out += "\\" + ch;
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else out += { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" }[ch] ?? `\\u${c.toString(16).padStart(4, "0")}`;
  }
  return out + '"';
}
const quoteList = (items) => `[${items.map(quote).join(", ")}]`;

/** The first ill-formed UTF-8 sequence of `b` as Python's strict decoder reports it: [offset of its first byte
 * (UnicodeDecodeError.start), reason ("invalid start byte", "invalid continuation byte" or, when the bytes run out
 * before a well-begun sequence ends, "unexpected end of data")], or null when `b` is well-formed. */
function utf8Error(b, from = 0, to = b.length) {
  let i = from;
  while (i < to) {
    const c = b[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    let need, lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c === 0xe0) [need, lo] = [2, 0xa0];
    else if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) need = 2;
    else if (c === 0xed) [need, hi] = [2, 0x9f];
    else if (c === 0xf0) [need, lo] = [3, 0x90];
    else if (c >= 0xf1 && c <= 0xf3) need = 3;
    else if (c === 0xf4) [need, hi] = [3, 0x8f];
    else return [i - from, "invalid start byte"];
    for (let k = 1; k <= need; k++) {
      if (i + k >= to) return [i - from, "unexpected end of data"];
      const x = b[i + k];
      if (k === 1 ? x < lo || x > hi : x < 0x80 || x > 0xbf) return [i - from, "invalid continuation byte"];
    }
    i += need + 1;
  }
  return null;
}
/** The offset of the first byte that starts an ill-formed UTF-8 sequence (Python's UnicodeDecodeError.start), or -1. */
function utf8ErrorAt(b) {
  const e = utf8Error(b);
  return e === null ? -1 : e[0];
}

const MAX_DEPTH = 100;
/** JSON nesting bounded before parsing (table_rules.check_depth): brackets counted outside strings. */
function checkDepth(text, what, fail) {
  let depth = 0, inStr = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      if (c === "\\") i++;
      else if (c === '"') inStr = false;
    } else if (c === '"') inStr = true;
    else if (c === "[" || c === "{") {
      if (++depth > MAX_DEPTH) fail(`${what} section nests deeper than ${MAX_DEPTH} levels`);
    } else if (c === "]" || c === "}") depth--;
  }
}

/** [text, value] of a JSON section: strict UTF-8, bounded nesting, Python's JSON syntax, no lone surrogate. */
function sectionJson(b, what, fail) {
  const bad = utf8ErrorAt(b);
  if (bad >= 0) fail(`${what} section is not UTF-8 (invalid byte at offset ${bad})`);
  const text = utf8KeepBom.decode(b);
  checkDepth(text, what, fail);
  let value;
  try {
    value = pyJsonLoads(text, true);
  } catch (e) {
    if (e instanceof PyError && e.pyType === "JSONDecodeError") fail(`${what} section is not valid JSON (${e.message})`);
    if (e instanceof PyError && e.pyType === "ValueError") fail(`${what} section is not valid JSON (an integer has more than 4300 digits)`);
    throw e;
  }
  if (hasLoneSurrogate(value)) fail(LONE_SURROGATE(what));
  return [text, value];
}

// ---- the template rules (FORMAT.md section 1, step 6; chatparse/runtime/tables/rules.py template_rules)

const PY_TYPE = (v) => (v === null ? "none" : typeof v === "boolean" ? "bool" : isPyInt(v) ? "int" : v instanceof PyFloat ? "float" : typeof v === "string" ? "str" : Array.isArray(v) ? "list" : "dict");
const NORMALIZED_KEYS = ["version", "defaults", "start_anchor", "implicit", "fields"];
const FIELD_KEYS = ["name", "open", "close", "content", "content_args", "repeats", "join", "optional", "transform", "transform_each"];
const sameKeys = (o, keys) => isObj(o) && o[KEYS].length === keys.length && keys.every((k) => Object.hasOwn(o, k));

function checkDelimiter(d, where, fail, allowNone) {
  if (d === null && allowNone) return;
  if (!isObj(d) || d[KEYS].length !== 1 || !(Array.isArray(d.literals) || typeof d.pattern === "string")) {
    fail(`${where}: expected ${allowNone ? "null, " : ""}{"literals": [...]} or {"pattern": str}`);
  }
  const lits = d.literals;
  if (lits !== undefined) {
    if (!lits.length || lits.some((s) => typeof s !== "string" || !s)) fail(`${where}.literals: expected non-empty strings`);
    if (new Set(lits).size !== lits.length) fail(`${where}.literals: a literal is repeated`);
  }
}

/** The js.word class of the metadata section's bytes when it has a well-formed one (for the placeholder rule of the
 * template, checked before the metadata section), else null. */
function wordOf(metaBytes) {
  let w = null;
  try {
    const meta = JSON.parse(utf8.decode(metaBytes));
    w = isDict(meta) && isDict(meta.js) ? meta.js.word : null;
  } catch {
    return null;
  }
  if (typeof w !== "string") return null;
  try {
    checkWord(w, (m) => { throw new Error(m); });
    return w;
  } catch {
    return null;
  }
}

function templateRules(spec, word, fail) {
  const w = word || WORD_FALLBACK;
  const placeholder = new RegExp(`\\{(${w}+(?:\\.${w}+)*)\\}`, "u");
  const wholePlaceholder = new RegExp(`^\\{(${w}+(?:\\.${w}+)*)\\}$`, "u");
  const mixed = (v) => {
    if (Array.isArray(v)) return v.some(mixed);
    if (isObj(v)) return v[KEYS].some((k) => mixed(v[k]));
    return typeof v === "string" && placeholder.test(v) && !wholePlaceholder.test(v);
  };
  const extended = isObj(spec) && Object.hasOwn(spec, "extensions");
  if (extended) {
    const names = spec.extensions;
    if (!Array.isArray(names) || !names.length || PY_TYPE(spec.version) !== "int" || spec.version !== 2) fail("template: 'extensions' must be a non-empty list, with 'version': 2");
    for (const nm of names) {
      if (typeof nm !== "string") fail("template: 'extensions' must hold extension names (strings)");
      if (!hasOwn(JS_EXTENSIONS, nm)) fail(`table uses format extension ${/^[ -&(-~]*$/.test(nm) ? `'${nm}'` : quote(nm)}, which this reader does not support`);
    }
    if (names.some((nm, i) => i && cmpStr(names[i - 1], nm) >= 0)) fail("template: not in normalized form: 'extensions' must be sorted and distinct");
  }
  const keys = extended ? ["extensions", ...NORMALIZED_KEYS] : NORMALIZED_KEYS;
  if (!sameKeys(spec, keys)) fail(`template: expected an object with keys ${quoteList(keys)}`);
  if (!extended && (PY_TYPE(spec.version) !== "int" || spec.version !== 1)) fail("template: version must be 1 (2 with 'extensions')");
  if (!isObj(spec.defaults)) fail("template.defaults: expected an object");
  const fields = spec.fields;
  if (!Array.isArray(fields) || !fields.length) fail("template: fields must be a non-empty list");
  const extKeys = EXTENSION_KEYS();
  const extParsers = Object.fromEntries(Object.entries(JS_EXTENSIONS).filter(([, x]) => x.content).map(([nm, x]) => [x.content, nm]));
  const seen = new Set();
  const used = new Set();
  fields.forEach((f, i) => {
    const where = `template.fields[${i}]`;
    if (!isObj(f) || !FIELD_KEYS.every((k) => Object.hasOwn(f, k)) || !f[KEYS].every((k) => FIELD_KEYS.includes(k) || hasOwn(extKeys, k))) {
      fail(`${where}: expected an object with keys ${quoteList(FIELD_KEYS)} (and format extension keys)`);
    }
    if (typeof f.name !== "string") fail(`${where}.name: expected a string`);
    if (seen.has(f.name)) fail(`template: duplicate field name ${quote(f.name)}`);
    seen.add(f.name);
    if (typeof f.content !== "string" || (!PARSER_NAMES.includes(f.content) && !hasOwn(extParsers, f.content))) fail(`${where}.content: unknown content parser`);
    if (hasOwn(extParsers, f.content)) {
      used.add(extParsers[f.content]);
      if (!isObj(f.content_args) || f.content_args[KEYS].length) fail(`${where}.content_args: the ${quote(f.content)} parser takes none`);
    }
    checkDelimiter(f.open, `${where}.open`, fail, true);
    checkDelimiter(f.close, `${where}.close`, fail, true);
    for (const k of ["repeats", "optional", "transform_each"]) if (typeof f[k] !== "boolean") fail(`${where}.${k}: expected true/false`);
    if (f.join !== null && typeof f.join !== "string") fail(`${where}.join: expected null or a string`);
    if (f.join !== null && !f.repeats) fail(`${where}.join: needs 'repeats': true`);
    if (f.transform_each && f.transform === null) fail(`${where}.transform_each: needs a 'transform'`);
    if (mixed(f.transform)) fail(`${where}.transform: a string mixes a {placeholder} with other text`);
    const extra = f[KEYS].filter((k) => hasOwn(extKeys, k));
    if (extra.length) {
      const err = checkFieldKeys(`Field ${pyRepr(f.name)}`, f, extra);
      if (err !== null) fail(`template: ${err}`);
      for (const k of extra) used.add(extKeys[k]);
    }
  });
  const implicit = fields.filter((f) => f.open === null).map((f) => f.name);
  if (implicit.length > 1 || spec.implicit !== (implicit.length ? implicit[0] : null)) fail("template: 'implicit' does not name the one field without an open delimiter");
  checkDelimiter(spec.start_anchor, "template.start_anchor", fail, false);
  if ([...used].sort(cmpStr).join("\u0000") !== (extended ? spec.extensions : []).join("\u0000")) {
    fail("template: not in normalized form: 'extensions' does not list exactly the extensions the fields use");
  }
}

// ---- format extension keys (chatparse/runtime/values/extensions.py `check_field_keys`, registry order), with
// Python's messages: each check returns [normalized value] (OMIT: the default, []) or throws its message.

const OMIT = Symbol("omit");
/** Python's type(v).__name__ of a value of a JSON section (PyFloat: float). */
function sectionTypeName(v) {
  if (v === null) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number" || typeof v === "bigint") return "int";
  if (v instanceof PyFloat) return "float";
  if (typeof v === "string") return "str";
  return Array.isArray(v) ? "list" : "dict";
}
/** Python's repr() of a value of a JSON section. */
function pyValueRepr(v) {
  if (v instanceof PyFloat) return pyFloatRepr(v.v).replace(/^NaN$/, "nan").replace(/^(-?)Infinity$/, "$1inf");
  if (typeof v === "bigint") return String(v);
  if (Array.isArray(v)) return `[${v.map(pyValueRepr).join(", ")}]`;
  if (isObj(v)) return `{${v[KEYS].map((k) => `${pyRepr(k)}: ${pyValueRepr(v[k])}`).join(", ")}}`;
  return pyRepr(v);
}
const cut = (s, n) => Array.from(s).slice(0, n).join("");
const isPyStr = (v) => typeof v === "string";
const isPyBool = (v) => typeof v === "boolean";
const EXT_KEY_CHECKS = [
  ["argument_types", "argument_types", (v, f) => {
    if (v === "json") return OMIT;
    if (v !== "schema") f(`must be "schema" or "json" (the default), got ${cut(pyValueRepr(v), 60)}`);
    return v;
  }],
  ["key_aliases", "key_aliases", (v, f) => {
    if (!isObj(v)) f(`must be a dict of alias -> canonical key, got ${sectionTypeName(v)}`);
    if (!v[KEYS].length) return OMIT;
    for (const a of v[KEYS]) {
      const c = v[a];
      if (!isPyStr(c)) f(`maps ${cut(pyRepr(a), 40)} to a ${sectionTypeName(c)}; the canonical key must be a string`);
      if (a === c) f(`maps ${cut(pyRepr(a), 40)} to itself`);
      if (Object.hasOwn(v, c)) f(`maps ${cut(pyRepr(a), 40)} to ${cut(pyRepr(c), 40)}, which is itself an alias (no chains)`);
    }
    return v;
  }],
  ["as_list", "as_list", (v, f) => {
    if (!isPyBool(v)) f(`must be a bool, got ${sectionTypeName(v)}`);
    return v ? v : OMIT;
  }],
  ["decode_json_strings", "decode_json_strings", (v, f) => {
    if (!Array.isArray(v) || !v.every(isPyStr)) f("must be a list of dotted key paths (strings)");
    if (!v.length) return OMIT;
    for (const p of v) if (!p || p.split(".").some((x) => !x)) f(`holds ${cut(pyRepr(p), 60)}, which is not a dotted key path (non-empty keys joined by '.')`);
    if (new Set(v).size !== v.length) f("lists a path twice");
    return v;
  }],
  ["close_json_end", "close_json_end", (v, f) => {
    if (!isPyBool(v)) f(`must be a bool, got ${sectionTypeName(v)}`);
    return v ? v : OMIT;
  }],
  ["on_error", "on_error", (v, f) => {
    if (v === "raise") return OMIT;
    if (v !== "content" && v !== "drop") f(`must be "content", "drop" or "raise" (the default), got ${cut(pyValueRepr(v), 60)}`);
    return v;
  }],
  ["optional_placeholders", "optional_placeholders", (v, f) => {
    if (!Array.isArray(v) || !v.every(isPyStr)) f("must be a list of named groups of the field's open_pattern (strings)");
    if (!v.length) return OMIT;
    if (new Set(v).size !== v.length) f("lists a name twice");
    return v;
  }],
  ["content_fallback", "content_fallback", (v, f) => {
    if (!Array.isArray(v)) f(`must be a list of {"content": parser, "content_args": ..}, got ${sectionTypeName(v)}`);
    if (!v.length) return OMIT;
    v.forEach((e, i) => {
      if (!isObj(e) || !Object.hasOwn(e, "content") || e[KEYS].some((k) => k !== "content" && k !== "content_args")) f(`entry ${i} must be a dict with 'content' and optional 'content_args' only`);
      if (!isPyStr(e.content)) f(`entry ${i}: 'content' must be a content parser name`);
    });
    return v.map((e) => {
      const o = markedObject();
      markedSet(o, "content", e.content);
      markedSet(o, "content_args", Object.hasOwn(e, "content_args") ? e.content_args : markedObject());
      return o;
    });
  }],
  ["unwrap_pattern", "unwrap_pattern", (v, f) => {
    if (!isPyStr(v) || !v) f(`must be a non-empty regex string, got ${cut(pyValueRepr(v), 60)}`);
    return v;
  }],
  ["flatten", "flatten", (v, f) => {
    if (!isPyBool(v)) f(`must be a bool, got ${sectionTypeName(v)}`);
    return v ? v : OMIT;
  }],
  ["escaped_json_values", "escaped_json_values", (v, f) => {
    if (!isPyBool(v)) f(`must be a bool, got ${sectionTypeName(v)}`);
    return v ? v : OMIT;
  }],
];

/** check_field_keys over the extension keys `keys` of field `f`: null, or the first check's message. */
function checkFieldKeys(scope, f, keys) {
  for (const [name, key, check] of EXT_KEY_CHECKS) {
    if (!keys.includes(key)) continue;
    try {
      check(f[key], (what) => { throw new PyError("ValueError", `${scope}: ${pyRepr(key)} ${what} (format extension '${name}')`); });
    } catch (e) {
      if (e instanceof PyError) return e.message;
      throw e;
    }
  }
  return null;
}

/** The extension keys of field `f` normalized (check_field_keys' result; every value checked at step 6). */
function normalizedFieldKeys(f) {
  const out = {};
  for (const [, key, check] of EXT_KEY_CHECKS) {
    if (!Object.hasOwn(f, key)) continue;
    const v = check(f[key], () => { throw new Error("unreachable: checked at step 6"); });
    if (v !== OMIT) out[key] = v;
  }
  return out;
}

/** Whether a Python `regex` source declares the named group `g` ((?P<g>... or (?<g>..., outside classes and escapes):
 * its groupindex holds it (native/src/tables.c `py_declares_group`). */
function declaresGroup(src, g) {
  for (let i = 0; i < src.length;) {
    const c = src[i];
    if (c === "\\") i += 2;
    else if (c === "[") i = pyClassEnd(src, i);
    else {
      const at = src.startsWith("(?P<", i) ? i + 4 : src.startsWith("(?<", i) && src[i + 3] !== "=" && src[i + 3] !== "!" ? i + 3 : 0;
      if (at) {
        const e = src.indexOf(">", at);
        if (e >= 0 && src.slice(at, e) === g) return true;
      }
      i++;
    }
  }
  return false;
}

/** Step 9 as far as a port can make it: load_template's whole-field rules of the extensions (runtime/tables/validate.py
 * `_field`, then `load_template`), in its order and with its messages, then its normalized form of the extension keys.
 * Only what needs Python's `regex` is left out (an unwrap_pattern that does not compile). */
function fieldRules(spec, fail) {
  const fields = spec.fields;
  const extended = [];
  for (const f of fields) {
    const scope = `Field '${f.name}'`;
    const x = normalizedFieldKeys(f);
    extended.push(x);
    if (x.close_json_end && f.open === null) fail(`template: ${scope}: 'close_json_end' needs an explicit 'open' or 'open_pattern': the implicit field has no region body of its own to read a JSON value from (format extension 'close_json_end')`);
    for (const g of x.optional_placeholders || []) {
      if (f.transform === null || !isObj(f.open) || !isPyStr(f.open.pattern) || !declaresGroup(f.open.pattern, g)) {
        fail(`template: ${scope}: 'optional_placeholders' names ${cut(pyRepr(g), 40)}, which is not a named group of the field's 'open_pattern' (and the field needs a 'transform') (format extension 'optional_placeholders')`);
      }
    }
    (x.content_fallback || []).forEach((e, i) => {
      if (!PARSER_NAMES.includes(e.content)) fail(`template: ${scope}: 'content_fallback' entry ${i} names content parser ${cut(pyRepr(e.content), 40)}; available: ${pyStrList([...PARSER_NAMES].sort(cmpStr))} (format extension 'content_fallback')`);
    });
    if (x.flatten && (!f.repeats || f.join !== null)) fail(`template: ${scope}: 'flatten' needs 'repeats': true and no 'join': it adds a list value's elements to the field's list (format extension 'flatten')`);
    if (x.escaped_json_values) {
      const args = f.content_args;
      const parser = isObj(args) && Object.hasOwn(args, "value_parser") ? args.value_parser : null;
      if ((f.content !== "xml-inline" && f.content !== "kv-lines") || !isObj(parser) || (Object.hasOwn(parser, "name") ? parser.name : "text") !== "json") {
        fail(`template: ${scope}: 'escaped_json_values' needs 'content' xml-inline or kv-lines with a 'value_parser' named 'json' in 'content_args' (format extension 'escaped_json_values')`);
      }
    }
    if (x.on_error === "content" && f.open === null) fail(`template: ${scope}: 'on_error': 'content' cannot be set on the implicit field: its text would be recovered into itself (use 'drop') (format extension 'on_error')`);
  }
  const hasImplicit = fields.some((f) => f.open === null);
  fields.forEach((f, i) => {
    if (extended[i].on_error === "content" && !hasImplicit) fail(`template: Field '${f.name}': 'on_error': 'content' needs an implicit field (one without 'open'/'open_pattern') to keep the text in (format extension 'on_error')`);
  });
  fields.forEach((f, i) => {
    const keys = f[KEYS].filter((k) => EXT_KEY_CHECKS.some(([, key]) => key === k));
    const x = extended[i];
    if (keys.length !== Object.keys(x).length || keys.some((k) => !Object.hasOwn(x, k) || pyDumps(x[k], true) !== pyDumps(f[k], true))) {
      fail("template: not in normalized form (load_template would normalize it differently)");
    }
  });
}

/** Whether a Python `regex` source declares a named group: (?P<name>...) or (?<name>...), outside classes and escapes. */
function pyHasNamedGroups(src) {
  for (let i = 0; i < src.length;) {
    const c = src[i];
    if (c === "\\") i += 2;
    else if (c === "[") i = pyClassEnd(src, i);
    else if (src.startsWith("(?P<", i) || (src.startsWith("(?<", i) && src[i + 3] !== "=" && src[i + 3] !== "!")) return true;
    else i++;
  }
  return false;
}

// ---- the metadata section (FORMAT.md section 1, steps 7-8; sections 3-5): every key, array, index and flag

function checkKeys(obj, required, optional, where, fail) {
  const missing = required.filter((k) => !Object.hasOwn(obj, k)).sort(cmpStr);
  if (missing.length) fail(`${where}: missing keys ${quoteList(missing)}`);
  const extra = obj[KEYS].filter((k) => !required.includes(k) && !optional.includes(k)).sort(cmpStr);
  if (extra.length) fail(`${where}: unexpected keys ${quoteList(extra)}`);
}
const MAX_INT = 2 ** 31 - 1;
function intIn(v, where, fail, lo = 0, hi = MAX_INT) {
  if (!isIntIn(v, lo, hi)) fail(`${where}: expected an integer in ${lo}..${hi}`);
  return Number(v);
}
function boolOf(v, where, fail) {
  if (typeof v !== "boolean") fail(`${where}: expected true/false`);
  return v;
}
function strOf(v, where, fail) {
  if (typeof v !== "string") fail(`${where}: expected a string`);
  return v;
}
function listOf(v, where, fail) {
  if (!Array.isArray(v)) fail(`${where}: expected a list`);
  return v;
}

function readArrays(entries, data, fail) {
  listOf(entries, "arrays", fail);
  const out = new Map();
  const spans = [];
  const dLen = data.length;
  entries.forEach((e, i) => {
    const where = `arrays[${i}]`;
    if (!isObj(e)) fail(`${where}: expected an object`);
    checkKeys(e, ["name", "dtype", "shape", "offset", "nbytes"], [], where, fail);
    const name = strOf(e.name, `${where}.name`, fail);
    if (out.has(name)) fail(`${where}: duplicate array ${quote(name)}`);
    if (typeof e.dtype !== "string" || !hasOwn(DTYPES, e.dtype)) fail(`${where} (${quote(name)}): dtype is not one of ${quoteList(Object.keys(DTYPES).sort())}`);
    const [Ctor, size, getter] = DTYPES[e.dtype];
    const shape = listOf(e.shape, `${where}.shape`, fail);
    if (shape.length < 1 || shape.length > 2) fail(`${where} (${quote(name)}): arrays have 1 or 2 dimensions`);
    let count = 1;
    for (const s of shape) count *= intIn(s, `${where}.shape`, fail, 0, dLen);
    const offset = intIn(e.offset, `${where}.offset`, fail, 0, dLen);
    const nbytes = intIn(e.nbytes, `${where}.nbytes`, fail, 0, dLen);
    if (nbytes !== count * size) fail(`${where} (${quote(name)}): nbytes ${nbytes} does not match its shape and dtype`);
    if (offset % 8 || offset + nbytes > dLen) fail(`${where} (${quote(name)}): offset ${offset} (+${nbytes}) is unaligned or outside the data section`);
    spans.push([offset, offset + nbytes, name]);
    let arr;
    if (LITTLE_ENDIAN || size === 1) {
      arr = new Ctor(data.buffer, data.byteOffset + offset, count);
    } else {
      arr = new Ctor(count);
      const dv = new DataView(data.buffer, data.byteOffset + offset, nbytes);
      for (let j = 0; j < count; j++) arr[j] = dv[getter](j * size, true);
    }
    out.set(name, { dtype: e.dtype, shape: shape.map(Number), arr });
  });
  const live = spans.filter((s) => s[1] > s[0]).sort((a, b) => a[0] - b[0] || a[1] - b[1] || cmpStr(a[2], b[2]));
  for (let i = 1; i < live.length; i++) if (live[i][0] < live[i - 1][1]) fail(`arrays ${quote(live[i - 1][2])} and ${quote(live[i][2])} overlap`);
  return out;
}

function getArray(arrays, name, dtypes, ndim, fail) {
  const a = arrays.get(name);
  if (!a) fail(`missing array ${quote(name)}`);
  if (!dtypes.includes(a.dtype)) fail(`array ${quote(name)}: dtype ${a.dtype} not allowed here (expected ${dtypes.join("/")})`);
  if (a.shape.length !== ndim) fail(`array ${quote(name)}: expected ${ndim} dimension(s)`);
  return a;
}

function checkPatterns(raw, spec, fail) {
  const exp = expectedPatterns(spec);
  listOf(raw, "patterns", fail);
  if (raw.length !== exp.length) fail(`patterns: ${raw.length} entries but the template defines ${exp.length} delimiters`);
  raw.forEach((p, i) => {
    const where = `patterns[${i}]`;
    const e = exp[i];
    if (!isObj(p)) fail(`${where}: expected an object`);
    checkKeys(p, ["kind", "field", "key", "source", "exact", "reasons", "named_groups", "history", "horizon"], [], where, fail);
    if (p.kind !== e.kind || p.field !== e.field || p.key !== e.key || p.source !== e.source) fail(`${where}: does not match the template's ${e.key} of field ${quote(spec.fields[e.field].name)}`);
    const exact = boolOf(p.exact, `${where}.exact`, fail);
    const reasons = listOf(p.reasons, `${where}.reasons`, fail);
    if (reasons.some((r) => typeof r !== "string")) fail(`${where}.reasons: expected strings`);
    const named = boolOf(p.named_groups, `${where}.named_groups`, fail);
    if (named !== pyHasNamedGroups(e.source)) fail(`${where}: named_groups does not match the pattern`);
    if (named && spec.fields[e.field].transform === null) fail(`${where}: the pattern has named groups but field ${e.field} has no transform`);
    if ((e.key === "open" || e.key === "close") && !exact) fail(`${where}: a literal delimiter must be exact`);
    intIn(p.history, `${where}.history`, fail, 1);
    intIn(p.horizon, `${where}.horizon`, fail, -1);
  });
}

function checkClassMap(arrays, nClasses, fail) {
  const starts = getArray(arrays, "class_starts", ["u4"], 1, fail).arr;
  const ids = getArray(arrays, "class_ids", ["u1", "u2"], 1, fail).arr;
  if (starts.length !== ids.length || !starts.length || starts[0] !== 0) fail("class map must start at code point 0 with one class id per interval");
  for (let i = 1; i < starts.length; i++) if (starts[i] <= starts[i - 1]) fail("class map intervals must be strictly increasing");
  if (starts[starts.length - 1] >= N_CODEPOINTS) fail("class map interval beyond U+10FFFF");
  const seen = new Uint8Array(nClasses);
  let used = 0;
  for (const c of ids) {
    if (c >= nClasses) fail("class id out of range");
  }
  for (const c of ids) if (!seen[c]) (seen[c] = 1), used++;
  if (used !== nClasses) fail("class map does not use every class");
  return [starts, ids];
}

/** A mode's prefilter from its automaton (table_rules.prefilter_pairs): [] / null / [[first, second|null], ...]. */
function prefilterPairs(trans, acc, term, W, C, start, starts, ids) {
  if (start === 0) return [];
  const accepts = (s) => acc.subarray(s * W, (s + 1) * W).some((x) => x >= 0);
  if (accepts(start)) return null;
  const rows = new Map();
  const groups = new Map();
  for (let c1 = 0; c1 < C; c1++) {
    const t1 = trans[start * C + c1];
    if (t1 === 0) continue;
    if (!rows.has(t1)) {
      if (accepts(t1) || term[t1]) rows.set(t1, null);
      else {
        const cs = [];
        for (let c2 = 0; c2 < C; c2++) if (trans[t1 * C + c2] !== 0) cs.push(c2);
        rows.set(t1, cs);
      }
    }
    const second = rows.get(t1);
    const key = second === null ? "null" : second.join(",");
    if (!groups.has(key)) groups.set(key, [second, []]);
    groups.get(key)[1].push(c1);
  }
  const ranges = (classes) => {
    const member = new Uint8Array(C);
    for (const c of classes) member[c] = 1;
    const out = [];
    for (let i = 0; i < starts.length; i++) {
      if (!member[ids[i]]) continue;
      const lo = starts[i], hi = (i + 1 < starts.length ? starts[i + 1] : N_CODEPOINTS) - 1;
      if (out.length && lo <= out[out.length - 1][1] + 1) out[out.length - 1][1] = hi;
      else out.push([lo, hi]);
    }
    return out;
  };
  return [...groups.values()].map(([second, firsts]) => [ranges(firsts), second === null ? null : ranges(second)]);
}

function checkModes(raw, spec, arrays, nClasses, classMap, fail) {
  const exp = expectedPatterns(spec);
  const implicit = spec.implicit;
  const watch = [exp.map((p, i) => (p.kind === "open" || spec.fields[p.field].name === implicit ? i : -1)).filter((i) => i >= 0)];
  spec.fields.forEach((f, fi) => watch.push(exp.map((p, i) => (p.field === fi && p.kind === "close" && f.name !== implicit ? i : -1)).filter((i) => i >= 0)));
  listOf(raw, "modes", fail);
  if (raw.length !== watch.length) fail(`modes: ${raw.length} entries, expected ${watch.length} (one per field plus the outside mode)`);
  raw.forEach((m, mi) => {
    const where = `modes[${mi}]`;
    const w = watch[mi];
    if (!isObj(m)) fail(`${where}: expected an object`);
    checkKeys(m, ["patterns", "start0", "startN", "first"], [], where, fail);
    if (!Array.isArray(m.patterns) || m.patterns.length !== w.length || m.patterns.some((p, i) => p !== w[i])) fail(`${where}: watched patterns are not the template's [${w.join(", ")}]`);
    const st = ["u1", "u2", "u4"];
    const trans = getArray(arrays, `mode${mi}.trans`, st, 2, fail);
    const S = trans.shape[0];
    if (S < 1 || trans.shape[1] !== nClasses) fail(`${where}: transition table has shape (${trans.shape[0]}, ${trans.shape[1]}), expected (states >= 1, ${nClasses})`);
    const eot = getArray(arrays, `mode${mi}.eot`, st, 1, fail);
    const acc = getArray(arrays, `mode${mi}.acc`, ["i1"], 2, fail);
    const term = getArray(arrays, `mode${mi}.term`, ["u1"], 1, fail);
    const W = w.length;
    if (eot.shape[0] !== S || term.shape[0] !== S || acc.shape[0] !== S || acc.shape[1] !== W) fail(`${where}: per-state arrays do not match ${S} states and ${W} patterns`);
    for (const x of trans.arr) if (x >= S) fail(`${where}: transition to a state outside 0..${S - 1}`);
    for (const x of eot.arr) if (x >= S) fail(`${where}: end-of-text transition to a state outside 0..${S - 1}`);
    for (const x of acc.arr) if (x < -1 || x > 1) fail(`${where}: accept codes must be -1, 0 or 1`);
    for (const x of term.arr) if (x > 1) fail(`${where}: terminal flags must be 0 or 1`);
    let dead = eot.arr[0] === 0 && term.arr[0] === 1;
    for (let c = 0; c < nClasses; c++) if (trans.arr[c] !== 0) dead = false;
    for (let p = 0; p < W; p++) if (acc.arr[p] !== -1) dead = false;
    if (!dead) fail(`${where}: state 0 must be the dead state`);
    for (let s = 1; s < S; s++) {
      if (term.arr[s] && !acc.arr.subarray(s * W, (s + 1) * W).some((x) => x >= 0)) {
        fail(`${where}: terminal state ${s} accepts no pattern (only the dead state 0 may be terminal without accepting)`);
      }
    }
    intIn(m.start0, `${where}.start0`, fail, 0, S - 1);
    const startN = intIn(m.startN, `${where}.startN`, fail, 0, S - 1);
    const first = prefilterPairs(trans.arr, acc.arr, term.arr, W, nClasses, startN, ...classMap);
    if (JSON.stringify(first) !== pyDumps(m.first, false)) fail(`${where}.first: not the prefilter the mode's automaton gives (FORMAT.md section 4)`);
  });
  return watch;
}

function checkTranslation(t, where, fail, pattern = null) {
  if (!isObj(t)) fail(`${where}: expected an object`);
  if (pattern !== null && t.pattern !== pattern) fail(`${where}: translation is not for this pattern`);
  const extra = pattern !== null ? ["pattern"] : [];
  if (Object.hasOwn(t, "error")) {
    checkKeys(t, ["error"], extra, where, fail);
    strOf(t.error, where, fail);
    return;
  }
  checkKeys(t, ["source", "groups"], ["caveats", ...extra], where, fail);
  strOf(t.source, where, fail);
  if (!isObj(t.groups) || t.groups[KEYS].some((k) => typeof t.groups[k] !== "string")) fail(`${where}.groups: expected an object of strings`);
  if (Object.hasOwn(t, "caveats") && listOf(t.caveats, where, fail).some((c) => typeof c !== "string")) fail(`${where}.caveats: expected strings`);
}

function checkJsSection(js, spec, fail) {
  if (!isObj(js)) fail("js: expected an object");
  checkKeys(js, ["patterns", "anchor", "content", "word"], [], "js", fail);
  const exp = expectedPatterns(spec);
  const pats = listOf(js.patterns, "js.patterns", fail);
  if (pats.length !== exp.length) fail("js.patterns: one translation per pattern expected");
  pats.forEach((t, i) => checkTranslation(t, `js.patterns[${i}]`, fail, exp[i].source));
  checkTranslation(js.anchor, "js.anchor", fail, delimiterSource(spec.start_anchor));
  if (!isObj(js.content)) fail("js.content: expected an object");
  for (const k of js.content[KEYS]) checkTranslation(js.content[k], "js.content", fail);
  if (js.word !== null) checkWord(strOf(js.word, "js.word", fail), fail);
}

/** The metadata section against the template and the data section; returns the arrays (name -> {dtype, shape, arr}). */
function checkMetadata(meta, spec, header, data, fail) {
  if (!isObj(meta)) fail("metadata is not a JSON object");
  checkKeys(meta, ["chatparse_version", "n_classes", "patterns", "modes", "arrays"], ["js", "tokens"], "metadata", fail);
  if (Object.hasOwn(meta, "tokens") !== header.tokens) fail("the token-section flag and the metadata's 'tokens' entry disagree");
  if (meta.chatparse_version !== header.chatparseVersion) fail("metadata chatparse_version differs from the header's");
  const nClasses = intIn(meta.n_classes, "n_classes", fail, 1, 65535);
  const arrays = readArrays(meta.arrays, data, fail);
  checkPatterns(meta.patterns, spec, fail);
  const classMap = checkClassMap(arrays, nClasses, fail);
  const watch = checkModes(meta.modes, spec, arrays, nClasses, classMap, fail);
  const known = new Set(["class_starts", "class_ids"]);
  watch.forEach((_, mi) => ["trans", "eot", "acc", "term"].forEach((k) => known.add(`mode${mi}.${k}`)));
  if (header.tokens) TOKEN_ARRAYS.forEach((k) => known.add(`tokens.${k}`));
  const extra = [...arrays.keys()].filter((k) => !known.has(k)).sort(cmpStr);
  if (extra.length) fail(`unknown arrays ${quoteList(extra)}`);
  if (Object.hasOwn(meta, "js")) checkJsSection(meta.js, spec, fail);
  if (header.tokens) checkTokenSection(meta.tokens, arrays, watch, header.vocabSha256, fail);
  return arrays;
}

// ---- the token section (FORMAT.md section 8.4): what chatparse/runtime/tables/loader.py `_token_section` checks, in its
// order and with its messages. This runtime parses text, not token ids, so it uses nothing of the section; it
// checks it so that both runtimes accept and refuse the same files.

const TOKEN_META_KEYS = ["size", "kind", "strip_char", "strip_start", "cleanup", "name", "tokenizer_sha256"];
const TOKEN_ARRAY_TYPES = [["offsets", "u4", 1], ["bytes", "u1", 1], ["flags", "u1", 1], ["first_ids", "u4", 1],
  ["first_offsets", "u4", 1], ["first_bytes", "u1", 1], ["inert", "u1", 2], ["delims", "u4", 2]];
const VOCAB_ARRAYS = ["offsets", "bytes", "flags", "first_ids", "first_offsets", "first_bytes"]; // (8.3, in order)
const T_SKIP = 1, T_TEXT = 2, T_BYTE = 4;
const MAX_DELIM_CHARS = 256;
const pyShape = (shape) => (shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`);
/** The little-endian bytes of a checked array (a view on little-endian machines). */
function leBytes(a) {
  const { arr } = a;
  const size = arr.BYTES_PER_ELEMENT;
  if (LITTLE_ENDIAN || size === 1) return new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
  const out = new Uint8Array(arr.byteLength);
  const dv = new DataView(out.buffer);
  for (let j = 0; j < arr.length; j++) dv[size === 2 ? "setUint16" : "setUint32"](j * size, arr[j], true);
  return out;
}

/** FORMAT.md 8.4, steps 1-8, on the metadata's `tokens` entry and the `tokens.*` arrays: every key and type, every
 * offset monotonic and bounded, every flag consistent, every token text strict UTF-8 starting at a character
 * boundary, every index of `first_ids` and `delims` in range, and the vocabulary hash recomputed. */
function checkTokenSection(tm, arrays, watch, vocabHex, fail) {
  const bad = (msg) => fail(`token section: ${msg}`);
  if (!isObj(tm)) fail("tokens: expected an object");
  checkKeys(tm, TOKEN_META_KEYS, [], "tokens", fail);
  const size = intIn(tm.size, "tokens.size", fail, 1);
  const kind = tm.kind;
  if (kind !== "bytes" && kind !== "pieces") fail("tokens.kind: expected 'bytes' or 'pieces'");
  if (typeof tm.strip_char !== "string" || cpLen(tm.strip_char) !== 1) fail("tokens.strip_char: expected one character");
  const tsha = tm.tokenizer_sha256;
  if (tsha !== null && (typeof tsha !== "string" || !/^[0-9a-f]{64}$/.test(tsha))) fail("tokens.tokenizer_sha256: expected null or 64 lowercase hex digits");
  const stripStart = intIn(tm.strip_start, "tokens.strip_start", fail);
  const cleanup = boolOf(tm.cleanup, "tokens.cleanup", fail);
  strOf(tm.name, "tokens.name", fail);
  const a = {};
  for (const [k, dt, nd] of TOKEN_ARRAY_TYPES) a[k] = getArray(arrays, `tokens.${k}`, [dt], nd, fail);

  const checkOffsets = (arr, n, total, what) => {
    if (arr.shape[0] !== n + 1) bad(`${what} has shape ${pyShape(arr.shape)}, expected (${n + 1},)`);
    const o = arr.arr;
    let ok = o[0] === 0 && o[n] === total;
    for (let i = 1; ok && i <= n; i++) if (o[i] < o[i - 1]) ok = false;
    if (!ok) bad(`${what} must rise from 0 to ${total} without decreasing`);
    return o;
  };
  const blob = a.bytes.arr;
  const off = checkOffsets(a.offsets, size, blob.length, "offsets");
  const flags = a.flags.arr;
  if (a.flags.shape[0] !== size) bad(`flags has shape ${pyShape(a.flags.shape)}, expected (${size},)`);
  // each check is over all tokens, and the first failing check is the error (as numpy's whole-array checks)
  const found = [false, false, false, false, false];
  for (let i = 0; i < size; i++) {
    const f = flags[i];
    if (f & ~(T_SKIP | T_TEXT | T_BYTE)) found[0] = true;
    if ((f & T_SKIP) && (f & T_TEXT)) found[1] = true;
    if ((f & T_BYTE) && ((f & T_TEXT) || off[i + 1] - off[i] !== 1)) found[2] = true;
    if (f & T_BYTE) found[3] = true;
    if (!(f & T_SKIP) && !(f & T_TEXT) === !(f & T_BYTE)) found[4] = true;
  }
  if (found[0]) bad("unknown token flags");
  if (found[1]) bad("a skipped token cannot have text");
  if (found[2]) bad("a byte token holds exactly one byte and has no text of its own");
  if (kind === "bytes" && found[3]) bad("byte tokens only exist in the 'pieces' kind");
  if (kind === "pieces" && found[4]) bad("every piece that is not skipped is either text or a byte token");

  const firstIds = a.first_ids.arr;
  const nFirst = firstIds.length;
  const firstBytes = a.first_bytes.arr;
  const foff = checkOffsets(a.first_offsets, nFirst, firstBytes.length, "first_offsets");
  if (nFirst) {
    if (kind !== "pieces") bad("first-token texts only exist in the 'pieces' kind");
    let ok = firstIds[nFirst - 1] < size;
    for (let k = 1; ok && k < nFirst; k++) if (firstIds[k] <= firstIds[k - 1]) ok = false;
    if (!ok) bad("first_ids must be increasing token ids");
    for (const i of firstIds) if (flags[i] & T_SKIP) bad("a skipped token has a first-token text");
  }

  const nModes = watch.length;
  const usable = (i) => (flags[i] & T_TEXT) !== 0 && off[i + 1] > off[i];
  const inert = a.inert.arr;
  if (a.inert.shape[0] !== nModes || a.inert.shape[1] !== size) bad(`inert has shape ${pyShape(a.inert.shape)}, expected (${nModes}, ${size})`);
  for (const x of inert) if (x > 1) bad("inert flags must be 0 or 1");
  for (let k = 0; k < inert.length; k++) if (inert[k] && !usable(k % size)) bad("only tokens with non-empty text of their own can be inert");

  // strict UTF-8 of the TEXT tokens' bytes concatenated, each token starting at a character boundary; then the
  // first-token texts likewise (runtime/tables/loader.py token_texts)
  let textLen = 0;
  for (let i = 0; i < size; i++) if (flags[i] & T_TEXT) textLen += off[i + 1] - off[i];
  const text = new Uint8Array(textLen);
  for (let i = 0, p = 0; i < size; i++) {
    if (!(flags[i] & T_TEXT)) continue;
    text.set(blob.subarray(off[i], off[i + 1]), p);
    p += off[i + 1] - off[i];
  }
  const segments = (buf, starts, what) => {
    const e = utf8Error(buf);
    if (e !== null) bad(`${what} is not valid UTF-8 (${e[1]} at byte ${e[0]})`);
    for (const s of starts) if ((buf[s] & 0xc0) === 0x80) bad(`${what}: a token's bytes do not start at a character boundary`);
  };
  const textStarts = [];
  for (let i = 0, p = 0; i < size; i++) {
    if (!(flags[i] & T_TEXT)) continue;
    if (off[i + 1] > off[i]) textStarts.push(p);
    p += off[i + 1] - off[i];
  }
  segments(text, textStarts, "token text");
  const firstStarts = [];
  for (let k = 0; k < nFirst; k++) if (foff[k + 1] > foff[k]) firstStarts.push(foff[k]);
  segments(firstBytes, firstStarts, "first-token text");

  const d = a.delims;
  if (d.shape[1] !== 3) bad(`delims has shape ${pyShape(d.shape)}, expected (n, 3)`);
  const rows = d.shape[0], dl = d.arr;
  if (rows) {
    for (let r = 0; r < rows; r++) if (dl[3 * r] >= nModes || dl[3 * r + 1] >= size) bad("a whole-delimiter entry names a mode or token out of range");
    for (let r = 1; r < rows; r++) {
      const [m0, i0, m1, i1] = [dl[3 * r - 3], dl[3 * r - 2], dl[3 * r], dl[3 * r + 1]];
      if (m1 < m0 || (m1 === m0 && i1 <= i0)) bad("whole-delimiter entries must be sorted by (mode, token) without repeats");
    }
    let worst = null; // the first (mode, pattern) pair, in sorted order, whose pattern the mode does not watch
    for (let r = 0; r < rows; r++) {
      const mm = dl[3 * r], pp = dl[3 * r + 2];
      if (!watch[mm].includes(pp) && (worst === null || mm < worst[0] || (mm === worst[0] && pp < worst[1]))) worst = [mm, pp];
    }
    if (worst !== null) bad(`pattern ${worst[1]} is not watched in mode ${worst[0]}`);
    for (let r = 0; r < rows; r++) {
      const i = dl[3 * r + 1];
      let chars = 0;
      for (let j = off[i]; j < off[i + 1]; j++) if ((blob[j] & 0xc0) !== 0x80) chars++;
      if (!usable(i) || chars > MAX_DELIM_CHARS) bad(`a whole-delimiter token must have text of 1..${MAX_DELIM_CHARS} characters`);
    }
    for (let r = 0; r < rows; r++) if (inert[dl[3 * r] * size + dl[3 * r + 1]]) bad("a whole-delimiter token cannot be inert in its mode");
  }

  // the vocabulary hash (8.3)
  const scalars = `{"cleanup":${cleanup},"kind":${pyJsonStr(kind)},"size":${size},"strip_char":${pyJsonStr(tm.strip_char)},"strip_start":${stripStart}}`;
  const parts = [new TextEncoder().encode("chatparse vocabulary v1\n" + scalars + "\n")];
  for (const k of VOCAB_ARRAYS) {
    const b = leBytes(a[k]);
    const len = new Uint8Array(8);
    new DataView(len.buffer).setBigUint64(0, BigInt(b.length), true);
    parts.push(len, b);
  }
  const all = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  parts.reduce((p, x) => (all.set(x, p), p + x.length), 0);
  if (hex(sha256(all)) !== vocabHex) fail("vocabulary hash does not match the token section");
}

/** The canonical form the template hash is taken over: Python's json.dumps(sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False) of the value `text` holds. Number lexemes are kept as written (the template section is
 * written by the same json.dumps, so they are Python's float/int spellings). */
export function canonicalJson(text) {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const tok = (re) => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (m === null) throw new SyntaxError(`unexpected input at ${i}`);
    i += m[0].length;
    return m[0];
  };
  const STR = /"(?:[^"\\]|\\.)*"/y;
  const NUM = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|-?Infinity|NaN|true|false|null/y;
  const pyStr = (s) => '"' + s.replace(/[\x00-\x1f\\"]/g, (c) => ({ '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" })[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) + '"';
  const value = () => {
    ws();
    const c = text[i];
    if (c === '"') return pyStr(JSON.parse(tok(STR)));
    if (c === "[") {
      i++;
      const items = [];
      ws();
      if (text[i] === "]") { i++; return "[]"; }
      for (;;) {
        items.push(value());
        ws();
        if (text[i++] === "]") return `[${items.join(",")}]`;
        if (text[i - 1] !== ",") throw new SyntaxError(`expected , at ${i - 1}`);
      }
    }
    if (c === "{") {
      i++;
      const entries = [];
      ws();
      if (text[i] === "}") { i++; return "{}"; }
      for (;;) {
        ws();
        const k = JSON.parse(tok(STR));
        ws();
        if (text[i++] !== ":") throw new SyntaxError(`expected : at ${i - 1}`);
        entries.push([k, value()]);
        ws();
        if (text[i++] === "}") break;
        if (text[i - 1] !== ",") throw new SyntaxError(`expected , at ${i - 1}`);
      }
      entries.sort((a, b) => cmpStr(a[0], b[0]));
      return `{${entries.map(([k, v]) => `${pyStr(k)}:${v}`).join(",")}}`;
    }
    return tok(NUM);
  };
  const out = value();
  ws();
  if (i !== text.length) throw new SyntaxError("extra data");
  return out;
}

// Strict UTF-8 holds no surrogates: only a \uD800-\uDFFF escape without its pair puts one in a string (FORMAT.md
// section 1, check 5). Iterative: the value may nest deeply.
const LONE_SURROGATE = (what) => `${what} section: a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)`;
const SURROGATE = /[\uD800-\uDFFF]/u; // (u-mode: a pair is one code point and does not match)
function hasLoneSurrogate(value) {
  const stack = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (SURROGATE.test(v)) return true;
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (SURROGATE.test(k)) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

/** `js.word` must be a JavaScript character class in the form FORMAT.md section 7 gives: "[", an optional "^",
 * atoms and ranges `a-b` (a <= b), "]"; an atom is a code point other than \ ] [ - ^ and surrogates, "\" before
 * one of those five, or \u{1-6 hex digits} up to 10FFFF. (runtime/tables/loader.py `_check_word` checks the same.) */
const CLASS_ESCAPES = "\\][-^";
function checkWord(word, fail) {
  const cps = Array.from(word);
  const n = cps.length;
  const atom = (i, end) => {
    if (i >= end) return [-1, i];
    const c = cps[i];
    if (c === "\\") {
      if (i + 1 < end && CLASS_ESCAPES.includes(cps[i + 1])) return [cps[i + 1].codePointAt(0), i + 2];
      let j = i + 1;
      if (j + 1 >= end || cps[j] !== "u" || cps[j + 1] !== "{") return [-1, i];
      j += 2;
      let h = "";
      while (j < end && h.length <= 6 && /^[0-9A-Fa-f]$/.test(cps[j])) h += cps[j++];
      if (j >= end || cps[j] !== "}" || h.length < 1 || h.length > 6 || parseInt(h, 16) > 0x10ffff) return [-1, i];
      return [parseInt(h, 16), j + 1];
    }
    const cp = c.codePointAt(0);
    if (CLASS_ESCAPES.includes(c) || (cp >= 0xd800 && cp <= 0xdfff)) return [-1, i];
    return [cp, i + 1];
  };
  let ok = n >= 2 && cps[0] === "[" && cps[n - 1] === "]";
  let i = 1;
  if (ok && cps[i] === "^" && n > 2) i++;
  let prev = -1;
  while (ok && i < n - 1) {
    let cp;
    if (cps[i] === "-" && prev >= 0) {
      [cp, i] = atom(i + 1, n - 1);
      ok = cp >= prev;
      prev = -1;
    } else {
      [cp, i] = atom(i, n - 1);
      ok = cp >= 0;
      prev = cp;
    }
  }
  if (!ok) fail(`js.word: ${pyRepr(word).slice(0, 60)} is not a character class of the form FORMAT.md section 7 describes`);
}

/** A translation of the port section (checked by `checkTranslation`), or an error stub when the file has none. */
function translation(t, what) {
  if (t === undefined || t === null) return { error: `the table file has no JavaScript translation of ${what} (written with js=False)` };
  return t;
}

function compileTranslation(t, flags, what) {
  if (t.error !== undefined) throw E("ValueError", `${what} cannot run in JavaScript: ${t.error}`);
  try {
    return new RegExp(t.source, flags);
  } catch (e) {
    throw E("ValueError", `${what}: translated regex does not compile in this JavaScript engine (${e.message})`);
  }
}

class Pattern {
  constructor(raw, t, where, fail) {
    this.kind = raw.kind;
    this.field = raw.field;
    this.exact = raw.exact;
    this.namedGroups = raw.named_groups;
    this.history = raw.history;
    this.horizon = raw.horizon;
    this.source = raw.source;
    this.groups = t && !t.error ? t.groups : {};
    this.jsSource = t && !t.error ? t.source : null; // (its leading lookbehind becomes a start guard)
    this.rx = this.rxFull = null;
    if (!this.exact || this.namedGroups) {
      const what = `${where} (${raw.key} of field ${raw.field}: ${JSON.stringify(raw.source)})`;
      try {
        this.rx = compileTranslation(t, "suy", what);
        this.rxFull = compileTranslation({ source: `(?:${t.source})$` }, "suy", what);
      } catch (e) {
        fail(e.message);
      }
    }
  }
}

/** One parser mode, built from its validated arrays (`checkModes` has checked every index and flag). */
class Mode {
  constructor(raw, mi, arrays, nClasses, expectWatch) {
    this.patterns = expectWatch;
    const trans = arrays.get(`mode${mi}.trans`), eot = arrays.get(`mode${mi}.eot`);
    const acc = arrays.get(`mode${mi}.acc`), term = arrays.get(`mode${mi}.term`);
    const nStates = trans.shape[0];
    const W = expectWatch.length;
    this.trans = trans.arr;
    this.eot = eot.arr;
    this.term = term.arr;
    this.nClasses = nClasses;
    this.start0 = raw.start0;
    this.startN = raw.startN;
    // acc[s]: null (no match ends in s) or [[local pattern, characters back], ...]
    this.acc = new Array(nStates);
    for (let s = 0; s < nStates; s++) {
      let hit = null;
      for (let p = 0; p < W; p++) {
        const code = acc.arr[s * W + p];
        if (code >= 0) (hit ||= []).push([p, code]);
      }
      this.acc[s] = hit;
    }
    // The prefilter: where an attempt can start at offset > 0 (null: anywhere); the automaton's own (checkModes).
    if (raw.first === null) {
      this.firstRe = null;
    } else {
      const alts = raw.first.map((pair) => (pair[1] === null ? classSource(pair[0]) : `${classSource(pair[0])}(?:${classSource(pair[1])}|$)`));
      this.firstRe = new RegExp(alts.length ? alts.join("|") : "(?!)", "gu");
    }
    this.guards = null; // per class: lookbehinds one of which an attempt's start must satisfy (startGuards)
    this.leadStarts = null; // per class: the start state by the lookbehinds that fail there (leadStarts)
    this.leadStarts0 = null; // the same for an attempt at offset 0 (from start0)
  }
}

// Python regex.escape (special_only=True): metacharacters and Python whitespace get a backslash.
const REGEX_META = new Set("()[]{}?*+|^$\\.-#&~");
function pyRegexEscape(s) {
  let out = "";
  for (const ch of s) out += REGEX_META.has(ch) || PY_SPACE.has(ch.codePointAt(0)) ? "\\" + ch : ch;
  return out;
}

/** The Python `regex` source of a delimiter: the pattern, or the literals longest first (code points). */
function delimiterSource(d) {
  if (hasOwn(d, "pattern")) return d.pattern;
  return d.literals.map((s, i) => [s, i]).sort((a, b) => cpLen(b[0]) - cpLen(a[0]) || a[1] - b[1]).map((x) => pyRegexEscape(x[0])).join("|");
}

function expectedPatterns(spec) {
  const out = [];
  spec.fields.forEach((f, fi) => {
    for (const kind of ["open", "close"]) {
      const d = f[kind];
      if (d !== null) out.push({ kind, field: fi, key: hasOwn(d, "literals") ? kind : `${kind}_pattern`, source: delimiterSource(d) });
    }
  });
  return out;
}

/** The arrays of the token section (FORMAT.md section 8): checked by `checkTokenSection`, otherwise unused here (this
 * runtime parses text). */
const TOKEN_ARRAYS = ["offsets", "bytes", "flags", "first_ids", "first_offsets", "first_bytes", "inert", "delims"];

/** Everything one compiled template needs at run time (the JavaScript twin of runtime/tables/layout.py). */
export class Tables {
  /** From a file's sections as `loadTables` validated them (`fail` reports what only this runtime refuses: a
   * pattern it must run whose translation is missing or does not compile in this JavaScript engine). */
  constructor(spec, meta, arrays, header, fail) {
    this.header = header;
    this.template = spec;
    this.fields = spec.fields;
    const names = this.fields.map((f) => f.name);
    this.implicit = spec.implicit === null ? null : names.indexOf(spec.implicit);
    this.nClasses = meta.n_classes;
    const js = meta.js === undefined ? null : meta.js;
    this.js = js;
    this.patterns = meta.patterns.map((p, i) => new Pattern(p, translation(js && js.patterns[i], `js.patterns[${i}]`), `patterns[${i}]`, fail));
    // class map (checkClassMap)
    const starts = arrays.get("class_starts").arr;
    const ids = arrays.get("class_ids").arr;
    this.cmap = this.nClasses <= 256 ? new Uint8Array(N_CODEPOINTS) : new Uint16Array(N_CODEPOINTS);
    for (let i = 0; i < starts.length; i++) this.cmap.fill(ids[i], starts[i], i + 1 < starts.length ? starts[i + 1] : N_CODEPOINTS);
    // modes (checkModes)
    const exp = expectedPatterns(spec);
    const implicit = spec.implicit;
    const watch = [exp.map((p, i) => (p.kind === "open" || this.fields[p.field].name === implicit ? i : -1)).filter((i) => i >= 0)];
    this.fields.forEach((f, fi) => watch.push(exp.map((p, i) => (p.field === fi && p.kind === "close" && f.name !== implicit ? i : -1)).filter((i) => i >= 0)));
    this.modes = meta.modes.map((m, mi) => new Mode(m, mi, arrays, this.nClasses, watch[mi]));
    this.history = Math.max(1, ...this.patterns.map((p) => p.history));
    this.dirty = this.fields.map((f) => !STREAMABLE.has(f.content));
    for (const mode of this.modes) {
      const pats = mode.patterns.map((pi) => this.patterns[pi]);
      mode.guards = startGuards(mode, pats);
      mode.leadStarts = leadStarts(mode, pats, mode.startN);
      mode.leadStarts0 = mode.start0 !== mode.startN && mode.start0 ? leadStarts(mode, pats, mode.start0) : mode.leadStarts;
    }
    // start anchor
    const anchor = spec.start_anchor;
    const anchorT = translation(js && js.anchor, "js.anchor");
    if (hasOwn(anchor, "literals")) {
      const lits = anchor.literals.map((s, i) => [s, i]).sort((a, b) => cpLen(b[0]) - cpLen(a[0]) || a[1] - b[1]).map((x) => x[0]);
      this.anchorT = { source: lits.map(jsEscape).join("|"), groups: {} };
      this.anchorKind = "start_anchor";
    } else {
      this.anchorT = anchorT;
      this.anchorKind = "start_anchor_pattern";
      try {
        compileTranslation(anchorT, "su", "start_anchor_pattern");
      } catch (e) {
        fail(e.message);
      }
    }
    this.contentT = js && isDict(js.content) ? js.content : {};
    const wordSrc = js && typeof js.word === "string" ? js.word : WORD_FALLBACK;
    try {
      this.placeholder = new RegExp(`^\\{(${wordSrc}+(?:\\.${wordSrc}+)*)\\}$`, "u");
    } catch (e) {
      fail(`js.word: not a valid class (${e.message})`); // (checkWord lets through only valid ones)
    }
    this.bareKey = { source: `(?<=[{,])(${wordSrc}+):`, groups: {} };
    // the token section (FORMAT.md section 8), checked by checkTokenSection: read by tokenBinding()
    this.tokenSection = null;
    if (header.tokens) {
      const arr = (k) => arrays.get(`tokens.${k}`);
      this.tokenSection = { meta: meta.tokens, offsets: arr("offsets").arr, bytes: arr("bytes").arr, flags: arr("flags").arr,
        firstIds: arr("first_ids").arr, firstOffsets: arr("first_offsets").arr, firstBytes: arr("first_bytes").arr,
        inert: arr("inert").arr, delims: arr("delims").arr };
    }
    this._tokenBinding = null;
  }

  /** The part of `prefix` after the last start-anchor match; all of it (logged) when there is none. */
  cutPrefix(prefix, warn) {
    let last = null;
    for (const m of pyFinditer(this.anchorT, prefix, "start anchor")) last = m.index + m[0].length;
    if (last === null) {
      if (warn) warn(`response_template defines ${this.anchorKind} but the anchor was not found in the prefix; the parser will process the entire prefix instead.`);
      return prefix;
    }
    return prefix.slice(last);
  }

  contentRegex(pattern) {
    if (typeof pattern !== "string") throw E("TypeError", "first argument must be a string or compiled pattern");
    const t = hasOwn(this.contentT, pattern) ? this.contentT[pattern] : { error: "the table file has no translation of this tag_pattern" };
    if (t.error !== undefined && t.error.startsWith("invalid regex")) throw E("error", t.error);
    return t;
  }
}

// ------------------------------------------------------------------------------------------------ regex helpers

/** Python `regex.finditer` semantics over a translation (after an empty match, the next match at the same
 * position must be non-empty). */
function* pyFinditer(t, text, what = "pattern") {
  const g = compileTranslation(t, "gsu", what);
  let pos = 0;
  let mustAdvance = false;
  while (true) {
    let m = null;
    if (mustAdvance) {
      const ne = compileTranslation({ source: `(?:${t.source})(?<!^[^]{${cpLen(text.slice(0, pos))}})` }, "suy", what);
      ne.lastIndex = pos;
      m = ne.exec(text);
      if (m === null) {
        if (pos >= text.length) return;
        pos = nextCp(text, pos);
      }
    }
    if (m === null) {
      g.lastIndex = pos;
      m = g.exec(text);
      if (m === null) return;
    }
    yield m;
    const end = m.index + m[0].length;
    mustAdvance = end === m.index;
    pos = end;
  }
}

export { pyFinditer as _pyFinditer, groupdict as _groupdict, pyRepr as _pyRepr };

function pySub(t, text, repl) {
  let out = "";
  let last = 0;
  for (const m of pyFinditer(t, text)) {
    out += text.slice(last, m.index) + repl(m);
    last = m.index + m[0].length;
  }
  return out + text.slice(last);
}

function groupdict(m, t) {
  const out = {};
  for (const [jsName, pyName] of Object.entries(t.groups)) {
    const v = m.groups ? m.groups[jsName] : undefined;
    if (v !== undefined) setKey(out, pyName, v);
    else if (!hasOwn(out, pyName)) setKey(out, pyName, null);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------ start guards

// The twin of chatparse/runtime/regex/lead_assert.py. The tables approximate a lookbehind by the empty string, so an
// attempt of a lookbehind-led pattern would start (and hold its characters) even where the lookbehind already
// fails. Per character class, when every pattern an attempt starting with that class could still match has a
// leading lookbehind, the attempt starts only where one of those lookbehinds holds (Scanner.decide).
//
// Which patterns have one is read from the Python source, exactly as Python reads it (`leadingAssertion`); the
// lookbehind that runs is the head of the pattern's JavaScript translation (the compiler translates a leading
// `(?<=...)`/`(?<!...)` as the first item of the translation, itself translated). When one of a mode's
// lookbehinds does not compile on its own (a backreference to a group outside it), Python's `regex.compile`
// fails too and Python leaves the whole mode unguarded: so does this.

function pyClassEnd(src, i) {
  // Just past the Python character class opening at src[i] === "[" (a leading "]" is a member).
  const n = src.length;
  i++;
  if (i < n && src[i] === "^") i++;
  if (i < n && src[i] === "]") i++;
  while (i < n && src[i] !== "]") i += src[i] === "\\" ? 2 : 1;
  return i + 1;
}

function pyGroupEnd(src, i) {
  // Just past the Python group opening at src[i] === "(", or -1 if it never closes.
  let depth = 0;
  const n = src.length;
  while (i < n) {
    const c = src[i];
    if (c === "\\") {
      i += 2;
      continue;
    }
    if (c === "[") {
      i = pyClassEnd(src, i);
      continue;
    }
    if (c === "(") depth++;
    else if (c === ")") {
      depth--;
      if (depth === 0) return i + 1;
    }
    i++;
  }
  return -1;
}

function pyTopLevelBar(src, i) {
  const n = src.length;
  while (i < n) {
    const c = src[i];
    if (c === "|") return true;
    if (c === "\\") i += 2;
    else if (c === "[") i = pyClassEnd(src, i);
    else if (c === "(") {
      i = pyGroupEnd(src, i);
      if (i < 0) return true;
    } else i++;
  }
  return false;
}

/** The lookbehind every match of the Python pattern `src` starts with (lead_assert.leading_assertion), or null. */
export function leadingAssertion(src) {
  if (!src.startsWith("(?<=") && !src.startsWith("(?<!")) return null;
  const end = pyGroupEnd(src, 0);
  if (end < 0 || pyTopLevelBar(src, end)) return null;
  return src.slice(0, end);
}

/** The leading lookbehind of a JavaScript translation (u-mode syntax: `]` always ends a class), or null. */
export function jsLeadingLookbehind(src) {
  if (typeof src !== "string" || !(src.startsWith("(?<=") || src.startsWith("(?<!"))) return null;
  let depth = 0;
  for (let i = 0; i < src.length; ) {
    const c = src[i];
    if (c === "\\") i += 2;
    else if (c === "[") {
      i++;
      while (i < src.length && src[i] !== "]") i += src[i] === "\\" ? 2 : 1;
      i++;
    } else {
      if (c === "(") depth++;
      else if (c === ")" && --depth === 0) return src.slice(0, i + 1);
      i++;
    }
  }
  return null;
}

function livePatterns(mode) {
  // Per state: a 0/1 flag per local pattern, 1 where some path from the state (end of text included) can
  // still match that pattern (lead_assert._live_patterns).
  const n = mode.term.length, ncls = mode.nClasses, W = mode.patterns.length;
  const live = Array.from({ length: n }, () => new Uint8Array(W));
  const preds = Array.from({ length: n }, () => new Set());
  for (let s = 0; s < n; s++) {
    const hit = mode.acc[s];
    if (hit !== null) for (const [p] of hit) live[s][p] = 1;
  }
  for (let s = 1; s < n; s++) {
    for (let c = 0; c < ncls; c++) {
      const t = mode.trans[s * ncls + c];
      if (t) preds[t].add(s);
    }
    if (mode.eot[s]) preds[mode.eot[s]].add(s);
  }
  const work = [];
  for (let s = 0; s < n; s++) if (live[s].some((x) => x)) work.push(s);
  while (work.length) {
    const t = work.pop();
    for (const s of preds[t]) {
      let changed = false;
      for (let p = 0; p < W; p++) {
        if (live[t][p] && !live[s][p]) {
          live[s][p] = 1;
          changed = true;
        }
      }
      if (changed) work.push(s);
    }
  }
  return live;
}

/** Per character class: the lookbehind RegExps ("suy") one of which must hold where an attempt starting with a
 * character of that class (at an offset where the start state is `startN`) is to start, or null; null for the
 * whole mode when no class is guarded (lead_assert.start_guards). `patterns`: the mode's Pattern objects. */
function startGuards(mode, patterns) {
  const found = patterns.map((p) => leadingAssertion(p.source));
  if (found.every((f) => f === null)) return null;
  const compiled = new Map();
  for (let j = 0; j < found.length; j++) {
    if (found[j] === null) continue;
    const lb = jsLeadingLookbehind(patterns[j].jsSource);
    if (lb === null) return null; // (no translation to run: unguarded, as when Python cannot compile it)
    try {
      if (!compiled.has(found[j])) compiled.set(found[j], new RegExp(lb, "suy"));
    } catch {
      return null;
    }
  }
  const live = livePatterns(mode);
  const ncls = mode.nClasses, start = mode.startN, W = found.length;
  const nullable = new Uint8Array(W);
  if (mode.acc[start] !== null) for (const [p] of mode.acc[start]) nullable[p] = live[start][p];
  const out = [];
  let any = false;
  for (let c = 0; c < ncls; c++) {
    const t = mode.trans[start * ncls + c];
    const ps = [];
    for (let p = 0; p < W; p++) if (nullable[p] || (t && live[t][p])) ps.push(p);
    if (!ps.length || ps.some((p) => found[p] === null)) out.push(null);
    else {
      out.push([...new Set(ps.map((p) => compiled.get(found[p])))]);
      any = true;
    }
  }
  return any ? out : null;
}

// Per mode, at most this many distinct leading lookbehinds get start states of their own, and at most this
// many states, of at most this many transitions in all, are added for them (lead_assert's limits).
const MAX_LOOKBEHINDS = 6, MAX_EXTRA_STATES = 4096, MAX_EXTRA_CELLS = 1 << 21;

/** Per character class: null (an attempt starting with that class starts in `start`: startN, or start0 at
 * offset 0), or { rxs, byFailed }: the distinct leading lookbehinds of the candidates at that class, and the
 * state to start in by the set of those that fail (bit j of the index: rxs[j] fails; byFailed[0] is `start`):
 * `start` with the failing ones' patterns projected out (new states added to the mode, `Projection`), the dead
 * state where that is every candidate. null for the whole mode when no class changes its start state
 * (lead_assert.start_guards's `starts`). */
function leadStarts(mode, patterns, start) {
  const found = patterns.map((p) => leadingAssertion(p.source));
  if (found.every((f) => f === null)) return null;
  const compiled = new Map();
  for (let j = 0; j < found.length; j++) {
    if (found[j] === null) continue;
    const lb = jsLeadingLookbehind(patterns[j].jsSource);
    if (lb === null) return null;
    try {
      if (!compiled.has(found[j])) compiled.set(found[j], new RegExp(lb, "suy"));
    } catch {
      return null;
    }
  }
  const live = livePatterns(mode);
  const ncls = mode.nClasses, W = found.length;
  const nullable = new Uint8Array(W);
  if (mode.acc[start] !== null) for (const [p] of mode.acc[start]) nullable[p] = live[start][p];
  const byTarget = new Map(); // one entry per state reached
  const out = [];
  for (let c = 0; c < ncls; c++) {
    const t = mode.trans[start * ncls + c];
    if (!byTarget.has(t)) {
      const ps = [];
      for (let p = 0; p < W; p++) if (nullable[p] || (t && live[t][p])) ps.push(p);
      const guarded = ps.filter((p) => found[p] !== null);
      let g = null;
      if (guarded.length) {
        const groups = new Map(); // lookbehind source -> its candidate patterns
        for (const p of guarded) {
          if (!groups.has(found[p])) groups.set(found[p], []);
          groups.get(found[p]).push(p);
        }
        g = { rxs: [...groups.keys()].map((f) => compiled.get(f)), bits: [...groups.values()], every: guarded.length === ps.length, byFailed: null };
      }
      byTarget.set(t, g);
    }
    out.push(byTarget.get(t));
  }
  const entries = [...byTarget.values()].filter((g) => g !== null);
  let project = compiled.size <= MAX_LOOKBEHINDS ? new Projection(mode, live) : null;
  if (project !== null) {
    try {
      for (const g of entries) {
        const n = g.bits.length, byFailed = [start];
        for (let k = 1; k < 1 << n; k++) {
          const mask = new Uint8Array(W);
          for (let j = 0; j < n; j++) if ((k >> j) & 1) for (const p of g.bits[j]) mask[p] = 1;
          byFailed.push(g.every && k === (1 << n) - 1 ? 0 : project.state(start, mask));
        }
        g.byFailed = byFailed;
      }
      project.install();
    } catch (e) {
      if (e !== TOO_MANY) throw e;
      project = null;
    }
  }
  if (project === null) {
    // the all-guarded rule alone
    for (const g of entries) g.byFailed = g.every ? [...new Array((1 << g.bits.length) - 1).fill(start), 0] : null;
  }
  const res = out.map((g) => (g === null || g.byFailed === null || g.byFailed.every((s) => s === start) ? null : g));
  return res.some((g) => g !== null) ? res : null;
}

const TOO_MANY = Symbol("too many states");

/** States of a mode's DFA with some of its patterns projected out (lead_assert._Projection): (s, mask) steps as s
 * does, accepts only patterns outside `mask`, and is terminal once no pattern outside `mask` can still match from
 * it (the dead state if it accepts none then); where no pattern of `mask` can match from s any more it is s. */
class Projection {
  constructor(mode, live) {
    this.mode = mode;
    this.live = live;
    this.n = mode.term.length;
    this.W = mode.patterns.length;
    this.memo = new Map();
    this.rows = []; // per new state: { row, eot, acc, term }
    this.todo = [];
  }

  future(s) {
    // the patterns some path from s accepts after at least one more step (a character or the end)
    const { mode, live, W } = this;
    const out = new Uint8Array(W);
    const seen = new Set();
    const add = (t) => {
      if (!t || seen.has(t)) return;
      seen.add(t);
      for (let p = 0; p < W; p++) if (live[t][p]) out[p] = 1;
    };
    add(mode.eot[s]);
    const ncls = mode.nClasses;
    for (let c = 0; c < ncls; c++) add(mode.trans[s * ncls + c]);
    return out;
  }

  id(s, mask) {
    const { mode, live, W } = this;
    if (s === 0) return 0;
    let touches = false;
    for (let p = 0; p < W; p++) if (mask[p] && live[s][p]) touches = true;
    if (!touches) return s;
    const key = `${s}|${mask.join("")}`;
    let sid = this.memo.get(key);
    if (sid === undefined) {
      const hits = (mode.acc[s] || []).filter(([p]) => !mask[p]);
      const fut = this.future(s);
      let future = false;
      for (let p = 0; p < W; p++) if (fut[p] && !mask[p]) future = true;
      if (!hits.length && !future) sid = 0;
      else {
        if (this.rows.length >= MAX_EXTRA_STATES || (this.rows.length + 1) * mode.nClasses > MAX_EXTRA_CELLS) throw TOO_MANY;
        sid = this.n + this.rows.length;
        this.rows.push({ row: null, eot: 0, acc: hits.length ? hits : null, term: !future });
        if (future) this.todo.push([s, mask, sid]);
      }
      this.memo.set(key, sid);
    }
    return sid;
  }

  state(s, mask) {
    const first = this.id(s, mask);
    const mode = this.mode, ncls = mode.nClasses;
    while (this.todo.length) {
      const [s0, m, sid] = this.todo.pop();
      const row = new Int32Array(ncls);
      const mapped = new Map();
      for (let c = 0; c < ncls; c++) {
        const t = mode.trans[s0 * ncls + c];
        if (!mapped.has(t)) mapped.set(t, this.id(t, m));
        row[c] = mapped.get(t);
      }
      const r = this.rows[sid - this.n];
      r.row = row;
      r.eot = this.id(mode.eot[s0], m);
    }
    return first;
  }

  install() {
    // append the new states to the mode's arrays (trans, eot, term, acc)
    if (!this.rows.length) return;
    const mode = this.mode, ncls = mode.nClasses, n = this.n, total = n + this.rows.length;
    const trans = new Int32Array(total * ncls), eot = new Int32Array(total), term = new Uint8Array(total);
    trans.set(mode.trans);
    eot.set(mode.eot);
    term.set(mode.term);
    this.rows.forEach((r, k) => {
      if (r.row !== null) trans.set(r.row, (n + k) * ncls);
      eot[n + k] = r.eot;
      term[n + k] = r.term ? 1 : 0;
      mode.acc.push(r.acc);
    });
    mode.trans = trans;
    mode.eot = eot;
    mode.term = term;
  }
}

function guardedStart(g, text, i) {
  let k = 0;
  for (let j = 0; j < g.rxs.length; j++) {
    const rx = g.rxs[j];
    rx.lastIndex = i;
    if (rx.exec(text) === null) k |= 1 << j;
  }
  return g.byFailed[k];
}

// ------------------------------------------------------------------------------------------------ scanner

const WAIT = Symbol("wait");
const JSON_END = -1; // the pattern index of the close at the end of a JSON value (close_json_end)

class Attempt {
  constructor(start, state) {
    this.start = start;
    this.state = state;
    this.ends = null; // Map: local pattern index -> end offset
    this.fin = -1;
  }
}

class Scanner {
  constructor(tables) {
    this.t = tables;
    this.cmap = tables.cmap;
    this.keep = 2 * tables.history; // code units: at least `history` code points
    this.text = "";
    this.base = 0;
    this.end = 0;
    this.pos = 0;
    this.scan = 0;
    this.attempts = [];
    this.eotFed = false;
    this.cpPos = 0; // code points before `pos` (offsets on events and in messages are Python's: code points)
    this.stop = -1; // no delimiter starting after this offset can matter (the end of a JSON value; -1: none)
    this.setMode(0);
  }

  push(chunk) {
    this.text += chunk;
    this.end += chunk.length;
  }

  setMode(i) {
    this.mode = this.t.modes[i];
  }

  restart(i, at) {
    this.setMode(i);
    this.pos = this.scan = at;
    this.attempts = [];
    this.eotFed = false;
    this.stop = -1;
  }

  quiet() {
    return this.attempts.length === 0 && this.scan === this.end;
  }

  safeEnd() {
    return this.attempts.length ? this.attempts[0].start : this.scan;
  }

  take(upto) {
    const b = this.base;
    const out = this.text.slice(this.pos - b, upto - b);
    this.pos = upto;
    this.cpPos += cpLen(out);
    const drop = upto - this.keep - b;
    if (drop > 256 && drop * 2 > this.text.length) {
      this.text = this.text.slice(drop);
      this.base = b + drop;
    }
    return out;
  }

  decide(eos) {
    const mode = this.mode;
    const { trans, term, acc, nClasses: ncls } = mode;
    const cmap = this.cmap;
    const attempts = this.attempts;
    const stop = this.stop;
    for (;;) {
      if (stop >= 0 && (attempts.length ? attempts[0].start : this.scan) > stop) return null; // (nothing more can matter)
      while (attempts.length && attempts[0].fin >= 0) {
        const r = this.resolve(attempts[0], eos);
        if (r === WAIT) return null;
        if (r !== null) return r;
        attempts.shift();
      }
      if (this.scan >= this.end) {
        if (eos && !this.eotFed) {
          this.feedEot();
          continue;
        }
        return null;
      }
      let scan = this.scan;
      const text = this.text, base = this.base;
      if (!attempts.length && !(scan === 0 && mode.start0)) {
        const first = mode.firstRe;
        if (first !== null) {
          let m;
          if (stop < 0) {
            first.lastIndex = scan - base;
            m = first.exec(text);
          } else {
            // only attempts starting at or before `stop` matter: search no further than the prefilter's two
            // characters past it (its end there counts as the end of the text: only more offsets pass), so the
            // search does not run on through the rest of a long text once per region (skip_within in Python)
            const from = scan - base, limit = Math.min(text.length, stop - base + 5);
            first.lastIndex = 0;
            m = from < limit ? first.exec(text.slice(from, limit)) : null;
            if (m !== null) m = { index: m.index + from };
            else if (limit < text.length) m = { index: limit };
          }
          if (m === null) {
            this.scan = this.end;
            continue;
          }
          scan = base + m.index;
          if (stop >= 0 && scan > stop) {
            this.scan = scan;
            return null;
          }
        }
      }
      const cp = text.codePointAt(scan - base);
      const cls = cmap[cp];
      const nxt = scan + (cp > 0xffff ? 2 : 1);
      for (const a of attempts) {
        if (a.fin < 0) {
          const st = trans[a.state * ncls + cls];
          a.state = st;
          if (st === 0) a.fin = nxt;
          else {
            const hit = acc[st];
            if (hit !== null) record(a, hit, nxt);
            if (term[st]) a.fin = nxt;
          }
        }
      }
      let st = scan === 0 ? mode.start0 : mode.startN;
      // the patterns whose leading lookbehind fails here left out (none left: no attempt)
      const lead = scan === 0 ? mode.leadStarts0 : mode.leadStarts;
      if (lead !== null && lead[cls] !== null) st = guardedStart(lead[cls], text, scan - base);
      if (st) {
        const a = new Attempt(scan, st);
        let hit = acc[st];
        if (hit !== null) record(a, hit, scan);
        if (term[st]) a.fin = scan;
        else {
          st = trans[st * ncls + cls];
          a.state = st;
          if (st === 0) a.fin = nxt;
          else {
            hit = acc[st];
            if (hit !== null) record(a, hit, nxt);
            if (term[st]) a.fin = nxt;
          }
        }
        if (a.fin < 0 || a.ends !== null) attempts.push(a);
      }
      this.scan = nxt;
      if (attempts.some((a) => a.fin >= 0 && a.ends === null)) {
        const keep = attempts.filter((a) => a.fin < 0 || a.ends !== null);
        attempts.length = 0;
        attempts.push(...keep);
      }
    }
  }

  feedEot() {
    const mode = this.mode;
    this.eotFed = true;
    const end = this.end;
    for (const a of this.attempts) {
      if (a.fin < 0) {
        const st = mode.eot[a.state];
        const hit = st ? mode.acc[st] : null;
        if (hit !== null) record(a, hit, end);
        a.fin = end;
      }
    }
    const keep = this.attempts.filter((a) => a.ends !== null);
    this.attempts.length = 0;
    this.attempts.push(...keep);
  }

  hasChars(from, n) {
    // At least `n` code points received after offset `from`?
    const avail = this.end - from;
    if (avail < n) return false;
    if (avail >= 2 * n) return true;
    let i = from - this.base, c = 0;
    const stop = this.end - this.base;
    while (i < stop && c < n) {
      i = isHigh(this.text.charCodeAt(i)) && i + 1 < stop && isLow(this.text.charCodeAt(i + 1)) ? i + 2 : i + 1;
      c++;
    }
    return c >= n;
  }

  resolve(a, eos) {
    let bestKey = null, best = null;
    const t = this.t;
    for (const [local, end0] of a.ends) {
      const pi = this.mode.patterns[local];
      const p = t.patterns[pi];
      let m = null, end = end0;
      if (!p.exact) {
        if (!eos && (p.horizon < 0 || !this.hasChars(a.fin, p.horizon))) return WAIT;
        p.rx.lastIndex = a.start - this.base;
        m = p.rx.exec(this.text);
        if (m === null) continue;
        end = m.index + m[0].length + this.base;
      }
      const key = [a.start - end, p.kind === "open" ? 0 : 1, t.fields[p.field].name];
      if (bestKey === null || keyLess(key, bestKey)) {
        bestKey = key;
        best = [a.start, end, pi, m];
      }
    }
    if (best === null) return null;
    const [s, e, pi] = best;
    let m = best[3];
    const p = t.patterns[pi];
    if (m === null && p.namedGroups) {
      p.rxFull.lastIndex = s - this.base;
      m = p.rxFull.exec(this.text.slice(0, e - this.base));
      if (m === null) throw E("RuntimeError", `chatparse internal error: tables matched ${JSON.stringify(p.source)} at ${s}..${e} but the regex does not`);
    }
    return [s, e, pi, m];
  }
}

function record(a, hit, at) {
  if (a.ends === null) a.ends = new Map();
  for (const [p, back] of hit) a.ends.set(p, at - back);
}

function keyLess(x, y) {
  if (x[0] !== y[0]) return x[0] < y[0];
  if (x[1] !== y[1]) return x[1] < y[1];
  return cmpStr(x[2], y[2]) < 0;
}

// ------------------------------------------------------------------------------------------------ JSON end
// The close_json_end extension (chatparse/runtime/values/json_end.py, FORMAT.md "Extensions"): where the JSON value a
// region body starts with ends, read incrementally, exactly Python's json grammar (raw_decode after JSON
// whitespace), at most JSON_MAX_DEPTH containers deep. Offsets are UTF-16 (a surrogate is an ordinary string
// character and an error elsewhere, as a code point is in Python).

export const JSON_MAX_DEPTH = 512;
const J_BEFORE = 0, J_VALUE = 1, J_ARR_FIRST = 2, J_ARR_AFTER = 3, J_OBJ_FIRST = 4, J_OBJ_KEY = 5, J_OBJ_COLON = 6,
  J_OBJ_AFTER = 7, J_STR = 8, J_ESC = 9, J_HEX = 10, J_LIT = 11, J_MINUS = 12, J_ZERO = 13, J_INT = 14, J_DOT = 15,
  J_FRAC = 16, J_EXP = 17, J_ESIGN = 18, J_EDIG = 19, J_DONE = 20, J_DEAD = 21;
const J_WS_STATES = new Set([J_ARR_AFTER, J_OBJ_AFTER, J_OBJ_COLON, J_BEFORE, J_VALUE, J_ARR_FIRST, J_OBJ_FIRST, J_OBJ_KEY]);
const J_WS_RUN = /[ \t\n\r]*/y, J_STR_RUN = /[^"\\\x00-\x1f]*/y, J_DIGIT_RUN = /[0-9]*/y;
const J_LITERALS = { n: "null", t: "true", f: "false", N: "NaN", I: "Infinity" };
const isJsonWs = (c) => c === " " || c === "\t" || c === "\n" || c === "\r";
const isDigit = (c) => c >= "0" && c <= "9";

export class JsonEnd {
  constructor(start) {
    this.pos = start;
    this.state = J_BEFORE;
    this.stack = []; // open containers: true for an object
    this.key = false;
    this.lit = "";
    this.need = 0;
    this.cand = -1;
    this.end = -1;
    this.dead = false;
  }

  /** The first offset read that may not be body: `end` once known, a top-level number's pending ./e part, else `pos`; -1 when dead. */
  hold() {
    if (this.state === J_DONE) return this.end;
    if (this.state === J_DEAD) return -1;
    return this.cand >= 0 ? this.cand : this.pos;
  }

  lowest() {
    return this.cand >= 0 ? this.cand : this.pos;
  }

  advance(text, base, upto) {
    let state = this.state;
    if (state >= J_DONE || upto <= this.pos) return;
    let i = this.pos - base;
    const n = upto - base;
    while (i < n) {
      if (state === J_STR) {
        J_STR_RUN.lastIndex = i;
        J_STR_RUN.exec(text);
        i = Math.min(J_STR_RUN.lastIndex, n);
        if (i >= n) break;
        const c = text[i];
        if (c === '"') {
          i++;
          if (this.key) {
            this.key = false;
            state = J_OBJ_COLON;
          } else {
            state = this.valueDone(i + base);
            if (state >= J_DONE) break;
          }
        } else if (c === "\\") {
          i++;
          state = J_ESC;
        } else {
          state = this.die();
          break;
        }
        continue;
      }
      if (J_WS_STATES.has(state)) {
        J_WS_RUN.lastIndex = i;
        J_WS_RUN.exec(text);
        i = Math.min(J_WS_RUN.lastIndex, n);
        if (i >= n) break;
      } else if (state === J_INT || state === J_FRAC || state === J_EDIG) {
        J_DIGIT_RUN.lastIndex = i;
        J_DIGIT_RUN.exec(text);
        i = Math.min(J_DIGIT_RUN.lastIndex, n);
        if (i >= n) break;
      }
      this.state = state;
      state = this.step(text[i], i + base);
      if (state === J_DONE && this.end <= i + base) break; // (the character at i was not part of the value)
      i++;
      if (state >= J_DONE) break;
    }
    this.state = state;
    if (state < J_DONE) this.pos = n + base;
    else if (state === J_DONE) this.pos = this.end;
  }

  finish() {
    const state = this.state;
    if (state >= J_DONE) return;
    if (!this.stack.length && (state === J_ZERO || state === J_INT || state === J_FRAC || state === J_EDIG)) {
      this.end = this.pos;
      this.state = J_DONE;
    } else if (!this.stack.length && (state === J_DOT || state === J_EXP || state === J_ESIGN)) {
      this.end = this.cand;
      this.state = J_DONE;
    } else this.die();
  }

  die() {
    this.dead = true;
    this.state = J_DEAD;
    this.stack = [];
    return J_DEAD;
  }

  valueDone(at) {
    if (!this.stack.length) {
      this.end = at;
      this.state = J_DONE;
      return J_DONE;
    }
    return this.stack[this.stack.length - 1] ? J_OBJ_AFTER : J_ARR_AFTER;
  }

  beginValue(c) {
    if (c === '"') {
      this.key = false;
      return J_STR;
    }
    if (c === "{" || c === "[") {
      if (this.stack.length >= JSON_MAX_DEPTH) return this.die();
      this.stack.push(c === "{");
      return c === "{" ? J_OBJ_FIRST : J_ARR_FIRST;
    }
    if (c === "-") return J_MINUS;
    if (c === "0") return J_ZERO;
    if (c >= "1" && c <= "9") return J_INT;
    if (hasOwn(J_LITERALS, c)) {
      this.lit = J_LITERALS[c];
      this.need = 1;
      return J_LIT;
    }
    return this.die();
  }

  numberEnd(c, at, cand) {
    this.cand = -1;
    if (!this.stack.length) {
      this.end = cand < 0 ? at : cand;
      this.state = J_DONE;
      return J_DONE;
    }
    if (cand >= 0) return this.die();
    this.state = this.stack[this.stack.length - 1] ? J_OBJ_AFTER : J_ARR_AFTER;
    if (isJsonWs(c)) return this.state;
    return this.step(c, at);
  }

  step(c, at) {
    const state = this.state;
    switch (state) {
      case J_BEFORE: case J_VALUE: return this.beginValue(c);
      case J_ARR_FIRST:
        if (c === "]") {
          this.stack.pop();
          return this.valueDone(at + 1);
        }
        return this.beginValue(c);
      case J_ARR_AFTER:
        if (c === ",") return J_VALUE;
        if (c === "]") {
          this.stack.pop();
          return this.valueDone(at + 1);
        }
        return this.die();
      case J_OBJ_FIRST: case J_OBJ_KEY:
        if (c === '"') {
          this.key = true;
          return J_STR;
        }
        if (c === "}" && state === J_OBJ_FIRST) {
          this.stack.pop();
          return this.valueDone(at + 1);
        }
        return this.die();
      case J_OBJ_COLON: return c === ":" ? J_VALUE : this.die();
      case J_OBJ_AFTER:
        if (c === ",") return J_OBJ_KEY;
        if (c === "}") {
          this.stack.pop();
          return this.valueDone(at + 1);
        }
        return this.die();
      case J_ESC:
        if (c === "u") {
          this.need = 4;
          return J_HEX;
        }
        return '"\\/bfnrt'.includes(c) ? J_STR : this.die();
      case J_HEX:
        if (!/^[0-9a-fA-F]$/.test(c)) return this.die();
        this.need--;
        return this.need === 0 ? J_STR : J_HEX;
      case J_LIT:
        if (c !== this.lit[this.need]) return this.die();
        this.need++;
        return this.need === this.lit.length ? this.valueDone(at + 1) : J_LIT;
      case J_MINUS:
        if (c === "0") return J_ZERO;
        if (c >= "1" && c <= "9") return J_INT;
        if (c === "I") {
          this.lit = "-Infinity";
          this.need = 2;
          return J_LIT;
        }
        return this.die();
      case J_ZERO: case J_INT: case J_FRAC:
        if (c === "." && state !== J_FRAC) {
          this.cand = at;
          return J_DOT;
        }
        if (c === "e" || c === "E") {
          this.cand = at;
          return J_EXP;
        }
        return this.numberEnd(c, at, -1);
      case J_DOT:
        if (isDigit(c)) {
          this.cand = -1;
          return J_FRAC;
        }
        return this.numberEnd(c, at, this.cand);
      case J_EXP:
        if (isDigit(c)) {
          this.cand = -1;
          return J_EDIG;
        }
        if (c === "+" || c === "-") return J_ESIGN;
        return this.numberEnd(c, at, this.cand);
      case J_ESIGN:
        if (isDigit(c)) {
          this.cand = -1;
          return J_EDIG;
        }
        return this.numberEnd(c, at, this.cand);
      case J_EDIG: return this.numberEnd(c, at, -1);
      default: throw E("RuntimeError", `JsonEnd: unexpected state ${state}`);
    }
  }
}

// ------------------------------------------------------------------------------------------------ dialect

// Which events a parser speaks (the twin of chatparse/runtime/stream/dialect.py): transformers 5.23's (the default)
// or vLLM 0.33.0's serving dialect.
//   offsets       region_open / region_close / region_malformed carry `start` and `end`, the code-point span of
//                 the parser's input (`inputText`) the event's delimiter consumed (empty for an implicit
//                 boundary); an explicit open also carries `captures`.
//   malformed     "raise" (default) or "event": a region whose value fails with KeyError, TypeError or
//                 ValueError ends with {"type": "region_malformed", "field", ["start", "end",] "error"} (the
//                 PyError) and parsing goes on; such a field is not a missing required field.
//   promptChunks  false: prompt characters held back as a possible delimiter and released by a later feed are
//                 left out of that feed's region_chunk (the region's value still holds them).
//   inputText     the parser keeps its whole input (`ResponseParser#inputText`).
const MALFORMED = ["raise", "event"];

function makeDialect(offsets, malformed, promptChunks, inputText, name) {
  for (const [k, v] of [["offsets", offsets], ["prompt_chunks", promptChunks], ["input_text", inputText]]) {
    if (typeof v !== "boolean") throw E("TypeError", `Dialect.${k} must be a bool, got ${pyTypeName(v)}`);
  }
  if (!MALFORMED.includes(malformed)) throw E("ValueError", `Dialect.malformed must be 'raise' or 'event', got ${pyRepr(malformed)}`);
  return Object.freeze({ offsets, malformed, promptChunks, inputText, name });
}

export const TRANSFORMERS = makeDialect(false, "raise", true, false, "transformers");
export const VLLM = makeDialect(true, "event", false, true, "vllm");
const PRESETS = { transformers: TRANSFORMERS, vllm: VLLM };
const DIALECT_KINDS = "dialect must be 'transformers', 'vllm' or a chatparse.Dialect";

/** The dialect for `dialect` (null/undefined or "transformers": the default; "vllm"; or an object with any of
 * offsets, malformed, promptChunks (prompt_chunks), inputText (input_text), the rest defaulting as in
 * TRANSFORMERS) with `offsets` and `malformed` applied over it where given (dialect.resolve). */
export function resolveDialect(dialect = null, { offsets = null, malformed = null } = {}) {
  let d;
  if (dialect === null || dialect === undefined) d = TRANSFORMERS;
  else if (typeof dialect === "string") {
    if (!hasOwn(PRESETS, dialect)) throw E("ValueError", `${DIALECT_KINDS}, got ${pyRepr(dialect)}`);
    d = PRESETS[dialect];
  } else if (isDict(dialect)) {
    const pick = (camel, snake, dflt) => (hasOwn(dialect, camel) ? dialect[camel] : hasOwn(dialect, snake) ? dialect[snake] : dflt);
    d = makeDialect(pick("offsets", "offsets", false), pick("malformed", "malformed", "raise"), pick("promptChunks", "prompt_chunks", true),
      pick("inputText", "input_text", false), typeof dialect.name === "string" ? dialect.name : "custom");
  } else throw E("TypeError", `${DIALECT_KINDS}, got ${pyTypeName(dialect)}`);
  let changed = false;
  let [o, m] = [d.offsets, d.malformed];
  if (offsets !== null && offsets !== undefined) {
    if (typeof offsets !== "boolean") throw E("TypeError", `offsets must be a bool, got ${pyTypeName(offsets)}`);
    changed ||= offsets !== o;
    o = offsets;
  }
  if (malformed !== null && malformed !== undefined) {
    if (!MALFORMED.includes(malformed)) throw E("ValueError", `malformed must be 'raise' or 'event', got ${pyRepr(malformed)}`);
    changed ||= malformed !== m;
    m = malformed;
  }
  return changed ? makeDialect(o, m, d.promptChunks, d.inputText, "custom") : d;
}

function pyRepr(v) {
  // Python's repr() of a str (the quote it picks, the usual escapes) and of JSON-like scalars, for messages.
  if (typeof v !== "string") return v === null || v === undefined ? "None" : typeof v === "boolean" ? (v ? "True" : "False") : String(v);
  const q = v.includes("'") && !v.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of v) {
    const c = ch.codePointAt(0);
    if (ch === q || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c !== 0x20 && NOT_PRINTABLE.test(ch)) {
      // (str.isprintable's categories, as this engine's Unicode tables have them)
      out += c < 0x100 ? `\\x${c.toString(16).padStart(2, "0")}` : c < 0x10000 ? `\\u${c.toString(16).padStart(4, "0")}` : `\\U${c.toString(16).padStart(8, "0")}`;
    } else out += ch;
  }
  return out + q;
}
const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

/** Python's repr() of a list of str. */
const pyStrList = (xs) => `[${xs.map(pyRepr).join(", ")}]`;

/** Whether `e` is an error a recovering parser turns into a region_malformed event: Python's KeyError,
 * TypeError or ValueError (JSONDecodeError is a ValueError). */
const isRecoverable = (e) => e instanceof PyError && ["KeyError", "TypeError", "ValueError", "JSONDecodeError"].includes(e.pyType);

// ------------------------------------------------------------------------------------------------ parser

const isEmpty = (v) => v === null || v === undefined || ((typeof v === "string" || Array.isArray(v)) && v.length === 0) || (isDict(v) && Object.keys(v).length === 0);

/** One generation's parse state (the twin of runtime/stream/parser.py StreamParser). */
export class StreamParser {
  constructor(tables, toolParams = null, warn = null, dialect = TRANSFORMERS) {
    this.t = tables;
    this.toolParams = toolParams || new Map();
    this.warn = warn;
    this.output = deepCopy(tables.template.defaults);
    this.current = tables.implicit;
    this.opened = false;
    this.captures = {};
    this.body = [];
    this.pending = [];
    this.scanner = new Scanner(tables);
    this.stalled = false;
    this.emptyOpen = -1; // offset of the current region's open delimiter when that was zero-width
    this.finished = false;
    this.failed = null;
    this.held = ""; // a high surrogate at the end of a feed waits for its low half
    // The dialect: spans on events (in code points, `Scanner.cpPos`), malformed regions as events,
    // prompt text kept out of chunks before `promptEnd` (UTF-16, set by the owner once the prefix is fed), the
    // whole input.
    this.offsets = dialect.offsets;
    this.recover = dialect.malformed === "event";
    this.malformed = null; // names of fields whose value failed to parse (with `recover`)
    this.promptEnd = 0;
    this.inputs = dialect.inputText ? [] : null;
    this.jsonEnd = null; // the open region's JsonEnd while it is a close_json_end field's
    // on_error (chatparse/runtime/values/recovery.py): the open region's open delimiter (text, code-point offset) and,
    // while a region is closed by its close delimiter, that delimiter's text
    this.openText = "";
    this.openStart = 0; // (code points, for the events)
    this.openAt = 0; // (UTF-16, against promptEnd)
    this.closing = "";
  }

  /** Everything this parser was given (the dialect's inputText); kept only where asked for. */
  inputText() {
    const inputs = this.inputs;
    if (inputs === null) throw E("AttributeError", "input_text is kept only in a dialect with input_text=True (dialect='vllm')");
    if (inputs.length > 1) inputs.splice(0, inputs.length, inputs.join(""));
    return inputs.length ? inputs[0] : "";
  }

  feed(text) {
    this.checkUsable();
    const events = [];
    if (typeof text !== "string") throw E("TypeError", "feed() takes a string");
    if (this.inputs !== null && text) this.inputs.push(text);
    if (!text) return events;
    if (this.stalled) return events;
    if (this.held) {
      text = this.held + text;
      this.held = "";
    }
    if (isHigh(text.charCodeAt(text.length - 1))) {
      this.held = text.slice(-1);
      text = text.slice(0, -1);
      if (!text) return events;
    }
    const sc = this.scanner;
    try {
      const first = sc.mode.firstRe;
      let fast = false;
      if (sc.quiet() && first !== null && sc.end && this.jsonEnd === null) {
        first.lastIndex = 0;
        fast = first.exec(text) === null;
      }
      if (fast) {
        sc.push(text);
        sc.scan = sc.end;
        this.text(sc.take(sc.end), events);
      } else {
        sc.push(text);
        this.process(events, false);
      }
      this.flush(events);
    } catch (e) {
      this.failed = e;
      throw e;
    }
    return events;
  }

  finish() {
    this.checkUsable();
    const events = [];
    try {
      if (this.held && !this.stalled) {
        this.scanner.push(this.held);
        this.held = "";
      }
      if (!this.stalled) this.process(events, true);
      this.flush(events);
      this.finished = true;
      const bad = this.malformed;
      const missing = this.t.fields.filter((f) => !f.optional && !hasOwn(this.output, f.name) && !(bad && bad.has(f.name))).map((f) => f.name);
      if (missing.length) throw E("ValueError", `Required response_template fields missing from parsed output: ${pyStrList(missing)}`);
      const defaults = this.t.template.defaults;
      const out = {};
      for (const k of Object.keys(this.output)) if (hasOwn(defaults, k) || !isEmpty(this.output[k])) setKey(out, k, this.output[k]);
      this.output = out;
    } catch (e) {
      this.failed = e;
      throw e;
    }
    return [this.output, events];
  }

  checkUsable() {
    if (this.finished) throw E("RuntimeError", "ResponseParser already finalized");
    if (this.failed !== null) throw E("RuntimeError", `ResponseParser failed earlier (${this.failed.name}: ${this.failed.message}); start a new parser`);
  }

  process(events, eos) {
    const sc = this.scanner;
    const t = this.t;
    for (;;) {
      const je = this.jsonEnd;
      const d = je === null ? sc.decide(eos) : this.decideJsonEnd(je, eos);
      if (d === null) break;
      const [s, e, pi, m] = d;
      if (pi === JSON_END) {
        // the open region's JSON value ends at s: close it there (an empty span) and go on in the implicit field
        this.text(sc.take(s), events);
        this.close(events, sc.cpPos, sc.cpPos);
        sc.restart(0, s);
        continue;
      }
      this.text(sc.take(s), events);
      const cs = sc.cpPos; // (the span in code points, for the events)
      const delim = sc.take(e);
      const ce = sc.cpPos;
      const p = t.patterns[pi];
      if (p.kind === "open") {
        this.close(events, cs, cs);
        this.open(p.field, m, p, events, cs, ce);
        this.openText = delim; // (the raw text on_error "content" recovers starts here)
        this.openStart = cs;
        this.openAt = s;
        this.emptyOpen = s === e ? s : -1;
        sc.restart(1 + p.field, e);
        if (t.fields[p.field].close_json_end === true) this.jsonEnd = new JsonEnd(e);
      } else {
        const had = this.opened;
        const fi = this.current;
        this.closing = delim;
        this.close(events, cs, ce);
        if (!had && s === e) {
          this.stalled = true;
          if ((e < sc.end || !eos) && this.warn) this.warn(`chatparse: zero-width close of the empty implicit field at offset ${cs}; the reference stops parsing here, so the rest of the text is ignored`);
          return;
        }
        if (s === e && s === this.emptyOpen) {
          // a zero-width close right at a zero-width open: back in the outside mode at the offset where that
          // open was decided, which decides it again, and so on forever
          this.stalled = true;
          if (this.warn) this.warn(`chatparse: field '${t.fields[fi].name}' opened and closed with zero width at offset ${cs}, and would do so forever (the reference never returns here); the rest of the text is ignored`);
          return;
        }
        sc.restart(0, e);
      }
    }
    if (eos) {
      this.text(sc.take(sc.end), events);
      this.close(events, sc.cpPos, sc.cpPos);
    } else {
      let upto = sc.safeEnd();
      const je = this.jsonEnd;
      if (je !== null) {
        const hold = je.hold(); // characters that may turn out to follow the value are not body yet
        if (hold >= 0 && hold < upto) upto = hold;
      }
      this.text(sc.take(upto), events);
    }
  }

  decideJsonEnd(je, eos) {
    // Scanner.decide for a close_json_end region: the explicit close if it starts at or before the value's end,
    // else [end, end, JSON_END, null] once no explicit close can start at or before it (StreamParser._decide_json_end).
    const sc = this.scanner;
    je.advance(sc.text, sc.base, sc.end);
    if (eos) je.finish();
    const j = je.end;
    sc.stop = j;
    const d = sc.decide(eos);
    if (j < 0) return d === null || je.dead || d[0] <= je.lowest() ? d : null;
    if (d !== null) return d[0] <= j ? d : [j, j, JSON_END, null];
    if (eos || sc.safeEnd() > j) return [j, j, JSON_END, null];
    return null;
  }

  text(text, events) {
    // `text`, just handed out by the scanner (it ends at scanner.pos), goes to the current region.
    if (!text || this.current === null) return;
    if (!this.opened) {
      const name = this.t.fields[this.current].name;
      if (this.offsets) {
        const at = this.scanner.cpPos - cpLen(text);
        events.push({ type: "region_open", field: name, start: at, end: at });
      } else events.push({ type: "region_open", field: name });
      this.opened = true;
    }
    this.body.push(text);
    if (this.promptEnd) {
      const start = this.scanner.pos - text.length;
      if (start < this.promptEnd) {
        // prompt characters held back as a possible delimiter: not a chunk
        text = text.slice(this.promptEnd - start);
        if (!text) return;
      }
    }
    this.pending.push(text);
  }

  flush(events) {
    if (this.pending.length) {
      const fi = this.current;
      events.push({ type: "region_chunk", field: this.t.fields[fi].name, text: this.pending.join(""), dirty: this.t.dirty[fi] });
      this.pending = [];
    }
  }

  open(fi, m, p, events, s, e) {
    this.current = fi;
    this.captures = {};
    if (m !== null) {
      const gd = groupdict(m, p);
      for (const k of Object.keys(gd)) if (gd[k] !== null) setKey(this.captures, k, gd[k]);
    }
    this.body = [];
    this.opened = true;
    if (this.offsets) events.push({ type: "region_open", field: this.t.fields[fi].name, start: s, end: e, captures: this.captures });
    else events.push({ type: "region_open", field: this.t.fields[fi].name });
  }

  store(field, body = this.body.join(""), captures = this.captures) {
    // The region's value (parsed, transformed, tool arguments typed), put into the message; returned.
    const name = field.name;
    let value = processValue(body, field, captures, this.t);
    if (this.toolParams.size) {
      value = field.argument_types === "schema" ? typeToolCalls(value, this.toolParams, argumentTexts(body, field, captures, this.t)) : coerceToolCalls(value, this.toolParams);
    }
    const join = field.join;
    if (join !== null) {
      if (typeof value !== "string") throw E("ValueError", `Field '${name}': 'join' requires each match to parse to a string, got ${pyTypeName(value)}.`);
      const prev = hasOwn(this.output, name) ? this.output[name] : null;
      setKey(this.output, name, prev === null ? value : prev + join + value);
    } else if (field.repeats) {
      if (!hasOwn(this.output, name)) setKey(this.output, name, []);
      if (field.flatten === true && Array.isArray(value)) this.output[name].push(...value); // (format extension flatten)
      else this.output[name].push(value);
    } else {
      setKey(this.output, name, value);
    }
    return value;
  }

  close(events, s, e) {
    // Close the current region at [s, e) (code points: its close delimiter, or an empty span), store its value
    // and go back to the implicit field. With `recover`, a value that fails to parse ends the region with a
    // region_malformed event instead of throwing.
    const fi = this.current;
    if (fi !== null && this.opened) {
      this.flush(events);
      const field = this.t.fields[fi];
      const name = field.name;
      let value, error = null, recovered = null;
      const mode = field.on_error === "content" || field.on_error === "drop" ? field.on_error : null;
      if (this.recover || mode !== null) {
        try {
          value = this.store(field);
        } catch (err) {
          if (!isRecoverable(err)) throw err;
          error = err;
        }
      } else value = this.store(field);
      if (error !== null && mode !== null) {
        // on_error: "content" stores the raw region text as one more implicit region (if that fails too, the
        // region fails as without on_error); "drop" nothing (chatparse/runtime/values/recovery.py)
        try {
          if (mode === "content") {
            const raw = this.openText + this.body.join("") + this.closing;
            const implicit = this.t.fields[this.t.implicit];
            recovered = [raw, this.store(implicit, raw, {})];
          } else recovered = [];
        } catch (err) {
          if (!isRecoverable(err)) throw err;
        }
      }
      if (error !== null && recovered === null && !this.recover) throw error;
      if (error !== null) {
        (this.malformed ||= new Set()).add(name);
        const ev = { type: "region_malformed", field: name };
        if (this.offsets) Object.assign(ev, { start: s, end: e });
        ev.error = error;
        if (recovered !== null) ev.recovered = mode;
        events.push(ev);
        if (recovered !== null && mode === "content") {
          const iname = this.t.fields[this.t.implicit].name;
          const [raw, v] = recovered;
          if (this.offsets) events.push({ type: "region_open", field: iname, start: this.openStart, end: this.openStart });
          else events.push({ type: "region_open", field: iname });
          // (without prompt chunks, the prompt's characters are never in a chunk: the value still holds them)
          const chunk = this.promptEnd > this.openAt ? raw.slice(this.promptEnd - this.openAt) : raw;
          if (chunk) events.push({ type: "region_chunk", field: iname, text: chunk, dirty: this.t.dirty[this.t.implicit] });
          if (this.offsets) events.push({ type: "region_close", field: iname, start: e, end: e, value: v });
          else events.push({ type: "region_close", field: iname, value: v });
        }
      } else if (this.offsets) events.push({ type: "region_close", field: name, start: s, end: e, value });
      else events.push({ type: "region_close", field: name, value });
    }
    this.current = this.t.implicit;
    this.captures = {};
    this.body = [];
    this.opened = false;
    this.jsonEnd = null;
    this.closing = "";
  }
}

const PREFIX_REQUIRED = "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before generation); pass \"\" to opt out explicitly.";

/** Streaming parser for one generation (the twin of chatparse.ResponseParser).
 *
 *   new ResponseParser(tables, prefix, { tools, warn, dialect, offsets, malformed })
 *
 * `dialect`: "transformers" (default), "vllm" (vLLM 0.33.0's serving dialect: spans and captures on events,
 * region_malformed events that do not end the parse, `inputText`) or a dialect object (resolveDialect);
 * `offsets` and `malformed` set those two options over it. */
export class ResponseParser {
  constructor(tables, prefix, { tools = null, warn = null, dialect = null, offsets = null, malformed = null } = {}) {
    if (!(tables instanceof Tables)) throw E("TypeError", "ResponseParser needs Tables from loadTables()");
    const d = resolveDialect(dialect, { offsets, malformed });
    if (prefix === null || prefix === undefined) throw E("ValueError", PREFIX_REQUIRED);
    this.tables = tables;
    this.dialect = d;
    this.core = new StreamParser(tables, toolParams(tools), warn, d);
    this.initialEvents = [];
    if (prefix) {
      const cut = tables.cutPrefix(prefix, warn);
      if (cut) {
        this.initialEvents = this.core.feed(cut);
        if (!d.promptChunks) this.core.promptEnd = cut.length;
      }
    }
  }

  feed(text) {
    return this.core.feed(text);
  }

  finalize() {
    return this.core.finish();
  }

  /** The parser's input after start-anchor truncation: the cut prefix, then everything fed (before the first
   * feed, its length in code points is where generated text begins). Kept only in a dialect with inputText
   * ("vllm"); PyError("AttributeError") otherwise. */
  get inputText() {
    return this.core.inputText();
  }

  get input_text() {
    return this.core.inputText();
  }
}

/** The error of the first region_malformed event in `events`, thrown (how parseResponse ends in a recovering
 * dialect). */
function raiseMalformed(events) {
  for (const ev of events) if (ev.type === "region_malformed" && !hasOwn(ev, "recovered")) throw ev.error; // (on_error handled the others)
}

/** Parse a complete generation into a message object. With malformed "event" (the "vllm" dialect) the whole
 * text is parsed first: then a missing required field is thrown, else the first region_malformed error. */
export function parseResponse(text, tables, { prefix, tools = null, warn = null, dialect = null, malformed = null } = {}) {
  const p = new ResponseParser(tables, prefix, { tools, warn, dialect, malformed });
  const events = [...p.initialEvents, ...p.feed(text)];
  const [message, final] = p.finalize();
  if (p.dialect.malformed === "event") raiseMalformed([...events, ...final]);
  return message;
}

// ------------------------------------------------------------------------------------------------ values

// Python's str.isspace() characters (str.strip() removes these).
const PY_SPACE = new Set([0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
  0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);

export function pyStrip(s) {
  let i = 0, j = s.length;
  while (i < j && PY_SPACE.has(s.charCodeAt(i))) i++;
  while (j > i && PY_SPACE.has(s.charCodeAt(j - 1))) j--;
  return s.slice(i, j);
}

function stripIfAsked(text, args) {
  if (truthy(pyGet(args, "strip", true))) {
    if (typeof text !== "string") throw E("AttributeError", `'${pyTypeName(text)}' object has no attribute 'strip'`);
    return pyStrip(text);
  }
  return text;
}

const ND = /\p{Nd}/u;
const digitCache = new Map();
function decimalValue(cp) {
  // Unicode decimal digits come in runs of ten, 0..9, so the value is the offset within the run.
  if (!ND.test(String.fromCodePoint(cp))) return -1;
  if (digitCache.has(cp)) return digitCache.get(cp);
  let start = cp;
  while (start > 0 && ND.test(String.fromCodePoint(start - 1))) start--;
  const v = (cp - start) % 10;
  digitCache.set(cp, v);
  return v;
}

function toAsciiNumber(s) {
  // CPython's _PyUnicode_TransformDecimalAndSpaceToASCII, then strip ASCII whitespace; null if invalid.
  let out = "";
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp < 127) out += ch;
    else if (PY_SPACE.has(cp)) out += " ";
    else {
      const d = decimalValue(cp);
      if (d < 0) return null;
      out += String(d);
    }
  }
  return out.replace(/^[ \t\n\v\f\r]+|[ \t\n\v\f\r]+$/g, "");
}

/** Python int(str) (base 10). */
export function pyInt(s) {
  if (typeof s !== "string") throw E("TypeError", `int() argument must be a string, a bytes-like object or a real number, not '${pyTypeName(s)}'`);
  const a = toAsciiNumber(s);
  const m = a === null ? null : /^([+-]?)([0-9](?:_?[0-9])*)$/.exec(a);
  if (m === null) throw E("ValueError", `invalid literal for int() with base 10: ${pyRepr(s)}`);
  const digits = m[2].replace(/_/g, "");
  if (digits.length > 4300) throw E("ValueError", "Exceeds the limit (4300 digits) for integer string conversion");
  const v = Number(digits);
  return v === 0 ? 0 : m[1] === "-" ? -v : v;
}

/** Python float(str). */
export function pyFloat(s) {
  if (typeof s !== "string") throw E("TypeError", `float() argument must be a string or a real number, not '${pyTypeName(s)}'`);
  const a = toAsciiNumber(s);
  const bad = () => E("ValueError", `could not convert string to float: ${pyRepr(s)}`);
  if (a === null) throw bad();
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(a);
  if (special) {
    if (special[2].toLowerCase() === "nan") return NaN;
    return special[1] === "-" ? -Infinity : Infinity;
  }
  const D = "[0-9](?:_?[0-9])*";
  if (!new RegExp(`^[+-]?(?:${D}(?:\\.(?:${D})?)?|\\.${D})(?:[eE][+-]?${D})?$`).test(a)) throw bad();
  return Number(a.replace(/_/g, ""));
}

/** Python json.loads (C scanner): NaN/Infinity literals, duplicate keys keep the first position and the last
 * value, errors are JSONDecodeError (integers over 4300 digits: ValueError). */
/** Python's json.loads. With `mark` (the table file's sections, `loadTables`): floats as PyFloat (so 1.0 is not
 * the integer 1), integers beyond 2^53 as BigInt, objects with a null prototype and their key order in [KEYS]. */
export function pyJsonLoads(s, mark = false, at = -1) {
  if (typeof s !== "string") throw E("TypeError", `the JSON object must be str, bytes or bytearray, not ${pyTypeName(s)}`);
  const fail = (msg, pos) => {
    // Python's wording: line and column (1-based) and the offset, in code points
    const before = s.slice(0, pos);
    const nl = before.lastIndexOf("\n");
    const line = before.split("\n").length;
    const cp = cpLen(before);
    const col = nl < 0 ? cp + 1 : cp - cpLen(before.slice(0, nl));
    return E("JSONDecodeError", `${msg}: line ${line} column ${col} (char ${cp})`);
  };
  if (at < 0 && s.charCodeAt(0) === 0xfeff) throw fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
  let i = at < 0 ? 0 : at;
  const n = s.length;
  const ws = () => {
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) i++;
      else break;
    }
  };
  const str = () => {
    // s[i] === '"'; an unterminated string is reported at its opening quote, however many escapes it read
    const begin = i;
    i++;
    let out = "";
    let chunkStart = i;
    for (;;) {
      if (i >= n) throw fail("Unterminated string starting at", begin);
      const c = s.charCodeAt(i);
      if (c === 0x22) {
        out += s.slice(chunkStart, i);
        i++;
        return out;
      }
      if (c < 0x20) throw fail("Invalid control character at", i);
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += s.slice(chunkStart, i);
      const e = s[i + 1];
      if (e === undefined) throw fail("Unterminated string starting at", begin);
      const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
      if (hasOwn(simple, e)) {
        out += simple[e];
        i += 2;
      } else if (e === "u") {
        // CPython's scanner wants a character after the four digits (the closing quote at least): an escape
        // that ends the text is an invalid escape, not an unterminated string
        if (i + 6 >= n) throw fail("Invalid \\uXXXX escape", i + 1);
        const h = s.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(h)) throw fail("Invalid \\uXXXX escape", i + 1);
        let cp = parseInt(h, 16);
        i += 6;
        if (cp >= 0xd800 && cp <= 0xdbff && i + 6 < n && s[i] === "\\" && s[i + 1] === "u") {
          const h2 = s.slice(i + 2, i + 6);
          if (/^[0-9a-fA-F]{4}$/.test(h2)) {
            const lo = parseInt(h2, 16);
            if (lo >= 0xdc00 && lo <= 0xdfff) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
              i += 6;
            }
          }
        }
        out += String.fromCodePoint(cp);
      } else {
        throw fail("Invalid \\escape", i);
      }
      chunkStart = i;
    }
  };
  const value = () => {
    if (i >= n) throw fail("Expecting value", i);
    const c = s[i];
    if (c === '"') return str();
    if (c === "{") {
      i++;
      const obj = mark ? markedObject() : {};
      ws();
      if (s[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        if (s[i] !== '"') throw fail("Expecting property name enclosed in double quotes", i);
        const k = str();
        ws();
        if (s[i] !== ":") throw fail("Expecting ':' delimiter", i);
        i++;
        ws();
        const v = value();
        if (mark) markedSet(obj, k, v);
        else setKey(obj, k, v);
        ws();
        if (s[i] === "}") {
          i++;
          return obj;
        }
        if (s[i] !== ",") throw fail("Expecting ',' delimiter", i);
        i++;
        ws();
      }
    }
    if (c === "[") {
      i++;
      const arr = [];
      ws();
      if (s[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        ws();
        if (s[i] === "]") {
          i++;
          return arr;
        }
        if (s[i] !== ",") throw fail("Expecting ',' delimiter", i);
        i++;
        ws();
      }
    }
    for (const [lit, v] of [["null", null], ["true", true], ["false", false], ["NaN", NaN], ["Infinity", Infinity], ["-Infinity", -Infinity]]) {
      if (s.startsWith(lit, i)) {
        i += lit.length;
        return mark && typeof v === "number" ? new PyFloat(v) : v;
      }
    }
    const m = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
    m.lastIndex = i;
    const r = m.exec(s);
    if (r === null) throw fail("Expecting value", i);
    i += r[0].length;
    if (r[1] === undefined && r[2] === undefined) {
      const digits = r[0].replace("-", "");
      if (digits.length > 4300) throw E("ValueError", "Exceeds the limit (4300 digits) for integer string conversion");
      const v = Number(r[0]);
      if (mark && !Number.isSafeInteger(v)) return BigInt(r[0]);
      return v === 0 ? 0 : v;
    }
    return mark ? new PyFloat(Number(r[0])) : Number(r[0]);
  };
  if (at >= 0) return [value(), i]; // Python's JSONDecoder().raw_decode(s, at): no whitespace skipped, no check after
  ws();
  const v = value();
  ws();
  if (i !== n) throw fail("Extra data", i);
  return v;
}

const SENT_OPEN = "\x01", SENT_CLOSE = "\x02";

function parseJson(text, args, tables) {
  const delims = pyGet(args, "string_delims", []);
  if (truthy(delims)) {
    if (typeof text !== "string") throw E("TypeError", "'in <string>' requires string as left operand");
    if (text.includes(SENT_OPEN) || text.includes(SENT_CLOSE)) throw E("ValueError", "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely.");
  }
  const captured = [];
  let working = text;
  if (typeof delims === "string" || Array.isArray(delims) || isDict(delims)) {
    for (const pair of isDict(delims) ? Object.keys(delims) : delims) {
      let od, cd;
      if (typeof pair === "string") {
        const cps = Array.from(pair);
        if (cps.length !== 2) throw E("ValueError", "string_delims: expected [open, close] pairs");
        [od, cd] = cps;
      } else if (Array.isArray(pair)) {
        if (pair.length !== 2) throw E("ValueError", "string_delims: expected [open, close] pairs");
        [od, cd] = pair;
      } else {
        throw E("TypeError", "string_delims: expected [open, close] pairs");
      }
      if (typeof od !== "string" || typeof cd !== "string") throw E("TypeError", "string_delims: delimiters must be strings");
      if (typeof working !== "string") throw E("TypeError", "expected string or buffer");
      const t = { source: `${jsEscape(od)}([^]*?)${jsEscape(cd)}`, groups: {} };
      working = pySub(t, working, (m) => {
        captured.push(m[1]);
        return `${SENT_OPEN}${captured.length - 1}${SENT_CLOSE}`;
      });
    }
  } else {
    throw E("TypeError", `'${pyTypeName(delims)}' object is not iterable`);
  }
  if (truthy(pyGet(args, "unquoted_keys", false))) {
    if (typeof working !== "string") throw E("TypeError", "expected string or buffer");
    working = pySub(tables ? tables.bareKey : { source: `(?<=[{,])(${WORD_FALLBACK}+):`, groups: {} }, working, (m) => `"${m[1]}":`);
  }
  captured.forEach((inner, index) => {
    working = working.split(`${SENT_OPEN}${index}${SENT_CLOSE}`).join(JSON.stringify(inner));
  });
  try {
    return pyJsonLoads(working);
  } catch (e) {
    if (!(e instanceof PyError) || e.pyType !== "JSONDecodeError") throw e;
    if (truthy(pyGet(args, "allow_non_json", undefined))) return stripIfAsked(text, args);
    if (working === text) throw E("ValueError", `json parser could not parse region as JSON.\nContent: ${pyRepr(text)}\nError: ${e.message}`);
    throw E("ValueError", `json: could not parse after dialect transforms.\nOriginal: ${pyRepr(text)}\nTransformed: ${pyRepr(working)}\nError: ${e.message}`);
  }
}

function parseNested(raw, valueParser, tables, unescape = false) {
  if (valueParser === null) return raw;
  const name = pyGet(valueParser, "name", "text");
  if (!unescape || !isDict(valueParser) || name !== "json") return parseContent(raw, name, pyGet(valueParser, "args", {}), tables);
  // format extension escaped_json_values (runtime/values/parsers.py `_unescaping`): where the json value parser raises a
  // ValueError or gives a string, the text read as the inside of a JSON string literal, then as JSON, wins
  let value;
  try {
    value = parseContent(raw, name, pyGet(valueParser, "args", {}), tables);
  } catch (e) {
    if (!(e instanceof PyError && isValueError(e))) throw e;
    const again = unescapedJson(raw);
    if (again === MISS) throw e;
    return again;
  }
  if (typeof value === "string") {
    const again = unescapedJson(raw);
    if (again !== MISS) return again;
  }
  return value;
}

const MISS = Symbol("miss");
function unescapedJson(raw) {
  if (typeof raw !== "string") return MISS;
  try {
    const inner = pyJsonLoads('"' + raw + '"');
    if (jsonTooDeepAt(inner) >= 0) return MISS;
    return pyJsonLoads(inner);
  } catch (e) {
    if (e instanceof PyError && isValueError(e)) return MISS;
    throw e;
  }
}

function parseXmlInline(text, args, tables, unescape = false) {
  const tagPattern = pyGet(args, "tag_pattern", null);
  if (tagPattern === null) throw E("ValueError", "xml-inline: 'tag_pattern' content_arg is required");
  const valueParser = pyGet(args, "value_parser", null);
  const merge = truthy(pyGet(args, "merge_duplicates", false));
  const t = tables.contentRegex(tagPattern);
  if (typeof text !== "string") throw E("TypeError", "expected string or buffer");
  const result = {};
  for (const m of pyFinditer(t, text, `tag_pattern ${JSON.stringify(tagPattern)}`)) {
    const groups = groupdict(m, t);
    const key = hasOwn(groups, "key") ? groups.key : null;
    if (key === null) throw E("ValueError", `xml-inline: tag_pattern must have a named group 'key'. Pattern: ${tagPattern}`);
    const value = parseNested(hasOwn(groups, "value") ? groups.value : "", valueParser, tables, unescape);
    if (merge && hasOwn(result, key)) {
      let existing = result[key];
      if (!Array.isArray(existing)) {
        existing = [existing];
        setKey(result, key, existing);
      }
      existing.push(value);
    } else {
      setKey(result, key, value);
    }
  }
  return result;
}

function pySplit(text, sep) {
  if (sep === null) {
    const out = [];
    let cur = "";
    for (const ch of text) {
      if (PY_SPACE.has(ch.codePointAt(0))) {
        if (cur) out.push(cur);
        cur = "";
      } else cur += ch;
    }
    if (cur) out.push(cur);
    return out;
  }
  if (typeof sep !== "string") throw E("TypeError", `must be str or None, not ${pyTypeName(sep)}`);
  if (!sep) throw E("ValueError", "empty separator");
  return text.split(sep);
}

function parseKvLines(text, args, tables, unescape = false) {
  const lineSep = pyGet(args, "line_sep", "\n");
  const kvSep = pyGet(args, "kv_sep", ":");
  const valueParser = pyGet(args, "value_parser", null);
  if (typeof text !== "string") throw E("AttributeError", `'${pyTypeName(text)}' object has no attribute 'split'`);
  const result = {};
  for (const rawLine of pySplit(text, lineSep)) {
    const line = stripIfAsked(rawLine, args);
    if (!line) continue;
    if (typeof kvSep !== "string") throw E("TypeError", "'in <string>' requires string as left operand");
    if (!line.includes(kvSep)) continue;
    if (!kvSep) throw E("ValueError", "empty separator");
    const at = line.indexOf(kvSep);
    const key = line.slice(0, at), value = line.slice(at + kvSep.length);
    setKey(result, stripIfAsked(key, args), parseNested(stripIfAsked(value, args), valueParser, tables, unescape));
  }
  return result;
}

// ------------------------------------------------------------------------------------------------ python-calls
// The `python-calls` content parser (format extension python_calls; chatparse/runtime/values/pycalls.py, FORMAT.md
// "Extensions"): Python call syntax to [{name, arguments}], the same grammar, values and error messages.

const PY_MAX_DEPTH = 100;
const PY_WS = " \t\f\r\n";
const PY_INLINE_WS = " \t\f";
const PY_IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const PY_KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except finally for " +
  "from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "));
const PY_CONSTANTS = { True: true, False: false, None: null, true: true, false: false, null: null };
const PY_DIGITS = "[0-9](?:_?[0-9])*";
const PY_POINTFLOAT = `(?:(?:${PY_DIGITS})?\\.${PY_DIGITS}|${PY_DIGITS}\\.)`;
const PY_FLOAT = `(?:${PY_POINTFLOAT}(?:[eE][+-]?${PY_DIGITS})?|${PY_DIGITS}[eE][+-]?${PY_DIGITS})`;
const PY_INT = "(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[1-9](?:_?[0-9])*|0+(?:_?0)*)";
const PY_NUMBER = new RegExp(`(?<imag>(?:${PY_FLOAT}|${PY_DIGITS})[jJ])|(?<float>${PY_FLOAT})|(?<int>${PY_INT})`, "y");
const PY_SIMPLE_ESCAPES = { "\\": "\\", "'": "'", '"': '"', a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };

class PyCallsParser {
  constructor(text) {
    this.text = text;
    this.n = text.length;
    this.pos = 0;
  }
  error(what, at = null) {
    return E("ValueError", `python-calls: ${what} at offset ${cpLen(this.text.slice(0, at === null ? this.pos : at))}`);
  }
  skip(chars = PY_WS) {
    while (this.pos < this.n && chars.includes(this.text[this.pos])) this.pos++;
  }
  peek() {
    return this.pos < this.n ? this.text[this.pos] : "";
  }
  found() {
    return this.pos < this.n ? pyRepr(String.fromCodePoint(this.text.codePointAt(this.pos))) : "the end of the text";
  }
  matchAt(re, i) {
    re.lastIndex = i;
    return re.exec(this.text);
  }
  body() {
    this.skip();
    if (this.pos === this.n) return [];
    const calls = [];
    if (this.peek() === "[") {
      this.pos++;
      this.skip();
      while (this.peek() !== "]") {
        calls.push(this.call(1, PY_WS));
        this.skip();
        if (this.peek() === ",") {
          this.pos++;
          this.skip();
        } else if (this.peek() !== "]") throw this.error(`expected ',' or ']' after a call, found ${this.found()}`);
      }
      this.pos++;
      this.skip();
      if (this.pos !== this.n) throw this.error(`unexpected ${this.found()} after the list of calls`);
      return calls;
    }
    for (;;) {
      calls.push(this.call(0, PY_INLINE_WS));
      this.skip(PY_INLINE_WS);
      if (this.pos === this.n) return calls;
      const ch = this.peek();
      if (ch === ",") this.pos++;
      else if (ch !== "\r" && ch !== "\n") throw this.error(`expected ',' or a new line after a call, found ${this.found()}`);
      this.skip();
      if (this.pos === this.n) return calls;
    }
  }
  ident(what) {
    const m = this.matchAt(PY_IDENT, this.pos);
    if (m === null) throw this.error(`expected ${what}, found ${this.found()}`);
    if (PY_KEYWORDS.has(m[0])) throw this.error(`${what} ${pyRepr(m[0])} is a Python keyword`);
    this.pos += m[0].length;
    return m[0];
  }
  afterWs(i) {
    while (i < this.n && PY_WS.includes(this.text[i])) i++;
    return i;
  }
  call(depth, ws) {
    const parts = [this.ident("a function name")];
    this.skip(ws);
    while (this.peek() === ".") {
      this.pos++;
      this.skip(ws);
      parts.push(this.ident("a function name"));
      this.skip(ws);
    }
    const name = parts.join(".");
    if (this.peek() !== "(") throw this.error(`expected '(' after the function name ${pyRepr(name)}, found ${this.found()}`);
    depth = this.enter(depth);
    this.pos++;
    const args = {};
    let count = 0;
    this.skip();
    while (this.peek() !== ")") {
      const at = this.pos;
      if (this.peek() === "*") throw this.error(`*args and **kwargs are not supported (call ${pyRepr(name)})`);
      const m = this.matchAt(PY_IDENT, this.pos);
      const eq = m === null ? -1 : this.afterWs(this.pos + m[0].length);
      if (m === null || this.text[eq] !== "=" || this.text[eq + 1] === "=") {
        throw this.error(`positional argument ${count + 1} in the call to ${pyRepr(name)}; only keyword arguments (name=value) are supported`);
      }
      const key = this.ident("an argument name");
      if (hasOwn(args, key)) throw this.error(`keyword argument ${pyRepr(key)} repeated in the call to ${pyRepr(name)}`, at);
      this.skip();
      this.pos++;
      this.skip();
      setKey(args, key, this.value(depth));
      count++;
      this.skip();
      if (this.peek() === ",") {
        this.pos++;
        this.skip();
      } else if (this.peek() !== ")") throw this.error(`expected ',' or ')' in the call to ${pyRepr(name)}, found ${this.found()}`);
    }
    this.pos++;
    return { name, arguments: args };
  }
  enter(depth) {
    if (depth >= PY_MAX_DEPTH) throw this.error(`brackets nested more than ${PY_MAX_DEPTH} deep`);
    return depth + 1;
  }
  value(depth) {
    const ch = this.peek();
    const start = this.pos;
    if (ch === "'" || ch === '"') {
      let out = this.string();
      for (;;) {
        const save = this.pos;
        this.skip();
        if (this.peek() !== "'" && this.peek() !== '"') {
          this.pos = save;
          return out;
        }
        out += this.string();
      }
    }
    if (ch === "+" || ch === "-") {
      this.pos++;
      this.skip();
      if (!this.peek() || !"0123456789.".includes(this.peek())) throw this.error(`a sign must be followed by a number, found ${this.found()}`);
      const [x, isFloat] = this.number();
      return ch === "-" ? (isFloat || x !== 0 ? -x : 0) : x;
    }
    if (ch && "0123456789.".includes(ch)) return this.number()[0];
    if (ch === "[") {
      depth = this.enter(depth);
      this.pos++;
      return this.sequence(depth, "]");
    }
    if (ch === "(") {
      depth = this.enter(depth);
      this.pos++;
      this.skip();
      if (this.peek() === ")") {
        this.pos++;
        return [];
      }
      const first = this.value(depth);
      this.skip();
      if (this.peek() === ")") {
        this.pos++;
        return first;
      }
      if (this.peek() !== ",") throw this.error(`expected ',' or ')', found ${this.found()}`);
      this.pos++;
      return [first, ...this.sequence(depth, ")")];
    }
    if (ch === "{") {
      depth = this.enter(depth);
      this.pos++;
      return this.dict(depth);
    }
    const m = this.matchAt(PY_IDENT, this.pos);
    if (m !== null && hasOwn(PY_CONSTANTS, m[0])) {
      this.pos += m[0].length;
      return PY_CONSTANTS[m[0]];
    }
    if (m !== null) {
      const next = this.text[this.pos + m[0].length];
      if (next === "'" || next === '"') throw this.error(`string prefix ${pyRepr(m[0])} is not supported (f-strings, raw and byte strings)`);
      throw this.error(`${pyRepr(m[0])} is not a literal value (names, calls and expressions are not supported)`, start);
    }
    throw this.error(`expected a value, found ${this.found()}`);
  }
  sequence(depth, end) {
    const items = [];
    this.skip();
    while (this.peek() !== end) {
      items.push(this.value(depth));
      this.skip();
      if (this.peek() === ",") {
        this.pos++;
        this.skip();
      } else if (this.peek() !== end) throw this.error(`expected ',' or ${pyRepr(end)}, found ${this.found()}`);
    }
    this.pos++;
    return items;
  }
  dict(depth) {
    const out = {};
    this.skip();
    while (this.peek() !== "}") {
      const at = this.pos;
      const key = this.value(depth);
      this.skip();
      if (this.peek() !== ":") {
        if (this.peek() === "," || this.peek() === "}") throw this.error("sets are not supported (expected ':' after a dict key)");
        throw this.error(`expected ':' after a dict key, found ${this.found()}`);
      }
      if (typeof key !== "string") throw this.error("dict keys must be strings", at);
      this.pos++;
      this.skip();
      setKey(out, key, this.value(depth));
      this.skip();
      if (this.peek() === ",") {
        this.pos++;
        this.skip();
      } else if (this.peek() !== "}") throw this.error(`expected ',' or '}', found ${this.found()}`);
    }
    this.pos++;
    return out;
  }
  number() {
    // [value, isFloat]
    const start = this.pos;
    const m = this.matchAt(PY_NUMBER, start);
    if (m === null) throw this.error(`expected a number, found ${this.found()}`);
    const end = start + m[0].length;
    if (end < this.n && /^[A-Za-z0-9_.]$/.test(this.text[end])) throw this.error("invalid number literal", start);
    this.pos = end;
    if (m.groups.imag !== undefined) throw this.error("imaginary numbers are not supported", start);
    const lexeme = m[0].replaceAll("_", "");
    if (m.groups.float !== undefined) return [Number(lexeme), true];
    const base = { x: 16, o: 8, b: 2 }[lexeme.slice(1, 2).toLowerCase()] || 10;
    if (base === 10 && lexeme.length > 4300) throw this.error("an integer of more than 4300 digits", start);
    const big = base === 10 ? BigInt(lexeme) : BigInt("0" + lexeme.slice(1, 2).toLowerCase() + lexeme.slice(2));
    return [Number(big), false];
  }
  string() {
    const t = this.text;
    const start = this.pos;
    const quote = t[start];
    const q3 = quote.repeat(3);
    const triple = t.startsWith(q3, start);
    let i = start + (triple ? 3 : 1);
    let out = "";
    for (;;) {
      if (i >= this.n) throw this.error("unterminated string", start);
      const c = t[i];
      if (c === quote && (!triple || t.startsWith(q3, i))) {
        this.pos = i + (triple ? 3 : 1);
        return out;
      }
      if (c === "\\") {
        if (i + 1 >= this.n) throw this.error("unterminated string", start);
        const d = t[i + 1];
        if (hasOwn(PY_SIMPLE_ESCAPES, d)) {
          out += PY_SIMPLE_ESCAPES[d];
          i += 2;
        } else if (d === "\n") i += 2;
        else if (d === "\r") i += t[i + 2] === "\n" ? 3 : 2;
        else if ("01234567".includes(d)) {
          const m = /[0-7]{1,3}/y;
          m.lastIndex = i + 1;
          const digits = m.exec(t)[0];
          out += String.fromCodePoint(parseInt(digits, 8));
          i += 1 + digits.length;
        } else if (d === "x" || d === "u" || d === "U") {
          const width = { x: 2, u: 4, U: 8 }[d];
          const digits = t.slice(i + 2, i + 2 + width);
          if (digits.length !== width || !/^[0-9a-fA-F]+$/.test(digits)) throw this.error(`truncated \\${d} escape (needs ${width} hex digits)`, i);
          const code = parseInt(digits, 16);
          if (code > 0x10ffff) throw this.error(`\\${d} escape out of range`, i);
          out += String.fromCodePoint(code);
          i += 2 + width;
        } else if (d === "N") throw this.error("\\N{...} escapes are not supported", i);
        else {
          out += "\\";
          i += 1;
        }
        continue;
      }
      if (c === "\r" || c === "\n") {
        if (!triple) throw this.error("unterminated string (a new line inside a quoted string)", start);
        out += "\n";
        i += c === "\r" && t[i + 1] === "\n" ? 2 : 1;
        continue;
      }
      out += c;
      i++;
    }
  }
}

/** The `python-calls` parser (chatparse/runtime/values/pycalls.py): [{name, arguments}, ...] or a ValueError naming the offset. */
export function parsePythonCalls(text) {
  return new PyCallsParser(text).body();
}

/** Content parsers of format extensions: a field's `content` only, never a nested value_parser. */
const EXTENSION_PARSER_FNS = { "python-calls": (text) => parsePythonCalls(text), "json-values": (text) => parseJsonValues(text) };

// ------------------------------------------------------------------------------------------------ json-values
// The `json-values` content parser (format extension json_values; chatparse/runtime/values/json_values.py, FORMAT.md
// "Extensions"): comma-separated JSON values (each as Python's raw_decode reads it) to the list of them.
const JSON_VALUES_MAX_DEPTH = 512;

/** The index of the first [ or { of `text` outside string literals ("..." with backslash escapes, left to right) at
 * which the nesting passes 512, or -1 (runtime/values/json_values.py `too_deep_at`). */
function jsonTooDeepAt(text) {
  let openers = 0;
  for (let k = 0; k < text.length; k++) if (text[k] === "[" || text[k] === "{") openers++;
  if (openers <= JSON_VALUES_MAX_DEPTH) return -1;
  const strings = /"(?:[^"\\]|\\[\s\S])*"/gy;
  let depth = 0;
  for (let k = 0; k < text.length; k++) {
    const c = text[k];
    if (c === '"') {
      strings.lastIndex = k;
      if (strings.exec(text) !== null) {
        k = strings.lastIndex - 1;
        continue;
      }
    } else if (c === "[" || c === "{") {
      if (++depth > JSON_VALUES_MAX_DEPTH) return k;
    } else if (c === "]" || c === "}") depth--;
  }
  return -1;
}

/** The list of the comma-separated JSON values of `text`, or the ValueError runtime/values/json_values.py states. */
export function parseJsonValues(text) {
  if (typeof text !== "string") throw E("TypeError", "json-values: the body must be a string");
  const deep = jsonTooDeepAt(text);
  if (deep >= 0) throw E("ValueError", `json-values: brackets nested more than ${JSON_VALUES_MAX_DEPTH} deep at offset ${cpLen(text.slice(0, deep))}`);
  const ws = (k) => {
    while (k < text.length && (text[k] === " " || text[k] === "\t" || text[k] === "\n" || text[k] === "\r")) k++;
    return k;
  };
  const out = [];
  let i = ws(0);
  for (;;) {
    let value;
    try {
      [value, i] = pyJsonLoads(text, false, i);
    } catch (e) {
      if (e instanceof PyError && isValueError(e)) throw E("ValueError", `json-values: ${e.message}`);
      throw e;
    }
    out.push(value);
    i = ws(i);
    if (i === text.length) return out;
    if (text[i] !== ",") throw E("ValueError", `json-values: expected ',' or the end of the body at offset ${cpLen(text.slice(0, i))}`);
    i = ws(i + 1);
  }
}

const PARSERS = {
  text: (text, args) => stripIfAsked(text, args),
  int: (text, args) => pyInt(stripIfAsked(text, args)),
  float: (text, args) => pyFloat(stripIfAsked(text, args)),
  bool: (text, args) => {
    const s = stripIfAsked(text, args);
    if (typeof s !== "string") throw E("AttributeError", `'${pyTypeName(s)}' object has no attribute 'lower'`);
    const l = s.toLowerCase();
    return l === "true" || l === "1";
  },
  json: parseJson,
  "xml-inline": parseXmlInline,
  "kv-lines": parseKvLines,
};

/** Parse `text` with the content parser `name` configured by `args` (values.py parse_content). */
export function parseContent(text, name, args, tables) {
  if (typeof name !== "string") {
    if (Array.isArray(name) || isDict(name)) throw E("TypeError", `unhashable type: '${pyTypeName(name)}'`);
    throw E("KeyError", String(name));
  }
  if (!hasOwn(PARSERS, name)) throw E("KeyError", JSON.stringify(name));
  return PARSERS[name](text, args, tables);
}

// ------------------------------------------------------------------------------------------------ transform

function resolvePath(path, scope) {
  const [root, ...keys] = path.split(".");
  if (!scope.has(root)) throw E("KeyError", `transform placeholder '{${path}}' is not defined. Available: ${pyStrList([...scope.keys()].sort(cmpStr))}`);
  let value = scope.get(root);
  for (const key of keys) {
    if (!isDict(value)) throw E("ValueError", `transform placeholder '{${path}}' cannot index into ${pyTypeName(value)} at '${key}'`);
    if (!hasOwn(value, key)) throw E("ValueError", `transform placeholder '{${path}}' is missing key '${key}'. Available: ${pyStrList(Object.keys(value).sort(cmpStr))}`);
    value = value[key];
  }
  return value;
}

// `optional` (format extension optional_placeholders, runtime/values/optional_placeholders.py): group names whose
// placeholder, as a whole dict value, leaves its entry out when the name is not in the scope.
function applyTransform(template, scope, tables, optional = null) {
  if (Array.isArray(template)) return template.map((x) => applyTransform(x, scope, tables, optional));
  if (isDict(template)) {
    const out = {};
    for (const k of Object.keys(template)) {
      const v = template[k];
      if (optional !== null && typeof v === "string") {
        const m = tables.placeholder.exec(v);
        const root = m === null ? null : m[1].split(".")[0];
        if (root !== null && optional.includes(root) && !scope.has(root)) continue;
      }
      setKey(out, k, applyTransform(v, scope, tables, optional));
    }
    return out;
  }
  if (typeof template === "string") {
    const m = tables.placeholder.exec(template);
    if (m !== null) return resolvePath(m[1], scope);
  }
  return template;
}

function processValue(body, field, captures, tables) {
  const value = transformValue(body, field, captures, tables);
  return hasOwn(field, "decode_json_strings") ? decodeJsonStrings(value, field.decode_json_strings) : value;
}

// Format extension content_fallback (runtime/values/content_fallback.py): the field's own parser, then each listed one on
// a ValueError, KeyError or TypeError; the first value wins, else the field's own parser's error.
const fallbackError = (e) => e instanceof PyError && (isValueError(e) || e.pyType === "KeyError" || e.pyType === "TypeError");
function parseOwn(body, field, tables) {
  if (hasOwn(EXTENSION_PARSER_FNS, field.content)) return EXTENSION_PARSER_FNS[field.content](body);
  if (field.escaped_json_values === true && (field.content === "xml-inline" || field.content === "kv-lines")) return PARSERS[field.content](body, field.content_args, tables, true);
  return parseContent(body, field.content, field.content_args, tables);
}
function parseWithFallback(body, field, tables) {
  try {
    return parseOwn(body, field, tables);
  } catch (first) {
    if (!fallbackError(first)) throw first;
    for (const entry of field.content_fallback) {
      try {
        return parseContent(body, entry.content, entry.content_args, tables);
      } catch (e) {
        if (!fallbackError(e)) throw e;
      }
    }
    throw first;
  }
}

// Format extension unwrap_pattern (runtime/values/unwrap.py): each non-empty match in the body replaced by its group 'keep'.
function unwrapBody(body, pattern, tables) {
  const t = tables.contentRegex(pattern);
  let out = "";
  let at = 0;
  for (const m of pyFinditer(t, body, `unwrap_pattern ${JSON.stringify(pattern)}`)) {
    if (m[0].length === 0) continue;
    const keep = groupdict(m, t).keep;
    out += body.slice(at, m.index) + (typeof keep === "string" ? keep : "");
    at = m.index + m[0].length;
  }
  return at === 0 ? body : out + body.slice(at);
}

function transformValue(body, field, captures, tables) {
  if (hasOwn(field, "unwrap_pattern")) body = unwrapBody(body, field.unwrap_pattern, tables);
  let value = hasOwn(field, "content_fallback") ? parseWithFallback(body, field, tables) : parseOwn(body, field, tables);
  if (field.as_list === true && !Array.isArray(value)) value = [value];
  if (hasOwn(field, "key_aliases")) value = renameAliases(value, field.key_aliases);
  const template = field.transform;
  if (template === null || template === undefined) return value;
  const scope = new Map(Object.entries(captures));
  const optional = hasOwn(field, "optional_placeholders") ? field.optional_placeholders : null;
  if (!field.transform_each) {
    scope.set("content", value);
    return applyTransform(template, scope, tables, optional);
  }
  const name = field.name;
  if (!Array.isArray(value)) throw E("ValueError", `Field '${name}': transform_each requires the parsed content to be a list, got ${pyTypeName(value)}.`);
  return value.map((element) => {
    if (!isDict(element)) throw E("ValueError", `Field '${name}': transform_each requires each list element to be a dict, got ${pyTypeName(element)}.`);
    const s = new Map(scope);
    for (const k of Object.keys(element)) s.set(k, element[k]);
    return applyTransform(template, s, tables, optional);
  });
}

// ------------------------------------------------------------------------------------------------ value steps
// Format extensions around the transform (chatparse/runtime/values/steps.py): as_list and key_aliases before it,
// decode_json_strings after it; and schema-first typing of tool-call arguments (runtime/values/schema_typing.py).

function renamed(d, aliases) {
  // in the value's key order: of two aliases of one canonical key, the first in the value wins
  const rename = new Map();
  const targets = new Set();
  for (const key of Object.keys(d)) {
    if (!hasOwn(aliases, key)) continue;
    const canonical = aliases[key];
    if (!hasOwn(d, canonical) && !targets.has(canonical)) {
      rename.set(key, canonical);
      targets.add(canonical);
    }
  }
  if (!rename.size) return d;
  const out = {};
  for (const k of Object.keys(d)) setKey(out, rename.has(k) ? rename.get(k) : k, d[k]);
  return out;
}

function renameAliases(value, aliases) {
  if (isDict(value)) return renamed(value, aliases);
  if (Array.isArray(value)) return value.map((v) => (isDict(v) ? renamed(v, aliases) : v));
  return value;
}

function decodeJsonStrings(value, paths) {
  for (const d of Array.isArray(value) ? value : [value]) {
    if (!isDict(d)) continue;
    for (const path of paths) {
      const keys = path.split(".");
      let holder = d;
      for (const k of keys.slice(0, -1)) {
        holder = hasOwn(holder, k) ? holder[k] : null;
        if (!isDict(holder)) break;
      }
      const last = keys[keys.length - 1];
      if (!isDict(holder) || !hasOwn(holder, last) || typeof holder[last] !== "string") continue;
      let decoded;
      try {
        decoded = pyJsonLoads(holder[last]);
      } catch (e) {
        if (isValueError(e) || (e instanceof RangeError)) continue;
        throw e;
      }
      if (isDict(decoded)) setKey(holder, last, decoded);
    }
  }
  return value;
}

function pyFloatRepr(x) {
  // Python's repr() of a float: shortest round-trip digits, exponent form below 1e-4 and from 1e16 on.
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e16)) {
    const [mant, exp] = x.toExponential().split("e");
    const e = Number(exp);
    return `${mant}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  const s = Object.is(x, -0) ? "-0" : String(x);
  return Number.isInteger(x) ? `${s}.0` : s;
}

/** Python's json.dumps(value, ensure_ascii=False) (schema_typing: the JSON text of a value for a string parameter). */
export function pyJsonDumps(v) {
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "number") return Number.isInteger(v) && !Object.is(v, -0) ? BigInt(v).toString() : pyFloatRepr(v);
  if (typeof v === "string") {
    let out = '"';
    for (let i = 0; i < v.length; i++) {
      const c = v.charCodeAt(i);
      const ch = v[i];
      if (ch === '"') out += '\\"';
      else if (ch === "\\") out += "\\\\";
      else if (ch === "\n") out += "\\n";
      else if (ch === "\r") out += "\\r";
      else if (ch === "\t") out += "\\t";
      else if (ch === "\b") out += "\\b";
      else if (ch === "\f") out += "\\f";
      else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, "0")}`;
      else out += ch;
    }
    return out + '"';
  }
  if (Array.isArray(v)) return `[${v.map(pyJsonDumps).join(", ")}]`;
  return `{${Object.keys(v).map((k) => `${pyJsonDumps(k)}: ${pyJsonDumps(v[k])}`).join(", ")}}`;
}

function schemaCoerce(raw, types, fallback = null) {
  const r = castFirst(raw, types, true);
  if (r[0]) return r[1];
  return fallback === null ? raw : fallback[0];
}

function isSchemaType(v, type) {
  if (type === "string") return typeof v === "string";
  if (type === "boolean") return typeof v === "boolean";
  if (type === "null") return v === null;
  if (type === "object") return isDict(v);
  if (type === "array") return Array.isArray(v);
  if (type === "integer") return typeof v === "number" && Number.isInteger(v);
  if (type === "number") return typeof v === "number";
  return false;
}

function fitValue(v, types, text = null) {
  if (typeof v === "string") return schemaCoerce(v, types);
  if (typeof text === "string") return schemaCoerce(text, types, [v]);
  if (types.some((t) => isSchemaType(v, t))) return v;
  return types.includes("string") ? pyJsonDumps(v) : v;
}

/** The arguments' texts (schema_typing.py): the region made again without its value parser (xml-inline and
 * kv-lines with one), or null (no value parser, or the twin fails on the body). */
function argumentTexts(body, field, captures, tables) {
  const args = field.content_args;
  if ((field.content !== "xml-inline" && field.content !== "kv-lines") || !isDict(args) || !hasOwn(args, "value_parser") || args.value_parser === null) return null;
  const twinArgs = {};
  for (const k of Object.keys(args)) if (k !== "value_parser") setKey(twinArgs, k, args[k]);
  try {
    return processValue(body, { ...field, content_args: twinArgs }, captures, tables);
  } catch (e) {
    if (e instanceof PyError && ["ValueError", "KeyError", "TypeError", "JSONDecodeError"].includes(e.pyType)) return null;
    throw e;
  }
}

/** coerceToolCalls with the schema-first rules (format extension argument_types, runtime/values/schema_typing.py);
 * `texts` the value made without the value parser (argumentTexts) or null. */
export function typeToolCalls(value, params, texts = null) {
  if (Array.isArray(value)) {
    const twins = Array.isArray(texts) && texts.length === value.length ? texts : null;
    return value.map((v, i) => typeToolCalls(v, params, twins === null ? null : twins[i]));
  }
  const fn = isDict(value) && hasOwn(value, "function") ? value.function : null;
  if (!isDict(fn)) return value;
  const name = hasOwn(fn, "name") ? fn.name : null;
  const args = hasOwn(fn, "arguments") ? fn.arguments : null;
  if (typeof name !== "string" || !isDict(args)) return value;
  const properties = params.get(name);
  if (!truthy(properties)) return value;
  const tfn = isDict(texts) && hasOwn(texts, "function") ? texts.function : null;
  const targs = isDict(tfn) && hasOwn(tfn, "arguments") && isDict(tfn.arguments) ? tfn.arguments : null;
  const argTexts = targs !== null && Object.keys(targs).join("\u0000") === Object.keys(args).join("\u0000") ? targs : {};
  for (const key of Object.keys(args)) {
    if (!hasOwn(properties, key)) continue;
    const types = schemaTypes(properties[key]);
    if (!types.length) continue;
    const arg = args[key];
    const text = hasOwn(argTexts, key) ? argTexts[key] : null;
    if (Array.isArray(arg) && !types.includes("array") && typeof text !== "string") {
      const each = Array.isArray(text) && text.length === arg.length ? text : null;
      args[key] = arg.map((x, i) => fitValue(x, types, each === null ? null : each[i]));
    } else args[key] = fitValue(arg, types, text);
  }
  return value;
}

// ------------------------------------------------------------------------------------------------ coercion

export function schemaTypes(schema) {
  if (!isDict(schema)) return [];
  const declared = hasOwn(schema, "type") ? schema.type : null;
  const names = [];
  if (typeof declared === "string") names.push(declared);
  else if (Array.isArray(declared)) for (const x of declared) if (typeof x === "string") names.push(x);
  for (const key of ["anyOf", "oneOf"]) {
    const branches = hasOwn(schema, key) ? schema[key] : null;
    if (!truthy(branches)) continue;
    if (Array.isArray(branches)) for (const b of branches) names.push(...schemaTypes(b));
    else if (typeof branches !== "string" && !isDict(branches)) throw E("TypeError", `'${pyTypeName(branches)}' object is not iterable`);
  }
  if (truthy(hasOwn(schema, "nullable") ? schema.nullable : null) && !names.includes("null")) names.push("null");
  return names;
}

const BOOL_TEXT = { true: true, 1: true, false: false, 0: false };

function tryCast(raw, type) {
  if (type === "integer") {
    try {
      return [true, pyInt(raw)];
    } catch (e) {
      if (!isValueError(e)) throw e;
      const x = pyFloat(raw);
      return Number.isInteger(x) ? [true, x === 0 ? 0 : x] : [false, null];
    }
  }
  if (type === "number") {
    const x = pyFloat(raw);
    if (!Number.isFinite(x)) return [false, null];
    // Python keeps an int for text without a point ("-0" -> 0, not -0.0)
    return [true, x === 0 && Number.isInteger(x) && !raw.includes(".") ? 0 : x];
  }
  if (type === "boolean") {
    const w = pyStrip(raw).toLowerCase();
    return hasOwn(BOOL_TEXT, w) ? [true, BOOL_TEXT[w]] : [false, null];
  }
  if (type === "null") {
    const w = pyStrip(raw);
    return w === "null" || w === "None" ? [true, null] : [false, null];
  }
  if (type === "object" || type === "array") {
    const v = pyJsonLoads(raw);
    return (type === "object" ? isDict(v) : Array.isArray(v)) ? [true, v] : [false, null];
  }
  return [false, null];
}

// [true, value]: raw cast to the first of types that accepts it (with keepString, "string" takes it as it is);
// [false, null] when none does. A ValueError of a cast means: try the next type (coerce.cast_first).
function castFirst(raw, types, keepString = false) {
  for (const type of types) {
    if (keepString && type === "string") return [true, raw];
    let r;
    try {
      r = tryCast(raw, type);
    } catch (e) {
      if (isValueError(e)) continue;
      throw e;
    }
    if (r[0]) return [true, r[1]];
  }
  return [false, null];
}

export function coerce(raw, types) {
  const r = castFirst(raw, types);
  return r[0] ? r[1] : raw;
}

export function toolParams(tools) {
  const params = new Map();
  for (const tool of tools || []) {
    if (!isDict(tool)) continue;
    const fn = hasOwn(tool, "function") ? tool.function : tool;
    if (!isDict(fn) || typeof fn.name !== "string" || !hasOwn(fn, "name")) continue;
    const parameters = hasOwn(fn, "parameters") ? fn.parameters : null;
    const properties = isDict(parameters) && hasOwn(parameters, "properties") ? parameters.properties : null;
    params.set(fn.name, isDict(properties) ? properties : {});
  }
  return params;
}

export function coerceToolCalls(value, params) {
  if (Array.isArray(value)) return value.map((v) => coerceToolCalls(v, params));
  const fn = isDict(value) && hasOwn(value, "function") ? value.function : null;
  if (!isDict(fn)) return value;
  const name = hasOwn(fn, "name") ? fn.name : null;
  const args = hasOwn(fn, "arguments") ? fn.arguments : null;
  if (typeof name !== "string" || !isDict(args)) return value;
  const properties = params.get(name);
  if (!truthy(properties)) return value;
  for (const key of Object.keys(args)) {
    if (!hasOwn(properties, key)) continue;
    const types = schemaTypes(properties[key]);
    if (!types.length) continue;
    const arg = args[key];
    if (typeof arg === "string") args[key] = coerce(arg, types);
    else if (Array.isArray(arg) && !types.includes("array")) args[key] = arg.map((x) => (typeof x === "string" ? coerce(x, types) : x));
  }
  return value;
}

// ------------------------------------------------------------------------------------------------ token ids
//
// The token engine (chatparse/runtime/tokens/): token ids in, decoded by the table file's token section
// (FORMAT.md section 8) exactly as the tokenizer's own decode does - bytes of a character split across tokens
// held until it is complete, a U+FFFD exactly where Python's errors="replace" puts one, ByteFallback runs,
// Metaspace first-token texts, strip_start and transformers' clean_up_tokenization streamed - and the decoded
// text fed to the character engine. So the events are exactly those the character engine gives on the decoded
// text, which is what Python's TokenParser guarantees for its own (its fast paths only skip work).

const TOKENS_PREFIX_REQUIRED = "`TokenParser`/`parse_tokens` requires `prefix` or `prefix_ids` (the chat prompt sent to the model before " +
  "generation), because chat templates often pre-write part of the assistant message (e.g. an opening " +
  "`<think>` tag) that the parser must see to parse the output correctly. If the generation already contains " +
  'the complete message, pass `prefix=""` or `prefix_ids=[]` to opt out explicitly.';
const CLEANUP_RULES = [[" .", "."], [" ?", "?"], [" !", "!"], [" ,", ","], [" ' ", "'"], [" n't", "n't"], [" 'm", "'m"], [" 's", "'s"], [" 've", "'ve"], [" 're", "'re"]];
const utf8Lenient = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The vocabulary of a token section: per-token bytes and text (`chatparse.runtime.tokens.tables.LoadedVocab`).
 * Token texts are decoded on first use (a 150k-token file costs nothing per token until the token is seen). */
export class TokenVocab {
  constructor(sec) {
    const m = sec.meta;
    this.size = m.size;
    this.kind = m.kind;
    this.stripChar = m.strip_char;
    this.stripStart = m.strip_start;
    this.cleanup = m.cleanup;
    this.name = m.name;
    this.offsets = sec.offsets;
    this.blob = sec.bytes;
    this.flags = sec.flags;
    this.texts = new Array(this.size); // cache: string, or null (no text of its own)
    this.firstText = new Map();
    for (let k = 0; k < sec.firstIds.length; k++) {
      this.firstText.set(sec.firstIds[k], utf8Strict.decode(sec.firstBytes.subarray(sec.firstOffsets[k], sec.firstOffsets[k + 1])));
    }
  }

  /** Token i's bytes ("" for a skipped token of the bytes kind: it decodes to nothing, whatever the file holds). */
  bytesOf(i) {
    if (this.flags[i] & T_SKIP) return this.blob.subarray(0, 0);
    return this.blob.subarray(this.offsets[i], this.offsets[i + 1]);
  }

  /** Token i's text on its own ("" when skipped; null without TEXT: a byte token or incomplete UTF-8). */
  textOf(i) {
    let t = this.texts[i];
    if (t === undefined) {
      const f = this.flags[i];
      t = f & T_SKIP ? "" : f & T_TEXT ? utf8Strict.decode(this.blob.subarray(this.offsets[i], this.offsets[i + 1])) : null;
      this.texts[i] = t;
    }
    return t;
  }

  /** The tokenizer's decode of a whole sequence (ids in range). */
  decode(ids) {
    const d = new TokenDecoder(this);
    return d.feed(ids) + d.finish();
  }
}

/** UTF-8 bytes to text as Python's `codecs.utf_8_decode(data, "replace", final)`: one U+FFFD per maximal invalid
 * subpart; unless `final`, a valid but incomplete sequence at the end is left undecoded. Returns [text, bytes
 * consumed]. */
function utf8Replace(data, final) {
  const n = data.length;
  let out = "";
  let i = 0, run = 0; // [run, i): valid UTF-8 not yet copied out
  while (i < n) {
    const b = data[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let need, lo, hi;
    if (b >= 0xc2 && b <= 0xdf) [need, lo, hi] = [1, 0x80, 0xbf];
    else if (b === 0xe0) [need, lo, hi] = [2, 0xa0, 0xbf];
    else if ((b >= 0xe1 && b <= 0xec) || b === 0xee || b === 0xef) [need, lo, hi] = [2, 0x80, 0xbf];
    else if (b === 0xed) [need, lo, hi] = [2, 0x80, 0x9f];
    else if (b === 0xf0) [need, lo, hi] = [3, 0x90, 0xbf];
    else if (b >= 0xf1 && b <= 0xf3) [need, lo, hi] = [3, 0x80, 0xbf];
    else if (b === 0xf4) [need, lo, hi] = [3, 0x80, 0x8f];
    else need = 0;
    let k = 0;
    if (need && i + 1 < n && data[i + 1] >= lo && data[i + 1] <= hi) {
      k = 1;
      while (k < need && i + 1 + k < n && data[i + 1 + k] >= 0x80 && data[i + 1 + k] <= 0xbf) k++;
    }
    if (need && k === need) {
      i += 1 + k;
      continue;
    }
    if (need && i + 1 + k === n && !final) break; // an incomplete character at the end: held
    if (i > run) out += utf8Lenient.decode(data.subarray(run, i));
    out += "\ufffd";
    i += 1 + k;
    run = i;
  }
  if (i > run) out += utf8Lenient.decode(data.subarray(run, i));
  return [out, i];
}

/** transformers' clean_up_tokenization as a chain of streaming replaces (`decode._Cleanup`): each stage holds
 * back the characters (code points) that could still begin its pattern. */
class Cleanup {
  constructor() {
    this.held = CLEANUP_RULES.map(() => "");
  }

  feed(text, final) {
    for (let k = 0; k < CLEANUP_RULES.length; k++) {
      const [old, rep] = CLEANUP_RULES[k];
      const buf = this.held[k] + text;
      if (final) {
        text = buf.split(old).join(rep);
        this.held[k] = "";
        continue;
      }
      let out = "", pos = 0;
      for (;;) {
        const j = buf.indexOf(old, pos);
        if (j < 0) break;
        out += buf.slice(pos, j) + rep;
        pos = j + old.length;
      }
      let back = buf.length; // `len(old) - 1` code points from the end
      for (let c = 0; c < old.length - 1 && back > 0; c++) back -= back >= 2 && isLow(buf.charCodeAt(back - 1)) && isHigh(buf.charCodeAt(back - 2)) ? 2 : 1;
      const cut = Math.max(pos, back);
      out += buf.slice(pos, cut);
      this.held[k] = buf.slice(cut);
      text = out;
    }
    return text;
  }
}

/** Incremental decode of one generation (`chatparse.runtime.tokens.decode._Decoder`): `feed(ids)` returns the text
 * those ids complete; the texts of every feed plus `finish()` are exactly `vocab.decode(all ids)`. */
export class TokenDecoder {
  constructor(vocab) {
    this.v = vocab;
    this.bytesKind = vocab.kind === "bytes";
    this.held = new Uint8Array(0); // bytes kind: an incomplete UTF-8 sequence
    this.run = []; // pieces kind: a pending ByteFallback run
    this.first = vocab.firstText.size > 0; // Metaspace: the next token that is not skipped is the first one
    this.stripLeft = vocab.stripStart;
    this.cleanup = vocab.cleanup ? new Cleanup() : null;
  }

  /** Nothing held: the next token's text is its own text. */
  clean() {
    return !this.held.length && !this.run.length && !this.first && !this.stripLeft && this.cleanup === null;
  }

  feed(ids) {
    return this.post(this.bytesKind ? this.feedBytes(ids, false) : this.feedPieces(ids, false), false);
  }

  finish() {
    return this.post(this.bytesKind ? this.feedBytes([], true) : this.feedPieces([], true), true);
  }

  feedBytes(ids, final) {
    const v = this.v;
    let out = "";
    for (const i of ids) {
      if (!this.held.length) {
        const t = v.textOf(i); // complete UTF-8 on its own, nothing held: its text
        if (t !== null) {
          out += t;
          continue;
        }
      }
      const b = v.bytesOf(i);
      if (!b.length) continue;
      let data = b;
      if (this.held.length) {
        data = new Uint8Array(this.held.length + b.length);
        data.set(this.held);
        data.set(b, this.held.length);
      }
      const [text, n] = utf8Replace(data, false);
      out += text;
      this.held = data.slice(n);
    }
    if (final && this.held.length) {
      out += utf8Replace(this.held, true)[0];
      this.held = new Uint8Array(0);
    }
    return out;
  }

  feedPieces(ids, final) {
    const v = this.v, flags = v.flags;
    let out = "";
    for (const i of ids) {
      const f = flags[i];
      if (f & T_SKIP) continue;
      if (f & T_BYTE) {
        this.run.push(v.blob[v.offsets[i]]);
        this.first = false;
        continue;
      }
      if (this.run.length) out += this.flushRun();
      let s;
      if (this.first) {
        this.first = false;
        s = v.firstText.has(i) ? v.firstText.get(i) : v.textOf(i);
      } else s = v.textOf(i);
      out += s;
    }
    if (final && this.run.length) out += this.flushRun();
    return out;
  }

  flushRun() {
    const run = Uint8Array.from(this.run);
    this.run = [];
    try {
      return utf8Strict.decode(run);
    } catch {
      return "\ufffd".repeat(run.length);
    }
  }

  post(text, final) {
    if (this.stripLeft && text) {
      const c = this.v.stripChar;
      let n = 0, at = 0;
      while (n < this.stripLeft && at < text.length && text.startsWith(c, at)) {
        n++;
        at += c.length;
      }
      if (at < text.length) this.stripLeft = 0;
      else this.stripLeft -= n;
      if (at) text = text.slice(at);
    }
    if (this.cleanup !== null) text = this.cleanup.feed(text, final);
    return text;
  }
}

/** The token binding of tables loaded from a file with a token section (`binding_from_data`), built once per
 * Tables: the vocabulary, after the checks that need the compiled tables (FORMAT.md section 8.4, last
 * paragraph), with Python's messages. */
export function tokenBinding(tables) {
  if (tables._tokenBinding !== null) return tables._tokenBinding;
  const sec = tables.tokenSection;
  if (sec === null) {
    throw E("ValueError", "this compiled template carries no token tables: bind it to a tokenizer with " +
      "chatparse.bind(template, tokenizer), or load a table file written with token tables (`chatparse compile DIR` with a tokenizer.json)");
  }
  const bad = (msg) => { throw E("ValueError", `chatparse table file: token section: ${msg}`); };
  const vocab = new TokenVocab(sec);
  const size = vocab.size, nModes = tables.modes.length;
  const exact = tables.modes.map((m) => m.patterns.every((pi) => tables.patterns[pi].exact));
  const dl = sec.delims;
  for (let r = 0; r < dl.length / 3; r++) {
    const [m, i, pi] = [dl[3 * r], dl[3 * r + 1], dl[3 * r + 2]];
    if (m >= nModes || i >= size) bad(`whole-delimiter entry (${m}, ${i}) out of range`);
    if (tables.modes[m].firstRe === null || !exact[m]) bad(`mode ${m} cannot have whole-delimiter tokens`);
    const text = vocab.textOf(i);
    const d = text ? wholeDelimiter(tables, m, text) : null;
    if (d === null || d !== pi) bad(`token ${i} is not a whole delimiter (pattern ${pi}) in mode ${m}`);
  }
  for (let m = 0; m < nModes; m++) {
    if (tables.modes[m].firstRe !== null) continue;
    for (let i = m * size; i < (m + 1) * size; i++) if (sec.inert[i]) bad(`mode ${m} has no prefilter, so no token can be inert in it`);
  }
  tables._tokenBinding = { vocab };
  return tables._tokenBinding;
}

/** The pattern index when `text`, fed on its own to a quiet scanner in mode `m` (not at offset 0), is decided as
 * exactly one whole delimiter; else null (`tables._whole_delimiter`). */
function wholeDelimiter(tables, m, text) {
  const sc = new Scanner(tables);
  sc.push("\x00");
  sc.restart(m, 1);
  sc.push(text);
  let d;
  try {
    d = sc.decide(false);
  } catch {
    return null;
  }
  if (d === null || d === undefined || d[0] !== 1 || d[1] !== 1 + text.length) return null;
  return d[2];
}

function tokenIds(ids, size) {
  // an int or a sequence of ints (an array or typed array), range-checked as Python's `_ids_list`
  const list = typeof ids === "number" || typeof ids === "bigint" ? [ids] : ids;
  if (list === null || typeof list !== "object" || typeof list.length !== "number") {
    throw E("TypeError", `token ids must be integers or a sequence of integers, got ${list === null ? "NoneType" : typeof list}`);
  }
  let lo = Infinity, hi = -Infinity;
  for (const x of list) {
    if (typeof x === "bigint" ? false : !Number.isInteger(x)) throw E("TypeError", "token ids must be integers");
    const v = Number(x);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (list.length && (lo < 0 || hi >= size)) {
    const bad = lo < 0 ? lo : hi;
    throw E("ValueError", `token id ${bad} is out of range for this tokenizer (valid ids: 0..${size - 1})`);
  }
  return typeof list[0] === "bigint" ? Array.from(list, Number) : list;
}

function tokenPrefix(vocab, prefix, prefixIds) {
  if (prefixIds !== null && prefixIds !== undefined) {
    if (prefix !== null && prefix !== undefined) throw E("ValueError", "pass either `prefix` (text) or `prefix_ids` (token ids), not both");
    return vocab.decode(tokenIds(prefixIds, vocab.size));
  }
  if (prefix === null || prefix === undefined) throw E("ValueError", TOKENS_PREFIX_REQUIRED);
  if (typeof prefix !== "string") throw E("TypeError", `\`prefix\` must be a string (use \`prefix_ids=\` for token ids), got ${pyTypeName(prefix)}`);
  return prefix;
}

/** One generation fed token ids (`chatparse.runtime.tokens.TokenParser`): `new TokenParser(tables, prompt, {
 * prefixIds, tools, dialect, ... })` (prompt text, or null with `prefixIds`); `feedTokens(id or ids)` returns the
 * events, `finalize()` `[message, finalEvents]`. Tables must come from a file with a token section.
 *
 * The fast path (Python's `feed_tokens` fast state): while the scanner is quiet, a region is open and the
 * decoder holds nothing, a token that is inert in the current mode (the token section's `inert` table: no
 * character of it can start a delimiter) is region text: one table lookup and one region_chunk event. Its text
 * waits in `tail` and reaches the character engine, as one feed whose events are the ones already handed out,
 * the next time the engine is needed; so the engine's state is always what feeding the decoded text gives. */
export class TokenParser {
  constructor(tables, prefix, { prefixIds = null, tools = null, warn = null, dialect = null, offsets = null, malformed = null } = {}) {
    if (!(tables instanceof Tables)) throw E("TypeError", "TokenParser needs Tables from loadTables()");
    const b = tokenBinding(tables);
    this.vocab = b.vocab;
    this.size = b.vocab.size;
    const text = tokenPrefix(b.vocab, prefix, prefixIds);
    this.parser = new ResponseParser(tables, text, { tools, warn, dialect, offsets, malformed });
    this.dialect = this.parser.dialect;
    this.initialEvents = this.parser.initialEvents;
    this.dec = new TokenDecoder(b.vocab);
    this.core = this.parser.core;
    this.inert = tables.tokenSection.inert;
    this.modeIndex = new Map(tables.modes.map((m, k) => [m, k]));
    this.tail = []; // texts handed out by the fast path, not yet fed to the engine
    this.fast = -1; // the current mode's row offset in `inert` while the fast path applies, else -1
    this.fname = null;
    this.fdirty = false;
    this.refresh();
  }

  /** Whether the fast path applies now (after the engine ran), as Python's `TokenParser._refresh` decides. */
  refresh() {
    this.fast = -1;
    const core = this.core, sc = core.scanner, mode = sc.mode;
    if (core.stalled || core.failed !== null || core.finished || core.jsonEnd !== null || core.held || core.pending.length) return;
    if (sc.attempts.length || sc.scan !== sc.end || mode.firstRe === null || !(sc.end || mode.start0 === mode.startN)) return;
    if (!this.dec.clean() || core.current === null || !core.opened || sc.pos < core.promptEnd) return;
    this.fast = this.modeIndex.get(mode) * this.size;
    this.fname = core.t.fields[core.current].name;
    this.fdirty = core.t.dirty[core.current];
  }

  /** Hand the engine the text the fast path handed out (its events were returned then). */
  sync() {
    if (!this.tail.length) return;
    const text = this.tail.length === 1 ? this.tail[0] : this.tail.join("");
    this.tail = [];
    this.core.feed(text);
  }

  feedTokens(ids) {
    const fast = this.fast;
    if (fast >= 0) {
      if (typeof ids === "number") {
        if (this.inert[fast + ids] === 1 && Number.isInteger(ids) && ids >= 0 && ids < this.size) {
          const s = this.vocab.textOf(ids);
          this.tail.push(s);
          return [{ type: "region_chunk", field: this.fname, text: s, dirty: this.fdirty }];
        }
      } else if (ids !== null && typeof ids === "object" && ids.length > 0) {
        let all = true;
        for (let k = 0; all && k < ids.length; k++) {
          const i = ids[k];
          all = Number.isInteger(i) && i >= 0 && i < this.size && this.inert[fast + i] === 1;
        }
        if (all) {
          let s = "";
          for (let k = 0; k < ids.length; k++) s += this.vocab.textOf(ids[k]);
          this.tail.push(s);
          return [{ type: "region_chunk", field: this.fname, text: s, dirty: this.fdirty }];
        }
      }
    }
    this.fast = -1;
    try {
      this.core.checkUsable();
      const list = tokenIds(ids, this.size);
      this.sync();
      const text = this.dec.feed(list);
      return text ? this.parser.feed(text) : [];
    } finally {
      this.refresh();
    }
  }

  /** Decoded text instead of ids (refused while the bytes of a split character are held). */
  feed(text) {
    this.core.checkUsable();
    if (this.dec.held.length || this.dec.run.length) {
      throw E("ValueError", "feed(text) while the bytes of a character split across tokens are held; feed the token ids that complete it first");
    }
    this.fast = -1;
    try {
      this.sync();
      return text ? this.parser.feed(text) : [];
    } finally {
      this.refresh();
    }
  }

  finalize() {
    this.core.checkUsable();
    this.fast = -1;
    this.sync();
    const rest = this.dec.finish();
    const events = rest ? this.parser.feed(rest) : [];
    const [message, final] = this.parser.finalize();
    return [message, events.concat(final)];
  }

  get inputText() {
    this.sync();
    return this.parser.inputText;
  }

  get input_text() {
    return this.inputText;
  }
}

/** One-shot over ids (`chatparse.parse_tokens`): the whole sequence decoded, then parsed as parseResponse parses
 * text. */
export function parseTokens(ids, tables, { prefix = null, prefixIds = null, tools = null, warn = null, dialect = null, malformed = null } = {}) {
  if (!(tables instanceof Tables)) throw E("TypeError", "parseTokens needs Tables from loadTables()");
  const { vocab } = tokenBinding(tables);
  const text = tokenPrefix(vocab, prefix, prefixIds);
  resolveDialect(dialect, { malformed }); // (checked before the ids, as Python's `TokenBinding.parse` does)
  return parseResponse(vocab.decode(tokenIds(ids, vocab.size)), tables, { prefix: text, tools, warn, dialect, malformed });
}
