"""`probe` (and `StreamParser.fork` under it): "what if this text came now", without changing the parser.

Claims under test, for generated templates and texts, in both dialects, on the text parser and the token
parser: `probe(x)` returns exactly the events `feed(x)` would return at that point, and a parser that was
probed goes on exactly as one that was not (same events, same message or error, same `held_from`).
"""

from __future__ import annotations

import pytest
from deps import need
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import chatparse
from harness import normalize
from strategies import compiles, templates, texts_for

ERRORS = (ValueError, KeyError, TypeError, RuntimeError)


def _events_or_error(step, text):
    try:
        return normalize(step(text))
    except ERRORS as e:  # a region the text closes may fail to parse (transformers' dialect raises)
        return ("error", type(e).__name__, str(e))


def _run(make, chunks, probes):
    """Feed `chunks` to a fresh parser, probing with `probes[k]` before chunk k (None: no probe). Returns the
    probes' events (or errors: a probe that fails leaves the parser as it was), then the fed events, the message and `held_from` after each chunk (or the error)."""
    seen, events, held = [], [], []
    try:
        p = make()
        events += p.initial_events
        for chunk, probe in zip(chunks, probes):
            if probe is not None:
                seen.append(_events_or_error(p.probe, probe))
            events += p.feed(chunk)
            held.append(p.held_from)
        msg, final = p.finalize()
        events += final
    except ERRORS as e:
        return seen, ("error", type(e).__name__, str(e))
    return seen, ("ok", msg, normalize(events), held)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_probe_is_feed_without_changing_the_parser(data):
    template = data.draw(templates(failing=True))
    assume(compiles(template))
    compiled = chatparse.compile_template(template)
    text = data.draw(texts_for(template))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(text))), max_size=5))))
    chunks = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
    probes = [data.draw(st.sampled_from(["\0", "<", "x", "a>", "\n"])) for _ in chunks]
    dialect = data.draw(st.sampled_from(["transformers", "vllm"]))

    def make():
        return chatparse.ResponseParser(compiled, prefix="<|A|>", dialect=dialect)

    seen, probed = _run(make, chunks, probes)
    assert _run(make, chunks, [None] * len(chunks))[1] == probed
    # each probe's events are those of feeding the probe text at that point
    for k, events in enumerate(seen):
        p = make()
        for c in chunks[:k]:
            p.feed(c)
        assert _events_or_error(p.feed, probes[k]) == events


def test_token_parser_probe_matches_feed_and_leaves_it_unchanged():
    tokenizers = need("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = "<think>\nthe weather in Paris</think>\n\nIt is sunny. <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"
    tok.train_from_iterator([text] * 5, trainer=trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok)
    assert tokenizers.__version__
    from chatparse import templates as templates_lib

    binding = chatparse.bind(templates_lib.get("qwen3"), hf)
    ids = hf.encode(text, add_special_tokens=False)
    for dialect in ("transformers", "vllm"):
        probed = binding.parser(prefix="", dialect=dialect)
        plain = binding.parser(prefix="", dialect=dialect)
        for k, i in enumerate(ids):
            other = binding.parser(prefix="", dialect=dialect)
            other.feed_tokens(ids[:k])
            want = other.feed("\0")
            assert normalize(probed.probe("\0")) == normalize(want), k
            assert normalize(probed.feed_tokens(i)) == normalize(plain.feed_tokens(i)), k
            assert probed.held_from == plain.held_from
        assert probed.finalize() == plain.finalize()
