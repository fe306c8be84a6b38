#!/usr/bin/env node
// The JavaScript half of the resealed-file fuzzer (tests/table_fuzz.py): one process over a directory of
// mutated table files.
//
//   node js/fuzz_tables.mjs DIR
//
// DIR holds NAME.BASE.cpt files, texts.json ({BASE: [text, ...]}) and optionally ids.json ({BASE: [[id, ...],
// ...]}). For each file: loadTables, then each text of its base streamed in two feeds (split at half its UTF-16
// length... in code points, as Python splits) and finalized. Prints one JSON object {NAME: outcome}:
// {"refused": message} for the table-file error, {"loaded": [{"events", "message"} | {"error": Python class,
// "stage"}][, "tokens": {"refused": message} | {"parsed": n}]} (tokens: a file with a token section and id
// sequences, see tokenOutcome), or {"crash": ...} for anything else (a JavaScript exception that is not a
// PyError, or a PyError other than ValueError while loading).

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { loadTables, ResponseParser, PyError, TokenParser, tokenBinding } from "./chatparse.mjs";

const PREFIX = "chatparse table file: ";

function plain(v) {
  // events may hold error objects (not in the default dialect); keep the comparison to JSON values
  // (infinities and NaN as strings, as tests/table_fuzz.py writes Python's)
  const special = (x) => (Number.isNaN(x) ? "NaN" : x === Infinity ? "Infinity" : "-Infinity");
  return JSON.parse(JSON.stringify(v, (k, x) => (x instanceof Error ? String(x) : x === undefined ? null : typeof x === "number" && !Number.isFinite(x) ? special(x) : x)));
}

function parseText(tables, text) {
  let stage = "init";
  const events = [];
  try {
    const p = new ResponseParser(tables, "");
    events.push(...p.initialEvents);
    stage = "feed";
    const cps = Array.from(text);
    const half = Math.floor(cps.length / 2);
    events.push(...p.feed(cps.slice(0, half).join("")));
    events.push(...p.feed(cps.slice(half).join("")));
    stage = "finalize";
    const [message, final] = p.finalize();
    return { events: plain([...events, ...final]), message: plain(message) };
  } catch (e) {
    if (!(e instanceof PyError)) throw e;
    return { error: e.pyType === "JSONDecodeError" ? "JSONDecodeError" : e.pyType, stage };
  }
}

function tokenOutcome(tables, ids) {
  // A file with a token section and id sequences (ids.json): the token parser is built (which refuses, with a
  // table-file error, what needs the compiled tables: FORMAT.md 8.4, last paragraph) and each sequence fed one
  // id at a time ({"refused": message} or {"parsed": n}, as tests/table_fuzz.py's Python side; a damaged inert
  // table may misparse, so only that the parse ends - in a message or a PyError - is asked of it).
  try {
    tokenBinding(tables);
  } catch (e) {
    if (e instanceof PyError && e.pyType === "ValueError" && e.message.startsWith(PREFIX)) return { refused: e.message };
    throw e;
  }
  const size = tokenBinding(tables).vocab.size;
  for (const seq of ids) {
    try {
      const p = new TokenParser(tables, "");
      for (const i of seq) if (i < size) p.feedTokens(i);
      p.finalize();
    } catch (e) {
      if (!(e instanceof PyError)) throw e;
    }
  }
  return { parsed: ids.length };
}

function outcome(bytes, texts, ids) {
  let tables;
  try {
    tables = loadTables(bytes);
  } catch (e) {
    if (e instanceof PyError && e.pyType === "ValueError" && e.message.startsWith(PREFIX)) return { refused: e.message };
    return { crash: `${e instanceof PyError ? "PyError " + e.pyType : e && e.name}: ${e && e.message}`.slice(0, 300) };
  }
  try {
    const out = { loaded: texts.map((t) => parseText(tables, t)) };
    if (tables.header.tokens && ids.length) out.tokens = tokenOutcome(tables, ids);
    return out;
  } catch (e) {
    return { crash: `${e && e.name}: ${e && e.message}`.slice(0, 300) };
  }
}

const dir = process.argv[2];
const texts = JSON.parse(readFileSync(join(dir, "texts.json"), "utf8"));
let ids = {};
try {
  ids = JSON.parse(readFileSync(join(dir, "ids.json"), "utf8"));
} catch {
  // (no id sequences: text only)
}
const out = {};
for (const f of readdirSync(dir).filter((f) => f.endsWith(".cpt")).sort()) {
  const [name, base] = f.slice(0, -4).split(".");
  out[name] = outcome(readFileSync(join(dir, f)), texts[base] || [], ids[base] || []);
}
process.stdout.write(JSON.stringify(out));
