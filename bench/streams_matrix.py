"""Many streams stepped together (`TokenStreams.step`) over a matrix of vocabularies, contents and templates.

``python -m bench.streams_matrix [--quick] [--out FILE]`` writes bench/results/STREAMS_MATRIX.md (issue #21).

Each cell: 256 streams of 2,048 tokens (``--quick``: 64 x 512), each a different generation, stepped with
`TokenStreams.step` once per position, then `finalize_all`; creation and finalize are timed too. Reported: M
tokens/s (all streams' tokens / wall time, median of 3 runs) stepped with ``events=False`` and ended with
``finalize_all(events=False)`` (the caller says it reads no events), the same with plain `step` whose events
nobody reads, the same with every stream's events read (`StepEvents.tolist()`), where a plain run's time goes
(`breakdown`), and, where TokenStreams' native kernels are built, M tokens/s with their Python spellings
(`python_kernels`), each run right after one with the native kernels. Before timing, every stream's message is
asserted equal to `parse_tokens` of its ids, each way.

The target (issue #21) is a ratio: each run of a cell with events not read is paired with a run, right beside it,
of the plain loop over the same ids (`bench.pertoken.plain_streams`: per step and stream one list index into the
vocabulary's token texts and one append, then one join per stream), and the cell's figure is the median of the
per-run ratios TokenStreams time / plain-loop time; it must be at most `bench.pertoken.TARGETS["streams"]`.
The M tokens/s are printed, never judged (bench/PERF_NOTES.md#bench-targets).

Vocabularies: tekken (131k, from the mistral-common wheel, where installed), a byte-level BPE of 8,000
tokens trained here on English prose with the qwen3 specials as special tokens (issue #21's), and a
SentencePiece-style BPE (Metaspace, ``▁``) of up to 32,000 tokens trained here on multilingual text.
Contents: plain prose (ASCII words, a line break every 20 words), code/HTML dense with ``<``, multilingual
(é, 東京, 😀 among the words: characters split across tokens), and agentic turns (1-4 tool calls per stream,
in the template's own format). Templates: qwen3, gpt_oss, hermes, glm45; each generation is written in the
template's format (reasoning where it has one, its tool-call syntax, its end token).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import random
import statistics
import sys
import time

import numpy as np

import chatparse
from chatparse import templates

from .pertoken import TARGETS, decode_all, load_tokenizer, plain_streams, step_streams

OUT = pathlib.Path(__file__).resolve().parent / "results" / "STREAMS_MATRIX.md"
TEMPLATES = ["qwen3", "gpt_oss", "hermes", "glm45"]
CONTENTS = ["prose", "code/HTML", "multilingual", "agentic"]
WORDS = ("the of and to in is it that for on with as was at by this from are be or have an they which one "
         "you were her all she there would their we him been has when who will more no if out so said what up "
         "its about into than them can only other new some could time these two may then do first any my now "
         "such like our over man me even most made after also did many before must through back years where "
         "much your way well down should because each just those people how too little state good very make "
         "world still own see men work long get here between both life being under never day same another know "
         "while last might us great old year off come since against go came right used take three").split()
CODE = ["<div class=\"x\">", "</div>", "<span>", "</span>", "if (a < b) {", "}", "for (i = 0; i < n; i++)",
        "<br/>", "x <= y", "a<b", "<p>", "</p>", "return x;", "def f(x):", "    return x < 3"]
MULTI = ["é", "café", "naïve", "東京", "中文", "😀", "Zürich", "résumé", "✓", "ñandú"]
QWEN_SPECIALS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>"]


def prose(rng: random.Random, n_words: int, extra=None, extra_rate: float = 0.0) -> str:
    """Words, a line break every 20; with `extra`, that share of words drawn from it instead."""
    out = []
    for k in range(n_words):
        w = rng.choice(extra) if extra and rng.random() < extra_rate else rng.choice(WORDS)
        out.append(w + ("\n" if k % 20 == 19 else " "))
    return "".join(out)


def body(rng: random.Random, content: str, n_words: int) -> str:
    if content == "code/HTML":
        return prose(rng, n_words, CODE, 0.3)
    if content == "multilingual":
        return prose(rng, n_words, MULTI, 0.15)
    return prose(rng, n_words)


def tool_call(rng: random.Random, template: str) -> str:
    city = rng.choice(["Paris", "Tokyo", "Lima", "Oslo"])
    if template == "gpt_oss":
        return (f"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                f'{{"city": "{city}", "days": {rng.randint(1, 9)}}}<|call|>')
    if template == "glm45":
        return (f"<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>{city}</arg_value>\n"
                f"<arg_key>days</arg_key>\n<arg_value>{rng.randint(1, 9)}</arg_value>\n</tool_call>")
    return f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{city}", "days": {rng.randint(1, 9)}}}}}\n</tool_call>\n'


def generation(template: str, content: str, seed: int, n_words: int) -> str:
    """One generation in `template`'s format: reasoning (where the format has it), an answer of `content`, and
    with ``agentic`` 1-4 tool calls with prose between them."""
    rng = random.Random(seed)
    kind = "prose" if content == "agentic" else content
    calls = rng.randint(1, 4) if content == "agentic" else 0
    think, answer = n_words // 3, n_words - n_words // 3
    if template == "gpt_oss":
        text = f"<|channel|>analysis<|message|>{body(rng, kind, think)}<|end|>"
        for _ in range(calls):
            text += tool_call(rng, template)
        return text + f"<|start|>assistant<|channel|>final<|message|>{body(rng, kind, answer)}<|return|>"
    if template == "glm45":
        text = f"<think>{body(rng, kind, think)}</think>\n"
        for _ in range(calls):
            text += body(rng, kind, 10) + tool_call(rng, template)
        return text + body(rng, kind, answer) + "<|user|>"
    text = f"<think>\n{body(rng, kind, think)}\n</think>\n\n" if template == "qwen3" else ""
    for _ in range(calls):
        text += body(rng, kind, 10) + tool_call(rng, template)
    return text + body(rng, kind, answer) + "<|im_end|>"


# -- vocabularies ----------------------------------------------------------------------------------------------

def trained_bpe_8k():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    rng = random.Random(0)
    tr = trainers.BpeTrainer(vocab_size=8000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=QWEN_SPECIALS, show_progress=False)
    tok.train_from_iterator([prose(rng, 400) for _ in range(2000)], trainer=tr)
    return tok


def sentencepiece_32k():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    rng = random.Random(1)
    cons, vow = "b c d f g h k l m n p r s t v z".split(), "a e i o u".split()
    lex = ["".join(rng.choice(cons) + rng.choice(vow) for _ in range(rng.randint(1, 4))) for _ in range(30000)]
    texts = [" ".join(rng.choice(lex) for _ in range(300)) for _ in range(600)]
    texts += [prose(rng, 300, MULTI + CODE, 0.2) for _ in range(600)]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    # Every printable ASCII character is a piece of its own, as in the 32k SentencePiece vocabularies models
    # ship (Llama 2, Mistral 7B): byte fallback is for the rest of Unicode. (Trained on this text alone, the
    # vocabulary would lack capitals and "_", and spell them as byte tokens.)
    ascii_pieces = [chr(c) for c in range(33, 127)] + ["\n", "\t", "▁"]
    tr = trainers.BpeTrainer(vocab_size=32000, special_tokens=["<unk>"] + byte_tokens + QWEN_SPECIALS,
                             initial_alphabet=ascii_pieces, show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    return tok


def vocabularies(quick: bool) -> list:
    out = []
    v = load_tokenizer(log=lambda m: None)
    if v.tekken:
        out.append(("tekken 131k", v.tok))
    out.append(("byte-level BPE 8k (trained)", trained_bpe_8k()))
    if not quick:
        sp = sentencepiece_32k()
        out.append((f"SentencePiece-style BPE {sp.get_vocab_size() / 1000:.0f}k (trained)", sp))
    return out


# -- measuring -------------------------------------------------------------------------------------------------

def python_steps(binding, mat) -> tuple:
    """The streams' messages, and how many stream-steps per 1,000 tokens ran in Python (`StepEvents.slow`: the
    stream's parser, or a transition worked out without it) rather than by the row tables: what a cell's
    speed depends on, counted rather than timed, so it does not vary with the machine's load. Counted on the
    first run of the cell (the binding's row tables carry what earlier cells taught them, as in a server)."""
    s = binding.streams(mat.shape[1], prefix="")
    n = 0
    for row in mat:
        n += len(s.step(row).slow)
    return [m for m, _ in s.finalize_all()], 1000 * n / mat.size


def breakdown(binding, mat) -> dict:
    """Where one run's wall time goes (ms): creating the streams, the steps whose streams were all advanced by
    the row tables (``table``: the numpy work, the ring buffer's wraps included, whose text joins every deferred
    token), the steps where some stream ran in Python (``python``), and `finalize_all`; and the Python
    stream-steps taken (``n_python``). Each step is timed on its own (perf_counter: ~0.1 us per call)."""
    clock = time.perf_counter
    t0 = clock()
    s = binding.streams(mat.shape[1], prefix="")
    out = {"create": clock() - t0, "table": 0.0, "python": 0.0, "n_python": 0}
    step = s.step
    for row in mat:
        t0 = clock()
        ev = step(row)
        dt = clock() - t0
        slow = ev.slow
        if slow:
            out["python"] += dt
            out["n_python"] += len(slow)
        else:
            out["table"] += dt
    t0 = clock()
    s.finalize_all()
    out["finalize"] = clock() - t0
    return {k: v * 1e3 if k != "n_python" else v for k, v in out.items()}


class python_kernels:
    """Within: TokenStreams runs the Python spellings of its kernels (`chatparse.runtime.tokens.kernels`), as
    where the C module is not built."""

    def __enter__(self):
        from chatparse.runtime.tokens import kernels as sk

        self.saved = sk.advance, sk._native_join
        sk.advance = sk._native_join = None

    def __exit__(self, *exc):
        from chatparse.runtime.tokens import kernels as sk

        sk.advance, sk._native_join = self.saved


def cell(binding, tok, template: str, content: str, B: int, steps: int, reps: int, compare: bool,
         texts: list) -> tuple:
    """(M tokens/s with ``events=False``, M tokens/s events not read, M tokens/s events read, Python
    stream-steps per 1,000 tokens, the median `breakdown` of `reps` runs, with `compare` the M tokens/s
    events not read with the Python kernels, each of its runs right after one with the native kernels (else
    None), and the plain loop: ``{"tps": M tokens/s, None: ratio with events=False, False: ratio events not
    read}``, each ratio the median over the runs of TokenStreams' time / the plain loop's beside it) for B
    streams of `steps` tokens; `texts`: every id's text (`decode_all`)."""
    words = steps  # about one token per word or more: cut to `steps` below
    seqs = []
    for k in range(B):
        ids = tok.encode(generation(template, content, 1000 + k, words), add_special_tokens=False).ids
        while len(ids) < steps:
            words *= 2
            ids = tok.encode(generation(template, content, 1000 + k, words), add_special_tokens=False).ids
        seqs.append(ids[:steps])
    mat = np.array(seqs, dtype=np.int64).T.copy()  # (steps, B)
    want = [chatparse.parse_tokens(s, binding, prefix="") for s in seqs]

    def run(read: bool | None):
        return step_streams(binding, mat, read)

    def timed(read: bool | None) -> float:
        t0 = time.perf_counter()
        run(read)
        return time.perf_counter() - t0

    rows = mat.tolist()

    def timed_plain() -> float:
        t0 = time.perf_counter()
        plain_streams(texts, rows, B)
        return time.perf_counter() - t0

    messages, slow = python_steps(binding, mat)
    assert messages == want and run(False) == want and run(True) == want and run(None) == want, \
        f"{template}/{content}: TokenStreams != parse_tokens"
    if compare:
        with python_kernels():
            assert run(False) == want, f"{template}/{content}: TokenStreams (Python kernels) != parse_tokens"
    timed_plain()  # warm-up, as the asserts above warmed TokenStreams
    out, py, plain_t, ratios = [], [], [], {None: [], False: []}
    for read in (None, False, True):
        times = []
        for k in range(reps):
            base = timed_plain() if read is not True and k % 2 else None  # the baseline first every other run
            times.append(timed(read))
            if read is not True:
                base = base if base is not None else timed_plain()
                plain_t.append(base)
                ratios[read].append(times[-1] / base)
            if compare and not read:
                with python_kernels():
                    py.append(timed(False))
        out.append(B * steps / statistics.median(times) / 1e6)
    parts = [breakdown(binding, mat) for _ in range(reps)]
    plain = {"tps": B * steps / statistics.median(plain_t) / 1e6,
             None: statistics.median(ratios[None]), False: statistics.median(ratios[False])}
    return (*out, slow, {k: statistics.median(p[k] for p in parts) for k in parts[0]},
            B * steps / statistics.median(py) / 1e6 if py else None, plain)


def _parts(p: dict) -> str:
    per = p["python"] * 1e3 / p["n_python"] if p["n_python"] else 0.0
    return f"{p['create']:.1f} / {p['table']:.1f} / {p['python']:.1f} ({per:.0f}) / {p['finalize']:.1f}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="64 streams x 512 tokens, two vocabularies")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--reps", type=int, default=None, help="timed runs per cell (default 3; --quick 1)")
    ap.add_argument("--only-vocab", default=None, help="run only the vocabularies whose name contains this")
    args = ap.parse_args(argv)
    from chatparse.runtime.tokens import kernels as stream_kernels

    compare = stream_kernels.NATIVE
    kernels = ("native (chatparse.runtime.tokens._stream_kernels); each timed run of a cell with events not read is "
               "followed by one with the Python spellings (numpy and joins, as where the C module is not built)"
               if compare else "Python spellings (numpy and joins: the C module is not built)")
    B, steps, reps = (64, 512, 1) if args.quick else (256, 2048, 3)
    limit = TARGETS["streams"]
    reps = args.reps or reps
    t_start = time.perf_counter()
    load = os.getloadavg()[0]
    rows = []
    for vname, tok in vocabularies(args.quick):
        if args.only_vocab and args.only_vocab not in vname:
            continue
        from transformers import PreTrainedTokenizerFast

        hf = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)
        texts = decode_all(tok)
        for tname in TEMPLATES:
            binding = chatparse.bind(templates.get(tname), hf)
            for content in CONTENTS:
                lazy, fast, read, slow, parts, py, plain = cell(binding, tok, tname, content, B, steps, reps,
                                                                compare, texts)
                rows.append((vname, tname, content, lazy, fast, read, slow, parts, py, plain))
                print(f"  {vname} / {tname} / {content}: events=False {lazy:.1f}M ({plain[None]:.2f}x the plain "
                      f"loop), not read {fast:.1f}M ({plain[False]:.2f}x), plain loop {plain['tps']:.1f}M "
                      f"({read:.1f}M with events"
                      f"{f'; Python kernels {py:.1f}M' if py else ''}), "
                      f"{slow:.2f} Python stream-steps per 1k tokens, {_parts(parts)}, "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
    lines = ["# Many streams over vocabularies, contents and templates", "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `python -m bench.streams_matrix"
             f"{''.join(' ' + a for a in (sys.argv[1:] if argv is None else argv))}`, {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, CPython {platform.python_version()}; load average at start {load:.2f}; "
             f"{B} streams x {steps} tokens, median of {reps}; took {time.perf_counter() - t_start:.0f} s; "
             f"TokenStreams' kernels: {kernels}. "
             f"Target (issue #21), a ratio: in every row, a run with events not read takes at most "
             f"{limit:g}x the time of the plain loop over the same ids (per step and stream one list index into the "
             "vocabulary's token texts and one append, then one join per stream: `bench.pertoken.plain_streams`), "
             "run beside it; the figure is the median of the per-run ratios. It stands for issue #21's 20M tokens/s "
             "(bench/PERF_NOTES.md#bench-targets); M tokens/s are printed, never judged.", "",
             "Two ways of not reading events: `step(ids, events=False)` and `finalize_all(events=False)` (the caller "
             "says so: a stream whose token the row tables do not know stops its parser, and its message comes "
             "from the one-shot parse of its generation at the end, see `TokenStreams.step`), and plain "
             "`step(ids)` whose `StepEvents` nobody reads (events could still be read at any step).", "",
             "Python stream-steps: per 1,000 tokens, the stream-steps taken in Python (the stream's parser, "
             "or a transition worked out without it) rather than by the row tables, counted on the cell's "
             "first run (`python_steps`): load-independent.", "",
             "Where the time goes (`breakdown`, events not read, median of the runs; each step timed on its own, "
             f"so the sum is a little above the plain run's): ms creating the {B} streams, in steps the row tables "
             "took whole (numpy, and the ring buffer's wraps, which join the deferred tokens' text), in steps where "
             "some stream ran in Python (its parser, mostly at a region change: catching up its deferred text, "
             "the delimiter, the close) with the microseconds per such stream-step, and in `finalize_all`. At "
             f"20M tokens/s the whole run has {B * steps / 20e3:.1f} ms.", "",
             "| vocabulary | template | content | plain loop M tokens/s | M tokens/s (`events=False`) | / plain | "
             "target | M tokens/s (events not read) | / plain | target | M tokens/s (every stream's events read) | "
             "Python stream-steps per 1k tokens (events not read) | ms: create / table steps / Python steps (us per "
             "stream-step) / finalize (events not read) |"
             + (" M tokens/s, events not read, Python kernels | native / Python |" if compare else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if compare else "")]

    def verdict(x):
        return "PASS" if x <= limit else "FAIL"

    for vname, tname, content, lazy, fast, read, slow, parts, py, plain in rows:
        lines.append(f"| {vname} | {tname} | {content} | {plain['tps']:.1f} | {lazy:.1f} | {plain[None]:.2f}x | "
                     f"{verdict(plain[None])} | {fast:.1f} | {plain[False]:.2f}x | {verdict(plain[False])} | "
                     f"{read:.1f} | {slow:.2f} | {_parts(parts)} |" + (f" {py:.1f} | {fast / py:.2f}x |" if py else ""))
    lazy_ok = sum(r[9][None] <= limit for r in rows)
    fast_ok = sum(r[9][False] <= limit for r in rows)
    lines += ["", f"With `events=False`: {lazy_ok} of {len(rows)} cells at <= {limit:g}x the plain loop (worst "
              f"{max(r[9][None] for r in rows):.2f}x; slowest {min(r[3] for r in rows):.1f}M tokens/s); events not "
              f"read: {fast_ok} of {len(rows)} (worst {max(r[9][False] for r in rows):.2f}x); "
              f"load average at the "
              f"end {os.getloadavg()[0]:.2f} (on this 2-CPU host the CPU time of a run grows with the load as its "
              "wall time does: other processes share the caches, so the figures move with the load; the plain "
              "loop beside each run moves with it)."]
    if compare:
        ratios = sorted(r[4] / r[8] for r in rows)
        lines += ["", f"Native kernels over the Python spellings, per cell (events not read, medians of runs taken "
                  f"in turns): median {statistics.median(ratios):.2f}x, range {ratios[0]:.2f}-{ratios[-1]:.2f}x; "
                  f"with the Python spellings {sum(r[9]['tps'] / r[8] <= limit for r in rows)} of {len(rows)} cells "
                  f"would be within {limit:g}x the plain loop (their medians over the plain loop's, not paired run "
                  "by run)."]
    lines.append("")
    text = "\n".join(lines)
    print(text)
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
