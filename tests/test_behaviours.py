"""Behaviour catalogue tests: every item of tests/data/BEHAVIOURS.md (A-K, D1-D20, R1-R9; not section L
and not the `[net]` items), each checked on chatparse and, wherever the reference can run it, on
transformers 5.23.0 (`transformers.utils.chat_parsing`) too, so that no test can pass vacuously.

Test names carry the item number: `test_a01_...` for item 1, `test_docs_d01_...` for D1, `test_ref_r1_...`
for R1.

chatparse deliberately differs from the reference in one respect: its answers never depend on how the text
was split into `feed()` calls (nor on where the prefix ends), and it never hangs. Where the reference's answer
does depend on the split, the tests check chatparse's chunk-invariant (whole-string) answer instead and say so.
chatparse may also merge several chunks of one region within one `feed()`; streamed event sequences are
therefore compared after merging adjacent chunks, except where the spec pins the exact per-feed events.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import sys
import types
from pathlib import Path
from typing import Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chatparse  # noqa: E402
from chatparse import compiled as cp_module  # noqa: E402
from transformers.utils.chat_parsing import ResponseParser as RefParser  # noqa: E402
from transformers.utils.chat_parsing import parse_response as ref_parse_response  # noqa: E402
from transformers.utils.chat_parsing import response_parser as ref_module  # noqa: E402

import fixtures_templates as fx  # noqa: E402
from corpus_cases import strict_equal  # noqa: E402

FIXED_STEPS = (1, 2, 3, 5, 7, 13, 31)
SEED_STREAM = 0xC0DE_5EED
SEED_EVENTS = 0xBEEF


# =============================================================================================== helpers


def _wrap_parse(fn):
    def parse(text, template, *, prefix="", tools=None):
        return fn(text, copy.deepcopy(template), prefix=prefix, tools=tools)

    return parse


def _wrap_parser(cls):
    def make(template, prefix="", *, tools=None):
        return cls(copy.deepcopy(template), prefix=prefix, tools=tools)

    return make


CP = types.SimpleNamespace(
    name="chatparse", parse=_wrap_parse(chatparse.parse_response), parser=_wrap_parser(chatparse.ResponseParser),
    Parser=chatparse.ResponseParser, raw_parse=chatparse.parse_response, module=cp_module,
)
REF = types.SimpleNamespace(
    name="reference", parse=_wrap_parse(ref_parse_response), parser=_wrap_parser(RefParser),
    Parser=RefParser, raw_parse=ref_parse_response, module=ref_module,
)
IMPLS = (CP, REF)


def assert_same(a, b, what=""):
    assert strict_equal(a, b), f"{what}\nchatparse: {a!r}\nreference: {b!r}"


def parse_both(text, template, prefix="", tools=None):
    """One-shot parse with both implementations; they must agree (types included). Returns the message."""
    got = CP.parse(text, template, prefix=prefix, tools=tools)
    ref = REF.parse(text, template, prefix=prefix, tools=tools)
    assert_same(got, ref, f"parse_response({text!r})")
    return got


def raises_both(exc, call):
    """`call(impl)` must raise `exc` on both implementations. Returns (chatparse message, reference message)."""
    msgs = []
    for impl in IMPLS:
        with pytest.raises(exc) as info:
            call(impl)
        msgs.append(str(info.value))
    return tuple(msgs)


class Run:
    def __init__(self, initial, per_feed, message, final):
        self.initial = initial
        self.per_feed = per_feed
        self.message = message
        self.final = final

    @property
    def events(self):
        return self.initial + [e for batch in self.per_feed for e in batch] + self.final


def stream(impl, template, prefix, chunks, tools=None):
    parser = impl.parser(template, prefix, tools=tools)
    initial = list(parser.initial_events)
    per_feed = [parser.feed(c) for c in chunks]
    message, final = parser.finalize()
    return Run(initial, per_feed, message, final)


def fixed_chunks(text, n):
    return [text[i:i + n] for i in range(0, len(text), n)]


def random_chunkings(text, seed, count):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        if len(text) < 2:
            out.append([text])
            continue
        k = rng.randint(1, min(len(text) - 1, 24))
        cuts = sorted(rng.sample(range(1, len(text)), k))
        out.append([text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])])
    return out


def all_chunkings(text, seed=SEED_STREAM, count=30):
    return [fixed_chunks(text, n) for n in FIXED_STEPS] + random_chunkings(text, seed, count)


def merged(events):
    """Adjacent region_chunk events of one field joined into one (chunk boundaries are not part of the contract)."""
    out = []
    for e in events:
        if (e["type"] == "region_chunk" and out and out[-1]["type"] == "region_chunk"
                and out[-1]["field"] == e["field"] and out[-1]["dirty"] == e["dirty"]):
            out[-1] = dict(out[-1], text=out[-1]["text"] + e["text"])
        else:
            out.append(dict(e))
    return out


def chunk_text(events, field):
    return "".join(e["text"] for e in events if e["type"] == "region_chunk" and e["field"] == field)


def closes(events, field=None):
    return [e for e in events if e["type"] == "region_close" and (field is None or e["field"] == field)]


def opens(events, field=None):
    return [e for e in events if e["type"] == "region_open" and (field is None or e["field"] == field)]


def check_well_formed(events):
    """#46/#47: only three event types with the right keys; flat open -> chunks -> close per region."""
    current = None
    for e in events:
        assert e["type"] in ("region_open", "region_chunk", "region_close"), e
        assert isinstance(e["field"], str), e
        if e["type"] == "region_open":
            assert set(e) == {"type", "field"}, e
            assert current is None, f"nested open {e} inside {current}"
            current = e["field"]
        elif e["type"] == "region_chunk":
            assert set(e) == {"type", "field", "text", "dirty"}, e
            assert isinstance(e["text"], str) and e["text"], e
            assert type(e["dirty"]) is bool, e
            assert current == e["field"], f"chunk {e} outside its open region ({current})"
        else:
            assert set(e) == {"type", "field", "value"}, e
            assert current == e["field"], f"close {e} without matching open ({current})"
            current = None
    assert current is None, f"region {current} left open after finalize()"


def T(fields, **top):
    """A small template: anchor "<|assistant|>", defaults role=assistant, the given fields."""
    spec = {"defaults": {"role": "assistant"}, "start_anchor": "<|assistant|>", "fields": fields}
    spec.update(top)
    return spec


# ======================================================================== A. Public surface and lifecycle


def test_a01_parse_response_and_response_parser_take_a_plain_dict():
    template, prefix, text, expected = fx.fixture("smollm")
    for impl in IMPLS:
        msg = impl.raw_parse(text, copy.deepcopy(template), prefix=prefix)
        assert isinstance(msg, dict) and msg == expected
        parser = impl.Parser(copy.deepcopy(template), prefix=prefix)
        parser.feed(text)
        assert parser.finalize()[0] == expected


def test_a01_compiled_template_is_accepted_wherever_a_dict_is():
    template, prefix, text, expected = fx.fixture("qwen3")
    compiled = chatparse.compile_template(copy.deepcopy(template))
    assert chatparse.compile_template(copy.deepcopy(template)) is compiled  # cached
    ref = REF.parse(text, template, prefix=prefix)
    assert_same(ref, expected)
    assert_same(chatparse.parse_response(text, compiled, prefix=prefix), ref)
    assert_same(compiled.parse(text, prefix=prefix), ref)
    parser = chatparse.ResponseParser(compiled, prefix=prefix)
    parser.feed(text)
    assert_same(parser.finalize()[0], ref)
    p2 = compiled.parser(prefix)
    p2.feed(text)
    assert_same(p2.finalize()[0], ref)


def test_a02_feed_returns_list_and_finalize_returns_message_and_events():
    template, prefix, text, expected = fx.fixture("qwen3")
    for impl in IMPLS:
        parser = impl.parser(template, fx.QWEN3_THINK_PROMPT)
        assert isinstance(parser.initial_events, list) and parser.initial_events  # ready after construction
        events = parser.feed(fx.QWEN3_THINK_TEXT)
        assert isinstance(events, list) and all(isinstance(e, dict) for e in events)
        result = parser.finalize()
        assert isinstance(result, tuple) and len(result) == 2
        message, final_events = result
        assert message == fx.QWEN3_THINK_EXPECTED
        assert isinstance(final_events, list)


def test_a03_feed_or_finalize_after_finalize_raises_runtime_error():
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "")
        parser.feed("hello")
        parser.finalize()
        with pytest.raises(RuntimeError):
            parser.feed("more")
        with pytest.raises(RuntimeError):
            parser.feed("")
        with pytest.raises(RuntimeError):
            parser.finalize()


def test_a04_empty_feed_and_finalize_without_text():
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "")
        assert parser.feed("") == []
        assert parser.feed("") == []
        assert parser.finalize() == ({"role": "assistant"}, [])
    for name in fx.FIXTURES:
        template = fx.FIXTURES[name][0]
        for impl in IMPLS:
            parser = impl.parser(template, "")
            assert parser.initial_events == []
            assert parser.finalize() == ({"role": "assistant"}, [])


def test_a05_private_output_after_finalize():
    template, prefix, text, expected = fx.fixture("cohere")
    for impl in IMPLS:
        parser = impl.parser(template, prefix)
        parser.feed(text)
        message, _ = parser.finalize()
        assert parser._output == expected
        assert parser._output == message


def test_a05_private_coerce_tool_calls_and_module_helpers_exist():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}}]
    results = []
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "", tools=tools)
        call = {"type": "function", "function": {"name": "f", "arguments": {"n": "3"}}}
        results.append(parser._coerce_tool_calls(call))
        assert callable(impl.module._coerce) and callable(impl.module._schema_types)
        assert impl.module._coerce("3", ("integer",)) == 3
        assert impl.module._schema_types({"type": "integer"}) == ("integer",)
    assert_same(results[0], results[1])
    assert results[0]["function"]["arguments"] == {"n": 3}


# =================================================================== B. Template validation (load time)

BAD_TEMPLATES = {
    "unknown_parser": (T({"x": {"open": "<x>", "content": "yaml"}}), ["unknown content parser"]),
    "version_2": (T({"content": {}}, version=2), ["version"]),
    "two_implicit": (T({"a": {}, "b": {"close": "</b>"}}), []),
    "interpolation": (T({"x": {"open": "<x>", "transform": {"name": "name: {content}"}}}), ["interpolation", "{content}"]),
    "dotted_mix": (T({"x": {"open": "<x>", "transform": {"a": "pre {content.args}"}}}), ["mixes"]),
    "named_groups": (T({"x": {"open_pattern": r"<(?P<name>\w+)>", "close": "</x>"}}), ["transform", "name"]),
    "join_no_repeats": (T({"x": {"open": "<x>", "join": ""}}), ["requires 'repeats'"]),
    "join_not_str": (T({"x": {"open": "<x>", "repeats": True, "join": 7}}), ["must be a string"]),
    "no_anchor": ({"fields": {"content": {}}}, ["start_anchor"]),
}


@pytest.mark.parametrize("case", sorted(BAD_TEMPLATES))
def test_b06_validation_runs_at_load_before_the_missing_prefix_check(case):
    template, needles = BAD_TEMPLATES[case]
    for impl in IMPLS:
        for call in (lambda: impl.raw_parse("anything", copy.deepcopy(template)),
                     lambda: impl.Parser(copy.deepcopy(template))):
            with pytest.raises(ValueError) as info:
                call()
            msg = str(info.value)
            assert "requires `prefix`" not in msg, msg
            for needle in needles:
                assert needle.lower() in msg.lower(), msg


@pytest.mark.parametrize("case", sorted(BAD_TEMPLATES))
def test_b07_validation_errors_fire_even_for_empty_text(case):
    template, needles = BAD_TEMPLATES[case]
    msgs = raises_both(ValueError, lambda impl: impl.parse("", template, prefix=""))
    for msg in msgs:
        for needle in needles:
            assert needle.lower() in msg.lower(), msg


def test_b08_unknown_content_parser_rejected():
    template = T({"x": {"open": "<x>", "close": "</x>", "content": "yaml"}})
    for msg in raises_both(ValueError, lambda impl: impl.parser(template, "")):
        assert "unknown content parser" in msg.lower()


def test_b09_unsupported_version_rejected_version_1_or_absent_accepted():
    for msg in raises_both(ValueError, lambda impl: impl.parser(T({"content": {}}, version=2), "")):
        assert "version" in msg.lower()
    assert parse_both("hi", T({"content": {}}, version=1)) == {"role": "assistant", "content": "hi"}
    assert parse_both("hi", T({"content": {}})) == {"role": "assistant", "content": "hi"}


def test_b10_two_implicit_fields_rejected():
    template = T({"content": {"close": "<end>"}, "other": {"content": "text"}})
    raises_both(ValueError, lambda impl: impl.parser(template, ""))
    # one implicit plus explicit fields is fine
    parse_both("a<x>b</x>", T({"content": {}, "x": {"open": "<x>", "close": "</x>"}}))


def test_b11_template_without_start_anchor_rejected_by_constructor():
    template = {"defaults": {"role": "assistant"}, "fields": {"content": {}}}
    for msg in raises_both(ValueError, lambda impl: impl.Parser(copy.deepcopy(template), prefix="")):
        assert "start_anchor" in msg


def test_b12_transform_interpolation_rejected():
    template = T({"x": {"open": "<x>", "close": "</x>", "transform": {"name": "name: {content}"}}})
    for msg in raises_both(ValueError, lambda impl: impl.parser(template, "")):
        assert "interpolation" in msg and "{content}" in msg


def test_b12_transform_dotted_mixed_string_rejected():
    template = T({"x": {"open": "<x>", "close": "</x>", "content": "json",
                        "transform": {"function": {"arguments": "pre {content.args}"}}}})
    for msg in raises_both(ValueError, lambda impl: impl.parse("", template)):
        assert "mixes" in msg


def test_b13_named_groups_without_transform_rejected():
    template = T({"x": {"open_pattern": r"<call (?P<name>\w+)>", "close": "</call>"}})
    for msg in raises_both(ValueError, lambda impl: impl.parser(template, "")):
        assert "transform" in msg and "name" in msg


def test_b14_join_requires_repeats_and_must_be_a_string():
    no_repeats = T({"x": {"open": "<x>", "close": "</x>", "join": " "}})
    for msg in raises_both(ValueError, lambda impl: impl.parse("", no_repeats)):
        assert "requires 'repeats'" in msg
    not_str = T({"x": {"open": "<x>", "close": "</x>", "repeats": True, "join": 7}})
    for msg in raises_both(ValueError, lambda impl: impl.parse("", not_str)):
        assert "must be a string" in msg


@pytest.mark.parametrize("bad_open", [[], [""], [1, 2], {"a": "<a>"}], ids=["empty", "empty-literal", "ints", "dict"])
def test_b15_literal_open_rejects_empty_and_non_string(bad_open):
    template = T({"x": {"open": bad_open, "close": "</x>"}})
    raises_both(ValueError, lambda impl: impl.parser(template, ""))


# ======================================================================== C. Prefix and start-anchor rules


def test_c16_empty_prefix_is_the_explicit_opt_out():
    for impl in IMPLS:
        parser = impl.parser(fx.QWEN3, "")
        assert parser.initial_events == []
        events = parser.feed("Let me think...</think>")
        # nothing was consumed: the text is plain implicit content, "</think>" included
        assert opens(events) == [{"type": "region_open", "field": "content"}]
    plain = parse_both("Let me think...</think>", fx.QWEN3, prefix="")
    primed = parse_both("Let me think...</think>", fx.QWEN3, prefix=fx.QWEN3_THINK_PROMPT)
    assert plain == {"role": "assistant", "content": "Let me think...</think>"}
    assert primed == {"role": "assistant", "thinking": "Let me think..."}


def test_c17_prefix_truncated_to_last_anchor():
    prefix = (
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n<think>old reasoning</think>Hello!<|im_end|>\n"
        "<|im_start|>user\nAgain?<|im_end|>\n<|im_start|>assistant\n"
    )
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, prefix)
        assert parser.initial_events == []
        parser.feed("Sure.<|im_end|>")
        message, _ = parser.finalize()
        assert message == {"role": "assistant", "content": "Sure."}
        assert "old reasoning" not in json.dumps(message) and "Hello!" not in json.dumps(message)


def test_c18_anchor_missing_from_prefix_processes_whole_prefix():
    for impl in IMPLS:
        parser = impl.parser(fx.QWEN3, "<think>\n")  # no "<|im_start|>assistant\n" in it
        assert merged(parser.initial_events) == [
            {"type": "region_open", "field": "thinking"},
            {"type": "region_chunk", "field": "thinking", "text": "\n", "dirty": False},
        ]
    assert parse_both("pondering</think>Answer", fx.QWEN3, prefix="<think>\n") == {
        "role": "assistant", "thinking": "pondering", "content": "Answer"}


def test_c19_anchor_inside_generation_is_ordinary_text():
    # gpt-oss re-emits "<|start|>assistant" between channels; the analysis before it survives.
    template, prefix, text, expected = fx.fixture("gpt_oss_tool")
    assert "<|start|>assistant" in text
    assert parse_both(text, template, prefix=prefix) == expected
    assert parse_both(text, template, prefix="") == expected
    # with an implicit field the anchor text simply stays in the content
    msg = parse_both("Before <|im_start|>assistant\nafter", fx.SMOLLM, prefix="")
    assert msg == {"role": "assistant", "content": "Before <|im_start|>assistant\nafter"}


def test_c20_prefix_lands_inside_explicit_region():
    for impl in IMPLS:
        parser = impl.parser(fx.QWEN3, fx.QWEN3_THINK_PROMPT)
        assert parser.initial_events == [
            {"type": "region_open", "field": "thinking"},
            {"type": "region_chunk", "field": "thinking", "text": "\n", "dirty": False},
        ]
        events = parser.feed("Let me think...</think>")
        assert events == [
            {"type": "region_chunk", "field": "thinking", "text": "Let me think...", "dirty": False},
            {"type": "region_close", "field": "thinking", "value": "Let me think..."},
        ]
        message, _ = parser.finalize()
        assert message["thinking"] == "Let me think..."


def test_c21_region_opened_and_closed_inside_prefix():
    template = T({"tag": {"open": "<tag>", "close": "</tag>"}, "content": {"close_pattern": r"\Z"}},
                 start_anchor="[BEGIN]")
    prefix = "noise <tag>ignored</tag> [BEGIN]<tag>silently consumed</tag>"
    for impl in IMPLS:
        parser = impl.parser(template, prefix)
        assert parser.initial_events == [
            {"type": "region_open", "field": "tag"},
            {"type": "region_chunk", "field": "tag", "text": "silently consumed", "dirty": False},
            {"type": "region_close", "field": "tag", "value": "silently consumed"},
        ]
        message, final = parser.finalize()
        assert message == {"role": "assistant", "tag": "silently consumed"}
        assert final == []


def test_c22_prefix_text_in_implicit_region_opens_it_once():
    prefix = fx.SMOLLM_PROMPT + "Sure, here is "
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, prefix)
        assert opens(parser.initial_events) == [{"type": "region_open", "field": "content"}]
        assert chunk_text(parser.initial_events, "content") == "Sure, here is "
        later = []
        for piece in ["the ", "answer.", "<|im_end|>"]:
            later += parser.feed(piece)
        message, final = parser.finalize()
        later += final
        assert opens(later) == []
        assert message == {"role": "assistant", "content": "Sure, here is the answer."}


def test_c23_prefix_ending_inside_a_delimiter_emits_nothing_until_completed():
    prefix = fx.QWEN3_PROMPT + "<thi"
    for impl in IMPLS:
        parser = impl.parser(fx.QWEN3, prefix)
        assert parser.initial_events == []
        events = parser.feed("nk>real body</think>")
        assert {"type": "region_open", "field": "thinking"} in events
        assert all("<thi" not in e.get("text", "") for e in events)
        message, final = parser.finalize()
        assert message == {"role": "assistant", "thinking": "real body"}
        assert all(e["field"] == "thinking" for e in events + final)


@pytest.mark.parametrize("name", ["qwen3", "smollm"])
@pytest.mark.parametrize("step", [1, 3, 7, 31])
def test_c24_prefix_plus_chunked_feed_equals_one_shot(name, step):  # the upstream sizes; see the next test too
    template = fx.FIXTURES[name][0]
    if name == "qwen3":
        prefix, gen = fx.QWEN3_THINK_PROMPT, fx.QWEN3_THINK_TEXT
    else:
        prefix, gen = fx.SMOLLM_PROMPT + "<think>\n", "I should greet.\n</think>\n\nHello there!<|im_end|>"
    one_shot = parse_both(gen, template, prefix=prefix)
    assert one_shot.get("thinking", one_shot.get("reasoning_content")) in ("Let me think...", "I should greet.")
    for impl in IMPLS:
        assert_same(stream(impl, template, prefix, fixed_chunks(gen, step)).message, one_shot, impl.name)


@pytest.mark.parametrize("name", ["qwen3", "smollm"])
def test_c24_prefix_plus_any_chunking_equals_one_shot(name):
    template = fx.FIXTURES[name][0]
    if name == "qwen3":
        prefix, gen = fx.QWEN3_THINK_PROMPT, fx.QWEN3_THINK_TEXT
    else:
        prefix, gen = fx.SMOLLM_PROMPT + "<think>\n", "I should greet.\n</think>\n\nHello there!<|im_end|>"
    one_shot = parse_both(gen, template, prefix=prefix)
    for chunks in all_chunkings(gen):
        assert_same(stream(CP, template, prefix, chunks).message, one_shot, repr(chunks))
        assert_same(stream(REF, template, prefix, chunks).message, one_shot, repr(chunks))
    # chatparse: also independent of where the prompt ends and the generation starts
    cut = prefix[prefix.rindex(template["start_anchor"]):]
    for k in range(len(gen) + 1):
        assert_same(CP.parse(gen[k:], template, prefix=cut + gen[:k]), one_shot, f"split at {k}")


def test_c25_history_bleed_guarded_by_prefix_for_plain_content():
    template = T({"thinking": {"open": "<think>", "close": "</think>"}, "content": {"close_pattern": r"\Z"}},
                 start_anchor="<|im_start|>assistant\n")
    prompt = ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>x</think>Old reply<|im_end|>\n"
              "<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n")
    gen = "A brand new answer."
    with_prompt = parse_both(gen, template, prefix=prompt)
    assert with_prompt == parse_both(gen, template, prefix="") == {"role": "assistant", "content": gen}


def test_c26_prefix_ending_exactly_at_anchor_starts_fresh():
    template, prefix, text, expected = fx.fixture("inkling")
    assert prefix.endswith(template["start_anchor"])
    for impl in IMPLS:
        assert impl.parser(template, prefix).initial_events == []
    assert parse_both(text, template, prefix=prefix) == expected


def test_c27_start_anchor_may_be_a_list_of_literals():
    template, _, text, expected = fx.fixture("gemma4")
    assert isinstance(template["start_anchor"], list)
    assert parse_both(text, template, prefix="") == expected
    assert parse_both(fx.GEMMA4_TEXT, template, prefix="") == fx.GEMMA4_EXPECTED
    # beyond the upstream tests: the cut happens after the last occurrence of any member
    prefix = "<|turn>model\nstale text<|tool_response>tool output<tool_response|>"
    assert parse_both("Fresh.<turn|>", template, prefix=prefix) == {"role": "assistant", "content": "Fresh."}


# ============================================================ D. Regions: explicit, implicit, null sink, EOS


def test_d28_fields_become_keys_and_defaults_prefill():
    template = T({"a": {"open": "<a>", "close": "</a>"}, "b": {"open": "<b>", "close": "</b>"}},
                 defaults={"role": "assistant", "model": "tiny"})
    msg = parse_both("<b>two</b><a>one</a>", template)
    assert msg == {"role": "assistant", "model": "tiny", "b": "two", "a": "one"}
    assert list(msg)[:2] == ["role", "model"]
    assert parse_both("", template) == {"role": "assistant", "model": "tiny"}


def test_d29_text_outside_regions_is_dropped_without_implicit_field():
    cases = [
        fx.fixture("cohere"),                                    # trailing <|END_OF_TURN_TOKEN|>
        fx.fixture("ernie_tool"),                                # "\n\n" between blocks, trailing "\n</s>"
        fx.fixture("inkling"),                                   # "\n\n" and <|content_model_end_sampling|>
        (T({"x": {"open": "<x>", "close": "</x>"}}), "", "lead<x>kept</x> after the close", None),
    ]
    for template, prefix, text, expected in cases:
        msg = parse_both(text, template, prefix=prefix)
        if expected is not None:
            assert msg == expected
        for impl in IMPLS:
            events = stream(impl, template, prefix, [text]).events
            for dropped in ("<|END_OF_TURN_TOKEN|>", "</s>", "<|content_model_end_sampling|>", "after the close"):
                assert all(dropped not in e.get("text", "") for e in events)
    assert parse_both("lead<x>kept</x> after the close", cases[-1][0]) == {"role": "assistant", "x": "kept"}


def test_d30_implicit_field_collects_leftover_text():
    # closes at end of stream when its close never comes
    assert parse_both(fx.SMOLLM_PLAIN_TEXT, fx.SMOLLM, prefix=fx.SMOLLM_PROMPT) == fx.SMOLLM_PLAIN_EXPECTED
    # no close at all
    no_close = T({"think": {"open": "<think>", "close": "</think>"}, "content": {}})
    assert parse_both("<think>a</think> b <x> c", no_close) == {"role": "assistant", "think": "a", "content": "b <x> c"}
    # a literal list as its close
    listed = T({"content": {"close": ["<end>", "<stop>"]}})
    assert parse_both("answer<stop>", listed) == {"role": "assistant", "content": "answer"}
    assert parse_both("answer<end>", listed) == {"role": "assistant", "content": "answer"}


def test_d31_explicit_open_ends_the_implicit_region():
    template = T({"thinking": {"open": "<think>", "close": "</think>", "repeats": True, "join": " "},
                  "content": {"repeats": True, "join": " "}})
    text = "<think>first</think>middle<think>second</think>done"
    assert parse_both(text, template) == {"role": "assistant", "thinking": "first second", "content": "middle done"}
    for impl in IMPLS:
        events = stream(impl, template, "", [text]).events
        assert [e["value"] for e in closes(events, "content")] == ["middle", "done"]
        assert [e["field"] for e in events if e["type"] == "region_open"] == ["thinking", "content", "thinking", "content"]


def test_d32_field_without_close_runs_to_end_of_stream():
    template = T({"answer": {"open": "<answer>"}})
    text = "skipped<answer>all of <b>this</b> </answer> stays"
    assert parse_both(text, template) == {"role": "assistant", "answer": "all of <b>this</b> </answer> stays"}


@pytest.mark.parametrize("name,field", [("gpt_oss_tool", "tool_calls"), ("gpt_oss", "content")])
def test_d33_end_of_stream_closes_open_region(name, field):
    template, prefix, text, expected = fx.fixture(name)
    assert parse_both(text, template, prefix=prefix) == expected
    for impl in IMPLS:
        run = stream(impl, template, prefix, [text])
        assert [e["field"] for e in closes(run.final)] == [field]
        assert closes(run.final)[0]["value"] == (expected[field][0] if field == "tool_calls" else expected[field])


def test_d33_smollm_content_closed_by_end_of_stream():
    for impl in IMPLS:
        run = stream(impl, fx.SMOLLM, fx.SMOLLM_PROMPT, [fx.SMOLLM_PLAIN_TEXT])
        assert run.message == fx.SMOLLM_PLAIN_EXPECTED
        assert closes(run.final) == [{"type": "region_close", "field": "content",
                                      "value": "Hello! How can I help you today?"}]


def test_d34_closing_an_implicit_region_that_got_no_bytes_adds_nothing():
    template = fx.GEMMA4
    assert parse_both(fx.GEMMA4_TEXT, template) == fx.GEMMA4_EXPECTED
    for impl in IMPLS:
        events = stream(impl, template, "", [fx.GEMMA4_TEXT]).events
        assert opens(events, "content") == [] and closes(events, "content") == []
        assert "content" not in stream(impl, template, "", fixed_chunks(fx.GEMMA4_TEXT, 1)).message


def test_d35_zero_width_open_pattern_at_start_of_generation():
    for name in ("ernie", "ernie_tool"):
        template, prefix, text, expected = fx.fixture(name)
        assert parse_both(text, template, prefix=prefix) == expected
    _, prefix, text, _ = fx.fixture("ernie_tool")
    assert not text.startswith("<think>")
    for impl in IMPLS:
        parser = impl.parser(fx.ERNIE, prefix)
        events = parser.feed(text[:10])
        assert events[0] == {"type": "region_open", "field": "thinking"}
        assert chunk_text(events, "thinking") == text[:10]


@pytest.mark.parametrize("close", [r"\Z", r"$"])
def test_d36_zero_width_implicit_close_fires_at_end_of_stream(close):
    template = T({"thinking": {"open": "<think>", "close": "</think>"}, "content": {"close_pattern": close}})
    text = "<think>hmm</think>The answer is 4."
    expected = {"role": "assistant", "thinking": "hmm", "content": "The answer is 4."}
    assert parse_both(text, template) == expected
    for impl in IMPLS:
        for chunks in all_chunkings(text, count=5):
            run = stream(impl, template, "", chunks)
            assert run.message == expected
            check_well_formed(run.events)
            assert len(opens(run.events, "content")) == 1 and len(closes(run.events, "content")) == 1
    # nothing at all after the explicit block: no empty content region
    for impl in IMPLS:
        run = stream(impl, template, "", ["<think>hmm</think>"])
        assert run.message == {"role": "assistant", "thinking": "hmm"}
        assert opens(run.events, "content") == []


def test_d37_open_pattern_spans_text_and_delimiters_may_carry_newlines():
    # gpt-oss: the header regex crosses " <|constrain|>json"
    template, prefix, text, expected = fx.fixture("gpt_oss_tool")
    assert " <|constrain|>json" in text
    assert parse_both(text, template, prefix=prefix) == expected
    # ERNIE: "<response>\n" and "\n?</response>" keep the newlines out, even of the raw chunks
    template, prefix, text, expected = fx.fixture("ernie")
    assert parse_both(text, template, prefix=prefix) == expected
    for impl in IMPLS:
        for chunks in (fixed_chunks(text, 1), [text]):
            assert chunk_text(stream(impl, template, prefix, chunks).events, "content") == "The answer."
    # qwen3: `\s*` in "<tool_call>\s*<function=...>" spans newlines
    assert "<tool_call>\n<function=" in fx.QWEN3_TEXT
    assert parse_both(fx.QWEN3_TEXT, fx.QWEN3, prefix=fx.QWEN3_PROMPT) == fx.QWEN3_EXPECTED


def test_d38_inkling_open_pattern_absorbs_header_and_author():
    template, prefix, text, expected = fx.fixture("inkling")
    msg = parse_both(text, template, prefix=prefix)
    assert msg == expected
    for impl in IMPLS:
        events = stream(impl, template, prefix, fixed_chunks(text, 3)).events
        texts = [e["text"] for e in events if e["type"] == "region_chunk"]
        assert not any("get_weather" in t or "<|message_model|>" in t for t in texts)
    values = [msg["reasoning_content"], msg["content"]]
    assert not any("get_weather" in v or "message_model" in v for v in values)


# ========================================================================================= E. Literal lists


def test_e39_literal_list_open_and_close_are_independent():
    template = T({"x": {"open": ["<a>", "<b>"], "close": ["</a>", "</bb>"]}})
    assert parse_both("<a>hi</bb>", template) == {"role": "assistant", "x": "hi"}
    assert parse_both("<b>yo</a>", template) == {"role": "assistant", "x": "yo"}


def test_e40_literal_close_list_streams_without_fixed_hold_back():
    template = T({"content": {"close": ["<turn|>", "<|tool_response>", "<eos>"]}})
    for impl in IMPLS:
        parser = impl.parser(template, "")
        events = parser.feed("x" * 32)
        assert events[0] == {"type": "region_open", "field": "content"}
        assert chunk_text(events, "content") == "x" * 32
        # a partial delimiter is held back, the text before it is not
        events = parser.feed("yy<tu")
        assert chunk_text(events, "content") == "yy"
        events = parser.feed("rn|>")
        assert closes(events) == [{"type": "region_close", "field": "content", "value": "x" * 32 + "yy"}]


def test_e41_literal_that_prefixes_another_waits_for_next_byte():
    template = T({"x": {"open": "<x>", "close": ["END", "ENDX"]}})
    for impl in IMPLS:
        parser = impl.parser(template, "")
        first = parser.feed("<x>hiEND")
        assert closes(first) == []
        second = parser.feed(" more")
        message, final = parser.finalize()
        all_closes = closes(first + second + final)
        assert all_closes == [{"type": "region_close", "field": "x", "value": "hi"}]
        assert closes(second) == all_closes
        assert message == {"role": "assistant", "x": "hi"}
    assert parse_both("<x>hiENDX more", template) == {"role": "assistant", "x": "hi"}


def test_e42_complete_unextendable_literal_at_buffer_end_commits_in_same_feed():
    template = T({"x": {"open": "<x>", "close": "</x>"}, "content": {}})
    for impl in IMPLS:
        parser = impl.parser(template, "")
        events = parser.feed("<x>value</x>")
        assert closes(events) == [{"type": "region_close", "field": "x", "value": "value"}]
        assert parser.finalize() == ({"role": "assistant", "x": "value"}, [])
    # also for the thinking close in the qwen3 prefix case (see #20)
    for impl in IMPLS:
        parser = impl.parser(fx.QWEN3, fx.QWEN3_THINK_PROMPT)
        assert len(closes(parser.feed("done</think>"))) == 1


# ======================================================================= F. Streaming invariants, hold-back

STREAM_FIXTURES = ["cohere", "ernie", "gpt_oss", "gpt_oss_tool", "smollm", "qwen3", "gemma4", "inkling"]


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_f43_stream_matches_whole_string_fixed_chunking(name):
    template, prefix, text, expected = fx.fixture(name)
    whole = parse_both(text, template, prefix=prefix)
    assert_same(whole, expected)
    for step in FIXED_STEPS:
        for impl in IMPLS:
            assert_same(stream(impl, template, prefix, fixed_chunks(text, step)).message, whole, f"{impl.name} step={step}")


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_f43_stream_matches_whole_string_random_chunking(name):
    template, prefix, text, expected = fx.fixture(name)
    whole = parse_both(text, template, prefix=prefix)
    assert_same(whole, expected)
    for chunks in random_chunkings(text, SEED_STREAM, 30):
        assert "".join(chunks) == text
        assert_same(stream(CP, template, prefix, chunks).message, whole, f"chunks={chunks!r}")
    for chunks in random_chunkings(text, SEED_STREAM, 30):
        assert_same(stream(REF, template, prefix, chunks).message, whole, f"reference chunks={chunks!r}")


def test_f44_long_regex_open_found_byte_by_byte():
    name = "get_current_weather_in_a_city_with_a_deliberately_long_function_name"
    header = f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
    text = fx.GPT_OSS_NO_TOOL_TEXT.split("<|start|>")[0] + "<|start|>assistant" + header + '{"city": "Oslo"}<|call|>'
    import regex

    m = regex.search(fx.GPT_OSS["fields"]["tool_calls"]["open_pattern"], text, regex.DOTALL)
    assert m is not None and len(m.group(0)) > 64
    expected = {"role": "assistant", "reasoning_content": "User asks a simple sum; answer is 2.",
                "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {"city": "Oslo"}}}]}
    assert parse_both(text, fx.GPT_OSS, prefix=fx.GPT_OSS_PROMPT) == expected
    for impl in IMPLS:
        run = stream(impl, fx.GPT_OSS, fx.GPT_OSS_PROMPT, fixed_chunks(text, 1))
        assert run.message == expected
        assert chunk_text(run.events, "tool_calls") == '{"city": "Oslo"}'


def test_f45_delimiter_bytes_never_leak_into_region_text():
    template, prefix, text, expected = fx.fixture("cohere")
    for impl in IMPLS:
        for chunks in all_chunkings(text, count=10):
            events = stream(impl, template, prefix, chunks).events
            assert chunk_text(events, "reasoning_content") == "I should call a tool."
            assert chunk_text(events, "tool_calls") == fx.COHERE_ACTION_BODY


# ================================================================================ G. Event shapes/ordering


@pytest.mark.parametrize("name", sorted(fx.FIXTURES))
def test_g46_events_have_three_types_and_required_keys(name):
    template, prefix, text, _ = fx.fixture(name)
    for impl in IMPLS:
        for chunks in [[text], fixed_chunks(text, 1), fixed_chunks(text, 5)]:
            run = stream(impl, template, prefix, chunks)
            assert run.events, "no events at all"
            for e in run.events:
                assert e["type"] in {"region_open", "region_chunk", "region_close"}
                assert "field" in e and "type" in e
                if e["type"] == "region_chunk":
                    assert isinstance(e["text"], str) and type(e["dirty"]) is bool
                if e["type"] == "region_close":
                    assert "value" in e


@pytest.mark.parametrize("name", sorted(fx.FIXTURES))
def test_g47_events_flat_and_closed_after_finalize_for_every_chunking(name):
    template, prefix, text, _ = fx.fixture(name)
    whole = {impl.name: merged(stream(impl, template, prefix, [text]).events) for impl in IMPLS}
    assert whole["chatparse"] == whole["reference"]
    for chunks in random_chunkings(text, SEED_EVENTS, 10):
        for impl in IMPLS:
            run = stream(impl, template, prefix, chunks)
            check_well_formed(run.events)
        # chatparse's event sequence does not depend on the chunking at all
        assert merged(stream(CP, template, prefix, chunks).events) == whole["chatparse"]


DIRTY_TEMPLATE = T({
    "t": {"open": "<t>", "close": "</t>"},
    "i": {"open": "<i>", "close": "</i>", "content": "int"},
    "f": {"open": "<f>", "close": "</f>", "content": "float"},
    "b": {"open": "<b>", "close": "</b>", "content": "bool"},
    "j": {"open": "<j>", "close": "</j>", "content": "json"},
    "x": {"open": "<x>", "close": "</x>", "content": "xml-inline",
          "content_args": {"tag_pattern": r"<(?P<key>\w+)=(?P<value>[^>]*)>"}},
    "k": {"open": "<k>", "close": "</k>", "content": "kv-lines"},
})
DIRTY_BODIES = {"t": " some text ", "i": "42", "f": " 2.5", "b": "true ", "j": '{"a": 1, "b": 2}',
                "x": "<name=foo><age=10>", "k": "k1: v1\nk2: v2"}
DIRTY_TEXT = "".join(f"<{k}>{v}</{k}>" for k, v in DIRTY_BODIES.items())


def test_g48_dirty_flag_by_content_type_and_constant_within_region():
    expected_dirty = {"t": False, "i": False, "f": False, "b": False, "j": True, "x": True, "k": True}
    for impl in IMPLS:
        for chunks in [[DIRTY_TEXT]] + all_chunkings(DIRTY_TEXT, count=10):
            events = stream(impl, DIRTY_TEMPLATE, "", chunks).events
            for field, dirty in expected_dirty.items():
                flags = {e["dirty"] for e in events if e["type"] == "region_chunk" and e["field"] == field}
                assert flags == {dirty}, (impl.name, field, flags)


def test_g49_joined_chunks_equal_the_raw_body():
    for impl in IMPLS:
        for chunks in [[DIRTY_TEXT]] + all_chunkings(DIRTY_TEXT, count=10):
            events = stream(impl, DIRTY_TEMPLATE, "", chunks).events
            for field, body in DIRTY_BODIES.items():
                assert chunk_text(events, field) == body
    msg = parse_both(DIRTY_TEXT, DIRTY_TEMPLATE)
    assert msg == {"role": "assistant", "t": "some text", "i": 42, "f": 2.5, "b": True, "j": {"a": 1, "b": 2},
                   "x": {"name": "foo", "age": "10"}, "k": {"k1": "v1", "k2": "v2"}}


def test_g50_region_close_value_is_the_processed_value_of_one_match():
    template, prefix, text, expected = fx.fixture("qwen3")
    tools = [{"type": "function", "function": {"name": "set_alarm", "parameters": {
        "type": "object", "properties": {"code": {"type": "integer"}}}}}]
    for impl in IMPLS:
        run = stream(impl, template, prefix, fixed_chunks(text, 5), tools=tools)
        tool_closes = closes(run.events, "tool_calls")
        # one element per close (repeats), transformed and type-cast; the list only in the message
        assert [c["value"] for c in tool_closes] == run.message["tool_calls"]
        assert tool_closes[1]["value"]["function"]["arguments"]["code"] == 7
        assert closes(run.events, "thinking")[0]["value"] == "Two tools are needed."  # stripped text


# =================================================================== H. repeats, join, optional, defaults


def test_h51_repeats_collects_every_match_in_order():
    template = T({"tool_calls": {"open": "<call>", "close": "</call>", "repeats": True, "content": "json"}})
    text = '<call>{"n": 1}</call> and <call>{"n": 2}</call><call>{"n": 3}</call>'
    assert parse_both(text, template) == {"role": "assistant", "tool_calls": [{"n": 1}, {"n": 2}, {"n": 3}]}
    template, prefix, text, expected = fx.fixture("ernie_tool")
    text = text.replace("</tool_call>\n</s>", '</tool_call>\n<tool_call>{"name": "second", "arguments": {}}</tool_call>')
    msg = parse_both(text, template, prefix=prefix)
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather", "second"]


def test_h52_join_concatenates_repeated_matches():
    template = T({"thinking": {"open": "<think>", "close": "</think>", "repeats": True, "join": " "},
                  "content": {"repeats": True, "join": " "}})
    msg = parse_both("<think>first</think>middle<think>second</think>done", template)
    assert msg == {"role": "assistant", "thinking": "first second", "content": "middle done"}
    # region_close still carries each block's own value
    for impl in IMPLS:
        events = stream(impl, template, "", ["<think>first</think>middle<think>second</think>done"]).events
        assert [c["value"] for c in closes(events, "thinking")] == ["first", "second"]


def test_h53_single_joined_match_is_a_string_and_no_match_is_absent():
    template = T({"thinking": {"open": "<think>", "close": "</think>", "repeats": True, "join": "\n"},
                  "content": {"close": "<end>"}})
    assert parse_both("<think>only</think>", template) == {"role": "assistant", "thinking": "only"}
    assert parse_both("just text", template) == {"role": "assistant", "content": "just text"}


def test_h54_join_requires_every_match_to_parse_to_a_string():
    template = T({"x": {"open": "<x>", "close": "</x>", "content": "json", "repeats": True, "join": ","}})
    for impl in IMPLS:
        impl.parser(template, "")  # loads fine: the check is at parse time
    assert parse_both('<x>"a"</x><x>"b"</x>', template) == {"role": "assistant", "x": "a,b"}
    for msg in raises_both(ValueError, lambda impl: impl.parse("<x>{}</x>", template)):
        assert "parse to a string" in msg


def test_h55_optional_false_field_missing_raises_naming_it():
    template = T({"answer": {"open": "<answer>", "close": "</answer>", "optional": False}, "content": {}})
    for msg in raises_both(ValueError, lambda impl: impl.parse("no answer here", template)):
        assert "answer" in msg
    # it fires at the end, not on feed
    for impl in IMPLS:
        parser = impl.parser(template, "")
        parser.feed("no answer here")
        with pytest.raises(ValueError):
            parser.finalize()
    assert parse_both("<answer>42</answer>", template) == {"role": "assistant", "answer": "42"}


def test_h56_empty_values_dropped_but_defaults_kept():
    template = T({
        "s": {"open": "<s>", "close": "</s>"},
        "l": {"open": "<l>", "close": "</l>", "content": "json"},
        "d": {"open": "<d>", "close": "</d>", "content": "json"},
        "z": {"open": "<z>", "close": "</z>", "content": "int"},
    }, defaults={"role": "assistant", "s": "default kept?"})
    msg = parse_both("<s>   </s><l>[]</l><d>{}</d><z>0</z>", template)
    assert msg == {"role": "assistant", "s": "", "z": 0}
    # smollm: the implicit content only saw "\n\n" between </think> and <tool_call>
    assert "content" not in parse_both(fx.SMOLLM_TOOL_TEXT, fx.SMOLLM, prefix=fx.SMOLLM_PROMPT)


# ======================================================================================= I. Content parsers


def test_i57_text_strips_by_default_and_strip_false_keeps_whitespace():
    stripped = T({"x": {"open": "<x>", "close": "</x>"}})
    assert parse_both("<x>  padded \n</x>", stripped) == {"role": "assistant", "x": "padded"}
    kept = T({"x": {"open": "<x>", "close": "</x>", "content_args": {"strip": False}}})
    assert parse_both("<x>  padded \n</x>", kept) == {"role": "assistant", "x": "  padded \n"}
    template, prefix, text, _ = fx.fixture("inkling")
    assert parse_both(text, template, prefix=prefix)["reasoning_content"] == "Consider the weather. Tokyo, probably."


def test_i58_int_parser_gives_python_int():
    template = T({"n": {"open": "<n>", "close": "</n>", "content": "int"}})
    msg = parse_both("<n>42</n>", template)
    assert msg == {"role": "assistant", "n": 42} and type(msg["n"]) is int


def test_i59_json_tolerates_surrounding_newlines_and_indentation():
    template = T({"j": {"open": "<j>", "close": "</j>", "content": "json"}})
    assert parse_both('<j>\n    {\n        "a": [1, 2],\n        "b": null\n    }\n</j>', template) == {
        "role": "assistant", "j": {"a": [1, 2], "b": None}}
    for name in ("ernie_tool", "cohere", "gpt_oss_tool"):
        template, prefix, text, expected = fx.fixture(name)
        assert parse_both(text, template, prefix=prefix) == expected


def test_i60_json_unquoted_keys_and_custom_string_delimiters():
    template, _, text, expected = fx.fixture("gemma4")
    msg = parse_both(text, template)
    assert msg == expected
    args = msg["tool_calls"][0]["function"]["arguments"]
    assert args["destination"] == "Paris, France"
    assert args["refundable"] is True and args["budget"] is None and type(args["nights"]) is int
    assert args["hotel"] == {"name": "Le Petit", "stars": 4} and args["sights"] == ["Louvre", "Eiffel Tower"]


def test_i61_xml_inline_builds_a_dict_of_raw_strings():
    template = T({"args": {"open": "<args>", "close": "</args>", "content": "xml-inline",
                           "content_args": {"tag_pattern": r"<parameter=(?P<key>\w+)>(?P<value>.*?)</parameter>"}}})
    text = "<args><parameter=city>Paris</parameter>junk<parameter=days>3</parameter></function></args>"
    msg = parse_both(text, template)
    assert msg == {"role": "assistant", "args": {"city": "Paris", "days": "3"}}
    assert parse_both(fx.QWEN3_TEXT, fx.QWEN3, prefix=fx.QWEN3_PROMPT) == fx.QWEN3_EXPECTED


def test_i62_value_parser_json_with_allow_non_json():
    msg = parse_both(fx.QWEN3_TEXT, fx.QWEN3, prefix=fx.QWEN3_PROMPT)
    weather, alarm = (c["function"]["arguments"] for c in msg["tool_calls"])
    assert weather["locations"] == [{"country": "France", "city": "Paris"}]
    assert weather["detailed"] is True and weather["unit"] == "celsius"
    assert alarm["price"] == 1.5 and type(alarm["price"]) is float
    assert alarm["label"] == "wake up" and alarm["code"] == "007"


def test_i63_tag_pattern_with_backreference():
    template = T({"meta": {"open": "<meta>", "close": "</meta>", "content": "xml-inline",
                           "content_args": {"tag_pattern": r"<(?P<key>\w+)>\s*(?P<value>.*?)\s*</\1>"}}})
    text = "<meta><source> web </source><fields>a<b>x</b></fields></meta>"
    assert parse_both(text, template) == {"role": "assistant", "meta": {"source": "web", "fields": "a<b>x</b>"}}


def test_i64_merge_duplicates_collects_repeated_keys():
    template = T({"alarm": {"open": "<alarm>", "close": "</alarm>", "content": "xml-inline",
                            "content_args": {"tag_pattern": r"<(?P<key>\w+)>(?P<value>[^<]*)</(?P=key)>",
                                             "merge_duplicates": True}}})
    text = "<alarm><hour>7</hour><label>up</label><hour>9</hour></alarm>"
    assert parse_both(text, template) == {"role": "assistant", "alarm": {"hour": ["7", "9"], "label": "up"}}
    template["fields"]["alarm"]["content_args"]["merge_duplicates"] = False
    assert parse_both(text, template)["alarm"]["hour"] == "9"


def test_i65_kv_lines_defaults_and_use_under_open_pattern_with_transform():
    template = T({"meta": {"open": "<meta>", "close": "</meta>", "content": "kv-lines"}})
    assert parse_both("<meta>name: alice\n age :30 \n</meta>", template) == {
        "role": "assistant", "meta": {"name": "alice", "age": "30"}}
    tool = T({"tool_calls": {"open_pattern": r"<call name=(?P<name>\w+)>", "close": "</call>", "repeats": True,
                             "content": "kv-lines",
                             "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}})
    assert parse_both("<call name=lookup>\nuser: bob\nlimit: 5\n</call>", tool) == {
        "role": "assistant",
        "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"user": "bob", "limit": "5"}}}]}


# ============================================================================================= J. Transform


def test_j66_whole_placeholder_keeps_type_and_literals_pass_through():
    template, prefix, text, expected = fx.fixture("smollm")
    msg = parse_both(text, template, prefix=prefix)
    call = msg["tool_calls"][0]
    assert call["type"] == "function"
    assert call["function"] == {"name": "greet_user", "arguments": {"greeting": "Hi!"}}
    numbers = T({"n": {"open": "<n>", "close": "</n>", "content": "json",
                       "transform": {"value": "{content}", "kind": "number", "fixed": 3, "flag": None}}})
    assert parse_both("<n>[1, 2]</n>", numbers) == {
        "role": "assistant", "n": {"value": [1, 2], "kind": "number", "fixed": 3, "flag": None}}


def test_j67_named_groups_from_open_pattern_are_in_scope():
    for name in ("gpt_oss_tool", "qwen3", "gemma4"):
        template, prefix, text, expected = fx.fixture(name)
        assert parse_both(text, template, prefix=prefix) == expected
    template = T({"x": {"open_pattern": r"<x id=(?P<id>\d+) kind=(?P<kind>\w+)>", "close": "</x>",
                        "transform": {"id": "{id}", "kind": "{kind}", "body": "{content}"}}})
    assert parse_both("<x id=12 kind=note>hello</x>", template) == {
        "role": "assistant", "x": {"id": "12", "kind": "note", "body": "hello"}}


def test_j68_dotted_placeholders_walk_nested_dicts_keeping_type():
    template = T({"tool_calls": {"open": "<tool>", "close": "</tool>", "repeats": True, "content": "json",
                                 "transform": {"type": "function",
                                               "function": {"name": "{content.name}", "arguments": "{content.args}"},
                                               "city_id": "{content.args.city.id}"}}})
    text = '<tool>{"name": "lookup", "args": {"city": {"id": 7}}}</tool>'
    msg = parse_both(text, template)
    assert msg["tool_calls"] == [{"type": "function", "function": {"name": "lookup", "arguments": {"city": {"id": 7}}},
                                  "city_id": 7}]
    template, prefix, text, expected = fx.fixture("inkling")
    assert parse_both(text, template, prefix=prefix)["tool_calls"] == expected["tool_calls"]


def test_j69_transform_each_applies_per_list_element():
    template, prefix, text, expected = fx.fixture("cohere")
    msg = parse_both(text, template, prefix=prefix)
    assert msg == expected
    assert all("tool_call_id" not in json.dumps(c) for c in msg["tool_calls"])  # unused element keys dropped
    dotted = T({"calls": {"open": "<calls>", "close": "</calls>", "content": "json", "transform_each": True,
                          "transform": {"name": "{fn.name}", "arguments": "{fn.params}"}}})
    text = '<calls>[{"fn": {"name": "a", "params": {"x": 1}}, "id": 1}]</calls>'
    msg = parse_both(text, dotted)
    assert msg == {"role": "assistant", "calls": [{"name": "a", "arguments": {"x": 1}}]}
    assert isinstance(msg["calls"], list)  # a list without `repeats`


def test_j70_dotted_path_errors_come_at_parse_time():
    template = T({"t": {"open": "<t>", "close": "</t>", "content": "json",
                        "transform": {"name": "{content.name}", "arguments": "{content.args}"}}})
    for impl in IMPLS:
        impl.parser(template, "")  # loads fine
    for msg in raises_both(ValueError, lambda impl: impl.parse('<t>{"name": "x"}</t>', template)):
        assert "missing key 'args'" in msg
    for msg in raises_both(ValueError, lambda impl: impl.parse('<t>"just a string"</t>', template)):
        assert "cannot index into str" in msg
    deep = T({"t": {"open": "<t>", "close": "</t>", "content": "json", "transform": {"v": "{content.args.city}"}}})
    for msg in raises_both(ValueError, lambda impl: impl.parse('<t>{"args": "Paris"}</t>', deep)):
        assert "cannot index into str" in msg
    undefined = T({"t": {"open": "<t>", "close": "</t>", "transform": {"v": "{missing}"}}})
    raises_both(KeyError, lambda impl: impl.parse("<t>x</t>", undefined))


# ============================================================================ K. Tool-argument coercion

ALARM_TOOL = {"type": "function", "function": {"name": "set_alarm", "parameters": {
    "type": "object", "properties": {
        "hour": {"type": "integer"}, "enabled": {"type": "boolean"}, "label": {"type": "string"},
        "ratio": {"type": "number"}, "tags": {"type": "array"}, "meta": {"type": "object"},
        "nothing": {"type": "null"}, "maybe": {"type": ["integer", "null"]},
        "either": {"anyOf": [{"type": "string"}, {"type": "object"}]}, "free": {}}}}}

XML_TOOL_TEMPLATE = T({"tool_calls": {
    "open_pattern": r"<function=(?P<name>\w+)>", "close": "</function>", "repeats": True, "content": "xml-inline",
    "content_args": {"tag_pattern": r"<parameter=(?P<key>\w+)>(?P<value>.*?)</parameter>", "merge_duplicates": True},
    "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}})


def xml_call(name, **args):
    body = "".join(f"<parameter={k}>{v}</parameter>" for k, v in args.items())
    return f"<function={name}>{body}</function>"


def args_of(msg, i=0):
    return msg["tool_calls"][i]["function"]["arguments"]


def set_alarm_fn(hour: int, label: str, snooze: Optional[int] = None, enabled: bool = True):
    """
    Set an alarm.

    Args:
        hour: The hour to ring at.
        label: What the alarm is for.
        snooze: Minutes to snooze, if any.
        enabled: Whether the alarm is on.
    """


def test_k71_tools_accept_openai_entries_and_python_functions():
    text = xml_call("set_alarm_fn", hour="7", label="wake", snooze="null", enabled="false")
    msg = parse_both(text, XML_TOOL_TEMPLATE, tools=[set_alarm_fn])
    assert args_of(msg) == {"hour": 7, "label": "wake", "snooze": None, "enabled": False}
    msg = parse_both(xml_call("set_alarm_fn", hour="7", snooze="5"), XML_TOOL_TEMPLATE, tools=[set_alarm_fn])
    assert args_of(msg) == {"hour": 7, "snooze": 5}
    msg = parse_both(xml_call("set_alarm", hour="7", enabled="true", label="wake up"), XML_TOOL_TEMPLATE,
                     tools=[ALARM_TOOL])
    assert args_of(msg) == {"hour": 7, "enabled": True, "label": "wake up"}


def test_k72_only_tool_call_shaped_values_are_coerced():
    not_calls = [
        "hello",
        {"source": "web", "fields": {"hour": "7"}},
        {"type": "function", "function": {"name": ["set_alarm"], "arguments": {"hour": "7"}}},
        {"type": "function", "function": {"name": "set_alarm", "arguments": "hour=7"}},
        {"type": "function", "function": "set_alarm"},
        42,
    ]
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "", tools=[ALARM_TOOL])
        for value in not_calls:
            before = copy.deepcopy(value)
            assert parser._coerce_tool_calls(value) == before
        single = {"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": "7"}}}
        assert parser._coerce_tool_calls(single)["function"]["arguments"] == {"hour": 7}
        calls = [{"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": str(h)}}} for h in (1, 2)]
        assert [c["function"]["arguments"]["hour"] for c in parser._coerce_tool_calls(calls)] == [1, 2]
    # a non-call region parsed alongside tools is left untouched
    template = T({"meta": {"open": "<meta>", "close": "</meta>", "content": "xml-inline",
                           "content_args": {"tag_pattern": r"<(?P<key>\w+)>\s*(?P<value>.*?)\s*</\1>"}}})
    msg = parse_both("<meta><source>web</source><hour>7</hour></meta>", template, tools=[ALARM_TOOL])
    assert msg["meta"] == {"source": "web", "hour": "7"}


def test_k73_coercion_is_in_place_and_returns_the_same_object():
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "", tools=[ALARM_TOOL])
        call = {"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": "3"}}}
        args = call["function"]["arguments"]
        assert parser._coerce_tool_calls(call) is call
        assert args == {"hour": 3}
        calls = [{"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": "4"}}}]
        out = parser._coerce_tool_calls(calls)
        assert out[0] is calls[0] and calls[0]["function"]["arguments"]["hour"] == 4


def test_k74_only_declared_string_arguments_are_cast():
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "", tools=[ALARM_TOOL])
        call = {"type": "function", "function": {"name": "set_alarm", "arguments": {
            "hour": 7, "label": 1.5, "ratio": "2.5", "extra": "3", "free": "4"}}}
        parser._coerce_tool_calls(call)
        assert_same(call["function"]["arguments"], {"hour": 7, "label": 1.5, "ratio": 2.5, "extra": "3", "free": "4"})
    # 1.5 produced by the value parser stays a float even though the schema says string
    tools = [{"type": "function", "function": {"name": "set_alarm", "parameters": {
        "type": "object", "properties": {"price": {"type": "string"}, "hour": {"type": "integer"}}}}}]
    msg = parse_both(fx.QWEN3_TEXT, fx.QWEN3, prefix=fx.QWEN3_PROMPT, tools=tools)
    assert_same(args_of(msg, 1), {"hour": 7, "label": "wake up", "price": 1.5, "code": "007"})


@pytest.mark.parametrize("raw,types_,expected", [
    ("3", ("integer",), 3), ("007", ("integer",), 7), ("1.5", ("number",), 1.5),
    ("true", ("boolean",), True), ("True", ("boolean",), True), ("1", ("boolean",), True),
    ("false", ("boolean",), False), ("FALSE", ("boolean",), False), ("0", ("boolean",), False),
    ("maybe", ("boolean",), "maybe"), ("null", ("null",), None),
    ("[1, 2]", ("array",), [1, 2]), ('{"a": 1}', ("object",), {"a": 1}),
    ("[1, 2]", ("object",), "[1, 2]"), ('{"a": 1}', ("array",), '{"a": 1}'),
    ("NaN", ("number",), "NaN"), ("42", ("string",), "42"), ("not-a-number", ("integer",), "not-a-number"),
    ("not-a-number", ("number",), "not-a-number"), ("{bad", ("object",), "{bad"),
])
def test_k75_cast_rules_by_declared_type(raw, types_, expected):
    got = cp_module._coerce(raw, types_)
    assert_same(got, ref_module._coerce(raw, types_))
    assert_same(got, expected)


def test_k75_cast_rules_through_parse_response():
    text = xml_call("set_alarm", hour="007", enabled="0", ratio="NaN", tags='{"a": 1}', meta="[1, 2]",
                    nothing="null", label="12")
    msg = parse_both(text, XML_TOOL_TEMPLATE, tools=[ALARM_TOOL])
    assert_same(args_of(msg), {"hour": 7, "enabled": False, "ratio": "NaN", "tags": '{"a": 1}', "meta": "[1, 2]",
                               "nothing": None, "label": "12"})


def test_k76_unions_try_each_type_in_order():
    for raw, types_, expected in [("5", ("integer", "null"), 5), ("null", ("integer", "null"), None),
                                  ("1.50", ("string", "object"), "1.50"), ('{"a": 1}', ("string", "object"), {"a": 1})]:
        assert_same(cp_module._coerce(raw, types_), ref_module._coerce(raw, types_))
        assert_same(cp_module._coerce(raw, types_), expected)
    msg = parse_both(xml_call("set_alarm", maybe="5", either="1.50") + xml_call("set_alarm", maybe="null", either='{"a": 1}'),
                     XML_TOOL_TEMPLATE, tools=[ALARM_TOOL])
    assert_same(args_of(msg, 0), {"maybe": 5, "either": "1.50"})
    assert_same(args_of(msg, 1), {"maybe": None, "either": {"a": 1}})


@pytest.mark.parametrize("schema,expected", [
    ({"type": "integer"}, ("integer",)),
    ({"type": ["null", "integer", "string"]}, ("null", "integer", "string")),
    ({"anyOf": [{"type": "string"}, {"anyOf": [{"type": "object"}, {"type": "array"}]}]}, ("string", "object", "array")),
    ({"type": "integer", "nullable": True}, ("integer", "null")),
    ({"type": ["integer", "null"], "nullable": True}, ("integer", "null")),
    ({"description": "anything"}, ()),
    ({}, ()),
])
def test_k77_schema_types_reads_type_unions_and_nullable(schema, expected):
    got = cp_module._schema_types(schema)
    assert got == ref_module._schema_types(schema)
    assert got == expected and isinstance(got, tuple)


def test_k78_list_arguments_for_non_array_params_cast_element_wise():
    for impl in IMPLS:
        parser = impl.parser(fx.SMOLLM, "", tools=[ALARM_TOOL])
        call = {"type": "function", "function": {"name": "set_alarm", "arguments": {"hour": ["7", "x", 9],
                                                                                     "tags": ["1", "2"]}}}
        parser._coerce_tool_calls(call)
        assert_same(call["function"]["arguments"], {"hour": [7, "x", 9], "tags": ["1", "2"]})
    text = "<function=set_alarm><parameter=hour>7</parameter><parameter=hour>9</parameter></function>"
    msg = parse_both(text, XML_TOOL_TEMPLATE, tools=[ALARM_TOOL])
    assert_same(args_of(msg), {"hour": [7, 9]})


def test_k79_coercion_happens_at_region_close_during_feed():
    text = xml_call("set_alarm", hour="7", enabled="true") + "trailing"
    for impl in IMPLS:
        parser = impl.parser(XML_TOOL_TEMPLATE, "", tools=[ALARM_TOOL])
        events = parser.feed(text)
        tool_closes = closes(events, "tool_calls")
        assert len(tool_closes) == 1
        assert_same(tool_closes[0]["value"]["function"]["arguments"], {"hour": 7, "enabled": True})
    # kv-lines string arguments are coerced too
    kv = T({"tool_calls": {"open_pattern": r"<call name=(?P<name>\w+)>", "close": "</call>", "repeats": True,
                           "content": "kv-lines",
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}})
    msg = parse_both("<call name=set_alarm>hour: 6\nenabled: 0\nlabel: 5</call>", kv, tools=[ALARM_TOOL])
    assert_same(args_of(msg), {"hour": 6, "enabled": False, "label": "5"})


@pytest.mark.parametrize("name", ["smollm", "ernie_tool", "cohere", "gpt_oss_tool", "gemma4"])
def test_k80_tools_is_a_noop_for_typed_json_tool_calls(name):
    template, prefix, text, expected = fx.fixture(name)
    tools = []
    for call in expected["tool_calls"]:
        fn = call["function"]
        props = {k: {"type": {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
                              dict: "object", type(None): "null"}[type(v)]} for k, v in fn["arguments"].items()}
        tools.append({"type": "function", "function": {"name": fn["name"], "parameters": {"type": "object",
                                                                                          "properties": props}}})
    with_tools = parse_both(text, template, prefix=prefix, tools=tools)
    assert_same(with_tools, parse_both(text, template, prefix=prefix))
    assert_same(with_tools, expected)


# ======================================================================= Documented but untested (D1-D20)


def test_docs_d01_missing_prefix_is_an_error_and_empty_list_opts_out():
    for impl in IMPLS:
        with pytest.raises(ValueError) as info:
            impl.Parser(copy.deepcopy(fx.SMOLLM))
        assert "prefix" in str(info.value)
        with pytest.raises(ValueError):
            impl.raw_parse("hi", copy.deepcopy(fx.SMOLLM))
        with pytest.raises(ValueError):
            impl.Parser(copy.deepcopy(fx.SMOLLM), prefix=None)
    # an empty list (no prompt token ids) is the opt-out, like ""
    for impl in IMPLS:
        parser = impl.Parser(copy.deepcopy(fx.SMOLLM), prefix=[])
        assert parser.initial_events == []
        parser.feed("hi")
        assert parser.finalize()[0] == {"role": "assistant", "content": "hi"}


def test_docs_d02_no_response_template_raises():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"hi": 0, "[UNK]": 1}, unk_token="[UNK]")))
    assert getattr(tok, "response_template", None) is None
    with pytest.raises(AttributeError):
        tok.parse_response("hi", prefix="")
    # chatparse has no tokenizer wrapper: its equivalent is being handed no template, rejected like the reference
    raises_both(ValueError, lambda impl: impl.raw_parse("hi", None, prefix=""))


def test_docs_d03_one_parser_per_generation_and_batches_only_in_parse():
    template = fx.SMOLLM
    texts = [fx.SMOLLM_TOOL_TEXT, fx.SMOLLM_PLAIN_TEXT]
    expected = [fx.SMOLLM_TOOL_EXPECTED, fx.SMOLLM_PLAIN_EXPECTED]
    for impl in IMPLS:
        parsers = [impl.parser(template, fx.SMOLLM_PROMPT) for _ in texts]
        chunked = [fixed_chunks(t, 4) for t in texts]
        for i in range(max(map(len, chunked))):  # interleaved: the parsers share no state
            for parser, chunks in zip(parsers, chunked):
                if i < len(chunks):
                    parser.feed(chunks[i])
        assert [p.finalize()[0] for p in parsers] == expected
    compiled = chatparse.compile_template(copy.deepcopy(template))
    assert compiled.parse_batch(texts, fx.SMOLLM_PROMPT) == expected
    assert compiled.parse_batch(texts, [fx.SMOLLM_PROMPT, ""]) == [
        REF.parse(t, template, prefix=p) for t, p in zip(texts, [fx.SMOLLM_PROMPT, ""])]
    assert compiled.parse_batch(texts[:1], "") == [REF.parse(texts[0], template, prefix="")]
    with pytest.raises(ValueError):
        compiled.parse_batch(texts, ["", "", ""])


def test_docs_d04_start_anchor_pattern_is_the_alternative_and_not_both():
    template = {"defaults": {"role": "assistant"}, "start_anchor_pattern": r"<\|turn\|>(?:model|assistant)\n",
                "fields": {"thinking": {"open": "<think>", "close": "</think>"}, "content": {}}}
    prefix = "<|turn|>user\nhi\n<|turn|>assistant\n<think>old</think>old\n<|turn|>user\nagain\n<|turn|>model\n<think>"
    assert parse_both("new</think>answer", template, prefix=prefix) == {
        "role": "assistant", "thinking": "new", "content": "answer"}
    both = dict(template, start_anchor="<|turn|>model\n")
    raises_both(ValueError, lambda impl: impl.parser(both, ""))


@pytest.mark.parametrize("field", [{"open": "<a>", "open_pattern": "<a>"},
                                   {"open": "<a>", "close": "</a>", "close_pattern": "</a>"}], ids=["open", "close"])
def test_docs_d05_literal_and_pattern_are_mutually_exclusive(field):
    for msg in raises_both(ValueError, lambda impl: impl.parser(T({"x": field}), "")):
        assert "both" in msg


def test_docs_d06_defaults_repeats_false_optional_true_content_text():
    template = T({"x": {"open": "<x>", "close": "</x>"}, "y": {"open": "<y>", "close": "</y>"}})
    msg = parse_both("<x> first </x><x> second </x>", template)
    assert msg == {"role": "assistant", "x": "second"}  # not a list, stripped text; y missing without error


def test_docs_d07_float_and_bool_content_types_strip_first():
    template = T({"n": {"open": "<n>", "close": "</n>", "content": "int"},
                  "f": {"open": "<f>", "close": "</f>", "content": "float"},
                  "b": {"open": "<b>", "close": "</b>", "content": "bool"},
                  "c": {"open": "<c>", "close": "</c>", "content": "bool"}})
    msg = parse_both("<n> 42 </n><f>\n2.5 </f><b> True\n</b><c> no </c>", template)
    assert_same(msg, {"role": "assistant", "n": 42, "f": 2.5, "b": True, "c": False})
    assert_same(parse_both("<b>1</b>", template), {"role": "assistant", "b": True})


def test_docs_d08_json_invalid_raises_unless_allow_non_json():
    strict = T({"j": {"open": "<j>", "close": "</j>", "content": "json"}})
    raises_both(ValueError, lambda impl: impl.parse("<j>{not json}</j>", strict))
    lax = T({"j": {"open": "<j>", "close": "</j>", "content": "json", "content_args": {"allow_non_json": True}}})
    assert parse_both("<j>  plain words \n</j>", lax) == {"role": "assistant", "j": "plain words"}
    assert parse_both('<j> {"ok": true} </j>', lax) == {"role": "assistant", "j": {"ok": True}}


def test_docs_d09_xml_inline_needs_tag_pattern_and_value_parser_may_be_any_parser():
    missing = T({"x": {"open": "<x>", "close": "</x>", "content": "xml-inline"}})
    for impl in IMPLS:
        impl.parser(missing, "")  # content_args are only used when a body is parsed
    for msg in raises_both(ValueError, lambda impl: impl.parse("<x><a=1></x>", missing)):
        assert "tag_pattern" in msg
    ints = T({"x": {"open": "<x>", "close": "</x>", "content": "xml-inline",
                    "content_args": {"tag_pattern": r"<(?P<key>\w+)=(?P<value>[^>]*)>",
                                     "value_parser": {"name": "int"}}}})
    assert_same(parse_both("<x><a= 1><b=22></x>", ints), {"role": "assistant", "x": {"a": 1, "b": 22}})


def test_docs_d10_kv_lines_options():
    def kv(**args):
        return T({"m": {"open": "<m>", "close": "</m>", "content": "kv-lines", "content_args": args}})

    body = "<m>url: http://x:80/p\n\nno separator here\n  name :  bob  \n</m>"
    assert parse_both(body, kv()) == {"role": "assistant", "m": {"url": "http://x:80/p", "name": "bob"}}
    assert parse_both(body, kv(strip=False)) == {"role": "assistant",
                                                 "m": {"url": " http://x:80/p", "  name ": "  bob  "}}
    assert parse_both("<m>a=1;b=2;junk;c=x=y</m>", kv(line_sep=";", kv_sep="=")) == {
        "role": "assistant", "m": {"a": "1", "b": "2", "c": "x=y"}}
    assert_same(parse_both("<m>a: 1\nb: [2]</m>", kv(value_parser={"name": "json"})),
                {"role": "assistant", "m": {"a": 1, "b": [2]}})


def test_docs_d11_close_pattern_groups_not_in_transform_scope_but_counted_at_load():
    with_transform = T({"t": {"open": "<t>", "close_pattern": r"</t id=(?P<id>\d+)>", "transform": {"id": "{id}"}}})
    for msg in raises_both(KeyError, lambda impl: impl.parse("<t>body</t id=7>", with_transform)):
        assert "{id}" in msg and "content" in msg
    no_transform = T({"t": {"open": "<t>", "close_pattern": r"</t id=(?P<id>\d+)>"}})
    for msg in raises_both(ValueError, lambda impl: impl.parser(no_transform, "")):
        assert "transform" in msg and "id" in msg


def test_docs_d12_transform_may_be_a_list_walked_recursively():
    template = T({"x": {"open_pattern": r"<x (?P<tag>\w+)>", "close": "</x>", "content": "json",
                        "transform": ["{tag}", {"body": "{content}", "n": [1, None, True]}, 2.5]}})
    msg = parse_both('<x hello>{"a": [1]}</x>', template)
    assert_same(msg["x"], ["hello", {"body": {"a": [1]}, "n": [1, None, True]}, 2.5])


def test_docs_d13_transform_each_needs_list_of_dicts_and_a_transform():
    template = T({"x": {"open": "<x>", "close": "</x>", "content": "json", "transform_each": True,
                        "transform": {"v": "{v}"}}})
    assert parse_both('<x>[{"v": 1}, {"v": 2}]</x>', template) == {"role": "assistant", "x": [{"v": 1}, {"v": 2}]}
    for msg in raises_both(ValueError, lambda impl: impl.parse('<x>{"v": 1}</x>', template)):
        assert "list" in msg
    raises_both(ValueError, lambda impl: impl.parse("<x>[1, 2]</x>", template))
    no_transform = T({"x": {"open": "<x>", "close": "</x>", "content": "json", "transform_each": True}})
    raises_both(ValueError, lambda impl: impl.parser(no_transform, ""))


def test_docs_d14_regex_dialect():
    unicode_word = T({"x": {"open_pattern": r"<(?P<tag>\w+)>", "close": "</>", "transform": {"tag": "{tag}"}}})
    assert parse_both("<café>x</>", unicode_word) == {"role": "assistant", "x": {"tag": "café"}}
    dotall = T({"x": {"open_pattern": r"<a.b>", "close": "</x>"}})
    assert parse_both("<a\nb>multi\nline</x>", dotall) == {"role": "assistant", "x": "multi\nline"}
    caret = T({"content": {"close_pattern": r"^STOP"}})
    assert parse_both("line1\nSTOP here", caret) == {"role": "assistant", "content": "line1\nSTOP here"}
    dollar = T({"content": {"close_pattern": r"x$"}})
    assert parse_both("ax\nb", dollar) == {"role": "assistant", "content": "ax\nb"}
    look = T({"t": {"open": "<t>", "close_pattern": r"</t>(?=!)"}})
    text = "<t>a</t>b</t>!"
    assert parse_both(text, look) == {"role": "assistant", "t": "a</t>b"}
    for impl in IMPLS:
        for chunks in all_chunkings(text, count=5):
            assert stream(impl, look, "", chunks).message == {"role": "assistant", "t": "a</t>b"}


def test_docs_d15_partial_regex_match_holds_bytes_until_resolved():
    template = T({"think": {"open": "<think>", "close_pattern": r"</think\s*>"}, "content": {}})
    for impl in IMPLS:
        parser = impl.parser(template, "")
        first = parser.feed("<think>abc</thi")
        assert chunk_text(first, "think") == "abc" and closes(first) == []
        second = parser.feed("nk >rest")
        assert closes(second) == [{"type": "region_close", "field": "think", "value": "abc"}]
        assert chunk_text(second, "content") == "rest"
        # a partial match that fails releases the held bytes as text
        parser = impl.parser(template, "")
        assert chunk_text(parser.feed("<think>abc</thx"), "think") == "abc</thx"


@pytest.mark.parametrize("pattern,text", [(r"</t>(?=!)", "<t>a</t>b</t>!"), (r"</t>(?!x)", "<t>a</t>x</t>y")])
def test_docs_d15_lookahead_close_commits_in_the_feed_that_settles_it(pattern, text):
    template = T({"t": {"open": "<t>", "close_pattern": pattern}})
    for impl in (REF, CP):
        parser = impl.parser(template, "")
        events = parser.feed(text)
        # the match is certain: no continuation of the text can change it
        assert closes(events) == [{"type": "region_close", "field": "t", "value": text[3:-5]}], impl.name


def test_docs_d16_text_chunks_are_the_value_modulo_stripping():
    checked = 0
    for name in sorted(fx.FIXTURES):
        template, prefix, text, expected = fx.fixture(name)
        for impl in IMPLS:
            for chunks in all_chunkings(text, count=3):
                body = None
                for e in stream(impl, template, prefix, chunks).events:
                    spec = template["fields"][e["field"]]
                    if spec.get("content", "text") != "text" or spec.get("transform"):
                        continue
                    if e["type"] == "region_open":
                        body = ""
                    elif e["type"] == "region_chunk":
                        body += e["text"]
                        # every clean chunk so far is part of the final value (modulo whitespace)
                    else:
                        strip = spec.get("content_args", {}).get("strip", True)
                        assert (body.strip() if strip else body) == e["value"], (impl.name, name, chunks)
                        checked += 1
    assert checked > 100


def test_docs_d17_response_template_saved_inside_tokenizer_config(tmp_path):
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"hi": 0, "[UNK]": 1}, unk_token="[UNK]")))
    tok.response_template = copy.deepcopy(fx.QWEN3)
    tok.save_pretrained(tmp_path)
    stored = json.loads((tmp_path / "tokenizer_config.json").read_text())["response_template"]
    assert stored == fx.QWEN3
    assert not any("response_template" in p.name for p in tmp_path.iterdir())  # no separate file
    assert parse_both(fx.QWEN3_TEXT, stored, prefix=fx.QWEN3_PROMPT) == fx.QWEN3_EXPECTED


def test_docs_d18_defaults_are_kept_even_when_empty():
    template = T({"content": {}}, defaults={"role": "assistant", "x": "", "tools": [], "meta": {}})
    assert parse_both("", template) == {"role": "assistant", "x": "", "tools": [], "meta": {}}
    assert parse_both("hello", template) == {"role": "assistant", "x": "", "tools": [], "meta": {}, "content": "hello"}


@pytest.mark.parametrize("spec,expected", [
    ({"repeats": True}, ["from the prompt", "from the model"]),
    ({"repeats": True, "join": " + "}, "from the prompt + from the model"),
    ({}, "from the model"),
])
def test_docs_d19_prefix_regions_merge_with_generated_ones(spec, expected):
    template = T({"think": {"open": "<think>", "close": "</think>", **spec}, "content": {}})
    prefix = "<|user|>q<|assistant|><think>from the prompt</think>"
    gen = "<think>from the model</think>answer"
    msg = parse_both(gen, template, prefix=prefix)
    assert msg == {"role": "assistant", "think": expected, "content": "answer"}
    # exactly as if the model itself had written the prefill
    assert msg == parse_both("<think>from the prompt</think>" + gen, template, prefix="")


def test_docs_d20_documented_event_stream_for_a_repeats_tool_field():
    text = ('<think>I should greet the user</think><tool_call>{"name": "greet_user", '
            '"arguments": {"greeting": "Hi!"}}</tool_call>')
    documented = [
        {"type": "region_open", "field": "reasoning_content"},
        {"type": "region_chunk", "field": "reasoning_content", "text": "I should greet the user", "dirty": False},
        {"type": "region_close", "field": "reasoning_content", "value": "I should greet the user"},
        {"type": "region_open", "field": "tool_calls"},
        {"type": "region_chunk", "field": "tool_calls",
         "text": '{"name": "greet_user", "arguments": {"greeting": "Hi!"}}', "dirty": True},
        {"type": "region_close", "field": "tool_calls",
         "value": {"type": "function", "function": {"name": "greet_user", "arguments": {"greeting": "Hi!"}}}},
    ]
    for impl in IMPLS:
        for chunks in ([text], fixed_chunks(text, 9)):
            assert merged(stream(impl, fx.SMOLLM, "", chunks).events) == documented


# ================================================================ Reference behaviours (R1-R9), probed


@pytest.mark.parametrize("template,needle", [
    (T({"content": {}}, extra=1), "Unknown keys in response_template"),
    (T({"x": {"open": "<x>", "opn": "<y>"}}), "Field 'x': unknown keys"),
    (["not", "a", "dict"], "must be a dict"),
    (T({"content": {}}, defaults=["role"]), "defaults"),
    (T({}), "non-empty dict"),
    (T([{"open": "<x>"}]), "non-empty dict"),
    (T({"x": {"open_pattern": "(<x"}}), "Field 'x': invalid open_pattern regex"),
], ids=["top-key", "field-key", "not-dict", "defaults", "fields-empty", "fields-list", "bad-regex"])
def test_ref_r1_more_load_time_errors(template, needle):
    for msg in raises_both(ValueError, lambda impl: impl.parser(template, "")):
        assert needle in msg


def test_ref_r1_duplicate_literals_are_dropped_silently():
    template = T({"x": {"open": ["<x>", "<x>", "<y>"], "close": ["</x>", "</x>"]}})
    assert parse_both("<x>a</x>", template) == {"role": "assistant", "x": "a"}
    assert parse_both("<y>b</x>", template) == {"role": "assistant", "x": "b"}


def test_ref_r2_only_the_open_regions_own_close_is_watched():
    template = T({"t": {"open": "<t>", "close": "</t>", "repeats": True}, "u": {"open": "<u>", "close": "</u>"}})
    assert parse_both("<t>a<t>b</t>", template) == {"role": "assistant", "t": ["a<t>b"]}
    assert parse_both("<t>a<u>b</u></t>", template) == {"role": "assistant", "t": ["a<u>b</u>"]}


def test_ref_r3_delimiter_ties():
    longest = T({"a": {"open": "<t"}, "b": {"open": "<tt>"}})
    assert parse_both("<tt>x", longest) == {"role": "assistant", "b": "x"}
    earliest = T({"a": {"open": "<x"}, "b": {"open": "x>y"}})
    assert parse_both("<x>y z", earliest) == {"role": "assistant", "a": ">y z"}
    open_wins = T({"a": {"open": "<x>", "close": "</x>"}, "c": {"close": "<x>"}})
    assert parse_both("pre<x>in</x>post", open_wins) == {"role": "assistant", "c": "post", "a": "in"}
    for impl in IMPLS:
        for template, text in ((longest, "<tt>x"), (open_wins, "pre<x>in</x>post")):
            whole = stream(impl, template, "", [text]).message
            assert stream(impl, template, "", fixed_chunks(text, 1)).message == whole


def test_ref_r4_ernie_keeps_a_literal_think_tag_via_zero_width_caret():
    template, prefix, text, expected = fx.fixture("ernie")
    assert text.startswith("<think>")
    msg = parse_both(text, template, prefix=prefix)
    assert msg["thinking"] == "<think>some deliberation here" == expected["thinking"]


def test_ref_r5_dollar_close_drops_the_final_newline():
    template = T({"content": {"close_pattern": r"$", "content_args": {"strip": False}}})
    assert parse_both("hello\n", template) == {"role": "assistant", "content": "hello"}
    assert parse_both("hello\nworld", template) == {"role": "assistant", "content": "hello\nworld"}


def test_ref_r5_dollar_close_does_not_depend_on_the_feed_split():
    # Deliberate difference: the reference commits `$` before a "\n" that merely ends the current feed, so
    # feeding ["hello\n", "world"] gives it {"content": "\nworld"}; chatparse gives the whole-string answer.
    template = T({"content": {"close_pattern": r"$", "content_args": {"strip": False}}})
    whole = parse_both("hello\nworld", template)
    assert stream(CP, template, "", ["hello\n", "world"]).message == whole == {"role": "assistant",
                                                                              "content": "hello\nworld"}
    assert stream(REF, template, "", ["hello\n", "world"]).message != whole  # the reference bug being avoided
    for chunks in all_chunkings("hello\nworld", count=10):
        assert stream(CP, template, "", chunks).message == whole


def test_ref_r6_last_match_wins_without_repeats():
    explicit = T({"x": {"open": "<x>", "close": "</x>"}})
    assert parse_both("<x>one</x><x>two</x>", explicit) == {"role": "assistant", "x": "two"}
    implicit = T({"c": {"close": "<e>"}})
    assert parse_both("one<e>two<e>", implicit) == {"role": "assistant", "c": "two"}
    for impl in IMPLS:
        events = stream(impl, implicit, "", ["one<e>two<e>"]).events
        assert [c["value"] for c in closes(events)] == ["one", "two"]


def test_ref_r7_required_field_that_matched_empty_is_dropped_without_error():
    template = T({"answer": {"open": "<answer>", "close": "</answer>", "optional": False}})
    assert parse_both("<answer>   </answer>", template) == {"role": "assistant"}


def test_ref_r8_coercion_details():
    for raw, types_, expected in [("3.0", ("integer",), 3), ("2", ("number",), 2), ("yes", ("boolean",), "yes"),
                                  ("3.5", ("integer",), "3.5"), ("None", ("null",), None)]:
        assert_same(cp_module._coerce(raw, types_), ref_module._coerce(raw, types_))
        assert_same(cp_module._coerce(raw, types_), expected)
    bare_tool = {"name": "set_alarm", "parameters": {"type": "object", "properties": {"hour": {"type": "integer"}}}}
    text = xml_call("set_alarm", hour="8") + xml_call("unlisted", hour="8")
    msg = parse_both(text, XML_TOOL_TEMPLATE, tools=[bare_tool])
    assert_same(args_of(msg, 0), {"hour": 8})
    assert_same(args_of(msg, 1), {"hour": "8"})


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_ref_r9_missing_anchor_is_logged_at_info():
    from transformers.utils.chat_parsing import response_templates as ref_templates

    seen = {}
    for impl, logger in ((CP, logging.getLogger("chatparse")), (REF, ref_templates.logger)):
        handler, old_level = _Capture(), logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        try:
            impl.parser(fx.SMOLLM, "no anchor anywhere")
            impl.parser(fx.SMOLLM, fx.SMOLLM_PROMPT)  # anchor present: nothing logged
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
        seen[impl.name] = [(r.levelno, r.getMessage()) for r in handler.records]
    for records in seen.values():
        assert len(records) == 1 and records[0][0] == logging.INFO
        assert "anchor" in records[0][1]


@pytest.mark.parametrize("bad", ["\x01", "\x02"])
def test_ref_r9_string_delims_reject_sentinel_characters(bad):
    template = fx.GEMMA4
    text = f'<|tool_call>call:f{{a:<|"|>x{bad}y<|"|>}}<tool_call|>'
    for msg in raises_both(ValueError, lambda impl: impl.parse(text, template)):
        assert "sentinel" in msg
    plain = T({"j": {"open": "<j>", "close": "</j>", "content": "json"}})
    assert parse_both(f'<j>"a{bad}"</j>'.replace(bad, "\\u0001"), plain) == {"role": "assistant", "j": "a\x01"}


@pytest.mark.parametrize("defaults", [{"role": "assistant", "n": 1, "x": None},
                                      {"role": "assistant", "meta": {"tags": ["a"]}, "xs": [1]}])
def test_messages_never_share_the_templates_defaults(defaults):
    """Every parse (streamed or one-shot) starts from its own copy of the defaults: changing one message,
    nested defaults included, changes neither the template nor another message (flat defaults are copied
    with `dict`, others deeply: `parser.fresh_output`)."""
    import copy

    template = {"defaults": copy.deepcopy(defaults), "start_anchor": "S",
                "fields": {"a": {"open": "<a>", "close": "</a>"}}}
    compiled = chatparse.compile_template(template)
    msgs = [compiled.parse("<a>x</a>", prefix=""), chatparse.parse_response("<a>x</a>", template, prefix="")]
    p = chatparse.ResponseParser(template, prefix="")
    p.feed("<a>x</a>")
    msgs.append(p.finalize()[0])
    for m in msgs:
        for v in m.values():
            if isinstance(v, dict):
                v["tags"].append("changed")
            elif isinstance(v, list):
                v.append("changed")
        m["role"] = "changed"
    assert template["defaults"] == defaults
    assert compiled.parse("<a>x</a>", prefix="") == {**defaults, "a": "x"}
