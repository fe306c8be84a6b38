"""Load time and size of compiled tables files (FORMAT.md), per bundled template, and of token tables.

    python bench/bench_load.py [--repeat N] [--names qwen3 gpt_oss ...] [--no-tokens]

Columns (times are medians over --repeat runs, in milliseconds):

* ``file``: size of the ``.cpt`` file with the JavaScript port section; ``no-js``: without it (what a pickle
  carries); ``pickle``: `pickle.dumps(compiled)` size.
* ``loads``: `chatparse.runtime.tables.loader.loads` on bytes already in memory (header, checksum, JSON, every
  validation, numpy views).
* ``load``: `load(path)` - open, mmap, `loads`.
* ``ready``: what a user waits for at model load: `load(path)` + `CompiledTemplate(spec, raw)` (that is
  `Tables`: class map, per-state lists, prefilter regex) - warm `regex` cache.
* ``cold``: the same with `regex.purge()` before each run, so every delimiter regex is recompiled: the
  first load in a fresh process.
* ``unpickle``: `pickle.loads` of a pickled CompiledTemplate.
* ``compile``: `build_tables` from scratch, for comparison (what loading the tables saves).
* ``ref cold``: the baseline, what the transformers reference does at model load: its
  `load_response_template(template)`, with `re.purge()` and `regex.purge()` before each run (cold, as ``cold``),
  each run right after one of ``cold`` (or right before, every other run).
* ``/ ref``: ``cold`` over ``ref cold``, the median of the per-run ratios.

Target: ``cold`` <= `COLD_TARGET` x the reference's cold `load_response_template`, for every template
(bench/PERF_NOTES.md#bench-targets: the old absolute 5 ms, and why this ratio).

Token tables (FORMAT.md section 8; the second table): a file holding the qwen3 template with the token section
for a 150k-token byte-level vocabulary (synthetic, deterministic: words with and without a leading space in
several scripts, emoji, ~1% incomplete UTF-8, a few special tokens) and, when mistral-common is installed,
Mistral's tekken (131k tokens). Columns:

* ``file``: size of the ``.cpt`` file; ``loads`` / ``load`` as above (every check of the token section included:
  offsets, flags, UTF-8 of every token text, indices, the vocabulary hash recomputed);
* ``ready``: `load(path)` + `CompiledTemplate` + `chatparse.runtime.tokens.token_binding` - everything a
  `TokenParser` needs (the per-token byte and text lists), no compiler, no tokenizer;
* ``first``: ``ready`` + a `TokenParser` and its first token (builds the mode's inert-token row);
* ``bind``: what the file saves: `chatparse.compiler.tokens.bind` from scratch (the vocabulary derivation from
  the tokenizer, for tekken, plus the token tables);
* ``plain``: the baseline, the least a hand-written per-token parser does at load: a list of every token's
  text decoded from its bytes (``[b.decode("utf-8", "replace") for b in token_bytes]``), each run beside one
  of ``ready``; ``/ plain``: ``ready`` over it, the median of the per-run ratios.

Target: ``ready`` <= `TOKENS_TARGET` x ``plain`` for the 150k-token tables (the old absolute 50 ms: see
bench/PERF_NOTES.md#bench-targets).
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import regex  # noqa: E402

import chatparse.tokenizer_dir  # noqa: E402,F401  (registers pickling through the table format)
from chatparse import CompiledTemplate, compile_template, templates  # noqa: E402
from chatparse.compiler.build import build_tables  # noqa: E402
from chatparse.compiler.writer import dumps, save  # noqa: E402
from chatparse.runtime.tables.loader import load, loads  # noqa: E402

# Targets, each a ratio to a baseline measured in the same run (bench/PERF_NOTES.md#bench-targets):
COLD_TARGET = 8.0  # character tables: cold `ready` / the reference's cold load_response_template
TOKENS_TARGET = 5.0  # 150k-token tables: `ready` / decoding every token's bytes in a Python list


def _times(fn, repeat: int, setup=None) -> list:
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def _median_ms(fn, repeat: int, setup=None) -> float:
    return statistics.median(_times(fn, repeat, setup)) * 1000


def _paired(fn, base, repeat: int, setup=None) -> tuple:
    """(median ms of fn, median ms of base, median of the per-run ratios fn / base): each run of `fn` beside one
    of `base` (base first every other run), both after `setup`."""
    a, b = [], []
    for k in range(repeat):
        pair = [(fn, a), (base, b)]
        for f, out in (pair if k % 2 == 0 else pair[::-1]):
            out += _times(f, 1, setup)
    return (statistics.median(a) * 1000, statistics.median(b) * 1000,
            statistics.median(x / y for x, y in zip(a, b)))


def _purge() -> None:
    import re

    re.purge()
    regex.purge()


def measure(name: str, repeat: int, tmp: Path) -> dict:
    compiled = compile_template(templates.get(name))
    path = tmp / f"{name}.cpt"
    save(compiled, path)
    data = path.read_bytes()
    pickled = pickle.dumps(compiled)

    def ready():
        raw = load(path)
        CompiledTemplate(raw["template"], raw)

    from transformers.utils.chat_parsing.response_templates import load_response_template

    spec = templates.get(name)
    load_response_template(spec)  # warm-up, as `compile_template` above warmed chatparse's imports
    cold, ref_cold, ratio = _paired(ready, lambda: load_response_template(spec), repeat, setup=_purge)
    return {
        "name": name,
        "file": len(data),
        "no-js": len(dumps(compiled.raw_tables, js=False)),
        "pickle": len(pickled),
        "loads": _median_ms(lambda: loads(data), repeat),
        "load": _median_ms(lambda: load(path), repeat),
        "ready": _median_ms(ready, repeat),
        "cold": cold,
        "unpickle": _median_ms(lambda: pickle.loads(pickled), repeat),
        "compile": _median_ms(lambda: build_tables(compiled.spec), max(3, repeat // 20)),
        "ref cold": ref_cold,
        "/ ref": ratio,
    }


def synthetic_vocab(n: int = 150_000, seed: int = 0):
    """A deterministic byte-level vocabulary of `n` tokens: every byte, the delimiters of the bundled formats
    as tokens, words with and without a leading space (Latin, accented, CJK, Greek, Cyrillic, emoji,
    punctuation), and ~1% incomplete UTF-8. Also used by tests/test_format_tokens.py."""
    import numpy as np

    from chatparse.compiler.tokens import TokenVocab

    rng = random.Random(seed)
    alphabet = (string.ascii_letters * 4 + string.digits + " .,;:!?'\"-_()[]{}<>/\\|\n\t" + "éüñçøßàèìòù"
                + "中文日本語한국어" + "😀🚀✓—" + "Ελληνικάрусский")
    toks = [bytes([b]) for b in range(256)]
    toks += [s.encode() for s in ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>", "<|im_start|>",
                                  "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|call|>", "<|return|>",
                                  "[TOOL_CALLS]", "[ARGS]")]
    seen = set(toks)
    wide = "中文日本語😀🚀Ωж"
    while len(toks) < n:
        if rng.random() < 0.01:
            ch = rng.choice(wide).encode()
            word = "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(0, 6)))
            t = ((" " if rng.random() < 0.3 else "") + word).encode() + ch[:rng.randint(1, len(ch) - 1)]
        else:
            t = ((" " if rng.random() < 0.6 else "")
                 + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))).encode()
        if t not in seen:
            seen.add(t)
            toks.append(t)
    return TokenVocab(kind="bytes", tok_bytes=toks, byte_val=None, skip=np.zeros(n, dtype=bool),
                      name=f"synthetic {n}")


def _tekken():
    import importlib.util

    try:
        spec = importlib.util.find_spec("mistral_common")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "data", "tekken_240911.json")
    try:
        from transformers.integrations.mistral.tokenizer import MistralConverter

        return MistralConverter(path).converted()
    except Exception as e:  # pragma: no cover
        print(f"# tekken unavailable ({e})", file=sys.stderr)
        return None


def measure_tokens(label: str, tokenizer, repeat: int, tmp: Path, template: str = "qwen3") -> dict:
    from chatparse.compiler import tokens as ctok
    from chatparse.runtime.tokens import TokenParser, token_binding

    def fresh_bind():
        ctok._vocab_cache.clear()
        ctok._tables_cache.clear()
        ctok._bindings.clear()
        return ctok.bind(templates.get(template), tokenizer)

    t = time.perf_counter()
    binding = fresh_bind()
    bind_ms = (time.perf_counter() - t) * 1000
    path = tmp / f"tokens-{binding.vocab.size}.cpt"
    save(binding.compiled, path, tokens=binding)
    data = path.read_bytes()

    def ready():
        raw = load(path)
        return token_binding(CompiledTemplate(raw["template"], raw))

    def first():
        TokenParser(ready(), prefix="").feed_tokens(0)

    tok_bytes = list(binding.vocab.tok_bytes)

    def plain():
        return [b.decode("utf-8", "replace") for b in tok_bytes]

    plain()  # warm-up (ready ran above)
    ready_ms, plain_ms, ratio = _paired(ready, plain, repeat)
    return {
        "name": label,
        "tokens": binding.vocab.size,
        "file": len(data),
        "loads": _median_ms(lambda: loads(data), repeat),
        "load": _median_ms(lambda: load(path), repeat),
        "ready": ready_ms,
        "first": _median_ms(first, repeat),
        "bind": bind_ms,
        "plain": plain_ms,
        "/ plain": ratio,
    }


def main_tokens(repeat: int) -> bool:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        rows.append(measure_tokens("synthetic 150k", synthetic_vocab(), repeat, Path(d)))
        tek = _tekken()
        if tek is not None:
            rows.append(measure_tokens("tekken_240911", tek, repeat, Path(d)))
        else:
            print("# mistral-common not installed: no tekken row", file=sys.stderr)
    cols = ["tokens", "file", "loads", "load", "ready", "first", "bind", "plain", "/ plain"]
    head = f"{'vocabulary':<16}" + "".join(f"{c:>10}" for c in cols)
    print(f"\n# token tables (qwen3 template + token section): sizes in bytes, times in ms (median of {repeat}; "
          "bind: one run)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<16}" + "".join(f"{r[c]:>10}" if isinstance(r[c], int) else f"{r[c]:>10.3f}"
                                           for c in cols))
    big = rows[0]
    ok = big["/ plain"] <= TOKENS_TARGET
    print(f"\n150k-token tables ready to parse in {big['ready']:.1f} ms (load alone {big['load']:.1f} ms), "
          f"{big['/ plain']:.2f}x the plain decode of every token's bytes ({big['plain']:.1f} ms); "
          f"target <= {TOKENS_TARGET:g}x: {'met' if ok else 'MISSED'}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--names", nargs="*", default=None, help="bundled template names (default: all)")
    ap.add_argument("--no-tokens", action="store_true", help="skip the token-table measurements")
    args = ap.parse_args(argv)
    names = args.names or templates.names()
    with tempfile.TemporaryDirectory() as d:
        rows = [measure(n, args.repeat, Path(d)) for n in names]
    cols = ["file", "no-js", "pickle", "loads", "load", "ready", "cold", "unpickle", "compile", "ref cold", "/ ref"]
    head = f"{'template':<16}" + "".join(f"{c:>10}" for c in cols)
    print(f"# chatparse table files: sizes in bytes, times in ms (median of {args.repeat})")
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = [f"{r[c]:>10}" if isinstance(r[c], int) else f"{r[c]:>10.3f}" for c in cols]
        print(f"{r['name']:<16}" + "".join(cells))
    print("-" * len(head))
    worst = max(rows, key=lambda r: r["cold"])
    med = {c: statistics.median(r[c] for r in rows) for c in cols}
    print(f"{'median':<16}" + "".join(f"{med[c]:>10.0f}" if c in ("file", "no-js", "pickle") else f"{med[c]:>10.3f}"
                                      for c in cols))
    worst_ratio = max(rows, key=lambda r: r["/ ref"])
    ok = worst_ratio["/ ref"] <= COLD_TARGET
    print(f"\nslowest cold load: {worst['cold']:.3f} ms ({worst['name']}); highest cold load over the reference's "
          f"cold load_response_template: {worst_ratio['/ ref']:.2f}x ({worst_ratio['name']}: "
          f"{worst_ratio['cold']:.3f} ms against {worst_ratio['ref cold']:.3f} ms); target <= {COLD_TARGET:g}x: "
          f"{'met' if ok else 'MISSED'}")
    if not args.no_tokens:
        ok = main_tokens(max(5, min(args.repeat, 21))) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
