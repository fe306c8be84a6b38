"""The per-family comparison table of docs/grammar.md for the grammar export (issue #18): for each bundled family,
whether chatparse's Lark grammar and structural tag are exact (every delimiter converted exactly and no
``superset`` entry in `ExportedGrammar.approximated`), what each approximates, whether the structural tag is
refused (`structural_tag.Unconstrainable`), and whether vLLM 0.33.0 derives a tool-call structural tag.

    python -m bench.grammar_table [--vllm /tmp/vllm_tags.json]

``--vllm`` reads the output of `bench/grammar_vllm_tags.py` (run with vLLM's interpreter); without it the
vLLM column says "not run". Uses bench.grammar_soundness's three tools.
"""

from __future__ import annotations

import argparse
import json
import sys

# How an `approximated` entry reads in the table (first matching fragment wins).
SHORT = [
    ("trailing lookahead dropped", "opener's lookahead not checked against the body"),
    ("lookbehind dropped", "a closer's lookbehind dropped"),
    ("AT_END", "tag_pattern's end-of-body lookahead dropped"),
    ("negative lookahead dropped", "tag_pattern's end-of-body lookahead dropped"),
    ("string constraints", "string constraints of xml-inline values"),
    ("tool name may be followed", "tool name may run on"),
    ("body after a tool name", "tool name may run on"),
]


def short(how: str) -> str:
    for frag, text in SHORT:
        if frag in how:
            return text
    return how


def status(compiled, tools, fmt: str) -> str:
    from chatparse.export.structural_tag import Unconstrainable

    try:
        g = compiled.grammar(tools, format=fmt)
    except Unconstrainable as e:
        return "refused: " + str(e).split(": ", 2)[-1].split(";")[0]
    sup = list(dict.fromkeys(short(a["how"]) for a in g.approximated if a["kind"] == "superset"))
    return "exact" if not sup else "approx.: " + "; ".join(sup)


def vllm_cell(row) -> str:
    if row is None:
        return "not run"
    tags = [row.get(c) for c in ("auto", "required")]
    if any(isinstance(t, dict) and "error" in t for t in tags):
        return "error"
    return "yes" if any(t for t in tags) else "no"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vllm", help="bench/grammar_vllm_tags.py's output")
    args = ap.parse_args(argv)
    from bench.grammar_soundness import TOOLS
    from chatparse import compile_template, templates

    vllm = json.load(open(args.vllm, encoding="utf-8")) if args.vllm else {}
    print("| family | Lark (llguidance) | structural tag (xgrammar) | vLLM 0.33.0 tool-call tag |")
    print("|---|---|---|---|")
    for name in templates.names():
        compiled = compile_template(templates.get(name))
        has_calls = any(f["name"] == "tool_calls" for f in compiled.spec["fields"])
        v = vllm_cell(vllm.get(name)) if args.vllm else "not run"
        if not has_calls:
            v = "no tool calls in the template"
        print(f"| {name} | {status(compiled, TOOLS, 'lark')} | {status(compiled, TOOLS, 'structural_tag')} | {v} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
