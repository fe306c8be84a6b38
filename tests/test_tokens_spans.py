"""Token spans (issue 3, ``spans=True``): every region and delimiter's character offsets in the decoded
generation and the token indexes that produced them, split characters included.

Tokenizers are trained here offline (tests/token_support.py).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from deps import need

need("tokenizers")
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.runtime.tokens import parse_tokens  # noqa: E402
from token_support import (CASES, decode, run_tokens, split_into_bytes, token_bytes_independent, toks)


# ------------------------------------------------------------------------------------------------ spans
def _char_bytes(text):
    """byte offset of each char of valid UTF-8 text, plus the end."""
    out, pos = [], 0
    for ch in text:
        out.append(pos)
        pos += len(ch.encode())
    out.append(pos)
    return out


def test_spans(toks):
    for tokname in ("bl-special", "bl-plain", "sp-special"):
        tok = toks[tokname]
        for name, template, prefix, output, tools, cid in CASES:
            b = bind(template, tok)
            ids = tok.encode(output).ids
            try:
                msg, events, released, p = run_tokens(b, prefix, ids, tools, spans=True)
            except (ValueError, KeyError, TypeError):
                continue
            assert msg == b.parse(ids, prefix=prefix, tools=tools)
            one_msg, one_spans = b.parse(ids, prefix=prefix, tools=tools, spans=True)
            assert one_msg == msg and one_spans == p.spans
            full = decode(tok, ids)
            # region bodies are exactly the concatenated chunks; delimiters sit right around them
            bodies = {}
            current = []
            for ev in events:
                if ev["type"] == "region_open":
                    current = []
                elif ev["type"] == "region_chunk":
                    current.append(ev["text"])
                elif ev["type"] == "region_close":
                    rec = ev["span"]
                    assert rec["field"] == ev["field"]
                    if rec["body"] is not None and rec["body"]["chars"][0] > 0:
                        cs, ce = rec["body"]["chars"]
                        assert full[cs:ce] == "".join(current), (cid, rec)
                    if rec["open"] is not None and rec["body"] is not None:
                        assert rec["open"]["chars"][1] == rec["body"]["chars"][0]
                    if rec["close"] is not None and rec["body"] is not None:
                        assert rec["close"]["chars"][0] == rec["body"]["chars"][1]
            assert [r["field"] for r in p.spans] == [e["field"] for e in events if e["type"] == "region_close"
                                                    and "span" in e]
            # token ranges: the tokens hold the first and last byte of the characters
            if tokname.startswith("bl") and "\ufffd" not in full:
                cb = _char_bytes(full)
                tstart = np.cumsum([0] + [len(token_bytes_independent(tok, i)) for i in ids])
                for rec in p.spans:
                    for part in ("open", "body", "close"):
                        sp = rec[part]
                        if sp is None or sp["chars"][0] == sp["chars"][1]:
                            continue
                        (cs, ce), (ts, te) = sp["chars"], sp["tokens"]
                        assert tstart[ts] <= cb[cs] < tstart[ts + 1], (cid, part, sp)
                        assert tstart[te - 1] <= cb[ce] - 1 < tstart[te], (cid, part, sp)


def test_spans_mask_reasoning_tokens(toks):
    tok = toks["bl-special"]
    template = templates.get("qwen3")
    text = ("<think>\nreasoning 中文 here\n</think>\n\nanswer text<tool_call>\n"
            '{"name": "f", "arguments": {}}\n</tool_call><|im_end|>')
    ids = tok.encode(text).ids
    msg, spans = parse_tokens(ids, bind(template, tok), prefix="", spans=True)
    fields = [s["field"] for s in spans]
    assert fields == ["reasoning_content", "content", "tool_calls"]
    ts, te = spans[0]["body"]["tokens"]
    assert decode(tok, ids[ts:te]).strip() == "reasoning 中文 here"
    ts, te = spans[2]["body"]["tokens"]
    assert '"name": "f"' in decode(tok, ids[ts:te])
    assert spans[0]["open"]["tokens"] == (0, 1)


def test_spans_with_split_characters(toks):
    """A character split across tokens belongs to the tokens holding its first and last byte."""
    tok = toks["bl-plain"]
    template = {"start_anchor": "<a>", "fields": {"x": {"open": "<x>", "close": "</x>"}}}
    ids = split_into_bytes(tok, tok.encode("<x>中文😀</x>").ids, random.Random(0), rate=1.0)
    msg, spans = parse_tokens(ids, bind(template, tok), prefix="", spans=True)
    assert msg["x"] == "中文😀"
    body = spans[0]["body"]
    assert body["chars"] == (3, 6)
    ts, te = body["tokens"]
    assert decode(tok, ids[ts:te]) == "中文😀"
