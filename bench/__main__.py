"""``python -m bench [--quick] [--out DIR] [--only SECTION ...]``

Runs the benchmark suite (chatparse vs the transformers reference, interleaved in one process; the serving
dialect, ``dialect="vllm"``, against vLLM 0.33.0's chat_parsing where `bench.vllm_ref` finds it) and writes
``RESULTS.md`` plus PNG plots to ``bench/results/`` (full run) or a fresh temporary directory (``--quick``,
which takes under a minute), unless ``--out`` names the directory.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

SECTIONS = ("streaming", "oneshot", "runs", "compile", "memory", "tokens")
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, few repetitions (< 1 minute)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output directory (default: bench/results, or a temporary directory with --quick)")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, default=None, help="run only these measurements")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> Path:
    """Run the suite; returns the path of the RESULTS.md written."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse_args(argv)
    logging.getLogger("transformers").setLevel(logging.ERROR)

    from . import measure, plots, report

    cfg = measure.Config.quick_mode() if args.quick else measure.Config()
    if args.quiet:
        cfg.progress = lambda msg: None
    out = args.out
    if out is None:
        out = Path(tempfile.mkdtemp(prefix="chatparse-bench-")) if args.quick else RESULTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    todo = args.only or SECTIONS

    t0 = time.perf_counter()
    measure.prepare()
    if cfg.serving and ("streaming" in todo or "tokens" in todo):
        from . import vllm_ref

        cfg.progress(f"[bench] serving dialect: {vllm_ref.status()}")
    results: dict = {}
    names: list[str] = []
    steps = [
        ("streaming", measure.streaming, plots.streaming),
        ("oneshot", measure.oneshot, plots.oneshot),
        ("runs", measure.runs, None),
        ("compile", measure.compile_times, plots.compile_times),
        ("memory", measure.memory, plots.memory),
        ("tokens", measure.tokens, plots.tokens),
    ]
    try:
        for key, run, draw in steps:
            if key not in todo:
                continue
            cfg.progress(f"[bench] {key} ({time.perf_counter() - t0:.0f} s)")
            results[key] = run(cfg)
            if draw is not None and results[key]:
                names += draw(results[key], out)
    finally:
        measure.release()
    path = report.write(out, results, cfg, report.command_line(argv), names, time.perf_counter() - t0)
    cfg.progress(f"[bench] wrote {path} ({time.perf_counter() - t0:.0f} s)")
    return path


if __name__ == "__main__":
    main()
