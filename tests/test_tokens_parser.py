"""Parsing token IDs with one `TokenParser` (issue 3): incremental decoding, every token path (inert tokens,
cached lazy transitions, known decisions, whole-delimiter tokens), multi-token feeds, ids mixed with text,
lifecycle, `parse_tokens(_batch)` and tools - each giving exactly the events and message that feeding the
tokenizer's own decode of the ids gives to chatparse.ResponseParser and to the transformers reference.

Tokenizers are trained here offline (tests/token_support.py).
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
from deps import need
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

need("tokenizers")
import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.compiler.tokens import vocab_for  # noqa: E402
from chatparse.runtime.tokens import (TokenParser, TokenStreams, _Decoder, parse_tokens,  # noqa: E402
                                     parse_tokens_batch)
from harness import normalize  # noqa: E402
from token_support import (CASES, SAMPLES, check_sequence, decode, fragment_ids, mutate, run_tokens,  # noqa: E402,F401
                           outcome, run_twice_like_the_text_parser, split_into_bytes, spy, toks)


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


@functools.lru_cache(maxsize=1)
def _metaspace():
    from token_support import metaspace_tokenizer

    return metaspace_tokenizer(300)


_PROMPT_TEMPLATES = ("qwen3", "gpt_oss", "gemma4", "mistral_v11", "llama3_json", "glm45", "deepseek_v31")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_prompt_text_is_the_cut_of_the_whole_decode(toks, data):
    """`TokenBinding.prompt_text` (what the vLLM plugin passes as a request's prefix, decoding long prompts from
    the end) is exactly the cut prefix of the tokenizer's own decode where the anchor is literal, and an end of
    that decode with the same cut prefix where it is a pattern: on long conversations of anchors, other delimiters, multi-byte text, bytes
    of split characters and random ids, with every kind of tokenizer here (byte-level, byte fallback with a
    stripped first space, with the delimiters as special tokens and without; Metaspace, whose first token
    drops its space), so that the windows it decodes
    start at every kind of token boundary."""
    tokname = data.draw(st.sampled_from(sorted(toks) + ["metaspace"]), label="tokenizer")
    tok = toks[tokname] if tokname in toks else _metaspace()
    name = data.draw(st.sampled_from(_PROMPT_TEMPLATES), label="template")
    # (one binding per tokenizer and template across examples: later prompts meet the prompt ends kept before)
    b = _PROMPT_BINDINGS.get((tokname, name)) or _PROMPT_BINDINGS.setdefault((tokname, name),
                                                                             bind(templates.get(name), tok))
    tables = b.compiled.tables
    anchors = list(tables.template["start_anchor"].get("literals", ["<|im_start|>assistant", "<|assistant|>"]))
    pieces = anchors + ["<|im_end|>", "<think>", "</think>", "\n", " ", "  ", "😀", "中文", "é", "hello world",
                        "▁x", "<0x41>", '{"a": 1}']
    part = st.lists(st.sampled_from(pieces) | st.text(max_size=12), min_size=1, max_size=30)
    turn, last = data.draw(part, label="turn"), data.draw(part, label="last turn")
    turns = data.draw(st.integers(1, 80), label="turns")
    rng = random.Random(data.draw(st.integers(0, 2**16), label="seed"))
    text = "".join(turn) * turns + "".join(last)
    other = "".join(data.draw(part, label="another conversation"))
    if tokname == "metaspace":  # (a Unigram model without byte fallback: only the characters it has)
        known = set("".join(tok.get_vocab()))
        text, other = ("".join(c for c in t if c in known or c == " ") for t in (text, other))
    ids = tok.encode(text).ids
    if rng.random() < 0.5:
        ids = split_into_bytes(tok, ids, rng)
    if rng.random() < 0.5:
        ids = mutate(tok, ids, rng, n=8)
    earlier = tok.encode(other).ids
    for ids in (ids, ids, earlier + ids):  # (again, and after other turns: an end kept by the first call)
        whole = decode(tok, ids)
        got = b.prompt_text(ids)
        if tables.anchor_literals is None:
            assert whole.endswith(got)
        else:
            assert got == tables.cut_prefix(whole, log=False)
        assert tables.cut_prefix(got, log=False) == tables.cut_prefix(whole, log=False)


_PROMPT_BINDINGS: dict = {}


def test_prompt_ends_are_kept_and_answer_later_prompts(toks):
    """A prompt end seen once (the chat template's header for the answer, after a user turn) answers later
    prompts that end with it by one look-up: no decode, the same answer as decoding them; a prompt whose end
    differs is decoded."""
    from chatparse.runtime.tokens import binding as binding_mod

    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    b._prompt_ends, b._ends_room = (), True  # (`bind` may hand out a binding other tests have used: none kept)
    head = "<|im_start|>assistant\n<think>\n"
    first = tok.encode("<|im_start|>user\nHi there<|im_end|>\n" + head).ids
    assert b.prompt_text(first) == "<think>\n" and b._prompt_ends
    seen = []
    real = binding_mod._decode_all
    binding_mod._decode_all = lambda vocab, part: seen.append(len(part)) or real(vocab, part)
    try:
        later = tok.encode("<|im_start|>user\nSomething else entirely 😀<|im_end|>\n" + head).ids
        assert b.prompt_text(later) == "<think>\n" and seen == []
        other = tok.encode("<|im_start|>user\nNo thinking<|im_end|>\n<|im_start|>assistant\n").ids
        assert b.prompt_text(other) == "" and seen
    finally:
        binding_mod._decode_all = real


_ANCHOR_PIECES = ["ab", "a", "b", "a+", "b?", "(?:ab|b)", "(?:ba)?", "x{1,3}", "(?=a)", "\\bb", "(?:a|ab)", "c",
                  "[ab]", "^a", "a$", "(?:xa)*", ".b"]


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(st.sampled_from(_ANCHOR_PIECES), min_size=1, max_size=4),
       literals=st.none() | st.lists(st.text(alphabet="abx", min_size=1, max_size=3), min_size=1, max_size=3),
       text=st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "xa", "x", "c", " ", "\n", "cc"]),
                     max_size=120).map("".join), cut=st.integers(0, 100))
def test_a_tail_shows_the_last_anchor_match_only_when_it_is_the_whole_texts(pieces, literals, text, cut):
    """`Tables.tail_anchor_end` on an end of a text answers, when it answers, where the whole text's last
    start-anchor match ends (what `prompt_text` relies on to stop decoding), for generated patterns with
    overlapping, optional, repeated, look-ahead, word-boundary and anchored parts, and for literal sets
    (overlapping ones included, which take the pattern path)."""
    anchor = {"start_anchor": sorted(set(literals))} if literals else {"start_anchor_pattern": "".join(pieces)}
    try:
        tables = chatparse.compile_template({**anchor, "fields": {"content": {}}}).tables
    except ValueError:
        assume(False)
    tail = text[min(cut, len(text) // 2):]
    got = tables.tail_anchor_end(tail)
    if got is not None:
        assert len(text) - len(tail) + got == tables.last_anchor_end(text), (anchor, text, tail)


def test_a_tail_shows_the_bundled_pattern_anchors():
    """The bounded bundled pattern anchors are found in a conversation's last turn (so `prompt_text` stops
    there); glm45's (``\\s*`` makes it unbounded) is not, and costs the whole decode as before."""
    for name, found in (("deepseek_v31", True), ("minimax_m1", True), ("glm45", False)):
        tables = chatparse.compile_template(templates.get(name)).tables
        anchor = {"deepseek_v31": "<｜Assistant｜>", "minimax_m1": "ai name=MiniMax AI\n", "glm45": "<|assistant|>"}[name]
        text = ("hello world " * 50 + anchor + "answer ") * 3 + anchor
        tail = text[-200:]
        got = tables.tail_anchor_end(tail)
        assert (got is not None) == found, name
        if found:
            assert len(text) - len(tail) + got == tables.last_anchor_end(text) == len(text)


def test_prompt_text_decodes_only_the_last_turn(toks):
    """A long conversation's prompt is decoded from its last turn only (the point of `prompt_text`): the
    decode calls see at most a few windows' worth of ids, however long the conversation before."""
    from chatparse.runtime.tokens import binding as binding_mod

    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    b._prompt_ends, b._ends_room = (), True  # (no prompt end kept: this prompt is decoded, `_prompt_text`)
    turn = "<|im_start|>user\nhello world 中文 😀<|im_end|>\n<|im_start|>assistant\nthe weather is sunny<|im_end|>\n"
    ids = tok.encode(turn * 300 + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n").ids
    seen = []
    real = binding_mod._decode_all
    binding_mod._decode_all = lambda vocab, part: seen.append(len(part)) or real(vocab, part)
    try:
        got = b.prompt_text(ids)
    finally:
        binding_mod._decode_all = real
    assert got == b.compiled.tables.cut_prefix(decode(tok, ids), log=False) == "<think>\n"
    assert len(ids) > 5_000 and seen and max(seen) <= binding_mod.TAIL_IDS


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


def test_hot_objects_keep_every_attribute_in_slots(toks):
    """`TokenParser`, its core, the core's scanner and the decoder declare every attribute they use as a slot
    (see `TokenParser.__slots__`): after the samples run through them token by token, as a whole, streamed as
    text and finalized, no attribute has landed in an instance dict (an attribute added without its slot would
    quietly cost the dict the slots are there to save)."""
    from chatparse.runtime.stream.parser import StreamParser

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


@pytest.mark.parametrize("tokname", ["bl-special", "sp-special"])
def test_skipped_special_tokens_are_skipped_on_every_path(toks, tokname):
    """With skip_special_tokens=True a special token decodes to nothing, as `tokenizer.decode(ids,
    skip_special_tokens=True)` drops it: whole-sequence parsing, TokenParser and TokenStreams all parse that
    decoded text (byte-level vocabularies kept the token's bytes on two of them; FUZZ-2 found it)."""
    tok = toks[tokname]
    template = templates.get("qwen3")
    b = bind(template, tok, skip_special_tokens=True)
    texts = ["a <think> a", "x<think>\nwhy</think>\n\nok<|im_end|>", "<tool_call>{}</tool_call> done"]
    seqs = [tok.encode(t).ids for t in texts]
    streams = TokenStreams(b, len(seqs), prefix="")
    for k in range(max(map(len, seqs))):
        streams.step(np.array([q[k] if k < len(q) else 0 for q in seqs]),
                     active=np.array([k < len(q) for q in seqs]))
    got_streams = [m for m, _ in streams.finalize_all()]
    for ids, via_streams in zip(seqs, got_streams):
        want = outcome(lambda: chatparse.parse_response(tok.decode(ids, skip_special_tokens=True), template,
                                                        prefix=""))
        p = b.parser(prefix="")
        assert outcome(lambda: b.parse(ids, prefix="")) == want
        assert outcome(lambda: [p.feed_tokens(i) for i in ids] and p.finalize()[0]) == want
        assert ("ok", via_streams) == want or want[0] != "ok"
