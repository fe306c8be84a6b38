"""``~/.cache/chatparse/venv-vllm/bin/python -m bench.vllm_load [--total N] [--concurrency C] [--families ...]``

The vLLM plugin under load through vLLM 0.33.0's real OpenAI chat-completions server (tests/vllm_load.py:
one server per family in this process, ``--tool-call-parser chatparse --reasoning-parser chatparse``, a
scripted engine in place of the model, the real ``openai`` client): by default 5,000 streaming requests with
tools, 64 at once, over six families. Every response is checked (exact: the streamed message equals the
plugin's one-shot answer for the same output and prompt; no leak: it carries its own request's number and no
other's), and the resident set is measured after the servers start, after a warm-up of 200 requests and at
the end. The only targets: every response exact and leak-free, and RSS growth after the warm-up < 5%.

Writes bench/results/VLLM_LOAD.md (or ``--out``) and prints it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import pathlib
import platform
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import vllm_load  # noqa: E402

from bench.vllm_families import _commit  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "results" / "VLLM_LOAD.md"
GROWTH_TARGET = 0.05
MIB = 1024 * 1024


def _mib(n: int) -> str:
    return f"{n / MIB:,.1f} MiB"


def report_md(r: vllm_load.LoadReport, command: str, started: str) -> str:
    ok_exact = r.all_exact and r.error_count == 0
    ok_leak = r.no_leak and r.error_count == 0
    ok_rss = r.rss_growth < GROWTH_TARGET
    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    tokens = sum(r.per_family_tokens.values())
    lines = [
        "# The vLLM plugin under load, through vLLM's OpenAI server",
        "",
        f"{started}, `{command}`, {platform.machine()}, CPython {platform.python_version()}, "
        f"vllm {vllm_load.plugin.vllm.__version__}, {_cpus()} CPUs (other work may run concurrently); "
        f"commit: {_commit()}.",
        "",
        "One vLLM 0.33.0 chat-completions server per family in one process (`OpenAIServingChat` with "
        "`tool_parser=\"chatparse\"`, `reasoning_parser=\"chatparse\"`, its FastAPI router under uvicorn on "
        "127.0.0.1, vLLM's `OutputProcessor` detokenizing; a scripted engine stands in for the model and feeds "
        "one token per step, yielding to the event loop between steps). Each family's model directory is named "
        "after a published model id and holds no `response_template`: the plugin resolved every family from "
        "the model id. Requests are streamed with tools and read with `openai.AsyncOpenAI`; each carries its own "
        "output (a corpus case of tests/real_outputs/ or a generated turn, marked with the request's number in "
        "every part). See tests/vllm_load.py.",
        "",
        "## Result",
        "",
        "| check | result | target |",
        "|---|---|---|",
        f"| exact: streamed message == the plugin's one-shot answer (reasoning, content, each call's name and "
        f"argument string, unstripped; ids present; finish reason) | {r.exact:,} / {r.total:,} | all "
        f"({verdict(ok_exact)}) |",
        f"| no leak: each response carries exactly its own number, once per marked place | "
        f"{r.leak_free:,} / {r.total:,} (responses with another request's number: {r.leak_count}) | all "
        f"({verdict(ok_leak)}) |",
        f"| RSS growth from after the warm-up ({r.warmup:,} requests) to the end | {r.rss_growth * 100:+.2f}% | "
        f"< {GROWTH_TARGET * 100:.0f}% ({verdict(ok_rss)}) |",
        f"| failed requests | {r.error_count} | 0 |",
        "",
        "## Measurements",
        "",
        "| | |",
        "|---|---|",
        f"| requests | {r.total:,} ({r.distinct_outputs:,} distinct outputs) |",
        f"| concurrency (client) | {r.concurrency} (reached: {r.max_in_flight}) |",
        f"| generations in flight at once, per engine (max) | "
        f"{', '.join(f'{f} {n}' for f, n in r.engine_max_active.items())} |",
        f"| wall time (requests, warm-up included) | {r.wall_seconds:.1f} s |",
        f"| requests/s | {r.requests_per_second:.1f} |",
        f"| output tokens streamed | {tokens:,} ({tokens / r.wall_seconds:,.0f} tokens/s) |" if r.wall_seconds
        else f"| output tokens streamed | {tokens:,} |",
        f"| setup (tokenizers trained, model dirs written, servers started) | {r.setup_seconds:.1f} s |",
        f"| RSS after the servers started | {_mib(r.rss_start)} |",
        f"| RSS after the warm-up | {_mib(r.rss_warm)} |",
        f"| RSS at the end | {_mib(r.rss_end)} |",
        "",
        "RSS is the process's current resident set (/proc/self/statm; client, servers and engines are one "
        "process), read after `gc.collect()` with no request in flight.",
        "",
        "## Per family",
        "",
        "| family | model id (directory name) | requests | output tokens | base outputs (corpus + generated) | "
        "left out |",
        "|---|---|---|---|---|---|",
    ]
    for f in r.families:
        b = r.bases.get(f, {})
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted((r.skipped.get(f) or {}).items())) or "-"
        lines.append(f"| {f} | {r.model_ids.get(f, '')} | {r.per_family.get(f, 0):,} | "
                     f"{r.per_family_tokens.get(f, 0):,} | {b.get('corpus', 0)} + {b.get('generated', 0)} | "
                     f"{skipped} |")
    if r.mismatches or r.leaks or r.errors:
        lines += ["", "## Failures (the first few, as recorded)", "", "```json",
                  json.dumps({"mismatch_sources": r.mismatch_sources, "leak_sources": r.leak_sources,
                              "mismatches": [_short(m) for m in r.mismatches], "leaks": r.leaks,
                              "errors": r.errors}, indent=1, ensure_ascii=False),
                  "```"]
    return "\n".join(lines) + "\n"


def _short(m: dict) -> dict:
    """A mismatch without the token ids (the output and the request body reproduce it)."""
    return {k: v for k, v in m.items() if k not in ("prompt_ids", "output_ids")}


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.vllm_load", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--total", type=int, default=5000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--families", nargs="+", default=list(vllm_load.FAMILIES), choices=list(vllm_load.FAMILIES))
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args(argv)
    logging.getLogger("vllm").setLevel(logging.ERROR)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.perf_counter()
    r = vllm_load.run_load(args.total, args.concurrency, args.families, warmup=args.warmup)
    command = "python -m bench.vllm_load" + "".join(
        f" --{k} {v}" for k, v in (("total", args.total), ("concurrency", args.concurrency),
                                   ("warmup", args.warmup)) if v != ap.get_default(k))
    if args.families != list(vllm_load.FAMILIES):
        command += " --families " + " ".join(args.families)
    text = report_md(r, command, started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"{r.summary()}\n(total {time.perf_counter() - t0:.1f} s; written to {args.out})", file=sys.stderr)
    return 0 if (r.all_exact and r.no_leak and r.error_count == 0 and r.rss_growth < GROWTH_TARGET) else 1


if __name__ == "__main__":
    sys.exit(main())
