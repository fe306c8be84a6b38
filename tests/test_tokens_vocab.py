"""Vocabularies (issue 3): tokenizers whose decode chatparse cannot reproduce are refused, naming why;
Metaspace and clean-up tokenizers; a real vocabulary (Mistral's tekken) token by token.

Tokenizers are trained or loaded here offline (tests/token_support.py).
"""

from __future__ import annotations

import random

import pytest
from deps import need

need("tokenizers")
from tokenizers import Tokenizer, decoders, models  # noqa: E402
import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.compiler.tokens import bytes_to_unicode, vocab_for  # noqa: E402
from chatparse.runtime.tokens import _Decoder  # noqa: E402
from harness import normalize  # noqa: E402
from token_support import (CASES, check_sequence, decode, metaspace_tokenizer, tekken_tokenizer,  # noqa: E402,F401
                           token_bytes_independent)


# ------------------------------------------------------------------------------------------------ refusals
def test_refuses_unsupported_decoders():
    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    tok.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="WordPiece"):
        vocab_for(tok)
    tok2 = Tokenizer(models.BPE({"a": 0, "b": 1}, []))
    with pytest.raises(ValueError, match="no decoder"):
        vocab_for(tok2)
    tok2.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Strip(" ", 0, 1)])
    with pytest.raises(ValueError, match="Strip"):
        vocab_for(tok2)


class _SlowTokenizer:
    """A stand-in for a slow transformers tokenizer: no backend, decode only."""

    def __init__(self, pieces):
        self.pieces = pieces

    def __len__(self):
        return len(self.pieces)

    def decode(self, ids, skip_special_tokens=False):
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", "replace")


def test_refusal_names_tokens_without_derivable_bytes():
    pieces = [b"a", b"b", "中".encode()[:2], b"c", "é".encode()[:1]]
    with pytest.raises(ValueError, match=r"2 token\(s\).*ids 2, 4"):
        vocab_for(_SlowTokenizer(pieces))
    ok = _SlowTokenizer([b"a", b"b", b"<t>", b"</t>", " é".encode()])
    v = vocab_for(ok)
    assert v.decode([0, 2, 4, 3]) == "a<t> é</t>"


def test_refuses_when_decode_is_not_reproducible():
    class Spaced(_SlowTokenizer):
        def decode(self, ids, skip_special_tokens=False):
            return " ".join(self.pieces[i].decode() for i in ids)

    with pytest.raises(ValueError, match="cannot reproduce"):
        vocab_for(Spaced([b"a", b"b", b"c"]))


def test_metaspace_and_cleanup_tokenizers():
    """Metaspace decoder (first token drops its ▁) and transformers' clean_up_tokenization (streamed)."""
    need("transformers")
    from transformers import PreTrainedTokenizerFast

    tok = metaspace_tokenizer(200)
    rng = random.Random(3)
    v = vocab_for(tok)
    assert v.first_text
    size = tok.get_vocab_size()
    for _ in range(200):
        ids = [rng.randrange(size) for _ in range(rng.randint(0, 20))]
        assert v.decode(ids) == decode(tok, ids)
    b = bind(templates.get("qwen3"), tok)
    for _ in range(20):
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 40))]
        check_sequence(tok, b, "", ids, reference=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=True)
    vc = vocab_for(fast)
    assert vc.cleanup
    words = [tok.token_to_id(w) for w in ("▁.", "▁?", "▁,", "'", "▁'", "s", "▁n't") if tok.token_to_id(w)]
    bc = bind(templates.get("qwen3"), fast)
    for _ in range(60):
        ids = [rng.choice(words) if rng.random() < 0.5 else rng.randrange(size) for _ in range(rng.randint(1, 30))]
        full = fast.decode(ids)
        assert vc.decode(ids) == full
        p = bc.parser(prefix="")
        dec = _Decoder(vc)
        out = "".join(dec.feed([i]) for i in ids) + dec.finish()
        assert out == full
        events = []
        for i in ids:
            events += p.feed_tokens(i)
        msg, fin = p.finalize()
        r = chatparse.ResponseParser(templates.get("qwen3"), prefix="")
        ev2 = r.feed(full)
        m2, f2 = r.finalize()
        assert msg == m2 and normalize(events + fin) == normalize(ev2 + f2)


def test_whole_generations_decode_as_decode():
    """`TokenStreams` decodes whole generations at once for its one-shot ends (`_texts_of`: every stream's tokens
    joined over the kept ring buffers, strict UTF-8 for ByteFallback runs, the Metaspace first token, the strip
    and clean-up): `VocabBase.decode`'s text, which is the tokenizer's: byte-level, ByteFallback (byte tokens,
    special tokens skipped or kept), Metaspace (the first token's ▁), clean-up; random ids, so skipped tokens,
    byte runs and invalid UTF-8 come up; streams that start late, and a small buffer that wraps."""
    import numpy as np

    from token_support import trained_tokenizers

    need("transformers")
    from transformers import PreTrainedTokenizerFast

    from chatparse.runtime.tokens import TokenStreams

    toks = trained_tokenizers()
    meta = metaspace_tokenizer(200)
    cases = [(name, tok, tok, {}) for name, tok in toks.items()]
    cases.append(("sp-special-skip", toks["sp-special"], toks["sp-special"], {"skip_special_tokens": True}))
    cases.append(("metaspace", meta, meta, {}))
    cases.append(("metaspace+cleanup", meta, PreTrainedTokenizerFast(tokenizer_object=meta,
                                                                     clean_up_tokenization_spaces=True), {}))
    vocabs = [bind(templates.get("qwen3"), bindable, **opts).vocab for _, _, bindable, opts in cases]
    assert any(v.first_text for v in vocabs) and any(v.cleanup for v in vocabs)
    assert any(v.has_bytes_tokens for v in vocabs) and any(v.kind == "bytes" for v in vocabs)
    assert any(v.skip.any() for v in vocabs)
    rng = random.Random(7)
    for (name, tok, bindable, opts), v in zip(cases, vocabs):
        b = bind(templates.get("qwen3"), bindable, **opts)
        texts = [c[3] for c in CASES] + ["中文😀 café <think>\n</think>", "  a  b", ""]
        seqs = [tok.encode(t).ids for t in texts]
        seqs += [[rng.randrange(v.size) for _ in range(rng.randint(0, 30))] for _ in range(60)]
        seqs += [[rng.randrange(3)] + q for q in seqs[-20:]]  # (ids 0-2: the trained tokenizers' first specials)
        start = [rng.randint(0, 5) for _ in seqs]
        s = TokenStreams(b, len(seqs), prefix="", capacity=7)
        for k in range(max(st + len(q) for st, q in zip(start, seqs))):
            act = np.array([0 <= k - st < len(q) for st, q in zip(start, seqs)])
            ids = np.array([q[k - st] if a else 0 for st, q, a in zip(start, seqs, act)])
            s.step(ids, active=act, events=False)
        got = s._texts_of(list(range(len(seqs))))
        for ids, text in zip(seqs, got):
            want = v.decode(ids)
            assert text == want, (name, ids)
            if name.endswith("-skip"):
                assert want == tok.decode(ids, skip_special_tokens=True), (name, ids)
            elif name != "metaspace+cleanup":
                assert want == decode(tok, ids), (name, ids)


def test_tekken_real_vocabulary():
    tok = tekken_tokenizer()
    v = vocab_for(tok)
    assert v.kind == "bytes" and v.size >= 131072
    partial = [i for i, t in enumerate(v.tok_text) if t is None]
    assert len(partial) > 500  # about 1% of the vocabulary is not valid UTF-8 on its own
    rng = random.Random(2)
    for _ in range(100):
        ids = [rng.choice(partial) if rng.random() < 0.3 else rng.randrange(v.size) for _ in range(30)]
        assert v.decode(ids) == decode(tok, ids)
    for name, template, prefix, output, tools, cid in CASES[::4]:
        b = bind(template, tok)
        ids = tok.encode(output, add_special_tokens=False).ids
        check_sequence(tok, b, prefix, ids, tools)
        check_sequence(tok, b, prefix, split_into_bytes_tekken(tok, ids, rng), tools, reference=False)
    b = bind(templates.get("mistral_v11"), tok)
    for _ in range(5):
        ids = [rng.choice(partial) if rng.random() < 0.3 else rng.randrange(v.size) for _ in range(50)]
        check_sequence(tok, b, "", ids, reference=False)


def split_into_bytes_tekken(tok, ids, rng):
    enc = bytes_to_unicode()
    byte_id = {b: tok.token_to_id(enc[b]) for b in range(256)}
    out = []
    for i in ids:
        bs = token_bytes_independent(tok, i)
        if rng.random() < 0.3 and len(bs) > 1 and all(byte_id[b] is not None for b in bs):
            out.extend(byte_id[b] for b in bs)
        else:
            out.append(i)
    return out
