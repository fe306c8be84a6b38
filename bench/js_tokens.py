"""Benchmark: the JavaScript token engine (js/chatparse.mjs `TokenParser`) side by side with Python's
`TokenParser`, in one run, on the same table file and the same token ids (issue #40).

    python bench/js_tokens.py [--template qwen3] [--lengths 1024,16384,65536] [--kinds turn,content]
                              [--reps 5] [--window 512] [--no-tekken] [--json out.json]

The vocabulary and generations are bench/pertoken.py's (tekken from mistral-common when installed, else a
32k byte-level BPE trained here with the `tokenizers` library, the template's delimiters as special tokens;
qwen3-style generations: ``turn`` = reasoning then answer then a tool call, ``content`` = one long answer
dense with code/HTML). The table file is written with its token section (`dumps(..., tokens=binding)`) and
both runtimes load it. For each generation, per runtime, after one warm-up pass, `reps` passes of:

* ``token``: a parser made from the file, ``feed_tokens(id)`` / ``feedTokens(id)`` once per id, then
  finalize: time per token;
* ``late``: the `window` calls that end at 90% of the ids alone (flatness: compare across lengths; the
  region still open there, before the tool call and the region closes at the end);
* ``text``: the character parser fed each token's decoded text (decoded beforehand): what the engine costs
  without decoding;
* ``whole``: the one-shot parse of all the ids (``parse_tokens`` / ``parseTokens``), per token.

Medians in ns per token; every pass's message is checked equal across runtimes. Python runs first, then node
(`bench/js_tokens.mjs`), each with garbage collection left as it is in normal use.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pertoken import generation, load_tokenizer  # noqa: E402

PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"


def python_side(cpt: Path, seqs: list, reps: int, window: int) -> dict:
    from chatparse import CompiledTemplate, ResponseParser
    from chatparse.runtime.tables.loader import load
    from chatparse.runtime.tokens import TokenParser, parse_tokens, token_binding
    from chatparse.runtime.tokens.decode import _Decoder

    clock = time.perf_counter_ns
    t = clock()
    raw = load(cpt)
    compiled = CompiledTemplate(raw["template"], raw)
    b = token_binding(compiled)
    out = {"load_ms": (clock() - t) / 1e6}
    for label, ids in seqs:
        n = len(ids)
        want = parse_tokens(ids, b, prefix=PROMPT)
        dec = _Decoder(b.vocab)
        texts = [dec.feed([i]) for i in ids] + [dec.finish()]
        res = {"token": [], "late": [], "text": [], "whole": []}
        late_end = n * 9 // 10
        late_from = max(0, late_end - window)
        for rep in range(reps + 1):
            a = clock()
            p = TokenParser(b, prefix=PROMPT)
            feed = p.feed_tokens
            for i in ids[:late_from]:
                feed(i)
            bb = clock()
            for i in ids[late_from:late_end]:
                feed(i)
            c = clock()
            for i in ids[late_end:]:
                feed(i)
            msg = p.finalize()[0]
            d = clock()
            q = ResponseParser(compiled, prefix=PROMPT)
            e = clock()
            qf = q.feed
            for s in texts:
                if s:
                    qf(s)
            msg2 = q.finalize()[0]
            f = clock()
            msg3 = parse_tokens(ids, b, prefix=PROMPT)
            g = clock()
            assert msg == msg2 == msg3 == want
            if rep == 0:
                continue
            res["token"].append((d - a) / n)
            res["late"].append((c - bb) / (late_end - late_from))
            res["text"].append((f - e) / n)
            res["whole"].append((g - f) / n)
        out[label] = res
        out[label + "/message"] = want
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", default="qwen3")
    ap.add_argument("--lengths", default="1024,16384,65536")
    ap.add_argument("--kinds", default="turn,content")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--no-tekken", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    node = shutil.which("node")
    if node is None:
        print("node is not on the PATH", file=sys.stderr)
        return 2
    import logging

    logging.getLogger("chatparse").setLevel(logging.ERROR)
    from chatparse import bind, templates
    from chatparse.compiler.writer import dumps

    vocab = load_tokenizer(allow_tekken=not args.no_tekken)
    b = bind(templates.get(args.template), vocab.tok)
    seqs = [(f"{kind}/{n}", generation(vocab.tok, n, kind=kind, at_least=True))
            for kind in args.kinds.split(",") for n in map(int, args.lengths.split(","))]
    with tempfile.TemporaryDirectory() as tmp:
        cpt = Path(tmp) / "tables.cpt"
        cpt.write_bytes(dumps(b.compiled.raw_tables, tokens=b))
        inp = Path(tmp) / "input.json"
        inp.write_text(json.dumps({"reps": args.reps, "window": args.window, "prefix": PROMPT,
                                   "sequences": [{"label": lab, "ids": ids} for lab, ids in seqs]}))
        gc.collect()
        py = python_side(cpt, seqs, args.reps, args.window)
        r = subprocess.run([node, str(ROOT / "bench" / "js_tokens.mjs"), str(cpt), str(inp)], capture_output=True,
                           text=True, timeout=3600)
        if r.returncode:
            print(r.stdout + r.stderr, file=sys.stderr)
            return 1
        js = json.loads(r.stdout.strip().splitlines()[-1])
        size = cpt.stat().st_size
    if not js["message_ok"]:
        print("the JavaScript messages differ from parseTokens's", file=sys.stderr)
        return 1
    med = statistics.median
    print(f"# {vocab.name}: {vocab.source}")
    print(f"# template {args.template}; table file {size / 1e6:.2f} MB with its token section; node "
          f"{subprocess.run([node, '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} cores; {args.reps} reps, medians")
    print(f"# load + token binding: Python {py['load_ms']:.1f} ms, JavaScript {js['load_ms']:.1f} ms")
    print(f"{'generation':<16}{'tokens':>8} | {'ns/token (Python / JS)':>24} {'late':>17} {'text only':>17} "
          f"{'one-shot':>17} | JS/Py per token")
    rows = []
    for label, ids in seqs:
        p, j = py[label], js[label]
        row = {"generation": label, "tokens": len(ids), **{f"py_{k}": med(p[k]) for k in p},
               **{f"js_{k}": med(j[k]) for k in j}}
        rows.append(row)
        cell = lambda k: f"{row['py_' + k]:>7.0f} /{row['js_' + k]:>7.0f}"  # noqa: E731
        print(f"{label:<16}{len(ids):>8} | {cell('token'):>24} {cell('late'):>17} {cell('text'):>17} "
              f"{cell('whole'):>17} | {row['js_token'] / row['py_token']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"vocab": vocab.name, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
