"""The grammar export (issue #18) with the real engines: llguidance (Lark) and xgrammar (structural tag).

* no false rejection: every corpus output of every bundled family, with a tool list made of its own calls
  (names, a permissive schema), is accepted token by token (a byte-level BPE trained on the corpus) - except
  the listed cases, each of which must still be refused (so the list stays true);
* soundness: generations sampled under the grammar's token mask parse under the template and their calls
  validate against the tools' schemas (a few families here; bench/grammar_soundness.py runs >= 1,000 samples
  for every family);
* tool_choice "required" / a named tool / "none".
"""

from __future__ import annotations

import json
import random

import pytest

from deps import need  # noqa: E402

need("tokenizers", "the test tokenizer is trained with `tokenizers`")
llguidance = need("llguidance", "the Lark grammar export, checked with the real engine")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import grammar_engines as ge  # noqa: E402
from bench.grammar_soundness import TOOLS, check  # noqa: E402
from chatparse import compile_template, templates  # noqa: E402
from chatparse.export.structural_tag import Unconstrainable  # noqa: E402
from corpus_cases import load  # noqa: E402

CORPUS = load()

# Corpus outputs the Lark grammar refuses on purpose, and why. Each must still be refused.
LARK_REFUSED = {
    ("gpt_oss", 4): "its arguments are not JSON (allow_non_json): no object schema accepts them",
    ("minimax_m1", 1): "a second call opened by the lookbehind alternative (?<=\\}\\n)(?=\\{\") - "
                       "alternatives whose lookbehind a grammar cannot check are not offered",
}
# The structural tag (xgrammar) refuses the same ones, and the JSON dialects (the Lark grammar writes them too).
TAG_REFUSED = {
    **LARK_REFUSED,
    **{("functiongemma", i): "unquoted keys / <escape> strings: the structural tag writes strict JSON"
       for i in range(4)},
    **{("gemma4", i): "unquoted keys / <|\"|> strings: the structural tag writes strict JSON"
       for i in (0, 1, 2, 3, 4, 7)},
}


# Families whose structural tag the export refuses (`structural_tag.Unconstrainable`), and the reason it gives.
TAG_UNCONSTRAINABLE = {
    "minimax_m1": "can match between JSON tokens",
}


def _cases():
    return [pytest.param(c, id=f"{c.name}-{c.index}") for c in CORPUS.cases]


def _tools(case):
    return ge.tools_from_calls(case.expected.get("tool_calls"))


@pytest.mark.parametrize("case", _cases())
def test_lark_accepts_corpus_output(case):
    g = compile_template(templates.get(case.name)).grammar(_tools(case), prefix=case.prefix)
    ok, why = ge.accepts(g.text, case.output)
    if (case.name, case.index) in LARK_REFUSED:
        assert not ok, f"now accepted, drop it from LARK_REFUSED: {LARK_REFUSED[case.name, case.index]}"
    else:
        assert ok, why


@pytest.mark.parametrize("case", _cases())
def test_structural_tag_accepts_corpus_output(case):
    need("xgrammar", "the structural-tag grammar export, checked with the real engine")
    compiled = compile_template(templates.get(case.name))
    if case.name in TAG_UNCONSTRAINABLE and _tools(case):
        with pytest.raises(Unconstrainable, match=TAG_UNCONSTRAINABLE[case.name]):
            compiled.grammar(_tools(case), prefix=case.prefix, format="structural_tag")
        return
    g = compiled.grammar(_tools(case), prefix=case.prefix, format="structural_tag")
    ok, why = ge.xg_accepts(g.text, case.output)
    if (case.name, case.index) in TAG_REFUSED:
        assert not ok, f"now accepted, drop it from TAG_REFUSED: {TAG_REFUSED[case.name, case.index]}"
    else:
        assert ok, why


def _examples(name):
    return [c.output for c in CORPUS.cases if c.name == name]


# the sampler writes pieces of the family's corpus outputs to reach its tool calls
@pytest.mark.parametrize("name", ["qwen3", "deepseek_v32", "gpt_oss", "mistral_v11", "glm45"])
def test_lark_samples_parse_and_validate(name):
    compiled = compile_template(templates.get(name))
    pieces = ge.hint_pieces(templates.get(name), TOOLS, _examples(name))
    rng = random.Random(7)
    ended = with_call = 0
    for i in range(50):
        choice = "required" if i % 2 else "auto"
        text, done = ge.sample(compiled.grammar(TOOLS, tool_choice=choice).text, rng, max_tokens=250,
                               pieces=pieces)
        if not done:
            continue
        ended += 1
        calls, err = check(text, compiled, TOOLS, choice)
        assert err is None, f"{err}: {text!r}"
        with_call += calls > 0
    assert ended >= 35 and with_call >= 15, (ended, with_call)


# the sampler writes pieces of the family's corpus outputs to reach its tool calls
@pytest.mark.parametrize("name", ["hermes", "qwen3_coder", "gpt_oss", "glm45", "mistral_v11", "deepseek_v31"])
def test_structural_tag_samples_parse_and_validate(name):
    need("xgrammar", "the structural-tag grammar export, checked with the real engine")
    need("torch", "xgrammar's token bitmask is a torch tensor")
    compiled = compile_template(templates.get(name))
    pieces = ge.hint_pieces(templates.get(name), TOOLS, _examples(name))
    rng = random.Random(3)
    ended = 0
    for i in range(30):
        choice = "required" if i % 2 else "auto"
        text, done = ge.xg_sample(compiled.grammar(TOOLS, tool_choice=choice, format="structural_tag").text,
                                  rng, max_tokens=250, pieces=pieces)
        if done:
            ended += 1
            _, err = check(text, compiled, TOOLS, choice)
            assert err is None, f"{err}: {text!r}"
    assert ended >= 15


# the sampler writes pieces of the family's corpus outputs to reach its tool calls
@pytest.mark.parametrize("name", ["hermes", "kimi_k2", "seed_oss"])
def test_tool_choice_required_named_none(name):
    compiled = compile_template(templates.get(name))
    pieces = ge.hint_pieces(templates.get(name), TOOLS, _examples(name))
    rng = random.Random(11)
    for choice in ("required", "search", {"type": "function", "function": {"name": "get_weather"}}, "none"):
        g = compiled.grammar(TOOLS, tool_choice=choice).text
        named = choice if isinstance(choice, str) else choice["function"]["name"]
        ended = 0
        for _ in range(12):
            text, done = ge.sample(g, rng, max_tokens=400, pieces=pieces)
            if not done:
                continue
            ended += 1
            calls, err = check(text, compiled, TOOLS, named)
            assert err is None, f"tool_choice={choice!r}: {err}: {text!r}"
        assert ended >= 4, choice


def test_required_without_a_call_is_refused():
    g = compile_template(templates.get("hermes")).grammar(TOOLS, tool_choice="required").text
    assert not ge.accepts(g, "Just text.<|im_end|>")[0]
    assert ge.accepts(g, 'Ok.\n<tool_call>\n{"name": "refresh", "arguments": {}}\n</tool_call>')[0]
    named = compile_template(templates.get("hermes")).grammar(TOOLS, tool_choice="search").text
    assert not ge.accepts(named, '<tool_call>{"name": "refresh", "arguments": {}}</tool_call>')[0]
    none = compile_template(templates.get("hermes")).grammar(TOOLS, tool_choice="none").text
    assert not ge.accepts(none, '<tool_call>{"name": "refresh", "arguments": {}}</tool_call>')[0]
    assert ge.accepts(none, "Just text.<|im_end|>")[0]


def test_arguments_follow_the_schema_and_strings_cannot_spell_the_closer():
    g = compile_template(templates.get("qwen3")).grammar(TOOLS).text
    ok = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>'
    assert ge.accepts(g, ok)[0]
    assert not ge.accepts(g, ok.replace('"days": 2', '"days": 0'))[0]  # minimum 1
    assert not ge.accepts(g, ok.replace('"days": 2', '"days": "2"'))[0]
    assert not ge.accepts(g, ok.replace("get_weather", "get_time"))[0]
    assert not ge.accepts(g, ok.replace("Paris", "Paris</tool_call>"))[0]


def test_prefix_sets_the_start_region():
    c = compile_template(templates.get("qwen3"))
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    g = c.grammar(TOOLS, prefix=prompt)
    assert g.start_field == "reasoning_content"
    assert ge.accepts(g.text, "Thinking.\n</think>\n\nHello.<|im_end|>")[0]
    assert c.grammar(TOOLS, prefix="").start_field is None
    # a closer that matched at the end of the prompt, held only because its trailing \s* could go on,
    # closed the region: the output starts in mode 0 (sampling found the reasoning region reopened there)
    s = compile_template(templates.get("smollm3"))
    closed = "<|im_start|>assistant\n<think>\n\n</think>\n"
    assert s.grammar(TOOLS, prefix=closed).start_field is None
    out = '<tool_call>\n{"name": "refresh", "arguments": {}}\n</tool_call>'
    assert ge.accepts(s.grammar(TOOLS, prefix=closed).text, out)[0]
    assert s.parse(out, prefix=closed, tools=TOOLS)["tool_calls"][0]["function"]["name"] == "refresh"


def test_approximations_are_reported():
    lark = compile_template(templates.get("hermes")).grammar(TOOLS)
    assert not [a for a in lark.approximated if a["kind"] == "superset"], lark.approximated
    llama = compile_template(templates.get("llama3_json")).grammar(TOOLS)
    hows = " ".join(a["how"] for a in llama.approximated)
    assert "lookbehind" in hows
    d = llama.as_dict()
    assert d["format"] == "lark" and d["grammar"] == llama.text and d["exact"] is False
    with pytest.raises(ValueError, match="not in the tool list"):
        compile_template(templates.get("hermes")).grammar(TOOLS, tool_choice="nope")
    with pytest.raises(ValueError, match="format"):
        compile_template(templates.get("hermes")).grammar(TOOLS, format="gbnf")


def test_cli(tmp_path, capsys):
    from chatparse.cli import main

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    assert main(["grammar", "hermes", "--tools", str(tools), "--tool-choice", "required"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("%llguidance {}") and "get_weather" in out
    assert main(["grammar", "hermes", "--tools", str(tools), "--format", "structural_tag", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert json.loads(d["grammar"])["type"] == "structural_tag"
    assert main(["grammar", "hermes", "--tools", str(tools), "--tool-choice", "nope"]) == 2


def _tag(name, tools=TOOLS, **kw):
    return compile_template(templates.get(name)).grammar(tools, format="structural_tag", **kw).text


def test_structural_tag_fixes_found_by_sampling():
    """Each refusal below is an output the structural tag once allowed and the template does not parse as
    generated (xgrammar soundness runs); each acceptance is its valid neighbour."""
    need("xgrammar", "the structural-tag grammar export, checked with the real engine")
    # gpt_oss: a tool name in a greedy group may not run on (the parser would read 'searchx')
    g = _tag("gpt_oss")
    assert ge.xg_accepts(g, '<|channel|>commentary to=functions.search <|constrain|>json<|message|>{}<|call|>')[0]
    assert ge.xg_accepts(g, 'to=functions.search<|channel|>commentary json<|message|>{}<|call|>')[0]
    assert not ge.xg_accepts(g, '<|channel|>commentary to=functions.searchx<|message|>{}<|call|>')[0]
    assert not ge.xg_accepts(g, 'to=functions.searchx <|channel|>commentary json<|message|>{}<|call|>')[0]
    # ... nor may text end with the beginning of another opener ('to=functions.q' then the content opener)
    assert not ge.xg_accepts(g, 'to=functions.q<|channel|>commentary <|message|>Hi<|return|>')[0]
    # deepseek_v31: JSON strings are JSON (xgrammar let raw quotes through a string `pattern`)
    g = _tag("deepseek_v31")
    call = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "%s"}<｜tool▁call▁end｜>'
    assert ge.xg_accepts(g, call % "Paris")[0]
    assert not ge.xg_accepts(g, call % 'a" b')[0]
    assert not ge.xg_accepts(g, call % "a<｜tool▁call▁end｜>")[0]
    # glm45, required: the call must be closed (its opener's lookahead fails at the end of the output)
    g = _tag("glm45", tool_choice="required")
    assert ge.xg_accepts(g, "<tool_call>refresh</tool_call>")[0]
    assert not ge.xg_accepts(g, "<tool_call>refresh")[0]
    # ernie45: reasoning closed by the tool call's opener (the closer's lookahead joined to the call)
    prompt = "User: hi\nAssistant: <think>\n"
    g = _tag("ernie45", prefix=prompt)
    out = 'Let me check.\n<tool_call>\n{"name": "refresh", "arguments": {}}\n</tool_call>\n'
    assert ge.xg_accepts(g, out)[0]
    msg = compile_template(templates.get("ernie45")).parse(out, prefix=prompt)
    assert msg["reasoning_content"] == "Let me check." and msg["tool_calls"][0]["function"]["name"] == "refresh"
    # qwen3_coder: a string value read as JSON stays a string ('New York', not 'null' or '42')
    g = _tag("qwen3_coder")
    call = "<tool_call>\n<function=get_weather>\n<parameter=city>%s</parameter>\n</function>\n</tool_call>"
    assert ge.xg_accepts(g, call % "New York")[0] and ge.xg_accepts(g, call % "nullable")[0]
    assert not ge.xg_accepts(g, call % "null")[0] and not ge.xg_accepts(g, call % "42")[0]


def test_structural_tag_refuses_what_it_cannot_constrain():
    with pytest.raises(Unconstrainable, match="tool_calls.*JSON whitespace"):
        _tag("minimax_m1")
    assert json.loads(_tag("minimax_m1", tool_choice="none"))["type"] == "structural_tag"  # no call body


def test_lark_writes_the_gemma_dialect_by_schema():
    """gemma4's bodies in its dialect (bare keys, <|"|> strings): typed by the tool's schema, each accepted body
    parses to arguments that validate, and a delimited string cannot hold the delimiter or the closer."""
    c = compile_template(templates.get("gemma4"))
    g = c.grammar(TOOLS).text
    call = "<|tool_call>call:get_weather{%s}<tool_call|>"
    ok = 'city:<|"|>Paris, France<|"|>,days:3,unit:<|"|>celsius<|"|>'
    assert ge.accepts(g, call % ok)[0]
    assert c.parse(call % ok, prefix="", tools=TOOLS)["tool_calls"][0]["function"]["arguments"] == \
        {"city": "Paris, France", "days": 3, "unit": "celsius"}
    for bad in ('days:3', 'city:<|"|>Paris<|"|>,days:0', 'city:<|"|>Paris<|"|>,unit:<|"|>kelvin<|"|>',
                'city:<|"|>Paris<|"|>,extra:1', 'city:<|"|>a<tool_call|>b<|"|>', 'city:3'):
        assert not ge.accepts(g, call % bad)[0], bad
    nested = compile_template(templates.get("gemma4")).grammar(
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]).text
    assert ge.accepts(nested, '<|tool_call>call:f{a:{b:[<|"|>x<|"|>,1,null]},<|"|>3<|"|>:true}<tool_call|>')[0]
