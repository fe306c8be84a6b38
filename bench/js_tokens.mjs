#!/usr/bin/env node
// The JavaScript side of bench/js_tokens.py (run by it; it writes the inputs): per-token cost of the JS token
// engine on one table file with a token section.
//
//   node bench/js_tokens.mjs TABLES.cpt INPUT.json
//
// INPUT: {"window", "prefix", "warmup", "sequences": [{"label", "ids": [...]}]}. After `warmup` untimed passes
// over every sequence (so that the JIT has compiled the engine), prints {"ready": true, "load_ms", "messages":
// {label: the message of parseTokens}} (compared with Python's there); then, for each
// line read from stdin, one timed pass over every sequence of each of:
//   token:  new TokenParser(tables, prefix), feedTokens(id) once per id, finalize()       (ns per token)
//   cpu:    the process's CPU time over that pass (all threads: the garbage collector's too) (ns per token)
//   late:   the same parser's `window` feedTokens calls ending at 90% of the ids alone    (ns per token)
//   text:   ResponseParser fed each token's decoded text (decoded beforehand)             (ns per token)
//   whole:  parseTokens(all ids)                                                          (ns per token)
// printed as one JSON line: {"label": {"token": ns, "cpu": ns, "late": ns, "text": ns, "whole": ns}, ..., "message_ok"}
// (every pass's message equals parseTokens's). bench/js_tokens.py alternates these passes with Python's.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { loadTables, TokenParser, ResponseParser, TokenDecoder, parseTokens, tokenBinding } from "../js/chatparse.mjs";

const [cpt, input] = process.argv.slice(2);
const t0 = process.hrtime.bigint();
const tables = loadTables(readFileSync(cpt));
const vocab = tokenBinding(tables).vocab;
const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
const inp = JSON.parse(readFileSync(input, "utf8"));
const now = () => process.hrtime.bigint();

const seqs = inp.sequences.map((seq) => {
  const dec = new TokenDecoder(vocab);
  const texts = seq.ids.map((i) => dec.feed([i]));
  texts.push(dec.finish());
  return { ...seq, texts, want: JSON.stringify(parseTokens(seq.ids, tables, { prefix: inp.prefix })) };
});

function pass() {
  const out = { message_ok: true };
  for (const { label, ids, texts, want } of seqs) {
    const n = ids.length;
    const lateEnd = Math.floor((n * 9) / 10);
    const lateFrom = Math.max(0, lateEnd - inp.window);
    const cpu = process.cpuUsage();
    const a = now();
    const p = new TokenParser(tables, inp.prefix);
    for (let k = 0; k < lateFrom; k++) p.feedTokens(ids[k]);
    const b = now();
    for (let k = lateFrom; k < lateEnd; k++) p.feedTokens(ids[k]);
    const c = now();
    for (let k = lateEnd; k < n; k++) p.feedTokens(ids[k]);
    const [msg] = p.finalize();
    const d = now();
    const cu = process.cpuUsage(cpu);
    const q = new ResponseParser(tables, inp.prefix);
    const e = now();
    for (let k = 0; k <= n; k++) if (texts[k]) q.feed(texts[k]);
    const [msg2] = q.finalize();
    const f = now();
    const msg3 = parseTokens(ids, tables, { prefix: inp.prefix });
    const g = now();
    if (JSON.stringify(msg) !== want || JSON.stringify(msg2) !== want || JSON.stringify(msg3) !== want) out.message_ok = false;
    out[label] = { token: Number(d - a) / n, cpu: ((cu.user + cu.system) * 1000) / n, late: Number(c - b) / (lateEnd - lateFrom), text: Number(f - e) / n, whole: Number(g - f) / n };
  }
  return out;
}

for (let k = 0; k < inp.warmup; k++) pass();
console.log(JSON.stringify({ ready: true, load_ms: loadMs, messages: Object.fromEntries(seqs.map((s) => [s.label, JSON.parse(s.want)])) }));
const rl = createInterface({ input: process.stdin });
rl.on("line", () => console.log(JSON.stringify(pass())));
