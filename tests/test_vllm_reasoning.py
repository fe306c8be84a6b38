"""The vLLM plugin's reasoning-end detection and reasoning-token counting against vLLM 0.33.0's own.

Claims under test:
* `vllm_reasoning.reasoning_has_ended` (vLLM's decision over chatparse's events, placed where vLLM's
  interpreter hands them out) answers as vLLM's `_reasoning_has_ended` over its own parser, for generated
  templates whose reasoning field is vLLM's ``thinking``, at every end of generated texts;
* the plugin's `is_reasoning_end`, `is_reasoning_end_streaming` (one parser continued over the new ids where
  vLLM re-parses everything) and `count_reasoning_tokens` (new ids only) answer as vLLM's for the same real
  token ids, on bundled families and on generated templates, called as vLLM's structured-output manager and
  serving layer call them (growing ids, a few at a time).

Every answer is compared. Where the events vLLM's interpreter has handed out for the text so far differ from
chatparse's (after `edge_split`), they must differ in a way the timing rule sanctions (`_sanctioned`), and only
there may the answers differ (vLLM's then reads a state that is not the text's); such ends are counted by kind.
chatparse's own stages run outside the time limit that vLLM's calls get (`_vllm_only`, `chatparse_limit`),
so that a chatparse error or hang fails the test; an example is discarded only for the input's reasons (vLLM
loops on it, or it or vLLM's adapter refuses the template), and the discards, the comparisons and the
sanctioned differences are printed at the end of the module's run.

Zero-width delimiters. A delimiter that can match the empty string changes when vLLM's interpreter hands
events out in two ways, and both are functions of the text, reproduced by the plugin, so such templates are
compared like any other (they were once exempt from every comparison; 3,000 and 600 generated examples run
without that exemption found no difference it was needed for, `test_zero_width_delimiters_are_compared`
pins the cases):

* a zero-width match that ends at the end of the text so far is held until more text comes (`_can_grow`
  answers yes for every zero-width match), and reported, with the implicit close before a zero-width open,
  when the NUL probe arrives: `edge_split` places chatparse's events there;
* a zero-width close of the implicit region while it is empty ends `_process` (``break``) before the text
  after it is handed out. The same match comes again at the same offset on every later feed and at
  `finalize()`, so vLLM never gets past it, whatever the split; chatparse's serving dialect stops at the same
  offset (README, Differences, "Hangs", and `runtime/stream/parser.py`).

Where a zero-width open meets its field's zero-width close, vLLM loops: the example is discarded (counted),
and where that can happen at every offset chatparse refuses the template at load.

Runs where vllm==0.33.0 is installed (the venv `.ci/run` makes); skips elsewhere.
"""

from __future__ import annotations

import copy
import random

import regex as re

import pytest

from deps import need_vllm  # noqa: E402

need_vllm("vllm.parser.response_template")  # installed only in the venv .ci/run makes

from hypothesis import HealthCheck, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from vllm.parser import response_template as rt  # noqa: E402
from vllm.parser.chat_parsing import ResponseParser as VParser  # noqa: E402

import chatparse  # noqa: E402
from chatparse import templates as templates_lib  # noqa: E402
from chatparse.integrations import vllm as plugin  # noqa: E402
from chatparse.integrations import vllm_reasoning  # noqa: E402
from harness import RefTimeout, normalize  # noqa: E402
from strategies import compiles, templates, texts_for  # noqa: E402
from test_vllm_dialect import _continuations, _is_prefix, delimiters  # noqa: E402
from test_vllm_plugin import OUTPUTS, _parser, trained_tokenizer  # noqa: E402
from timing_rule import Tally, chatparse_limit, discard, reference_limit, regex_hold, tally_fixture  # noqa: E402

FAMILIES = ["qwen3", "qwen3_coder", "hermes", "gemma4", "deepseek_v31", "kimi_k2", "glm45"]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

# What was compared, what was discarded (each for the input's reason) and which sanctioned difference stood in
# for a comparison, printed at the end of the module's run
TALLY = Tally("reasoning end and counts against vLLM 0.33.0")
_print_tally = tally_fixture(TALLY)

# The sanctioned ways for vLLM's interpreter and chatparse (after `edge_split`) to have handed out different
# events for a text (`_sanctioned`)
SPLIT = "vLLM's events depend on the split"
EARLIER = "chatparse handed out more (certain)"
UNCERTAIN = "vLLM committed what more text changes"
EXCEPTION = "chatparse behind under the stated exception (regex-decided)"


class VllmLoops(Exception):
    """vLLM's interpreter ran past its time limit (README, Hangs): the input's reason to discard an example."""


def _vllm_only(fn, seconds: float | None = 20.0):
    """``fn()``, vLLM's calls only, within `seconds` (None: no limit); `VllmLoops` past it. chatparse's own
    stages run outside such a limit (`chatparse_limit`), so that its hang or error fails the test."""
    if seconds is None:
        return fn()
    try:
        with reference_limit(seconds):
            return fn()
    except RefTimeout:
        raise VllmLoops() from None


@pytest.fixture(scope="module")
def tokenizer():
    return trained_tokenizer()


def _empty_delimiter(template) -> bool:
    """A delimiter that can match the empty string. Such templates are compared like any other (module
    docstring, "Zero-width delimiters"); only counted."""
    return any(re.compile(v).fullmatch("") is not None for f in template["fields"].values()
               for k, v in f.items() if k.endswith("_pattern"))


def _thinking_template(data):
    """A generated template with one field renamed to vLLM's reasoning field, as vLLM streams it (every
    field optional, an implicit content field added where all fields are explicit)."""
    template = data.draw(templates(failing=True))
    names = list(template["fields"])
    name = data.draw(st.sampled_from(names))
    template["fields"] = {(rt.THINKING_FIELD if k == name else k): v for k, v in template["fields"].items()}
    if not compiles(template):
        discard(TALLY, "zero-width open and close of one field (vLLM loops, chatparse refuses)")
    try:
        streaming = rt._streaming_template(template)
    except ValueError:
        discard(TALLY, "vLLM refuses the template")
    # the same template as a dict, for the continuation runs of `_sanctioned`
    as_dict = copy.deepcopy(template)
    fields = as_dict["fields"]
    if "content" not in fields and all("open" in f or "open_pattern" in f for f in fields.values()):
        fields["content"] = {}
    for f in fields.values():
        f["optional"] = True
    if not compiles(as_dict):
        discard(TALLY, "zero-width open and close of one field (vLLM loops, chatparse refuses)")
    return template, streaming, as_dict


def _vllm_answer(streaming, text, thinking_disabled):
    """(vLLM's answer, the events its parser hands out for `text` as prefix and then for the NUL), or
    (False, the exception) where it cannot build a parser for `text` (its `is_reasoning_end` answers False
    there). `VllmLoops` where it loops."""

    def answer():
        try:
            parser = VParser(streaming, prefix=text)
        except Exception as e:
            return False, e
        answer = rt._reasoning_has_ended(parser, streaming, thinking_disabled=thinking_disabled)
        parser = VParser(streaming, prefix=text)
        return answer, (normalize(parser.initial_events), normalize(parser.feed("\0")))

    return _vllm_only(answer, 2.0)


def _our_events(compiled, streaming, text):
    """What `reasoning_has_ended` shows vLLM's decision function: the events handed out for `text` as prefix
    and then for the NUL, each as vLLM's interpreter would hand them out (`edge_split`)."""
    with chatparse_limit():
        parser = chatparse.ResponseParser(compiled, prefix=text, dialect="vllm")
        handed, held = vllm_reasoning.edge_split(streaming, parser.initial_events, parser.input_length)
        return (normalize(handed),
                normalize(vllm_reasoning._probed(streaming, held, parser.feed("\0"), parser.input_length + 1)))


def _sanctioned(template, text, theirs, ours) -> str | None:
    """How vLLM's interpreter and chatparse (after `edge_split`) came to hand out different events for `text`
    (which begins with the prompt ``<|A|>``), or None where that is not one of the ways the timing rule
    allows (README, Differences, "When events are handed out"; the same check as test_vllm_dialect's):

    * `SPLIT`: vLLM's events begin none of its own one-piece runs over the same text (its answer depended on
      how the text was split: `regex`'s partial search took close "a" inside "<ab>" when the text ended in
      "<a"), and chatparse's begin every one of them;
    * `EARLIER`: chatparse handed out more, and vLLM's own runs over `text` followed by any continuation all
      begin with it (vLLM holds text no match can use: `regex`'s partial search reports a partial match
      where none can complete, as open ``[ab][ab]*?<<`` on ``"a>"``);
    * `UNCERTAIN`: vLLM handed out more, and some continuation contradicts it (vLLM committed what more text
      changes: open ``["/", "//<"]`` on ``"//"``);
    * `EXCEPTION`: vLLM handed out more and was certain, and what chatparse holds there is held by a pattern
      `regex` decides (`regex_hold`: the stated exception's rule, not merely some such pattern in the
      template).

    vLLM's answer then reads a state that is not the one of the text so far (or chatparse's is behind it
    under the stated exception), and the plugin's may differ: the one case where these tests accept it."""
    theirs, ours = delimiters(theirs), delimiters(ours)  # (prompt text is no chunk: delimiters only)
    runs = [delimiters(run) for run in _continuations(template, "<|A|>", text[len("<|A|>"):])]
    if not any(_is_prefix(theirs, run) for run in runs):
        return SPLIT if all(_is_prefix(ours, run) for run in runs) else None
    if _is_prefix(theirs, ours):
        return EARLIER if all(_is_prefix(ours, run) for run in runs) else None
    if _is_prefix(ours, theirs):
        if not all(_is_prefix(theirs, run) for run in runs):
            return UNCERTAIN
        with chatparse_limit():
            held = regex_hold(chatparse.ResponseParser(template, prefix=text, dialect="vllm"))
        return EXCEPTION if held is not None else None
    return None


def _check_every_end(compiled, streaming, as_dict, text, disabled):
    """`reasoning_has_ended` against vLLM's `_reasoning_has_ended` for every end of `text` (after the prompt
    ``<|A|>``): where the events handed out for the text so far (or for the NUL probe) differ, they differ
    in a sanctioned way (`_sanctioned`); the answer is vLLM's, except where they so differ (counted by kind).
    `VllmLoops` where vLLM loops at some end (before chatparse runs)."""
    ends = range(len("<|A|>"), len(text) + 1)
    answers = [_vllm_answer(streaming, text[:k], disabled) for k in ends]
    for k, (theirs, handed) in zip(ends, answers):
        if isinstance(handed, Exception):
            # vLLM cannot build a parser for this prefix: nor can chatparse (compared in test_vllm_dialect)
            with chatparse_limit(), pytest.raises(type(handed)):
                chatparse.ResponseParser(compiled, prefix=text[:k], dialect="vllm")
            TALLY.add("ends where neither builds a parser")
            continue
        with chatparse_limit():
            parser = chatparse.ResponseParser(compiled, prefix=text[:k], dialect="vllm")
            ours = vllm_reasoning.reasoning_has_ended(streaming, parser, thinking_disabled=disabled)
        (v_init, v_probe), (c_init, c_probe) = handed, _our_events(compiled, streaming, text[:k])
        kind = None
        if delimiters(c_init) != delimiters(v_init):  # handed out at different times for the prefix
            kind = _sanctioned(as_dict, text[:k], v_init, c_init)
            assert kind, (k, text[:k], v_init, c_init)
        elif delimiters(c_probe) != delimiters(v_probe):  # or for the NUL
            kind = _sanctioned(as_dict, text[:k] + "\0", v_init + v_probe, c_init + c_probe)
            assert kind, (k, text[:k], v_probe, c_probe)
        if ours == theirs:
            TALLY.add("ends answered as vLLM")
        else:
            # the one difference accepted: vLLM's answer read events it handed out differently
            assert kind is not None, (k, text[:k], ours, theirs)
            TALLY.add(f"ends answered otherwise, events handed out differently: {kind}")


@SETTINGS
@given(st.data())
def test_reasoning_has_ended_matches_vllm_at_every_end_of_the_text(data):
    template, streaming, as_dict = _thinking_template(data)
    compiled = chatparse.compile_template(streaming)
    text = "<|A|>" + data.draw(texts_for(template))
    disabled = data.draw(st.booleans())
    note(f"template={template!r}\ntext={text!r}\nthinking_disabled={disabled}")
    try:
        _check_every_end(compiled, streaming, as_dict, text, disabled)
    except VllmLoops:
        discard(TALLY, "vLLM loops (at some end of the text)")
    TALLY.add("examples compared at every end")
    if _empty_delimiter(as_dict):
        TALLY.add("examples compared at every end, with a delimiter that can match the empty string")


def _calls(rng, n, start):
    """Growing lengths as vLLM calls with them: from `start` up to `n`, one to four ids at a time."""
    k, out = start, []
    while k < n:
        k = min(n, k + rng.randint(1, 4))
        out.append(k)
    return out


def _compare_streaming(tokenizer, template, prompt, output, rng, kwargs, as_dict=None):
    """vLLM's reasoning parser and the plugin's, called as vLLM's structured-output manager calls them. Where
    they differ (only with `as_dict`, a generated template), the events handed out for that text differ in
    a sanctioned way (`_sanctioned`, as in test_reasoning_has_ended_matches_vllm_at_every_end_of_the_text).
    vLLM's calls run first, within a time limit where `as_dict` is given (`VllmLoops`); the plugin's after,
    outside it."""
    pids = tokenizer.encode(prompt, add_special_tokens=False)
    ids = pids + tokenizer.encode(output, add_special_tokens=False)
    calls = _calls(rng, len(ids), len(pids))
    theirs = rt.ResponseTemplateReasoningParser(tokenizer, response_template=plugin.serving_template(template),
                                                **kwargs)

    def answers(parser):
        out, prev = [parser.is_reasoning_end(pids)], len(pids)
        for k in calls:
            out.append((parser.is_reasoning_end_streaming(ids[:k], ids[prev:k]), parser.is_reasoning_end(ids[:k])))
            prev = k
        return out

    want = _vllm_only(lambda: answers(theirs), None if as_dict is None else 20.0)
    with chatparse_limit():
        ours = plugin.ChatparseReasoningParser(tokenizer, response_template=template, **kwargs)
        got = answers(ours)

    def same(got, want, k):
        if got == want:
            return True
        if as_dict is None:
            return False
        text = rt._decode(tokenizer, ids[:k])
        v = _vllm_answer(theirs.response_template, text, ours._thinking_disabled)[1]
        c = _our_events(ours._compiled, ours.response_template, text)
        if delimiters(c[0]) != delimiters(v[0]):
            kind = _sanctioned(as_dict, text, v[0], c[0])
        else:
            kind = _sanctioned(as_dict, text + "\0", v[0] + v[1], c[0] + c[1])
        if kind:
            TALLY.add(f"calls answered differently, events handed out differently: {kind}")
        return kind is not None

    assert same(got[0], want[0], len(pids))
    for k, (g, w) in zip(calls, zip(got[1:], want[1:])):
        assert same(g[0], w[0], k), (k, rt._decode(tokenizer, ids[:k])[-60:])
        assert same(g[1], w[1], k), (k, rt._decode(tokenizer, ids[:k])[-60:])
    TALLY.add("reasoning-end calls compared", 1 + 2 * len(calls))


def _compare_counts(tokenizer, template, prompt, output, rng, as_dict=None):
    """vLLM's unified parser and the plugin's `count_reasoning_tokens` over growing generated ids. Where they
    differ (only with `as_dict`, a generated template), the parsers underneath (fed the same text as the
    counters: each new id decoded on its own) must have handed out different events in a sanctioned way
    (`_sanctioned`). vLLM's side runs first, within a time limit where `as_dict` is given; the plugin's
    after, outside it."""
    theirs, ours = _parser("hf", tokenizer, plugin.serving_template(template)), _parser(plugin.NAME, tokenizer,
                                                                                         template)
    pids = tokenizer.encode(prompt, add_special_tokens=False)
    gids = tokenizer.encode(output, add_special_tokens=False)
    calls = _calls(rng, len(gids), 0)
    texts, prev = [], 0
    for k in calls:
        texts.append("".join(rt._decode(tokenizer, [i]) for i in gids[prev:k]))
        prev = k

    def vllm_side():
        theirs.set_prompt_token_ids(pids)
        counts, stages = [], []
        if as_dict is not None:
            v_shadow = VParser(theirs.response_template, prefix=theirs._prefix)
            v_events = list(v_shadow.initial_events)
        for k, text in zip(calls, texts):
            counts.append(theirs.count_reasoning_tokens(tuple(gids[:k])))
            if as_dict is not None:
                v_events += v_shadow.feed(text)
                stages.append(normalize(v_events))
        return counts, stages

    want, v_stages = _vllm_only(vllm_side, None if as_dict is None else 20.0)
    with chatparse_limit():
        ours.set_prompt_token_ids(pids)
        got, c_stages = [], []
        if as_dict is not None:
            c_shadow = chatparse.ResponseParser(ours._compiled, prefix=ours._prefix, dialect="vllm")
            c_events = list(c_shadow.initial_events)
        for k, text in zip(calls, texts):
            got.append(ours.count_reasoning_tokens(tuple(gids[:k])))
            if as_dict is not None:
                c_events += c_shadow.feed(text)
                handed = vllm_reasoning.edge_split(theirs.response_template, c_events, c_shadow.input_length)[0]
                c_stages.append(normalize(handed))
    TALLY.add("reasoning counts compared", len(calls))
    fed = ""
    for j, (k, g, w) in enumerate(zip(calls, got, want)):
        fed += texts[j]
        if g == w:
            continue
        assert as_dict is not None, (k, g, w)
        assert delimiters(c_stages[j]) != delimiters(v_stages[j]), (k, g, w)
        kind = _sanctioned(as_dict, "<|A|>" + fed if theirs._prefix == "<|A|>" else theirs._prefix + fed,
                           v_stages[j], c_stages[j])
        assert kind, (k, g, w)
        TALLY.add(f"counts different, events handed out differently: {kind}")


@pytest.mark.parametrize("family", FAMILIES)
def test_bundled_families_reasoning_end_and_counts_match_vllm(tokenizer, family):
    template = templates_lib.get(family)
    cases = OUTPUTS[family]
    if not cases:
        pytest.fail(f"no corpus outputs for {family} in tests/data/corpus.json")
    rng = random.Random(family)
    for prompt, output in cases:
        for kwargs in ({}, {"chat_template_kwargs": {"enable_thinking": False}}):
            _compare_streaming(tokenizer, template, prompt, output, rng, kwargs)
        _compare_counts(tokenizer, template, prompt, output, rng)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_templates_reasoning_end_and_counts_match_vllm(tokenizer, data):
    template, streaming, as_dict = _thinking_template(data)
    template["fields"] = {k: v for k, v in template["fields"].items() if k in ("thinking", "content")}
    as_dict["fields"] = {k: v for k, v in as_dict["fields"].items() if k in ("thinking", "content")}
    try:  # what vLLM's adapter serves (the fields it knows, streamable)
        rt.ResponseTemplateReasoningParser(tokenizer, response_template=template)
        _parser("hf", tokenizer, template)
    except ValueError:
        discard(TALLY, "vLLM's adapter refuses the template (reasoning and content fields only)")
    text = data.draw(texts_for(template))
    cut = data.draw(st.integers(0, len(text)))
    prompt, output = "<|A|>" + text[:cut], text[cut:]
    note(f"template={template!r}\nprompt={prompt!r}\noutput={output!r}")

    def whole():
        try:
            VParser(streaming, prefix=prompt + output).feed("\0")
        except Exception:
            pass

    rng = random.Random(len(text))
    try:
        _vllm_only(whole, 2.0)  # where vLLM would loop, discard the example (README, Hangs)
        _compare_streaming(tokenizer, template, prompt, output, rng, {}, as_dict)
        _compare_counts(tokenizer, template, prompt, output, rng, as_dict)
    except VllmLoops:
        discard(TALLY, "vLLM loops (growing ids)")
    TALLY.add("generated examples compared on growing ids")
    if _empty_delimiter(as_dict):
        TALLY.add("generated examples compared on growing ids, with a delimiter that can match the empty string")


# Zero-width delimiters, compared like any other (module docstring): the implicit reasoning field closed with
# zero width where a delimiter starts (and that close held while the open there is partial); the same close
# on the empty field at offset 0, where vLLM stops for good; a zero-width open of content after the reasoning
# closes; a zero-width open by lookahead, and one by lookbehind that ends at the end of the text so far (vLLM
# holds it until the NUL)
ZERO_WIDTH = [
    ({"thinking": {"close_pattern": "(?=<)"}, "content": {"open": "<c>"}}, "ab<c>hi"),
    ({"thinking": {"close_pattern": "(?=<)"}, "content": {"open": "<c>"}}, "<x>hi"),
    ({"thinking": {"open": "<t>", "close_pattern": "\\s*</t>|(?=<c)"}, "content": {"open_pattern": "<c>|(?=<x)"}},
     "<t>hm</t><x>yo"),
    ({"thinking": {"open_pattern": "(?=[ab])", "close": "."}, "content": {}}, "xyab.cd"),
    ({"thinking": {"open_pattern": "(?<=y)", "close": "."}, "content": {}}, "xyab.cd"),
]


@pytest.mark.parametrize("fields, text", ZERO_WIDTH)
def test_zero_width_delimiters_are_compared(tokenizer, fields, text):
    """Templates whose delimiters match the empty string are compared at every end of the text and on
    growing ids, with reasoning enabled or not, and every answer is vLLM's: no end and no call is left out."""
    template = {"start_anchor": "<|A|>", "fields": fields}
    streaming = rt._streaming_template(template)
    as_dict = copy.deepcopy(template)
    for f in as_dict["fields"].values():
        f["optional"] = True
    compiled = chatparse.compile_template(streaming)
    before = TALLY.c.copy()
    for disabled in (False, True):
        _check_every_end(compiled, streaming, as_dict, "<|A|>" + text, disabled)
    for cut in range(len(text) + 1):
        prompt, output = "<|A|>" + text[:cut], text[cut:]
        for kwargs in ({}, {"chat_template_kwargs": {"enable_thinking": False}}):
            _compare_streaming(tokenizer, template, prompt, output, random.Random(cut), kwargs)
        _compare_counts(tokenizer, template, prompt, output, random.Random(cut))
    # (without `as_dict` the growing-id comparisons admit no difference at all)
    assert TALLY["ends answered as vLLM"] - before["ends answered as vLLM"] == 2 * (len(text) + 1)
