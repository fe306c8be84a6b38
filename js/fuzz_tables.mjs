#!/usr/bin/env node
// The JavaScript half of the resealed-file fuzzer (tests/table_fuzz.py): one process over a directory of
// mutated table files.
//
//   node js/fuzz_tables.mjs DIR
//
// DIR holds NAME.BASE.cpt files and texts.json ({BASE: [text, ...]}). For each file: loadTables, then each text
// of its base streamed in two feeds (split at half its UTF-16 length... in code points, as Python splits) and
// finalized. Prints one JSON object {NAME: outcome}: {"refused": message} for the table-file error,
// {"loaded": [{"events", "message"} | {"error": Python class, "stage"}]}, or {"crash": ...} for anything else
// (a JavaScript exception that is not a PyError, or a PyError other than ValueError while loading).

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { loadTables, ResponseParser, PyError } from "./chatparse.mjs";

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

function outcome(bytes, texts) {
  let tables;
  try {
    tables = loadTables(bytes);
  } catch (e) {
    if (e instanceof PyError && e.pyType === "ValueError" && e.message.startsWith(PREFIX)) return { refused: e.message };
    return { crash: `${e instanceof PyError ? "PyError " + e.pyType : e && e.name}: ${e && e.message}`.slice(0, 300) };
  }
  try {
    return { loaded: texts.map((t) => parseText(tables, t)) };
  } catch (e) {
    return { crash: `${e && e.name}: ${e && e.message}`.slice(0, 300) };
  }
}

const dir = process.argv[2];
const texts = JSON.parse(readFileSync(join(dir, "texts.json"), "utf8"));
const out = {};
for (const f of readdirSync(dir).filter((f) => f.endsWith(".cpt")).sort()) {
  const [name, base] = f.slice(0, -4).split(".");
  out[name] = outcome(readFileSync(join(dir, f)), texts[base] || []);
}
process.stdout.write(JSON.stringify(out));
