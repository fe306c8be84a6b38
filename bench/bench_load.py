"""Load time and size of compiled tables files (FORMAT.md), per bundled template.

    python bench/bench_load.py [--repeat N] [--names qwen3 gpt_oss ...]

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

Target: ``cold`` <= 5 ms for character tables. (Token tables - 150k-token vocabularies, target 50 ms - do not
exist yet; the format reserves the vocabulary hash for them.)
"""

from __future__ import annotations

import argparse
import pickle
import statistics
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--names", nargs="*", default=None, help="bundled template names (default: all)")
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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
