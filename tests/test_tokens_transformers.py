"""transformers glue for token IDs (issue 3): parsing with a transformers tokenizer as transformers'
own `parse_response` does, and streaming from `generate` through a streamer.

Tokenizers are trained here offline (tests/token_support.py).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from deps import need

need("tokenizers")
import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from harness import normalize  # noqa: E402
from token_support import (CASES, toks)  # noqa: E402,F401


# ------------------------------------------------------------------------------------------------ transformers
@pytest.fixture(scope="module")
def hf_tok(toks):
    need("transformers")
    from transformers import PreTrainedTokenizerFast

    t = PreTrainedTokenizerFast(tokenizer_object=copy.deepcopy(toks["bl-special"]), eos_token="<|im_end|>")
    t.response_template = templates.get("qwen3")
    return t


def test_tokenizer_parse_response_mirrors_transformers(hf_tok):
    from chatparse.integrations.transformers import get_response_parser, parse_response

    outs = [o for n, _, _, o, _, _ in CASES if n == "qwen3"][:4]
    prompts = [p for n, _, p, _, _, _ in CASES if n == "qwen3"][:4]
    ids = [hf_tok.encode(o) for o in outs]
    pids = [hf_tok.encode(p) for p in prompts]
    for resp in (outs[0], ids[0], np.array(ids[0]), outs, ids, [ids[0]], [outs[0]], []):
        for prefix in ("", prompts[0], pids[0], np.array(pids[0]), []):
            assert parse_response(hf_tok, resp, prefix=prefix) == hf_tok.parse_response(resp, prefix=prefix)
    assert parse_response(hf_tok, ids, prefix=prompts) == hf_tok.parse_response(ids, prefix=prompts)
    assert parse_response(hf_tok, ids, prefix=pids) == hf_tok.parse_response(ids, prefix=pids)
    n = min(map(len, ids))
    arr = np.array([x[:n] for x in ids])
    parr = np.array([x[:min(map(len, pids))] for x in pids])
    assert parse_response(hf_tok, arr, prefix=parr) == hf_tok.parse_response(arr, prefix=parr)
    assert parse_response(hf_tok, arr, prefix="") == hf_tok.parse_response(arr, prefix="")
    with pytest.raises(ValueError):
        parse_response(hf_tok, ids, prefix=prompts[:2])
    with pytest.raises(ValueError):
        parse_response(hf_tok, ids[0])
    schema = templates.get("hermes")
    assert parse_response(hf_tok, ids[0], schema, prefix="") == hf_tok.parse_response(ids[0], schema, prefix="")
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
    tc = hf_tok.encode('<tool_call>\n{"name": "get_weather", "arguments": {"city": "X", "days": "3"}}\n</tool_call>')
    assert parse_response(hf_tok, tc, prefix="", tools=tools) == hf_tok.parse_response(tc, prefix="", tools=tools)
    p = get_response_parser(hf_tok, prefix=pids[1])
    r = hf_tok.get_response_parser(prefix=pids[1])
    assert p.initial_events == r.initial_events
    with pytest.raises(ValueError):
        get_response_parser(hf_tok)
    from transformers import PreTrainedTokenizerFast

    bare = PreTrainedTokenizerFast(tokenizer_object=hf_tok.backend_tokenizer)
    with pytest.raises(AttributeError):
        parse_response(bare, ids[0], prefix="")
    try:
        import torch
    except ImportError:
        return
    t = torch.tensor(ids[0])
    assert parse_response(hf_tok, t, prefix=torch.tensor(pids[0])) == hf_tok.parse_response(t, prefix=pids[0])


def test_streamer_with_generate(hf_tok):
    torch = need("torch")
    from transformers import GPT2Config, GPT2LMHeadModel

    from chatparse.integrations.transformers import ChatParseStreamer, parse_response

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(hf_tok), n_positions=256, n_embd=32, n_layer=1, n_head=2,
                     eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.eos_token_id)
    model = GPT2LMHeadModel(cfg).eval()
    prompt = hf_tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", return_tensors="pt")
    streamer = ChatParseStreamer(hf_tok)
    out = model.generate(prompt, max_new_tokens=60, do_sample=True, streamer=streamer,
                         attention_mask=torch.ones_like(prompt))
    gen = out[0, prompt.shape[1]:]
    assert streamer.message == parse_response(hf_tok, gen, prefix=prompt[0])
    assert streamer.message == hf_tok.parse_response(gen, prefix=prompt[0])
    r = chatparse.ResponseParser(hf_tok.response_template, prefix=hf_tok.decode(prompt[0]))
    ev = r.initial_events + r.feed(hf_tok.decode(gen))
    m, f = r.finalize()
    assert normalize(list(streamer)) == normalize(ev + f) == normalize(streamer.events)
    # batched generation: each stream stops at its EOS
    prompts = hf_tok(["<|im_start|>assistant\n", "<|im_start|>assistant\n<think>\n"], return_tensors="pt",
                     padding=True) if hf_tok.pad_token else None
    if prompts is None:
        hf_tok.pad_token = hf_tok.eos_token
        prompts = hf_tok(["<|im_start|>assistant\n", "<|im_start|>assistant\n<think>\n"], return_tensors="pt",
                         padding=True)
    bs = ChatParseStreamer(hf_tok)
    out = model.generate(**prompts, max_new_tokens=40, do_sample=True, streamer=bs)
    L = prompts["input_ids"].shape[1]
    for j in range(2):
        gen = out[j, L:].tolist()
        if hf_tok.eos_token_id in gen:
            gen = gen[:gen.index(hf_tok.eos_token_id) + 1]
        assert bs.messages[j] == parse_response(hf_tok, gen, prefix=prompts["input_ids"][j])
