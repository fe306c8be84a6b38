"""Shared by the token-ID tests (tests/test_tokens_*.py, test_tokens_dialect.py, test_format_tokens.py): the
generations, the tokenizers (real ones, trained here offline with the `tokenizers` library: byte-level BPE and
SentencePiece-style byte fallback, once with the templates' delimiters as special tokens and once without, so
that delimiters split across ordinary tokens), id sequences, and the oracle. The property the tests check:
feeding token ids gives exactly the events and message that feeding the tokenizer's own decode of those ids
gives - to chatparse.ResponseParser (step by step) and to the transformers reference (on the whole decoded
text).
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from deps import need
from hypothesis import strategies as st

tokenizers = need("tokenizers")
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402
import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.compiler.tokens import bytes_to_unicode  # noqa: E402
from chatparse.runtime.tokens import _Decoder  # noqa: E402
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
    corp = corpus_cases.load()
    cases = []
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


def outcome(fn):
    """("ok", result) or (exception class, message): streams and single parsers must agree on failures too."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)


# ------------------------------------------------------------------------------------ steps without events

def same_failure(got: tuple, ref_class: str) -> bool:
    """`got` (`outcome` of an end) is the reference's failure `ref_class`: that class, or the RuntimeError a
    parser that failed on a token raises at its end, naming that class ("... failed earlier (ValueError: ...")."""
    return got[0] != "ok" and (got[0].__name__ == ref_class
                               or got[0] is RuntimeError and f"failed earlier ({ref_class}:" in got[1])


def draw_steps(data, tok, template, texts_for) -> tuple:
    """1-3 generations of `template` (tests/strategies.py's texts), their ids, and each step's `events` flag:
    none with events (every stream ends in one shot where it can), or a random mix."""
    texts = [data.draw(texts_for(template)) for _ in range(data.draw(st.integers(1, 3)))]
    seqs = [tok.encode(t).ids for t in texts]
    steps = max(map(len, seqs), default=0)
    if data.draw(st.booleans()):
        flags = [False] * steps
    else:
        flags = data.draw(st.lists(st.booleans(), min_size=steps, max_size=steps))
    return seqs, flags


def step_all(s, seqs, flags) -> None:
    for k, events in enumerate(flags):
        act = np.array([k < len(q) for q in seqs])
        s.step(np.array([q[k] if a else 0 for q, a in zip(seqs, act)]), active=act, events=events)


# ------------------------------------------------------------------------------------------------ a real vocab
def tekken_tokenizer():
    """Mistral's tekken.json (131k byte-level tokens) from the mistral-common wheel, converted offline by
    transformers' converter."""
    import os

    mistral_common = need("mistral_common", "its wheel ships tekken_240911.json",
                          'pip install --no-deps "mistral-common==1.13.1" (as .ci/run does: its numpy<2.4 pin)')
    path = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    assert os.path.exists(path), f"this mistral-common ({mistral_common.__file__}) ships no tekken_240911.json"
    # its import chain needs tiktoken and pydantic-extra-types (mistral-common's own dependencies)
    converter = need("transformers.integrations.mistral.tokenizer", "transformers' tekken converter")
    return converter.MistralConverter(path).converted()


def qwen3_chat_tokenizer(texts: list, chat_template: str):
    """A byte-level BPE trained here on `texts` (three times over), with qwen3's special and added tokens, as a
    transformers fast tokenizer carrying `chat_template`: the checkpoint tokenizer the serving end-to-end tests
    (tests/test_vllm_e2e.py, tests/test_sglang_e2e.py) serve."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  show_progress=False)
    tok.train_from_iterator(list(texts) * 3, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False)
                    for t in ("<think>", "</think>", "<tool_call>", "</tool_call>")])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False,
                                 eos_token="<|im_end|>", pad_token="<|endoftext|>")
    hf.chat_template = chat_template
    return hf
