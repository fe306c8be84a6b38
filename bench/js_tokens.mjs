#!/usr/bin/env node
// The JavaScript side of bench/js_tokens.py (run by it; it writes the inputs): per-token cost of the JS token
// engine on one table file with a token section.
//
//   node bench/js_tokens.mjs TABLES.cpt INPUT.json
//
// INPUT: {"reps", "window", "prefix", "sequences": [{"label", "ids": [...]}]}. After an untimed pass over
// every sequence, for each sequence, after one more untimed pass, `reps` timed passes of each of:
//   token:  new TokenParser(tables, prefix), feedTokens(id) once per id, finalize()       (ns per token)
//   late:   the same parser's `window` feedTokens calls ending at 90% of the ids alone    (ns per token)
//   text:   ResponseParser fed each token's decoded text (decoded beforehand)             (ns per token)
//   whole:  parseTokens(all ids)                                                          (ns per token)
// Prints one JSON line: {"label": {"token": [ns...], "late": [...], "text": [...], "whole": [...]}, ...,
// "message_ok": true} (each pass's message equals parseTokens's).

import { readFileSync } from "node:fs";
import { loadTables, TokenParser, ResponseParser, TokenDecoder, parseTokens, tokenBinding } from "../js/chatparse.mjs";

const [cpt, input] = process.argv.slice(2);
const t0 = process.hrtime.bigint();
const tables = loadTables(readFileSync(cpt));
const vocab = tokenBinding(tables).vocab;
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
const inp = JSON.parse(readFileSync(input, "utf8"));
const now = () => process.hrtime.bigint();
const out = { load_ms: loadMs, message_ok: true };

// a warm-up pass over every sequence first (the JIT compiles the engine once, not during the first timings)
for (const seq of inp.sequences) {
  const p = new TokenParser(tables, inp.prefix);
  for (const i of seq.ids) p.feedTokens(i);
  p.finalize();
}

for (const seq of inp.sequences) {
  const ids = seq.ids;
  const n = ids.length;
  const want = JSON.stringify(parseTokens(ids, tables, { prefix: inp.prefix }));
  const dec = new TokenDecoder(vocab);
  const texts = ids.map((i) => dec.feed([i]));
  texts.push(dec.finish());
  const res = { token: [], late: [], text: [], whole: [] };
  const lateEnd = Math.floor((n * 9) / 10);
  const lateFrom = Math.max(0, lateEnd - inp.window);
  for (let rep = 0; rep <= inp.reps; rep++) {
    // token ids, one per call
    let a = now();
    const p = new TokenParser(tables, inp.prefix);
    for (let k = 0; k < lateFrom; k++) p.feedTokens(ids[k]);
    const b = now();
    for (let k = lateFrom; k < lateEnd; k++) p.feedTokens(ids[k]);
    const c = now();
    for (let k = lateEnd; k < n; k++) p.feedTokens(ids[k]);
    const [msg] = p.finalize();
    const d = now();
    if (JSON.stringify(msg) !== want) out.message_ok = false;
    // decoded text, one token's text per call
    const q = new ResponseParser(tables, inp.prefix);
    const e = now();
    for (let k = 0; k < n; k++) if (texts[k]) q.feed(texts[k]);
    if (texts[n]) q.feed(texts[n]);
    const [msg2] = q.finalize();
    const f = now();
    if (JSON.stringify(msg2) !== want) out.message_ok = false;
    const g = now();
    const msg3 = parseTokens(ids, tables, { prefix: inp.prefix });
    const h = now();
    if (JSON.stringify(msg3) !== want) out.message_ok = false;
    if (rep === 0) continue; // (warm-up)
    res.token.push(Number(d - a) / n);
    res.late.push(Number(c - b) / (lateEnd - lateFrom));
    res.text.push(Number(f - e) / n);
    res.whole.push(Number(h - g) / n);
  }
  out[seq.label] = res;
}
console.log(JSON.stringify(out));
