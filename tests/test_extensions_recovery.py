"""The ``on_error`` format extension (issue #17 item 2): per-field recovery from a value that fails to parse -
``"content"`` keeps the region's raw text as implicit-field text, ``"drop"`` discards the region - and the parse
goes on, in both dialects, with a ``region_malformed`` event saying so.

Checked against a plain-Python statement of its semantics (`oracle_message`: ``str.find``/``re.search`` cut the
text into regions, ``json.loads`` parses each body, the recovered text is joined into content) with
hypothesis-generated texts and chunkings: one-shot and streamed in both dialects, per token with a tokenizer
trained here, and together with ``close_json_end``. The motivating families' malformed outputs
(tests/ext_close_templates.py) give what servers give: the text kept as content. The JavaScript runtime runs
the same templates through the ``ext_on_error`` vector.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import ResponseParser, compile_template, parse_response
from chatparse.compiler.validate import load_template
from corpus_cases import show, strict_equal
from ext_close_templates import FAMILIES, RECOVERY_CASES
from harness import normalize, outcome_of, readme_example, stream_in
from test_extensions_close import oracle_end

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OPEN, CLOSE = "<c>", "</c>"


def template(on_error, json_end=False, close=True) -> dict:
    """``<c>..</c>`` tool calls (JSON; with `json_end`, also closed where the value ends; without `close`, no
    explicit close) with ``on_error`` = `on_error` (None: the key left out); content implicit, joined by '|'."""
    calls = {"open": OPEN, "repeats": True, "content": "json"}
    if close:
        calls["close"] = CLOSE
    if json_end:
        calls["close_json_end"] = True
    if on_error is not None:
        calls["on_error"] = on_error
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"tool_calls": calls, "content": {"repeats": True, "join": "|"}}}


def oracle_message(text: str, on_error, dialect: str, json_end=False, close=True):
    """The message of `template(on_error, json_end, close)` for `text`, stated plainly. Outside a call, the next
    ``<c>`` opens one; its body runs to the first ``</c>`` (or, with `json_end`, the end of its JSON value when
    that comes first: `oracle_end`), else to the end. A body that ``json.loads`` refuses: with "content", the
    call's raw text (``<c>``, body, the close as written) is one more piece of content; with "drop", nothing;
    else the default dialect raises and the vllm dialect leaves it out and raises after the whole text.
    Content pieces are stripped and joined with '|'; keys in the order first stored; empty values dropped."""
    msg, failed = {"role": "assistant"}, []
    def content(piece):
        msg["content"] = piece.strip() if "content" not in msg else msg["content"] + "|" + piece.strip()
    i, n = 0, len(text)
    while i < n:
        k = text.find(OPEN, i)
        seg = text[i:] if k < 0 else text[i:k]
        if seg:
            content(seg)
        if k < 0:
            break
        b = k + len(OPEN)
        c = text.find(CLOSE, b) if close else -1
        j = oracle_end(text[b:]) if json_end else None
        if c >= 0 and (j is None or c <= b + j):
            body, closing, i = text[b:c], CLOSE, c + len(CLOSE)
        elif j is not None:
            body, closing, i = text[b:b + j], "", b + j
        else:
            body, closing, i = text[b:], "", n
        try:
            value = json.loads(body)
        except ValueError:
            if on_error == "content":
                content(OPEN + body + closing)
            elif on_error is None:
                if dialect == "transformers":
                    return ("error", "ValueError")
                failed.append(body)
            continue
        msg.setdefault("tool_calls", []).append(value)
    if failed:
        return ("error", "ValueError")
    return ("ok", {k: v for k, v in msg.items() if k == "role" or v})


# ============================================================================================== generators

GOOD = ['{"a": 1}', "[1, 2]", ' "s" ', "12", "true", '{"k": [null, {"x": "</"}]}']
BAD = ["{bad}", "[1,", "", " ", "nope", '{"a": }', "<c>", "1 2", '"</c']
PROSE = ["hi", " there ", "\n", "é😀", "<", "</", "c>", "|"]

texts = st.lists(st.one_of(
    st.tuples(st.just(OPEN), st.sampled_from(GOOD + BAD), st.sampled_from([CLOSE, CLOSE, "", " tail"]))
    .map("".join),
    st.sampled_from(PROSE + [OPEN, CLOSE])), max_size=8).map("".join)
MODES = [None, "content", "drop"]


def cut(text: str, cuts) -> list[str]:
    cs = sorted(set(c % (len(text) + 1) for c in cuts))
    return [text[a:b] for a, b in zip([0] + cs, cs + [len(text)])]


_stream, _outcome = stream_in, outcome_of  # (tests/harness.py)


def _one_shot(text, tpl, dialect):
    try:
        return ("ok", parse_response(text, tpl, prefix="", dialect=dialect))
    except ValueError:
        return ("error", "ValueError")


# ============================================================================================== whole parses


@SETTINGS
@given(texts, st.sampled_from(MODES), st.booleans(), st.booleans(), st.lists(st.integers(0, 10**6), max_size=8))
def test_parses_equal_the_plain_statement(text, on_error, json_end, vllm, cuts):
    """One-shot and streamed in any chunking, in either dialect, with and without close_json_end: the message is
    the plain statement's, and the events do not depend on the chunking."""
    dialect = "vllm" if vllm else "transformers"
    tpl = template(on_error, json_end)
    want = oracle_message(text, on_error, dialect, json_end)
    got = _one_shot(text, tpl, dialect)
    assert got[0] == want[0] and (got[0] == "error" or strict_equal(got[1], want[1])), (text, show(got), show(want))
    whole = _outcome(lambda: _stream(tpl, [text], dialect))
    pieces = _outcome(lambda: _stream(tpl, cut(text, cuts), dialect))
    assert whole[0] == pieces[0]
    if whole[0] == "ok":
        assert strict_equal(whole[1], pieces[1]) and normalize(whole[2]) == normalize(pieces[2])
        if want[0] == "ok":
            assert strict_equal(whole[1], want[1])
        recovered = [e for e in whole[2] if e["type"] == "region_malformed" and "recovered" in e]
        assert all(e["recovered"] == on_error for e in recovered)
        if on_error is not None:  # every failed region is recovered, and nothing is raised
            assert want[0] == "ok" and len(recovered) == sum(e["type"] == "region_malformed" for e in whole[2])


@FEW
@given(texts, st.sampled_from(MODES))
def test_every_path_of_the_one_shot_parse_agrees(text, on_error):
    from chatparse.runtime.oneshot import parse as oneshot

    tpl = template(on_error)
    compiled = compile_template(tpl)
    want = _outcome(lambda: _stream(tpl, [text], "transformers")[0])
    old = oneshot.SCAN_SECONDS, oneshot.LEAN
    try:
        for lean, budget in ((True, old[0]), (False, old[0]), (True, -1.0)):
            oneshot.LEAN, oneshot.SCAN_SECONDS = lean, budget
            assert _outcome(lambda: compiled.parse(text, prefix="")) == want, (lean, budget)
    finally:
        oneshot.SCAN_SECONDS, oneshot.LEAN = old


def test_the_events_of_a_recovered_region():
    tpl = template("content")
    text = 'a<c>{bad}</c>b'
    p = ResponseParser(tpl, prefix="", dialect="vllm")
    events = p.feed(text) + p.finalize()[1]
    kinds = [(e["type"], e["field"]) for e in events]
    assert kinds == [("region_open", "content"), ("region_chunk", "content"), ("region_close", "content"),
                     ("region_open", "tool_calls"), ("region_chunk", "tool_calls"),
                     ("region_malformed", "tool_calls"),
                     ("region_open", "content"), ("region_chunk", "content"), ("region_close", "content"),
                     ("region_open", "content"), ("region_chunk", "content"), ("region_close", "content")]
    assert p.finalize.__self__ is p and p._core.finished and p._core.output == {"role": "assistant",
                                                                              "content": "a|<c>{bad}</c>|b"}
    bad = events[5]
    assert (bad["start"], bad["end"], bad["recovered"], type(bad["error"])) == (9, 13, "content", ValueError)
    assert list(bad) == ["type", "field", "start", "end", "error", "recovered"]
    assert (events[6]["start"], events[6]["end"], events[7]["text"]) == (1, 1, "<c>{bad}</c>")
    assert (events[8]["start"], events[8]["end"], events[8]["value"]) == (13, 13, "<c>{bad}</c>")
    # the default dialect: the same events without spans
    p = ResponseParser(tpl, prefix="")
    events = p.feed(text) + p.finalize()[1]
    assert [e["type"] for e in events][5:9] == ["region_malformed", "region_open", "region_chunk", "region_close"]
    assert set(events[5]) == {"type", "field", "error", "recovered"}
    # drop: only the event
    p = ResponseParser(template("drop"), prefix="")
    events = p.feed(text)
    assert [e["type"] for e in events][5:] == ["region_malformed", "region_open", "region_chunk"]
    assert p.finalize()[0] == {"role": "assistant", "content": "a|b"}


def test_what_fails_is_recovered_whatever_step_raised_it():
    """A transform whose placeholder is missing, join over a non-string, tool-argument typing, and a required
    field whose only region failed (not missing: the parse goes on)."""
    base = {"defaults": {"role": "assistant"}, "start_anchor": "<A>", "fields": {"content": {}}}
    transform = dict(base, fields={"f": {"open": "<c>", "close": "</c>", "content": "json", "on_error": "content",
                                         "transform": {"n": "{content.name}"}, "optional": False}, "content": {}})
    assert parse_response('<c>{"x": 1}</c>', transform, prefix="") == {"role": "assistant",
                                                                       "content": '<c>{"x": 1}</c>'}
    with pytest.raises(ValueError):  # without on_error
        parse_response('<c>{"x": 1}</c>', {**transform, "fields": {
            "f": {k: v for k, v in transform["fields"]["f"].items() if k != "on_error"}, "content": {}}}, prefix="")
    join = dict(base, fields={"r": {"open": "<r>", "close": "</r>", "content": "int", "repeats": True, "join": ",",
                                    "on_error": "drop"}, "content": {}})
    assert parse_response("<r>1</r><r>x</r><r>3</r>", join, prefix="") == {"role": "assistant"}  # int: join fails
    text = dict(base, fields={"r": {"open": "<r>", "close": "</r>", "repeats": True, "join": ",",
                                    "on_error": "drop"}, "content": {}})
    assert parse_response("<r>1</r><r>x</r>", text, prefix="") == {"role": "assistant", "r": "1,x"}


def test_a_recovered_text_that_fails_in_the_implicit_field_fails_the_region():
    tpl = {"start_anchor": "<A>", "fields": {"f": {"open": "<c>", "close": "</c>", "content": "json",
                                                   "on_error": "content"}, "content": {"content": "json"}}}
    with pytest.raises(ValueError):
        parse_response("[1]<c>{bad}</c>", tpl, prefix="")
    p = ResponseParser(tpl, prefix="", dialect="vllm")
    events = p.feed("[1]<c>{bad}</c>")
    bad = [e for e in events if e["type"] == "region_malformed"]
    assert len(bad) == 1 and "recovered" not in bad[0]


def test_parse_response_in_the_serving_dialect_raises_only_unrecovered_errors():
    tpl = template("drop")
    assert parse_response("<c>{bad}</c>ok", tpl, prefix="", dialect="vllm") == {"role": "assistant",
                                                                                "content": "ok"}
    with pytest.raises(ValueError):
        parse_response("<c>{bad}</c>ok", template(None), prefix="", dialect="vllm")


# ============================================================================================== per token


@pytest.fixture(scope="module")
def tokenizer():
    """A byte-level BPE trained here, with ``<c>`` and ``</c>`` as special tokens (whole-delimiter tokens)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = random.Random(1)
    corpus = ["".join(rng.choice(GOOD + BAD + PROSE + [OPEN, CLOSE]) for _ in range(8)) for _ in range(400)]
    corpus += [c[2] for _, (_, cases, _) in FAMILIES.items() for c in cases]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=500, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[OPEN, CLOSE],
        show_progress=False))
    return tok


@FEW
@given(texts, st.sampled_from(MODES), st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_per_token_parsing_gives_the_text_parsers_events(tokenizer, text, on_error, json_end, vllm, rng):
    from token_support import split_into_bytes

    dialect = "vllm" if vllm else "transformers"
    tpl = template(on_error, json_end)
    binding = chatparse.bind(tpl, tokenizer)
    ids = tokenizer.encode(text).ids
    if rng.random() < 0.5:
        ids = split_into_bytes(tokenizer, ids, rng, 0.3)
    full = tokenizer.decode(ids, skip_special_tokens=False)
    want = _outcome(lambda: _stream(tpl, [full], dialect))

    def tokens(spans=False):
        p = binding.parser(prefix="", dialect=dialect, spans=spans)
        events = list(p.initial_events)
        for i in ids:
            events += p.feed_tokens(int(i))
        msg, final = p.finalize()
        return msg, events + final

    for spans in (False, True):
        got = _outcome(lambda: tokens(spans))
        assert got[0] == want[0], text
        if got[0] == "ok":
            strip = [{k: v for k, v in e.items() if k not in ("open", "span", "token_start", "token_end")}
                     for e in got[2]]
            assert strict_equal(got[1], want[1]) and normalize(strip) == normalize(want[2])
    if want[0] == "ok":  # TokenStreams: this stream and an empty one stepped together
        import numpy as np

        s = chatparse.TokenStreams(binding, 2, prefix="", dialect=dialect)
        for i in ids:
            s.step(np.array([i, 0]), np.array([True, False]))
        assert strict_equal(s.finalize(0)[0], want[1])


# ============================================================================================== families


def _recovery_cases():
    for name, cases in RECOVERY_CASES.items():
        for case, prefix, output, tools, message in cases:
            yield pytest.param(name, prefix, output, tools, message, id=f"{name}-{case}")


@pytest.mark.parametrize("name, prefix, output, tools, message", list(_recovery_cases()))
def test_malformed_family_outputs_are_kept_as_content(name, prefix, output, tools, message, tokenizer):
    """A family template with ``"on_error": "content"`` on its tool calls: the malformed call comes back as
    content text - what vLLM's and SGLang's tool parsers return for these outputs - one-shot, streamed, per
    token, in both dialects."""
    tpl = json.loads(json.dumps(FAMILIES[name][0]))
    tpl["fields"]["tool_calls"]["on_error"] = "content"
    for dialect in ("transformers", "vllm"):
        got = parse_response(output, tpl, prefix=prefix, tools=tools, dialect=dialect)
        assert strict_equal(got, message), (dialect, show(got))
        for k in (1, 5):
            p = ResponseParser(tpl, prefix=prefix, tools=tools, dialect=dialect)
            for i in range(0, len(output), k):
                p.feed(output[i:i + k])
            assert strict_equal(p.finalize()[0], message), (dialect, k)
        p = chatparse.bind(tpl, tokenizer).parser(prefix=prefix, tools=tools, dialect=dialect)
        for i in tokenizer.encode(output).ids:
            p.feed_tokens(i)
        assert strict_equal(p.finalize()[0], message), (dialect, "tokens")


# ============================================================================================== the format


def test_the_key_is_validated_and_listed():
    spec = load_template(template("content"))
    assert spec["version"] == 2 and spec["extensions"] == ["on_error"] and spec["fields"][0]["on_error"] == "content"
    assert load_template(template("raise")) == load_template(template(None))  # the default: not a use
    with pytest.raises(ValueError, match="Field 'tool_calls': 'on_error' must be \"content\", \"drop\" or \"raise\""):
        load_template(template("keep"))
    with pytest.raises(ValueError, match="'on_error' must be"):
        load_template(template(True))
    t = template("content")
    t["fields"]["content"]["on_error"] = "content"
    with pytest.raises(ValueError, match="Field 'content': 'on_error': 'content' cannot be set on the implicit"):
        load_template(t)
    t["fields"]["content"]["on_error"] = "drop"
    assert load_template(t)["fields"][1]["on_error"] == "drop"
    no_implicit = {"start_anchor": "<A>", "fields": {"f": {"open": "<c>", "close": "</c>", "on_error": "content"}}}
    with pytest.raises(ValueError, match="Field 'f': 'on_error': 'content' needs an implicit field"):
        load_template(no_implicit)
    no_implicit["fields"]["f"]["on_error"] = "drop"
    assert parse_response("<c>x</c>", no_implicit, prefix="") == {"f": "x"}


@pytest.mark.parametrize("mode", ["content", "drop"])
def test_the_reference_refuses_the_key(mode):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    with pytest.raises(ValueError, match="unknown keys"):
        Reference(template(mode), prefix="")


def test_a_reader_without_the_extension_refuses_its_tables(monkeypatch):
    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import compiled_from_bytes, loads

    data = dumps(compile_template(template("content")).raw_tables)
    assert parse_response("<c>x</c>", compiled_from_bytes(data), prefix="") == {"role": "assistant",
                                                                                 "content": "<c>x</c>"}
    monkeypatch.delitem(extensions.EXTENSIONS, "on_error")
    with pytest.raises(ValueError, match="table uses format extension .on_error., which this reader does not"):
        loads(data)


def test_grammar_export_refuses_and_check_does_not_crash():
    from chatparse.authoring.checks import run_checks

    compiled = compile_template(template("content"))
    with pytest.raises(ValueError, match="grammar export is not supported for format extension 'on_error'"):
        compiled.grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    run_checks(template("content"))


def test_the_readme_example_runs_as_written_and_the_extension_is_documented():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    printed, shown = readme_example("A malformed call kept as content")
    assert printed == shown
    readme = (root / "docs" / "format.md").read_text(encoding="utf-8")
    assert "* `on_error`" in readme
    assert "#### `on_error`" in (root / "FORMAT.md").read_text(encoding="utf-8")
    assert "  on_error: {" in (root / "js" / "chatparse.mjs").read_text(encoding="utf-8")


def test_a_recovered_region_opened_in_the_prompt():
    """The prompt ends inside a call that then fails: the value holds the whole raw text; in the serving
    dialect (no prompt chunks) the recovered chunk leaves out the prompt's characters, in the default it has
    them all."""
    tpl = template("content")
    for dialect, chunk in (("vllm", "{bad}</c>"), ("transformers", "<c>{bad}</c>")):
        p = ResponseParser(tpl, prefix="<A>a<c>", dialect=dialect)
        events = p.initial_events + p.feed("{bad}</c>b") + p.finalize()[1]
        recovered = [e for e in events if e["type"] == "region_chunk" and e["field"] == "content" and "{" in e["text"]]
        assert [e["text"] for e in recovered] == [chunk], dialect
        assert p._core.output["content"] == "a|<c>{bad}</c>|b"
