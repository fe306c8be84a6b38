"""The dialect switch itself: presets, keyword overrides, and clear errors naming the argument."""

from __future__ import annotations

import pytest

import chatparse
from chatparse import templates
from chatparse.runtime.stream.dialect import TRANSFORMERS, VLLM, resolve

PROMPT = "<|im_start|>assistant\n<think>\n"
TEXT = "a</think>\n\nb<tool_call>\n{bad}\n</tool_call>c"


def test_presets_and_overrides():
    assert resolve() is TRANSFORMERS and resolve("transformers") is TRANSFORMERS and resolve("vllm") is VLLM
    d = resolve("vllm", malformed="raise")
    assert d.offsets and d.malformed == "raise" and not d.prompt_chunks and d.name == "custom"
    assert resolve(offsets=True).offsets and resolve(offsets=True).malformed == "raise"
    assert resolve("vllm", offsets=True) is VLLM  # nothing changed


@pytest.mark.parametrize("kwargs, error, words", [
    ({"dialect": "openai"}, ValueError, "dialect must be"),
    ({"dialect": 3}, TypeError, "dialect must be"),
    ({"malformed": "skip"}, ValueError, "malformed must be"),
    ({"offsets": "yes"}, TypeError, "offsets must be a bool"),
])
def test_bad_options_name_the_argument(kwargs, error, words):
    with pytest.raises(error, match=words):
        chatparse.ResponseParser(templates.get("qwen3"), prefix="", **kwargs)


def test_each_option_alone():
    t = templates.get("qwen3")
    events = chatparse.ResponseParser(t, prefix=PROMPT, offsets=True).feed(TEXT[:12])
    assert events[0]["type"] == "region_chunk" and all("start" in e for e in events if e["type"] != "region_chunk")
    p = chatparse.ResponseParser(t, prefix=PROMPT, malformed="event")
    events = p.feed(TEXT)
    bad = [e for e in events if e["type"] == "region_malformed"]
    assert len(bad) == 1 and set(bad[0]) == {"type", "field", "error"}  # no spans without offsets
    assert p.finalize()[0]["content"] == "b\n\nc"  # (the text on both sides of the call: qwen3's content joins)
    with pytest.raises(AttributeError, match="input_text"):
        _ = p.input_text
    with pytest.raises(ValueError):  # the default raises at the bad body, as transformers does
        chatparse.ResponseParser(t, prefix=PROMPT).feed(TEXT)
