"""Real grammar engines for chatparse's grammar export (issue #18): a byte-level BPE tokenizer trained on the
format corpus, llguidance matchers, and the sampler the soundness checks use.

Shared by tests/test_grammar.py, bench/grammar_soundness.py and bench/grammar_bench.py. Needs `tokenizers`,
`llguidance` (and `xgrammar` for the structural tags); callers skip when they are missing.
"""

from __future__ import annotations

import json
import random
import re

import regex
from functools import lru_cache
from typing import Any

EOS = "<|grammar_eos|>"


def corpus_texts() -> list[str]:
    """The prompts and outputs of the format corpus (tests/data/corpus.json): the test tokenizer's training text."""
    try:
        from tests.corpus_cases import load
    except ImportError:  # under pytest, tests/ is on sys.path but is not a package
        from corpus_cases import load

    out = []
    for case in load().cases:
        out.append(case.prefix or "")
        out.append(case.output or "")
    return out


@lru_cache(maxsize=None)
def tokenizer_json(vocab_size: int = 4096) -> str:
    """A byte-level BPE trained on the corpus' prompts and outputs (delimiters are plain text: no added
    tokens but the EOS), as tokenizer.json text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus_texts() * 2, trainer)
    return tok.to_str()


@lru_cache(maxsize=None)
def hf_tokenizer(vocab_size: int = 4096):
    from tokenizers import Tokenizer

    return Tokenizer.from_str(tokenizer_json(vocab_size))


@lru_cache(maxsize=None)
def ll_tokenizer(vocab_size: int = 4096):
    import llguidance

    tok = hf_tokenizer(vocab_size)
    return llguidance.LLTokenizer(tokenizer_json(vocab_size), eos_token=tok.token_to_id(EOS))


def ll_limits():
    """llguidance's parser limits for chatparse's grammars: text lexemes intersected with "no delimiter"
    make larger lexer automata than the defaults allow at some steps (the default step fuel, 200k, runs out
    on a tool name after an opener for deepseek_v32 and step3)."""
    import llguidance

    return llguidance.LLParserLimits(step_lexer_fuel=20_000_000, max_lexer_states=2_000_000,
                                     initial_lexer_fuel=20_000_000)


def ll_matcher(grammar_text: str, vocab_size: int = 4096):
    import llguidance

    m = llguidance.LLMatcher(ll_tokenizer(vocab_size), llguidance.LLMatcher.grammar_from_lark(grammar_text),
                             log_level=1, limits=ll_limits())
    if m.is_error():
        raise ValueError(m.get_error())
    return m


def encode(text: str, vocab_size: int = 4096) -> list[int]:
    return hf_tokenizer(vocab_size).encode(text).ids


@lru_cache(maxsize=64)
def _ll_fresh(grammar_text: str, vocab_size: int):
    """A matcher for the grammar, built once; `accepts` works on deep copies of it (building one compiles
    the grammar, which costs more than the walk)."""
    return ll_matcher(grammar_text, vocab_size)


def accepts(grammar_text: str, text: str, vocab_size: int = 4096) -> tuple[bool, str]:
    """Feed `text` token by token, then EOS: (accepted, why not)."""
    m = _ll_fresh(grammar_text, vocab_size).deep_copy()
    ids = encode(text, vocab_size)
    for i, t in enumerate(ids):
        if not m.consume_token(t):
            tok = hf_tokenizer(vocab_size)
            done = tok.decode(ids[:i])
            return False, f"token {i} {tok.decode([t])!r} refused after {done[-80:]!r}: {m.get_error()}"
    eos = hf_tokenizer(vocab_size).token_to_id(EOS)
    if not m.is_accepting():
        return False, "not accepting at the end"
    if not m.consume_token(eos):
        return False, f"EOS refused: {m.get_error()}"
    return True, ""


_META = re.compile(r"(?:\\.|[^\\()\[\]?*+{}|^$.])+")


def hint_pieces(template: dict, tools: list | None, examples: list[str] = ()) -> list[str]:
    """The template's literal pieces (delimiter literals, the literal runs of its delimiter and tag patterns),
    the tools' names and parameter names, and JSON punctuation: what `sample` tries to write whole, so that
    a uniform sampler reaches structure (a tool call) within a few hundred tokens."""
    pieces: list[str] = ['{"', '"', '":', '": ', ', "', '}', '}}', ']', '[', '[{', '{', ',', ' ', '\n', '0', '1',
                         'true', '"name"', '"arguments"', '"parameters"', 'name', 'arguments', '</']

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("open", "close"):
                    pieces.extend([x] if isinstance(x, str) else x)
                elif k == "string_delims" and isinstance(x, list):  # a JSON dialect's strings (gemma4)
                    pieces.extend(d for pair in x for d in pair if isinstance(d, str))
                elif k in ("open_pattern", "close_pattern", "tag_pattern"):
                    for run in _META.findall(x):
                        pieces.append(re.sub(r"\\(.)", r"\1", run))
                else:
                    walk(x)

    walk(template.get("fields", {}))
    names = [t.get("function", t)["name"] for t in tools or []]
    keys = [k for t in tools or [] for k in ((t.get("function", t).get("parameters") or {}).get("properties") or {})]
    # whole delimiters as the corpus writes them, with the tools' names (and parameter names) put in
    for fd in template.get("fields", {}).values():
        pats = [fd.get(k) for k in ("open_pattern", "close_pattern") if fd.get(k)]
        pats += [(fd.get("content_args") or {}).get("tag_pattern")] if fd.get("content") == "xml-inline" else []
        for pat in filter(None, pats):
            rx = regex.compile(pat, regex.DOTALL)
            for text in examples:
                for m in rx.finditer(text):
                    piece = m.group(0)
                    for group, subs in (("name", names), ("key", keys)):
                        if group in rx.groupindex and m.group(group) is not None and subs:
                            a, b = m.start(group) - m.start(), m.end(group) - m.start()
                            piece = piece[:a] + subs[len(pieces) % len(subs)] + piece[b:]
                    pieces.append(piece)
    tool_field = template.get("fields", {}).get("tool_calls") or {}
    bare = bool(tool_field.get("open_pattern")) and any(
        (m := regex.match(tool_field["open_pattern"], t, regex.DOTALL)) is not None and m.end() == 0
        for t in ('{"name": "x"}', '[{"name": "x"}]'))
    for t in tools or []:
        fn = t.get("function", t)
        pieces.append(fn["name"])
        if bare:  # the opener can be empty (llama3_json, xlam): the beginning of a bare JSON call
            pieces.extend([f'{{"name": "{fn["name"]}"', f'[{{"name": "{fn["name"]}"'])
        pieces.extend((fn.get("parameters") or {}).get("properties") or {})
    return [p for p in dict.fromkeys(pieces) if p]


def sample(grammar_text: str, rng: random.Random, *, max_tokens: int = 400, end_bias: float = 0.0,
           pieces: list[str] | None = None, piece_rate: float = 0.3,
           vocab_size: int = 4096) -> tuple[str, bool]:
    """One generation under the grammar's token mask: uniform over the allowed tokens; with `piece_rate`,
    one of `pieces` is tokenized and as many of its tokens as the matcher accepts are taken (each one an
    allowed token). EOS, when allowed, is taken with a probability that grows with the length (plus
    `end_bias`). Returns (text, ended with EOS)."""
    import numpy as np
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    tok = hf_tokenizer(vocab_size)
    n = tok.get_vocab_size()
    eos = tok.token_to_id(EOS)
    m = ll_matcher(grammar_text, vocab_size)
    mask = allocate_token_bitmask(1, ll_tokenizer(vocab_size).vocab_size)
    encoded = [tok.encode(p).ids for p in pieces or []]
    out: list[int] = []
    while len(out) < max_tokens:
        if encoded and rng.random() < piece_rate:
            ids = encoded[rng.randrange(len(encoded))][: max_tokens - len(out)]
            k = m.try_consume_tokens(ids)
            if k > 0:
                out.extend(ids[:k])
                continue
        fill_next_token_bitmask(m, mask, 0)
        if m.is_error():
            raise AssertionError(f"matcher error after {tok.decode(out)!r}: {m.get_error()}")
        bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")[:n]
        allowed = np.nonzero(bits)[0]
        if len(allowed) == 0:
            raise AssertionError(f"no token allowed after {tok.decode(out)!r}: {m.get_error()}")
        t = _draw(allowed, bool(bits[eos]), eos, min(1.0, len(out) / max_tokens + end_bias), rng)
        if t is None:
            return tok.decode(out), True
        if not m.consume_token(t):
            raise AssertionError(f"matcher refused its own allowed token {t}: {m.get_error()}")
        out.append(t)
    return tok.decode(out), False


def _draw(allowed, eos_allowed: bool, eos: int, p_end: float, rng):
    """The next token of a sampled generation from the ids a mask allows: None to end there (only where the
    end is allowed: with probability `p_end`, or when it is the only choice), else a uniform pick among the
    other allowed ids. Shared by both engines' samplers."""
    if eos_allowed and (len(allowed) == 1 or rng.random() < p_end):
        return None
    choices = allowed[allowed != eos]
    return int(choices[rng.randrange(len(choices))])


def tools_from_calls(calls: list[dict] | None) -> list[dict]:
    """A tool list from an output's own calls: their names, and a permissive schema for arguments."""
    names = []
    for c in calls or []:
        name = (c.get("function") or {}).get("name")
        if isinstance(name, str) and name not in names:
            names.append(name)
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------- xgrammar


@lru_cache(maxsize=None)
def xg_compiler(vocab_size: int = 4096):
    import xgrammar as xgr

    tok = hf_tokenizer(vocab_size)
    vocab = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.BYTE_LEVEL, stop_token_ids=[tok.token_to_id(EOS)])
    return xgr.GrammarCompiler(info, max_threads=1)


@lru_cache(maxsize=64)
def _xg_compiled(structural_tag_json: str, vocab_size: int):
    return xg_compiler(vocab_size).compile_structural_tag(structural_tag_json)


def xg_matcher(structural_tag_json: str, vocab_size: int = 4096):
    """A fresh xgrammar matcher (the compiled grammar is cached: matchers share it)."""
    import xgrammar as xgr

    return xgr.GrammarMatcher(_xg_compiled(structural_tag_json, vocab_size))


def xg_accepts(structural_tag_json: str, text: str, vocab_size: int = 4096) -> tuple[bool, str]:
    """Feed `text` token by token to xgrammar's matcher, then EOS."""
    m = xg_matcher(structural_tag_json, vocab_size)
    tok = hf_tokenizer(vocab_size)
    ids = encode(text, vocab_size)
    for i, t in enumerate(ids):
        if not m.accept_token(t):
            return False, f"token {i} {tok.decode([t])!r} refused after {tok.decode(ids[:i])[-80:]!r}"
    if not m.accept_token(tok.token_to_id(EOS)):
        return False, "EOS refused"
    return True, ""


def xg_sample(structural_tag_json: str, rng: random.Random, *, max_tokens: int = 400,
              pieces: list[str] | None = None, piece_rate: float = 0.3, vocab_size: int = 4096):
    """`sample` with xgrammar's matcher and token mask."""
    import numpy as np
    import torch
    import xgrammar as xgr

    tok = hf_tokenizer(vocab_size)
    n = tok.get_vocab_size()
    eos = tok.token_to_id(EOS)
    m = xg_matcher(structural_tag_json, vocab_size)
    bitmask = xgr.allocate_token_bitmask(1, n)
    encoded = [tok.encode(p).ids for p in pieces or []]
    out: list[int] = []
    while len(out) < max_tokens:
        if encoded and rng.random() < piece_rate:
            ids = encoded[rng.randrange(len(encoded))][: max_tokens - len(out)]
            k = 0
            for t in ids:
                if not m.accept_token(t):
                    break
                k += 1
            if k:
                out.extend(ids[:k])
                continue
        m.fill_next_token_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")[:n]
        allowed = np.nonzero(bits)[0]
        if len(allowed) == 0:
            raise AssertionError(f"no token allowed after {tok.decode(out)!r}")
        t = _draw(allowed, bool(bits[eos]), eos, min(1.0, len(out) / max_tokens), rng)
        if t is None:
            return tok.decode(out), True
        if not m.accept_token(t):
            raise AssertionError(f"xgrammar refused its own allowed token {t}")
        out.append(t)
    return tok.decode(out), False
