"""Load time and size of compiled tables files (FORMAT.md), per bundled template, and of token tables.

    python bench/bench_load.py [--repeat N] [--names qwen3 gpt_oss ...] [--no-tokens]

Columns (times are medians over --repeat runs, in milliseconds):

* ``file``: size of the ``.cpt`` file with the JavaScript port section; ``no-js``: without it (what a pickle
  carries); ``pickle``: `pickle.dumps(compiled)` size.
* ``loads``: `chatparse.runtime.loader.loads` on bytes already in memory (header, checksum, JSON, every
  validation, numpy views).
* ``load``: `load(path)` - open, mmap, `loads`.
* ``ready``: what a user waits for at model load: `load(path)` + `CompiledTemplate(spec, raw)` (that is
  `Tables`: class map, per-state lists, prefilter regex) - warm `regex` cache.
* ``cold``: the same with `regex.purge()` before each run, so every delimiter regex is recompiled: the
  first load in a fresh process.
* ``unpickle``: `pickle.loads` of a pickled CompiledTemplate.
* ``compile``: `build_tables` from scratch, for comparison (what loading the tables saves).

Target: ``cold`` <= 5 ms for character tables.

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
  the tokenizer, for tekken, plus the token tables).

Target: ``ready`` <= 50 ms for the 150k-token tables.
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
from chatparse.runtime.loader import load, loads  # noqa: E402

TARGET_MS = 5.0
TOKENS_TARGET_MS = 50.0


def _median_ms(fn, repeat: int, setup=None) -> float:
    times = []
    for _ in range(repeat):
        if setup:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def measure(name: str, repeat: int, tmp: Path) -> dict:
    compiled = compile_template(templates.get(name))
    path = tmp / f"{name}.cpt"
    save(compiled, path)
    data = path.read_bytes()
    pickled = pickle.dumps(compiled)

    def ready():
        raw = load(path)
        CompiledTemplate(raw["template"], raw)

    return {
        "name": name,
        "file": len(data),
        "no-js": len(dumps(compiled.raw_tables, js=False)),
        "pickle": len(pickled),
        "loads": _median_ms(lambda: loads(data), repeat),
        "load": _median_ms(lambda: load(path), repeat),
        "ready": _median_ms(ready, repeat),
        "cold": _median_ms(ready, repeat, setup=regex.purge),
        "unpickle": _median_ms(lambda: pickle.loads(pickled), repeat),
        "compile": _median_ms(lambda: build_tables(compiled.spec), max(3, repeat // 20)),
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

    return {
        "name": label,
        "tokens": binding.vocab.size,
        "file": len(data),
        "loads": _median_ms(lambda: loads(data), repeat),
        "load": _median_ms(lambda: load(path), repeat),
        "ready": _median_ms(ready, repeat),
        "first": _median_ms(first, repeat),
        "bind": bind_ms,
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
    cols = ["tokens", "file", "loads", "load", "ready", "first", "bind"]
    head = f"{'vocabulary':<16}" + "".join(f"{c:>10}" for c in cols)
    print(f"\n# token tables (qwen3 template + token section): sizes in bytes, times in ms (median of {repeat}; "
          "bind: one run)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['name']:<16}" + "".join(f"{r[c]:>10}" if isinstance(r[c], int) else f"{r[c]:>10.3f}"
                                           for c in cols))
    big = rows[0]
    ok = big["ready"] <= TOKENS_TARGET_MS
    print(f"\n150k-token tables ready to parse in {big['ready']:.1f} ms (load alone {big['load']:.1f} ms); "
          f"target <= {TOKENS_TARGET_MS:.0f} ms: {'met' if ok else 'MISSED'}")
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
    cols = ["file", "no-js", "pickle", "loads", "load", "ready", "cold", "unpickle", "compile"]
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
    ok = worst["cold"] <= TARGET_MS
    print(f"\nslowest cold load: {worst['cold']:.3f} ms ({worst['name']}); target <= {TARGET_MS} ms: "
          f"{'met' if ok else 'MISSED'}")
    if not args.no_tokens:
        ok = main_tokens(max(5, min(args.repeat, 21))) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
