#!/usr/bin/env node
// Run chatparse conformance vectors (tests/make_vectors.py writes them) through the JavaScript runtime.
//
//   node js/run_vectors.mjs tests/vectors [--json] [--verbose]
//
// Template vectors: load the vector's .cpt tables file, check its template hash, then for every case feed the
// prefix and the feeds exactly as listed and compare, event for event, with what chatparse produced: the
// initial events, each feed's events, the final events and message, or the error (Python exception class,
// stage and feed index). A case with a "dialect" ("vllm") is parsed in it: events carry spans and captures,
// region_malformed events carry the error as {"type", "message"} (the message compared too unless the vector
// marks it "loose"), `inputText` must begin with "input_start" code points before the first feed and end as
// them plus every feed, and "oneshot" is what parseResponse(whole text, ...) gives in that dialect. Values vectors: content parsers and tool-argument coercion, value for value. Regex
// vectors: each pattern's translation under Python finditer semantics, spans (in code points) and groups.
// Invalid-file vectors (kind "invalid", tests/vectors/invalid/): loadTables must refuse the file with exactly
// the vector's error.
// Exit status 0 when every case passes. With --json the last line is a JSON summary.

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { loadTables, ResponseParser, parseResponse, parseContent, coerce, PyError, _pyFinditer, _groupdict, cpLen, TokenParser, TokenDecoder, parseTokens, tokenBinding } from "./chatparse.mjs";

function decode(v) {
  if (Array.isArray(v)) return v.map(decode);
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 2 && keys.includes("$py") && keys.includes("v")) {
      if (v.$py === "float") return v.v === "nan" ? NaN : v.v === "inf" ? Infinity : -Infinity;
      return Number(v.v); // a big integer: JavaScript numbers hold it approximately
    }
    const o = {};
    for (const k of keys) {
      const x = decode(v[k]);
      if (k === "__proto__") Object.defineProperty(o, k, { value: x, enumerable: true, writable: true, configurable: true });
      else o[k] = x;
    }
    return o;
  }
  return v;
}

function diff(a, b, path = "$") {
  // null when equal (NaN equals NaN, key order matters), else where they first differ.
  if (typeof a === "number" && typeof b === "number") {
    if (Number.isNaN(a) && Number.isNaN(b)) return null;
    return Object.is(a, b) || (a === b && a !== 0) ? null : `${path}: ${a} != ${b}`;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b)) return `${path}: ${JSON.stringify(a)?.slice(0, 80)} != ${JSON.stringify(b)?.slice(0, 80)}`;
    if (a.length !== b.length) return `${path}: length ${a.length} != ${b.length}`;
    for (let i = 0; i < a.length; i++) {
      const d = diff(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    const ka = Object.keys(a), kb = Object.keys(b);
    if (ka.join("\u0000") !== kb.join("\u0000")) return `${path}: keys ${JSON.stringify(ka)} != ${JSON.stringify(kb)}`;
    for (const k of ka) {
      const d = diff(a[k], b[k], `${path}.${k}`);
      if (d) return d;
    }
    return null;
  }
  return a === b ? null : `${path}: ${JSON.stringify(a)?.slice(0, 120)} != ${JSON.stringify(b)?.slice(0, 120)}`;
}

function normalize(events) {
  // Merge adjacent chunks of one region (chunk boundaries may differ; their concatenation may not).
  const out = [];
  for (const ev of events) {
    const last = out[out.length - 1];
    if (ev.type === "region_chunk" && last && last.type === "region_chunk" && last.field === ev.field) out[out.length - 1] = { ...last, text: last.text + ev.text };
    else out.push(ev);
  }
  return out;
}

const errType = (e) => (e instanceof PyError ? e.pyType : `JS ${e && e.name}: ${e && e.message}`);

function encodeError(e, want) {
  // An event's error as the vector holds it; the message only where the vector asks for it word for word.
  const out = { type: errType(e), message: e && e.message };
  if (want && want.loose) {
    out.message = want.message;
    out.loose = true;
  }
  return out;
}

function encodeEvents(events, wantEvents) {
  // Errors of region_malformed events as {"type", "message"[, "loose"]} (paired with the expected event).
  return events.map((ev, i) => {
    if (!("error" in ev) || ev.error === null || typeof ev.error !== "object" || !(ev.error instanceof Error)) return ev;
    const want = wantEvents && wantEvents[i] && wantEvents[i].error;
    return { ...ev, error: encodeError(ev.error, want) };
  });
}

function runCase(tables, c) {
  const out = { initial_events: [], feed_events: [], error: null };
  const dialect = c.dialect === undefined ? null : c.dialect;
  let stage = "init", index = 0;
  let p = null;
  try {
    p = new ResponseParser(tables, c.prefix, { tools: c.tools, dialect });
    if (dialect !== null) out.input_start = cpLen(p.inputText);
    out.initial_events = encodeEvents(p.initialEvents, c.initial_events);
    stage = "feed";
    for (index = 0; index < c.feeds.length; index++) out.feed_events.push(encodeEvents(p.feed(c.feeds[index]), c.feed_events && c.feed_events[index]));
    stage = "finalize";
    index = 0;
    const [message, final] = p.finalize();
    out.final_events = encodeEvents(final, c.final_events);
    out.message = message;
  } catch (e) {
    out.error = { type: errType(e), stage, index: stage === "feed" ? index : 0 };
  }
  if (dialect !== null && p !== null) {
    // inputText: the cut prefix, then every feed, whatever happened
    const text = p.inputText;
    const start = [...text].slice(0, out.input_start).join("");
    if (text !== start + c.feeds.join("")) out.input_text_error = `inputText is ${JSON.stringify(text).slice(0, 120)}`;
  }
  return out;
}

function runOneshot(tables, c) {
  try {
    return { message: parseResponse(c.feeds.join(""), tables, { prefix: c.prefix, tools: c.tools, dialect: c.dialect }) };
  } catch (e) {
    return { error: encodeError(e, c.oneshot && c.oneshot.error) };
  }
}

function runTokenCase(tables, c) {
  // as runCase, with token ids: TokenParser built from the file's token section, each feed a list of ids
  const out = { initial_events: [], feed_events: [], error: null };
  const dialect = c.dialect === undefined ? null : c.dialect;
  let stage = "init", index = 0;
  let p = null;
  try {
    p = new TokenParser(tables, "prefix_ids" in c ? null : c.prefix, { prefixIds: c.prefix_ids ?? null, tools: c.tools, dialect });
    if (dialect !== null) out.input_start = cpLen(p.inputText);
    out.initial_events = encodeEvents(p.initialEvents, c.initial_events);
    stage = "feed";
    for (index = 0; index < c.feeds.length; index++) out.feed_events.push(encodeEvents(p.feedTokens(c.feeds[index]), c.feed_events && c.feed_events[index]));
    stage = "finalize";
    index = 0;
    const [message, final] = p.finalize();
    out.final_events = encodeEvents(final, c.final_events);
    out.message = message;
  } catch (e) {
    out.error = { type: errType(e), stage, index: stage === "feed" ? index : 0 };
  }
  if (dialect !== null && p !== null && out.error === null) {
    // inputText: the cut prompt, then every decoded text
    const text = p.inputText;
    const start = [...text].slice(0, out.input_start).join("");
    if (text !== start + c.texts.join("")) out.input_text_error = `inputText is ${JSON.stringify(text).slice(0, 120)}`;
  }
  return out;
}

function runTokenVector(dir, file, vec, failures, verbose) {
  // Token-mode vectors (kind "tokens"): the tables file with its token section, then per case the decoded texts
  // (TokenDecoder), the events, message or error (TokenParser) and the one-shot parse of all the ids (parseTokens).
  let tables;
  try {
    tables = loadTables(readFileSync(join(dir, vec.tables)));
    if (tables.header.templateSha256 !== vec.template_sha256) throw new Error("template hash differs from the vector's");
    if (tables.header.vocabSha256 !== vec.vocab_sha256) throw new Error("vocabulary hash differs from the vector's");
    if (tokenBinding(tables).vocab.size !== vec.vocab_size) throw new Error("vocabulary size differs from the vector's");
  } catch (e) {
    for (const c of vec.cases) failures.push(`${file} ${c.id}: tables not loaded (${errType(e)}: ${e && e.message})`);
    return;
  }
  const vocab = tokenBinding(tables).vocab;
  for (const c of vec.cases) {
    const texts = [];
    try {
      const dec = new TokenDecoder(vocab);
      for (const f of c.feeds) {
        if (f.some((i) => i < 0 || i >= vocab.size)) throw new Error("out of range");
        texts.push(dec.feed(f));
      }
      texts.push(dec.finish());
    } catch {
      // (an id out of range: the texts up to it)
    }
    let d = diff(texts, c.texts);
    if (d) d = `decoded texts: ${d}`;
    if (!d) {
      const got = runTokenCase(tables, c);
      const want = { initial_events: c.initial_events, feed_events: c.feed_events, error: c.error };
      if ("input_start" in c) want.input_start = c.input_start;
      if ("message" in c) {
        want.final_events = c.final_events;
        want.message = c.message;
      }
      d = diff(got, decode(want));
    }
    if (!d && "oneshot" in c) {
      let got;
      try {
        got = { message: parseTokens(c.feeds.flat(), tables, { prefix: "prefix_ids" in c ? null : c.prefix, prefixIds: c.prefix_ids ?? null, tools: c.tools, dialect: c.dialect ?? null }) };
      } catch (e) {
        got = { error: encodeError(e, c.oneshot && c.oneshot.error) };
      }
      const o = diff(got, decode(c.oneshot));
      if (o) d = `parseTokens: ${o}`;
    }
    if (d) failures.push(`${file} ${c.id}: ${d}`);
    else if (verbose) console.log(`ok ${file} ${c.id}`);
  }
}

function main() {
  const args = process.argv.slice(2);
  const dir = args.find((a) => !a.startsWith("--")) || "tests/vectors";
  const asJson = args.includes("--json");
  const verbose = args.includes("--verbose");
  const failures = [];
  let total = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
  for (const file of files) {
    const vec = JSON.parse(readFileSync(join(dir, file), "utf8"));
    if (vec.kind === "regex") {
      for (const entry of vec.patterns) {
        for (const c of entry.cases) {
          total++;
          let got;
          try {
            const cp = (idx) => cpLen(c.text.slice(0, idx));
            got = [..._pyFinditer(entry.translation, c.text)].map((m) => [cp(m.index), cp(m.index + m[0].length), _groupdict(m, entry.translation)]);
          } catch (e) {
            got = { error: errType(e) };
          }
          const d = diff(got, c.expect);
          if (d) failures.push(`${file} ${JSON.stringify(entry.pattern)} on ${JSON.stringify(c.text).slice(0, 80)}: ${d}`);
        }
      }
      continue;
    }
    if (vec.kind === "values") {
      vec.cases.forEach((c, i) => {
        total++;
        let got;
        try {
          got = { ok: "parser" in c ? parseContent(c.text, c.parser, c.args, null) : coerce(c.coerce, c.types) };
        } catch (e) {
          got = { error: errType(e) };
        }
        const want = "error" in c ? { error: c.error } : { ok: decode(c.expect) };
        const d = diff(got, want);
        if (d) failures.push(`${file}[${i}] ${JSON.stringify(c).slice(0, 160)}: ${d}`);
      });
      continue;
    }
    if (vec.kind === "invalid") {
      // an invalid table file (tests/vectors/invalid/): refused with exactly the error the vector gives
      total++;
      let got = "loaded";
      try {
        loadTables(readFileSync(join(dir, vec.tables)));
      } catch (e) {
        got = e instanceof PyError && e.pyType === "ValueError" ? e.message : `${errType(e)}: ${e && e.message}`;
      }
      if (got !== vec.error) failures.push(`${file}: ${JSON.stringify(got).slice(0, 300)} != ${JSON.stringify(vec.error)}`);
      continue;
    }
    if (vec.kind === "tokens") {
      runTokenVector(dir, file, vec, failures, verbose);
      total += vec.cases.length;
      continue;
    }
    let tables;
    try {
      tables = loadTables(readFileSync(join(dir, vec.tables)));
      if (tables.header.templateSha256 !== vec.template_sha256) throw new Error("template hash differs from the vector's");
    } catch (e) {
      total += vec.cases.length;
      for (const c of vec.cases) failures.push(`${file} ${c.id}: tables not loaded (${errType(e)})`);
      continue;
    }
    for (const c of vec.cases) {
      total++;
      const got = runCase(tables, c);
      const want = { initial_events: c.initial_events, feed_events: c.feed_events, error: c.error };
      if ("input_start" in c) want.input_start = c.input_start;
      if ("message" in c) {
        want.final_events = c.final_events;
        want.message = c.message;
      }
      let d = diff(got, decode(want));
      if (!d && "oneshot" in c) {
        const o = diff(runOneshot(tables, c), decode(c.oneshot));
        if (o) d = `parseResponse: ${o}`;
      }
      if (d) failures.push(`${file} ${c.id}: ${d}`);
      else if (verbose) console.log(`ok ${file} ${c.id}`);
      // A JavaScript stream may split a surrogate pair between feeds: same message and regions regardless.
      const whole = c.feeds.join("");
      if (!d && /[\ud800-\udbff][\udc00-\udfff]/.test(whole)) {
        total++;
        const units = runCase(tables, { ...c, feeds: Array.from({ length: whole.length }, (_, i) => whole[i]) });
        // (After an error the events depend on which feed failed, so only the error class is compared then.)
        // (An event's error is compared by class here: its message was checked against the vector above.)
        const cls = (evs) => evs.map((ev) => (ev.error && typeof ev.error === "object" ? { ...ev, error: ev.error.type } : ev));
        const flat = (r) => (r.error ? { error: r.error.type } : { events: cls(normalize([...r.initial_events, ...r.feed_events.flat(), ...r.final_events])), message: r.message });
        const d2 = diff(flat(units), flat(got));
        if (d2) failures.push(`${file} ${c.id} (fed one UTF-16 unit at a time): ${d2}`);
      }
    }
  }
  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(`${total - failures.length}/${total} vector cases pass (${files.length} files)`);
  if (asJson) console.log(JSON.stringify({ total, passed: total - failures.length, failed: failures.length, files: files.length }));
  process.exit(failures.length ? 1 : 0);
}

main();
