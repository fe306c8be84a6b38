"""`TokenStreams` creates a parser per stream and, at the end, every stream's message with the cyclic
garbage collector paused (`runtime.collector.collector_paused`): those containers are not garbage, and the
collections they would set off (one per 700 new containers; every tenth of those, and then every tenth of
those, walks older generations, up to every object of the process) cost more than making the streams. The
collector is back as it was after."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from deps import need

need("tokenizers")
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.runtime.tokens import TokenStreams  # noqa: E402
from token_support import toks  # noqa: E402,F401


@pytest.fixture
def collections():
    """The generations of the collections that start while the fixture is live."""
    seen = []

    def cb(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(cb)
    try:
        yield seen
    finally:
        gc.callbacks.remove(cb)


def test_creating_and_finalizing_many_streams_sets_off_no_collection(toks, collections):
    b = bind(templates.get("qwen3"), toks["bl-special"])
    ids = toks["bl-special"].encode('<think>\nwhy not\n</think>\n\nBecause.<tool_call>\n{"name": "f", '
                                    '"arguments": {"a": [1, {"b": 2}]}}\n</tool_call>').ids
    gc.collect()
    collections.clear()
    s = TokenStreams(b, 400, prefix="")  # thousands of new containers: a collection per 700 without the pause
    # (at most the one young collection the paused allocations owe when the collector is back)
    assert len(collections) <= 1 and gc.isenabled()
    for i in ids:
        s.step(np.full(400, i))
    collections.clear()
    out = s.finalize_all()
    assert len(collections) <= 1 and gc.isenabled()
    assert out[0][0]["content"] == "Because." and out[0] == out[-1]
    assert out[0][0]["tool_calls"][0]["function"]["arguments"] == {"a": [1, {"b": 2}]}


def test_the_collector_stays_off_when_it_was_off(toks):
    b = bind(templates.get("qwen3"), toks["bl-special"])
    gc.disable()
    try:
        s = TokenStreams(b, 3, prefix="")
        assert not gc.isenabled()
        s.finalize_all()
        assert not gc.isenabled()
    finally:
        gc.enable()
