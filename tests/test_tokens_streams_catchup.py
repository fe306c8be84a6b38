"""`TokenStreams._catch_up_all` (at a ring-buffer wrap and at `finalize_all`) hands every stream's parser the
tokens the row tables took since that parser last ran: a block of streams at a time, the streams sorted by
that step, each block gathering from the earliest step one of its streams needs. Streams here run their
parsers at different steps (region changes at different places, some streams inactive or finished early),
over more streams than one block holds, so blocks are not runs of consecutive streams and start at
different steps; every stream's message and events must be its own TokenParser's."""

from __future__ import annotations

import random

import numpy as np
import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

need("tokenizers")
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.runtime.tokens import TokenStreams  # noqa: E402
from token_support import outcome, toks  # noqa: E402,F401

WORDS = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "café", "中文", "😀", "a<b", "\n"]


def generation(rng: random.Random, name: str) -> str:
    def words(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))
    think = rng.randint(0, 40)
    calls = "".join(f'{words(rng.randint(0, 6))}<tool_call>\n{{"name": "f", "arguments": {{"x": {k}}}}}\n'
                    f'</tool_call>' for k in range(rng.randint(0, 2)))
    if name == "gpt_oss":
        return f"<|channel|>analysis<|message|>{words(think)}<|end|><|start|>assistant<|channel|>final<|message|>" \
               f"{words(rng.randint(0, 40))}<|return|>"
    return f"<think>\n{words(think)}\n</think>\n\n{calls}{words(rng.randint(0, 40))}<|im_end|>"


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 32 - 1), name=st.sampled_from(["qwen3", "gpt_oss"]),
       tokname=st.sampled_from(["bl-special", "sp-plain"]), capacity=st.sampled_from([7, 16, 64]),
       B=st.integers(33, 80))
def test_catch_up_all_over_blocks_of_streams_that_ran_at_different_steps(toks, seed, name, tokname, capacity, B):
    rng = random.Random(seed)
    tok = toks[tokname]
    b = bind(templates.get(name), tok)
    seqs = [tok.encode(generation(rng, name)).ids for _ in range(B)]
    start = [rng.randint(0, 20) for _ in range(B)]  # inactive before: region changes fall at different steps
    early = set(rng.sample(range(B), B // 4))  # finalized as soon as they end (the others by finalize_all)
    s = TokenStreams(b, B, prefix="", capacity=capacity)
    singles = [b.parser(prefix="") for _ in range(B)]
    assert s.initial_events == [p.initial_events for p in singles]
    done = [False] * B
    for k in range(max(start[j] + len(seqs[j]) for j in range(B))):
        act = np.array([not done[j] and 0 <= k - start[j] < len(seqs[j]) for j in range(B)])
        ids = np.array([seqs[j][k - start[j]] if act[j] else 0 for j in range(B)])
        out = s.step(ids, active=act)
        for j in range(B):
            want = outcome(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", [])
            assert outcome(lambda: out[j]) == want, (j, k)
            if j in early and k - start[j] == len(seqs[j]) - 1:
                done[j] = True
                assert outcome(lambda: s.finalize(j)) == outcome(singles[j].finalize), j
    got = outcome(s.finalize_all)
    want = [None if j in early else outcome(singles[j].finalize) for j in range(B)]
    if got[0] == "ok":
        assert [None if r is None else ("ok", r) for r in got[1]] == want
    else:  # (finalize_all raises the first failing stream's exception)
        assert got == next(w for w in want if w is not None and w[0] != "ok")
