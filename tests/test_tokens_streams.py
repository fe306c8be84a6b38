"""Many streams (issue 3, `TokenStreams`): each stream's events and message are exactly its own
`TokenParser`'s for the same ids, across every row kind (quiet, pending, held bytes, waited-on matches, fresh
streams), ring-buffer wraps, errors and events read late; the row tables keep room for each kind.

Tokenizers are trained here offline (tests/token_support.py).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

need("tokenizers")
import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.runtime.tokens import TokenStreams, _Decoder  # noqa: E402
from harness import normalize  # noqa: E402
from token_support import (CASES, decode, fragment_ids, outcome, run_tokens, run_twice_like_the_text_parser,  # noqa: E402,F401
                           split_into_bytes, spy, toks)


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
    # the prefix ends in "\n": a `\s*</think>` attempt is pending; stream 0 works the transition out, and
    # streams 1 and 2, in the same row with the same token, take it from the tables stream 0 taught
    assert out.slow == [0]
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


def test_held_rows_leave_room_for_pending_rows(toks, monkeypatch):
    """Split characters vary more than pending attempts do: at most `MAX_HELD_ROWS` H rows are made of 128 rows
    (then such streams take their parser), so P rows always keep room; events and messages stay exact."""
    from chatparse.runtime.tokens.streams import _Rows

    monkeypatch.setattr(_Rows, "MAX_ROWS_CAP", _Rows.MAX_ROWS)  # 128 rows for this small vocabulary too
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
    assert kinds.count("H") == s._R.n_held == s._R.max_held_rows == _Rows.MAX_HELD_ROWS
    assert len(kinds) < s._R.max_rows == _Rows.MAX_ROWS


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
    by_table = _generations_by_table(b, seqs, lambda s, out, j, i: s._R.info[s._row_now(j)][0] == "M")
    assert by_table[1] >= 2 and by_table[2] >= 2, by_table


def _generations_by_table(b, seqs, counted) -> list:
    """Three generations of streams over `seqs` (the first teaches the rows, the third has a ring buffer of 3
    that wraps), each step checked against single parsers; per generation, how many stream-steps that
    `counted(streams, step events, stream, id)` picks were taken by the tables (not in `slow`)."""
    by_table = []
    for capacity in (1024, 1024, 3):
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
                n += bool(act[j]) and counted(s, out, j, int(ids[j])) and j not in out.slow
        assert s.finalize_all() == [p.finalize() for p in singles]
        by_table.append(n)
    return by_table


def test_streams_take_a_quiet_region_to_its_match_row_by_the_tables(toks):
    """qwen3's ``</tool_call>\\s*`` closed by a whole special token: the close has matched, and more whitespace
    could follow, so the token leaves the quiet tool-call region for an M row and hands out nothing. Once a
    parser has met it, later streams take that token by the tables (Q -> M, `TokenStreams._learn_from`), and
    events and messages stay exactly those of single parsers, across a buffer wrap too."""
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    call = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
    texts = [f"<think>\nHm.\n</think>\n\nLet me look.{call}\nDone.<|im_end|>",
             f"<think>\nOk.\n</think>\n\n{call}\n\nThere.{call}<|im_end|>"]
    seqs = [tok.encode(t).ids for t in texts]
    close = tok.token_to_id("</tool_call>")
    assert close is not None and all(close in q for q in seqs)

    def at_close(s, out, j, i):
        if i != close:
            return False
        assert s._R.info[s._row_now(j)][0] == "M"
        return True

    assert _generations_by_table(b, seqs, at_close)[1:] == [3, 3]


@settings(max_examples=200, deadline=None)
@given(V=st.sampled_from([2 ** 17, 2 ** 16, 255, 256, 1000, 32000, 65535, 151936, 200019]),
       dtype=st.sampled_from([np.int32, np.int64]), data=st.data())
def test_minus_one_needle_finds_exactly_the_unknown_entries(V, dtype, data):
    """`TokenStreams.step` tells a gather with an unknown (-1) entry from one without by searching its bytes
    for `minus_one_needle`: true exactly when some entry is -1, for every vocabulary size and row offset."""
    from chatparse.runtime.tokens.streams import max_rows, minus_one_needle

    rows = data.draw(st.lists(st.integers(-1, max_rows(V) - 1), min_size=1, max_size=64))
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
    # the first generation of streams learns the start (stream 1 takes what stream 0 taught the tables in the
    # same step); the second generation takes it without any parser
    assert start_calls[0] >= 4 and start_calls[1] == 0, start_calls


def test_fresh_row_events_are_bounded(toks, monkeypatch):
    """Each distinct first token that opens a region from a fresh row keeps its events (`_Rows.fresh_events`);
    past `MAX_FRESH_EVENTS` such transitions are no longer learned (the streams' parsers take them), and events
    and messages stay exactly those of single parsers."""
    from chatparse.runtime.tokens.streams import _Rows

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
    from chatparse.runtime.tokens.streams import _Rows

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


def test_streams_take_the_null_sink_by_the_row_tables(toks):
    """A template without an implicit field (gpt_oss) drops the text outside its regions (the null sink).
    Streams there are in the sink's Q row (or a P row of mode 0) and their tokens are taken by the row tables,
    handing out nothing, without the stream's parser; events and message stay exactly those of the stream's
    own TokenParser. Its attempts may hold a whole tool-call header (`_Rows.MAX_SINK_HELD_TEXT`)."""
    junk = "words the model wrote outside every channel, dropped by the template, and more of them"
    header = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    for tokname in ("bl-plain", "bl-special", "sp-plain"):
        tok = toks[tokname]
        b = bind(templates.get("gpt_oss"), tok)
        b.tables._rows = None  # fresh row tables: other tests' streams may have used up their `MAX_ROWS`
        texts = [f"<|channel|>analysis<|message|>Think {k}.<|end|>{junk} {k}{header}{{\"city\": \"Paris\"}}<|call|>"
                 f"<|start|>assistant<|channel|>final<|message|>Answer {k}.<|return|>" for k in range(6)]
        encs = [tok.encode(t) for t in texts]
        seqs = [e.ids for e in encs]
        # the steps whose token lies inside the dropped text (after its first word), or inside the tool call's
        # header (held whole by the open's attempts, 69 characters: longer than a region's rows hold) before
        # its last characters, where the open is decided
        has_text = b.vocab.tok_text

        def steps_in(e, t, part, s0, s1):
            """The steps inside `part` (less s0 / s1 characters at its ends) whose token, and the one before it,
            have a text of their own: a ByteFallback run (`<0xE2>`...; how many a vocabulary trained on little
            text has varies) is taken by the stream's parser."""
            at = t.index(part)
            return {k for k, (a, z) in enumerate(e.offsets) if at + s0 <= a and z <= at + len(part) - s1
                    and has_text[e.ids[k]] is not None and (k == 0 or has_text[e.ids[k - 1]] is not None)}

        in_junk = [steps_in(e, t, junk, 6, 0) for e, t in zip(encs, texts)]
        in_header = [steps_in(e, t, header, 1, 12) for e, t in zip(encs, texts)]
        B = len(seqs)
        s = TokenStreams(b, B, prefix="")
        singles = [b.parser(prefix="") for _ in range(B)]
        calls = [0] * B
        for j, p in enumerate(s.parsers):
            p.feed_tokens = (lambda real, j: lambda i: calls.__setitem__(j, calls[j] + 1) or real(i))(
                p.feed_tokens, j)
        parsed = {"junk": 0, "header": 0}
        taken = {"junk": 0, "header": 0}
        for k in range(max(map(len, seqs))):
            act = np.array([k < len(q) for q in seqs])
            ids = np.array([q[k] if k < len(q) else 0 for q in seqs])
            n0 = list(calls)
            out = s.step(ids, active=act if not act.all() else None)
            for j in range(B):
                want = singles[j].feed_tokens(int(ids[j])) if act[j] else []
                assert out[j] == want, (tokname, j, k)
                part = "junk" if k in in_junk[j] else "header" if k in in_header[j] else None
                if part:
                    parsed[part] += calls[j] - n0[j]
                    taken[part] += 1
        assert s.finalize_all() == [p.finalize() for p in singles]
        # (measured: junk 1 parsed of about 240 in each tokenizer, 42 on bl-plain without the sink's rows; header
        # 11-17 of 72-120, 72 on bl-plain with a region's 32-character limit on held text)
        assert parsed["junk"] * 8 <= taken["junk"] and parsed["header"] * 3 <= taken["header"], (tokname, parsed, taken)


def test_quiet_rows_learn_tokens_whose_attempts_die_within_them(toks):
    """A token that starts a delimiter attempt which dies inside it (`` </p>`` in qwen3's reasoning, before
    ``\\s*</think>``) leaves a quiet stream quiet, handing out its text: after one stream's parser worked that
    out, the row tables take it (Q(m) -> Q(m)) for every stream, with the same events."""
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    b.tables._rows = None
    tt, texts = b.tables, b.vocab.tok_text
    m = next(k for k, f in enumerate(tt.mode_field) if f is not None and tt.field_names[f] == "reasoning_content")
    inert = tt.flat[m * tt.size:(m + 1) * tt.size]
    dying = [i for i, t in enumerate(texts) if t and not inert[i] and tt.transition(m, (), t) == ()]
    assert dying, "no token of the vocabulary starts an attempt that dies within it"
    word = tok.encode(" weather").ids[0]
    s = b.streams(2, prefix="<|im_start|>assistant\n<think>\nSo")
    singles = [b.parser(prefix="<|im_start|>assistant\n<think>\nSo") for _ in range(2)]
    steps = [[word, word], [dying[0], word], [word, word], [word, dying[0]], [word, word]]
    slow = []
    for ids in steps:
        out = s.step(np.array(ids))
        assert [out[j] for j in range(2)] == [singles[j].feed_tokens(ids[j]) for j in range(2)]
        slow.append(out.slow)
    assert slow[1] == [0] and slow[3] == [], slow  # stream 1 takes what stream 0's parser taught the tables
    assert s.finalize_all() == [p.finalize() for p in singles]


def test_a_small_vocabulary_gets_more_rows():
    """Rows cost 8 bytes per token: a vocabulary of 131,072 tokens gets `MAX_ROWS` (128 MiB at most), a smaller
    one as many more as the same memory holds, up to `MAX_ROWS_CAP`."""
    from chatparse.runtime.tokens.streams import _Rows, max_rows

    assert max_rows(2 ** 17) == _Rows.MAX_ROWS == 128
    assert max_rows(200_019) == 128 and max_rows(32_000) == 524 and max_rows(8_000) == _Rows.MAX_ROWS_CAP
    assert all(max_rows(V) * V * 8 <= _Rows.ROW_MEMORY for V in (2 ** 17, 32_000, 65_535, 8_000, 151_936 // 2))


def test_a_stream_forgets_its_fresh_row_once_the_tables_step_it(toks):
    """A stream whose parser last ran on exactly the text of an F row, then took a step by the tables, is no
    longer in that F row: when the ring buffer wrapped right after that step (every stream caught up, the step
    counters reset), its next parser step once taught the tables a transition from the stale F row (``b/`` +
    ``b`` -> open ``b/xb``'s field), which a later stream writing ``b/b`` then took (found by hypothesis in
    test_generated_templates_by_streams_match_single_parsers; the three runs below are its shrunk form)."""
    tok = toks["bl-plain"]
    template = {"start_anchor": "<|A|>", "fields": {"a": {"open": ["ba<", "ba/b"], "close": "axx"},
                                                    "b": {"open": "b/xb", "repeats": True, "join": "|"},
                                                    "c": {"open": "abxa", "close": "a"}}}
    b = bind(template, tok)
    for text, capacity in [("bb/x", 1024), ("b/xb", 3), ("b/b", 1024)]:
        ids = tok.encode(text).ids
        assert [tok.decode([i]) for i in ids] == list(text)  # (one token per character: the rows above)
        s = b.streams(1, prefix="", capacity=capacity)
        step_like_single_parsers(s, [b.parser(prefix="")], [ids])
