"""`TokenStreams` steps whose events are not wanted (``step(ids, active, events=False)``): such a step returns
None, and its events and errors can never be seen, so a stream may stop running its parser and keep only its
ids. Pinned here, against one `TokenParser` per stream fed every id one at a time (events=False steps included):

* a later ``step(..., events=True)`` gives every stream exactly its own parser's events for that token, and the
  same errors (the original exception, or RuntimeError "... failed earlier ..." when the failing token was in
  an events=False step);
* ``finalize(b, events=False)`` returns the message alone (a dict) or raises what the parser's ``finalize()``
  raises; ``finalize_all(events=False)`` returns the messages (None for streams already ended) or raises the
  first failing stream's exception, in stream order; with ``events=True`` (or no ``events=`` at all) both are as
  they always were;
* such messages are also `chatparse.parse_tokens` of the ids the stream took (inactive steps left out);
* ``parser(b)`` after events=False steps is the stream's parser brought up to date (its ``_output``, and its
  ``spans`` / ``input_text`` where those are on, are the single parser's);
* options where a one-shot end does not simply apply (tools, spans, the vllm dialect, malformed="event",
  offsets) change nothing of the above.

Why: a detached stream must come back (a later events=True step, ``parser(b)``, ``finalize``) exactly where its
own parser would be, across ring-buffer wraps (capacities 2, 3, 7 wrap every few steps), inactive steps, split
characters, pending attempts and failures; and callers who never pass ``events=False`` must see no change (the
steps below with events wanted leave the keyword out half the time).

Tokenizers are trained here offline (tests/token_support.py).
"""

from __future__ import annotations

import itertools
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
from chatparse.runtime.tokens import TokenStreams  # noqa: E402
from token_support import (CASES, draw_steps, fragment_ids, outcome, same_failure, split_into_bytes,  # noqa: E402,F401
                           step_all, toks)

NAMES = ["qwen3", "gpt_oss", "hermes"]
TOKNAMES = ["bl-special", "bl-plain", "sp-plain"]
# (a prefix without the start anchor is kept whole: "Note:" starts qwen3's and hermes' content, and gpt_oss's
# open final channel takes the generation as content, so a generation's first characters show in the message)
PREFIXES = {"qwen3": ["", "<|im_start|>assistant\n<think>\n", "Note:"],
            "gpt_oss": ["", "<|start|>assistant", "<|start|>assistant<|channel|>final<|message|>"],
            "hermes": ["", "<|im_start|>assistant\n", "Note:"]}

WORDS = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "café", "中文", "😀", "naïve", "a<b",
         "</", "<", "\n", "\n\n", "  ", "—"]
GOOD_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris, 東京", "days": "3"}}\n</tool_call>'
BAD_CALLS = ["<tool_call>\n{not json}\n</tool_call>", '<tool_call>\n{"name": broken}\n</tool_call>',
             '<tool_call>\n{"name": "f", "arguments": {oops}\n</tool_call>']
GPT_CALL = ('<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>'
            '{"city": "Zürich", "days": "3"}<|call|>')
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]

SCHEDULES = ["runs", "false_then_true", "mixed", "all_false", "all_true"]


# ------------------------------------------------------------------------------------------------ generations
def generation(rng: random.Random, name: str, bad: float = 0.0, calls: int | None = None) -> str:
    """A generation for `name`: reasoning, tool calls (a share `bad` of them with a body that fails to parse:
    qwen3 and hermes raise there), an answer; some are cut off before their end token."""
    def words(n):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    end = rng.random() < 0.8
    n_calls = rng.randint(0, 2) if calls is None else calls
    if name == "gpt_oss":
        tool = GPT_CALL if n_calls else ""
        return (f"<|channel|>analysis<|message|>{words(rng.randint(0, 30))}<|end|>{tool}<|start|>assistant"
                f"<|channel|>final<|message|>{words(rng.randint(0, 30))}" + ("<|return|>" if end else ""))
    body = "".join(words(rng.randint(0, 5)) + (rng.choice(BAD_CALLS) if rng.random() < bad else GOOD_CALL)
                   for _ in range(n_calls))
    if name == "hermes":
        return f"{words(rng.randint(0, 30))}\n{body}\n" + ("<|im_end|>" if end else "")
    think = f"<think>\n{words(rng.randint(0, 30))}\n</think>\n\n" if rng.random() < 0.8 else ""
    return f"{think}{body}{words(rng.randint(0, 30))}" + ("<|im_end|>" if end else "")


def encode(tok, text: str, rng: random.Random, split: float = 0.0) -> list:
    ids = tok.encode(text).ids
    return split_into_bytes(tok, ids, rng, split) if split else ids


def draw_seqs(data, tok, name: str, rng: random.Random, bad: float = 0.0) -> list:
    """1-6 id sequences: fragments (every token path), the built-in and corpus generations, `generation`; some
    with characters split across byte tokens, some repeating the first sequence (later streams meet rows the
    first taught)."""
    cases = [c for c in CASES if c[0] == name]
    seqs = []
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["fragments", "case", "generation"]))
        split = rng.choice([0.0, 0.0, 0.2, 1.0])
        if kind == "fragments":
            seqs.append(data.draw(fragment_ids(tok)))
        elif kind == "case":
            seqs.append(encode(tok, rng.choice(cases)[3], rng, split))
        else:
            seqs.append(encode(tok, generation(rng, name, bad), rng, split))
    for _ in range(data.draw(st.integers(0, 2))):
        seqs.append(list(seqs[0]))
    return seqs


def schedule(rng: random.Random, kind: str):
    """Each step's `events` flag: runs of False then True, False for a while then True, a coin per step, all
    False, all True."""
    if kind == "runs":
        flag = rng.random() < 0.5
        while True:
            for _ in range(rng.randint(1, 12)):
                yield flag
            flag = not flag
    n = rng.randint(0, 40)
    k = 0
    while True:
        k += 1
        yield {"false_then_true": k > n, "mixed": rng.random() < 0.5, "all_false": False, "all_true": True}[kind]


# ------------------------------------------------------------------------------------------------ comparing
def comparable(value):
    """Results with every event's ``error`` (an exception object: region_malformed events) as (class, message),
    so that a stream's results and its single parser's compare."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):  # (message, final events)
        return value[0], comparable(value[1])
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, dict) and "error" in value and isinstance(value["error"], BaseException):
        return {**value, "error": (type(value["error"]), str(value["error"]))}
    return value


def result(fn):
    """`outcome` of `fn` with events made comparable."""
    got = outcome(fn)
    return ("ok", comparable(got[1])) if got[0] == "ok" else got


def without_events(want):
    """What ``finalize(b, events=False)`` gives where ``finalize()`` gives `want`: the message, or the same
    failure."""
    return ("ok", want[1][0]) if want[0] == "ok" else want


class Lockstep:
    """Streams `s` and `singles` (one TokenParser per stream, created with the same prefix and options) fed the
    same ids, each step's `events` flag given by the caller; every result the streams give is checked against
    the single parsers'. `one_shot(j, ids)` (optional) is the message a one-shot parse of stream j's ids gives,
    or None where it does not apply."""

    def __init__(self, s, singles, seqs, rng, one_shot=None):
        self.s, self.singles, self.seqs, self.rng, self.one_shot = s, singles, seqs, rng, one_shot
        self.B = B = len(seqs)
        self.pos = [0] * B
        self.ended = [False] * B
        self.fed: list = [[] for _ in range(B)]  # the ids each stream took (inactive steps left out)
        self.steps = {True: 0, False: 0}
        assert comparable(s.initial_events) == [comparable(p.initial_events) for p in singles]

    def open(self, j: int) -> bool:
        return not self.ended[j] and self.pos[j] < len(self.seqs[j])

    def left(self) -> bool:
        return any(self.open(j) for j in range(self.B))

    def step(self, events: bool, rate: float = 0.8, act=None) -> None:
        B, rng, singles = self.B, self.rng, self.singles
        if act is None:
            act = np.array([self.open(j) and rng.random() < rate for j in range(B)])
        ids = np.array([self.seqs[j][self.pos[j]] if act[j] else 0 for j in range(B)])
        active = None if act.all() and rng.random() < 0.7 else act
        if events and rng.random() < 0.5:
            out = self.s.step(ids, active=active)  # (a caller who never passes events=)
        else:
            out = self.s.step(ids, active=active, events=events)
        want = [result(lambda: singles[j].feed_tokens(int(ids[j]))) if act[j] else ("ok", []) for j in range(B)]
        for j in np.flatnonzero(act).tolist():
            self.pos[j] += 1
            self.fed[j].append(int(ids[j]))
        self.steps[events] += 1
        if not events:
            assert out is None
            return
        assert len(out) == B
        assert set(out.errors or ()) == {j for j in range(B) if want[j][0] != "ok"}, (out.errors, want)
        for j in range(B):
            assert result(lambda: out[j]) == want[j], (j, self.pos[j], self.fed[j])
        if not out.errors:
            assert comparable(out.tolist()) == [w[1] for w in want]

    def check_message(self, j: int, message) -> None:
        if self.one_shot is not None:
            want = self.one_shot(j, self.fed[j])
            if want is not None:
                assert message == want, (j, self.fed[j])

    def end(self, j: int, events: bool) -> None:
        """finalize(j, events=events) (no events= at all half the time events are wanted)."""
        want = result(self.singles[j].finalize)
        if events and self.rng.random() < 0.5:
            got = result(lambda: self.s.finalize(j))
        else:
            got = result(lambda: self.s.finalize(j, events=events))
        self.ended[j] = True
        if not events:
            want = without_events(want)
            assert got[0] != "ok" or isinstance(got[1], dict), got
        assert got == want, (j, events, self.fed[j])
        if got[0] == "ok":
            self.check_message(j, got[1] if not events else got[1][0])

    def end_all(self, events: bool) -> None:
        """finalize_all(events=events): the results of the streams still open, or the first failure."""
        want = [None if self.ended[j] else result(self.singles[j].finalize) for j in range(self.B)]
        if events and self.rng.random() < 0.5:
            got = result(self.s.finalize_all)
        else:
            got = result(lambda: self.s.finalize_all(events=events))
        self.ended = [True] * self.B
        if got[0] != "ok":  # the first stream (in stream order) whose parser fails
            failing = [w for w in want if w is not None and w[0] != "ok"]
            assert failing and got == failing[0], (got, want)
            return
        assert all(w is None or w[0] == "ok" for w in want), want
        if events:
            assert got[1] == [None if w is None else w[1] for w in want]
        else:
            assert got[1] == [None if w is None else w[1][0] for w in want]
        for j, w in enumerate(want):
            if w is not None:
                self.check_message(j, w[1][0])

    def run(self, kind: str, end_rate: float = 0.4, cut_rate: float = 0.02, rate: float = 0.8) -> None:
        """Step with the `events` flags of `schedule` `kind` until every sequence is taken or its stream ended:
        streams end at random (`end_rate` right after their last id, `cut_rate` before it), each with a random
        `events` flag (always True for "all_true": a caller who never passes events=False); then
        finalize_all."""
        rng = self.rng
        flags = schedule(rng, kind)

        def ends():
            return kind == "all_true" or rng.random() < 0.5
        while self.left():
            self.step(next(flags), rate)
            for j in range(self.B):
                if not self.ended[j] and self.fed[j] and (
                        (self.pos[j] == len(self.seqs[j]) and rng.random() < end_rate) or rng.random() < cut_rate):
                    self.end(j, ends())
        self.end_all(ends())


def parse_tokens_for(b, prefixes, **options):
    """`Lockstep.one_shot` by `chatparse.parse_tokens` (the message, with spans=True the first of its pair)."""
    def one_shot(j, ids):
        got = chatparse.parse_tokens(ids, b, prefix=prefixes[j], **options)
        return got[0] if options.get("spans") else got
    return one_shot


def draw_prefixes(data, name: str, B: int):
    """One prefix for every stream, or one per stream."""
    if data.draw(st.booleans()):
        p = data.draw(st.sampled_from(PREFIXES[name]))
        return p, [p] * B
    ps = [data.draw(st.sampled_from(PREFIXES[name])) for _ in range(B)]
    return ps, ps


# ------------------------------------------------------------------------------------------------ tests
@settings(max_examples=35, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_steps_without_events_then_with_them_match_single_parsers(toks, data):
    """Random runs of events=False and events=True steps (a small ring buffer that wraps, inactive steps,
    streams ended early with or without their final events): every events=True step gives each stream exactly
    its own TokenParser's events (fed every id, those of events=False steps too), every end its message (and
    final events where wanted), and the messages are `chatparse.parse_tokens` of the ids taken."""
    rng = random.Random(data.draw(st.integers(0, 2 ** 32 - 1)))
    tokname = data.draw(st.sampled_from(TOKNAMES))
    name = data.draw(st.sampled_from(NAMES))
    tok = toks[tokname]
    b = bind(templates.get(name), tok)
    seqs = draw_seqs(data, tok, name, rng)
    prefix, prefixes = draw_prefixes(data, name, len(seqs))
    capacity = data.draw(st.sampled_from([2, 3, 7, 1024]))
    s = TokenStreams(b, len(seqs), prefix=prefix, capacity=capacity)
    singles = [b.parser(prefix=p) for p in prefixes]
    run = Lockstep(s, singles, seqs, rng, parse_tokens_for(b, prefixes))
    run.run(data.draw(st.sampled_from(SCHEDULES)))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_failures_during_steps_without_events_surface_as_in_single_parsers(toks, data):
    """Tool calls with bodies that fail to parse (qwen3 and hermes raise ValueError at the token after the
    call's close, or at the end): a failure in an events=False step is never seen there; the stream's next
    events=True step raises what its single parser raises then (RuntimeError "... failed earlier ..."), a step
    with the failing token itself raises the original error, and `finalize` / `finalize_all` (with or without
    events) raise exactly as the single parsers' finalize does (the first failing stream, in stream order)."""
    rng = random.Random(data.draw(st.integers(0, 2 ** 32 - 1)))
    tok = toks[data.draw(st.sampled_from(TOKNAMES))]
    name = data.draw(st.sampled_from(["qwen3", "hermes"]))
    b = bind(templates.get(name), tok)
    split = data.draw(st.sampled_from([0.0, 0.3]))
    seqs = [encode(tok, generation(rng, name, bad=1.0, calls=rng.randint(1, 2)), rng, split)]  # always fails
    for _ in range(data.draw(st.integers(0, 4))):
        seqs.append(list(seqs[0]) if rng.random() < 0.3 else encode(tok, generation(rng, name, bad=0.5), rng, split))
    prefix, prefixes = draw_prefixes(data, name, len(seqs))
    s = TokenStreams(b, len(seqs), prefix=prefix, capacity=data.draw(st.sampled_from([2, 3, 7, 1024])))
    singles = [b.parser(prefix=p) for p in prefixes]
    run = Lockstep(s, singles, seqs, rng, parse_tokens_for(b, prefixes))
    run.run(data.draw(st.sampled_from(SCHEDULES)), end_rate=0.5, cut_rate=0.005)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 32 - 1), name=st.sampled_from(NAMES), tokname=st.sampled_from(TOKNAMES),
       capacity=st.sampled_from([2, 7, 16, 64]), B=st.integers(33, 80))
def test_many_streams_without_events_end_with_the_single_parsers_messages(toks, seed, name, tokname, capacity, B):
    """Every step events=False (streams starting at different steps, inactive ones, characters split across
    byte tokens, single-byte tokens only, several wraps, a few bodies that fail to parse), streams ended with
    finalize(b, events=False) or finalize_all(events=False): each message is its single parser's and
    `chatparse.parse_tokens` of its ids, each failure its single parser's."""
    rng = random.Random(seed)
    tok = toks[tokname]
    b = bind(templates.get(name), tok)
    seqs = [encode(tok, generation(rng, name, bad=0.1), rng, rng.choice([0.0, 0.0, 0.3, 1.0])) for _ in range(B)]
    prefixes = [rng.choice(PREFIXES[name]) for _ in range(B)]
    start = [rng.randint(0, 20) for _ in range(B)]
    early = set(rng.sample(range(B), B // 2))  # finalized as soon as they end, the others by finalize_all
    s = TokenStreams(b, B, prefix=prefixes, capacity=capacity)
    singles = [b.parser(prefix=p) for p in prefixes]
    run = Lockstep(s, singles, seqs, rng, parse_tokens_for(b, prefixes))
    for k in range(max(start[j] + len(seqs[j]) for j in range(B))):
        act = np.array([run.open(j) and k >= start[j] and rng.random() < 0.9 for j in range(B)])
        run.step(False, act=act)
        for j in early:
            if not run.ended[j] and run.pos[j] == len(seqs[j]):
                run.end(j, False)
    assert run.steps[True] == 0 and run.steps[False] >= min(capacity, 2 * 16)
    run.end_all(False)


OPTIONS = [
    pytest.param({"tools": TOOLS}, id="tools"),
    pytest.param({"spans": True}, id="spans"),
    pytest.param({"dialect": "vllm"}, id="vllm"),
    pytest.param({"malformed": "event"}, id="malformed-event"),
    pytest.param({"offsets": True}, id="offsets"),
    pytest.param({"tools": TOOLS, "spans": True, "dialect": "vllm"}, id="tools-spans-vllm"),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_options_with_steps_without_events_match_single_parsers(toks, options):
    """Streams created with tools (arguments cast: ``"days": "3"`` becomes 3), spans, the vllm dialect,
    malformed="event" or offsets, where a one-shot end may not simply apply: events=False steps, then
    events=True steps, `parser(b)` read in between, ends with and without events; everything as the single
    parsers created with the same options give it."""
    one_shot_options = {k: v for k, v in options.items() if k in ("tools", "spans", "dialect", "malformed")}
    events_malformed = options.get("dialect") == "vllm" or options.get("malformed") == "event"
    for tokname in TOKNAMES:
        tok = toks[tokname]
        for name in NAMES:
            b = bind(templates.get(name), tok)
            for seed in range(2):
                rng = random.Random(f"{tokname} {name} {seed}")
                B = 5
                seqs = [encode(tok, generation(rng, name, bad=0.4, calls=rng.randint(0, 2)), rng,
                               rng.choice([0.0, 0.3])) for _ in range(B - 1)]
                seqs.append(list(seqs[0]))
                prefixes = [rng.choice(PREFIXES[name]) for _ in range(B)]
                s = b.streams(B, prefix=prefixes, capacity=rng.choice([3, 7, 1024]), **options)
                singles = [b.parser(prefix=p, **options) for p in prefixes]

                def one_shot(j, ids):
                    got = outcome(lambda: chatparse.parse_tokens(ids, b, prefix=prefixes[j], **one_shot_options))
                    if got[0] != "ok":  # (a malformed region: raised by the one-shot parse, an event when streaming)
                        assert events_malformed, got
                        return None
                    if options.get("spans"):
                        assert got[1][1] == singles[j].spans
                        return got[1][0]
                    return got[1]

                run = Lockstep(s, singles, seqs, rng, one_shot)
                # events=False for the first half of the longest sequence, then runs of both (seed 1), or
                # events=True to the end (seed 0)
                flags = itertools.chain([False] * (max(map(len, seqs)) // 2),
                                        schedule(rng, "all_true" if seed == 0 else "runs"))
                while run.left():
                    run.step(next(flags))
                    if rng.random() < 0.2:  # the stream's parser, brought up to date
                        j = rng.randrange(B)
                        if not run.ended[j]:
                            check_parser(s, singles, j, options)
                    for j in range(B):
                        if not run.ended[j] and run.pos[j] == len(seqs[j]) and rng.random() < 0.5:
                            run.end(j, rng.random() < 0.5)
                run.end_all(seed == 0)
                assert run.steps[False] and (run.steps[True] or len(seqs[0]) < 3)
    if options.get("tools"):  # (the tools are applied)
        b = bind(templates.get("qwen3"), toks["bl-special"])
        msg = chatparse.parse_tokens(toks["bl-special"].encode(GOOD_CALL).ids, b, prefix="", tools=TOOLS)
        assert msg["tool_calls"][0]["function"]["arguments"]["days"] == 3


def check_parser(s, singles, j, options) -> None:
    """``s.parser(j)`` is stream j's parser brought up to date: its output (and spans, input text where those
    are kept) are the single parser's."""
    p = s.parser(j)
    assert result(lambda: p._output) == result(lambda: singles[j]._output), j
    if options.get("spans"):
        assert result(lambda: p.spans) == result(lambda: singles[j].spans), j
    if options.get("dialect") == "vllm":
        assert result(lambda: p.input_text) == result(lambda: singles[j].input_text), j


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_parser_after_steps_without_events_is_brought_up_to_date(toks, data):
    """``parser(b)`` read at random points of a run of events=False and events=True steps (wraps, inactive
    steps, split characters): its ``_output`` is the single parser's at the same point, and reading it changes
    nothing of what the stream gives afterwards."""
    rng = random.Random(data.draw(st.integers(0, 2 ** 32 - 1)))
    tok = toks[data.draw(st.sampled_from(TOKNAMES))]
    name = data.draw(st.sampled_from(NAMES))
    b = bind(templates.get(name), tok)
    cases = [c for c in CASES if c[0] == name]
    seqs = [encode(tok, generation(rng, name) if rng.random() < 0.7 else rng.choice(cases)[3], rng,
                   rng.choice([0.0, 0.3, 1.0])) for _ in range(data.draw(st.integers(1, 5)))]
    seqs.append(list(seqs[0]))
    prefix, prefixes = draw_prefixes(data, name, len(seqs))
    s = TokenStreams(b, len(seqs), prefix=prefix, capacity=data.draw(st.sampled_from([2, 3, 7, 1024])))
    singles = [b.parser(prefix=p) for p in prefixes]
    run = Lockstep(s, singles, seqs, rng, parse_tokens_for(b, prefixes))
    flags = schedule(rng, data.draw(st.sampled_from(["runs", "mixed", "all_false"])))
    while run.left():
        run.step(next(flags))
        for j in range(run.B):
            if not run.ended[j] and rng.random() < 0.15:
                check_parser(s, singles, j, {})
    for j in range(run.B):
        check_parser(s, singles, j, {})
    run.end_all(rng.random() < 0.5)


def test_finalize_without_events_of_streams_detached_or_not(toks):
    """`step(..., events=False)` returns None (ids as a list or an array, with or without `active`);
    finalize(b, events=False) returns the message, a dict, for a stream that only took events=True steps
    (never detached), one that took events=False steps then events=True ones, one that took only events=False
    steps, and one that was cut off in the middle of its reasoning; finalize(b) with events of a stream that
    took only events=False steps gives the final events too; each as its single parser gives it. Where no step
    ever asked for events, the same, and a stream that never took an id ends with its prefix's message."""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = ("<think>\nLet me think 中文 😀 about café.\n \n</think>\n\nThe answer is 42.\n" + GOOD_CALL
            + "<|im_end|>")
    ids = tok.encode(text).ids
    b.tables._rows = None  # fresh row tables: the streams' first steps need their parsers (or detach)
    B = 6
    for capacity in (3, 1024):
        s = b.streams(B, prefix="", capacity=capacity)
        singles = [b.parser(prefix="") for _ in range(B)]
        # stream 0: events=True steps only; 1: events=False then events=True; 2 and 3: events=False only;
        # 4: cut off in its reasoning (events=False); 5: steps of both kinds, every one
        pos = [0] * B
        fed: list = [[] for _ in range(B)]
        k = 0
        while any(pos[j] < len(ids) for j in (0, 1, 2, 3, 5)):
            events = k % 2 == 0
            half = k >= len(ids)
            act = np.array([pos[0] < len(ids) and events, pos[1] < len(ids) and (events == half),
                            pos[2] < len(ids) and not events, pos[3] < len(ids) and not events,
                            pos[4] < 6 and not events, pos[5] < len(ids)])
            step_ids = [ids[pos[j]] if act[j] else 0 for j in range(B)]
            if events:
                out = s.step(np.array(step_ids), active=act)
            else:
                out = s.step(step_ids if k % 4 == 1 else np.array(step_ids), active=act, events=False)
                assert out is None
            for j in range(B):
                want = singles[j].feed_tokens(step_ids[j]) if act[j] else []
                if act[j]:
                    pos[j] += 1
                    fed[j].append(step_ids[j])
                if events:
                    assert out[j] == want, (capacity, j, pos[j])
            k += 1
        for j in (0, 1, 2, 4, 5):
            msg = s.finalize(j, events=False)
            assert isinstance(msg, dict)
            want = singles[j].finalize()[0]
            assert msg == want == chatparse.parse_tokens(fed[j], b, prefix=""), j
        assert s.finalize(3) == singles[3].finalize()
        assert s.finalize_all(events=False) == [None] * B
        assert s.finalize_all() == [None] * B
    # no step ever asked for events: every stream ends without its parser where the one-shot parse applies
    for capacity in (2, 1024):
        s = b.streams(4, prefix=["", "<|im_start|>assistant\n<think>\n", "", "Note:"], capacity=capacity)
        assert s.step([ids[0], ids[0], ids[0], 0], active=[True, True, True, False], events=False) is None
        assert s.step(np.array([ids[1], 0, ids[1], 0]), active=np.array([True, False, True, False]),
                      events=False) is None
        assert s.step(np.array([0, 0, 0, 0]), active=np.array([False] * 4), events=False) is None
        for i in ids[2:]:
            assert s.step(np.array([i, i, i, 0], dtype=np.int32), active=np.array([True, True, False, False]),
                          events=False) is None
        single = b.parser(prefix="")
        for i in ids:
            single.feed_tokens(i)
        msg = s.finalize(0, events=False)
        assert msg == single.finalize()[0] == chatparse.parse_tokens(ids, b, prefix="")
        assert msg["tool_calls"] and msg["reasoning_content"]
        assert s.finalize_all(events=False) == [
            None, chatparse.parse_tokens([ids[0]] + ids[2:], b, prefix="<|im_start|>assistant\n<think>\n"),
            chatparse.parse_tokens(ids[:2], b, prefix=""), b.parser(prefix="Note:").finalize()[0]]


def test_streams_that_detach_and_end_in_one_shot_never_make_a_parser(toks):
    """Streams with one prefix make their `TokenParser`s on first use (`_Parsers`); a stream that detaches
    (fresh row tables: at its first region change) and ends in one shot never uses one, so none is made for
    it, and its message is still its parser's. (Making 256 parsers costs about 2 ms of a 25 ms run.)"""
    tok = toks["bl-plain"]
    b = bind(templates.get("qwen3"), tok)
    text = "<think>\nLet me think.\n</think>\n\nThe answer is 42.\n" + GOOD_CALL + "<|im_end|>"
    ids = tok.encode(text).ids
    b.tables._rows = None
    s = b.streams(4, prefix="")
    for i in ids:
        s.step(np.array([i] * 4), events=False)
    assert s._detached, "no stream detached: the test would not test anything"
    made = [list.__getitem__(s.parsers, j) is not None for j in range(4)]
    assert made == [True, False, False, False]  # (the first is made at creation: its state starts the rows)
    assert s.finalize_all(events=False) == [chatparse.parse_tokens(ids, b, prefix="")] * 4
    assert [list.__getitem__(s.parsers, j) is not None for j in range(4)] == made


@pytest.fixture(scope="module")
def decoding_vocabs(toks):
    """Tokenizers whose decode is more than the tokens' texts joined, as (name, tokenizer to encode with, what
    `bind` takes, bind options): Metaspace (the first token drops its ▁), Metaspace with transformers'
    clean-up, special tokens skipped (skip_special_tokens=True), SentencePiece-style byte fallback with
    special tokens (runs of byte tokens decoded on their own)."""
    need("transformers")
    from transformers import PreTrainedTokenizerFast

    from token_support import metaspace_tokenizer

    meta = metaspace_tokenizer(300)
    fast = PreTrainedTokenizerFast(tokenizer_object=meta, clean_up_tokenization_spaces=True)
    return {"metaspace": (meta, meta, {}), "metaspace-cleanup": (meta, fast, {}),
            "sp-special": (toks["sp-special"], toks["sp-special"], {}),
            "sp-special-skip": (toks["sp-special"], toks["sp-special"], {"skip_special_tokens": True}),
            "bl-special-skip": (toks["bl-special"], toks["bl-special"], {"skip_special_tokens": True})}


def encodable(tok, text: str) -> list:
    """The ids of `text`, less the characters `tok` cannot encode: the Metaspace tokenizer (a Unigram of 300
    pieces, no unknown token) is trained anew each run and may leave out a rare character (é, 😀) one run and
    keep it the next."""
    try:
        return tok.encode(text).ids
    except Exception:  # noqa: BLE001 (tokenizers raises a plain Exception for an unknown character)
        pass
    known = {}
    for c in set(text):
        try:
            tok.encode(c)
            known[c] = True
        except Exception:  # noqa: BLE001
            known[c] = False
    return tok.encode("".join(c for c in text if known[c])).ids


@pytest.mark.parametrize("vocab", ["metaspace", "metaspace-cleanup", "sp-special", "sp-special-skip",
                                   "bl-special-skip"])
def test_vocabularies_whose_decode_is_more_than_a_join_end_without_events(decoding_vocabs, vocab):
    """Streams ended without events, none of whose steps asked for events (their messages may come from their
    whole generation, decoded at once), over vocabularies whose decode is more than a join (see
    `decoding_vocabs`), with random ids among the tokens (lone UTF-8 bytes, byte tokens, special tokens),
    streams that start late (their first id is not the first step's), prefixes given as ids: every message is
    the single parser's and `chatparse.parse_tokens`'s; then the same with steps of both kinds."""
    from token_support import mutate

    tok, bindable, options = decoding_vocabs[vocab]
    for name in ("qwen3", "gpt_oss"):
        b = bind(templates.get(name), bindable, **options)
        size = b.vocab.size
        for seed in range(4):
            rng = random.Random(f"{vocab} {name} {seed}")
            B = 12
            seqs = []
            for j in range(B):
                ids = encodable(tok, generation(rng, name, bad=0.1))
                kind = j % 4
                if kind == 1:
                    ids = mutate(tok, ids, rng, 6)
                elif kind == 2:
                    ids = split_into_bytes(tok, ids, rng, 0.5)
                elif kind == 3:
                    ids = [rng.randrange(size) for _ in range(rng.randint(1, 30))]
                seqs.append(ids)
            if seed % 2:
                pids = [encodable(tok, rng.choice(PREFIXES[name])) for _ in range(B)]
                s = b.streams(B, prefix_ids=pids, capacity=rng.choice([3, 7, 1024]))
                singles = [b.parser(prefix_ids=q) for q in pids]
                one_shot = (lambda j, ids: chatparse.parse_tokens(ids, b, prefix_ids=pids[j]))
            else:
                prefixes = [rng.choice(PREFIXES[name]) for _ in range(B)]
                s = b.streams(B, prefix=prefixes, capacity=rng.choice([3, 7, 1024]))
                singles = [b.parser(prefix=p) for p in prefixes]
                one_shot = parse_tokens_for(b, prefixes)
            run = Lockstep(s, singles, seqs, rng, one_shot)
            start = [rng.choice([0, 0, 1, 5]) for _ in range(B)]
            flags = schedule(rng, "all_false" if seed < 2 else "runs")
            k = 0
            while run.left():
                act = np.array([run.open(j) and k >= start[j] and rng.random() < 0.9 for j in range(B)])
                run.step(next(flags), act=act)
                k += 1
                for j in range(B):
                    if not run.ended[j] and run.pos[j] == len(seqs[j]) and rng.random() < 0.5:
                        run.end(j, seed >= 2 and rng.random() < 0.5)
            run.end_all(seed >= 2 and rng.random() < 0.5)


def test_parser_of_a_stream_ended_in_one_shot_is_refused(toks):
    """A stream ended without events whose message came from the one-shot parse never ran its parser on its
    tokens: `parser(b)` says so (ValueError naming the stream) instead of handing out a parser that is behind;
    a stream ended with its parser (events wanted) hands out its finalized parser as before."""
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    seqs = [tok.encode("<think>\nhm\n</think>\n\nHello world<|im_end|>").ids] * 3
    s = TokenStreams(b, 3, prefix="")
    for k in range(len(seqs[0])):
        assert s.step(np.array([q[k] for q in seqs]), events=False) is None
    assert s._detached, "the streams detached (else this test checks nothing)"
    want = chatparse.parse_tokens(seqs[0], b, prefix="")
    assert s.finalize(0, events=False) == want
    single = b.parser(prefix="")
    single.feed_tokens(seqs[1])
    assert s.finalize(1) == single.finalize()
    assert s.parser(1) is s.parsers[1]
    with pytest.raises(ValueError, match="stream 0 ended without events"):
        s.parser(0)
    assert s.finalize_all(events=False) == [None, None, want]
    with pytest.raises(ValueError, match="stream 2 ended without events"):
        s.parser(2)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_templates_without_events_match_the_reference(toks, data):
    """The differential claim for steps without events: templates and texts drawn as the differential suite
    draws them (tests/strategies.py), stepped as byte-level token ids with or without events and ended without
    events, give each stream transformers' reference's message for its decoded text, or its failure."""
    from harness import RefTimeout, run_reference
    from hypothesis import assume
    from strategies import compiles, templates as drawn_templates, texts_for

    template = data.draw(drawn_templates())
    assume(compiles(template))
    tok = toks["bl-plain"]  # (byte-level: any text is ids)
    b = bind(template, tok)
    seqs, flags = draw_steps(data, tok, template, texts_for)
    s = TokenStreams(b, len(seqs), prefix="", capacity=data.draw(st.sampled_from([3, 1024])))
    step_all(s, seqs, flags)
    for j, ids in enumerate(seqs):
        try:
            ref = run_reference(template, b.decode(ids), prefix="")
        except RefTimeout:
            assume(False)
        got = outcome(lambda: s.finalize(j, events=False))
        assert got == ("ok", ref[1]) if ref[0] == "ok" else same_failure(got, ref[1]), (j, got, ref[:2])
