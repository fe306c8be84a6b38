"""Hostile templates of issue #19, chatparse against the transformers reference: large counted repetitions
(one-shot `parse_response` and streaming in 4-character feeds) and compiling a template of 1,000 fields.

    python -m bench.bench_hostile            # every case
    python -m bench.bench_hostile --quick    # 10k characters instead of 100k

Each case runs once per side, after one warm-up parse of a short text (the reference's streamed runs of
`a{2000}!` take minutes to hours at 100k characters: skipped unless --slow), each side with its template
loaded once beforehand (chatparse: `compile_template`; the reference: `load_response_template`), as a user
parsing more than one text would. Results: bench/results/HOSTILE.md.
"""

from __future__ import annotations

import argparse
import time

import chatparse


def _template(pattern: str) -> dict:
    return {"start_anchor": "<|A|>", "fields": {"x": {"open_pattern": pattern, "close": "?"}, "content": {}}}


def _stream(cls, template, text: str):
    p = cls(template, prefix="")
    for i in range(0, len(text), 4):
        p.feed(text[i:i + 4])
    return p.finalize()[0]


def _time(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--slow", action="store_true", help="also the reference's streamed run of a{2000}!")
    args = ap.parse_args()
    from transformers.utils.chat_parsing import ResponseParser as RefParser
    from transformers.utils.chat_parsing import parse_response as ref_parse
    from transformers.utils.chat_parsing.response_templates import load_response_template

    n = 10_000 if args.quick else 100_000
    print(f"| case | text | path | chatparse | reference | ratio (ref / chatparse) |")
    print("|---|---|---|---|---|---|")
    for pattern in ("a{2000}!", "(?:a{100}){100}"):
        # each side's template loaded once (compiling is timed below, the reference's load is ~1 ms)
        template = chatparse.compile_template(_template(pattern))
        ref_template = load_response_template(_template(pattern))
        for label, text in ((f"'a' x {n:,}", "a" * n),
                            (f"runs of 9,999 'a' + 'b', {n:,}", ("a" * 9_999 + "b") * (n // 10_000) or "a" * n)):
            # compiling and the per-template one-shot plan are one-time costs (compiling is timed below)
            chatparse.parse_response("a!", template, prefix="")
            ref_parse("a!", ref_template, prefix="")
            tc, mc = _time(lambda: chatparse.parse_response(text, template, prefix=""))
            tr, mr = _time(lambda: ref_parse(text, ref_template, prefix=""))
            assert mc == mr, (pattern, label)
            print(f"| `{pattern}` | {label} | one-shot | {tc:.3f} s | {tr:.3f} s | {tr / tc:.1f}x |")
            tc, mc = _time(lambda: _stream(chatparse.ResponseParser, template, text))
            if pattern == "a{2000}!" and not args.slow:
                print(f"| `{pattern}` | {label} | 4-char feeds | {tc:.3f} s | (--slow) | |")
                continue
            tr, mr = _time(lambda: _stream(RefParser, ref_template, text))
            assert mc == mr, (pattern, label)
            print(f"| `{pattern}` | {label} | 4-char feeds | {tc:.3f} s | {tr:.3f} s | {tr / tc:.1f}x |")
    for fields in (1_000, 2_000):
        t = {"start_anchor": "<|A|>", "fields": {f"f{i}": {"open": f"<f{i}>", "close": f"</f{i}>",
                                                         "optional": True} for i in range(fields)}}
        tc, _ = _time(lambda: chatparse.compile_template(t))
        print(f"| {fields:,} fields | - | compile | {tc:.3f} s | - | - |")


if __name__ == "__main__":
    main()
