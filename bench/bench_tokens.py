"""Benchmark: parsing token ids (issue 3), side by side with decoding each token and feeding text.

    python bench/bench_tokens.py [--template qwen3] [--lengths 256,1024,4096,16384,65536] [--streams 256]
                                 [--no-reference] [--json out.json]

Vocabulary: Mistral's tekken (131k byte-level tokens) from the mistral-common wheel when installed
(``pip install --no-deps mistral-common==1.13.1 && pip install tiktoken 'pydantic-extra-types[pycountry]'``),
else (or with CHATPARSE_BENCH_NO_TEKKEN=1) a 32k byte-level BPE trained here. The generation is synthetic prose (with a few non-ASCII characters) inside the template's
reasoning block and answer, ending in a tool call.

Columns (all parse the same ids to the same message):

* ``chatparse ids``: ``TokenParser.feed_tokens(id)``, one id per call;
* ``decode+text``: ``tokenizer.decode([id])`` per token, then ``chatparse.ResponseParser.feed(text)``;
* ``decode+reference``: the same with transformers' ``ResponseParser`` (skipped past --ref-max tokens).

Per-token figures: the median of single calls (each timed on its own, minus the timer's own cost) and, in
brackets, the mean (whole run / calls, which includes the rare tokens that run the character engine). Stream figures include creating the parsers and finalizing every stream. Whole-sequence figures are tokens/s
for one-shot parsing from ids (``parse_tokens`` vs
``tokenizer.decode`` + ``parse_response`` vs transformers' ``tokenizer.parse_response``). Streams: B
generations stepped together with ``TokenStreams.step`` (numpy), with and without reading every stream's
events (``StepEvents.tolist()``), against B ``TokenParser``s fed in a Python loop, B ``decode`` +
``chatparse.ResponseParser`` and B ``decode`` + reference ``ResponseParser`` (first 128 steps).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.compiler import tokens as ctok  # noqa: E402
from chatparse.compiler.tokens import bind  # noqa: E402

WORDS = ("the of and to in is that it for on with as was by this be are from at or an have not they which one "
         "you had all were there been more if will would about their what so can when up out them some other "
         "into its only then time two these could first may any like now people my over new very after "
         "weather Paris forecast temperature sunny cloudy rain tomorrow city function result value check").split()
RARE = "naïve café Zürich résumé 東京 中文 😀 ✓".split()  # one word in 200: characters split across tokens


def load_tokenizer():
    import importlib.util

    try:
        spec = importlib.util.find_spec("mistral_common")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and not os.environ.get("CHATPARSE_BENCH_NO_TEKKEN"):
        path = os.path.join(spec.submodule_search_locations[0], "data", "tekken_240911.json")
        try:
            from transformers.integrations.mistral.tokenizer import MistralConverter

            return MistralConverter(path).converted(), "tekken_240911 (mistral-common)"
        except Exception as e:  # pragma: no cover
            print(f"# tekken unavailable ({e}); training a byte-level BPE instead", file=sys.stderr)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=32000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"],
                             show_progress=False)
    rng = random.Random(0)
    tok.train_from_iterator((prose(rng, 2000) for _ in range(400)), trainer=tr)
    return tok, "byte-level BPE 32k (trained here)"


def prose(rng, n_chars: int, plain: bool = False) -> str:
    """Sentences of common words; unless `plain`, some end a paragraph or line and one word in 200 has
    characters that byte-level BPE splits across tokens."""
    out, size = [], 0
    while size < n_chars:
        sent = " ".join(rng.choice(RARE) if not plain and rng.random() < 0.005 else rng.choice(WORDS)
                        for _ in range(rng.randint(6, 18)))
        sent = sent[0].upper() + sent[1:] + rng.choice([".", ".", "?", "!"]) + (
            " " if plain else rng.choice([" ", " ", "\n\n", "\n"]))
        out.append(sent)
        size += len(sent)
    return "".join(out)


def generation(tok, n_tokens: int, seed: int = 0, tool_call: bool = True, plain: bool = False) -> list:
    """A qwen3-style generation of about n_tokens tokens."""
    rng = random.Random(seed)
    chars = int(n_tokens * 4.2)
    text = "<think>\n" + prose(rng, chars // 2, plain) + "\n</think>\n\n" + prose(rng, chars // 2, plain)
    if tool_call:
        text += '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    text += "<|im_end|>"
    ids = tok.encode(text, add_special_tokens=False).ids
    return ids


def per_token(feed, ids) -> tuple[float, float]:
    """(median, mean) microseconds per call. The median times every call on its own and subtracts the
    timer's own cost (the median of back-to-back timer reads); the mean is the whole run / calls."""
    clock = time.perf_counter_ns
    overhead = statistics.median([-(clock() - clock()) for _ in range(20001)])
    times = []
    append = times.append
    t0 = clock()
    for i in ids:
        t = clock()
        feed(i)
        append(clock() - t)
    total = clock() - t0
    med = max(statistics.median(times) - overhead, 0.0) / 1000
    mean = total / len(ids) / 1000 - overhead / 1000
    return med, mean


def best_of(fn, repeat: int = 5) -> float:
    """Fastest of `repeat` runs (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--template", default="qwen3")
    ap.add_argument("--lengths", default="256,1024,4096,16384,65536")
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--stream-steps", type=int, default=2048)
    ap.add_argument("--ref-max", type=int, default=4096, help="longest generation fed to the reference")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    results: dict = {}

    tok, vocab_name = load_tokenizer()
    template = templates.get(args.template)
    compiled = chatparse.compile_template(template)

    # -- building the token tables --------------------------------------------------------------------------
    t = time.perf_counter()
    vocab = ctok.vocab_for(tok)
    t_vocab = time.perf_counter() - t
    t = time.perf_counter()
    tables = ctok.tables_for(compiled, vocab)
    t_tables = time.perf_counter() - t
    b = bind(compiled, tok)
    results["vocab"] = {"name": vocab_name, "size": vocab.size, "not_utf8_alone": vocab.n_partial,
                        "build_vocab_s": round(t_vocab, 3), "build_tables_s": round(t_tables, 3),
                        "build_total_s": round(t_vocab + t_tables, 3),
                        "inert_tokens_per_mode": [int(tables.flat[k * vocab.size:(k + 1) * vocab.size].sum())
                                                  for k in range(tables.n_modes)]}
    print(f"vocabulary: {vocab_name}, {vocab.size} ids ({vocab.n_partial} not valid UTF-8 alone)")
    print(f"token tables: vocab {t_vocab:.2f} s + {tables.n_modes} mode tables {t_tables:.2f} s "
          f"= {t_vocab + t_tables:.2f} s (target <= 2 s)")

    try:
        from transformers.utils.chat_parsing import ResponseParser as RefParser
    except Exception:  # pragma: no cover
        RefParser = None

    # -- one token per call -----------------------------------------------------------------------------------
    print(f"\none token per call, us/token: median (mean) (template {args.template})")
    print(f"{'tokens':>8} {'chatparse ids':>18} {'decode+text':>18} {'decode+reference':>18}")
    results["per_token"] = []
    for n in lengths:
        ids = generation(tok, n, seed=n)
        p = b.parser(prefix="")
        gc.collect()
        us_ids = per_token(p.feed_tokens, ids)
        msg_ids, _ = p.finalize()
        decode = tok.decode
        r = chatparse.ResponseParser(compiled, prefix="")
        feed = r.feed
        us_text = per_token(lambda i: feed(decode([i], skip_special_tokens=False)), ids)
        r.finalize()
        us_ref = (float("nan"), float("nan"))
        if RefParser is not None and not args.no_reference and len(ids) <= args.ref_max:
            rr = RefParser(template, prefix="")
            rfeed = rr.feed
            us_ref = per_token(lambda i: rfeed(decode([i], skip_special_tokens=False)), ids)
        assert msg_ids == chatparse.parse_response(tok.decode(ids, skip_special_tokens=False), compiled, prefix="")
        results["per_token"].append({"tokens": len(ids),
                                     "chatparse_ids_median_us": round(us_ids[0], 3),
                                     "chatparse_ids_mean_us": round(us_ids[1], 3),
                                     "decode_text_median_us": round(us_text[0], 3),
                                     "decode_text_mean_us": round(us_text[1], 3),
                                     "decode_reference_median_us": round(us_ref[0], 3),
                                     "decode_reference_mean_us": round(us_ref[1], 3)})

        def cell(x):
            return f"{x[0]:.3f} ({x[1]:.3f})"

        print(f"{len(ids):>8} {cell(us_ids):>18} {cell(us_text):>18} {cell(us_ref):>18}")

    # -- whole sequences -----------------------------------------------------------------------------------------
    print("\nwhole sequence from ids, M tokens/s (best of 5)")
    print(f"{'tokens':>8} {'parse_tokens':>13} {'(numpy ids)':>12} {'decode+parse':>13} {'tok.parse_response':>19}")
    results["whole"] = []
    hf = None
    try:
        from transformers import PreTrainedTokenizerFast

        hf = PreTrainedTokenizerFast(tokenizer_object=tok)
        hf.response_template = template
    except Exception:  # pragma: no cover
        pass
    for n in lengths:
        ids = generation(tok, n, seed=n)
        arr = np.asarray(ids, dtype=np.int64)
        m1 = best_of(lambda: b.parse(ids, prefix=""))
        m2 = best_of(lambda: b.parse(arr, prefix=""))
        m3 = best_of(lambda: chatparse.parse_response(tok.decode(ids, skip_special_tokens=False), compiled,
                                                      prefix=""))
        m4 = float("nan")
        if hf is not None and not args.no_reference and len(ids) <= args.ref_max:
            m4 = best_of(lambda: hf.parse_response(ids, prefix=""), repeat=2)
        row = {"tokens": len(ids), "parse_tokens_Mtps": round(len(ids) / m1 / 1e6, 2),
               "parse_tokens_numpy_Mtps": round(len(ids) / m2 / 1e6, 2),
               "decode_parse_Mtps": round(len(ids) / m3 / 1e6, 2),
               "transformers_parse_response_Mtps": round(len(ids) / m4 / 1e6, 3)}
        results["whole"].append(row)
        print(f"{len(ids):>8} {row['parse_tokens_Mtps']:>13.2f} {row['parse_tokens_numpy_Mtps']:>12.2f} "
              f"{row['decode_parse_Mtps']:>13.2f} {row['transformers_parse_response_Mtps']:>19.3f}")

    # -- many streams -------------------------------------------------------------------------------------------
    B = args.streams
    results["streams"] = {}
    for label, plain in (("prose with line breaks and split characters", False),
                         ("plain prose (no line breaks, no split characters)", True)):
        results["streams"][label] = bench_streams(b, tok, template, compiled, B, args.stream_steps, plain,
                                                  label, None if args.no_reference else RefParser)

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


def bench_streams(b, tok, template, compiled, B: int, steps: int, plain: bool, label: str, RefParser) -> dict:
    seqs = [generation(tok, steps + 64, seed=1000 + k, tool_call=False, plain=plain)[:steps] for k in range(B)]
    steps = min(map(len, seqs))
    mat = np.array([s[:steps] for s in seqs], dtype=np.int64).T.copy()  # (steps, B)
    print(f"\n{B} streams stepped together, {steps} steps, {label}: M tokens/s (best of 3)")

    def run_streams(read_events: bool):
        s = b.streams(B, prefix="")
        step = s.step
        if read_events:
            for k in range(steps):
                step(mat[k]).tolist()
        else:
            for k in range(steps):
                step(mat[k])
        return [m for m, _ in s.finalize_all()]

    def run_loop():
        ps = [b.parser(prefix="") for _ in range(B)]
        feeds = [p.feed_tokens for p in ps]
        rows = mat.tolist()
        for k in range(steps):
            row = rows[k]
            for j in range(B):
                feeds[j](row[j])
        return [p.finalize()[0] for p in ps]

    def run_decode_loop():
        rs = [chatparse.ResponseParser(compiled, prefix="") for _ in range(B)]
        feeds = [r.feed for r in rs]
        rows = mat.tolist()
        dec = tok.decode
        for k in range(steps):
            row = rows[k]
            for j in range(B):
                feeds[j](dec([row[j]], skip_special_tokens=False))
        return [r.finalize()[0] for r in rs]

    def run_reference_loop(n_steps: int):
        rs = [RefParser(template, prefix="") for _ in range(B)]
        feeds = [r.feed for r in rs]
        rows = mat[:n_steps].tolist()
        dec = tok.decode
        for k in range(n_steps):
            row = rows[k]
            for j in range(B):
                feeds[j](dec([row[j]], skip_special_tokens=False))

    t_s = best_of(lambda: run_streams(False), repeat=3)
    t_se = best_of(lambda: run_streams(True), repeat=3)
    t_l = best_of(run_loop, repeat=2)
    t_d = best_of(run_decode_loop, repeat=1)
    want = run_loop()
    assert run_streams(False) == run_streams(True) == want
    # decoding each token on its own is wrong for characters split across tokens: count the damage
    wrong = sum(x != y for x, y in zip(run_decode_loop(), want))
    total = B * steps
    ref_steps = min(steps, 128)
    t_r = float("nan")
    if RefParser is not None:
        t_r = best_of(lambda: run_reference_loop(ref_steps), repeat=1)
    out = {"streams": B, "steps": steps,
           "step_Mtps": round(total / t_s / 1e6, 2),
           "step_read_events_Mtps": round(total / t_se / 1e6, 2),
           "python_loop_feed_tokens_Mtps": round(total / t_l / 1e6, 2),
           "python_loop_decode_text_Mtps": round(total / t_d / 1e6, 3),
           f"python_loop_decode_reference_Mtps ({ref_steps} steps)": round(B * ref_steps / t_r / 1e6, 3)}
    out["decode_each_token_wrong_messages"] = wrong
    for k, v in out.items():
        print(f"  {k:>36}: {v}")
    return out


if __name__ == "__main__":
    sys.exit(main())
