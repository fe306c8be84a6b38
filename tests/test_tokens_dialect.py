"""The serving dialect per token id: `TokenParser`, `TokenStreams` and `parse_tokens` with ``dialect="vllm"``.

Claim under test: fed token ids, they give exactly the events (spans, captures, malformed regions), message,
errors and `input_text` that `chatparse.ResponseParser(..., dialect="vllm")` gives for the decoded text, which
tests/test_vllm_dialect.py holds against vLLM's own copy of the interpreter. With ``spans=True`` too, the
dialect's events also carry ``token_start``/``token_end``: the generated tokens that hold the event's span.
Tokenizers are trained here with `tokenizers` (tests/token_support.py).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

need("tokenizers")

import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.runtime.tokens import parse_tokens  # noqa: E402
from chatparse.runtime.tokens.decode import _Decoder  # noqa: E402
from strategies import VALUE_PIECES, compiles  # noqa: E402
from strategies import templates as gen_templates  # noqa: E402
from strategies import texts_for  # noqa: E402
from token_support import CASES, decode, outcome, split_into_bytes, toks  # noqa: E402,F401

ERRORS = (ValueError, KeyError, TypeError)


def plain(events):
    """Events without the token-only keys, errors as (class, message): comparable with the text parser's."""
    out = []
    for e in events:
        e = {k: v for k, v in e.items() if k not in ("open", "span", "token_start", "token_end")}
        if "error" in e:
            e["error"] = (type(e["error"]).__name__, str(e["error"]))
        out.append(e)
    return out


def errors_plain(events):
    """Events as they are, but errors as (class, message): two parsers' errors are distinct objects."""
    return [{**e, "error": (type(e["error"]).__name__, str(e["error"]))} if "error" in e else e for e in events]


def plain_outcome(fn):
    """`outcome` with events made comparable (`plain`): a region_malformed event's error is an exception
    object, equal to another only by identity."""
    got = outcome(fn)
    if got[0] != "ok":
        return got
    value = got[1]
    if isinstance(value, list) and (not value or isinstance(value[0], dict)):
        return "ok", plain(value)
    if isinstance(value, tuple):  # (message, final events)
        return "ok", (value[0], plain(value[1]))
    return "ok", [(m, plain(ev)) for m, ev in value]  # finalize_all


def step_streams(s, singles, seqs) -> None:
    """`test_tokens_streams.step_like_single_parsers`, comparing events with `plain`."""
    for k in range(max(map(len, seqs))):
        act = np.array([k < len(q) for q in seqs])
        ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
        out = s.step(ids, active=act if not act.all() else None)
        for j in range(len(seqs)):
            want = plain_outcome(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", [])
            assert plain_outcome(lambda: out[j]) == want, (j, k)


def run_both(binding, prefix, ids, tools=None, spans=False):
    """Feed `ids` one at a time to a TokenParser in the vllm dialect and the decoded text, token by token, to
    a ResponseParser in the same dialect; every step's events must be the same. Returns the token parser's
    (message, events, parser) or the error both raised."""
    p = binding.parser(prefix=prefix, tools=tools, spans=spans, dialect="vllm")
    ref = chatparse.ResponseParser(binding.compiled, prefix=prefix, tools=tools, dialect="vllm")
    assert plain(p.initial_events) == plain(ref.initial_events)
    assert p.input_text == ref.input_text
    dec = _Decoder(binding.vocab)
    events = list(p.initial_events)
    for k, i in enumerate(ids):
        delta = dec.feed([i])
        got = outcome(lambda: p.feed_tokens(i))
        want = outcome(lambda: ref.feed(delta))
        if got[0] != "ok" or want[0] != "ok":
            assert got == want, (k, i)
            return got
        assert plain(got[1]) == plain(want[1]), (k, i, delta)
        events += got[1]
    rest = dec.finish()

    def ref_finalize():
        tail = ref.feed(rest) if rest else []
        message, final = ref.finalize()
        return message, tail + final

    got, want = outcome(p.finalize), outcome(ref_finalize)
    if got[0] != "ok":
        assert got == want
        return got
    assert got[1][0] == want[1][0] and plain(got[1][1]) == plain(want[1][1])
    assert p.input_text == ref.input_text
    return got[1][0], events + got[1][1], p


MALFORMED = [
    ("qwen3", "<|im_start|>assistant\n<think>\n",
     'Plan.</think>\n\nCalling.<tool_call>\n{"name": "f", "arguments": {oops}\n</tool_call>'
     '<tool_call>\n{"name": "g", "arguments": {"x": "東京 😀"}}\n</tool_call><|im_end|>'),
    ("hermes", "", 'Sure <tool_call>\n{"name": broken}\n</tool_call> and then <tool_call>\n'
                   '{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n<|im_end|>'),
    # the prompt ends inside a delimiter: its held characters are the prompt's, never a generated chunk
    ("qwen3", "<|im_start|>assistant\n<think>\nStill thinking \n", "more.\n</think>\n\nDone.<|im_end|>"),
    ("qwen3", "<|im_start|>assistant\n<think>\nThought.\n</th", "ink>\n\nAnswer.<|im_end|>"),
]


@pytest.mark.parametrize("tokname", ["bl-special", "bl-plain", "sp-special", "sp-plain"])
def test_token_parser_in_the_serving_dialect_matches_the_text_parser(toks, tokname):
    tok = toks[tokname]
    rng = random.Random(tokname)
    cases = [(c[0], c[1], c[2], c[3], c[4]) for c in CASES]
    cases += [(n, templates.get(n), pre, out, None) for n, pre, out in MALFORMED]
    malformed_seen = 0
    for name, template, prefix, output, tools in cases:
        b = bind(template, tok)
        ids = tok.encode(output).ids
        for seq in (ids, split_into_bytes(tok, ids, rng, 0.3)):
            got = run_both(b, prefix, seq, tools)
            if isinstance(got[0], dict):  # (message, events, parser)
                malformed_seen += sum(e["type"] == "region_malformed" for e in got[1])
    assert malformed_seen >= 4  # the malformed tool calls above, each seen on both sequences


def test_parse_tokens_in_the_serving_dialect_raises_as_parse_response(toks):
    tok = toks["bl-special"]
    for name, prefix, output in MALFORMED:
        b = bind(templates.get(name), tok)
        ids = tok.encode(output).ids
        text = decode(tok, ids)
        want = outcome(lambda: chatparse.parse_response(text, templates.get(name), prefix=prefix, dialect="vllm"))
        assert outcome(lambda: parse_tokens(ids, b, prefix=prefix, dialect="vllm")) == want
        assert outcome(lambda: parse_tokens(np.asarray(ids), b, prefix=prefix, malformed="event")) == want


def test_token_spans_in_the_serving_dialect(toks):
    """With spans=True, open/close/malformed events carry token_start/token_end: the generated tokens that
    overlap [start, end) (input offsets, the cut prefix first), None inside the prompt."""
    tok = toks["bl-plain"]
    for name, prefix, output in MALFORMED[:2]:
        b = bind(templates.get(name), tok)
        ids = tok.encode(output).ids
        msg, events, p = run_both(b, prefix, ids, spans=True)
        base = len(b.compiled.tables.cut_prefix(prefix))
        ends = np.cumsum([0] + [len(decode(tok, ids[:k + 1])) - len(decode(tok, ids[:k])) for k in range(len(ids))])
        checked = 0
        for e in events:
            if "token_start" not in e:
                continue
            s, t = e["start"] - base, e["end"] - base
            if e["end"] < base or e["end"] == base and e["start"] < base:
                assert e["token_start"] is None and e["token_end"] is None
                continue
            ts, te = e["token_start"], e["token_end"]
            if t > max(s, 0):
                # exactly the tokens whose text overlaps the span
                assert ends[ts] <= max(s, 0) < ends[ts + 1] and ends[te - 1] < t <= ends[te], e
                checked += 1
        assert checked >= 3


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_templates_per_token_in_the_serving_dialect(toks, data):
    """Generated templates with values that can fail to parse: one TokenParser per text against the text
    parser, and the same texts stepped as streams (two generations, a small buffer that wraps) against the
    single parsers, all in the vllm dialect."""
    template = data.draw(gen_templates(failing=True))
    if not compiles(template):
        return
    tok = toks[data.draw(st.sampled_from(["bl-plain", "sp-plain"]))]
    b = bind(template, tok)
    texts = [data.draw(texts_for(template, extra=tuple(VALUE_PIECES))) for _ in range(2)]
    prefix = "<|A|>" + data.draw(st.sampled_from(["", "<", "a", "</", "<a"]))
    seqs = [tok.encode(t).ids for t in texts]
    for seq in seqs:
        run_both(b, prefix, seq)
    seqs = [seqs[0], seqs[1], list(seqs[0])]
    capacity = data.draw(st.sampled_from([3, 1024]))
    for _ in range(2):
        s = b.streams(len(seqs), prefix=prefix, capacity=capacity, dialect="vllm")
        singles = [b.parser(prefix=prefix, dialect="vllm") for _ in seqs]
        assert [errors_plain(e) for e in s.initial_events] == [errors_plain(p.initial_events) for p in singles]
        step_streams(s, singles, seqs)
        got = plain_outcome(s.finalize_all)
        if got[0] == "ok":
            assert got[1] == [plain_outcome(p.finalize)[1] for p in singles]
        else:
            assert got == next(o for o in (outcome(p.finalize) for p in singles) if o[0] != "ok")


def test_streams_keep_dialects_apart(toks):
    """Row tables keep learned events per dialect: streams in the default dialect after streams in the vllm
    dialect (same binding) hand out events without spans, and the other way round."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    ids = tok.encode("<think>\nA thought.\n</think>\n\nAn answer.<|im_end|>").ids
    for order in (("vllm", None), (None, "vllm")):
        for dialect in order:
            s = b.streams(3, prefix="", dialect=dialect)
            singles = [b.parser(prefix="", dialect=dialect) for _ in range(3)]
            step_streams(s, singles, [ids] * 3)
            assert s.finalize_all() == [p.finalize() for p in singles]


def test_the_lazy_path_opens_the_implicit_field_with_its_offsets(toks, monkeypatch):
    """In the serving dialect (offsets on ``region_open``), the token paths step a pending delimiter attempt
    before the implicit field has opened (an answer that starts with a tool call whose open pattern spans many
    tokens, step3's ``<steptml:invoke name="...">``, or text that only might begin one) and, where the attempt
    dies, open the field themselves with the offsets the text parser gives: every step's events equal its, and
    the tokens inside the pending attempt do not reach the character engine's decision path."""
    from chatparse.runtime.tokens import parser as token_parser

    tok = toks["bl-special"]
    b = bind(templates.get("step3"), tok)
    decided = []
    real = token_parser.TokenParser._feed_known
    monkeypatch.setattr(token_parser.TokenParser, "_feed_known",
                        lambda self, text: decided.append(text) or real(self, text))
    call = ('<｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="get_weather"><steptml:parameter '
            'name="city">Tokyo</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>')
    for prefix in ("", "<|BOT|>assistant\n"):
        for output in (call, "<｜tool_call_begin｜> not a call after all", "<steptml:inv and prose", " \n " + call):
            ids = tok.encode(output).ids
            for seq in (ids, split_into_bytes(tok, ids, random.Random(output), 0.3)):
                run_both(b, prefix, seq)
    ids = tok.encode(call).ids
    decided.clear()
    run_both(b, "<|BOT|>assistant\n", ids)
    assert len(decided) < len(ids) // 2, decided
