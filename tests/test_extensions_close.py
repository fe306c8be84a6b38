"""The ``close_json_end`` format extension (issue #17 item 2): a region that also closes right after the JSON
value its body starts with, so that text after a tool call goes on to the implicit field.

Checked against plain-Python statements of its semantics (`oracle_end`: ``json.JSONDecoder().raw_decode``;
`oracle_message`: a few lines of ``str.find``/``re.search`` that cut a text into regions) with
hypothesis-generated texts and chunkings: the incremental tracker (runtime/values/json_end.py) under any cut; whole
parses one-shot and streamed in both dialects; per token with a tokenizer trained here (TokenParser and
TokenStreams). The motivating families' real outputs (tests/ext_close_templates.py) give the messages peers
give. The JavaScript runtime runs the same templates through the ``ext_*`` vectors.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from deps import need_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import ResponseParser, compile_template, parse_response
from chatparse.compiler.validate import load_template
from chatparse.compiler.writer import dumps
from chatparse.runtime.values import extensions
from chatparse.runtime.values.json_end import MAX_DEPTH, JsonEnd
from chatparse.runtime.tables.loader import compiled_from_bytes, loads
from corpus_cases import show, strict_equal
from ext_close_templates import EXTRA_CASES, FAMILIES
from harness import check_well_formed, normalize, outcome_of, readme_example, stream_in

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ============================================================================================== the oracles

_WS = json.decoder.WHITESPACE.match


def _depth(v) -> int:
    """How many containers deep `v` nests (iteratively: deep values are what it is for)."""
    deepest, todo = 0, [(v, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d + 1)
            todo += [(x, d + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


def oracle_end(body: str):
    """Where the JSON value `body` starts with ends (an offset into `body`), or None: Python's own decoder after
    JSON whitespace, with the tracker's depth bound."""
    start = _WS(body).end()
    try:
        value, end = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError:
        return None
    return end if _depth(value) <= MAX_DEPTH else None


OPEN = "[C]"


def region_template(close) -> dict:
    """``[C]`` opens a tool call that closes at the end of its JSON value (and at `close`, a literal or a
    pattern, if given); content is implicit, its pieces joined with '|'."""
    calls = {"open": OPEN, "close_json_end": True, "repeats": True, "content": "json"}
    if close is not None:
        calls.update({"close": close[1]} if close[0] == "literal" else {"close_pattern": close[1]})
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"tool_calls": calls, "content": {"repeats": True, "join": "|"}}}


def oracle_message(text: str, close, dialect: str):
    """The message of `region_template(close)` for `text`, stated plainly: outside a call, the next ``[C]``
    opens one; a call's body runs to the earlier of the explicit close's first match and the end of its JSON
    value (the explicit close when both start at one offset), or to the end of the text; the body is
    ``json.loads``-ed. Returns ("ok", message) or ("error", exception class name): the default dialect raises
    at the first bad body; the vllm dialect drops it and raises it only after the whole text."""
    close_re = None if close is None else re.compile(re.escape(close[1]) if close[0] == "literal" else close[1],
                                                     re.DOTALL)
    msg, failed = {"role": "assistant"}, []  # (keys in the order values are first stored)
    i, n = 0, len(text)
    while i < n:
        k = text.find(OPEN, i)
        seg = text[i:] if k < 0 else text[i:k]
        if seg:
            msg["content"] = seg.strip() if "content" not in msg else msg["content"] + "|" + seg.strip()
        if k < 0:
            break
        b = k + len(OPEN)
        j = oracle_end(text[b:])
        m = close_re.search(text, b) if close_re is not None else None
        if m is not None and (j is None or m.start() <= b + j):
            body, i = text[b:m.start()], m.end()
        elif j is not None:
            body, i = text[b:b + j], b + j
        else:
            body, i = text[b:], n
        try:
            msg.setdefault("tool_calls", []).append(json.loads(body))
        except ValueError:
            if dialect == "transformers":
                return ("error", "ValueError")
            failed.append(body)
    if failed:
        return ("error", "ValueError")
    return ("ok", {k: v for k, v in msg.items() if k == "role" or v})


# ============================================================================================== generators

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.sampled_from('ab "\\/{}[]:,\n\u00e9\U0001F600\x01'), max_size=6),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text("abk", max_size=2), kids, max_size=3),
    max_leaves=8)

JUNK = ["{", "}", "[", "]", '"', "\\", ",", ":", "1", "0", ".", "e", "E", "-", "+", " ", "\n", "\t", "true", "nul",
        "NaN", "-Infinity", "Inf", "\\u00e9", "\\u12", "\x01", "x", "</s>", " </s>", "</", "[C]", "[C", "é"]
PROSE = [" hi ", "text", "\n\n", "Would you like more?", "{not json}", "[1, 2]"]


@st.composite
def json_text(draw) -> str:
    """A JSON document as a model might write it (spacing, indentation, escapes), maybe damaged."""
    v = draw(JSON_VALUES)
    s = json.dumps(v, indent=draw(st.sampled_from([None, 1])), ensure_ascii=draw(st.booleans()),
                   separators=draw(st.sampled_from([None, (",", ":"), (" , ", " : ")])))
    s = draw(st.sampled_from(["", " ", "\n", " \t"])) + s
    if draw(st.integers(0, 4)) == 0 and s:  # damage it
        at = draw(st.integers(0, len(s) - 1))
        s = s[:at] + draw(st.sampled_from(JUNK)) + s[at + draw(st.integers(0, 1)):]
    return s


bodies = st.one_of(json_text(), st.lists(st.sampled_from(JUNK), max_size=10).map("".join),
                   st.tuples(json_text(), st.lists(st.sampled_from(JUNK + PROSE), max_size=3).map("".join))
                   .map("".join))

_call = json_text().map(lambda s: OPEN + s)  # a call, mostly well-formed
texts = st.lists(st.one_of(_call, _call, st.just(OPEN), st.sampled_from(PROSE + ["</s>", " </s>", "1.", "2e+"]),
                           json_text(), st.sampled_from(JUNK)), max_size=10).map("".join)

CLOSES = [None, ("literal", "</s>"), ("pattern", r"\s*</s>")]


def cut(text: str, cuts) -> list[str]:
    cs = sorted(set(c % (len(text) + 1) for c in cuts))
    return [text[a:b] for a, b in zip([0] + cs, cs + [len(text)])]


# ============================================================================================== the tracker


@SETTINGS
@given(bodies, st.lists(st.integers(0, 10**6), max_size=6))
def test_the_tracker_ends_where_pythons_decoder_ends(body, cuts):
    """Fed in any pieces, the tracker says what raw_decode says; and at every cut, what it calls held (not yet
    known to be body) starts at or before the final end, and once decided it is exactly that end."""
    want = oracle_end(body)
    t = JsonEnd(0)
    for piece_end in sorted(c % (len(body) + 1) for c in cuts) + [len(body)]:
        t.advance(body, 0, piece_end)
        h = t.hold()
        if want is not None:
            assert h <= want, (body, piece_end, h)
            if t.decided():
                assert t.end == want
        elif t.decided():
            assert t.dead, body
    t.finish()
    assert (None if t.dead else t.end) == want, body


@pytest.mark.parametrize("body, end", [
    ("12.x", 2), ("1e+", 1), ("1.5e", 3), ("01", 1), ("-0.0E-7,", 7), ("nullnull", 4), ("-Infinity!", 9),
    ("NaN", 3), ('"a\\u00e9"z', 9), ('  {"a": [1, {}]} tail', 16), ("[1.]", None), ("[01]", None), ("tru", None),
    ('"\x01"', None), ("-", None), ("[" * MAX_DEPTH + "]" * MAX_DEPTH, 2 * MAX_DEPTH),
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), None), ("\u00a0[]", None), ("", None)])
def test_the_tracker_on_the_edges_of_the_json_grammar(body, end):
    assert oracle_end(body) == end  # (the statement itself, on the cases the docs name)
    t = JsonEnd(0)
    for i in range(len(body)):
        t.advance(body, 0, i + 1)
    t.finish()
    assert (None if t.dead else t.end) == end


def _count_tracker_reads(monkeypatch) -> list:
    """Count the characters the tracker reads (`json_end`'s C-level runs of string, whitespace and digit
    characters: the characters each run covers; and one per character stepped in Python, `JsonEnd._step`) into
    the returned one-item list: work done, which no machine's speed or load changes."""
    from chatparse.runtime.values import json_end

    read = [0]

    def counted(run):
        def counting(text, i, n):
            m = run(text, i, n)
            read[0] += m.end() - i
            return m
        return counting

    for name in ("_str_run", "_ws_run", "_digit_run"):
        monkeypatch.setattr(json_end, name, counted(getattr(json_end, name)))
    real_step = JsonEnd._step

    def step(self, c, at):
        read[0] += 1
        return real_step(self, c, at)

    monkeypatch.setattr(JsonEnd, "_step", step)
    return read


def test_the_tracker_keeps_bounded_state_and_flat_cost(monkeypatch):
    """Memory: one entry per open container (at most MAX_DEPTH), nothing per character read. Cost: reading a
    long value character by character reads each character once, as reading a short one does: counted (the
    characters the tracker reads, `_count_tracker_reads`), not timed."""
    t = JsonEnd(0)
    body = "[" * 5000
    t.advance(body, 0, len(body))
    assert t.dead and t.stack == []
    read = _count_tracker_reads(monkeypatch)

    def per_char(n):
        s = '{"k": "' + "x" * n + '", "a": [' + "1, " * n + "2]}"
        t = JsonEnd(0)
        read[0] = 0
        for i in range(len(s)):
            t.advance(s, 0, i + 1)
        assert t.end == len(s)
        return read[0] / len(s)
    # (1.25 each here: a number's end is stepped twice, as the number's and as the array's next character)
    small, big = per_char(2000), per_char(40000)
    assert big <= 2 and big <= small * 1.01, (small, big)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))  # (a node start-up each)
@given(st.lists(bodies, min_size=150, max_size=150), st.lists(st.integers(0, 10**6), max_size=4))
def test_the_javascript_tracker_ends_where_pythons_decoder_ends(tmp_path_factory, batch, cuts):
    """js/chatparse.mjs's JsonEnd, fed the same bodies in the same pieces (astral characters are two UTF-16
    units there: bodies are kept to the BMP so that offsets compare), says what raw_decode says; plus the
    depth bound, exactly at MAX_DEPTH and one past it."""
    need_program("node", "the JavaScript reader")
    batch = [b for b in batch if all(ord(c) < 0x10000 for c in b)]
    batch += ["[" * MAX_DEPTH + "]" * MAX_DEPTH, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + " x"]
    tmp = tmp_path_factory.mktemp("jsonend")
    cases = [[b, sorted(c % (len(b) + 1) for c in cuts)] for b in batch]
    (tmp / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp / "run.mjs").write_text(
        f"import {{ JsonEnd }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const out = JSON.parse(readFileSync(process.argv[2], 'utf8')).map(([b, cuts]) => {\n"
        "  const t = new JsonEnd(0); for (const c of [...cuts, b.length]) t.advance(b, 0, c); t.finish();\n"
        "  return t.dead ? null : t.end; });\n"
        "console.log(JSON.stringify(out));\n", encoding="utf-8")
    proc = subprocess.run([NODE, str(tmp / "run.mjs"), str(tmp / "cases.json")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [oracle_end(b) for b in batch]


# ============================================================================================== whole parses


_stream, _outcome = stream_in, outcome_of  # (tests/harness.py)


@SETTINGS
@given(texts, st.sampled_from(CLOSES), st.lists(st.integers(0, 10**6), max_size=8), st.booleans())
def test_parses_equal_the_plain_statement_one_shot_and_streamed(text, close, cuts, vllm):
    """One-shot and streamed in any chunking, in either dialect: the message is the plain statement's, the
    events are the same whatever the chunking (and flat, ordered regions)."""
    dialect = "vllm" if vllm else "transformers"
    template = region_template(close)
    want = oracle_message(text, close, dialect)
    try:
        got = ("ok", parse_response(text, template, prefix="", dialect=dialect))
    except ValueError:
        got = ("error", "ValueError")
    assert got[0] == want[0] and (got[0] == "error" or strict_equal(got[1], want[1])), (text, show(got), show(want))
    if dialect == "transformers" and want[0] == "error":
        for chunks in ([text], cut(text, cuts)):
            with pytest.raises(ValueError):
                _stream(template, chunks, dialect)
        return
    whole_msg, whole_events = _stream(template, [text], dialect)
    msg, events = _stream(template, cut(text, cuts), dialect)
    if dialect == "transformers":  # (the harness's check does not know region_malformed events)
        check_well_formed(events)
    assert normalize(events) == normalize(whole_events), text
    assert strict_equal(msg, whole_msg)
    if want[0] == "ok":
        assert strict_equal(msg, want[1])


@FEW
@given(texts, st.sampled_from(CLOSES))
def test_every_path_of_the_one_shot_parse_agrees(text, close):
    """The one-shot paths (the candidate scanner, the automaton; the lean path does not take these templates)
    give the streaming parser's answer."""
    from chatparse.runtime.oneshot import parse as oneshot

    template = region_template(close)
    compiled = compile_template(template)
    want = _outcome(lambda: _stream(template, [text], "transformers")[0])
    old = oneshot.SCAN_SECONDS, oneshot.LEAN
    try:
        for lean, budget in ((True, old[0]), (False, old[0]), (True, -1.0)):
            oneshot.LEAN, oneshot.SCAN_SECONDS = lean, budget
            assert _outcome(lambda: compiled.parse(text, prefix="")) == want, (lean, budget)
    finally:
        oneshot.SCAN_SECONDS, oneshot.LEAN = old


def test_the_explicit_close_wins_where_it_starts_first_or_at_the_same_offset():
    t = region_template(("pattern", r"\s*</s>"))
    # at the value's end: the explicit close takes its whitespace and '</s>'
    p = ResponseParser(t, prefix="", dialect="vllm")
    evs = p.feed('[C] [1, 2]  </s> after')
    closes = [e for e in evs if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert [(e["start"], e["end"], e["value"]) for e in closes] == [(10, 16, [1, 2])]
    # before it: inside a string, so the body is cut there and fails
    with pytest.raises(ValueError):
        parse_response('[C] ["a </s>"] after', t, prefix="")
    # after it: the value's end, an empty span
    evs = ResponseParser(t, prefix="", dialect="vllm").feed('[C] {"a": 1} x </s>')
    closes = [e for e in evs if e["type"] == "region_close" and e["field"] == "tool_calls"]
    assert [(e["start"], e["end"]) for e in closes] == [(12, 12)]


def test_a_top_level_number_waits_for_the_character_that_ends_it():
    """``12`` then ``.``: the '.' is neither body nor content until the next character says which."""
    t = region_template(None)
    p = ResponseParser(t, prefix="")
    assert [e.get("text") for e in p.feed("[C] 12")] == [None, " 12"]
    assert p.feed(".") == []  # held
    evs = p.feed("x")
    assert [e["type"] for e in evs] == ["region_close", "region_open", "region_chunk"]
    assert evs[0]["value"] == 12 and evs[2]["text"] == ".x"
    p = ResponseParser(t, prefix="")
    p.feed("[C] 12")
    p.feed(".")
    assert p.feed("5")[0]["text"] == ".5"
    assert p.finalize()[0]["tool_calls"] == [12.5]


def test_a_body_that_is_not_json_runs_to_the_other_close_or_the_end():
    t = region_template(("literal", "</s>"))
    with pytest.raises(ValueError, match="could not parse region as JSON"):
        parse_response("[C] {x: 1} more</s>after", t, prefix="")
    p = ResponseParser(t, prefix="", dialect="vllm")
    evs = p.feed("[C] {x: 1} more</s>after")
    bad = [e for e in evs if e["type"] == "region_malformed"]
    assert len(bad) == 1 and (bad[0]["start"], bad[0]["end"]) == (15, 19)
    assert p.finalize()[0] == {"role": "assistant", "content": "after"}


def test_a_fork_and_a_probe_leave_the_tracker_alone():
    t = region_template(None)
    p = ResponseParser(t, prefix="")
    p.feed('[C] {"a": [1, ')
    fork = p._core.fork()
    fork.feed("2]} tail")
    assert fork.finish()[0]["tool_calls"] == [{"a": [1, 2]}]
    p.feed("3]}")
    assert p.finalize()[0]["tool_calls"] == [{"a": [1, 3]}]


def _count_search_reads(monkeypatch) -> list:
    """Count the characters the delimiter searches read (`Mode.skip_to`, `skip_within`: from where a search
    starts to the offset it returns, in every mode) into the returned one-item list."""
    from chatparse.runtime.oneshot import parse as oneshot
    from chatparse.runtime.stream import scanner
    from chatparse.runtime.tables.layout import Mode

    looked = [0]
    real_skip, real_within = Mode.skip_to, scanner.skip_within

    def skip_to(mode, text, i):
        j = real_skip(mode, text, i)
        looked[0] += min(j, len(text)) - i
        return j

    def within(mode, text, i, stop):
        j = real_within(mode, text, i, stop)
        looked[0] += min(j, len(text)) - i
        return j

    monkeypatch.setattr(Mode, "skip_to", skip_to)
    monkeypatch.setattr(scanner, "skip_within", within)
    monkeypatch.setattr(oneshot, "skip_within", within)
    return looked


def test_long_outputs_cost_flat_per_character(monkeypatch):
    """Many calls with text after each, and one long call, one-shot and streamed: the work per character does
    not grow with the length (a delimiter search past a value's end stops there, `Scanner.stop`). Counted, not
    timed: the characters the delimiter searches and the JSON-end tracker read. The one-shot parse picks its
    path by the clock (a `regex` timeout; its candidate paths' deadline, past which the automaton redoes the
    parse), so each path is counted with the clock out of the choice: no deadline, and a deadline already
    past."""
    from chatparse.runtime.oneshot import parse as oneshot

    read, looked = _count_tracker_reads(monkeypatch), _count_search_reads(monkeypatch)
    monkeypatch.setattr(oneshot, "MATCH_TIMEOUT", 3600.0)
    monkeypatch.setattr(oneshot, "SCAN_SECONDS_PER_CHAR", 0.0)
    t = region_template(("pattern", r"\s*</s>"))

    def per_char(n, deadline):
        monkeypatch.setattr(oneshot, "SCAN_SECONDS", deadline)
        text = ('[C] {"k": [1, "x y"]} some words after it\n' * n) + "[C] [" + "1, " * (20 * n) + "2] end"
        read[0] = looked[0] = 0
        msg = parse_response(text, t, prefix="")
        one = (read[0] + looked[0]) / len(text)
        read[0] = looked[0] = 0
        p = ResponseParser(t, prefix="")
        for i in range(0, len(text), 64):
            p.feed(text[i:i + 64])
        assert p.finalize()[0] == msg and len(msg["tool_calls"]) == n + 1
        return one, (read[0] + looked[0]) / len(text)

    # (about 1.96 characters read per character each way: the tracker reads a call's value, the searches the rest
    # and a few characters past each value's end)
    for deadline in (3600.0, -1.0):
        small, big = per_char(50, deadline), per_char(1000, deadline)
        for way, s, b in zip(("one-shot", "streamed"), small, big):
            assert b <= 3 and b <= s * 1.05, (deadline, way, s, b)


def test_the_close_search_stops_at_the_end_of_the_value(monkeypatch):
    """Work, not time: in a call's mode the delimiter search reads up to the value's end (plus the prefilter's
    look-ahead), not the rest of the text, so many calls with text after them cost linear work one-shot and
    streamed. Counted: characters the call mode's candidate searches are given to look over."""
    from chatparse.runtime.oneshot import parse as oneshot
    from chatparse.runtime.stream import scanner
    from chatparse.runtime.tables.layout import Mode

    looked = [0]
    real_skip, real_within = Mode.skip_to, scanner.skip_within
    calls_mode = []

    def skip_to(mode, text, i):
        if mode in calls_mode:
            looked[0] += len(text) - i
        return real_skip(mode, text, i)

    def within(mode, text, i, stop):
        if mode in calls_mode:
            looked[0] += min(len(text), stop + 1 + 3) - i
        return real_within(mode, text, i, stop)

    monkeypatch.setattr(Mode, "skip_to", skip_to)
    monkeypatch.setattr(scanner, "skip_within", within)
    monkeypatch.setattr(oneshot, "skip_within", within)
    for close in CLOSES[1:]:
        compiled = compile_template(region_template(close))
        calls_mode[:] = [compiled.tables.modes[1]]
        text = '[C] {"k": [1, "x y"]} some words after it\n' * 2000
        for run in (lambda: compiled.parse(text, prefix=""), lambda: _stream(compiled, [text[i:i + 512] for i in
                                                                                 range(0, len(text), 512)],
                                                                        "transformers")):
            looked[0] = 0
            run()
            assert looked[0] < 2 * len(text), (close, looked[0], len(text))


# ============================================================================================== per token


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE trained here on texts of these templates, with ``[C]`` and ``</s>`` as special tokens
    (whole-delimiter tokens) and JSON split into ordinary tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    corpus = []
    for _ in range(400):
        v = {"name": rng.choice(["get_weather", "search", "f"]), "arguments": {"city": rng.choice(["Paris", "東京"]),
                                                                             "n": rng.randint(-99, 99) / 4}}
        corpus.append(rng.choice(PROSE) + OPEN + " " + json.dumps([v]) + rng.choice(PROSE + ["</s>"]))
    for _, (_, cases, _) in FAMILIES.items():
        corpus += [c[2] for c in cases]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[OPEN, "</s>"],
        show_progress=False))
    return tok


def _token_run(binding, ids, dialect):
    p = binding.parser(prefix="", dialect=dialect)
    events = list(p.initial_events)
    for i in ids:
        events += p.feed_tokens(int(i))
    msg, final = p.finalize()
    return msg, events + final


@FEW
@given(texts, st.sampled_from(CLOSES), st.booleans(), st.randoms(use_true_random=False))
def test_per_token_parsing_gives_the_text_parsers_events(tokenizer, text, close, vllm, rng):
    """Token by token (some tokens split into bytes, so characters and delimiters straddle tokens), the events
    and message of feeding the decoded text; several streams stepped together give each stream's answer."""
    from token_support import split_into_bytes

    dialect = "vllm" if vllm else "transformers"
    template = region_template(close)
    binding = chatparse.bind(template, tokenizer)
    ids = tokenizer.encode(text).ids
    if rng.random() < 0.5:
        ids = split_into_bytes(tokenizer, ids, rng, 0.3)
    full = tokenizer.decode(ids, skip_special_tokens=False)
    want = _outcome(lambda: _stream(template, [full], dialect))
    got = _outcome(lambda: _token_run(binding, ids, dialect))
    assert got[0] == want[0], text
    if got[0] == "ok":
        assert strict_equal(got[1], want[1]) and normalize(strip(got[2])) == normalize(want[2])
    # TokenStreams: two streams, the same ids and a shifted copy
    if want[0] == "ok":
        other = ids[1:] + ids[:1]
        other_want = _outcome(lambda: _stream(template, [tokenizer.decode(other, skip_special_tokens=False)],
                                              dialect))
        n = max(len(ids), len(other))
        s = chatparse.TokenStreams(binding, 2, prefix="", dialect=dialect)
        for k in range(n):
            active = np.array([k < len(ids), k < len(other)])
            s.step(np.array([ids[k] if k < len(ids) else 0, other[k] if k < len(other) else 0]), active)
        for b, (w, name) in enumerate(((want, "ids"), (other_want, "other"))):
            r = _outcome(lambda: s.finalize(b))
            assert r[0] == w[0], name
            if r[0] == "ok":
                assert strict_equal(r[1], w[1]), name


def test_tokens_inside_the_json_value_take_the_json_token_path(tokenizer, monkeypatch):
    """Inside a close_json_end region, a token whose text is complete and can begin no delimiter goes to the
    core as it is (`TokenParser._json_token`), not through the decoder and the general path: most tokens of a
    JSON call do, and the events and message are those of feeding the text."""
    from chatparse.runtime.tokens import parser as token_parser

    taken = []
    real = token_parser.TokenParser._json_token
    monkeypatch.setattr(token_parser.TokenParser, "_json_token",
                        lambda self, text: taken.append(text) or real(self, text))
    value = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris", "n": 2.5, "tags": ["a", "b"]}}])
    text = "Hello " + OPEN + " " + value + " bye"
    ids = tokenizer.encode(text).ids
    for close in CLOSES:
        template = region_template(close)
        binding = chatparse.bind(template, tokenizer)
        for dialect in ("vllm", "transformers"):
            taken.clear()
            got = _token_run(binding, ids, dialect)
            want = _stream(template, [tokenizer.decode(ids, skip_special_tokens=False)], dialect)
            assert strict_equal(got[0], want[0]) and normalize(strip(got[1])) == normalize(want[1])
            assert "".join(taken) in text and len(taken) > len(tokenizer.encode(value).ids) // 2, (close, taken)


def strip(events):
    return [{k: v for k, v in e.items() if k not in ("open", "span", "token_start", "token_end")} for e in events]


# ============================================================================================== families


def _cases():
    for name, (template, cases, _) in FAMILIES.items():
        for case, prefix, output, tools, message in cases:
            yield pytest.param(name, template, prefix, output, tools, message, id=f"{name}-{case}")


@pytest.mark.parametrize("name, template, prefix, output, tools, message", list(_cases()))
def test_motivating_family_outputs_parse_as_peers_parse_them(name, template, prefix, output, tools, message,
                                                            tokenizer):
    for dialect in ("transformers", "vllm"):
        got = parse_response(output, template, prefix=prefix, tools=tools, dialect=dialect)
        assert strict_equal(got, message), (dialect, show(got))
        for k in (1, 3, 7):
            p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
            for i in range(0, len(output), k):
                p.feed(output[i:i + k])
            assert strict_equal(p.finalize()[0], message), (dialect, k)
        binding = chatparse.bind(template, tokenizer)
        p = binding.parser(prefix=prefix, tools=tools, dialect=dialect)
        for i in tokenizer.encode(output).ids:
            p.feed_tokens(i)
        assert strict_equal(p.finalize()[0], message), (dialect, "tokens")


@pytest.mark.parametrize("name", sorted(EXTRA_CASES))
def test_more_outputs_give_the_same_answer_however_they_are_fed(name, tokenizer):
    """The vectors' extra texts (tests/ext_close_templates.py): one-shot, character by character and per token,
    in both dialects, the same message or the same error."""
    template = FAMILIES[name][0]
    binding = chatparse.bind(template, tokenizer)
    for _, prefix, output, tools in EXTRA_CASES[name]:
        for dialect in ("transformers", "vllm"):
            want = _outcome(lambda: parse_response(output, template, prefix=prefix, tools=tools, dialect=dialect))

            def chars():
                p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
                for c in output:
                    p.feed(c)
                msg = p.finalize()[0]
                if dialect == "vllm":  # (parse_response raises a malformed region's error after the parse)
                    chatparse.parse_response(output, template, prefix=prefix, tools=tools, dialect=dialect)
                return msg

            def tokens():
                p = binding.parser(prefix=prefix, tools=tools, dialect=dialect)
                for i in tokenizer.encode(output).ids:
                    p.feed_tokens(i)
                return p.finalize()[0]

            assert _outcome(chars)[:2] == want[:2], (output, dialect)
            if want[0] == "ok":
                assert strict_equal(_outcome(tokens)[1], want[1]), (output, dialect)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_reference_refuses_these_templates_by_itself(name):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    with pytest.raises(ValueError, match="unknown keys"):
        Reference(FAMILIES[name][0], prefix="")


def test_the_base_template_fails_where_the_extension_parses():
    """Without the key (the inexpressible.json template as it is), the reference and chatparse both keep the
    trailing prose inside the call's body, which then fails to parse: what the extension is for."""
    from transformers.utils.chat_parsing import parse_response as reference_parse

    template, cases, _ = FAMILIES["phi4_mini_json_end"]
    base = json.loads(json.dumps(template))
    del base["fields"]["tool_calls"]["close_json_end"]
    _, prefix, output, _, _ = cases[0]
    for parse in (reference_parse, chatparse.parse_response):
        with pytest.raises(ValueError):
            parse(output, base, prefix=prefix)


# ============================================================================================== the format


def test_the_key_is_validated_and_listed():
    t = region_template(None)
    spec = load_template(t)
    assert spec["version"] == 2 and spec["extensions"] == ["close_json_end"]
    assert spec["fields"][0]["close_json_end"] is True
    off = json.loads(json.dumps(t))
    off["fields"]["tool_calls"]["close_json_end"] = False  # the default: not an extension use
    assert load_template(off)["version"] == 1 and "close_json_end" not in load_template(off)["fields"][0]
    bad = json.loads(json.dumps(t))
    bad["fields"]["tool_calls"]["close_json_end"] = 1
    with pytest.raises(ValueError, match="Field 'tool_calls': 'close_json_end' must be a bool.*close_json_end"):
        load_template(bad)
    implicit = json.loads(json.dumps(t))
    implicit["fields"]["content"]["close_json_end"] = True
    with pytest.raises(ValueError, match="Field 'content': 'close_json_end' needs an explicit 'open'"):
        load_template(implicit)


def test_tables_round_trip_and_a_reader_without_the_extension_refuses(monkeypatch):
    compiled = compile_template(region_template(("literal", "</s>")))
    data = dumps(compiled.raw_tables)
    again = compiled_from_bytes(data)
    assert parse_response('[C] [1] x', again, prefix="") == {"role": "assistant", "content": "x",
                                                             "tool_calls": [[1]]}
    monkeypatch.delitem(extensions.EXTENSIONS, "close_json_end")  # a reader that knows every other extension
    with pytest.raises(ValueError, match="table uses format extension .close_json_end., which this reader does "
                                         "not support"):
        loads(data)


def test_grammar_export_refuses_and_check_does_not_crash():
    from chatparse.authoring.checks import run_checks

    for name, (template, _, _) in FAMILIES.items():
        compiled = compile_template(template)
        with pytest.raises(ValueError, match="grammar export is not supported for format extension"):
            compiled.grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
        run_checks(template)


def test_the_readme_example_runs_as_written():
    printed, shown = readme_example("Text after a tool call that has no closing token")
    assert printed == shown


def test_the_extension_is_documented():
    fmt = (ROOT / "FORMAT.md").read_text(encoding="utf-8")
    readme = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    js = (ROOT / "js" / "chatparse.mjs").read_text(encoding="utf-8")
    assert "#### `close_json_end`" in fmt and "* `close_json_end`" in readme
    assert "  close_json_end: {" in js
