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
  finalize: time per token, and the process's CPU time per token (``CPU``: on a shared machine, what the
  work costs when other processes take the cores; JavaScript's includes its garbage collector's threads);
* ``late``: the `window` calls that end at 90% of the ids alone (flatness: compare across lengths; the
  region still open there, before the tool call and the region closes at the end);
* ``text``: the character parser fed each token's decoded text (decoded beforehand): what the engine costs
  without decoding;
* ``whole``: the one-shot parse of all the ids (``parse_tokens`` / ``parseTokens``), per token.

The two runtimes alternate, one repetition each in turn (one node process, which first makes three untimed
passes over every sequence so that the JIT has compiled the engine), so that a load spike on the shared machine hits both sides of
a repetition; the table gives medians in ns per token, and the last column the median of the per-repetition
ratios JS / Python for ``token``. Every pass's message is checked equal across runtimes. Garbage collection is
left as it is in normal use.
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
        res = {"token": [], "cpu": [], "late": [], "text": [], "whole": []}
        late_end = n * 9 // 10
        late_from = max(0, late_end - window)
        for rep in range(reps + 1):
            cpu = time.process_time_ns()
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
            cpu = time.process_time_ns() - cpu
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
            res["cpu"].append(cpu / n)
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
    ap.add_argument("--reps", type=int, default=7)
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
        inp.write_text(json.dumps({"warmup": 3, "window": args.window, "prefix": PROMPT,
                                   "sequences": [{"label": lab, "ids": ids} for lab, ids in seqs]}))
        proc = subprocess.Popen([node, str(ROOT / "bench" / "js_tokens.mjs"), str(cpt), str(inp)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        try:
            ready = json.loads(proc.stdout.readline())
            js = {"load_ms": ready["load_ms"]}
            py = None
            for _ in range(args.reps):
                gc.collect()
                p1 = python_side(cpt, seqs, 1, args.window)
                proc.stdin.write("go\n")
                j1 = json.loads(proc.stdout.readline())
                if not j1["message_ok"]:
                    print("the JavaScript messages differ from parseTokens's", file=sys.stderr)
                    return 1
                if py is None:
                    py = p1
                    for label, _ in seqs:  # the same message in both runtimes
                        if ready["messages"][label] != py[label + "/message"]:
                            print(f"{label}: the JavaScript message differs from Python's", file=sys.stderr)
                            return 1
                    for label, _ in seqs:
                        js[label] = {k: [] for k in ("token", "cpu", "late", "text", "whole", "ratio", "cpu_ratio")}
                else:
                    for label, _ in seqs:
                        for k in ("token", "cpu", "late", "text", "whole"):
                            py[label][k] += p1[label][k]
                for label, _ in seqs:
                    for k in ("token", "cpu", "late", "text", "whole"):
                        js[label][k].append(j1[label][k])
                    js[label]["ratio"].append(j1[label]["token"] / p1[label]["token"][0])
                    js[label]["cpu_ratio"].append(j1[label]["cpu"] / p1[label]["cpu"][0])
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
        size = cpt.stat().st_size
    med = statistics.median
    print(f"# {vocab.name}: {vocab.source}")
    print(f"# template {args.template}; table file {size / 1e6:.2f} MB with its token section; node "
          f"{subprocess.run([node, '--version'], capture_output=True, text=True).stdout.strip()}, "
          f"Python {sys.version.split()[0]}; {os.cpu_count()} cores; {args.reps} reps, alternating; medians; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"# load + token binding: Python {py['load_ms']:.1f} ms, JavaScript {js['load_ms']:.1f} ms")
    print(f"{'generation':<16}{'tokens':>8} | {'ns/token (Python / JS)':>24} {'CPU':>17} {'late':>17} "
          f"{'text only':>17} {'one-shot':>17} | JS/Py per token (CPU)")
    rows = []
    for label, ids in seqs:
        p, j = py[label], js[label]
        row = {"generation": label, "tokens": len(ids), **{f"py_{k}": med(p[k]) for k in p if "ratio" not in k},
               **{f"js_{k}": med(j[k]) for k in j}}
        rows.append(row)
        cell = lambda k: f"{row['py_' + k]:>7.0f} /{row['js_' + k]:>7.0f}"  # noqa: E731
        print(f"{label:<16}{len(ids):>8} | {cell('token'):>24} {cell('cpu'):>17} {cell('late'):>17} "
              f"{cell('text'):>17} {cell('whole'):>17} | {row['js_ratio']:.2f} ({row['js_cpu_ratio']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"vocab": vocab.name, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
