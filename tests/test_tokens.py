"""Parsing token IDs (issue 3): token tables, incremental decoding, spans, many streams, transformers glue.

Real tokenizers only, built here offline with the `tokenizers` library: byte-level BPE and SentencePiece-style
(byte_fallback) models trained on the shared format corpus (or on built-in samples when it is absent), once
with the templates' delimiters as special tokens and once without, so that delimiters split across ordinary
tokens. The property under test: feeding token ids gives exactly the events and message that feeding the
tokenizer's own decode of those ids gives - to chatparse.ResponseParser (step by step) and to the
transformers reference (on the whole decoded text).
"""

from __future__ import annotations

import copy
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.compiler.tokens import bind, bytes_to_unicode, vocab_for  # noqa: E402
from chatparse.runtime.tokens import (TokenParser, TokenStreams, _Decoder, parse_tokens,  # noqa: E402
                                      parse_tokens_batch)
from harness import RefTimeout, normalize, run_reference  # noqa: E402

import corpus_cases  # noqa: E402

# ------------------------------------------------------------------------------------------------------ data
# Built-in generations, used alongside the corpus (and alone when the corpus is not checked out).
SAMPLES = {
    "qwen3": [
        ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
         "<think>\nLet me think 中文 😀 about naïve café.\n</think>\n\nThe answer is 42 — ünïcødé ✓.\n"
         '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris, 東京"}}\n</tool_call><|im_end|>'),
        ("<|im_start|>assistant\n<think>\n", "Short 🚀 thought.</think>Plain answer.<|im_end|>"),
        ("", "no delimiters at all, just text with   spaces\n\n and 🎉 emoji"),
    ],
    "gpt_oss": [
        ("<|start|>user<|message|>Weather?<|end|><|start|>assistant",
         "<|channel|>analysis<|message|>Need the tool — ok 😀.<|end|><|start|>assistant<|channel|>commentary "
         'to=functions.get_weather <|constrain|>json<|message|>{"city": "Zürich"}<|call|>'),
        ("<|start|>assistant", "<|channel|>final<|message|>It is 20°C in Zürich.<|return|>"),
    ],
    "deepseek_r1": [
        ("", "I need to think about this... 思考</think>The answer is 42.<｜end▁of▁sentence｜>"),
    ],
    "hermes": [
        ("", 'Sure!\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n<|im_end|>'),
    ],
}

SPECIAL_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|</?[A-Za-z_][\w:-]{0,30}>|\[/?[A-Z_]{2,20}\]"
                        r"|<\|[a-z_]{1,20}>|<[a-z_]{1,20}\|>")
FILLER = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "中文", "日本語", "😀", "🚀", "é", "ü",
          "naïve", "café", "Ελληνικά", "русский", '{"name": "f"}', "\n", "  ", "—", "✓", "1.5", "true", "𝔘𝔫𝔦"]


def load_cases():
    corp, _ = corpus_cases.load()
    cases = []
    if corp is not None:
        for c in corp.cases:
            cases.append((c.name, corp.templates[c.name], c.prefix, c.output, c.tools, c.id))
    for name, items in SAMPLES.items():
        for k, (prefix, output) in enumerate(items):
            cases.append((name, templates.get(name), prefix, output, None, f"{name}-sample{k}"))
    return cases


CASES = load_cases()


def training_text(seed=0):
    rng = random.Random(seed)
    texts = []
    for _, _, prefix, output, _, _ in CASES:
        texts += [prefix, output] * 3
    for _ in range(300):
        texts.append("".join(rng.choice(FILLER) + rng.choice([" ", "", "\n"]) for _ in range(rng.randint(5, 25))))
    return texts


def special_strings():
    found = set()
    for _, _, prefix, output, _, _ in CASES:
        found.update(SPECIAL_RE.findall(prefix + output))
    return sorted(found)


# ------------------------------------------------------------------------------------------------ tokenizers
def byte_level_tokenizer(specials, vocab_size=900):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=list(specials), show_progress=False)
    tok.train_from_iterator(training_text(), trainer=tr)
    return tok


def sentencepiece_tokenizer(specials, vocab_size=700):
    """Llama/Mistral-style: ▁ for spaces, <0xXX> byte fallback, Replace+ByteFallback+Fuse+Strip decoder."""
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tr = trainers.BpeTrainer(vocab_size=vocab_size, limit_alphabet=40, show_progress=False,
                             special_tokens=[f"<0x{b:02X}>" for b in range(256)] + list(specials))
    tok.train_from_iterator(training_text(), trainer=tr)
    return tok


def metaspace_tokenizer(vocab_size: int):
    """Unigram + Metaspace, trained here (the first token of a text drops its ▁)."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tr = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=["<think>", "</think>", "<|im_end|>"],
                                 show_progress=False)
    tok.train_from_iterator(training_text(), trainer=tr)
    return tok


def trained_tokenizers() -> dict:
    """The tokenizers the token tests run on, trained here: byte-level BPE and SentencePiece-style byte
    fallback, each with the delimiters as special tokens and without them."""
    specials = special_strings()
    return {
        "bl-special": byte_level_tokenizer(specials),
        "bl-plain": byte_level_tokenizer([]),
        "sp-special": sentencepiece_tokenizer(specials),
        "sp-plain": sentencepiece_tokenizer([]),
    }


@pytest.fixture(scope="module")
def toks():
    return trained_tokenizers()


def decode(tok, ids):
    return tok.decode(list(ids), skip_special_tokens=False)


# ------------------------------------------------------------------------------------------------ id sequences
def token_bytes_independent(tok, i):
    """A token's bytes, derived here without chatparse (GPT-2 byte map / <0xXX> / ▁)."""
    s = tok.id_to_token(i)
    if type(tok.decoder).__name__ == "ByteLevel":
        inv = {c: b for b, c in bytes_to_unicode().items()}
        return bytes(inv[c] for c in s) if all(c in inv for c in s) else s.encode()
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", s)
    return bytes([int(m.group(1), 16)]) if m else s.replace("▁", " ").encode()


def split_into_bytes(tok, ids, rng, rate=0.3):
    """Replace some tokens by their single-byte tokens: multi-byte characters then span several tokens."""
    vocab = tok.get_vocab()
    if type(tok.decoder).__name__ == "ByteLevel":
        enc = bytes_to_unicode()
        byte_id = {b: vocab.get(enc[b]) for b in range(256)}
    else:
        byte_id = {b: vocab.get(f"<0x{b:02X}>") for b in range(256)}
    out = []
    for i in ids:
        bs = token_bytes_independent(tok, i)
        if rng.random() < rate and len(bs) > 1 and all(byte_id.get(b) is not None for b in bs):
            out.extend(byte_id[b] for b in bs)
        else:
            out.append(i)
    return out


def mutate(tok, ids, rng, n=4):
    """Insert random tokens (any id, including lone UTF-8 bytes and special tokens)."""
    out = list(ids)
    size = tok.get_vocab_size()
    for _ in range(rng.randint(1, n)):
        out.insert(rng.randint(0, len(out)), rng.randrange(size))
    return out


# ------------------------------------------------------------------------------------------------ the oracle
BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")


def oracle_deltas(tok, ids):
    """Text chunks from `tokenizer.decode(ids_so_far)` alone: feed what decode shows, minus what may still
    change (a trailing U+FFFD for byte-level; the trailing run of <0xXX> tokens for ByteFallback); the rest
    at the end."""
    fed = ""
    out = []
    fallback = "ByteFallback" in str(tok.decoder.__getstate__())
    for k in range(1, len(ids) + 1):
        j = k
        if fallback:
            while j > 0 and BYTE_TOKEN.fullmatch(tok.id_to_token(ids[j - 1]) or ""):
                j -= 1
        d = decode(tok, ids[:j]).rstrip("\ufffd") if not fallback else decode(tok, ids[:j])
        if d.startswith(fed) and len(d) > len(fed):
            out.append(d[len(fed):])
            fed = d
        else:
            out.append("")
    full = decode(tok, ids)
    assert full.startswith(fed)
    out.append(full[len(fed):])
    return out


def run_tokens(binding, prefix, ids, tools=None, spans=False):
    """Feed ids one at a time; also check each step against ResponseParser fed with the released text."""
    p = binding.parser(prefix=prefix, tools=tools, spans=spans)
    dec = _Decoder(binding.vocab)
    ref = chatparse.ResponseParser(binding.compiled, prefix=prefix, tools=tools)
    assert strip_spans(p.initial_events) == ref.initial_events
    events = list(p.initial_events)
    released = ""
    for k, i in enumerate(ids):
        delta = dec.feed([i])
        released += delta
        got = p.feed_tokens(i)
        want = ref.feed(delta)
        assert strip_spans(got) == want, (k, i, delta)
        events += got
    rest = dec.finish()
    released += rest
    msg, final = p.finalize()
    ref.feed(rest)
    want_msg, want_final = ref.finalize()
    assert msg == want_msg
    events += final
    return msg, events, released, p


def strip_spans(events):
    return [{k: v for k, v in e.items() if k not in ("open", "span")} for e in events]


def check_sequence(tok, binding, prefix, ids, tools=None, reference=True):
    full = decode(tok, ids)
    try:
        msg, events, released, _ = run_tokens(binding, prefix, ids, tools)
    except (ValueError, KeyError, TypeError) as e:  # a bad body: the text parser must fail the same way
        with pytest.raises(type(e)):
            r = chatparse.ResponseParser(binding.compiled, prefix=prefix, tools=tools)
            r.feed(full)
            r.finalize()
        return
    assert released == full
    # the same as feeding decode(ids_so_far) incrementally
    r = chatparse.ResponseParser(binding.compiled, prefix=prefix, tools=tools)
    ev2 = list(r.initial_events)
    for chunk in oracle_deltas(tok, ids):
        ev2 += r.feed(chunk)
    m2, f2 = r.finalize()
    assert msg == m2
    assert normalize(events) == normalize(ev2 + f2)
    # one-shot from ids, numpy ids, and the transformers reference on the decoded text
    assert binding.parse(ids, prefix=prefix, tools=tools) == msg
    assert binding.parse(np.asarray(ids, dtype=np.int64), prefix=prefix, tools=tools) == msg
    if reference:
        try:
            ref = run_reference(binding.compiled.template, full, prefix, tools)
        except RefTimeout:
            return
        if ref[0] == "ok":
            assert ref[1] == msg
            assert ref[2] == normalize(events)


# ================================================================================================== tests
def test_vocab_matches_tokenizer_decode(toks):
    rng = random.Random(1)
    for name, tok in toks.items():
        v = vocab_for(tok)
        assert v.kind == ("bytes" if name.startswith("bl") else "pieces")
        size = tok.get_vocab_size()
        for _ in range(200):
            ids = [rng.randrange(size) for _ in range(rng.randint(0, 30))]
            assert v.decode(ids) == decode(tok, ids), ids
        v2 = vocab_for(tok, skip_special_tokens=True)
        for _ in range(50):
            ids = [rng.randrange(size) for _ in range(rng.randint(0, 30))]
            assert v2.decode(ids) == tok.decode(ids, skip_special_tokens=True)


def test_partial_utf8_tokens_exist(toks):
    """The byte-level vocab holds tokens that are not valid UTF-8 on their own; they get no standalone text."""
    v = vocab_for(toks["bl-plain"])
    partial = [i for i, t in enumerate(v.tok_text) if t is None]
    assert partial
    for i in partial[:20]:
        with pytest.raises(UnicodeDecodeError):
            v.tok_bytes[i].decode("utf-8")
    sp = vocab_for(toks["sp-plain"])
    assert sp.has_bytes_tokens


@pytest.mark.parametrize("split", [False, True])
def test_incremental_decode_is_stable_and_exact(toks, split):
    """Released text is always a prefix of decode(ids_so_far) and of the final decode; only an incomplete
    character (byte-level) or the current byte run (SentencePiece) is held; never an early U+FFFD."""
    rng = random.Random(7)
    for name, tok in toks.items():
        v = vocab_for(tok)
        size = tok.get_vocab_size()
        for trial in range(30):
            text = CASES[rng.randrange(len(CASES))][3]
            ids = tok.encode(text).ids
            ids = split_into_bytes(tok, ids, rng, 0.5) if split else mutate(tok, ids, rng)
            full = decode(tok, ids)
            dec = _Decoder(v)
            released = ""
            run = 0
            for k, i in enumerate(ids):
                released += dec.feed([i])
                d_k = decode(tok, ids[: k + 1])
                assert d_k.startswith(released) and full.startswith(released), (name, k)
                held = d_k[len(released):]
                if v.kind == "bytes":
                    assert held in ("", "\ufffd"), (name, k, held)
                else:
                    run = run + 1 if v.byte_val[i] >= 0 else 0
                    assert len(held) <= run, (name, k, held)
            released += dec.finish()
            assert released == full
        assert size > 256


@pytest.mark.parametrize("tokname", ["bl-special", "bl-plain", "sp-special", "sp-plain"])
def test_feed_tokens_equals_text_parse(toks, tokname):
    """Per case: encoded ids, ids with characters split over single-byte tokens, and ids with random tokens
    inserted. Step-by-step events equal ResponseParser's on the released text; normalized events and message
    equal feeding decode(ids_so_far) and the transformers reference on the full decode."""
    tok = toks[tokname]
    rng = random.Random(hash(tokname) & 0xFFFF)
    for name, template, prefix, output, tools, cid in CASES:
        b = bind(template, tok)
        ids = tok.encode(output).ids
        check_sequence(tok, b, prefix, ids, tools)
        check_sequence(tok, b, prefix, split_into_bytes(tok, ids, rng), tools, reference=False)
        check_sequence(tok, b, prefix, mutate(tok, ids, rng), tools, reference=rng.random() < 0.3)


def test_random_token_soup(toks):
    """Arbitrary id sequences (invalid UTF-8, specials anywhere) still match the text parse exactly."""
    rng = random.Random(11)
    for tokname, tok in toks.items():
        size = tok.get_vocab_size()
        for name in ("qwen3", "gpt_oss", "gemma4", "kimi_k2"):
            b = bind(templates.get(name), tok)
            for _ in range(6):
                ids = [rng.randrange(size) for _ in range(rng.randint(1, 60))]
                check_sequence(tok, b, "", ids, reference=False)


def test_prefix_ids_equal_text_prefix(toks):
    tok = toks["bl-special"]
    for name, template, prefix, output, tools, cid in CASES[:40]:
        b = bind(template, tok)
        ids = tok.encode(output).ids
        pids = tok.encode(prefix).ids
        want = b.parse(ids, prefix=decode(tok, pids), tools=tools)
        assert b.parse(ids, prefix_ids=pids, tools=tools) == want
        assert parse_tokens(ids, b, prefix_ids=np.asarray(pids), tools=tools) == want
        assert TokenParser(b, prefix_ids=pids, tools=tools).initial_events == b.parser(prefix_ids=pids,
                                                                                       tools=tools).initial_events
        p = b.parser(prefix_ids=pids, tools=tools)
        r = chatparse.ResponseParser(template, prefix=decode(tok, pids), tools=tools)
        assert p.initial_events == r.initial_events


def test_multi_token_feeds(toks):
    """feed_tokens with many ids at once (speculative decoding deltas) equals one id at a time."""
    rng = random.Random(5)
    for tokname in ("bl-plain", "sp-special"):
        tok = toks[tokname]
        for name, template, prefix, output, tools, cid in CASES[::3]:
            b = bind(template, tok)
            ids = split_into_bytes(tok, tok.encode(output).ids, rng)
            p = b.parser(prefix=prefix, tools=tools)
            events = list(p.initial_events)
            k = 0
            try:
                while k < len(ids):
                    n = rng.choice([1, 2, 3, 5, 8])
                    chunk = ids[k:k + n]
                    events += p.feed_tokens(np.asarray(chunk) if rng.random() < 0.5 else chunk)
                    k += n
                msg, final = p.finalize()
            except (ValueError, KeyError, TypeError):
                continue
            events += final
            r = chatparse.ResponseParser(template, prefix=prefix, tools=tools)
            ev2 = r.initial_events + r.feed(decode(tok, ids))
            m2, f2 = r.finalize()
            assert msg == m2
            assert normalize(events) == normalize(ev2 + f2)


def test_fast_paths_are_taken(toks):
    """Inert tokens never reach the character engine; a special token equal to a delimiter switches region
    in one step; tokens ending in whitespace before a `\\s*` delimiter use the transition table."""
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    think = tok.token_to_id("<think>")
    assert think in b.tables.delims[0]
    text = ("<think>\nLet me think about the weather in Paris and more words here.\n</think>\n\n"
            "The weather in Paris is sunny and the answer is simple.<|im_end|>")
    ids = tok.encode(text).ids
    p = b.parser(prefix="")
    calls = []
    real = p._core.feed
    p._core.feed = lambda t: calls.append(t) or real(t)
    events = []
    for i in ids:
        events += p.feed_tokens(i)
    msg, final = p.finalize()
    r = chatparse.ResponseParser(templates.get("qwen3"), prefix="")
    ev2 = r.feed(text)
    m2, f2 = r.finalize()
    assert msg == m2 and normalize(events + final) == normalize(ev2 + f2)
    assert len(calls) <= len(ids) // 4, calls  # most tokens avoid the engine


def test_mixing_text_and_ids(toks):
    tok = toks["bl-plain"]
    template = templates.get("qwen3")
    b = bind(template, tok)
    p = b.parser(prefix="")
    ev = p.feed_tokens(tok.encode("<think>\nhello").ids) + p.feed("</think>\n\nThe answer")
    ev += p.feed_tokens(tok.encode(" is 42.<|im_end|>").ids)
    msg, fin = p.finalize()
    r = chatparse.ResponseParser(template, prefix="")
    ev2 = r.feed("<think>\nhello</think>\n\nThe answer is 42.<|im_end|>")
    m2, f2 = r.finalize()
    assert msg == m2 and normalize(ev + fin) == normalize(ev2 + f2)
    p = b.parser(prefix="")
    p.feed_tokens(split_into_bytes(tok, tok.encode("中").ids, random.Random(0), rate=1.0)[0])
    with pytest.raises(ValueError, match="split"):
        p.feed("x")


def test_out_of_range_ids_raise_naming_the_id(toks):
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    size = b.vocab.size
    for bad in (size, size + 7, 2 * size + 3, -1, -size):
        p = b.parser(prefix="")
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            p.feed_tokens(bad)
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            b.parser(prefix="").feed_tokens([1, 2, bad])
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            b.parser(prefix="").feed_tokens(np.array([1, bad]))
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            b.parse([0, bad], prefix="")
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            b.parse(np.array([bad]), prefix="")
        with pytest.raises(ValueError, match=rf"token id {bad}\b"):
            b.parser(prefix_ids=[bad])
        s = b.streams(3, prefix="")
        with pytest.raises(ValueError, match=rf"token id {bad} \(stream 1\)"):
            s.step([1, bad, 2])
    p = b.parser(prefix="")
    p.feed_tokens(5)
    with pytest.raises(TypeError):
        p.feed_tokens(1.5)
    with pytest.raises(TypeError):
        p.feed_tokens(np.array([1.0, 2.0]))
    assert p.feed_tokens([]) == []
    # an empty array holds no id whatever its dtype (numpy's default for ``np.array([])`` is float64), as
    # transformers' decode takes it; a non-empty float array stays an error
    assert p.feed_tokens(np.array([])) == []
    assert b.parse(np.array([5]), prefix_ids=np.array([])) == b.parse([5], prefix="")


def test_lifecycle_and_prefix_required(toks):
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    with pytest.raises(ValueError, match="prefix"):
        b.parser()
    with pytest.raises(ValueError, match="prefix"):
        parse_tokens([1, 2], b)
    with pytest.raises(ValueError, match="not both"):
        b.parser(prefix="", prefix_ids=[1])
    p = b.parser(prefix_ids=[])
    assert p.initial_events == []
    assert p.finalize() == ({"role": "assistant"}, [])
    with pytest.raises(RuntimeError):
        p.feed_tokens(1)
    with pytest.raises(RuntimeError):
        p.finalize()
    # a failing region close (bad JSON) leaves the parser failed, as ResponseParser does
    ids = tok.encode('<tool_call>{"a": </tool_call>x').ids
    p = b.parser(prefix="")
    with pytest.raises(ValueError):
        for i in ids:
            p.feed_tokens(i)
        p.finalize()
    with pytest.raises(RuntimeError):
        p.feed_tokens(ids[0])
    with pytest.raises(RuntimeError):
        p.feed_tokens(tok.encode(" weather").ids[0])  # an inert token too: no fast path after a failure
    # the same when the failing close is a whole-delimiter special token taken in one step from the fast state
    lit = bind({"start_anchor": "<|im_start|>assistant\n",
                "fields": {"tc": {"open": "<tool_call>", "close": "</tool_call>", "content": "json"}}}, tok)
    close = tok.token_to_id("</tool_call>")
    assert close in lit.tables.delims[1]
    p = lit.parser(prefix="")
    for i in tok.encode('<tool_call>{"a": ').ids + tok.encode(" weather weather").ids:
        p.feed_tokens(i)
    assert p._tab is not p._never
    with pytest.raises(ValueError):
        p.feed_tokens(close)
    with pytest.raises(RuntimeError):
        p.feed_tokens(tok.encode(" weather").ids[0])


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
    pytest.importorskip("transformers")
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


# ------------------------------------------------------------------------------------------------ batches
def test_parse_tokens_batch(toks):
    tok = toks["sp-special"]
    template = templates.get("qwen3")
    b = bind(template, tok)
    outs = [o for n, _, _, o, _, _ in CASES if n == "qwen3"][:5]
    batch = [tok.encode(o).ids for o in outs]
    want = [parse_tokens(ids, b, prefix="") for ids in batch]
    assert want == [chatparse.parse_response(decode(tok, ids), template, prefix="") for ids in batch]
    assert parse_tokens_batch(batch, b, prefix="") == want
    assert parse_tokens_batch(batch, b, prefix=[""] * len(batch)) == want
    assert parse_tokens_batch(batch, b, prefix_ids=[]) == want
    assert parse_tokens_batch(batch, b, prefix_ids=[[]] * len(batch)) == want
    with pytest.raises(ValueError, match="prefix"):
        parse_tokens_batch(batch, b, prefix=[""] * (len(batch) + 1))
    with pytest.raises(ValueError, match="prefix"):
        parse_tokens_batch(batch, b)
    n = max(len(x) for x in batch)
    pad = tok.token_to_id("<|im_end|>")
    arr = np.array([x + [pad] * (n - len(x)) for x in batch])
    assert parse_tokens_batch(arr, b, prefix="") == [parse_tokens(row, b, prefix="") for row in arr.tolist()]


def test_tools_and_callables(toks):
    """tools= casts tool arguments like ResponseParser, also given as Python functions."""
    tok = toks["bl-special"]
    template = templates.get("qwen3")
    b = bind(template, tok)

    def get_weather(city: str, days: int):
        """Get the weather.

        Args:
            city: the city
            days: how many days
        """

    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "X", "days": "3"}}\n</tool_call><|im_end|>'
    ids = tok.encode(text).ids
    for tools in ([get_weather], [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]):
        want = chatparse.parse_response(text, template, prefix="", tools=tools)
        assert want["tool_calls"][0]["function"]["arguments"]["days"] == 3
        assert b.parse(ids, prefix="", tools=tools) == want
        msg, _, _, _ = run_tokens(b, "", ids, tools=tools)
        assert msg == want


@pytest.mark.parametrize("capacity", [4, 1024])
def test_streams_match_single_parsers(toks, capacity):
    rng = random.Random(capacity)
    for tokname in ("bl-special", "sp-plain"):
        tok = toks[tokname]
        for name in ("qwen3", "gpt_oss", "hermes"):
            template = templates.get(name)
            b = bind(template, tok)
            cases = [c for c in CASES if c[0] == name]
            seqs, prefixes = [], []
            for _ in range(6):
                c = rng.choice(cases)
                ids = tok.encode(c[3]).ids
                seqs.append(split_into_bytes(tok, ids, rng, 0.2) if rng.random() < 0.5 else ids)
                prefixes.append(c[2])
            s = TokenStreams(b, len(seqs), prefix=prefixes, capacity=capacity)
            events = [list(e) for e in s.initial_events]
            refs = [chatparse.ResponseParser(template, prefix=p) for p in prefixes]
            decs = [_Decoder(b.vocab) for _ in seqs]
            msgs = [None] * len(seqs)
            for k in range(max(map(len, seqs))):
                act = np.array([k < len(x) for x in seqs])
                ids = np.array([x[k] if k < len(x) else 0 for x in seqs])
                out = s.step(ids, active=act)
                assert len(out) == len(seqs)
                assert out.tolist() == [out[j] for j in range(len(seqs))] == list(out)
                for j in range(len(seqs)):
                    if act[j]:
                        events[j] += out[j]
                        # exactly ResponseParser's events for the text this token completes
                        assert out[j] == refs[j].feed(decs[j].feed([int(ids[j])])), (name, k, j)
                    else:
                        assert out[j] == []
                    if k == len(seqs[j]) - 1:
                        msgs[j], fin = s.finalize(j)
                        events[j] += fin
            for j, ids in enumerate(seqs):
                msg, ev, _, _ = run_tokens(b, prefixes[j], ids)
                assert msgs[j] == msg
                assert normalize(events[j]) == normalize(ev)


# Fragments whose tokens take every token path: inert words, whitespace before `\s*` delimiters, '<' starting
# attempts, delimiters split across ordinary tokens (bl-plain) or whole special tokens (bl-special), characters
# split across byte tokens, JSON bodies.
FRAGMENTS = ["<think>", "</think>", "\n", "\n\n", " ", "   ", "<tool_call>", "</tool_call>", "<|im_end|>", "hello",
             " world", " the weather", "<", "<b>", "</", ">", "😀", " café", "中文", '{"name": "f", "arguments": {}}',
             "<|channel|>", "analysis", "<|message|>", "<|end|>", "<|start|>", "assistant", "final", "<|return|>"]


@st.composite
def fragment_ids(draw, tok):
    """A generation built from FRAGMENTS, some of its tokens split into single-byte tokens."""
    parts = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=24))
    ids = tok.encode("".join(parts)).ids
    seed = draw(st.integers(0, 2 ** 16))
    return split_into_bytes(tok, ids, random.Random(seed), 0.15) if seed % 3 == 0 else ids


def spy(obj, name: str) -> list:
    """Wrap ``obj.name`` so that each call's result is recorded, in order; returns that list."""
    results: list = []
    real = getattr(obj, name)
    setattr(obj, name, lambda *args: results.append(real(*args)) or results[-1])
    return results


def run_twice_like_the_text_parser(b, tok, ids):
    """`run_tokens` twice (the first run fills the binding's caches for these tokens, the second is served
    from them); where a body is bad, the text parser must fail the same way."""
    for _ in range(2):
        try:
            run_tokens(b, "", ids)  # checks every step against ResponseParser
        except (ValueError, KeyError, TypeError) as e:
            with pytest.raises(type(e)):
                chatparse.parse_response(decode(tok, ids), b.compiled, prefix="")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cached_lazy_transitions_match_the_text_parser(toks, data):
    """Tokens taking the cached lazy transitions (`TokenTablesBase.lazy_row`, filled by earlier parsers of the
    same binding) give exactly ResponseParser's events on the decoded text, step by step, and its message."""
    tokname = data.draw(st.sampled_from(["bl-special", "bl-plain", "sp-plain"]))
    name = data.draw(st.sampled_from(["qwen3", "gpt_oss"]))
    tok = toks[tokname]
    b = bind(templates.get(name), tok)
    ids = data.draw(fragment_ids(tok))
    run_twice_like_the_text_parser(b, tok, ids)


def test_lazy_transition_cache_is_used(toks):
    """A token whose transition from a state was worked out once is served from the shared cache by the next
    parser in that state: no decoder, no probe, no engine."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = "<think>\nSome words.\nMore  words.\n</think>\n\nThe answer:   yes.\n\nDone.<|im_end|>"
    ids = tok.encode(text).ids
    counts = []
    for _ in range(2):
        p = b.parser(prefix="")
        general = spy(p, "_general")
        for i in ids:
            p.feed_tokens(i)
        counts.append(len(general))
        assert p.finalize()[0] == chatparse.parse_response(text, templates.get("qwen3"), prefix="")
    assert counts[1] < counts[0], counts
    assert any(b.tables._lrows.values())


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_streams_fast_paths_match_single_parsers(toks, data):
    """Streams stepped together (row tables, learned transitions, deferred text, wraps of a small buffer,
    inactive steps, streams finished early) give each stream exactly the events and message of its own
    TokenParser fed the same ids."""
    tokname = data.draw(st.sampled_from(["bl-special", "bl-plain", "sp-plain"]))
    name = data.draw(st.sampled_from(["qwen3", "gpt_oss"]))
    tok = toks[tokname]
    b = bind(templates.get(name), tok)
    B = data.draw(st.integers(1, 5))
    seqs = [data.draw(fragment_ids(tok)) for _ in range(B)]
    for _ in range(data.draw(st.integers(0, 2))):  # repeat a sequence: the second one meets learned rows
        seqs.append(list(seqs[0]))
    B = len(seqs)
    capacity = data.draw(st.sampled_from([2, 3, 7, 1024]))
    prefix = data.draw(st.sampled_from(["", "<|im_start|>assistant\n<think>\n"]))
    s = TokenStreams(b, B, prefix=prefix, capacity=capacity)
    singles = [b.parser(prefix=prefix) for _ in range(B)]
    assert s.initial_events == [p.initial_events for p in singles]
    pos = [0] * B
    ended = [False] * B
    rng = random.Random(data.draw(st.integers(0, 2 ** 16)))
    while not all(ended[j] or pos[j] == len(seqs[j]) for j in range(B)):
        act = np.array([not ended[j] and pos[j] < len(seqs[j]) and rng.random() < 0.8 for j in range(B)])
        ids = np.array([seqs[j][pos[j]] if act[j] else 0 for j in range(B)])
        out = s.step(ids, active=act if not act.all() else None)
        if not out.errors:
            assert out.tolist() == [out[j] for j in range(B)]
        for j in range(B):
            want = outcome(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", [])
            pos[j] += bool(act[j])
            assert outcome(lambda: out[j]) == want, (j, pos[j])
            if act[j] and pos[j] == len(seqs[j]) and rng.random() < 0.5:
                assert outcome(lambda: s.finalize(j)) == outcome(singles[j].finalize)
                ended[j] = True
    got = outcome(s.finalize_all)
    if got[0] != "ok":  # the first stream whose parser fails (a bad body, or failed earlier) stops it
        first = next(o for o in (outcome(p.finalize) for p, done in zip(singles, ended) if not done)
                     if o[0] != "ok")
        assert got == first
        return
    res = got[1]
    for j in range(B):
        assert res[j] is None if ended[j] else res[j] == singles[j].finalize()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_streams_split_characters_and_pending_runs_match_single_parsers(toks, data):
    """Streams whose texts split characters across byte tokens and hold pending attempts over several tokens
    (newline runs, a split ``</think>``) give each stream exactly its own TokenParser's events and message; the
    streams repeat the same few texts so that later ones take learned rows."""
    tokname = data.draw(st.sampled_from(["bl-special", "bl-plain"]))
    tok = toks[tokname]
    b = bind(templates.get("qwen3"), tok)
    pieces = ["中文", "😀", "café", "x", "\n", "\n\n", " ", "</think>", "</", "think", ">", "ab", "\n</th"]
    base = data.draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=16))
    texts = ["<think>" + "".join(base) + "</think>\n\n" + "".join(reversed(base)) + "<|im_end|>",
             "".join(base) + "中文😀"]
    seqs = []
    for k in range(data.draw(st.integers(2, 6))):
        ids = tok.encode(texts[k % 2]).ids
        seed = data.draw(st.integers(0, 2 ** 16))
        seqs.append(split_into_bytes(tok, ids, random.Random(seed), 0.3) if seed % 2 else ids)
    B = len(seqs)
    s = TokenStreams(b, B, prefix="", capacity=data.draw(st.sampled_from([3, 1024])))
    singles = [b.parser(prefix="") for _ in range(B)]
    steps = max(map(len, seqs))
    for k in range(steps):
        act = np.array([k < len(q) for q in seqs])
        ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
        out = s.step(ids, active=act if not act.all() else None)
        if not out.errors:
            assert out.tolist() == [out[j] for j in range(B)]
        for j in range(B):
            want = outcome(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", [])
            assert outcome(lambda: out[j]) == want, (j, k)
    got = outcome(s.finalize_all)
    if got[0] == "ok":
        assert got[1] == [p.finalize() for p in singles]


# Whitespace runs before qwen3's `\s*</think>\s*|\s*(?=<tool_call>)` (a lookahead mode): the scanner merges the
# attempts that start at each whitespace character into one attempt with followers (`Scanner._merge`), and the
# lazy token paths and the stream rows hold such runs as pending attempts without the engine.
WS_PIECES = [" ", "  ", "\n", "\n\n", "\t", " \n", ".\n\n", "!\n", "x", "word", "</think>", "<tool_call>", "</",
             "think>", "<", "中文", "😀"]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_merged_whitespace_attempts_match_text_and_single_parsers(toks, data):
    """Generations with whitespace runs (merged scanner attempts with followers) give, token by token, exactly
    ResponseParser's events and message, before and after the shared lazy caches are filled; and streams
    stepped together (learned rows, small buffer) give each stream exactly its own TokenParser's."""
    tok = toks[data.draw(st.sampled_from(["bl-plain", "bl-special"]))]
    b = bind(templates.get("qwen3"), tok)
    body = "".join(data.draw(st.lists(st.sampled_from(WS_PIECES), min_size=1, max_size=20)))
    tail = "".join(data.draw(st.lists(st.sampled_from(WS_PIECES), max_size=8)))
    text = "<think>\n" + body + "\n</think>\n\n" + tail + "<|im_end|>"
    ids = tok.encode(text).ids
    seed = data.draw(st.integers(0, 2 ** 16))
    seqs = [ids, split_into_bytes(tok, ids, random.Random(seed), 0.3), ids]
    for q in seqs[:2]:
        run_twice_like_the_text_parser(b, tok, q)
    B = len(seqs)
    s = TokenStreams(b, B, prefix="", capacity=data.draw(st.sampled_from([3, 1024])))
    singles = [b.parser(prefix="") for _ in range(B)]
    for k in range(max(map(len, seqs))):
        act = np.array([k < len(q) for q in seqs])
        step_ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
        out = s.step(step_ids, active=act if not act.all() else None)
        for j in range(B):
            want = outcome(lambda: singles[j].feed_tokens(int(step_ids[j]))) if act[j] else ("ok", [])
            assert outcome(lambda: out[j]) == want, (j, k)
    got = outcome(s.finalize_all)
    want = outcome(lambda: [p.finalize() for p in singles])
    assert got[0] == want[0]
    if got[0] == "ok":
        assert got == want


def test_merged_whitespace_attempts_take_the_lazy_path(toks):
    """A run of whitespace pending before ``\\s*</think>`` (one scanner attempt with followers) keeps the lazy
    token paths on: the parser holds it as one pending attempt, and the streams hold it in a pending row."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    for rest in ("\n</think>\n\nAnswer.", " more\n\n", "\n\n" + call):
        p = b.parser(prefix="")
        ref = chatparse.ResponseParser(b.compiled, prefix="")
        head = "<think>\nSome words.\n\n"
        for i in tok.encode(head).ids:
            p.feed_tokens(i)
        ref.feed(head)
        p._sync()
        p._refresh()  # the token paths worked out from the core's own state
        assert [len(a.followers or ()) for a in p._core.scanner.attempts] == [1]
        assert p._lazy_ok and p._pend == (((2, p._pend[0][0][1]),), "\n\n")
        for i in tok.encode(rest).ids:  # from there, exactly the text parser's events
            assert p.feed_tokens(i) == ref.feed(decode(tok, [i]))
        assert p.finalize() == ref.finalize()
    b.tables._rows = None  # fresh row tables: other tests' streams may have used up their `MAX_ROWS`
    s = b.streams(2, prefix="<|im_start|>assistant\n<think>\n")
    for i in tok.encode("Some words.\n\n").ids:
        s.step([i, i])
    assert s._R.info[int(s._rowoff[0]) // s._size][0] == "P"
    i = tok.encode("Done").ids[0]
    out = s.step([i, i])
    assert out.slow == []  # the word kills the pending attempt: a row transition, no engine
    text = "\n\n" + decode(tok, [i])
    assert out[1] == [{"type": "region_chunk", "field": "reasoning_content", "text": text, "dirty": False}]


def outcome(fn):
    """("ok", result) or (exception class, message): streams and single parsers must agree on failures too."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)


def step_like_single_parsers(s, singles, seqs) -> None:
    """Step streams `s` over `seqs` (one id sequence per stream; a stream is inactive once its sequence has
    ended) and check each step's events, or exception, against `singles` (each stream's own TokenParser)."""
    for k in range(max(map(len, seqs))):
        act = np.array([k < len(q) for q in seqs])
        ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
        out = s.step(ids, active=act if not act.all() else None)
        for j in range(len(seqs)):
            want = outcome(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", [])
            assert outcome(lambda: out[j]) == want, (j, k)


def test_streams_long_runs(toks):
    """Long runs of inert tokens reach the parsers as one numpy-built text (wrap and finalize)."""
    tok = toks["bl-plain"]
    template = templates.get("qwen3")
    b = bind(template, tok)
    rng = random.Random(9)
    words = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "café", "中文", "😀"]
    seqs = []
    for k in range(3):
        body = " ".join(rng.choice(words) for _ in range(300))
        seqs.append(tok.encode(f"<think>\n{body}\n</think>\n\n{body} done.<|im_end|>").ids)
    n = min(map(len, seqs))
    seqs = [x[:n] for x in seqs]
    for capacity in (100, 1024):
        s = b.streams(3, prefix="", capacity=capacity)
        events = [[] for _ in seqs]
        for k in range(n):
            out = s.step([x[k] for x in seqs])
            for j in range(3):
                events[j] += out[j]
        for j, (msg, fin) in enumerate(s.finalize_all()):
            m2, ev2, _, _ = run_tokens(b, "", seqs[j])
            assert msg == m2
            assert normalize(events[j] + fin) == normalize(ev2)


def test_streams_all_fast_step_and_errors(toks):
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    s = b.streams(3, prefix="<|im_start|>assistant\n<think>\n")
    word = tok.encode(" weather").ids
    assert len(word) == 1
    out = s.step([word[0]] * 3)
    assert out.slow == [0, 1, 2]  # the prefix ends in "\n": a `\s*</think>` attempt is pending
    assert out[1] == [{"type": "region_chunk", "field": "reasoning_content", "text": "\n weather", "dirty": False}]
    out = s.step([word[0]] * 3)
    assert out.slow == []  # quiet, inert token: numpy only
    assert out[1] == [{"type": "region_chunk", "field": "reasoning_content", "text": " weather", "dirty": False}]
    assert s.finalize(0)[0]["reasoning_content"] == "weather weather"
    out = s.step([word[0]] * 3, active=[False, True, True])
    assert out[0] == []
    out = s.step([word[0]] * 3)  # stream 0 is finished: its parser raises, the others go on
    assert 0 in out.errors and isinstance(out.errors[0], RuntimeError)
    with pytest.raises(RuntimeError):
        out[0]
    assert out[2][0]["text"] == " weather"
    res = s.finalize_all()
    assert res[0] is None and res[1][0]["reasoning_content"] == "weather weather weather weather"


# ------------------------------------------------------------------------------------------------ transformers
@pytest.fixture(scope="module")
def hf_tok(toks):
    pytest.importorskip("transformers")
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
    torch = pytest.importorskip("torch")
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


# ------------------------------------------------------------------------------------------------ a real vocab
def tekken_tokenizer():
    """Mistral's tekken.json (131k byte-level tokens) from the mistral-common wheel, converted offline by
    transformers' converter."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("mistral_common")
    if spec is None:
        pytest.skip("mistral-common is not installed (pip install --no-deps mistral-common)")
    path = os.path.join(spec.submodule_search_locations[0], "data", "tekken_240911.json")
    if not os.path.exists(path):
        pytest.skip("mistral-common ships no tekken_240911.json")
    try:
        from transformers.integrations.mistral.tokenizer import MistralConverter
    except Exception as e:  # its import chain needs tiktoken and pydantic-extra-types
        pytest.skip(f"transformers' tekken converter is unavailable: {e}")
    return MistralConverter(path).converted()


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


def test_streams_pending_rows_take_cached_lazy_transitions(toks):
    """A token that leaves attempts pending after attempts were pending (whitespace after whitespace, "</" and
    "think" after a newline, before qwen3's ``\\s*</think>``) moves a stream from one pending row to another by
    the transition its binding's parsers cached, without the stream's parser: in Python the first time
    (`TokenStreams._without_parser`), then by the row tables. Its events, the held text the next token
    releases (by a row transition, the parser, a wrap or finalize), and the message are exactly those of the
    stream's own TokenParser."""
    for tokname in ("bl-plain", "bl-special"):
        tok = toks[tokname]
        b = bind(templates.get("qwen3"), tok)
        texts = ["<think>\nSome words. \n</think>\n\nDone.<|im_end|>",
                 "<think>\nA b.  \n\n x\n</think> ok<|im_end|>",
                 "<think>\nWords \n\t \nmore \n </thin k</think>\n\nEnd.\n \n<|im_end|>",
                 "<think>\nx \n\n</th  \n 中文\n </think>y<|im_end|>"]
        seqs = [tok.encode(t).ids for t in texts]
        for q in seqs:
            run_tokens(b, "", q)  # fills the shared lazy caches (and checks against ResponseParser)
        b.tables._rows = None  # fresh row tables: other tests' streams may have used up their `MAX_ROWS`
        seqs += [q[1:] for q in seqs]  # the same tokens at other steps, and with other neighbours
        B = len(seqs)
        lazy = by_table = 0
        for capacity, sparse in ((1024, False), (3, False), (2, True)):  # wraps while rows are pending
            s = TokenStreams(b, B, prefix="", capacity=capacity)
            singles = [b.parser(prefix="") for _ in range(B)]
            calls = [0] * B
            for j, p in enumerate(s.parsers):
                p.feed_tokens = (lambda real, j: lambda i: calls.__setitem__(j, calls[j] + 1) or real(i))(
                    p.feed_tokens, j)
            rng = random.Random(capacity)
            pos = [0] * B
            while any(pos[j] < len(seqs[j]) for j in range(B)):
                act = np.array([pos[j] < len(seqs[j]) and (not sparse or rng.random() < 0.7) for j in range(B)])
                ids = np.array([seqs[j][pos[j]] if act[j] else 0 for j in range(B)])
                before = [s._R.info[int(x) // s._size][0] for x in s._rowoff]
                n0 = list(calls)
                out = s.step(ids, active=act if not act.all() else None)
                after = [s._R.info[int(x) // s._size][0] for x in s._rowoff]
                for j in range(B):
                    want = singles[j].feed_tokens(int(ids[j])) if act[j] else []
                    assert out[j] == want, (tokname, capacity, j, pos[j])
                    if act[j] and before[j] == after[j] == "P" and calls[j] == n0[j]:
                        lazy += 1
                        by_table += j not in out.slow
                    pos[j] += bool(act[j])
            assert s.finalize_all() == [p.finalize() for p in singles]
        assert lazy >= 6 and by_table >= 3, (tokname, lazy, by_table)


def test_a_refused_id_mid_stream_leaves_events_and_message_exact(toks):
    """An out-of-range id raises before anything moves; the parser then goes on exactly as if it had not
    been fed (events equal a ResponseParser's, chunks concatenate to each body), at every position of the
    stream, pending attempts included (the text its token paths handed out reaches the core, stepped,
    before its state is recomputed)."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = ("<think>\nSome words. \n \n</think>\n\nDone.\n <tool_call>\n"
            "{\"name\": \"f\", \"arguments\": {}}\n</tool_call>")
    ids = tok.encode(text).ids
    want_msg = chatparse.parse_response(decode(tok, ids), b.compiled, prefix="")
    for at in range(len(ids) + 1):
        p = b.parser(prefix="")
        ref = chatparse.ResponseParser(b.compiled, prefix="")
        dec = _Decoder(b.vocab)
        for k, i in enumerate(ids):
            if k == at:
                with pytest.raises(ValueError, match="token id"):
                    p.feed_tokens(b.vocab.size + 1)
            assert p.feed_tokens(i) == ref.feed(dec.feed([i])), (at, k)
        msg, _ = p.finalize()
        assert msg == ref.finalize()[0] == want_msg, at


def test_streams_split_characters_take_held_rows(toks):
    """A character split across byte tokens in a quiet region (``中``, ``😀``, also after a space that starts a
    ``\\s*</think>`` attempt) takes H rows once a parser has handled the same tokens: the later streams hold the
    bytes and complete the character without their parser, with exactly their own TokenParser's events and
    message."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None  # fresh row tables: other tests' streams may have used up their `MAX_ROWS`
    tt = b.vocab.tok_text
    text = "<think>\nab 中文 x 😀 y 中\n</think>\n\nok 中文 z 😀<|im_end|>"
    ids = split_into_bytes(tok, tok.encode(text).ids, random.Random(0), 1.0)
    assert sum(tt[i] is None for i in ids) >= 8
    slow_at_split, by_rows, parser_calls = [], [], []
    for _ in range(2):  # the first streams teach the rows, the second take them
        s = b.streams(2, prefix="", capacity=5)
        singles = [b.parser(prefix="") for _ in range(2)]
        calls = [0]
        for p in s.parsers:
            real = p.feed_tokens
            p.feed_tokens = lambda x, real=real: calls.__setitem__(0, calls[0] + (tt[x] is None)) or real(x)
        slow, held = 0, set()
        for k, i in enumerate(ids):
            before = s._R.info[int(s._rowoff[0]) // s._size]
            out = s.step([i, i])
            assert out.tolist() == [p.feed_tokens(i) for p in singles], k
            if tt[i] is None:
                slow += len(out.slow)
                after = s._R.info[int(s._rowoff[0]) // s._size]
                if not out.slow:  # the row tables moved both streams
                    held.add((before[0], after[0], bool(before[0] == "H" and before[2])))
        assert s.finalize_all() == [p.finalize() for p in singles]
        slow_at_split.append(slow)
        by_rows.append(held)
        parser_calls.append(calls[0])
    assert slow_at_split[1] <= slow_at_split[0], slow_at_split  # (equal when other tests taught the rows first)
    # bytes after a pending space (P -> H, H -> H with attempts) take no parser either (`_more_bytes`)
    assert parser_calls[1] == 0, parser_calls
    # quiet -> first bytes, more bytes, the last bytes -> quiet; and the last bytes after a pending space
    assert {("Q", "H", False), ("H", "H", False), ("H", "Q", False), ("H", "Q", True)} <= by_rows[1], by_rows


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_templates_by_tokens_match_the_text_parser(toks, data):
    """Generated templates (overlapping literals, lookbehind, lookahead, anchors, lazy quantifiers; the
    differential suite's) fed token by token give exactly ResponseParser's events and message, where tokens
    decide delimiters through cached scanner runs (`TokenTablesBase.decision`): twice, so that the second
    parser meets the first one's cache."""
    from strategies import compiles, templates as gen_templates, texts_for

    template = data.draw(gen_templates())
    if not compiles(template):
        return
    tok = toks[data.draw(st.sampled_from(["bl-plain", "sp-plain"]))]
    b = bind(template, tok)
    text = data.draw(texts_for(template))
    ids = tok.encode(text).ids
    run_twice_like_the_text_parser(b, tok, ids)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_templates_by_streams_match_single_parsers(toks, data):
    """Generated templates (the differential suite's) stepped as streams: two generations of streams over the
    same texts (the second meets the rows the first taught: fresh rows, pending, held and match rows) and a
    small buffer that wraps, each stream with exactly its own TokenParser's events, errors and message."""
    from strategies import compiles, templates as gen_templates, texts_for

    template = data.draw(gen_templates())
    if not compiles(template):
        return
    tok = toks[data.draw(st.sampled_from(["bl-plain", "sp-plain"]))]
    b = bind(template, tok)
    seqs = [tok.encode(data.draw(texts_for(template))).ids for _ in range(2)]
    seqs = [seqs[0], seqs[1], list(seqs[0])]
    capacity = data.draw(st.sampled_from([3, 1024]))
    for _ in range(2):
        s = b.streams(len(seqs), prefix="", capacity=capacity)
        singles = [b.parser(prefix="") for _ in seqs]
        step_like_single_parsers(s, singles, seqs)
        got = outcome(s.finalize_all)
        if got[0] == "ok":
            assert got[1] == [p.finalize() for p in singles]
        else:
            assert got == next(o for o in (outcome(p.finalize) for p in singles) if o[0] != "ok")


def test_known_decisions_skip_the_automaton(toks):
    """qwen3's ``</think>`` split over ordinary tokens: once one parser has met the tokens that end it, the
    next parser's core takes the delimiter, and the match it waits on, from the cached scanner run instead of
    stepping its automaton over them, with the text parser's events."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = "<think>\nSome words.\n</think>\n\nThe answer.<|im_end|>"
    ids = tok.encode(text).ids
    seen = []
    for _ in range(2):
        p = b.parser(prefix="")
        known = spy(p, "_feed_known")
        run = [p.feed_tokens(i) for i in ids]
        seen.append([k is not None for k in known])
        ref = chatparse.ResponseParser(b.compiled, prefix="")
        assert run == [ref.feed(decode(tok, [i])) for i in ids]
        assert p.finalize() == ref.finalize()
    assert any(seen[1]), seen
    decided = [v for cache in b.tables._decided for v in cache.values() if v is not None]
    assert {v[0] for v in decided} == {"D", "H"}


@pytest.mark.parametrize("open_pattern,text", [
    (r"(?:^|a)", "ab>cab>"),  # `^` at the very start: the probe has no placeholder there
    (r"(?<=^a)b", "ab>cab>"),  # `^` seen by a lookbehind: the probe has one everywhere else
    (r"(?<=\s)\s*<", "b  <x>b   <y>"),  # the first attempt fails its lookbehind, a follower matches
    (r"(?<=\s)\s*<\s*", "b  < x>b   <  y>b \n< \n z>"),  # a match waited on ("H"), then decided
    (r"(?<=\s)\s*<\s*", "b  <" + " \n" * 200 + "x>"),  # held past the probe's 256 characters: the core steps
], ids=["start", "lookbehind-start", "follower", "held", "held-long"])  # on from restored attempts and followers
def test_known_decisions_match_the_text_parser(toks, open_pattern, text):
    """Token texts decided through cached scanner runs (`TokenTablesBase.decision`) where anchors,
    lookbehinds and merged attempts make the characters before the undecided text matter: ResponseParser's
    events and message, token by token, whole tokens and single bytes, before and after the cache is filled."""
    template = {"start_anchor": "<|A|>", "fields": {"a": {"open_pattern": open_pattern, "close": ">"}, "content": {}}}
    for name in ("bl-plain", "sp-plain"):
        tok = toks[name]
        b = bind(template, tok)
        ids = tok.encode(text).ids
        for q in (ids, split_into_bytes(tok, ids, random.Random(1), 1.0)):
            for _ in range(2):
                run_tokens(b, "", q)
    assert any(v is not None for cache in b.tables._decided for v in cache.values())


def test_held_rows_leave_room_for_pending_rows(toks):
    """Split characters vary more than pending attempts do: at most `MAX_HELD_ROWS` H rows are made (then
    such streams take their parser), so P rows always keep room; events and messages stay exact."""
    from chatparse.runtime.token_streams import _Rows

    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    cjk = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 4000, 37))  # many different lead bytes
    text = "<think>\n" + " ".join(cjk[k:k + 3] for k in range(0, len(cjk), 3)) + "\n</think>\n\nok<|im_end|>"
    ids = split_into_bytes(tok, tok.encode(text).ids, random.Random(2), 1.0)
    s = b.streams(2, prefix="")
    singles = [b.parser(prefix="") for _ in range(2)]
    for i in ids:
        assert s.step([i, i]).tolist() == [p.feed_tokens(i) for p in singles]
    assert s.finalize_all() == [p.finalize() for p in singles]
    kinds = [x[0] for x in s._R.info]
    assert kinds.count("H") == s._R.n_held == _Rows.MAX_HELD_ROWS
    assert len(kinds) < _Rows.MAX_ROWS


def test_streams_take_match_rows_for_a_close_they_wait_on(toks):
    """qwen3's ``\\n</think>\\n\\n`` split over ordinary tokens holds a match the scanner must wait on (more
    whitespace could follow): once a parser has met it, the streams' M row takes the token that leads there by
    the tables, the core gets the held text with its attempts when the next token needs them
    (`TokenParser._hold_at_end`, `_restore_held`), and events and messages stay exactly those of single
    parsers, including across a buffer wrap while the stream waits there."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    texts = ["<think>\nSome words.\n</think>\n\nThe answer.<|im_end|>",
             "<think>\nOther words here.\n</think>\n\n\n\nA reply.<|im_end|>"]
    seqs = [tok.encode(t).ids for t in texts]
    by_table = []
    for capacity in (1024, 1024, 3):  # the first streams teach the rows; a tiny buffer wraps in the middle
        s = b.streams(len(seqs), prefix="", capacity=capacity)
        singles = [b.parser(prefix="") for _ in seqs]
        n = 0
        for k in range(max(map(len, seqs))):
            act = np.array([k < len(q) for q in seqs])
            ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
            out = s.step(ids, active=act if not act.all() else None)
            for j in range(len(seqs)):
                want = singles[j].feed_tokens(int(ids[j])) if act[j] else []
                assert out[j] == want, (capacity, j, k)
                row = s._R.info[int(s._rowoff[j]) // s._size]
                n += act[j] and row[0] == "M" and j not in out.slow
        assert s.finalize_all() == [p.finalize() for p in singles]
        by_table.append(n)
    assert by_table[1] >= 2 and by_table[2] >= 2, by_table


@settings(max_examples=200, deadline=None)
@given(V=st.sampled_from([2 ** 17, 2 ** 16, 255, 256, 1000, 32000, 65535, 151936, 200019]),
       dtype=st.sampled_from([np.int32, np.int64]), data=st.data())
def test_minus_one_needle_finds_exactly_the_unknown_entries(V, dtype, data):
    """`TokenStreams.step` tells a gather with an unknown (-1) entry from one without by searching its bytes
    for `minus_one_needle`: true exactly when some entry is -1, for every vocabulary size and row offset."""
    from chatparse.runtime.token_streams import _Rows, minus_one_needle

    rows = data.draw(st.lists(st.integers(-1, _Rows.MAX_ROWS - 1), min_size=1, max_size=64))
    arr = np.array([-1 if r < 0 else r * V for r in rows], dtype=dtype)
    assert (minus_one_needle(V, dtype) in arr.tobytes()) == (-1 in rows)
    if V == 2 ** 17 and dtype is np.int32:
        assert minus_one_needle(V, dtype) == b"\xff"  # tekken's size: one byte, a memchr


def test_step_events_read_late_are_the_same(toks):
    """A step's events may be read after later steps and buffer wraps: each step keeps its own ids (a view of
    a ring buffer that a wrap replaces rather than overwrites), so reading late gives what reading at once
    gave."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = "<think>\nSome words. \n</think>\n\nThe answer is here, with more words.<|im_end|>"
    ids = tok.encode(text).ids
    seqs = [ids, ids[2:] + ids[:2], ids[::-1]]
    s = b.streams(3, prefix="", capacity=3)
    kept, at_once = [], []
    for k in range(len(ids)):
        out = s.step([q[k] for q in seqs])
        kept.append(out)
        at_once.append(outcome(out.tolist))
    assert [outcome(o.tolist) for o in kept] == at_once


def test_streams_start_in_fresh_rows(toks):
    """Streams created after the same prefix start in F rows: a generation's first tokens that hand out
    nothing (``"<th"``, ``"ink"`` over ordinary tokens) and the token that then opens the reasoning are learned
    from the first streams' parsers, in one generation of streams; later streams take them by the tables, their
    parsers fed those tokens only when next needed (`TokenStreams._replay_fresh`): at the think close, at a
    wrap, at `finalize`, or when `parser(b)` is read. Events and messages stay exactly those of single
    parsers; a different prefix has its own F rows; inactive steps inside the start are skipped."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    texts = ["<think>\nSome words.\n</think>\n\nThe answer.<|im_end|>",
             "<think>\nOther words here.\n</think>\n\nA reply.<|im_end|>",
             "Straight to the answer.<|im_end|>"]
    seqs = [tok.encode(t).ids for t in texts]
    assert [tok.decode(q[:4]) for q in seqs[:2]] == ["<think>\n"] * 2  # "<", "think", ">", "\n"
    start_calls = []
    for capacity, prefix, sparse in ((1024, "", False), (1024, "", False), (2, "", True), (1024, "x", False)):
        s = b.streams(len(seqs), prefix=prefix, capacity=capacity)
        singles = [b.parser(prefix=prefix) for _ in seqs]
        calls = [spy(p, "feed_tokens") for p in s.parsers]
        pos = [0] * len(seqs)
        k = 0
        while any(pos[j] < len(q) for j, q in enumerate(seqs)):
            act = np.array([pos[j] < len(q) and not (sparse and (k + j) % 3 == 0) for j, q in enumerate(seqs)])
            ids = np.array([q[pos[j]] if act[j] else 0 for j, q in enumerate(seqs)])
            out = s.step(ids, active=act if not act.all() else None)
            for j in range(len(seqs)):
                want = singles[j].feed_tokens(int(ids[j])) if act[j] else []
                assert out[j] == want, (capacity, prefix, j, k)
                pos[j] += bool(act[j])
            if k == 1 and prefix == "x":  # read one stream's parser while it is still in an F row
                assert s.parser(0)._output == singles[0]._output
            k += 1
            if k == 4:
                start_calls.append(sum(len(c) for c in calls))
        assert s.finalize_all() == [p.finalize() for p in singles]
    kinds = [x[0] for x in s._R.info]
    assert kinds.count("F") >= 5  # "", "<", "<think" after "", and "", "<" after "x"
    # the first generation of streams learns the start; the second takes it without any parser
    assert start_calls[0] >= 6 and start_calls[1] == 0, start_calls


def test_fresh_row_events_are_bounded(toks, monkeypatch):
    """Each distinct first token that opens a region from a fresh row keeps its events (`_Rows.fresh_events`);
    past `MAX_FRESH_EVENTS` such transitions are no longer learned (the streams' parsers take them), and events
    and messages stay exactly those of single parsers."""
    from chatparse.runtime.token_streams import _Rows

    monkeypatch.setattr(_Rows, "MAX_FRESH_EVENTS", 3)
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    words = ["Alpha", "Beta", "Gamma", "Delta", "Echo", "Fox", "Kilo"]
    seqs = [tok.encode(f"{w} is the answer.<|im_end|>").ids for w in words]
    assert len({q[0] for q in seqs}) == len(words)
    for _ in range(2):
        s = b.streams(len(seqs), prefix="")
        singles = [b.parser(prefix="") for _ in seqs]
        step_like_single_parsers(s, singles, seqs)
        assert s.finalize_all() == [p.finalize() for p in singles]
    assert len(s._R.fresh_events) == 3


def test_fresh_rows_leave_room_for_other_rows(toks, monkeypatch):
    """A prefix without the start anchor is kept whole, so every such prefix keys fresh rows of its own: at
    most `MAX_FRESH_ROWS` are made (then such streams start from their parser's state), so the rows of
    pending attempts keep room; events and messages stay exactly those of single parsers."""
    from chatparse.runtime.token_streams import _Rows

    monkeypatch.setattr(_Rows, "MAX_FRESH_ROWS", 2)
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    text = "<think>\nSome words. \n\n</think>\n\nThe answer.<|im_end|>"
    ids = tok.encode(text).ids
    for prefix in ["no anchor here", "nor here", "none", "<|im_start|>assistant\n"]:
        s = b.streams(2, prefix=prefix)
        singles = [b.parser(prefix=prefix) for _ in range(2)]
        for i in ids:
            out = s.step([i, i])
            assert out.tolist() == [p.feed_tokens(i) for p in singles], prefix
        assert s.finalize_all() == [p.finalize() for p in singles]
    kinds = [x[0] for x in s._R.info]
    assert kinds.count("F") == s._R.n_fresh == 2 and "P" in kinds


def test_hot_objects_keep_every_attribute_in_slots(toks):
    """`TokenParser`, its core, the core's scanner and the decoder declare every attribute they use as a slot
    (see `TokenParser.__slots__`): after the samples run through them token by token, as a whole, streamed as
    text and finalized, no attribute has landed in an instance dict (an attribute added without its slot would
    quietly cost the dict the slots are there to save)."""
    from chatparse.runtime.parser import StreamParser

    for kind in ("bl-plain", "sp-special"):
        tok = toks[kind]
        for name, items in SAMPLES.items():
            b = bind(templates.get(name), tok)
            for prefix, output in items:
                ids = tok.encode(output).ids
                one, many = b.parser(prefix=prefix), b.parser(prefix=prefix)
                for i in ids:
                    one.feed_tokens(i)
                many.feed_tokens(ids)
                text = StreamParser(b.compiled.tables)
                for ch in output:
                    text.feed(ch)
                text.finish()
                for p in (one, many):
                    p.finalize()
                    for obj in (p, p._core, p._core.scanner, p._dec):
                        assert vars(obj) == {}, (kind, name, type(obj).__name__)
                for obj in (text, text.scanner):
                    assert vars(obj) == {}, (kind, name, type(obj).__name__)
