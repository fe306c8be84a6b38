"""Cost of the grammar export (issue #18): build time per family, engine compile time, per-token mask cost.

For each bundled family (or those named), with bench.grammar_soundness's three tools:

* export: `CompiledTemplate.grammar(tools)` in both formats (median of 5, template compiled beforehand);
* llguidance: matcher construction from the Lark text, then the mean time of one token mask along the
  family's longest corpus output (tokenized with the corpus BPE), consuming each token;
* xgrammar: the structural tag compiled, then the same per-token mask walk.

vLLM 0.33.0 derives no tool-call structural tag for any bundled family (bench/grammar_vllm_tags.py), so
there is no vLLM tag to time against; see bench/results/GRAMMAR.md.

    python -m bench.grammar_bench [--engines llguidance,xgrammar] [FAMILY ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def _median_ms(fn, n=5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench_family(name: str, engines: tuple, tools: list, text: str) -> dict:
    from bench import grammar_engines as ge
    from chatparse import compile_template, templates

    compiled = compile_template(templates.get(name))
    row = {"family": name,
           "export_lark_ms": _median_ms(lambda: compiled.grammar(tools)),
           "export_tag_ms": _median_ms(lambda: compiled.grammar(tools, format="structural_tag"))}
    ids = ge.encode(text)
    row["tokens"] = len(ids)
    if "llguidance" in engines:
        from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

        lark = compiled.grammar(tools).text
        t0 = time.perf_counter()
        m = ge.ll_matcher(lark)
        row["ll_compile_ms"] = (time.perf_counter() - t0) * 1e3
        mask = allocate_token_bitmask(1, ge.ll_tokenizer().vocab_size)
        spent, n = 0.0, 0
        for t in ids:
            t0 = time.perf_counter()
            fill_next_token_bitmask(m, mask, 0)
            spent += time.perf_counter() - t0
            n += 1
            if not m.consume_token(t):
                break
        row["ll_mask_us"] = spent / max(n, 1) * 1e6
        row["ll_walked"] = n
    if "xgrammar" in engines:
        import xgrammar as xgr

        tag = compiled.grammar(tools, format="structural_tag").text
        t0 = time.perf_counter()
        cg = ge.xg_compiler().compile_structural_tag(tag)
        row["xg_compile_ms"] = (time.perf_counter() - t0) * 1e3
        m = xgr.GrammarMatcher(cg)
        bm = xgr.allocate_token_bitmask(1, ge.hf_tokenizer().get_vocab_size())
        spent, n = 0.0, 0
        for t in ids:
            t0 = time.perf_counter()
            m.fill_next_token_bitmask(bm)
            spent += time.perf_counter() - t0
            n += 1
            if not m.accept_token(t):
                break
        row["xg_mask_us"] = spent / max(n, 1) * 1e6
        row["xg_walked"] = n
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*")
    ap.add_argument("--engines", default="llguidance,xgrammar")
    args = ap.parse_args(argv)
    from bench.grammar_engines import tools_from_calls
    from bench.grammar_soundness import TOOLS
    from chatparse import templates

    try:
        from tests.corpus_cases import load
    except ImportError:
        from corpus_cases import load
    corpus = load()
    engines = tuple(e.strip() for e in args.engines.split(",") if e.strip())
    print("| family | export lark ms | export tag ms | llguidance compile ms | llguidance mask µs/token | "
          "xgrammar compile ms | xgrammar mask µs/token | tokens walked |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.families or templates.names():
        cases = [c for c in corpus.cases if c.name == name]
        if not cases:
            continue
        case = max(cases, key=lambda c: len(c.output))
        own = tools_from_calls(case.expected.get("tool_calls"))
        taken = {t["function"]["name"] for t in own}
        tools = own + [t for t in TOOLS if t["function"]["name"] not in taken]
        r = bench_family(name, engines, tools, case.output)
        print(f"| {name} | {r['export_lark_ms']:.1f} | {r['export_tag_ms']:.1f} | "
              f"{r.get('ll_compile_ms', float('nan')):.0f} | {r.get('ll_mask_us', float('nan')):.0f} | "
              f"{r.get('xg_compile_ms', float('nan')):.0f} | {r.get('xg_mask_us', float('nan')):.0f} | "
              f"{r.get('ll_walked', '')}/{r['tokens']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
