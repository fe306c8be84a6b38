"""Soundness of the grammar export (issue #18) with real engines, >= 1,000 samples per family.

For every bundled family: generations are sampled under the grammar's token mask (uniform over the allowed
tokens; template pieces written whole at times, so tool calls happen; EOS taken with a probability growing
with the length), half with tool_choice="auto" and half "required", a tenth of those with a named tool. Every
sample that ended must parse under the template without error (`chatparse.parse_response`), every tool
call's arguments must validate against the tool's schema (`jsonschema`), "required" samples must hold a call
and named ones only the named tool. Samples cut at `--max-tokens` are counted, not checked.

    python -m bench.grammar_soundness [--samples 1000] [--engine llguidance|xgrammar] [--open-region] [FAMILY ...]

``--open-region`` starts each family inside the region a real prompt leaves open (a pre-written
``<think>``: tests/real_outputs or the format corpus), so the grammar's start-region forms are sampled too.

Writes a table (markdown) to stdout; bench/results/GRAMMAR.md records a run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}, "exact": {"type": "boolean"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False}}},
    {"type": "function", "function": {"name": "refresh", "parameters": {"type": "object", "properties": {}}}},
]


def check(text: str, compiled, tools, choice, prefix: str = "") -> tuple[int, str | None]:
    """(number of calls, what is wrong or None); `prefix` is the prompt the output follows."""
    import jsonschema

    from chatparse import parse_response

    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    try:
        msg = parse_response(text, compiled, prefix=prefix, tools=tools)
    except Exception as e:  # noqa: BLE001 - any parse error is a soundness failure
        return 0, f"parse error {type(e).__name__}: {e}"
    calls = msg.get("tool_calls") or []
    for c in calls:
        fn = c.get("function") or {}
        if fn.get("name") not in schemas:
            return len(calls), f"call to unknown tool {fn.get('name')!r}"
        try:
            jsonschema.validate(fn.get("arguments"), schemas[fn["name"]])
        except jsonschema.ValidationError as e:
            return len(calls), f"arguments of {fn['name']} do not validate: {e.message}"
    if choice not in ("auto", "none") and not calls:
        return 0, f"tool_choice={choice!r} but no call"
    if isinstance(choice, str) and choice not in ("auto", "required", "none"):
        if any(c["function"]["name"] != choice for c in calls):
            return len(calls), f"tool_choice={choice!r} but another tool was called"
    if choice == "none" and calls:
        return len(calls), "tool_choice='none' but a call"
    return len(calls), None


def open_region_prompt(name: str) -> str | None:
    """The first prompt in tests/real_outputs/<name>.json that leaves a region open (the output starts inside
    it, e.g. after a pre-written ``<think>``), or None."""
    import json
    from pathlib import Path

    from chatparse import compile_template, templates
    from chatparse.export.grammar import start_mode

    path = Path(__file__).resolve().parents[1] / "tests" / "real_outputs" / f"{name}.json"
    prompts = [c.get("prefix") for c in json.loads(path.read_text(encoding="utf-8"))["cases"]] \
        if path.exists() else []
    try:
        from tests.corpus_cases import load
    except ImportError:  # under pytest, tests/ is on sys.path but is not a package
        from corpus_cases import load
    prompts += [c.prefix for c in load().cases if c.name == name]
    compiled = compile_template(templates.get(name))
    for prompt in prompts:
        if prompt and start_mode(compiled, prompt):
            return prompt
    return None


def run_family(name: str, n: int, engine: str, seed: int = 0, max_tokens: int = 300, log=None,
               prefix: str = "") -> dict:
    from bench.grammar_engines import hint_pieces, sample, xg_sample
    from chatparse import compile_template, templates

    try:
        from tests.corpus_cases import load
    except ImportError:  # under pytest, tests/ is on sys.path but is not a package
        from corpus_cases import load
    examples = [c.output for c in load().cases if c.name == name]
    compiled = compile_template(templates.get(name))
    has_calls = any(f["name"] == "tool_calls" for f in compiled.spec["fields"])
    choices = ["auto", "required", "get_weather", "none"] if has_calls else ["auto"]
    fmt = "lark" if engine == "llguidance" else "structural_tag"
    out = {"family": name, "samples": n, "ended": 0, "calls": 0, "with_call": 0, "failures": 0, "errors": [],
           "refused": None, "seconds": 0.0}
    try:
        grammars = {c: compiled.grammar(TOOLS, tool_choice=c, format=fmt, prefix=prefix).text for c in choices}
    except ValueError as e:  # the export refuses the family (structural_tag.Unconstrainable), saying why
        out["refused"] = str(e)
        return out
    pieces = hint_pieces(templates.get(name), TOOLS, examples)
    rng = random.Random(seed)
    t0 = time.perf_counter()
    for i in range(n):
        # 45% auto, 45% required, 5% named, 5% none
        r = i % 20
        choice = choices[0] if r < 9 or not has_calls else choices[1] if r < 18 else choices[2 + r % 2]
        try:
            if engine == "llguidance":
                text, ended = sample(grammars[choice], rng, max_tokens=max_tokens, pieces=pieces)
            else:
                text, ended = xg_sample(grammars[choice], rng, max_tokens=max_tokens, pieces=pieces)
        except AssertionError as e:
            out["failures"] += 1
            out["errors"].append(f"engine: {e}"[:300])
            continue
        if not ended:
            continue
        out["ended"] += 1
        k, err = check(text, compiled, TOOLS, choice, prefix)
        out["calls"] += k
        out["with_call"] += k > 0
        if err:
            out["failures"] += 1
            if len(out["errors"]) < 5:
                out["errors"].append(f"{err} | {text[:300]!r}")
                if log:
                    log.write(f"{name}: {err} | {text[:300]!r}\n")
    out["seconds"] = time.perf_counter() - t0
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--engine", choices=("llguidance", "xgrammar"), default="llguidance")
    ap.add_argument("--max-tokens", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--open-region", action="store_true",
                    help="start each family inside the region a real prompt leaves open (tests/real_outputs; "
                         "families without such a prompt are skipped)")
    args = ap.parse_args(argv)
    from chatparse import templates

    names = args.families or templates.names()
    rows = []
    print(f"| family | samples | ended | with a call | calls | failures | s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        prefix = ""
        if args.open_region:
            prefix = open_region_prompt(name)
            if prefix is None:
                continue
        r = run_family(name, args.samples, args.engine, seed=args.seed, max_tokens=args.max_tokens, log=sys.stderr,
                       prefix=prefix)
        rows.append(r)
        if r["refused"]:
            print(f"| {name} | refused | | | | | |", flush=True)
            continue
        print(f"| {name} | {r['samples']} | {r['ended']} | {r['with_call']} | {r['calls']} | {r['failures']} | "
              f"{r['seconds']:.0f} |", flush=True)
    bad = sum(r["failures"] for r in rows)
    done = [r for r in rows if not r["refused"]]
    print(f"\n{len(done)} families ({len(rows) - len(done)} refused), {sum(r['samples'] for r in done)} samples, "
          f"{sum(r['ended'] for r in rows)} ended and checked, {bad} failures ({args.engine})")
    for r in rows:
        if r["refused"]:
            print(f"- {r['family']}: refused by the export: {r['refused']}")
        for e in r["errors"]:
            print(f"- {r['family']}: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
